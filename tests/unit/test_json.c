/* Unit tests for src/common/json.c: parse errors with line:column, paths, type checks, quoting. */
#include "common/compat.h"
#include "common/json.h"

#include <setjmp.h>
#include <cmocka.h>

static int parse(const char *text, cJSON **root, struct meshrun_err *err)
{
	return mr_json_parse(text, strlen(text), "t.json", root, err);
}

static void test_parse_ok(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	cJSON *root = NULL;

	(void)state;
	assert_int_equal(parse(" {\"a\": [1, \"x\", null, true, {}]}\n\n", &root, &err), 0);
	assert_non_null(root);
	assert_int_equal(err.code, 0);
	const cJSON *a = mr_json_member(root, "a");
	assert_string_equal(mr_json_type_name(a), "array");
	assert_string_equal(mr_json_type_name(cJSON_GetArrayItem(a, 0)), "number");
	assert_string_equal(mr_json_type_name(cJSON_GetArrayItem(a, 1)), "string");
	assert_string_equal(mr_json_type_name(cJSON_GetArrayItem(a, 2)), "null");
	assert_string_equal(mr_json_type_name(cJSON_GetArrayItem(a, 3)), "bool");
	assert_string_equal(mr_json_type_name(cJSON_GetArrayItem(a, 4)), "object");
	assert_null(mr_json_member(root, "A")); /* case-sensitive */
	assert_null(mr_json_member(a, "a"));    /* not an object */
	cJSON_Delete(root);

	/* Not NUL-terminated: only len bytes are read. */
	assert_int_equal(mr_json_parse("[1]xyz", 3, "t.json", &root, &err), 0);
	cJSON_Delete(root);
}

static void test_parse_errors(void **state)
{
	static const struct {
		const char *in;
		const char *msg;
	} cases[] = {
		{ "[1, 2,\n  3,, 4]", "t.json:2:5: malformed JSON (near ', 4]')" },
		{ "{\n    \"a\": [1,\n", "t.json:3:1: malformed JSON (at end of input)" },
		{ "", "t.json:1:1: malformed JSON (at end of input)" },
		{ "{\"a\" 1}", "t.json:1:6: malformed JSON (near '1}')" },
		{ "[1]\n]", "t.json:2:1: malformed JSON: extra data after the document (near ']')" },
		{ "[1] [2]", "t.json:1:5: malformed JSON: extra data after the document (near '[2]')" },
		{ "{\"a\": 1, \"b\": {\"c\": 1, \"c\": 2}}", "t.json: b: duplicate key 'c'" },
		{ "[{}, {\"x\": 1, \"x\": 1}]", "t.json: [1]: duplicate key 'x'" },
		{ "{\"a\":1,\"a\":2}", "t.json: top level: duplicate key 'a'" },
		{ "[1 2]", "t.json:1:4: malformed JSON (near '2]')" },
		{ "[\"abc", "t.json:1:3: malformed JSON (near 'abc')" },
		{ "{\"a\":tru}", "t.json:1:6: malformed JSON (near 'tru}')" },
		{ "[1,]", "t.json:1:4: malformed JSON (near ']')" },
		{ "[1, 2", "t.json:1:6: malformed JSON (at end of input)" },
		{ "  x", "t.json:1:3: malformed JSON (near 'x')" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		cJSON *root = NULL;
		assert_int_equal(parse(cases[i].in, &root, &err), MESHRUN_E_PARSE);
		assert_null(root);
		assert_string_equal(err.msg, cases[i].msg);
	}
}

static void test_path(void **state)
{
	struct mr_json_path p = MR_JSON_PATH_INIT;

	(void)state;
	assert_string_equal(mr_json_path_str(&p), "top level");
	mr_json_path_key(&p, "hosts");
	mr_json_path_index(&p, 2);
	mr_json_path_key(&p, "ips");
	mr_json_path_index(&p, 0);
	assert_string_equal(mr_json_path_str(&p), "hosts[2].ips[0]");
	mr_json_path_pop(&p);
	mr_json_path_pop(&p);
	assert_string_equal(mr_json_path_str(&p), "hosts[2]");
	mr_json_path_pop(&p);
	mr_json_path_pop(&p);
	mr_json_path_pop(&p); /* one too many: harmless */
	assert_string_equal(mr_json_path_str(&p), "top level");
	mr_json_path_index(&p, 7);
	assert_string_equal(mr_json_path_str(&p), "[7]");
	mr_json_path_pop(&p);

	/* Very long and very deep paths are cut, never overflow, and pops stay balanced. */
	char key[400];
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	mr_json_path_key(&p, "a");
	for (int i = 0; i < 100; i++)
		mr_json_path_key(&p, key);
	assert_true(strlen(mr_json_path_str(&p)) < MR_JSON_PATH_MAX);
	assert_non_null(strstr(mr_json_path_str(&p), "..."));
	for (int i = 0; i < 100; i++)
		mr_json_path_pop(&p);
	assert_string_equal(mr_json_path_str(&p), "a");
}

static void test_want(void **state)
{
	struct mr_json_path p = MR_JSON_PATH_INIT;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	cJSON *root = NULL;
	const char *s = NULL;
	long long v = 0;

	(void)state;
	assert_int_equal(parse("{\"hosts\": [{}, {}, {\"ips\": [5, \"x\"], \"n\": 3, \"f\": 1.5}]}",
			       &root, &err), 0);
	const cJSON *h2 = cJSON_GetArrayItem(mr_json_member(root, "hosts"), 2);
	const cJSON *ips = mr_json_member(h2, "ips");
	mr_json_path_key(&p, "hosts");
	mr_json_path_index(&p, 2);
	assert_int_equal(mr_json_want_object(h2, "hosts.json", &p, &err), 0);
	mr_json_path_key(&p, "ips");
	assert_int_equal(mr_json_want_array(ips, "hosts.json", &p, &err), 0);
	mr_json_path_index(&p, 0);
	assert_int_equal(mr_json_want_string(cJSON_GetArrayItem(ips, 0), "hosts.json", &p, &s, &err),
			 MESHRUN_E_PARSE);
	assert_string_equal(err.msg, "hosts.json: hosts[2].ips[0]: expected a string, got number");
	mr_json_path_pop(&p);
	mr_json_path_index(&p, 1);
	assert_int_equal(mr_json_want_string(cJSON_GetArrayItem(ips, 1), "hosts.json", &p, &s, NULL), 0);
	assert_string_equal(s, "x");
	mr_json_path_pop(&p);
	mr_json_path_pop(&p);

	struct meshrun_err e2 = MESHRUN_ERR_INIT;
	assert_int_equal(mr_json_want_array(mr_json_member(h2, "n"), "f", &p, &e2), MESHRUN_E_PARSE);
	assert_string_equal(e2.msg, "f: hosts[2]: expected an array, got number");
	struct meshrun_err e3 = MESHRUN_ERR_INIT;
	assert_int_equal(mr_json_want_object(NULL, "f", &p, &e3), MESHRUN_E_PARSE);
	assert_string_equal(e3.msg, "f: hosts[2]: expected an object, got nothing");
	struct meshrun_err e4 = MESHRUN_ERR_INIT;
	assert_int_equal(mr_json_missing(&e4, "f", &p, "ssh"), MESHRUN_E_PARSE);
	assert_string_equal(e4.msg, "f: hosts[2]: missing key 'ssh'");

	assert_int_equal(mr_json_want_int(mr_json_member(h2, "n"), "f", &p, 0, 3, &v, NULL), 0);
	assert_int_equal(v, 3);
	assert_int_equal(mr_json_want_int(mr_json_member(h2, "n"), "f", &p, 0, 2, &v, NULL),
			 MESHRUN_E_PARSE);
	struct meshrun_err e5 = MESHRUN_ERR_INIT;
	assert_int_equal(mr_json_want_int(mr_json_member(h2, "f"), "f", &p, 0, 9, &v, &e5),
			 MESHRUN_E_PARSE);
	assert_string_equal(e5.msg, "f: hosts[2]: expected an integer in [0, 9], got 1.5");
	assert_int_equal(v, 3);
	cJSON_Delete(root);
}

static void test_quote(void **state)
{
	static const struct {
		const char *in;
		const char *out; /* what Python's json.dumps(in) prints */
	} cases[] = {
		{ "", "\"\"" },
		{ "rdma_en2", "\"rdma_en2\"" },
		{ "a\"b\\c/d", "\"a\\\"b\\\\c/d\"" },
		{ "\n\r\t\b\f\x01\x1f\x7f", "\"\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\"" },
		{ "h\xc3\xa9", "\"h\\u00e9\"" },
		{ "\xe2\x82\xac", "\"\\u20ac\"" },
		{ "\xf0\x9f\x98\x80", "\"\\ud83d\\ude00\"" },
	};
	struct mr_buf b = MR_BUF_INIT;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		mr_buf_reset(&b);
		assert_int_equal(mr_json_quote(&b, cases[i].in), 0);
		assert_string_equal(mr_buf_cstr(&b), cases[i].out);
	}
	/* Invalid UTF-8 (a lone continuation byte, an overlong '/', a surrogate) is refused
	 * and leaves the buffer as it was. */
	static const char *bad[] = { "a\x80", "\xc0\xaf", "\xed\xa0\x80", "\xc3" };
	mr_buf_reset(&b);
	mr_buf_puts(&b, "keep");
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		errno = 0;
		assert_int_equal(mr_json_quote(&b, bad[i]), -1);
		assert_int_equal(errno, EILSEQ);
		assert_string_equal(mr_buf_cstr(&b), "keep");
	}
	mr_buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_ok),   cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_path),       cmocka_unit_test(test_want),
		cmocka_unit_test(test_quote),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
