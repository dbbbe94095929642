/*
 * ssh_conn.c - the ssh backend's connections (ssh_impl.h): one per host, reached
 * and authenticated without blocking, as OpenSSH's sshconnect.c and sshconnect2.c
 * do it: address by address, handshake, host key check, then publickey with the
 * agent's identities and the key files in turn.
 *
 *  - Host keys: libssh2 prefers ECDSA; we set the host key method order to the
 *    key types known_hosts holds for the host (ed25519 first otherwise).
 *  - libssh2 needs a socket, not a stream: ProxyCommand gets one end of a
 *    socketpair as its stdin and stdout (run as `/bin/sh -c CMD` in a process
 *    group of its own, ended with SIGHUP as OpenSSH does); ProxyJump gives the
 *    session one end and the jump host's connection (shared by every host
 *    behind it, authenticated like any host, itself maybe behind a jump) pumps
 *    the other end to and from a direct-tcpip channel (ssh_chan.c, J_TUNNEL).
 *  - Agents: IdentityAgent (a path, or none) before $SSH_AUTH_SOCK; with
 *    IdentitiesOnly only the agent keys whose public key is an IdentityFile's or
 *    CertificateFile's .pub are offered (the others would count against sshd's
 *    MaxAuthTries). FIDO (sk-) keys and GSSAPI are not in libssh2: named with
 *    their option in the authentication error.
 */
#include "common/compat.h"
#include "hal/libssh2/ssh_impl.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/num.h"
#include "common/port.h"
#include "common/timeutil.h"
#include "hal/libssh2/ssh_hostkey.h"

#include "common/spawn.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define JUMP_DEPTH_MAX 8      /* hops behind hops (and loops) end here */
#define PROXY_EXIT_WAIT_MS 200 /* after SIGHUP, before SIGKILL */

const char *mr_ssh_errmsg(LIBSSH2_SESSION *s, int rc)
{
	static char fallback[48];
	char *msg = NULL;

	if (s)
		libssh2_session_last_error(s, &msg, NULL, 0);
	if (msg && *msg)
		return msg;
	snprintf(fallback, sizeof(fallback), "libssh2 error %d", rc);
	return fallback;
}

/* The transport itself failed (as opposed to the server refusing something). */
static bool is_socket_error(int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_SOCKET_SEND:
	case LIBSSH2_ERROR_SOCKET_RECV:
	case LIBSSH2_ERROR_SOCKET_DISCONNECT:
	case LIBSSH2_ERROR_SOCKET_TIMEOUT:
	case LIBSSH2_ERROR_TIMEOUT:
	case LIBSSH2_ERROR_BAD_SOCKET:
	case LIBSSH2_ERROR_DECRYPT:
	case LIBSSH2_ERROR_INVALID_MAC:
		return true;
	default:
		return false;
	}
}

/* Channel-level errors leave the connection usable; everything else breaks it. */
bool mr_ssh_is_conn_error(int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_CHANNEL_FAILURE:
	case LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED:
	case LIBSSH2_ERROR_CHANNEL_UNKNOWN:
	case LIBSSH2_ERROR_CHANNEL_WINDOW_EXCEEDED:
	case LIBSSH2_ERROR_CHANNEL_PACKET_EXCEEDED:
	case LIBSSH2_ERROR_CHANNEL_CLOSED:
	case LIBSSH2_ERROR_CHANNEL_EOF_SENT:
	case LIBSSH2_ERROR_INVAL:
		return false;
	default:
		return true;
	}
}

static bool file_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static void agent_close(struct conn *c)
{
	if (c->agent) {
		libssh2_agent_disconnect(c->agent);
		libssh2_agent_free(c->agent);
		c->agent = NULL;
	}
}

void mr_ssh_tunnel_gone(struct job *j)
{
	struct conn *t = j->tun_for;

	mr_close(&j->tun_fd);
	if (t) {
		if (j->base.end.err.code && !t->via_err.code)
			t->via_err = j->base.end.err;
		t->tunnel = NULL;
		j->tun_for = NULL;
	}
}

/* End the ProxyCommand: SIGHUP to its group (as OpenSSH does), KILL if it lingers. */
static void proxy_reap(struct conn *c)
{
	int64_t end = mr_now_ms() + PROXY_EXIT_WAIT_MS;
	pid_t r;

	if (c->proxy_pid <= 0)
		return;
	kill(-c->proxy_pid, SIGHUP);
	while ((r = waitpid(c->proxy_pid, NULL, WNOHANG)) == 0 && mr_now_ms() < end)
		usleep(2000);
	if (r == 0) {
		kill(-c->proxy_pid, SIGKILL);
		while (waitpid(c->proxy_pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	c->proxy_pid = 0;
}

void mr_ssh_conn_teardown(struct conn *c, bool polite)
{
	agent_close(c);
	if (c->s && polite && c->state == C_READY)
		libssh2_session_disconnect(c->s, "meshrun done"); /* one try, non-blocking */
	/* Close the socket first: with it gone, session_free cannot wait on it. */
	mr_close(&c->fd);
	if (c->tunnel) { /* it sees EOF on its end and closes the channel */
		c->tunnel->tun_for = NULL;
		c->tunnel = NULL;
	}
	proxy_reap(c);
	if (c->kh) {
		libssh2_knownhost_free(c->kh);
		c->kh = NULL;
	}
	if (c->s) {
		libssh2_session_free(c->s);
		c->s = NULL;
	}
	if (c->ai_list) {
		freeaddrinfo(c->ai_list);
		c->ai_list = c->ai_next = NULL;
	}
	c->opener = c->owner = NULL;
	c->nchan = 0;
}

static void MR_PRINTF(4, 0) conn_vset_err(struct conn *c, int code, int why, const char *fmt, va_list ap)
{
	char msg[MESHRUN_ERR_MSG_MAX];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (c->via_err.code) /* the jump host's reason, when this one has none */
		mr_hal_err_set_why(&c->err, code, why ? why : c->via_err.sys_errno, "ssh to '%s' (%s): %s: %s",
				   c->cfg.dest, c->addr[0] ? c->addr : c->cfg.hostname, msg, c->via_err.msg);
	else
		mr_hal_err_set_why(&c->err, code, why, "ssh to '%s' (%s): %s", c->cfg.dest,
				   c->addr[0] ? c->addr : c->cfg.hostname, msg);
}

void mr_ssh_conn_set_err(struct conn *c, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	conn_vset_err(c, code, 0, fmt, ap);
	va_end(ap);
}

void mr_ssh_conn_set_err_why(struct conn *c, int code, int why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	conn_vset_err(c, code, why, fmt, ap);
	va_end(ap);
}

void mr_ssh_conn_release(struct conn *c)
{
	mr_ssh_conn_teardown(c, true);
	mr_ssh_host_cfg_release(&c->cfg);
	free(c->key);
	free(c->user);
	mr_strvec_release(&c->kh_files);
	mr_strvec_release(&c->keys);
	mr_strvec_release(&c->key_pubs);
	mr_buf_release(&c->auth_log);
	free(c);
}

static int push_unique(struct mr_strvec *v, const char *s)
{
	for (size_t i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return 0;
	return mr_strvec_push(v, s);
}

struct conn *mr_ssh_conn_find(struct ssh_hal *sh, const char *host)
{
	for (struct conn *c = sh->conns; c; c = c->next)
		if (!strcmp(c->key, host))
			return c;
	return NULL;
}

static int conn_new(struct ssh_hal *sh, const char *key, const char *dest, int port, const char *jump,
		    int depth, struct conn **out, struct meshrun_err *err);

/*
 * The connection to the last hop of c's ProxyJump "h1,u@h2:2222": that hop
 * ("u@h2", port 2222) whose own jump is the hops before it ("h1"); a first hop
 * uses its own ssh_config (it may have a ProxyJump of its own), as `ssh -J` does.
 */
static int conn_get_jump(struct conn *c, int depth, struct meshrun_err *err)
{
	char *chain = strdup(c->cfg.proxy_jump), *hop, *colon, *key = NULL;
	const char *rest = "";
	int port = 0, rc;

	if (!chain)
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh to '%s': out of memory", c->cfg.dest);
	hop = strrchr(chain, ',');
	if (hop) {
		*hop++ = '\0';
		rest = chain;
	} else {
		hop = chain;
	}
	if (!strncmp(hop, "ssh://", 6))
		hop += 6;
	char *h = strrchr(hop, '@') ? strrchr(hop, '@') + 1 : hop;

	if (h[0] == '[' && (colon = strchr(h, ']'))) { /* [addr]:port, as ssh -G writes it */
		size_t n = (size_t)(colon - h - 1);
		bool has_port = colon[1] == ':';

		memmove(h, h + 1, n);
		h[n] = '\0';
		colon = has_port ? h + n + 1 : NULL;
		if (colon)
			memmove(colon, h + n + 2, strlen(h + n + 2) + 1);
	} else {
		colon = strrchr(hop, ':');
		if (colon && strchr(hop, ':') != colon)
			colon = NULL; /* a bare IPv6 address */
	}
	if (colon) {
		*colon = '\0';
		if (mr_parse_int(colon + 1, 1, 65535, &port) < 0) {
			rc = mr_err_set(err, MESHRUN_E_PARSE, "ssh to '%s': ProxyJump '%s': bad port '%s'", c->cfg.dest,
					c->cfg.proxy_jump, colon + 1);
			free(chain);
			return rc;
		}
	}
	if (port || *rest) {
		struct mr_buf b = MR_BUF_INIT;

		if (mr_buf_printf(&b, "%s:%d via %s", hop, port ? port : 0, *rest ? rest : "-") < 0) {
			free(chain);
			return mr_err_set(err, MESHRUN_E_NOMEM, "ssh to '%s': out of memory", c->cfg.dest);
		}
		key = mr_buf_detach(&b, NULL);
	}
	rc = conn_new(c->sh, key ? key : hop, hop, port, *rest ? rest : NULL, depth + 1, &c->via, err);
	if (rc < 0) {
		struct meshrun_err inner = *err;

		mr_err_set(err, inner.code, "ssh to '%s': ProxyJump '%s': %s", c->cfg.dest, c->cfg.proxy_jump,
			   inner.msg);
	}
	free(key);
	free(chain);
	return rc;
}

/* An identity to try: private key path and its public (certificate) file or "". */
static int push_key(struct conn *c, const char *priv, const char *pub)
{
	for (size_t i = 0; i < c->keys.nr; i++)
		if (!strcmp(c->keys.v[i], priv) && !strcmp(c->key_pubs.v[i], pub))
			return 0;
	if (mr_strvec_push(&c->keys, priv) < 0)
		return -1;
	return mr_strvec_push(&c->key_pubs, pub);
}

/* The keys to offer: certificates (with their keys) first, then key files. */
static int conn_keys(struct conn *c, const struct mr_hal_opts *o, const char *home)
{
	char path[4096];
	int rc = 0;

	/* libssh2 1.10 cannot sign with a certificate (a libssh2_gaps entry says so):
	 * offering it would only spend one of sshd's MaxAuthTries. */
	for (size_t i = 0; LIBSSH2_VERSION_NUM >= 0x010b00 && i < c->cfg.certificate_files.nr; i++) {
		const char *cert = c->cfg.certificate_files.v[i];
		size_t n = strlen(cert);
		const char *priv = NULL;

		/* OpenSSH pairs "KEY-cert.pub" with KEY, else tries it with each key */
		if (n > 9 && !strcmp(cert + n - 9, "-cert.pub") && n - 9 < sizeof(path)) {
			memcpy(path, cert, n - 9);
			path[n - 9] = '\0';
			priv = path;
		}
		if (priv && file_exists(priv))
			rc |= push_key(c, priv, cert);
		for (size_t k = 0; !priv && k < c->cfg.identity_files.nr; k++)
			rc |= push_key(c, c->cfg.identity_files.v[k], cert);
	}
	if (o->identity)
		rc |= push_key(c, o->identity, "");
	for (size_t i = 0; i < c->cfg.identity_files.nr; i++)
		rc |= push_key(c, c->cfg.identity_files.v[i], "");
	if (!c->cfg.from_ssh_g) { /* ssh -G lists OpenSSH's defaults itself */
		snprintf(path, sizeof(path), "%s/.ssh/id_ed25519", home);
		rc |= push_key(c, path, "");
		snprintf(path, sizeof(path), "%s/.ssh/id_ecdsa", home);
		rc |= push_key(c, path, "");
	}
	return rc;
}

/* A connection to dest, found or created under key (port, jump: overrides). */
static int conn_new(struct ssh_hal *sh, const char *key, const char *dest, int port, const char *jump,
		    int depth, struct conn **out, struct meshrun_err *err)
{
	const struct mr_hal_opts *o = &sh->base.opts;
	struct conn *c = mr_ssh_conn_find(sh, key);
	const char *home = mr_ssh_home();
	const char *u;
	char path[4096];
	int rc;

	if (c) {
		*out = c;
		return 0;
	}
	if (depth > JUMP_DEPTH_MAX)
		return mr_err_set(err, MESHRUN_E_PARSE, "ssh to '%s': more than %d jump hosts (a ProxyJump loop?)",
				  dest, JUMP_DEPTH_MAX);
	c = calloc(1, sizeof(*c));
	if (!c)
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh to '%s': out of memory", dest);
	c->fd = -1;
	c->sh = sh;
	c->chan_cap = CHAN_CAP_START;
	rc = mr_ssh_config_lookup(sh->cfg, dest, &c->cfg, err);
	if (rc < 0) {
		free(c);
		return rc;
	}
	c->key = strdup(key);
	if (port)
		c->cfg.port = port;
	if (jump) { /* a later hop: reached through the hops before it */
		MR_FREE(c->cfg.proxy_command);
		free(c->cfg.proxy_jump);
		c->cfg.proxy_jump = strdup(jump);
		if (!c->cfg.proxy_jump) {
			mr_ssh_conn_release(c);
			return mr_err_set(err, MESHRUN_E_NOMEM, "ssh to '%s': out of memory", dest);
		}
	}
	/* user@ in the destination, then opts.user, then ssh_config's User, then ours. */
	u = c->cfg.user_from_dest ? c->cfg.user : o->user ? o->user : c->cfg.user;
	c->user = strdup(u && *u ? u : mr_ssh_local_user());
	c->port = c->cfg.port ? c->cfg.port : 22;
	c->timeout_ms = c->cfg.connect_timeout_ms ? c->cfg.connect_timeout_ms : o->connect_timeout_ms;
	c->strict = c->cfg.strict ? c->cfg.strict : MR_SSH_STRICT_YES;
	if (o->accept_new_hostkeys && c->strict == MR_SSH_STRICT_YES)
		c->strict = MR_SSH_STRICT_ACCEPT_NEW;
	rc = 0;
	/* The first file named (option, UserKnownHostsFile, default) takes new keys. */
	if (o->known_hosts) {
		rc |= mr_strvec_push(&c->kh_files, o->known_hosts);
	} else if (c->cfg.known_hosts.nr) {
		rc |= mr_strvec_pushv(&c->kh_files, c->cfg.known_hosts.v);
	} else if (!c->cfg.known_hosts_none) {
		snprintf(path, sizeof(path), "%s/.ssh/known_hosts", home);
		rc |= mr_strvec_push(&c->kh_files, path);
	}
	bool have_user_file = c->kh_files.nr > 0;

	if (!o->known_hosts && file_exists("/etc/ssh/ssh_known_hosts"))
		rc |= push_unique(&c->kh_files, "/etc/ssh/ssh_known_hosts");
	rc |= conn_keys(c, o, home);
	if (rc || !c->user || !c->key) {
		mr_ssh_conn_release(c);
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh to '%s': out of memory", dest);
	}
	c->kh_add = have_user_file ? c->kh_files.v[0] : NULL;
	if (c->cfg.proxy_jump) {
		rc = conn_get_jump(c, depth, err);
		if (rc < 0) {
			mr_ssh_conn_release(c);
			return rc;
		}
	}
	c->next = sh->conns;
	sh->conns = c;
	*out = c;
	return 0;
}

/* The connection for host (created, not yet started, on first use). */
int mr_ssh_conn_get(struct ssh_hal *sh, const char *host, struct conn **out, struct meshrun_err *err)
{
	return conn_new(sh, host, host, 0, NULL, 0, out, err);
}

/* Before new work: a failed connection gets a fresh try; an idle one may be stale. */
void mr_ssh_conn_prepare(struct conn *c)
{
	if (c->state == C_READY && !c->head)
		c->was_idle = true;
	if (c->state != C_FAILED || c->head)
		return;
	mr_err_clear(&c->err);
	c->state = C_NEW;
	c->retried = false;
	c->addr[0] = '\0';
}

/* What ssh_hostkey.c needs to know of the connection. */
static void conn_hostkey(const struct conn *c, struct mr_ssh_hostkey *k)
{
	k->s = c->s;
	k->kh = c->kh;
	k->hostname = c->cfg.hostname;
	k->alias = c->cfg.alias;
	k->port = c->port;
	k->strict = c->strict;
	k->files = &c->kh_files;
	k->add_to = c->kh_add;
}

/* Try the next address; C_TCP when a connect is in progress, else C_FAILED. */
static void conn_try_next_addr(struct conn *c)
{
	int saved = 0;

	mr_close(&c->fd);
	while (c->ai_next) {
		struct addrinfo *ai = c->ai_next;
		char host[INET6_ADDRSTRLEN] = "?";
		int one = 1;

		c->ai_next = ai->ai_next;
		getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
		snprintf(c->addr, sizeof(c->addr), ai->ai_family == AF_INET6 ? "[%s]:%d" : "%s:%d",
			 host, c->port);
		c->fd = mr_socket(ai->ai_family, SOCK_STREAM, MR_SOCK_NONBLOCK | MR_SOCK_CLOEXEC);
		if (c->fd < 0) {
			saved = errno;
			continue;
		}
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
			c->state = C_TCP;
			return;
		}
		saved = errno;
		mr_close(&c->fd);
	}
	saved = saved ? saved : EHOSTUNREACH;
	mr_ssh_conn_set_err_why(c, MESHRUN_E_CONNECT, saved, "connect: %s", strerror(saved));
	c->state = C_FAILED;
}

static int count_connecting(const struct ssh_hal *sh)
{
	int n = 0;

	for (const struct conn *c = sh->conns; c; c = c->next)
		if (c->state == C_TCP || c->state == C_HANDSHAKE || c->state == C_AUTH)
			n++;
	return n;
}

/* A socketpair: sv[0] ours (non-blocking), sv[1] for the other side (blocking:
 * a ProxyCommand's stdio). Both close-on-exec. */
static int proxy_socketpair(struct conn *c, int sv[2])
{
	if (mr_socketpair(AF_UNIX, SOCK_STREAM, MR_SOCK_CLOEXEC, sv) < 0) {
		mr_ssh_conn_set_err(c, MESHRUN_E_SYS, "socketpair: %s", strerror(errno));
		return -1;
	}
	if (mr_set_nonblock(sv[0], true) < 0) {
		mr_ssh_conn_set_err(c, MESHRUN_E_SYS, "socketpair: %s", strerror(errno));
		mr_close(&sv[0]);
		mr_close(&sv[1]);
		return -1;
	}
	return 0;
}

/* The session's socket is one end of a socketpair: ProxyCommand or ProxyJump. */
static void conn_start_proxy(struct conn *c)
{
	int sv[2] = { -1, -1 };

	if (proxy_socketpair(c, sv) < 0) {
		c->state = C_FAILED;
		return;
	}
	if (c->cfg.proxy_jump) {
		struct job *t = mr_ssh_job_new(J_TUNNEL, c->cfg.hostname);

		snprintf(c->addr, sizeof(c->addr), "via '%.*s'", (int)sizeof(c->addr) - 8, c->via->cfg.dest);
		if (!t) {
			mr_close(&sv[0]);
			mr_close(&sv[1]);
			mr_ssh_conn_set_err(c, MESHRUN_E_NOMEM, "out of memory");
			c->state = C_FAILED;
			return;
		}
		t->tun_fd = sv[0];
		t->tun_port = c->port;
		t->tun_for = c;
		t->base.in_closed = false;
		c->tunnel = t;
		c->fd = sv[1];
		mr_set_nonblock(c->fd, true);
		mr_ssh_conn_prepare(c->via);
		mr_ssh_job_link(c->via, t, false);
	} else {
		char *argv[] = { (char *)"sh", (char *)"-c", c->cfg.proxy_command, NULL };
		struct mr_spawn_opts so;
		struct meshrun_err e = MESHRUN_ERR_INIT;
		pid_t pid;

		snprintf(c->addr, sizeof(c->addr), "ProxyCommand");
		memset(&so, 0, sizeof(so));
		so.file = "/bin/sh"; /* as OpenSSH runs it, whatever the login shell */
		so.argv = argv;
		so.what = "ProxyCommand";
		so.fds[0] = sv[1];
		so.fds[1] = sv[1];
		so.fds[2] = STDERR_FILENO; /* its complaints reach the user, as with ssh */
		so.flags = MR_SPAWN_SETPGID;
		if (mr_spawn_child(&so, &pid, &e) < 0) {
			mr_close(&sv[0]);
			mr_close(&sv[1]);
			mr_ssh_conn_set_err(c, MESHRUN_E_EXEC, "ProxyCommand '%s': %s", c->cfg.proxy_command, e.msg);
			c->state = C_FAILED;
			return;
		}
		mr_close(&sv[1]);
		c->proxy_pid = pid;
		c->fd = sv[0];
	}
	c->state = C_HANDSHAKE; /* the banner waits in the socketpair until the path is up */
}

static void conn_start(struct conn *c)
{
	struct addrinfo hints = { 0 };
	char port[16];
	int rc;

	c->deadline_ms = mr_now_ms() + c->timeout_ms;
	c->addr[0] = '\0';
	c->auth = A_START;
	c->key_idx = 0;
	mr_buf_reset(&c->auth_log);
	c->chan_cap = CHAN_CAP_START;
	c->cap_known = false;
	c->was_idle = false;
	c->s = libssh2_session_init_ex(NULL, NULL, NULL, c);
	if (!c->s) {
		mr_ssh_conn_set_err(c, MESHRUN_E_NOMEM, "libssh2_session_init failed");
		c->state = C_FAILED;
		return;
	}
	libssh2_session_set_blocking(c->s, 0);
	c->kh = libssh2_knownhost_init(c->s);
	for (size_t i = 0; c->kh && i < c->kh_files.nr; i++)
		if (file_exists(c->kh_files.v[i]) &&
		    libssh2_knownhost_readfile(c->kh, c->kh_files.v[i], LIBSSH2_KNOWNHOST_FILE_OPENSSH) < 0) {
			mr_ssh_conn_set_err(c, MESHRUN_E_PARSE, "cannot read known_hosts file '%s'",
				     c->kh_files.v[i]);
			c->state = C_FAILED;
			return;
		}
	{
		struct mr_ssh_hostkey k;

		conn_hostkey(c, &k);
		mr_ssh_hostkey_prefer(&k);
	}

	mr_err_clear(&c->via_err);
	if (c->cfg.proxy_jump || c->cfg.proxy_command) {
		conn_start_proxy(c);
		return;
	}
	hints.ai_family = c->cfg.address_family;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%d", c->port);
	/* Name resolution blocks (getaddrinfo); IP addresses and /etc/hosts are instant. */
	rc = getaddrinfo(c->cfg.hostname, port, &hints, &c->ai_list);
	if (rc) {
		mr_ssh_conn_set_err_why(c, MESHRUN_E_CONNECT, MR_HAL_WHY_RESOLVE, "cannot resolve '%s': %s", c->cfg.hostname,
			     gai_strerror(rc));
		c->state = C_FAILED;
		return;
	}
	c->ai_next = c->ai_list;
	conn_try_next_addr(c);
}

/* Decode base64 (no whitespace inside); the length, or -1. */
static long b64_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned long acc = 0;
	int bits = 0;
	size_t len = 0;

	for (size_t i = 0; i < n && in[i] != '='; i++) {
		const char *p = strchr(tab, in[i]);

		if (!p || !in[i])
			return -1;
		acc = (acc << 6) | (unsigned long)(p - tab);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (len == cap)
				return -1;
			out[len++] = (unsigned char)(acc >> bits);
		}
	}
	return (long)len;
}

/* IdentitiesOnly: is the agent's key one whose .pub (or certificate) we were given? */
static bool agent_key_listed(const struct conn *c, const struct libssh2_agent_publickey *id)
{
	for (size_t i = 0; i < c->keys.nr; i++) {
		char path[4096], line[16384];
		unsigned char blob[8192];
		const char *b64, *end;
		FILE *f;
		long n;

		if (c->key_pubs.v[i][0])
			snprintf(path, sizeof(path), "%s", c->key_pubs.v[i]);
		else
			snprintf(path, sizeof(path), "%s.pub", c->keys.v[i]);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
		b64 = strchr(line, ' ');
		if (!b64)
			continue;
		b64++;
		end = b64 + strcspn(b64, " \r\n");
		n = b64_decode(b64, (size_t)(end - b64), blob, sizeof(blob));
		if (n > 0 && (size_t)n == id->blob_len && !memcmp(blob, id->blob, id->blob_len))
			return true;
	}
	return false;
}

enum auth_res { AUTH_WAIT, AUTH_ENDED, AUTH_REFUSED };

/*
 * The rc of one publickey attempt (agent or key file), alike for both: success
 * or a transport error ends authentication (C_READY or C_FAILED); any other
 * error is a refusal, and the caller tries the next identity.
 */
static enum auth_res auth_attempt(struct conn *c, int rc)
{
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return AUTH_WAIT;
	if (rc == 0) {
		agent_close(c);
		c->state = C_READY;
		return AUTH_ENDED;
	}
	if (is_socket_error(rc)) {
		mr_ssh_conn_set_err(c, MESHRUN_E_CONNECT, "during authentication: %s", mr_ssh_errmsg(c->s, rc));
		c->state = C_FAILED;
		return AUTH_ENDED;
	}
	return AUTH_REFUSED;
}

/* One step of publickey authentication; C_READY or C_FAILED when it ends. */
static bool conn_auth_step(struct conn *c)
{
	enum auth_res res;
	int rc;

	for (;;) {
		switch (c->auth) {
		case A_START: {
			const char *sock = c->cfg.identity_agent ? c->cfg.identity_agent : getenv("SSH_AUTH_SOCK");

			c->auth = A_KEY_NEXT;
			/* What libssh2 cannot do here, named with its option, in the error if it fails. */
			for (size_t i = 0; i < c->cfg.libssh2_gaps.nr; i++)
				mr_buf_printf(&c->auth_log, "%s; ", c->cfg.libssh2_gaps.v[i]);
			for (size_t i = 0; i < c->cfg.auth_notes.nr; i++)
				mr_buf_printf(&c->auth_log, "%s; ", c->cfg.auth_notes.v[i]);
			if (c->cfg.identity_agent_none || !sock || !*sock)
				break;
			c->agent = libssh2_agent_init(c->s);
			if (c->agent && c->cfg.identity_agent)
				libssh2_agent_set_identity_path(c->agent, c->cfg.identity_agent);
			/* The agent is a local unix socket: these calls block, briefly. */
			if (!c->agent || libssh2_agent_connect(c->agent) < 0 ||
			    libssh2_agent_list_identities(c->agent) < 0) {
				if (c->cfg.identity_agent)
					mr_buf_printf(&c->auth_log, "IdentityAgent %s: cannot use it; ", c->cfg.identity_agent);
				else
					mr_buf_puts(&c->auth_log, "ssh-agent not usable; ");
				agent_close(c);
				break;
			}
			c->agent_id = NULL;
			c->auth = A_AGENT_NEXT;
			break;
		}
		case A_AGENT_NEXT:
			if (libssh2_agent_get_identity(c->agent, &c->agent_id, c->agent_id) != 0) {
				agent_close(c);
				c->auth = A_KEY_NEXT;
				break;
			}
			if (c->agent_id->blob_len >= 7 && !memcmp(c->agent_id->blob + 4, "sk-", 3)) {
				mr_buf_printf(&c->auth_log, "agent key '%s' is a FIDO security key (sk-), which libssh2 "
					      "cannot use; ", c->agent_id->comment ? c->agent_id->comment : "?");
				break;
			}
			if (c->cfg.identities_only && !agent_key_listed(c, c->agent_id))
				break; /* IdentitiesOnly: not one of ours */
			c->auth = A_AGENT_TRY;
			break;
		case A_AGENT_TRY:
			rc = libssh2_agent_userauth(c->agent, c->user, c->agent_id);
			res = auth_attempt(c, rc);
			if (res != AUTH_REFUSED)
				return res == AUTH_ENDED;
			mr_buf_printf(&c->auth_log, "agent key '%s' refused; ",
				      c->agent_id && c->agent_id->comment ? c->agent_id->comment : "?");
			c->auth = A_AGENT_NEXT;
			break;
		case A_KEY_NEXT:
			while (c->key_idx < c->keys.nr &&
			       (!file_exists(c->keys.v[c->key_idx]) || mr_ssh_key_is_sk(c->keys.v[c->key_idx]) ||
				(c->key_pubs.v[c->key_idx][0] && !file_exists(c->key_pubs.v[c->key_idx]))))
				c->key_idx++;
			if (c->key_idx == c->keys.nr) {
				mr_ssh_conn_set_err(c, MESHRUN_E_AUTH, "authentication as '%s' failed: %s%s",
					     c->user, mr_buf_cstr(&c->auth_log),
					     c->auth_log.len ? "no key left to try" :
							       "no ssh-agent and no key file found");
				c->state = C_FAILED;
				return true;
			}
			c->auth = A_KEY_TRY;
			break;
		case A_KEY_TRY: {
			const char *path = c->keys.v[c->key_idx];
			const char *pub = c->key_pubs.v[c->key_idx];

			rc = libssh2_userauth_publickey_fromfile_ex(c->s, c->user, (unsigned)strlen(c->user),
								    pub[0] ? pub : NULL, path, NULL);
			res = auth_attempt(c, rc);
			if (res != AUTH_REFUSED)
				return res == AUTH_ENDED;
			if (pub[0])
				mr_buf_printf(&c->auth_log, "CertificateFile '%s' (key '%s') refused; ", pub, path);
			else
				mr_buf_printf(&c->auth_log, "key '%s' %s; ", path,
				      rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED || rc == LIBSSH2_ERROR_FILE ?
					      "unreadable (bad file or needs a passphrase)" : "refused");
			c->key_idx++;
			c->auth = A_KEY_NEXT;
			break;
		}
		}
	}
}

/* Advance connection set-up; true when the state changed. */
static bool conn_connect_step(struct conn *c)
{
	int rc;

	if (c->state >= C_TCP && c->state <= C_AUTH && mr_now_ms() >= c->deadline_ms) {
		mr_ssh_conn_set_err_why(c, MESHRUN_E_CONNECT, ETIMEDOUT, "connect timed out after %d ms", c->timeout_ms);
		c->state = C_FAILED;
		return true;
	}
	switch (c->state) {
	case C_TCP: {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);

		if (!(c->revents & (POLLOUT | POLLERR | POLLHUP)))
			return false;
		c->revents = 0;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			soerr = errno;
		if (soerr) {
			if (c->ai_next) {
				conn_try_next_addr(c);
				return true;
			}
			mr_ssh_conn_set_err_why(c, MESHRUN_E_CONNECT, soerr, "connect: %s", strerror(soerr));
			c->state = C_FAILED;
			return true;
		}
		c->state = C_HANDSHAKE;
		return true;
	}
	case C_HANDSHAKE:
		rc = libssh2_session_handshake(c->s, c->fd);
		if (rc == LIBSSH2_ERROR_EAGAIN)
			return false;
		if (rc) {
			mr_ssh_conn_set_err(c, MESHRUN_E_CONNECT, "ssh handshake failed: %s", mr_ssh_errmsg(c->s, rc));
			c->state = C_FAILED;
			return true;
		}
		{
			struct mr_ssh_hostkey k;
			char msg[MESHRUN_ERR_MSG_MAX - 64];
			int why = 0;

			conn_hostkey(c, &k);
			if (!mr_ssh_hostkey_check(&k, msg, sizeof(msg), &why)) {
				mr_ssh_conn_set_err_why(c, MESHRUN_E_HOSTKEY, why, "%s", msg);
				c->state = C_FAILED;
				return true;
			}
		}
		c->state = C_AUTH;
		return true;
	case C_AUTH:
		return conn_auth_step(c);
	default:
		return false;
	}
}

/* A jump host that hosts behind it wait for (exempt from max_parallel: they
 * count already, and would wait for it forever). */
static bool is_jump_for_someone(const struct conn *c)
{
	for (const struct job *j = c->head; j; j = j->next)
		if (j->kind == J_TUNNEL)
			return true;
	return false;
}

void mr_ssh_conn_advance(struct conn *c)
{
	if (c->state == C_NEW) {
		if (!c->head && !c->wanted)
			return;
		if (count_connecting(c->sh) >= c->sh->base.opts.max_parallel && !is_jump_for_someone(c))
			return;
		conn_start(c);
	}
	while (c->state >= C_TCP && c->state <= C_AUTH)
		if (!conn_connect_step(c))
			break;
}
