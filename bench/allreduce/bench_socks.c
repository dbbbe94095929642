/*
 * bench-socks - what the TCP connections of a benchmark run use, sampled
 * without disturbing the run: the congestion control and the send buffer
 * (skmem tb) of every established IPv4 connection to an address in --dst,
 * every --interval-ms, written to FILE as "reno/tb1048576 x2 " (one
 * "cc/tbBYTES xCOUNT" per kind, sorted): the latest of the samples that saw
 * the most connections (at the end of a run they close one by one, so the
 * last sample may see only some of them).
 *
 * Started once in rank 0's network namespace (`ip netns exec NS bench-socks
 * ...`) for a peer's run and stopped with SIGTERM at its end. It asks the
 * kernel directly (NETLINK_SOCK_DIAG, the interface `ss` uses) from one
 * process: run.sh used to run `ip netns exec` + `ss` + `awk` + `sleep` every
 * 0.2 s, about 40 ms of CPU per sample on a 2-core machine, and its first
 * sample fell into the first timed rounds of whichever peer started fastest
 * (ours: 2-3 rounds of 10 twice as slow, every pass). A dump still walks the
 * kernel's whole table of established connections (about 1 ms of CPU here),
 * so it samples every --interval-ms only until the count of connections has
 * stayed the same for STABLE_SAMPLES samples (the ranks have connected),
 * then every SLOW_MS.
 */
#include "common/compat.h"
#include "common/num.h"
#include "common/opt.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_KINDS 32
#define STABLE_SAMPLES 5
#define SLOW_MS 1000
#define TCP_ESTABLISHED_STATE 1 /* the kernel's TCP_ESTABLISHED */

struct kind {
	char name[48];
	int count;
};

struct sample {
	struct kind k[MAX_KINDS];
	int n;
};

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void sample_add(struct sample *s, const char *cc, uint32_t tb)
{
	char name[48];

	snprintf(name, sizeof(name), "%s/tb%u", cc, tb);
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->k[i].name, name) == 0) {
			s->k[i].count++;
			return;
		}
	if (s->n == MAX_KINDS)
		return;
	snprintf(s->k[s->n].name, sizeof(s->k[s->n].name), "%s", name);
	s->k[s->n++].count = 1;
}

static int kind_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kind *)a)->name, ((const struct kind *)b)->name);
}

/* One established connection's reply: count it when its peer is in dst/mask (dst masked). */
static void one_sock(struct sample *s, const struct nlmsghdr *h, uint32_t dst, uint32_t mask)
{
	const struct inet_diag_msg *m = NLMSG_DATA(h);
	int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*m));
	char cc[17] = ""; /* TCP_CA_NAME_MAX + 1 */
	uint32_t tb = 0;

	if (len < 0 || (ntohl(m->id.idiag_dst[0]) & mask) != dst)
		return;
	for (const struct rtattr *a = (const struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == INET_DIAG_CONG)
			snprintf(cc, sizeof(cc), "%.*s", (int)RTA_PAYLOAD(a), (const char *)RTA_DATA(a));
		else if (a->rta_type == INET_DIAG_SKMEMINFO && RTA_PAYLOAD(a) >= (SK_MEMINFO_SNDBUF + 1) * sizeof(uint32_t))
			tb = ((const uint32_t *)RTA_DATA(a))[SK_MEMINFO_SNDBUF];
	}
	if (cc[0])
		sample_add(s, cc, tb);
}

/* Dump the established IPv4 TCP sockets once; 0 or -1 (errno). */
static int take_sample(int nl, struct sample *s, uint32_t dst, uint32_t mask)
{
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} req = {
		.h = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.r = { .sdiag_family = AF_INET, .sdiag_protocol = IPPROTO_TCP,
		       .idiag_states = 1u << TCP_ESTABLISHED_STATE,
		       .idiag_ext = (1u << (INET_DIAG_CONG - 1)) | (1u << (INET_DIAG_SKMEMINFO - 1)) },
	};
	static unsigned char buf[32768] __attribute__((aligned(NLMSG_ALIGNTO)));

	s->n = 0;
	if (send(nl, &req, sizeof(req), 0) < 0)
		return -1;
	for (;;) {
		ssize_t n = recv(nl, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		int len = (int)n;
		for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				errno = e->error ? -e->error : EIO;
				return -1;
			}
			one_sock(s, h, dst, mask);
		}
	}
}

static int write_sample(const char *path, struct sample *s)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	qsort(s->k, (size_t)s->n, sizeof(s->k[0]), kind_cmp);
	for (int i = 0; i < s->n; i++)
		fprintf(f, "%s x%d ", s->k[i].name, s->k[i].count);
	fputc('\n', f);
	return fclose(f);
}

/* "A.B.C.D/BITS" into host-order mask and network address (address & mask). */
static int parse_prefix(const char *text, uint32_t *addr, uint32_t *mask)
{
	char ip[INET_ADDRSTRLEN];
	const char *slash = strchr(text, '/');
	struct in_addr in;
	int bits = 32;

	if (slash && mr_parse_int(slash + 1, 0, 32, &bits) < 0)
		return -1;
	snprintf(ip, sizeof(ip), "%.*s", slash ? (int)(slash - text) : (int)strlen(text), text);
	if (inet_pton(AF_INET, ip, &in) != 1)
		return -1;
	*mask = bits ? ~0u << (32 - bits) : 0;
	*addr = ntohl(in.s_addr) & *mask;
	return 0;
}

int main(int argc, char **argv)
{
	const char *dst_text = "10.233.0.0/16";
	int interval_ms = 20;
	const struct mr_opt table[] = {
		MR_OPT_STRING_D(0, "dst", &dst_text, "PREFIX", "10.233.0.0/16", "count connections to addresses in this IPv4 prefix"),
		MR_OPT_INT_D(0, "interval-ms", &interval_ms, "MS", 10, 60000, "20", "time between samples until the connections are all up (then 1 s)"),
		MR_OPT_END(),
	};
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;
	struct sample s;
	uint32_t dst, mask;
	int nl = -1, rc, most = 0, stable = 0;

	rc = mr_opt_parse(table, argc, argv, 0, NULL, &rest, &err);
	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, "bench-socks [--dst PREFIX] [--interval-ms MS] FILE", table, NULL);
		rc = 0;
		goto out;
	}
	if (rc != MR_OPT_OK || rest.nr != 1 || parse_prefix(dst_text, &dst, &mask) < 0) {
		fprintf(stderr, "bench-socks: %s\n", rc != MR_OPT_OK ? err.msg : rest.nr != 1 ? "needs one FILE" : "--dst: expected A.B.C.D/BITS");
		rc = 2;
		goto out;
	}
	/* poll() is never restarted after a handler: SIGTERM ends the wait at once */
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	rc = 1;
	nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0) {
		fprintf(stderr, "bench-socks: netlink socket: %s\n", strerror(errno));
		goto out;
	}
	while (!stop) {
		int conns = 0;
		if (take_sample(nl, &s, dst, mask) < 0) {
			fprintf(stderr, "bench-socks: sock_diag dump: %s\n", strerror(errno));
			goto out;
		}
		for (int i = 0; i < s.n; i++)
			conns += s.k[i].count;
		stable = conns > 0 && conns == most ? stable + 1 : 0;
		if (conns > 0 && conns >= most) {
			most = conns;
			if (write_sample(rest.v[0], &s) < 0) {
				fprintf(stderr, "bench-socks: %s: %s\n", rest.v[0], strerror(errno));
				goto out;
			}
		}
		poll(NULL, 0, stable >= STABLE_SAMPLES ? SLOW_MS : interval_ms);
	}
	rc = 0;
out:
	if (nl >= 0)
		close(nl);
	mr_strvec_release(&rest);
	return rc;
}
