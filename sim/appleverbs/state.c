/*
 * state.c - the verbs layer's table shared under /dev/shm (state.h).
 */
#include "common/compat.h"
#include "sim/appleverbs/state.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const stat_names[AV_STAT_COUNT] = {
#define AV_STAT_NAME(n, d) #n,
	AV_STAT_MAP(AV_STAT_NAME)
#undef AV_STAT_NAME
};
static const char *const stat_whats[AV_STAT_COUNT] = {
#define AV_STAT_WHAT(n, d) d,
	AV_STAT_MAP(AV_STAT_WHAT)
#undef AV_STAT_WHAT
};

const char *av_stat_name(int id)
{
	return id >= 0 && id < AV_STAT_COUNT ? stat_names[id] : "?";
}

const char *av_stat_what(int id)
{
	return id >= 0 && id < AV_STAT_COUNT ? stat_whats[id] : "?";
}

struct av_shared *av_state_open(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	struct stat st;
	void *p;

	if (fd < 0)
		return NULL;
	/* every process extends it to the full size; zero bytes are the empty table */
	if (fstat(fd, &st) < 0 || ((size_t)st.st_size < sizeof(struct av_shared) &&
				   ftruncate(fd, (off_t)sizeof(struct av_shared)) < 0)) {
		int e = errno;
		close(fd);
		errno = e;
		return NULL;
	}
	p = mmap(NULL, sizeof(struct av_shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	struct av_shared *s = p;
	uint32_t zero = 0;
	__atomic_compare_exchange_n(&s->magic, &zero, AV_STATE_MAGIC, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
	if (s->magic != AV_STATE_MAGIC) {
		munmap(p, sizeof(struct av_shared));
		errno = EPROTO;
		return NULL;
	}
	return s;
}

bool av_pid_alive(uint32_t pid)
{
	return pid && (kill((pid_t)pid, 0) == 0 || errno != ESRCH);
}

void av_state_lock(struct av_shared *s)
{
	uint32_t me = (uint32_t)getpid();

	for (unsigned spin = 0;; spin++) {
		uint32_t cur = 0;
		if (__atomic_compare_exchange_n(&s->lock, &cur, me, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return;
		/* a holder killed inside (kill -9 mid-call) leaves the lock: take it over */
		if (spin % 64 == 63 && !av_pid_alive(cur) &&
		    __atomic_compare_exchange_n(&s->lock, &cur, me, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return;
		sched_yield();
	}
}

void av_state_unlock(struct av_shared *s)
{
	__atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE);
}

void av_stat_add(struct av_shared *s, enum av_stat_id id)
{
	__atomic_add_fetch(&s->stat[id], 1, __ATOMIC_RELAXED);
}

int av_dev_find_add(struct av_shared *s, const char *name)
{
	int free_row = -1;

	for (int i = 0; i < AV_MAX_DEV; i++) {
		if (strcmp(s->devs[i].name, name) == 0)
			return i;
		if (!s->devs[i].name[0] && free_row < 0)
			free_row = i;
	}
	if (free_row >= 0)
		snprintf(s->devs[free_row].name, sizeof(s->devs[free_row].name), "%s", name);
	return free_row;
}

int av_count_qps(struct av_shared *s, uint32_t dev)
{
	int n = 0;

	for (int i = 0; i < AV_MAX_QP; i++) {
		struct av_qp *q = &s->qps[i];
		if (!q->pid || q->dev != dev)
			continue;
		if (!av_pid_alive(q->pid))
			q->pid = 0;
		else
			n++;
	}
	return n;
}

int av_count_mrs(struct av_shared *s, uint32_t dev)
{
	int n = 0;

	for (int i = 0; i < AV_MAX_MR; i++) {
		struct av_mr *m = &s->mrs[i];
		if (!m->pid || m->dev != dev)
			continue;
		if (!av_pid_alive(m->pid))
			m->pid = 0;
		else
			n++;
	}
	return n;
}
