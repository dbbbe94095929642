/*
 * fuzz.h - what every libFuzzer harness here shares.
 *
 * Each harness (fuzz_<parser>.c) defines LLVMFuzzerTestOneInput() over one
 * parser of outside input and checks, besides what ASan/UBSan/LeakSanitizer
 * catch, the parser's own contract (a failure leaves an error message, a
 * success something consistent); a broken contract aborts (a finding).
 */
#ifndef MR_FUZZ_H
#define MR_FUZZ_H

#include "common/compat.h"
#include "meshrun/err.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A NUL-terminated copy of the input (parsers of C strings); never NULL. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* A failed parse must say why: rc < 0 with an empty message is a finding. */
static inline void fuzz_check_err(int rc, const struct meshrun_err *err, const char *what)
{
	if (rc < 0 && (err->code == 0 || err->msg[0] == '\0')) {
		fprintf(stderr, "%s failed (%d) without a message\n", what, rc);
		abort();
	}
	if (rc < 0 && memchr(err->msg, '\0', sizeof(err->msg)) == NULL) {
		fprintf(stderr, "%s: message not terminated\n", what);
		abort();
	}
}

#define FUZZ_ASSERT(cond) do {                                              \
	if (!(cond)) {                                                      \
		fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__,  \
			__LINE__, #cond);                                   \
		abort();                                                    \
	}                                                                   \
} while (0)

#endif
