#include "common/compat.h"
#include "common/err.h"

static const struct {
	int code;
	const char *name;
	const char *text;
} err_table[] = {
#define MR_ERR_ROW(name, value, text) { value, #name, text },
	MESHRUN_ERRNO_MAP(MR_ERR_ROW)
#undef MR_ERR_ROW
};

const char *meshrun_strerror(int code)
{
	for (size_t i = 0; i < ARRAY_SIZE(err_table); i++)
		if (err_table[i].code == code)
			return err_table[i].text;
	return "unknown error";
}

const char *meshrun_errname(int code)
{
	for (size_t i = 0; i < ARRAY_SIZE(err_table); i++)
		if (err_table[i].code == code)
			return err_table[i].name;
	return "UNKNOWN";
}

static int MR_PRINTF(4, 0) err_vset(struct meshrun_err *err, int code, int errnum, const char *fmt, va_list ap)
{
	if (!err || err->code)
		return code;
	err->code = code;
	err->sys_errno = errnum;
	int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	if (n < 0)
		err->msg[0] = '\0';
	if (errnum) {
		size_t len = strlen(err->msg);
		snprintf(err->msg + len, sizeof(err->msg) - len, ": %s", strerror(errnum));
	}
	return code;
}

int mr_err_set(struct meshrun_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(err, code, 0, fmt, ap);
	va_end(ap);
	return code;
}

int mr_err_sys(struct meshrun_err *err, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	err_vset(err, MESHRUN_E_SYS, saved ? saved : EIO, fmt, ap);
	va_end(ap);
	errno = saved;
	return MESHRUN_E_SYS;
}

int mr_err_errno(struct meshrun_err *err, int errnum, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(err, code, errnum, fmt, ap);
	va_end(ap);
	return code;
}

void mr_err_prefix(struct meshrun_err *err, const char *fmt, ...)
{
	char prefix[MESHRUN_ERR_MSG_MAX];
	char old[MESHRUN_ERR_MSG_MAX];
	va_list ap;

	if (!err || !err->code)
		return;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* Truncation is fine here: the message stays NUL-terminated and readable. */
	size_t plen = strnlen(prefix, sizeof(err->msg) - 3);
	memcpy(err->msg, prefix, plen);
	memcpy(err->msg + plen, ": ", 2);
	size_t olen = strnlen(old, sizeof(err->msg) - plen - 3);
	memcpy(err->msg + plen + 2, old, olen);
	err->msg[plen + 2 + olen] = '\0';
}

void mr_err_clear(struct meshrun_err *err)
{
	if (!err)
		return;
	err->code = 0;
	err->sys_errno = 0;
	err->msg[0] = '\0';
}
