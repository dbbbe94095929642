/*
 * ctl.c - the TCP engine's control plane state (tcp.h): its part of init (the
 * environment both TCP backends read, the pipes) and its release; the lanes
 * and the progress thread are p2p.c's. Also the backends' barrier.
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "coll/coll.h"
#include "coll/tcp/tcp.h"
#include "common/err.h"
#include "common/fdio.h"

#include <unistd.h>

void mr_tcp_ctl_release(struct mr_tcp *r)
{
	mr_tcp_p2p_stop(r);
	for (int i = 0; r->lane && i < r->nlanes; i++)
		mr_close(&r->lane[i].fd);
	free(r->lane);
	r->lane = NULL;
	mr_close(&r->wake_pipe[0]);
	mr_close(&r->wake_pipe[1]);
	mr_close(&r->fail_pipe[0]);
	mr_close(&r->fail_pipe[1]);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	mr_ring_hosts_free(&r->hosts);
}

/* MESHRUN_RING_TCP_CC: a congestion control name for the data connections,
 * "system" to keep the system's; default MR_TCP_CC_DEFAULT (io.c). */
static int ring_env_cc(struct mr_tcp *r, struct meshrun_err *err)
{
	const char *cc = getenv(MR_ENV(MESHRUN_RING_TCP_CC));
	size_t len;

	if (!cc || !*cc)
		cc = MR_TCP_CC_DEFAULT;
	if (strcmp(cc, "system") == 0)
		cc = "";
	len = strlen(cc);
	if (len >= sizeof(r->tcp_cc) || strspn(cc, "abcdefghijklmnopqrstuvwxyz0123456789_-") != len)
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: MESHRUN_RING_TCP_CC='%s': expected a congestion control name like reno or cubic (at most %d characters), or 'system'", r->who, cc, (int)sizeof(r->tcp_cc) - 1);
	memcpy(r->tcp_cc, cc, len + 1);
	return 0;
}

int mr_tcp_ctl_init(struct mr_tcp *r, const char *who, struct meshrun_err *err)
{
	char what[64];
	int rc;

	r->who = who;
	r->wake_pipe[0] = r->wake_pipe[1] = r->fail_pipe[0] = r->fail_pipe[1] = -1;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->verbose = getenv(MR_ENV(MLX_RING_VERBOSE)) != NULL;
	rc = mr_env_timeout_ms(&r->timeout_ms, err);
	if (rc < 0)
		return rc;
	rc = mr_env_job_token(who, r->token, sizeof(r->token), &r->token_len, err);
	if (rc < 0)
		return rc;
	rc = ring_env_cc(r, err);
	if (rc < 0)
		return rc;
	snprintf(what, sizeof(what), "%s: MESHRUN_RING_SNDBUF", who);
	return mr_env_sndbuf(what, getenv(MR_ENV(MESHRUN_RING_SNDBUF)), &r->sndbuf, err);
}

int mr_tcp_ctl_pipes(struct mr_tcp *r, struct meshrun_err *err)
{
	if (mr_pipe_cloexec(r->wake_pipe) < 0 || mr_pipe_cloexec(r->fail_pipe) < 0)
		return mr_err_sys(err, "%s: pipe", r->who);
	mr_set_nonblock(r->wake_pipe[0], true);
	mr_set_nonblock(r->wake_pipe[1], true);
	mr_set_nonblock(r->fail_pipe[1], true);
	return 0;
}

int mr_tcp_barrier(struct meshrun_group *g, struct meshrun_err *err)
{
	unsigned char stack[256];
	unsigned char *b = stack;
	int rc;

	if (g->size == 1)
		return 0;
	if ((size_t)g->size > sizeof(stack)) {
		b = calloc((size_t)g->size, 1);
		if (!b)
			return mr_err_set(err, MESHRUN_E_NOMEM, "barrier: out of memory");
	}
	b[g->rank] = 1;
	rc = g->ops->all_gather(g, b, 1, err);
	if (b != stack)
		free(b);
	return rc;
}
