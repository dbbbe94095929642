/*
 * comm.c - split communicators and the gather-and-fold all-reduce (comm.h).
 */
#include "common/compat.h"
#include "mpishim/comm.h"

/* Record the first error only, as libmeshrun's sink does. */
MR_PRINTF(3, 4)
static int set_err(struct meshrun_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err || err->code)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

static int nomem(struct meshrun_err *err, size_t bytes)
{
	return set_err(err, MESHRUN_E_NOMEM, "out of memory (%zu bytes)", bytes);
}

/*
 * The world's all-gather, or one over point-to-point messages for a split.
 * A send may wait for its receiver: jaccl's does once the peer's posted
 * receive buffers are full (about 1 MiB), unlike the ring's, whose progress
 * thread takes messages into a mailbox. So every rank visits its pairs in one
 * global order, (0,1), (0,2), ..., (0,n-1), (1,2), ..., the lower member of a
 * pair sending first: the first pair not yet done always has both members at
 * it, so the exchange cannot deadlock.
 */
int mrmpi_comm_allgather(struct mrmpi_comm *c, const void *send, void *recv, size_t bytes,
			 struct meshrun_err *err)
{
	char *r = recv;
	int rc;

	if (!c->members)
		return meshrun_all_gather(c->g, send, recv, bytes, MESHRUN_UINT8, err);
	memmove(r + (size_t)c->rank * bytes, send, bytes);
	send = r + (size_t)c->rank * bytes;
	if (!bytes)
		return 0;
	for (int p = 0; p < c->size; p++) {
		if (p == c->rank)
			continue;
		int w = c->members[p];
		if (p > c->rank) {
			rc = meshrun_send(c->g, send, bytes, MESHRUN_UINT8, w, err);
			if (rc == 0)
				rc = meshrun_recv(c->g, r + (size_t)p * bytes, bytes, MESHRUN_UINT8, w, err);
		} else {
			rc = meshrun_recv(c->g, r + (size_t)p * bytes, bytes, MESHRUN_UINT8, w, err);
			if (rc == 0)
				rc = meshrun_send(c->g, send, bytes, MESHRUN_UINT8, w, err);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

int mrmpi_comm_allreduce(struct mrmpi_comm *c, const void *send, void *recv, size_t bytes,
			 const struct mrmpi_fold *f, struct meshrun_err *err)
{
	char *all;
	int rc;

	if (c->size == 1) {
		memmove(recv, send, bytes);
		return 0;
	}
	if (bytes > SIZE_MAX / (size_t)c->size)
		return set_err(err, MESHRUN_E_INVAL, "%zu bytes times %d ranks overflow size_t", bytes, c->size);
	all = malloc(bytes * (size_t)c->size + 1);
	if (!all)
		return nomem(err, bytes * (size_t)c->size);
	if ((rc = mrmpi_comm_allgather(c, send, all, bytes, err)) < 0)
		goto out_free;
	/* fold in rank order from the last: recv = x0 op (x1 op (... op xn-1)) */
	memcpy(recv, all + (size_t)(c->size - 1) * bytes, bytes);
	for (int k = c->size - 2; k >= 0; k--) {
		void *in = all + (size_t)k * bytes;
		if (f->call) {
			int len = f->count;
			void *type = f->type;
			f->fn(in, recv, &len, &type);
		} else {
			mr_reduce(f->op, f->dt, recv, in, f->n);
		}
	}
out_free:
	free(all);
	return rc;
}

struct member {
	int color, key, rank;
};

static int by_key(const void *a, const void *b)
{
	const struct member *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

int mrmpi_comm_split(struct mrmpi_comm *c, int color, int key, struct mrmpi_comm **out,
		     struct meshrun_err *err)
{
	int mine[2] = { color, key };
	int *all = calloc((size_t)c->size, sizeof(mine));
	struct member *m = calloc((size_t)c->size, sizeof(*m));
	struct mrmpi_comm *nc = calloc(1, sizeof(*nc));
	int rc, n = 0;

	if (!all || !m || !nc) {
		rc = nomem(err, (size_t)c->size * sizeof(*m));
		goto out;
	}
	if ((rc = mrmpi_comm_allgather(c, mine, all, sizeof(mine), err)) < 0) {
		goto out;
	}
	for (int j = 0; j < c->size; j++)
		if (all[2 * j] == color)
			m[n++] = (struct member){ color, all[2 * j + 1], j };
	qsort(m, (size_t)n, sizeof(*m), by_key);
	nc->magic = MRMPI_COMM;
	nc->g = c->g;
	nc->size = n;
	bool world_order = n == meshrun_size(c->g);
	for (int i = 0; i < n; i++) {
		int w = c->members ? c->members[m[i].rank] : m[i].rank;
		if (m[i].rank == c->rank)
			nc->rank = i;
		world_order = world_order && w == i;
		m[i].rank = w; /* from here: world ranks */
	}
	if (!world_order) { /* else: the world's group does the collectives itself */
		nc->members = malloc((size_t)n * sizeof(int));
		if (!nc->members) {
			rc = nomem(err, (size_t)n * sizeof(int));
			goto out;
		}
		for (int i = 0; i < n; i++)
			nc->members[i] = m[i].rank;
	}
	*out = nc;
	nc = NULL;
	rc = 0;
out:
	free(nc);
	free(m);
	free(all);
	return rc;
}
