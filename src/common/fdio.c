#include "common/compat.h"
#include "common/fdio.h"
#include "common/err.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

ssize_t mr_read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

int mr_write_full(int fd, const void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = write(fd, (const char *)buf + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

ssize_t mr_read_some(int fd, void *buf, size_t n)
{
	ssize_t r;

	do
		r = read(fd, buf, n);
	while (r < 0 && errno == EINTR);
	return r;
}

ssize_t mr_write_some(int fd, const void *buf, size_t n)
{
	ssize_t w;

	do
		w = write(fd, buf, n);
	while (w < 0 && errno == EINTR);
	return w;
}

int mr_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl);
}

int mr_set_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

void mr_close(int *fd)
{
	int saved = errno;

	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	errno = saved;
}

int mr_read_file(const char *path, size_t max, struct mr_buf *out, struct meshrun_err *err)
{
	char chunk[65536];
	size_t total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return mr_err_sys(err, "open '%s'", path);
	for (;;) {
		ssize_t r = mr_read_some(fd, chunk, sizeof(chunk));
		if (r < 0) {
			mr_err_sys(err, "read '%s'", path);
			close(fd);
			return MESHRUN_E_SYS;
		}
		if (r == 0)
			break;
		total += (size_t)r;
		if (total > max) {
			close(fd);
			return mr_err_set(err, MESHRUN_E_INVAL, "'%s' is larger than %zu bytes",
					  path, max);
		}
		if (mr_buf_append(out, chunk, (size_t)r) < 0) {
			close(fd);
			return mr_err_set(err, MESHRUN_E_NOMEM, "read '%s': out of memory", path);
		}
	}
	close(fd);
	return 0;
}

int mr_write_file(const char *path, const void *data, size_t len, unsigned mode,
		  struct meshrun_err *err)
{
	char tmp[4096];
	struct stat st;
	int fd;

	/* A device, FIFO, terminal or symlink (/dev/null, /dev/stdout) is written
	 * in place: renaming a temporary file over it would replace the device
	 * node or the link (and a link's folder, /dev, would get a regular file).
	 * Through a link to a regular file that file is truncated first, as `>`. */
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		int flags = O_WRONLY | O_CLOEXEC;

		if (stat(path, &st) == 0)
			flags |= S_ISREG(st.st_mode) ? O_TRUNC : 0;
		else if (errno == ENOENT)
			flags |= O_CREAT; /* a dangling link: make its target */
		fd = open(path, flags, (mode_t)mode);
		if (fd < 0)
			return mr_err_sys(err, "open '%s'", path);
		if (mr_write_full(fd, data, len) < 0) {
			mr_err_sys(err, "write '%s'", path);
			close(fd);
			return MESHRUN_E_SYS;
		}
		close(fd);
		return 0;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
		return mr_err_set(err, MESHRUN_E_INVAL, "path too long: '%s'", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
	if (fd < 0)
		return mr_err_sys(err, "create '%s'", tmp);
	if (mr_write_full(fd, data, len) < 0 || fsync(fd) < 0) {
		mr_err_sys(err, "write '%s'", tmp);
		close(fd);
		unlink(tmp);
		return MESHRUN_E_SYS;
	}
	if (close(fd) < 0) {
		mr_err_sys(err, "close '%s'", tmp);
		unlink(tmp);
		return MESHRUN_E_SYS;
	}
	if (rename(tmp, path) < 0) {
		mr_err_sys(err, "rename '%s' to '%s'", tmp, path);
		unlink(tmp);
		return MESHRUN_E_SYS;
	}
	return 0;
}

ssize_t mr_read_or_close(int *fd, void *buf, size_t n)
{
	ssize_t r;

	if (*fd < 0)
		return 0;
	r = mr_read_some(*fd, buf, n);
	if (r > 0)
		return r;
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -1;
	mr_close(fd); /* EOF or a real error: the stream is over */
	return 0;
}
