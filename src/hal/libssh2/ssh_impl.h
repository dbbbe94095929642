/*
 * ssh_impl.h - what the ssh backend's files share (internal to src/hal; the way
 * OpenSSH splits sshconnect.c from channels.c):
 *
 *   ssh.c       the hal ops, the remote command lines and the poll loop (pump)
 *   ssh_chan.c  a command as a channel (struct job): its state machine, output,
 *               exit status, kills and the watchdog's lines
 *   ssh_conn.c  a host's connection (struct conn): address, handshake, host key,
 *               publickey authentication; libssh2 error texts and classes;
 *               transports other than TCP: ProxyCommand (a child on a
 *               socketpair) and ProxyJump (a socketpair whose other end a
 *               J_TUNNEL job on the jump host's connection pumps to and from a
 *               direct-tcpip channel, in the same poll loop)
 *
 * Calls go down: ssh.c -> ssh_chan.c -> ssh_conn.c (ssh_conn.c knows no job).
 *
 * One poll loop drives everything: every host has one connection (struct conn),
 * made in parallel (at most opts.max_parallel handshakes at once) and reused for
 * every command to that host; every command is a channel (struct job) on it.
 * libssh2 runs non-blocking; we wait in the directions that
 * libssh2_session_block_directions() reports. Measured facts these files rely on
 * are in ../shared/libssh2-notes.md; each is written where it bites.
 */
#ifndef MR_HAL_SSH_IMPL_H
#define MR_HAL_SSH_IMPL_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "hal/hal_impl.h"
#include "hal/sh.h"
#include "hal/ssh_config.h"

#include <libssh2.h>
#include <netdb.h>
#include <netinet/in.h>

#define PGID_MARKER MR_HAL_PGID_MARKER
#define CHAN_CAP_START 64            /* until sshd's MaxSessions refuses one */
#define READ_CHUNK 32768

enum conn_state { C_NEW, C_TCP, C_HANDSHAKE, C_AUTH, C_READY, C_FAILED };
enum auth_step { A_START, A_AGENT_NEXT, A_AGENT_TRY, A_KEY_NEXT, A_KEY_TRY };
/* J_SPARE: a shell started ahead of need (opts.ssh_spares, sh.h "spare"), whose
 * channel the next J_RUN, J_PROC or J_KILL there takes (ssh_chan.c take_spare). */
enum job_kind { J_RUN, J_PROC, J_WATCHDOG, J_KILL, J_TUNNEL, J_SPARE };
/* States in the order a channel goes through them. */
enum job_state { S_WAIT, S_OPEN, S_EXEC, S_IO, S_CLOSE, S_WAITCLOSED, S_FREE };
/* The libssh2 call a job has pending (see conn->owner); S_IO's in this order. */
enum job_op { OP_NONE, OP_WRITE, OP_EOF, OP_READ_OUT, OP_READ_ERR };

struct ssh_hal;
struct conn;

struct job {
	/* command line, stdin, marker, pgid, end, output (hal_impl.h); a tunnel's
	 * base.in is what it read from tun_fd, its base.pout channel data not yet
	 * written to tun_fd */
	struct mr_hal_job base;
	struct conn *conn;            /* NULL once unlinked (no channel work left) */
	struct job *prev, *next;      /* in conn's list */
	enum job_kind kind;
	enum job_state st;
	enum job_op pending;
	LIBSSH2_CHANNEL *ch;
	size_t write_len;             /* length of the write that returned EAGAIN */
	bool eof_sent;
	struct mr_hal *run_hal;       /* run: told when the result is there (mr_hal_cmd_done) */
	struct ssh_proc *proc;        /* proc: holds a reference (job freed when both gone) */
	/* tunnel (a direct-tcpip channel to tun_host:tun_port; base.cmdline holds tun_host) */
	int tun_fd;                   /* our end of the socketpair; -1: closed */
	int tun_port;
	struct conn *tun_for;         /* the connection it carries; NULL once gone */
	bool ready;                   /* spare: its shell said MR_HAL_SPARE_READY */
};

struct conn {
	struct ssh_hal *sh;
	struct conn *next;
	char *key;                    /* what mr_ssh_conn_find() matches: the destination,
				       * or "hop via earlier-hops" for a jump host */
	struct mr_ssh_host_cfg cfg;   /* cfg.alias is the name the user gave */
	struct conn *via;             /* ProxyJump: the last jump host's connection */
	struct job *tunnel;           /* ... and the tunnel job on it; NULL when none */
	struct meshrun_err via_err;   /* why the tunnel failed */
	pid_t proxy_pid;              /* ProxyCommand's process (group leader); 0: none */
	char *user;
	int port;
	int timeout_ms;
	enum mr_ssh_strict strict;
	struct mr_strvec kh_files;    /* known_hosts files read */
	const char *kh_add;           /* where new keys go (into kh_files), or NULL */
	struct mr_strvec keys;        /* key files to try, in order */
	struct mr_strvec key_pubs;    /* ... with this public key/certificate file, "": derived */
	enum conn_state state;
	int fd;
	struct addrinfo *ai_list, *ai_next;
	char addr[INET6_ADDRSTRLEN + 8]; /* "10.0.0.1:22" of the current attempt */
	LIBSSH2_SESSION *s;
	LIBSSH2_KNOWNHOSTS *kh;
	LIBSSH2_AGENT *agent;
	struct libssh2_agent_publickey *agent_id;
	enum auth_step auth;
	size_t key_idx;
	struct mr_buf auth_log;       /* what was tried, for the error message */
	int64_t deadline_ms;
	short revents;
	struct meshrun_err err;       /* why it failed (state C_FAILED) */
	bool broken;                  /* a job hit a transport error: fail the conn */
	bool stale;                   /* ... on an idle reused connection: reconnect once */
	bool wanted;                  /* mr_hal_connect waits for it (no jobs needed) */
	size_t pidx;                  /* its index in the pollset, when polled */
	bool was_idle;                /* READY before this batch: may be stale */
	bool retried;
	struct job *head, *tail;
	unsigned unlinks;             /* jobs unlinked so far: a walk of the list that
				       * steps jobs restarts when it changes (a step
				       * may free another job, e.g. take_spare's spare) */
	struct job *opener, *owner, *watchdog;
	int nchan, chan_cap;
	bool cap_known;
	int nspare;                   /* J_SPARE jobs on it */
	bool spares_off;              /* sshd refused one (MaxSessions): no more */
};

struct ssh_proc {
	struct mr_proc base;
	struct job *job;
};

struct ssh_hal {
	struct mr_hal base;
	struct mr_ssh_config *cfg;
	bool cfg_borrowed;   /* cfg belongs to the auto hal (mr_hal_new_ssh_cfg) */
	struct conn *conns;
	struct mr_pollset ps;
	char spare_token[48];         /* the line that ends a spare's command (random) */
};

#define to_ssh_hal(h) mr_container_of(h, struct ssh_hal, base)
#define to_ssh_proc(p) mr_container_of(p, struct ssh_proc, base)

/* ---- ssh_conn.c ------------------------------------------------------------- */

/* libssh2's last error text for rc on s, or "libssh2 error N" (static buffer). */
const char *mr_ssh_errmsg(LIBSSH2_SESSION *s, int rc);
/* Channel-level errors leave the connection usable; everything else breaks it. */
bool mr_ssh_is_conn_error(int rc);
/* c->err = "ssh to 'alias' (addr): ..." unless already set. */
void mr_ssh_conn_set_err(struct conn *c, int code, const char *fmt, ...) MR_PRINTF(3, 4);
/* ... recording why (an errno or enum mr_hal_why, for mr_hal_err_hint()). */
void mr_ssh_conn_set_err_why(struct conn *c, int code, int why, const char *fmt, ...) MR_PRINTF(4, 5);
/* The connection for host, or NULL. */
struct conn *mr_ssh_conn_find(struct ssh_hal *sh, const char *host);
/* The connection for host (created, not yet started, on first use: ssh_config and
 * the options give user, port, known_hosts and keys). */
int mr_ssh_conn_get(struct ssh_hal *sh, const char *host, struct conn **out,
		    struct meshrun_err *err);
/* Before new work: a failed connection gets a fresh try; an idle one may be stale. */
void mr_ssh_conn_prepare(struct conn *c);
/* Start a C_NEW connection that has work (within opts.max_parallel) and advance its
 * set-up as far as it goes without waiting; ends in C_READY or C_FAILED (c->err). */
void mr_ssh_conn_advance(struct conn *c);
/* The tunnel job j (J_TUNNEL) is being freed: close its fd, tell its connection. */
void mr_ssh_tunnel_gone(struct job *j);
/* Close agent, socket, known hosts and session (polite: say goodbye if READY). */
void mr_ssh_conn_teardown(struct conn *c, bool polite);
/* Tear down and free a connection that has no job left. */
void mr_ssh_conn_release(struct conn *c);

/* ---- ssh_chan.c ------------------------------------------------------------- */

/* How long a command waits for a spare still starting before it opens a
 * channel of its own (a login shell that never says ready, say). */
#define MR_SSH_SPARE_WAIT_MS 2000
/* When the first command on c that waits for a spare still starting stops
 * waiting (at most MR_SSH_SPARE_WAIT_MS after that spare began); -1: none. */
int64_t mr_ssh_spare_wait_end(const struct conn *c);
/* A job of kind running cmdline (copied); NULL when out of memory. */
struct job *mr_ssh_job_new(enum job_kind kind, const char *cmdline);
void mr_ssh_job_free(struct job *j);
/* Queue j on c, at the head (before waiting commands) or the tail. */
void mr_ssh_job_link(struct conn *c, struct job *j, bool at_head);
/* Take j out of its connection; free it unless a proc still holds it. */
void mr_ssh_job_unlink(struct job *j);
/* Record a failure as j's result (once). */
void mr_ssh_job_fail(struct job *j, int code, const char *fmt, ...) MR_PRINTF(3, 4);
/* Queue `kill -SIG -PGID` on c, ahead of waiting commands; NULL when out of memory. */
struct job *mr_ssh_queue_kill(struct conn *c, long pgid, int sig);
/* A proc's undelivered output on that stream (err: stderr) is over its cap. */
bool mr_ssh_job_throttled(const struct job *j, bool err);
/* Start spares on c (a ready connection) up to opts.ssh_spares, while no
 * command there waits for a channel and MaxSessions leaves room. */
void mr_ssh_spares_top_up(struct conn *c);
/* Advance one job as far as it goes without waiting; true on progress. May unlink
 * (and free) j, or mark its connection broken. */
bool mr_ssh_job_step(struct job *j);
/* The connection is gone: every job on it gets a result and is unlinked. */
void mr_ssh_conn_fail(struct conn *c);
/* Unlink every job, then mr_ssh_conn_release(). */
void mr_ssh_conn_free(struct conn *c);

#endif
