/*
 * topo/ring.c - a ring through every host (Hamiltonian cycle), found fast (not
 * coll/ring/ring.c, the ring backend of libmeshrun).
 *
 * MLX (extract_rings() in python/mlx/_distributed_utils/config.py) enumerates
 * every simple cycle from every start and keeps the longest; the first full
 * ring it meets is the one a DFS from host 0, trying neighbours in index order,
 * reaches first. We walk the same order, so we return the same ring, but we cut
 * every branch that provably cannot close into a full ring:
 *   - before searching: a host with fewer than 2 cabled neighbours, or a
 *     cabling that falls apart into separate groups, means no ring at all;
 *   - after each step: every unvisited host must keep 2 usable neighbours
 *     (unvisited ones or the two path ends), and the unvisited hosts must stay
 *     connected among themselves and reachable from the path's head and from
 *     host 0 (the rest of the ring is one path through all of them).
 * Both cuts are necessary conditions, so no ring is ever lost and the first one
 * found is still MLX's. The work bound guards against adversarial graphs where
 * even the pruned search is exponential; then one retry tries neighbours with
 * the fewest remaining options first (Warnsdorff's rule), which finds a valid
 * ring quickly on the cablings seen in practice.
 */
#include "common/compat.h"

#include "common/buf.h"
#include "common/err.h"
#include "topo/topo.h"

#define DEFAULT_MAX_STEPS 2000000UL

struct search {
	size_t n;
	size_t **adj;  /* adj[v]: neighbours of v in index order */
	size_t *deg;
	bool *visited;
	size_t *path;
	size_t depth;
	size_t *queue; /* BFS scratch */
	bool *seen;    /* BFS scratch */
	unsigned long steps, max_steps;
	bool warnsdorff;
	bool gave_up;
};

void mr_topo_ring_release(struct mr_topo_ring *r)
{
	MR_FREE(r->order);
	r->n = 0;
	r->cables = 0;
}

/* The cut checks after path[depth-1] became the head. */
static bool feasible(struct search *s)
{
	size_t head = s->path[s->depth - 1], start = s->path[0];
	size_t left = s->n - s->depth, qh = 0, qt = 0, first = SIZE_MAX;
	bool head_ok = false, start_ok = false;

	if (left == 0)
		return true;
	for (size_t v = 0; v < s->n; v++) {
		size_t usable = 0;

		if (s->visited[v])
			continue;
		if (first == SIZE_MAX)
			first = v;
		for (size_t k = 0; k < s->deg[v] && usable < 2; k++) {
			size_t u = s->adj[v][k];

			if (!s->visited[u] || u == head || u == start)
				usable++;
		}
		if (usable < 2)
			return false;
		s->seen[v] = false;
	}
	/* Unvisited hosts connected among themselves? */
	s->queue[qt++] = first;
	s->seen[first] = true;
	while (qh < qt) {
		size_t v = s->queue[qh++];

		for (size_t k = 0; k < s->deg[v]; k++) {
			size_t u = s->adj[v][k];

			if (u == head)
				head_ok = true;
			if (u == start)
				start_ok = true;
			if (!s->visited[u] && !s->seen[u]) {
				s->seen[u] = true;
				s->queue[qt++] = u;
			}
		}
	}
	return qt == left && head_ok && start_ok;
}

static bool adjacent(const struct search *s, size_t a, size_t b)
{
	/* adj lists are sorted: binary search */
	size_t lo = 0, hi = s->deg[a];

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->adj[a][mid] == b)
			return true;
		if (s->adj[a][mid] < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static size_t onward(const struct search *s, size_t v)
{
	size_t c = 0;

	for (size_t k = 0; k < s->deg[v]; k++)
		if (!s->visited[s->adj[v][k]])
			c++;
	return c;
}

static bool dfs(struct search *s)
{
	size_t head = s->path[s->depth - 1];
	size_t order[64], *cand = order, ncand = 0;
	bool found = false;

	if (s->depth == s->n)
		return adjacent(s, head, s->path[0]);
	if (++s->steps > s->max_steps) {
		s->gave_up = true;
		return false;
	}
	if (s->deg[head] > ARRAY_SIZE(order)) {
		cand = malloc(s->deg[head] * sizeof(*cand));
		if (!cand) {
			s->gave_up = true;
			return false;
		}
	}
	for (size_t k = 0; k < s->deg[head]; k++)
		if (!s->visited[s->adj[head][k]])
			cand[ncand++] = s->adj[head][k];
	if (s->warnsdorff) {
		/* fewest onward options first; ties keep index order (insertion sort) */
		for (size_t i = 1; i < ncand; i++) {
			size_t v = cand[i], ov = onward(s, v), j = i;

			while (j > 0 && onward(s, cand[j - 1]) > ov) {
				cand[j] = cand[j - 1];
				j--;
			}
			cand[j] = v;
		}
	}
	for (size_t i = 0; i < ncand && !found && !s->gave_up; i++) {
		size_t u = cand[i];

		s->visited[u] = true;
		s->path[s->depth++] = u;
		if (feasible(s) && dfs(s)) {
			found = true;
			break;
		}
		s->depth--;
		s->visited[u] = false;
	}
	if (cand != order)
		free(cand);
	return found;
}

static void search_free(struct search *s)
{
	if (s->adj)
		for (size_t i = 0; i < s->n; i++)
			free(s->adj[i]);
	free(s->adj);
	free(s->deg);
	free(s->visited);
	free(s->path);
	free(s->queue);
	free(s->seen);
}

static int list_hosts(struct mr_buf *b, const struct mr_topo_cluster *c, const bool *pick, bool want)
{
	bool first = true;

	for (size_t i = 0; i < c->nhosts; i++) {
		if (pick[i] != want)
			continue;
		if (mr_buf_printf(b, "%s%s", first ? "" : ", ", c->hosts[i].name) < 0)
			return -1;
		first = false;
	}
	return 0;
}

static int run_search(struct search *s, bool warnsdorff, unsigned long max_steps)
{
	memset(s->visited, 0, s->n * sizeof(*s->visited));
	s->warnsdorff = warnsdorff;
	s->gave_up = false;
	s->steps = 0;
	s->max_steps = max_steps;
	s->depth = 1;
	s->path[0] = 0;
	s->visited[0] = true;
	return (feasible(s) && dfs(s)) ? 1 : 0;
}

int mr_topo_find_ring(const struct mr_topo_cluster *c, unsigned long max_steps,
		      struct mr_topo_ring *out, struct meshrun_err *err)
{
	struct search s = { 0 };
	struct mr_buf b = MR_BUF_INIT;
	size_t n = c->nhosts;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!max_steps)
		max_steps = DEFAULT_MAX_STEPS;
	if (!c->finished)
		return mr_err_set(err, MESHRUN_E_INVAL, "cluster not finished");
	if (n < 2)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "no ring: a ring needs at least 2 hosts");
	if (n == 2) {
		if (!mr_topo_conn(c, 0, 1))
			return mr_err_set(err, MESHRUN_E_NOTFOUND,
					  "no ring: %s and %s are not cabled to each other",
					  c->hosts[0].name, c->hosts[1].name);
		out->order = calloc(2, sizeof(*out->order));
		if (!out->order)
			return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
		out->order[1] = 1;
		out->n = 2;
		out->cables = mr_topo_conn(c, 0, 1);
		return 0;
	}

	s.n = n;
	s.adj = calloc(n, sizeof(*s.adj));
	s.deg = calloc(n, sizeof(*s.deg));
	s.visited = calloc(n, sizeof(*s.visited));
	s.path = calloc(n, sizeof(*s.path));
	s.queue = calloc(n, sizeof(*s.queue));
	s.seen = calloc(n, sizeof(*s.seen));
	if (!s.adj || !s.deg || !s.visited || !s.path || !s.queue || !s.seen)
		goto out_nomem;
	for (size_t i = 0; i < n; i++) {
		s.adj[i] = calloc(n, sizeof(**s.adj));
		if (!s.adj[i])
			goto out_nomem;
		for (size_t j = 0; j < n; j++)
			if (j != i && mr_topo_conn(c, i, j))
				s.adj[i][s.deg[i]++] = j;
	}

	/* Degree check. */
	{
		bool any = false;

		for (size_t i = 0; i < n; i++) {
			s.seen[i] = s.deg[i] < 2;
			any |= s.seen[i];
		}
		if (any) {
			if (list_hosts(&b, c, s.seen, true) < 0)
				goto out_nomem;
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
					"no ring: these hosts have fewer than 2 cabled neighbours: %s",
					mr_buf_cstr(&b));
			goto out;
		}
	}
	/* Connectivity check from host 0. */
	{
		size_t qh = 0, qt = 0;

		memset(s.seen, 0, n * sizeof(*s.seen));
		s.queue[qt++] = 0;
		s.seen[0] = true;
		while (qh < qt) {
			size_t v = s.queue[qh++];

			for (size_t k = 0; k < s.deg[v]; k++)
				if (!s.seen[s.adj[v][k]]) {
					s.seen[s.adj[v][k]] = true;
					s.queue[qt++] = s.adj[v][k];
				}
		}
		if (qt < n) {
			if (mr_buf_puts(&b, "") < 0 || list_hosts(&b, c, s.seen, true) < 0 ||
			    mr_buf_puts(&b, " | ") < 0 || list_hosts(&b, c, s.seen, false) < 0)
				goto out_nomem;
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
					"no ring: the cabling falls apart: %s are not cabled to the others",
					mr_buf_cstr(&b));
			goto out;
		}
	}

	if (!run_search(&s, false, max_steps) && !(s.gave_up && run_search(&s, true, max_steps))) {
		if (s.gave_up)
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
					"no ring found through all %zu hosts: search stopped after %lu steps (try --dot to see the cabling)",
					n, max_steps);
		else
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
					"no ring found through all %zu hosts: every host has 2 cabled neighbours, but no closed path visits them all (try --dot to see the cabling)",
					n);
		goto out;
	}
	out->order = s.path;
	s.path = NULL;
	out->n = n;
	out->cables = UINT32_MAX;
	for (size_t i = 0; i < n; i++) {
		unsigned k = mr_topo_conn(c, out->order[i], out->order[(i + 1) % n]);

		out->cables = MR_MIN(out->cables, k);
	}
	goto out;
out_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
out:
	mr_buf_release(&b);
	search_free(&s);
	return rc;
}
