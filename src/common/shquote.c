#include "common/compat.h"
#include "common/shquote.h"

#include <arpa/inet.h>
#include <ctype.h>

static bool is_bare_char(unsigned char c)
{
	return isalnum(c) || strchr("_@%+=:,./-", c);
}

bool mr_is_shell_safe(const char *s)
{
	if (!s || !*s)
		return false;
	for (; *s; s++)
		if (!is_bare_char((unsigned char)*s))
			return false;
	return true;
}

int mr_shquote(struct mr_buf *out, const char *arg)
{
	/* '=' and '~' at the start could be read as assignment or tilde expansion. */
	if (mr_is_shell_safe(arg) && arg[0] != '=' && !strchr(arg, '='))
		return mr_buf_puts(out, arg);
	if (mr_buf_putc(out, '\'') < 0)
		return -1;
	for (const char *p = arg; *p; p++) {
		if (*p == '\'') {
			if (mr_buf_puts(out, "'\\''") < 0)
				return -1;
		} else if (mr_buf_putc(out, *p) < 0) {
			return -1;
		}
	}
	return mr_buf_putc(out, '\'');
}

int mr_shquote_argv(struct mr_buf *out, char *const *argv)
{
	for (size_t i = 0; argv && argv[i]; i++) {
		if (i && mr_buf_putc(out, ' ') < 0)
			return -1;
		if (mr_shquote(out, argv[i]) < 0)
			return -1;
	}
	return 0;
}

int mr_shquote_sh_c(struct mr_buf *out, const char *script, char *const *args)
{
	if (mr_buf_puts(out, MR_SH_EXEC_C) < 0 || mr_shquote(out, script) < 0)
		return -1;
	if (args && args[0] && (mr_buf_putc(out, ' ') < 0 || mr_shquote_argv(out, args) < 0))
		return -1;
	return 0;
}

bool mr_is_ifname(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	/* A leading '-' would read as an option to ifconfig/ip. */
	if (n == 0 || n > 15 || !isalnum((unsigned char)s[0]))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
			return false;
	return true;
}

bool mr_is_hostname(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 253 || s[0] == '-')
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
			return false;
	return true;
}

bool mr_is_ipv4(const char *s)
{
	struct in_addr a;

	return s && inet_pton(AF_INET, s, &a) == 1;
}

bool mr_is_ipv6(const char *s)
{
	struct in6_addr a;

	return s && inet_pton(AF_INET6, s, &a) == 1;
}

bool mr_is_ip(const char *s)
{
	return mr_is_ipv4(s) || mr_is_ipv6(s);
}

bool mr_is_env_name(const char *s)
{
	if (!s || !(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return false;
	return true;
}
