/*
 * fdio.h - all raw fd I/O goes through here: EINTR, short counts, CLOEXEC and
 * EAGAIN are handled once.
 *
 * mr_read_full()/mr_write_full() loop until done on blocking fds: read returns
 * the bytes read (fewer than n only at EOF) or -1 with errno; write returns 0 or
 * -1 with errno. Every fd this module creates has FD_CLOEXEC set, because the
 * launcher and the simulator fork.
 */
#ifndef MR_FDIO_H
#define MR_FDIO_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/port.h" /* mr_pipe_cloexec */
#include "meshrun/err.h"

ssize_t mr_read_full(int fd, void *buf, size_t n);
int mr_write_full(int fd, const void *buf, size_t n);
/* One read/write that retries on EINTR only (for non-blocking fds). */
ssize_t mr_read_some(int fd, void *buf, size_t n);
ssize_t mr_write_some(int fd, const void *buf, size_t n);
/* One read from a non-blocking *fd (-1: already closed): > 0 bytes; 0 at EOF or
 * on a real error, and *fd is then closed and -1; -1 when there is nothing now. */
ssize_t mr_read_or_close(int *fd, void *buf, size_t n);
int mr_set_nonblock(int fd, bool on);
int mr_set_cloexec(int fd);
/* close() that keeps errno and ignores fd < 0; sets *fd to -1. */
void mr_close(int *fd);

/*
 * Read a whole file into out (appended). Files larger than max bytes fail with
 * MESHRUN_E_INVAL; errors name the path.
 */
int mr_read_file(const char *path, size_t max, struct mr_buf *out, struct meshrun_err *err);
/* Write data to path through a temporary file and rename (never half-written);
 * an existing non-regular file (/dev/null, a FIFO) or a symlink (/dev/stdout)
 * is written in place, never replaced. */
int mr_write_file(const char *path, const void *data, size_t len, unsigned mode,
		  struct meshrun_err *err);

#endif
