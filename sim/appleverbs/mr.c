/*
 * mr.c - meshsim's verbs interposer (appleverbs_impl.h): memory regions, each
 * a row of the shared table (the device's MR budget, all processes
 * together), through every registration entry point libibverbs has.
 */
#include "common/compat.h"
#include "sim/appleverbs/appleverbs_impl.h"

#include <unistd.h>

/* libibverbs calls its own exported entry points (ibv_reg_mr -> ibv_reg_mr_iova2):
 * only the outermost call of a thread is the application's */
static __thread int reentry;

/* Reserve an MR row on ctx's device: its index, or -1 (errno set). */
static int mr_reserve(struct ibv_pd *pd)
{
	pthread_mutex_lock(&av_mu);
	struct lctx *c = av_find_ctx(pd->context);
	pthread_mutex_unlock(&av_mu);
	if (!c)
		return -2;
	av_state_lock(av_shm);
	int n = av_count_mrs(av_shm, c->dev), row = -1;
	if (!av_rules_in_force.max_mr || n < av_rules_in_force.max_mr) {
		for (int i = 0; i < AV_MAX_MR && row < 0; i++) {
			struct av_mr *m = &av_shm->mrs[i];
			if (m->pid && !av_pid_alive(m->pid))
				m->pid = 0;
			if (!m->pid) {
				m->pid = (uint32_t)getpid();
				m->dev = c->dev;
				m->handle = 0;
				row = i;
			}
		}
	}
	av_state_unlock(av_shm);
	if (av_rules_in_force.max_mr && n >= av_rules_in_force.max_mr) {
		av_refuse(AV_STAT_refused_mr_limit, av_rules_in_force.max_mr_errno, "MR %d on '%s' (at most %d per device)", n + 1, c->name, av_rules_in_force.max_mr);
		return -1;
	}
	if (row < 0)
		errno = ENOSPC;
	return row;
}

static struct ibv_mr *mr_done(int row, struct ibv_mr *mr)
{
	int e = errno;

	reentry--;
	if (row >= 0 && !mr)
		av_shm->mrs[row].pid = 0;
	else if (row >= 0)
		av_shm->mrs[row].handle = (uint64_t)(uintptr_t)mr;
	errno = e;
	return mr;
}

/*
 * The application's registration (call: the real one): the device's MR row
 * first, then the real call, which keeps the row or gives it back. Calls
 * libibverbs makes to its own entry points from inside pass straight on.
 */
#define REG_MR(pd, call)                           \
	do {                                       \
		if (!av_up())                         \
			return NULL;               \
		if (reentry)                       \
			return call;               \
		int row_ = mr_reserve(pd);         \
		if (row_ == -1)                    \
			return NULL;               \
		reentry++;                         \
		struct ibv_mr *mr_ = call;         \
		return mr_done(row_, mr_);         \
	} while (0)

AV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	REG_MR(pd, av_real.reg_mr(pd, addr, len, access));
}

AV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
					 int access)
{
	REG_MR(pd, av_real.reg_mr_iova(pd, addr, len, iova, access));
}

AV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
					  unsigned int access)
{
	REG_MR(pd, av_real.reg_mr_iova2(pd, addr, len, iova, access));
}

AV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len,
					   uint64_t iova, int fd, int access)
{
	REG_MR(pd, av_real.reg_dmabuf_mr(pd, off, len, iova, fd, access));
}

AV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	if (!av_up())
		return EINVAL;
	uint64_t h = (uint64_t)(uintptr_t)mr;
	uint32_t me = (uint32_t)getpid();
	int rc = av_real.dereg_mr(mr);
	if (rc == 0) {
		av_state_lock(av_shm);
		for (int i = 0; i < AV_MAX_MR; i++)
			if (av_shm->mrs[i].pid == me && av_shm->mrs[i].handle == h) {
				av_shm->mrs[i].pid = 0;
				break;
			}
		av_state_unlock(av_shm);
	}
	return rc;
}
