/*
 * doctor_checks.c - the verdicts of `meshconfig doctor` from the facts of every
 * host (doctor_facts.c) and the hostfile: pure, no I/O, so the unit tests feed
 * it recorded outputs.
 *
 * Rules that keep one fault in one cell: a host that cannot be reached has
 * every other cell "-" and its peers are not blamed for it; a problem of a
 * cable is put on the end that has it (the end without an address, the end
 * inside bridge0, the end whose MTU differs from the cluster's most common
 * one), and on both ends only where neither can be picked; what needs a
 * working address (the ping, the job's connects to it) is not tried where
 * the address is missing, so the cables column alone names it.
 *
 * The cables and rdma columns are in doctor_cables.c (dr_check_cables,
 * dr_check_rdma, called from dr_check_facts below).
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "config/doctor_impl.h"
#include "launch/env.h"

#include <stdarg.h>

const char *const dr_check_names[DR_NCHECK] = {
	"reach", "software", "cables", "rdma", "path", "housekeeping",
};

void dr_cell(struct doctor *d, size_t host, enum dr_check check, enum dr_status st)
{
	if (d->hosts[host].st[check] < st)
		d->hosts[host].st[check] = st;
}

void dr_find(struct doctor *d, size_t host, enum dr_check check, enum dr_status st,
	     const char *code, const char *fix, const char *fmt, ...)
{
	struct dr_finding *f;
	struct mr_buf b = MR_BUF_INIT;
	va_list ap;

	if (d->nfinds == d->afinds) {
		d->afinds = d->afinds ? 2 * d->afinds : 16;
		d->finds = xreallocarray(d->finds, d->afinds, sizeof(*d->finds));
	}
	va_start(ap, fmt);
	mr_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	f = &d->finds[d->nfinds++];
	f->host = host;
	f->check = check;
	f->status = st;
	f->code = code;
	f->what = mr_buf_detach(&b, NULL);
	if (!f->what)
		f->what = xstrdup("");
	f->fix = fix ? xstrdup(fix) : NULL;
	dr_cell(d, host, check, st);
}

bool dr_have(const struct doctor *d, size_t h)
{
	return d->hosts[h].reached && d->hosts[h].f.ok;
}

bool dr_is_darwin(const struct dr_facts *f)
{
	return !strcmp(f->os, "Darwin");
}

/* ---- the job ------------------------------------------------------------------ */

int dr_job_setup(struct doctor *d, struct meshrun_err *err)
{
	const char *name = d->o->backend;
	const char *gid;

	if (!name && d->hf->backend && d->hf->backend[0])
		name = d->hf->backend;
	if (!name)
		name = "ring";
	if (mr_backend_parse(name) < 0)
		return mr_err_set(err, MESHRUN_E_USAGE, "%s%s%s: unknown backend '%s'",
				  d->o->backend ? "--backend" : "--hostfile '", d->o->backend ? "" : d->o->hostfile,
				  d->o->backend ? "" : "'", name);
	snprintf(d->backend, sizeof(d->backend), "%s", name);
	d->want_rdma = !strcmp(name, "jaccl") || !strcmp(name, "jaccl-ring");
	/* as a rank sees it: --env after the hostfile's envs */
	gid = mr_strvec_getenv(&d->o->envs, "MESHRUN_IB_GID_INDEX");
	if (!gid)
		gid = mr_strvec_getenv(&d->hf->envs, "MESHRUN_IB_GID_INDEX");
	d->gid_index = gid && *gid ? gid : NULL;
	return 0;
}

/* ---- reach ---------------------------------------------------------------------- */

static void check_reach(struct doctor *d)
{
	for (size_t h = 0; h < d->nhosts; h++) {
		struct dr_host *H = &d->hosts[h];

		if (!H->reached) {
			dr_find(d, h, DR_REACH, DR_FAIL, "unreachable", H->reach_hint, "%s", H->reach_err);
			continue;
		}
		dr_cell(d, h, DR_REACH, DR_OK);
		if (!H->f.ok)
			dr_find(d, h, DR_REACH, DR_FAIL, "facts", NULL,
				"the check script did not run to its end: %s", H->reach_err);
		else if (H->connect_ms > DR_SLOW_CONNECT_MS)
			dr_find(d, h, DR_REACH, DR_WARN, "slow-connect",
				"see ssh -v; a ControlMaster or `meshconfig --persist 10m` keeps connections",
				"%.1f s to connect and run a command (meshrun pays it per host)",
				(double)H->connect_ms / 1000.0);
	}
}

/* ---- software --------------------------------------------------------------------- */

typedef void (*dr_get_fn)(const struct dr_facts *f, char *out, size_t n);

/* The value most hosts have, into out: "" when none has one, or when two
 * values are as common (then no host is the odd one). */
static void mode_of(const struct doctor *d, dr_get_fn get, char *out, size_t n)
{
	size_t nbest = 0;
	bool tie = false;

	out[0] = '\0';
	for (size_t i = 0; i < d->nhosts; i++) {
		char v[96], w[96];
		size_t cnt = 0;

		if (!dr_have(d, i))
			continue;
		get(&d->hosts[i].f, v, sizeof(v));
		if (!v[0])
			continue;
		for (size_t k = 0; k < d->nhosts; k++) {
			if (!dr_have(d, k))
				continue;
			get(&d->hosts[k].f, w, sizeof(w));
			cnt += !strcmp(v, w);
		}
		if (cnt > nbest) {
			nbest = cnt;
			tie = false;
			snprintf(out, n, "%s", v);
		} else if (cnt == nbest && strcmp(v, out)) {
			tie = true;
		}
	}
	if (tie)
		out[0] = '\0';
}

/* Where the hosts disagree on get: the value to name for host h (the most
 * common one, or on a tie another host's), into want; false when h agrees. */
static bool differs(const struct doctor *d, size_t h, dr_get_fn get, const char *mode, char *want,
		    size_t n)
{
	char v[96], w[96];

	get(&d->hosts[h].f, v, sizeof(v));
	if (!v[0])
		return false;
	if (mode[0]) {
		snprintf(want, n, "%s", mode);
		return strcmp(v, mode) != 0;
	}
	for (size_t k = 0; k < d->nhosts; k++) {
		if (k == h || !dr_have(d, k))
			continue;
		get(&d->hosts[k].f, w, sizeof(w));
		if (w[0] && strcmp(v, w)) {
			snprintf(want, n, "%s", w);
			return true;
		}
	}
	return false;
}

static void get_macos(const struct dr_facts *f, char *out, size_t n)
{
	if (f->macos[0])
		snprintf(out, n, "%.40s (%.40s)", f->macos, f->build);
	else
		out[0] = '\0';
}

static void get_meshrun(const struct dr_facts *f, char *out, size_t n) { snprintf(out, n, "%s", f->meshrun_version); }
static void get_python(const struct dr_facts *f, char *out, size_t n) { snprintf(out, n, "%s", f->python_version); }
static void get_mlx(const struct dr_facts *f, char *out, size_t n) { snprintf(out, n, "%s", f->mlx_version); }

/* "26.2" >= "26.3"? (major.minor[.patch], numerically). */
static int version_cmp(const char *a, const char *b)
{
	for (;;) {
		char *ea, *eb;
		long x = strtol(a, &ea, 10), y = strtol(b, &eb, 10);

		if (x != y)
			return x < y ? -1 : 1;
		if (*ea != '.' && *eb != '.')
			return 0;
		a = *ea == '.' ? ea + 1 : "0";
		b = *eb == '.' ? eb + 1 : "0";
	}
}

static void check_software(struct doctor *d)
{
	char mac[96], mr[96], py[96], mlx[96];

	mode_of(d, get_macos, mac, sizeof(mac));
	mode_of(d, get_meshrun, mr, sizeof(mr));
	mode_of(d, get_python, py, sizeof(py));
	mode_of(d, get_mlx, mlx, sizeof(mlx));
	for (size_t h = 0; h < d->nhosts; h++) {
		const struct dr_facts *f = &d->hosts[h].f;
		char fix[256], v[96], want[96];

		if (!dr_have(d, h))
			continue;
		dr_cell(d, h, DR_SOFTWARE, DR_OK);
		if (dr_is_darwin(f) && differs(d, h, get_macos, mac, want, sizeof(want))) {
			get_macos(f, v, sizeof(v));
			snprintf(fix, sizeof(fix),
				 "install macOS %s on %s (System Settings > General > Software Update), or the same build everywhere",
				 want, d->hosts[h].name);
			dr_find(d, h, DR_SOFTWARE, DR_FAIL, "macos-differs", fix,
				"macOS %s, but %s %s (RDMA and MLX need the same build everywhere)", v,
				mac[0] ? "the other hosts run" : "another host runs", want);
		}
		if (dr_is_darwin(f) && f->macos[0] && d->want_rdma && version_cmp(f->macos, "26.2") < 0)
			dr_find(d, h, DR_SOFTWARE, DR_FAIL, "macos-rdma",
				"update macOS to 26.2 or later (Software Update)",
				"macOS %s has no RDMA over Thunderbolt (it needs 26.2)", f->macos);
		else if (dr_is_darwin(f) && f->macos[0] && d->want_rdma && version_cmp(f->macos, "26.3") < 0)
			dr_find(d, h, DR_SOFTWARE, DR_WARN, "macos-rdma-small",
				"update macOS to 26.3 or later (Software Update)",
				"before macOS 26.3 JACCL sends at most 4 KiB per RDMA message (slower)");
		if (!f->meshrun_version[0])
			dr_find(d, h, DR_SOFTWARE, DR_WARN, "no-meshrun",
				"install meshrun there, on the PATH of ssh sessions (/usr/bin:/bin:/usr/sbin:/sbin on a Mac) or at the same path as here",
				"meshrun is not found where an ssh session looks%s", f->meshrun[0] ? " (it does not run)" : "");
		else if (differs(d, h, get_meshrun, mr, want, sizeof(want)))
			dr_find(d, h, DR_SOFTWARE, DR_FAIL, "meshrun-differs", "install the same meshrun everywhere",
				"%s, but %s has %s", f->meshrun_version, mr[0] ? "the others" : "another host", want);
		if (!d->o->python)
			continue;
		if (!f->python_version[0]) {
			snprintf(fix, sizeof(fix), "install Python there, or give --python the path it has on %s",
				 d->hosts[h].name);
			dr_find(d, h, DR_SOFTWARE, DR_FAIL, "no-python", fix, "--python %s does not run: %s",
				d->o->python, f->python_err[0] ? f->python_err : "no output");
			continue;
		}
		if (differs(d, h, get_python, py, want, sizeof(want)))
			dr_find(d, h, DR_SOFTWARE, DR_FAIL, "python-differs", "use the same Python everywhere",
				"Python %s, but %s has %s", f->python_version, py[0] ? "the others" : "another host", want);
		if (!f->mlx_version[0])
			dr_find(d, h, DR_SOFTWARE, DR_FAIL, "no-mlx", "pip install mlx (into that Python)",
				"MLX does not import in %s: %s", d->o->python,
				f->python_err[0] ? f->python_err : "no output");
		else if (differs(d, h, get_mlx, mlx, want, sizeof(want)))
			dr_find(d, h, DR_SOFTWARE, DR_FAIL, "mlx-differs", "install the same MLX everywhere",
				"MLX %s, but %s has %s", f->mlx_version, mlx[0] ? "the others" : "another host", want);
	}
}

/* ---- housekeeping ------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Clock: `date +%s` ran between wall_lo and wall_hi (our clock) and printed
 * whole seconds, so the host's offset from us lies in
 * [s*1000 - wall_hi, s*1000 + 999 - wall_lo]. A host fails when that whole
 * interval is more than DR_CLOCK_SKEW_MS from the median of the middles.
 */
static void check_clock(struct doctor *d)
{
	int64_t *mid = xcalloc(d->nhosts ? d->nhosts : 1, sizeof(*mid)), ref;
	size_t n = 0;

	for (size_t h = 0; h < d->nhosts; h++) {
		const struct dr_host *H = &d->hosts[h];
		if (dr_have(d, h) && H->clock_known)
			mid[n++] = (H->clock_s * 1000 - H->wall_hi_ms + H->clock_s * 1000 + 999 - H->wall_lo_ms) / 2;
	}
	if (n < 2) {
		free(mid);
		return;
	}
	qsort(mid, n, sizeof(*mid), cmp_i64);
	ref = mid[n / 2];
	free(mid);
	for (size_t h = 0; h < d->nhosts; h++) {
		const struct dr_host *H = &d->hosts[h];
		int64_t lo, hi, off;

		if (!dr_have(d, h) || !H->clock_known)
			continue;
		lo = H->clock_s * 1000 - H->wall_hi_ms - ref;
		hi = H->clock_s * 1000 + 999 - H->wall_lo_ms - ref;
		if (lo <= DR_CLOCK_SKEW_MS && hi >= -DR_CLOCK_SKEW_MS)
			continue;
		off = lo > 0 ? lo : -hi;
		dr_find(d, h, DR_HOUSE, DR_FAIL, "clock-skew",
			"sudo sntp -sS time.apple.com (or System Settings > General > Date & Time: set automatically)",
			"its clock is at least %.1f s %s the other hosts'", (double)off / 1000.0,
			lo > 0 ? "ahead of" : "behind");
	}
}

static void check_house(struct doctor *d)
{
	check_clock(d);
	for (size_t h = 0; h < d->nhosts; h++) {
		const struct dr_facts *f = &d->hosts[h].f;
		char fix[1024];

		if (!dr_have(d, h))
			continue;
		dr_cell(d, h, DR_HOUSE, DR_OK);
		if (f->avail_kb >= 0 && f->avail_kb < DR_DISK_WARN_KB) {
			snprintf(fix, sizeof(fix), "free space on %s's %s (the filesystem of %.600s, where meshrun writes job files)",
				 d->hosts[h].name, f->fs[0] ? f->fs : "disk", f->tmpdir);
			dr_find(d, h, DR_HOUSE, f->avail_kb < DR_DISK_FAIL_KB ? DR_FAIL : DR_WARN,
				f->avail_kb < DR_DISK_FAIL_KB ? "disk-full" : "disk-low", fix,
				"%lld KiB free in %s%s", (long long)f->avail_kb, f->tmpdir,
				f->avail_kb < DR_DISK_FAIL_KB ? ": a job cannot write its files there" : "");
		}
		if (f->stale_dirs.nr) {
			struct mr_buf b = MR_BUF_INIT;
			mr_buf_puts(&b, "rm -rf");
			for (size_t i = 0; i < f->stale_dirs.nr && b.len < 700; i++) {
				char p[1100];
				snprintf(p, sizeof(p), "%s/%s", f->tmpdir, f->stale_dirs.v[i]);
				mr_buf_putc(&b, ' ');
				mr_shquote(&b, p);
			}
			mr_buf_puts(&b, "   (meshrun's next job there removes them too)");
			dr_find(d, h, DR_HOUSE, DR_WARN, "stale-jobdir", mr_buf_cstr(&b),
				"%zu job director%s left by a dead run in %s (%s%s)", f->stale_dirs.nr,
				f->stale_dirs.nr == 1 ? "y" : "ies", f->tmpdir, f->stale_dirs.v[0],
				f->stale_dirs.nr > 1 ? ", ..." : "");
			mr_buf_release(&b);
		}
		if (f->live_dirs.nr)
			dr_find(d, h, DR_HOUSE, DR_WARN, "job-running", NULL,
				"a meshrun job runs there now (%s): its ranks hold their ports and queue pairs",
				f->live_dirs.v[0]);
	}
}

void dr_check_facts(struct doctor *d)
{
	check_reach(d);
	check_software(d);
	dr_check_cables(d);
	dr_check_rdma(d);
	check_house(d);
}

/* ---- results of the path phase ------------------------------------------------------ */

void dr_check_pings(struct doctor *d)
{
	for (size_t i = 0; i < d->npings; i++) {
		const struct dr_ping *p = &d->pings[i];
		char fix[256];

		if (p->result != 1)
			continue;
		snprintf(fix, sizeof(fix), "check the cable %s:%s - %s:%s (ifconfig %s on both ends)",
			 d->hosts[p->host].name, p->ifname, d->hosts[p->peer].name, p->peer_if, p->ifname);
		dr_find(d, p->host, DR_CABLES, DR_FAIL, "ping", fix,
			"no answer from %s's %s (%s) to a ping through %s", d->hosts[p->peer].name, p->peer_if,
			p->peer_ip, p->ifname);
	}
}

/* "m2, m3" of the connects to ep that failed with err (at most 6 names). */
static void who(const struct doctor *d, size_t ep, const char *err, char *out, size_t n)
{
	size_t k = 0;

	out[0] = '\0';
	for (size_t i = 0; i < d->nconns; i++) {
		const struct dr_conn *c = &d->conns[i];
		if (c->ep != ep || !c->tried || strcmp(c->err, err))
			continue;
		if (k++ < 6)
			snprintf(out + strlen(out), n - strlen(out), "%s%s", k > 1 ? ", " : "",
				 d->hosts[c->from].name);
	}
	if (k > 6)
		snprintf(out + strlen(out), n - strlen(out), " and %zu more", k - 6);
}

void dr_check_path(struct doctor *d)
{
	if (d->path_note[0])
		return;
	/* a host without the probe: its side of the path is not tried */
	for (size_t h = 0; h < d->nhosts; h++) {
		bool part = false;

		for (size_t i = 0; i < d->neps; i++)
			part |= d->eps[i].host == h && !d->eps[i].skip;
		for (size_t i = 0; i < d->nconns; i++)
			part |= d->conns[i].from == h;
		if (part && dr_have(d, h) && !d->hosts[h].f.probe[0])
			dr_find(d, h, DR_PATH, DR_WARN, "no-probe",
				"install meshrun there (meshconfig with it) at the same path as here, or on the PATH of ssh sessions",
				"meshconfig is not found there: the job's connections to and from it were not tried");
	}
	for (size_t i = 0; i < d->neps; i++) {
		const struct dr_ep *e = &d->eps[i];
		char fix[512];

		if (e->skip)
			continue; /* not tried: its address is not there (cables says so) */
		dr_cell(d, e->host, DR_PATH, DR_OK);
		if (!e->bind_err[0] || !strcmp(e->bind_err, "EADDRNOTAVAIL"))
			continue;
		if (!strcmp(e->bind_err, "noprobe"))
			continue;
		if (!strcmp(e->bind_err, "EADDRINUSE")) {
			snprintf(fix, sizeof(fix),
				 "on %s: lsof -nP -iTCP:%d -sTCP:LISTEN, and end that process (a rank of a dead job?)",
				 d->hosts[e->host].name, e->port);
			dr_find(d, e->host, DR_PATH, DR_FAIL, "port-in-use", fix,
				"rank %zu's port %s:%d is taken by another process", e->rank, e->ip, e->port);
		} else {
			dr_find(d, e->host, DR_PATH, DR_FAIL, "listen", NULL, "rank %zu cannot listen on %s:%d: %s",
				e->rank, e->ip, e->port, e->bind_msg[0] ? e->bind_msg : e->bind_err);
		}
	}
	for (size_t i = 0; i < d->nconns; i++) {
		const struct dr_conn *c = &d->conns[i];
		const struct dr_ep *e = &d->eps[c->ep];
		char from[160], fix[512];
		bool first = true;

		if (c->tried)
			dr_cell(d, c->from, DR_PATH, DR_OK);
		if (!c->tried || !c->err[0])
			continue;
		/* one finding per endpoint and error, naming every host that saw it */
		for (size_t k = 0; k < i; k++)
			if (d->conns[k].ep == c->ep && d->conns[k].tried && !strcmp(d->conns[k].err, c->err))
				first = false;
		if (!first)
			continue;
		who(d, c->ep, c->err, from, sizeof(from));
		if (!strcmp(c->err, "EHOSTUNREACH") || !strcmp(c->err, "ENETUNREACH")) {
			snprintf(fix, sizeof(fix),
				 "on %s: System Settings > Privacy & Security > Local Network: allow the programs started over ssh (or check its routes: route -n get %s)",
				 d->hosts[c->from].name, e->ip);
			dr_find(d, c->from, DR_PATH, DR_FAIL, "local-network", fix,
				"%s cannot reach rank %zu at %s:%d: %s (macOS's Local Network privacy blocks processes started over ssh this way)",
				from, e->rank, e->ip, e->port, c->msg[0] ? c->msg : c->err);
			continue;
		}
		if (!strcmp(c->err, "EBADANSWER")) {
			snprintf(fix, sizeof(fix), "on %s: lsof -nP -iTCP:%d, and end that process",
				 d->hosts[e->host].name, e->port);
			dr_find(d, e->host, DR_PATH, DR_FAIL, "port-other", fix,
				"another program answers on rank %zu's port %s:%d", e->rank, e->ip, e->port);
			continue;
		}
		snprintf(fix, sizeof(fix),
			 "on %s: let incoming TCP port %d in (System Settings > Network > Firewall; sudo pfctl -sr lists pf's rules)",
			 d->hosts[e->host].name, e->port);
		dr_find(d, e->host, DR_PATH, DR_FAIL, !strcmp(c->err, "ETIMEDOUT") ? "port-blocked" : "port-refused", fix,
			"connects from %s to rank %zu at %s:%d %s", from, e->rank, e->ip, e->port,
			!strcmp(c->err, "ETIMEDOUT") ? "time out: a firewall drops them"
			: !strcmp(c->err, "ECONNREFUSED") ? "are refused (a firewall rejects them)" : c->msg);
	}
}
