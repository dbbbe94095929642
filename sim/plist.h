/*
 * plist.h - XML property lists as launchd reads them (launchd.plist(5)), for
 * meshsim's launchd (launchd.h). Pure: text in, a tree out, no I/O.
 *
 * The grammar is Apple's plist DTD (http://www.apple.com/DTDs/PropertyList-1.0.dtd):
 * an optional <?xml ...?> declaration, comments and one <!DOCTYPE ...>, then
 * <plist [version="1.0"]> holding exactly one value:
 *   <dict> (<key>K</key> VALUE)* </dict>, <array> VALUE* </array>,
 *   <string>, <integer> (decimal, or 0x hex, optional sign), <real>, <date>,
 *   <data>, <true/>, <false/>; <dict/>, <array/>, <string/> are empty ones.
 * Text may use the five XML entities, &#N; and &#xN; (ASCII only) and
 * <![CDATA[...]]>. Strict where CoreFoundation is strict, and stricter where a
 * rule is unclear (conservative: a file the simulated launchd accepts must be
 * one the real one accepts): an unknown element, an attribute on anything but
 * <plist>, a duplicate key in a dict, text outside a text element, anything
 * after </plist> but blanks and comments, a binary plist ("bplist00") are
 * errors naming the line.
 *
 * Ownership: mr_plist_parse() gives a tree the caller frees with
 * mr_plist_free() (NULL is a no-op); lookups return pointers into it.
 */
#ifndef MR_SIM_PLIST_H
#define MR_SIM_PLIST_H

#include "common/compat.h"
#include "meshrun/err.h"

enum mr_plist_type {
	MR_PLIST_DICT,
	MR_PLIST_ARRAY,
	MR_PLIST_STRING,
	MR_PLIST_INTEGER,
	MR_PLIST_REAL,
	MR_PLIST_BOOL,
	MR_PLIST_DATE,
	MR_PLIST_DATA,
};

struct mr_plist {
	enum mr_plist_type type;
	char *key;               /* its key when it is a dict's member, else NULL */
	char *text;              /* string, real, date, data: the decoded text */
	long long num;           /* integer */
	bool b;                  /* true/false */
	struct mr_plist *kids;   /* dict members (key set) or array items */
	size_t nkids;
};

/* Parse len bytes of text. 0, or MESHRUN_E_PARSE with "line N: ..." in err. */
int mr_plist_parse(const char *text, size_t len, struct mr_plist **out, struct meshrun_err *err);
void mr_plist_free(struct mr_plist *p);

/* The member of dict d named key, or NULL (also when d is not a dict). */
const struct mr_plist *mr_plist_get(const struct mr_plist *d, const char *key);
/* "dictionary", "array", "string", ... (for messages). */
const char *mr_plist_type_name(enum mr_plist_type t);

#endif
