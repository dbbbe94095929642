/*
 * doctor_probe.c - `meshconfig doctor-probe`: what the doctor's path check runs
 * on the hosts. It is started over the hal as meshrun starts ranks (sshd, the
 * login shell, /bin/sh, exec), so what stops a rank stops it too: a firewall,
 * macOS's Local Network privacy for processes started over ssh, a port some
 * other process holds.
 *
 *   doctor-probe listen TOKEN LIFETIME_MS EP...
 *	binds every EP ("a.b.c.d:port" or "[v6]:port", SO_REUSEADDR as the ranks
 *	bind), prints "bound EP" or "error EP ERRNAME text" for each, then
 *	"ready"; then to every connection it writes TOKEN and a newline and waits
 *	for the other side to close first (the TIME_WAIT is the connector's, never
 *	on the job's port). It ends at EOF on stdin, or after LIFETIME_MS.
 *   doctor-probe connect TOKEN TIMEOUT_MS EP...
 *	connects to every EP at once and reads one line from each; prints
 *	"ok EP MS" when the line is TOKEN, else "fail EP ERRNAME text"
 *	(ETIMEDOUT past TIMEOUT_MS; EBADANSWER when another program answered).
 * ERRNAME is the errno's symbolic name (the numbers differ between macOS and
 * Linux), or E<number>. Exit 0 once the lines are printed, 2 on bad arguments.
 */
#include "common/compat.h"
#include "common/fdio.h"
#include "common/num.h"
#include "common/port.h"
#include "common/timeutil.h"
#include "common/xalloc.h"
#include "config/doctor.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROBE_MAX_EPS 4096
#define PROBE_MAX_CONNS 1024

static const char *errname(int e, char *buf, size_t n)
{
	static const struct { int e; const char *name; } names[] = {
		{ ETIMEDOUT, "ETIMEDOUT" },       { ECONNREFUSED, "ECONNREFUSED" },
		{ EHOSTUNREACH, "EHOSTUNREACH" }, { ENETUNREACH, "ENETUNREACH" },
		{ EADDRINUSE, "EADDRINUSE" },     { EADDRNOTAVAIL, "EADDRNOTAVAIL" },
		{ EACCES, "EACCES" },             { EPERM, "EPERM" },
		{ ECONNRESET, "ECONNRESET" },     { EAFNOSUPPORT, "EAFNOSUPPORT" },
		{ EINVAL, "EINVAL" },             { EMFILE, "EMFILE" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (names[i].e == e)
			return names[i].name;
	snprintf(buf, n, "E%d", e);
	return buf;
}

/* "a.b.c.d:port" / "[v6]:port" -> address; false when malformed. */
static bool parse_ep(const char *ep, struct sockaddr_storage *sa, socklen_t *len)
{
	char host[80], port[8];
	const char *colon = strrchr(ep, ':');
	struct addrinfo hints, *ai = NULL;
	size_t hl;
	uint64_t p;

	if (!colon || colon == ep || strlen(colon + 1) >= sizeof(port))
		return false;
	hl = (size_t)(colon - ep);
	if (ep[0] == '[') {
		if (hl < 3 || ep[hl - 1] != ']')
			return false;
		ep++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return false;
	memcpy(host, ep, hl);
	host[hl] = '\0';
	snprintf(port, sizeof(port), "%s", colon + 1);
	if (mr_parse_u64(port, 1, 65535, &p) < 0)
		return false;
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai)
		return false;
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	*len = (socklen_t)ai->ai_addrlen;
	freeaddrinfo(ai);
	return true;
}

static void out_line(const char *fmt, ...) MR_PRINTF(1, 2);
static void out_line(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

/* ---- listen ------------------------------------------------------------------ */

static int probe_listen(const char *token, int64_t lifetime_ms, char **eps, size_t n)
{
	struct pollfd *pf = xcalloc(1 + n + PROBE_MAX_CONNS, sizeof(*pf));
	int64_t *until = xcalloc(PROBE_MAX_CONNS, sizeof(*until));
	int *conn = xcalloc(PROBE_MAX_CONNS, sizeof(*conn));
	int *lfd = xcalloc(n, sizeof(*lfd));
	int64_t deadline = mr_now_ms() + lifetime_ms;
	size_t nconn = 0;
	char line[256], eb[16];
	bool done = false;

	for (size_t i = 0; i < n; i++) {
		struct sockaddr_storage sa;
		socklen_t len;
		int one = 1;

		lfd[i] = -1;
		if (!parse_ep(eps[i], &sa, &len)) {
			out_line("error %s EINVAL not an address:port\n", eps[i]);
			continue;
		}
		lfd[i] = mr_socket(sa.ss_family, SOCK_STREAM, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
		if (lfd[i] >= 0)
			setsockopt(lfd[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (lfd[i] < 0 || bind(lfd[i], (struct sockaddr *)&sa, len) < 0 || listen(lfd[i], 128) < 0) {
			int e = errno;
			out_line("error %s %s %s\n", eps[i], errname(e, eb, sizeof(eb)), strerror(e));
			mr_close(&lfd[i]);
			continue;
		}
		out_line("bound %s\n", eps[i]);
	}
	out_line("ready\n");
	while (!done && mr_ms_left(deadline) > 0) {
		size_t np = 0;
		int64_t now;
		int rc;

		pf[np].fd = STDIN_FILENO;
		pf[np++].events = POLLIN;
		for (size_t i = 0; i < n; i++) {
			pf[np].fd = lfd[i];
			pf[np++].events = POLLIN;
		}
		for (size_t i = 0; i < nconn; i++) {
			pf[np].fd = conn[i];
			pf[np++].events = POLLIN;
		}
		rc = poll(pf, (nfds_t)np, MR_MIN(mr_ms_left(deadline), 250));
		if (rc < 0 && errno != EINTR)
			break;
		now = mr_now_ms();
		if (rc > 0 && (pf[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))) {
			ssize_t r = read(STDIN_FILENO, line, sizeof(line));
			if (r <= 0 && !(r < 0 && (errno == EINTR || errno == EAGAIN)))
				done = true;
		}
		/* a connection ends when the connector closes (or after 5 s); pf holds
		 * the connections as they were at the poll, in order */
		{
			size_t keep = 0;

			for (size_t i = 0; i < nconn; i++) {
				bool end = now >= until[i];

				if (!end && rc > 0 && (pf[1 + n + i].revents & (POLLIN | POLLHUP | POLLERR))) {
					ssize_t r = read(conn[i], line, sizeof(line));
					end = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
				}
				if (end) {
					close(conn[i]);
					continue;
				}
				conn[keep] = conn[i];
				until[keep++] = until[i];
			}
			nconn = keep;
		}
		for (size_t i = 0; rc > 0 && i < n; i++) {
			int c;

			if (lfd[i] < 0 || !(pf[1 + i].revents & POLLIN))
				continue;
			while ((c = mr_accept(lfd[i], MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK)) >= 0) {
				char msg[160];
				int m = snprintf(msg, sizeof(msg), "%s\n", token);

				(void)mr_send_nosig(c, msg, (size_t)m, 0);
				if (nconn == PROBE_MAX_CONNS) {
					close(c);
					continue;
				}
				conn[nconn] = c;
				until[nconn++] = now + 5000;
			}
		}
	}
	for (size_t i = 0; i < nconn; i++)
		close(conn[i]);
	for (size_t i = 0; i < n; i++)
		mr_close(&lfd[i]);
	free(lfd);
	free(conn);
	free(until);
	free(pf);
	return 0;
}

/* ---- connect ------------------------------------------------------------------ */

struct pconn {
	int fd;
	int state;           /* 0 connecting, 1 reading, 2 done */
	char buf[160];
	size_t len;
	int64_t t0;
	char result[256];
};

static void pc_fail(struct pconn *c, const char *ep, int e)
{
	char eb[16];

	snprintf(c->result, sizeof(c->result), "fail %s %s %s", ep, errname(e, eb, sizeof(eb)), strerror(e));
	mr_close(&c->fd);
	c->state = 2;
}

static int probe_connect(const char *token, int64_t timeout_ms, char **eps, size_t n)
{
	struct pconn *c = xcalloc(n, sizeof(*c));
	struct pollfd *pf = xcalloc(n, sizeof(*pf));
	int64_t deadline = mr_now_ms() + timeout_ms;
	size_t left = n;

	for (size_t i = 0; i < n; i++) {
		struct sockaddr_storage sa;
		socklen_t len;

		c[i].fd = -1;
		c[i].t0 = mr_now_ms();
		if (!parse_ep(eps[i], &sa, &len)) {
			snprintf(c[i].result, sizeof(c[i].result), "fail %s EINVAL not an address:port", eps[i]);
			c[i].state = 2;
			left--;
			continue;
		}
		c[i].fd = mr_socket(sa.ss_family, SOCK_STREAM, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
		if (c[i].fd < 0 || (connect(c[i].fd, (struct sockaddr *)&sa, len) < 0 && errno != EINPROGRESS)) {
			pc_fail(&c[i], eps[i], errno);
			left--;
		}
	}
	while (left && mr_ms_left(deadline) > 0) {
		size_t np = 0;
		size_t *idx = xcalloc(n, sizeof(*idx));
		int rc;

		for (size_t i = 0; i < n; i++) {
			if (c[i].state == 2)
				continue;
			pf[np].fd = c[i].fd;
			pf[np].events = c[i].state == 0 ? POLLOUT : POLLIN;
			pf[np].revents = 0;
			idx[np++] = i;
		}
		rc = poll(pf, (nfds_t)np, mr_ms_left(deadline));
		for (size_t k = 0; rc > 0 && k < np; k++) {
			struct pconn *p = &c[idx[k]];
			const char *ep = eps[idx[k]];

			if (!pf[k].revents)
				continue;
			if (p->state == 0) {
				int e = 0;
				socklen_t el = sizeof(e);
				if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
					e = errno;
				if (e) {
					pc_fail(p, ep, e);
					left--;
				} else {
					p->state = 1;
				}
				continue;
			}
			{
				ssize_t r = read(p->fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
				char *nl;

				if (r < 0 && (errno == EAGAIN || errno == EINTR))
					continue;
				if (r > 0)
					p->len += (size_t)r;
				p->buf[p->len] = '\0';
				nl = strchr(p->buf, '\n');
				if (!nl && r > 0 && p->len < sizeof(p->buf) - 1)
					continue;
				if (nl)
					*nl = '\0';
				if (nl && !strcmp(p->buf, token))
					snprintf(p->result, sizeof(p->result), "ok %s %lld", ep,
						 (long long)(mr_now_ms() - p->t0));
				else if (r < 0)
					snprintf(p->result, sizeof(p->result), "fail %s ECONNRESET %s", ep, strerror(errno));
				else
					snprintf(p->result, sizeof(p->result),
						 "fail %s EBADANSWER another program answers on that port", ep);
				mr_close(&p->fd);
				p->state = 2;
				left--;
			}
		}
		free(idx);
		if (rc < 0 && errno != EINTR)
			break;
	}
	for (size_t i = 0; i < n; i++) {
		if (c[i].state != 2)
			pc_fail(&c[i], eps[i], ETIMEDOUT);
		out_line("%s\n", c[i].result);
	}
	free(pf);
	free(c);
	return 0;
}

int mr_doctor_probe_main(int argc, char **argv)
{
	int64_t ms;

	/* doctor-probe listen|connect TOKEN MS EP... */
	if (argc < 4 || (strcmp(argv[1], "listen") && strcmp(argv[1], "connect")) ||
	    !argv[2][0] || strlen(argv[2]) > 128 || strchr(argv[2], '\n') ||
	    mr_parse_i64(argv[3], 1, 3600000, &ms) < 0 || argc - 4 > PROBE_MAX_EPS) {
		fprintf(stderr, "meshconfig doctor-probe: usage: doctor-probe listen|connect TOKEN MS ADDR:PORT...\n"
				"(run by 'meshconfig doctor' on each host; not meant to be run by hand)\n");
		return 2;
	}
	if (!strcmp(argv[1], "listen"))
		return probe_listen(argv[2], ms, argv + 4, (size_t)(argc - 4));
	return probe_connect(argv[2], ms, argv + 4, (size_t)(argc - 4));
}
