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

void mr_log_emit(int level, const char *fmt, ...)
{
	static const char *tags[] = { "ERROR", "WARN", "INFO", "DEBUG" };
	static const char *colors[] = { "\033[31m", "\033[33m", "\033[32m", "\033[36m" };
	FILE *f = log_stream ? log_stream : stderr;
	char line[4096];
	va_list ap;

	if (level < 0 || level > MR_LOG_DEBUG)
		level = MR_LOG_ERROR;
	if (log_color < 0)
		log_color = f == stderr && isatty(STDERR_FILENO) && !getenv("NO_COLOR");
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One fprintf per line: lines from concurrent writers stay whole. */
	if (log_color)
		fprintf(f, "%s[%s]\033[0m %s\n", colors[level], tags[level], line);
	else
		fprintf(f, "[%s] %s\n", tags[level], line);
	fflush(f);
}
