/*
 * ssh_conn.c - the ssh backend's connections (ssh_impl.h): one per host, reached
 * and authenticated without blocking, as OpenSSH's sshconnect.c and sshconnect2.c
 * do it: address by address, handshake, host key check, then publickey with the
 * agent's identities and the key files in turn.
 *
 *  - Host keys: libssh2 prefers ECDSA; we set the host key method order to the
 *    key types known_hosts holds for the host (ed25519 first otherwise).
 */
#include "common/compat.h"
#include "hal/ssh_impl.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/port.h"
#include "common/timeutil.h"
#include "hal/ssh_hostkey.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

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

void mr_ssh_conn_teardown(struct conn *c, bool polite)
{
	agent_close(c);
	if (c->s && polite && c->state == C_READY)
		libssh2_session_disconnect(c->s, "meshrun done"); /* one try, non-blocking */
	/* Close the socket first: with it gone, session_free cannot wait on it. */
	mr_close(&c->fd);
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

void mr_ssh_conn_set_err(struct conn *c, int code, const char *fmt, ...)
{
	char msg[MESHRUN_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mr_err_set(&c->err, code, "ssh to '%s' (%s): %s", c->cfg.dest,
		   c->addr[0] ? c->addr : c->cfg.hostname, msg);
}

void mr_ssh_conn_release(struct conn *c)
{
	mr_ssh_conn_teardown(c, true);
	mr_ssh_host_cfg_release(&c->cfg);
	free(c->user);
	mr_strvec_release(&c->kh_files);
	mr_strvec_release(&c->keys);
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
		if (!strcmp(c->cfg.dest, host))
			return c;
	return NULL;
}

/* The connection for host (created, not yet started, on first use). */
int mr_ssh_conn_get(struct ssh_hal *sh, const char *host, struct conn **out, struct meshrun_err *err)
{
	const struct mr_hal_opts *o = &sh->base.opts;
	struct conn *c = mr_ssh_conn_find(sh, host);
	const char *home = mr_ssh_home();
	const char *u;
	char path[4096];
	int rc;

	if (c) {
		*out = c;
		return 0;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh to '%s': out of memory", host);
	c->fd = -1;
	c->sh = sh;
	c->chan_cap = CHAN_CAP_START;
	rc = mr_ssh_config_lookup(sh->cfg, host, &c->cfg, err);
	if (rc < 0) {
		free(c);
		return rc;
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
	if (o->identity)
		rc |= push_unique(&c->keys, o->identity);
	for (size_t i = 0; i < c->cfg.identity_files.nr; i++)
		rc |= push_unique(&c->keys, c->cfg.identity_files.v[i]);
	snprintf(path, sizeof(path), "%s/.ssh/id_ed25519", home);
	rc |= push_unique(&c->keys, path);
	snprintf(path, sizeof(path), "%s/.ssh/id_ecdsa", home);
	rc |= push_unique(&c->keys, path);
	if (rc || !c->user) {
		mr_ssh_conn_release(c);
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh to '%s': out of memory", host);
	}
	c->kh_add = have_user_file ? c->kh_files.v[0] : NULL;
	c->next = sh->conns;
	sh->conns = c;
	*out = c;
	return 0;
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
	mr_ssh_conn_set_err(c, MESHRUN_E_CONNECT, "connect: %s", strerror(saved ? saved : EHOSTUNREACH));
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

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%d", c->port);
	/* Name resolution blocks (getaddrinfo); IP addresses and /etc/hosts are instant. */
	rc = getaddrinfo(c->cfg.hostname, port, &hints, &c->ai_list);
	if (rc) {
		mr_ssh_conn_set_err(c, MESHRUN_E_CONNECT, "cannot resolve '%s': %s", c->cfg.hostname,
			     gai_strerror(rc));
		c->state = C_FAILED;
		return;
	}
	c->ai_next = c->ai_list;
	conn_try_next_addr(c);
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
			const char *sock = getenv("SSH_AUTH_SOCK");

			c->auth = A_KEY_NEXT;
			if (!sock || !*sock)
				break;
			c->agent = libssh2_agent_init(c->s);
			/* The agent is a local unix socket: these calls block, briefly. */
			if (!c->agent || libssh2_agent_connect(c->agent) < 0 ||
			    libssh2_agent_list_identities(c->agent) < 0) {
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
			while (c->key_idx < c->keys.nr && !file_exists(c->keys.v[c->key_idx]))
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

			rc = libssh2_userauth_publickey_fromfile_ex(c->s, c->user, (unsigned)strlen(c->user),
								    NULL, path, NULL);
			res = auth_attempt(c, rc);
			if (res != AUTH_REFUSED)
				return res == AUTH_ENDED;
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
		mr_ssh_conn_set_err(c, MESHRUN_E_CONNECT, "connect timed out after %d ms", c->timeout_ms);
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
			mr_ssh_conn_set_err(c, MESHRUN_E_CONNECT, "connect: %s", strerror(soerr));
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

			conn_hostkey(c, &k);
			if (!mr_ssh_hostkey_check(&k, msg, sizeof(msg))) {
				mr_ssh_conn_set_err(c, MESHRUN_E_HOSTKEY, "%s", msg);
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

void mr_ssh_conn_advance(struct conn *c)
{
	if (c->state == C_NEW) {
		if ((!c->head && !c->wanted) || count_connecting(c->sh) >= c->sh->base.opts.max_parallel)
			return;
		conn_start(c);
	}
	while (c->state >= C_TCP && c->state <= C_AUTH)
		if (!conn_connect_step(c))
			break;
}
