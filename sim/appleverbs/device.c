/*
 * device.c - meshsim's verbs interposer (appleverbs_impl.h): devices and
 * GIDs. Opening a device enters it in the shared table and points its
 * context's ops at ops.c; the GID table is Apple's (appleverbs.h).
 */
#include "common/compat.h"
#include "sim/appleverbs/appleverbs_impl.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

/* ------------------------------------------------------------------- GIDs */

bool av_gid_is_zero(const uint8_t *g)
{
	for (int i = 0; i < 16; i++)
		if (g[i])
			return false;
	return true;
}

/* The IPv4-mapped GID of netdev's first IPv4 address; false when it has none. */
static bool ipv4_gid(const char *netdev, union ibv_gid *g)
{
	struct ifaddrs *ifa = NULL;
	bool found = false;

	memset(g, 0, sizeof(*g));
	if (!netdev[0] || getifaddrs(&ifa) < 0)
		return false;
	for (struct ifaddrs *i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || strcmp(i->ifa_name, netdev) != 0)
			continue;
		const struct sockaddr_in *sin = (const struct sockaddr_in *)i->ifa_addr;
		g->raw[10] = 0xff;
		g->raw[11] = 0xff;
		memcpy(&g->raw[12], &sin->sin_addr, 4);
		found = true;
	}
	freeifaddrs(ifa);
	return found;
}

static void read_netdev(struct lctx *c)
{
	char path[256];
	int fd;

	c->netdev[0] = '\0';
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0", c->name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, c->netdev, sizeof(c->netdev) - 1);
	close(fd);
	c->netdev[n > 0 ? n : 0] = '\0';
	c->netdev[strcspn(c->netdev, "\n")] = '\0';
}

/* The GID Apple's table has at index idx (all zero where it has none). */
void av_apple_gid(struct lctx *c, int idx, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	if (idx == 0) {
		memcpy(g->raw, av_shm->devs[c->dev].gid0, 16);
	} else if (idx == av_rules_in_force.gid_ipv4_index && ipv4_gid(c->netdev, g)) {
		av_state_lock(av_shm);
		memcpy(av_shm->devs[c->dev].gid_v4, g->raw, 16);
		av_state_unlock(av_shm);
	}
}

/* The real link-local GID of the device that presented gid, or NULL. */
const uint8_t *av_real_gid_of(const uint8_t *gid)
{
	for (int i = 0; i < AV_MAX_DEV && av_shm->devs[i].name[0]; i++)
		if (memcmp(av_shm->devs[i].gid_v4, gid, 16) == 0 || memcmp(av_shm->devs[i].gid0, gid, 16) == 0)
			return av_shm->devs[i].gid0;
	return NULL;
}

/* ------------------------------------------------------------ entry points */

AV_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	if (!av_up()) {
		if (num)
			*num = 0;
		return NULL;
	}
	return av_real.get_device_list(num);
}

AV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct ibv_context *ctx;
	struct lctx *c;
	union ibv_gid g;

	if (!av_up())
		return NULL;
	ctx = av_real.open_device(device);
	if (!ctx)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		av_real.close_device(ctx);
		errno = ENOMEM;
		return NULL;
	}
	c->ctx = ctx;
	snprintf(c->name, sizeof(c->name), "%s", av_real.get_device_name(device));
	read_netdev(c);
	av_state_lock(av_shm);
	int dev = av_dev_find_add(av_shm, c->name);
	if (dev >= 0 && av_real.query_gid(ctx, 1, 0, &g) == 0)
		memcpy(av_shm->devs[dev].gid0, g.raw, 16);
	av_state_unlock(av_shm);
	if (dev < 0) {
		free(c);
		av_real.close_device(ctx);
		errno = ENOSPC;
		return NULL;
	}
	c->dev = (uint32_t)dev;
	pthread_mutex_lock(&av_mu);
	c->post_send = ctx->ops.post_send;
	c->post_recv = ctx->ops.post_recv;
	c->poll_cq = ctx->ops.poll_cq;
	ctx->ops.post_send = av_post_send;
	ctx->ops.post_recv = av_post_recv;
	ctx->ops.poll_cq = av_poll_cq;
	if (!av_rules_in_force.comp_channel)
		ctx->ops.req_notify_cq = av_req_notify_cq;
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, create_qp_ex);
	if (vctx)
		vctx->create_qp_ex = av_create_qp_ex;
	c->next = av_ctxs;
	av_ctxs = c;
	pthread_mutex_unlock(&av_mu);
	return ctx;
}

AV_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	if (!av_up())
		return EINVAL;
	pthread_mutex_lock(&av_mu);
	for (struct lctx **p = &av_ctxs; *p; p = &(*p)->next) {
		if ((*p)->ctx == ctx) {
			struct lctx *c = *p;
			*p = c->next;
			ctx->ops.post_send = c->post_send;
			ctx->ops.post_recv = c->post_recv;
			ctx->ops.poll_cq = c->poll_cq;
			free(c);
			break;
		}
	}
	pthread_mutex_unlock(&av_mu);
	return av_real.close_device(ctx);
}

AV_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	if (!av_up())
		return EINVAL;
	int rc = av_real.query_device(ctx, a);
	if (rc)
		return rc;
	if (av_rules_in_force.max_qp)
		a->max_qp = MR_MIN(a->max_qp, av_rules_in_force.max_qp);
	if (av_rules_in_force.max_mr)
		a->max_mr = MR_MIN(a->max_mr, av_rules_in_force.max_mr);
	a->max_sge = MR_MIN(a->max_sge, av_rules_in_force.max_sge);
	a->max_qp_wr = MR_MIN(a->max_qp_wr, AV_RING);
	if (!av_rules_in_force.srq)
		a->max_srq = 0;
	return 0;
}

AV_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	if (!av_up())
		return EINVAL;
	pthread_mutex_lock(&av_mu);
	struct lctx *c = av_find_ctx(ctx);
	pthread_mutex_unlock(&av_mu);
	if (!c)
		return av_real.query_gid(ctx, port, index, gid);
	if (port != 1 || index < 0)
		return EINVAL;
	av_apple_gid(c, index, gid);
	return 0;
}

AV_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
				struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	(void)ctx, (void)port, (void)index, (void)entry, (void)flags, (void)entry_size;
	return av_refuse(AV_STAT_refused_ex_verb, EOPNOTSUPP, "ibv_query_gid_ex (use ibv_query_gid)");
}

AV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
				       size_t max_entries, uint32_t flags, size_t entry_size)
{
	(void)ctx, (void)entries, (void)max_entries, (void)flags, (void)entry_size;
	return -av_refuse(AV_STAT_refused_ex_verb, EOPNOTSUPP, "ibv_query_gid_table (use ibv_query_gid)");
}
