/*
 * timeutil.h - monotonic time and deadlines in milliseconds.
 */
#ifndef MR_TIMEUTIL_H
#define MR_TIMEUTIL_H

#include "common/compat.h"

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t mr_now_ms(void);
/* Microseconds on CLOCK_MONOTONIC. */
int64_t mr_now_us(void);
/* Milliseconds left until deadline (0 if passed), clamped to INT_MAX; -1 if deadline < 0 (none). */
int mr_ms_left(int64_t deadline_ms);
/* Sleep for ms milliseconds (restarts on EINTR). */
void mr_sleep_ms(int64_t ms);

#endif
