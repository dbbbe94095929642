/*
 * hostfold.h - the lines of a failure on many hosts, each host in full and a
 * long list folded, never cut mid-word (a fixed-size error message would cut
 * the fourth known_hosts path in half and lose the hint after it).
 *
 *	struct mr_hostfold f = MR_HOSTFOLD_INIT;
 *	for each failed host: mr_hostfold_add(&f, host, why, hint);   (copied)
 *	mr_hostfold_render(&f, all, "--verbose", "", &lines);   one string per line, to print
 *	mr_hostfold_release(&f);
 *
 * The lines: "HOST: WHY" for each host, in the order added; then "hint: HINT"
 * once per distinct hint (NULL: none), in the order first seen. With more than
 * MR_HOSTFOLD_FULL hosts (and all false) hosts whose failure is the same as an
 * earlier host's fold into that host's line's follower:
 *	"h1: ssh to 'h1' (10.0.0.1:22): host key is unknown: ... SHA256:AbC... ..."
 *	"and 255 more hosts: same error (h2, h3, h4, ...)"
 * "the same" compares WHY with the host's own name, IPv4 addresses and long
 * base64/hex runs (key fingerprints) masked. At most MR_HOSTFOLD_FULL distinct
 * failures are shown; the rest is one line "and N more hosts with other errors
 * (ALL_HINT lists every host)", ALL_HINT being what the tool names for `all`
 * (its --verbose). Nothing here prints; the tool does.
 */
#ifndef MR_HOSTFOLD_H
#define MR_HOSTFOLD_H

#include "common/compat.h"
#include "common/strvec.h"

#define MR_HOSTFOLD_FULL 8

struct mr_hostfold_item {
	char *host, *why;
	const char *hint; /* static text, or NULL */
};

struct mr_hostfold {
	struct mr_hostfold_item *items;
	size_t n, alloc;
};

#define MR_HOSTFOLD_INIT { NULL, 0, 0 }

/* Add one failed host (host and why are copied; hint is kept as given). 0 or -1 (ENOMEM). */
int mr_hostfold_add(struct mr_hostfold *f, const char *host, const char *why, const char *hint);
/*
 * Append the lines (without indentation or newline) to out, the hosts' lines
 * (not the hints) after prefix ("- ", or ""). all: every host in full; else
 * fold as above, all_hint naming how to see them all ("--verbose").
 * 0 or -1 (ENOMEM).
 */
int mr_hostfold_render(const struct mr_hostfold *f, bool all, const char *all_hint,
		       const char *prefix, struct mr_strvec *out);
/* Whether a and b (the failures of hosts ha and hb) count as the same error. */
bool mr_hostfold_same(const char *ha, const char *a, const char *hb, const char *b);
void mr_hostfold_release(struct mr_hostfold *f);

#endif
