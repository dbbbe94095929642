/*
 * appleverbs.c - the LD_PRELOAD interposer of meshsim's Apple RDMA layer
 * (appleverbs.h: what it enforces and why): the process's part. The real
 * entry points, the rules and the shared table, loaded once; refusals; the
 * process's records (contexts, QPs, completions it made up), lists under one
 * mutex: a rank has a handful of each. The other files: appleverbs_impl.h.
 */
#include "common/compat.h"
#include "sim/appleverbs/appleverbs_impl.h"
#include "sim/appleverbs/appleverbs.h"
#include "common/errname.h"
#include "common/num.h"
#include "meshrun/err.h"

#include <dlfcn.h>
#include <unistd.h>

#ifndef AV_DEFAULT_RULES
#define AV_DEFAULT_RULES "apple-rules.json"
#endif

struct av_real_verbs av_real;
static pthread_once_t once = PTHREAD_ONCE_INIT;
pthread_mutex_t av_mu = PTHREAD_MUTEX_INITIALIZER;
static bool ready;                          /* rules and table loaded */
static bool logging;
uint64_t av_lose_nth;               /* MESHSIM_APPLE_LOSE, 0: none */
struct av_rules av_rules_in_force;
struct av_shared *av_shm;
struct lctx *av_ctxs;
struct lqp *av_qps;
struct lwc *av_wcs, **av_wcs_tail = &av_wcs;

static void say(const char *fmt, ...) MR_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n = MR_MIN(n, (int)sizeof(line) - 2);
	line[n++] = '\n';
	ssize_t w = write(2, line, (size_t)n);
	(void)w;
}

static void *sym(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (!p)
		say("meshsim-appleverbs: libibverbs has no '%s' (is libibverbs loaded?)", name);
	return p;
}

static void init(void)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	const char *mode = getenv(AV_ENV_MODE), *path = getenv(AV_ENV_RULES), *st = getenv(AV_ENV_STATE);
	const char *lg = getenv(AV_ENV_LOG), *lose = getenv(AV_ENV_LOSE);

	logging = lg && strcmp(lg, "1") == 0;
	if (lose && *lose && mr_parse_u64(lose, 1, UINT32_MAX, &av_lose_nth) < 0) {
		say("meshsim-appleverbs: %s='%s': expected a count of SENDs: no RDMA device will open", AV_ENV_LOSE, lose);
		return;
	}
	*(void **)&av_real.get_device_list = sym("ibv_get_device_list");
	*(void **)&av_real.get_device_name = sym("ibv_get_device_name");
	*(void **)&av_real.open_device = sym("ibv_open_device");
	*(void **)&av_real.close_device = sym("ibv_close_device");
	*(void **)&av_real.query_device = sym("ibv_query_device");
	*(void **)&av_real.query_gid = sym("ibv_query_gid");
	*(void **)&av_real.create_comp_channel = sym("ibv_create_comp_channel");
	*(void **)&av_real.create_cq = sym("ibv_create_cq");
	*(void **)&av_real.create_srq = sym("ibv_create_srq");
	*(void **)&av_real.create_qp = sym("ibv_create_qp");
	*(void **)&av_real.destroy_qp = sym("ibv_destroy_qp");
	*(void **)&av_real.modify_qp = sym("ibv_modify_qp");
	*(void **)&av_real.reg_mr = sym("ibv_reg_mr");
	*(void **)&av_real.reg_mr_iova = sym("ibv_reg_mr_iova");
	*(void **)&av_real.reg_mr_iova2 = sym("ibv_reg_mr_iova2");
	*(void **)&av_real.reg_dmabuf_mr = sym("ibv_reg_dmabuf_mr");
	*(void **)&av_real.dereg_mr = sym("ibv_dereg_mr");
	if (!av_real.get_device_list || !av_real.get_device_name || !av_real.open_device ||
	    !av_real.create_qp || !av_real.modify_qp)
		return;
	av_rules_default(&av_rules_in_force);
	if (!path || !*path)
		path = AV_DEFAULT_RULES;
	if (av_rules_load(path, &av_rules_in_force, &err) < 0) {
		say("meshsim-appleverbs: %s (%s): no RDMA device will open", err.msg, AV_ENV_RULES);
		return;
	}
	if (mode && *mode) {
		if (strcmp(mode, "apple") == 0) {
			av_rules_in_force.send_without_recv = AV_HELD;
		} else if (strcmp(mode, "uc-strict") == 0) {
			av_rules_in_force.send_without_recv = AV_DROPPED;
		} else {
			say("meshsim-appleverbs: %s='%s': expected apple or uc-strict: no RDMA device will open", AV_ENV_MODE, mode);
			return;
		}
	}
	av_shm = av_state_open(st && *st ? st : AV_STATE_DEFAULT);
	if (!av_shm) {
		say("meshsim-appleverbs: cannot map the shared table '%s': %s: no RDMA device will open", st && *st ? st : AV_STATE_DEFAULT, strerror(errno));
		return;
	}
	ready = true;
}

bool av_up(void)
{
	pthread_once(&once, init);
	if (!ready)
		errno = EINVAL;
	return ready;
}

/* Count a refusal, say it when asked, set errno; returns e. */
int av_refuse(enum av_stat_id id, int e, const char *fmt, ...)
{
	if (av_shm)
		av_stat_add(av_shm, id);
	if (logging) {
		char what[400];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(what, sizeof(what), fmt, ap);
		va_end(ap);
		say("meshsim-appleverbs: refused %s: %s", what, mr_errno_name(e));
	}
	errno = e;
	return e;
}

struct lctx *av_find_ctx(const struct ibv_context *ctx)
{
	for (struct lctx *c = av_ctxs; c; c = c->next)
		if (c->ctx == ctx)
			return c;
	return NULL;
}

struct lqp *av_find_qp(const struct ibv_qp *qp)
{
	for (struct lqp *q = av_qps; q; q = q->next)
		if (q->qp == qp)
			return q;
	return NULL;
}
