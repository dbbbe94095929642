/*
 * log.c - common/log: the tagged "[LEVEL] ..." lines of the tools (log.h).
 */
#include "common/compat.h"
#include "common/log.h"

#include <strings.h>
#include <unistd.h>

int mr_log_level = MR_LOG_INFO;
static int log_color = -1; /* -1: decide on first use */
static FILE *log_stream;

void mr_log_init_from_env(void)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	const char *v = getenv("MESHRUN_LOG");

	if (!v)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcasecmp(v, names[i]))
			mr_log_level = (int)i;
}

void mr_log_set_color(int on)
{
	log_color = on;
}

void mr_log_set_stream(FILE *f)
{
	log_stream = f;
}

int mr_log_color_for(FILE *f)
{
	return isatty(fileno(f)) && !getenv("NO_COLOR");
}

void mr_log_vprint(FILE *f, int color, int level, const char *fmt, va_list ap)
{
	static const char *tags[] = { "ERROR", "WARN", "INFO", "DEBUG" };
	static const char *colors[] = { "\033[31m", "\033[33m", "\033[32m", "\033[36m" };
	char line[4096];

	if (level != MR_LOG_PLAIN && (level < 0 || level > MR_LOG_DEBUG))
		level = MR_LOG_ERROR;
	if (color < 0)
		color = mr_log_color_for(f);
	vsnprintf(line, sizeof(line), fmt, ap);
	/* One fprintf per line: lines from concurrent writers stay whole. */
	if (level == MR_LOG_PLAIN)
		fprintf(f, "%s\n", line);
	else if (color)
		fprintf(f, "%s[%s]\033[0m %s\n", colors[level], tags[level], line);
	else
		fprintf(f, "[%s] %s\n", tags[level], line);
	fflush(f);
}

void mr_log_print(FILE *f, int color, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	mr_log_vprint(f, color, level, fmt, ap);
	va_end(ap);
}

void mr_log_emit(int level, const char *fmt, ...)
{
	FILE *f = log_stream ? log_stream : stderr;
	va_list ap;

	if (level < 0 || level > MR_LOG_DEBUG)
		level = MR_LOG_ERROR;
	if (log_color < 0)
		log_color = f == stderr && mr_log_color_for(stderr);
	va_start(ap, fmt);
	mr_log_vprint(f, log_color, level, fmt, ap);
	va_end(ap);
}
