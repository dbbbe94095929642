/*
 * faults.h - the arguments of meshsim's cable faults (rate, loss, flap,
 * partition), parsed and checked before anything is changed. Pure functions:
 * no I/O; errors (MESHRUN_E_USAGE) quote the argument and say what was
 * expected.
 *
 *   RATE    a number with a unit: bit, kbit, mbit, gbit, tbit (case ignored,
 *           "40gbit", "2.5Gbit"), 1 kbit/s to 10 tbit/s; "off" (or 0): none
 *   PCT     0..100 with at most two decimals and an optional '%' ("5", "0.5%");
 *           0 clears; kept in hundredths of a percent
 *   PERIOD  a duration as common/num.h reads it ("2s", "500ms"), 100 ms..1 h;
 *           "off" (or 0): none
 *   HOSTS|HOSTS  two non-empty comma lists of host names (mr_is_hostname), no
 *           name twice ("m1,m2|m3,m4")
 *
 * Ownership: the strvecs are the caller's (appended to).
 */
#ifndef MR_SIM_FAULTS_H
#define MR_SIM_FAULTS_H

#include "common/compat.h"
#include "common/strvec.h"
#include "meshrun/err.h"

int mr_sim_parse_rate(const char *s, uint64_t *bps, struct meshrun_err *err);
int mr_sim_parse_pct(const char *s, unsigned *hundredths, struct meshrun_err *err);
int mr_sim_parse_period(const char *s, int64_t *ms, struct meshrun_err *err);
int mr_sim_parse_partition(const char *s, struct mr_strvec *a, struct mr_strvec *b,
			   struct meshrun_err *err);

/* "40gbit", "2500mbit", "123kbit", "77bit": the largest unit that is exact. */
void mr_sim_fmt_rate(uint64_t bps, char *out, size_t len);
/* "5%", "0.5%", "12.25%". */
void mr_sim_fmt_pct(unsigned hundredths, char *out, size_t len);

#endif
