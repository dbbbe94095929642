/*
 * log.h - the tools' logging: "[INFO] ...", "[WARN] ...", "[ERROR] ..." on stderr,
 * coloured only when stderr is a terminal (and NO_COLOR is unset).
 *
 * The level is the one process-global the project allows (set from -v/-q or
 * MESHRUN_LOG=error|warn|info|debug). libmeshrun never logs through this unless
 * the user asked for verbosity (MLX_RING_VERBOSE and friends). errno survives a
 * log call.
 */
#ifndef MR_LOG_H
#define MR_LOG_H

#include "common/compat.h"

enum mr_log_level { MR_LOG_ERROR = 0, MR_LOG_WARN, MR_LOG_INFO, MR_LOG_DEBUG };
/* For mr_log_vprint(): the line as it is, no tag (a verdict, commands to type). */
#define MR_LOG_PLAIN (-1)

extern int mr_log_level;

/* Read MESHRUN_LOG from the environment, if set; unknown values are ignored. */
void mr_log_init_from_env(void);
/* Force colour on/off (default: isatty(2) && !NO_COLOR). */
void mr_log_set_color(int on);
/* Redirect log output (default stderr); tests use this. */
void mr_log_set_stream(FILE *f);
void mr_log_emit(int level, const char *fmt, ...) MR_PRINTF(2, 3);
/*
 * The line mr_log_emit() writes, to any stream and with no level check: for a tool
 * that logs to a stream of its own (meshconfig's err, which tests capture).
 * color: 1, 0, or -1 for mr_log_color_for(f). level: MR_LOG_* or MR_LOG_PLAIN.
 */
void mr_log_vprint(FILE *f, int color, int level, const char *fmt, va_list ap)
	MR_PRINTF(4, 0);
void mr_log_print(FILE *f, int color, int level, const char *fmt, ...) MR_PRINTF(4, 5);
/* isatty(fileno(f)) && NO_COLOR unset. */
int mr_log_color_for(FILE *f);

#define mr_log(lvl, ...)                                                      \
	do {                                                                  \
		if ((lvl) <= mr_log_level) {                                  \
			int mr_log_saved_errno_ = errno;                      \
			mr_log_emit((lvl), __VA_ARGS__);                      \
			errno = mr_log_saved_errno_;                          \
		}                                                             \
	} while (0)

#define mr_error(...) mr_log(MR_LOG_ERROR, __VA_ARGS__)
#define mr_warn(...) mr_log(MR_LOG_WARN, __VA_ARGS__)
#define mr_info(...) mr_log(MR_LOG_INFO, __VA_ARGS__)
#define mr_debug(...) mr_log(MR_LOG_DEBUG, __VA_ARGS__)

#endif
