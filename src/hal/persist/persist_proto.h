/*
 * persist_proto.h - the frames between a persist client (persist.c, a hal
 * backend) and the persist daemon (persist_daemon.c) that keeps authenticated
 * libssh2 connections for later meshrun/meshconfig runs (--persist).
 *
 * A frame on the unix socket:
 *
 *   u32 len | u8 type | u32 id | body (len - 5 bytes)
 *
 * every integer big-endian; len counts what follows it and is at least 5 and
 * at most MR_PF_FRAME_MAX. A body is a sequence of fields: u32, i32 (two's
 * complement as u32), and strings (u32 length, then the bytes; 0xffffffff is
 * NULL). id names the client's command or process (0: none). The reader never
 * trusts a length: a field past the body's end marks the reader bad.
 *
 * Client -> daemon                     Daemon -> client
 *   HELLO   u32 version, u32 idle_ms     HELLO_OK u32 version, u32 daemon pid
 *   SPAWN   str host, str cwd,           REPLY    ERR (to SPAWN, SIGNAL, REMOVE,
 *           u32 argc, argc str,                   RELEASE with want_reply, BYE,
 *           u32 envc, envc str                    STOP)
 *   WRITE   bytes of stdin               OUT/ERR  bytes of stdout/stderr
 *   CLOSE_STDIN                          EXIT     i32 hal_rc, i32 status,
 *   SIGNAL  i32 signal                            i32 signal, ERR
 *   RELEASE u32 want_reply               CONNECTED u32 n, n x ERR
 *   REMOVE  str host, str dir
 *   CONNECT u32 n, n str
 *   BYE     (kill my processes, remove my     RESOLVED u32 n, n x (ERR, str gap)
 *           directories, then REPLY)
 *   STOP    (end the daemon)
 *   RESOLVE u32 n, n str
 *
 * RESOLVE asks the daemon's ssh_config (`ssh -G`, cached for the daemon's
 * life) for each host: ERR is the lookup's error, gap the first thing
 * libssh2 cannot do for the host (NULL: none), which sends the host to the
 * OpenSSH backend (mux.c). The daemon's socket name covers the ssh_config
 * files' identity and mtime (persist_conn.c), so an edited config never meets a
 * daemon that cached the old one.
 *
 * where ERR is a struct meshrun_err: i32 code, i32 sys_errno, str msg. SPAWN,
 * SIGNAL and RELEASE carry the client's process id; the daemon's events for it
 * carry it back.
 *
 * Ownership: a writer appends to the caller's mr_buf; a parsed frame points
 * into the buffer it was parsed from, valid until that buffer changes.
 */
#ifndef MR_HAL_PERSIST_PROTO_H
#define MR_HAL_PERSIST_PROTO_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "meshrun/err.h"

#define MR_PF_VERSION 2
#define MR_PF_HEADER 9                     /* len + type + id */
#define MR_PF_FRAME_MAX ((uint32_t)16 << 20) /* a frame's len, at most */
#define MR_PF_CHUNK 65536                  /* output/stdin relayed in frames this big */

enum mr_pf_type {
	MR_PF_HELLO = 1,
	MR_PF_SPAWN,
	MR_PF_WRITE,
	MR_PF_CLOSE_STDIN,
	MR_PF_SIGNAL,
	MR_PF_RELEASE,
	MR_PF_REMOVE,
	MR_PF_CONNECT,
	MR_PF_BYE,
	MR_PF_STOP,
	MR_PF_RESOLVE,
	MR_PF_HELLO_OK = 32,
	MR_PF_REPLY,
	MR_PF_OUT,
	MR_PF_ERR,
	MR_PF_EXIT,
	MR_PF_CONNECTED,
	MR_PF_RESOLVED,
};

/* One parsed frame; body points into the parsed buffer. */
struct mr_pf_frame {
	uint8_t type;
	uint32_t id;
	const unsigned char *body;
	size_t len;
};

/* Writing: begin, append fields, end (which fills in len). Each returns 0, or
 * -1 when out of memory (or, for end, when the frame is over MR_PF_FRAME_MAX). */
int mr_pf_begin(struct mr_buf *b, uint8_t type, uint32_t id, size_t *start);
int mr_pf_put_u32(struct mr_buf *b, uint32_t v);
int mr_pf_put_i32(struct mr_buf *b, int32_t v);
int mr_pf_put_bytes(struct mr_buf *b, const void *data, size_t len);
int mr_pf_put_str(struct mr_buf *b, const char *s); /* NULL allowed */
/* A NULL-terminated vector (NULL: none) as u32 count and strings. */
int mr_pf_put_strv(struct mr_buf *b, char *const *v);
int mr_pf_put_err(struct mr_buf *b, const struct meshrun_err *e); /* NULL: no error */
int mr_pf_end(struct mr_buf *b, size_t start);

/*
 * The next complete frame of in[*off..in->len): 1 (f filled, *off moved past
 * it), 0 (incomplete: read more), -1 (len out of bounds: the peer is broken).
 */
int mr_pf_next(const struct mr_buf *in, size_t *off, struct mr_pf_frame *f);

/* Reading a body. After any field past the end r->bad is set and every later
 * read gives 0/NULL; check bad once at the end. */
struct mr_pf_reader {
	const unsigned char *p;
	size_t left;
	bool bad;
};
void mr_pf_reader_init(struct mr_pf_reader *r, const struct mr_pf_frame *f);
uint32_t mr_pf_get_u32(struct mr_pf_reader *r);
int32_t mr_pf_get_i32(struct mr_pf_reader *r);
/* A string field: *data and *len point into the frame; *data NULL for NULL. */
void mr_pf_get_bytes(struct mr_pf_reader *r, const char **data, size_t *len);
/* A string field as a malloc'd C string (*out NULL for NULL). -1 when bad, when
 * it holds a NUL byte, or out of memory (bad set too). */
int mr_pf_get_str(struct mr_pf_reader *r, char **out);
/* An ERR field into *e (the message cut to fit). */
void mr_pf_get_err(struct mr_pf_reader *r, struct meshrun_err *e);
/* u32 count then strings, pushed onto sv (count bounded by the body's size). */
int mr_pf_get_strv(struct mr_pf_reader *r, struct mr_strvec *sv);

/* ---- the daemon (persist_daemon.c) ---- */

struct mr_hal_opts;
/*
 * Serve clients on the listening unix socket lfd (bound at path, which is
 * unlinked at the end if it is still ours) until STOP, or until nothing has
 * happened for idle_ms with no client connected. Remote hosts through one ssh
 * hal made with opts. Returns when done (the caller _exit()s).
 */
void mr_persist_daemon_run(int lfd, const char *path, const struct mr_hal_opts *opts, int64_t idle_ms);

#endif
