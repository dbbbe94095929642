/*
 * json.h - small helpers over cJSON: parse errors with line:column, path-aware
 * type checks, and Python-compatible string output.
 *
 * Errors (all MESHRUN_E_PARSE, all starting with the caller's file name):
 *   "hosts.json:3:14: malformed JSON (near '}, {\"ssh')"
 *   "hosts.json:7:1: malformed JSON (extra data after the document)"
 *   "hosts.json: hosts[2].ips[0]: expected a string, got number"
 *   "hosts.json: hosts[0]: missing key 'ssh'"
 * The path is built by the caller while it walks the document:
 *
 *	struct mr_json_path p = MR_JSON_PATH_INIT;
 *	mr_json_path_key(&p, "hosts");          -> "hosts"
 *	mr_json_path_index(&p, 2);              -> "hosts[2]"
 *	mr_json_path_key(&p, "ips");            -> "hosts[2].ips"
 *	mr_json_path_pop(&p);                   -> "hosts[2]"
 * An empty path (the document itself) prints as "top level". Paths longer than
 * the buffer are cut with "..." (still readable, never an overflow); more than
 * MR_JSON_PATH_DEPTH pushes are counted so that pops stay balanced.
 *
 * Ownership: mr_json_parse() hands the tree to the caller, who frees it with
 * cJSON_Delete(). Strings returned by the getters point into the tree.
 * Thread safety: mr_json_parse() does not use cJSON's global error pointer.
 */
#ifndef MR_JSON_H
#define MR_JSON_H

#include <cjson/cJSON.h>

#include "common/compat.h"
#include "common/buf.h"
#include "meshrun/err.h"

#define MR_JSON_PATH_MAX 256
#define MR_JSON_PATH_DEPTH 32

struct mr_json_path {
	char buf[MR_JSON_PATH_MAX]; /* "hosts[2].ips[0]", NUL-terminated */
	size_t len;                 /* strlen(buf) */
	size_t mark[MR_JSON_PATH_DEPTH];
	unsigned depth;             /* pushes not yet popped (may exceed MR_JSON_PATH_DEPTH) */
};

#define MR_JSON_PATH_INIT { { 0 }, 0, { 0 }, 0 }

/*
 * Parse len bytes of text (no NUL needed). Trailing data other than whitespace
 * is an error, as in Python's json.load. A key repeated within one object is an
 * error too ("name: hosts[1]: duplicate key 'ssh'"; Python would silently keep
 * the last one, cJSON the first). On success *out is the root.
 */
int mr_json_parse(const char *text, size_t len, const char *name, cJSON **out,
		  struct meshrun_err *err);

/* "string", "number", "object", "array", "null", "bool" (or "invalid"). */
const char *mr_json_type_name(const cJSON *item);

void mr_json_path_key(struct mr_json_path *p, const char *key);
void mr_json_path_index(struct mr_json_path *p, size_t i);
void mr_json_path_pop(struct mr_json_path *p);
/* The path as text; "top level" when empty. */
const char *mr_json_path_str(const struct mr_json_path *p);

/* Record "name: PATH: <message>"; returns MESHRUN_E_PARSE. */
int mr_json_err(struct meshrun_err *err, const char *name, const struct mr_json_path *p,
		const char *fmt, ...) MR_PRINTF(4, 5);

/*
 * Type checks at path p for item (which may be NULL: then "missing"). Each
 * returns 0, or MESHRUN_E_PARSE with "name: PATH: expected a string, got number".
 */
int mr_json_want_string(const cJSON *item, const char *name, const struct mr_json_path *p,
			const char **out, struct meshrun_err *err);
int mr_json_want_array(const cJSON *item, const char *name, const struct mr_json_path *p,
		       struct meshrun_err *err);
int mr_json_want_object(const cJSON *item, const char *name, const struct mr_json_path *p,
			struct meshrun_err *err);
/* A number that is an integer in [min, max]. */
int mr_json_want_int(const cJSON *item, const char *name, const struct mr_json_path *p,
		     long long min, long long max, long long *out, struct meshrun_err *err);

/* obj[key] (case-sensitive), or NULL when obj is not an object or lacks key. */
const cJSON *mr_json_member(const cJSON *obj, const char *key);
/* "name: PATH: missing key 'KEY'" (PATH being the object's path). */
int mr_json_missing(struct meshrun_err *err, const char *name, const struct mr_json_path *p,
		    const char *key);

/*
 * Append s as a JSON string literal exactly as Python's json.dumps writes it
 * with the default ensure_ascii=True: \" \\ \n \r \t \b \f, other control
 * characters as \u00XX, every non-ASCII character as \uXXXX (surrogate pairs
 * above U+FFFF), DEL (0x7f) and '/' as-is. Returns 0, or -1 with errno EILSEQ
 * when s is not valid UTF-8, ENOMEM/E2BIG from the buffer.
 */
int mr_json_quote(struct mr_buf *out, const char *s);

#endif
