/*
 * errname.c - errno values by their symbolic names (errname.h).
 */
#include "common/compat.h"
#include "common/errname.h"

#define MR_ERRNO_MAP(X)                                                                 \
	X(EPERM) X(ENOENT) X(EIO) X(EAGAIN) X(ENOMEM) X(EACCES) X(EFAULT) X(EBUSY)      \
	X(EEXIST) X(ENODEV) X(EINVAL) X(ENFILE) X(EMFILE) X(ENOSPC) X(ERANGE) X(ENOSYS) \
	X(EPROTONOSUPPORT) X(EOPNOTSUPP) X(EADDRNOTAVAIL) X(ENETDOWN) X(ENETUNREACH)    \
	X(ECONNRESET) X(ENOBUFS) X(ETIMEDOUT) X(ECONNREFUSED) X(EHOSTUNREACH)

static const struct {
	const char *name;
	int value;
} names[] = {
#define MR_ERRNO_ROW(e) { #e, e },
	MR_ERRNO_MAP(MR_ERRNO_ROW)
#undef MR_ERRNO_ROW
};

int mr_errno_from_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (strcmp(names[i].name, name) == 0)
			return names[i].value;
	if (strcmp(name, "ENOTSUP") == 0)
		return EOPNOTSUPP;
	return -1;
}

const char *mr_errno_name(int e)
{
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (names[i].value == e)
			return names[i].name;
#if defined(ENOTSUP) && ENOTSUP != EOPNOTSUPP
	if (e == ENOTSUP)
		return "EOPNOTSUPP";
#endif
	return "E?";
}
