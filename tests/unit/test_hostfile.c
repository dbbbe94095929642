/*
 * Unit tests for src/hostfile: MLX-format round trips (byte for byte), every rdma
 * cell shape, --hosts lists, malformed input with file/line/column/JSON path,
 * and the rdma matrix check for the jaccl backends.
 *
 * The MLX_* files (tests/unit/data/hostfile/) are the exact bytes Python's
 * json.dump(obj, f, indent=4) writes for the objects MLX's Hostfile.to_json() (and,
 * for the MLX_OLD_* ones, older mlx.distributed_config) builds; they were produced
 * with Python 3's json module, not typed by hand.
 */
#include "common/compat.h"
#include "hostfile/hostfile.h"
#include "common/fdio.h"

#include <setjmp.h>
#include <cmocka.h>
#include <unistd.h>

/*
 * MLX's files, byte for byte (no newline at the end, as MLX writes them), in
 * tests/unit/data/hostfile/: json.dump(..., indent=4) output, verbatim, except
 * from_list.json:
 * Hostfile.from_list('10.0.0.1,m2,::1,user@h3.local').to_json(), json.dump indent=4.
 */
static char *MLX_JACCL_MESH; /* jaccl_mesh.json */
static char *MLX_RING; /* ring.json */
static char *MLX_JACCL_RING; /* jaccl_ring.json */
static char *MLX_ETHERNET; /* ethernet.json */
static char *MLX_OLD_ETHERNET; /* old_ethernet.json */
static char *MLX_OLD_RING; /* old_ring.json */
static char *MLX_OLD_JACCL; /* old_jaccl.json */
static char *MLX_FROM_LIST; /* from_list.json */

static char *load_mlx(const char *name)
{
	char path[512];
	FILE *f;
	char *text;
	long len;

	snprintf(path, sizeof(path), "%s/tests/unit/data/hostfile/%s", MESHRUN_SOURCE_DIR, name);
	f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
		fprintf(stderr, "cannot read '%s'\n", path);
		exit(1);
	}
	text = calloc(1, (size_t)len + 1);
	if (!text || fread(text, 1, (size_t)len, f) != (size_t)len)
		exit(1);
	fclose(f);
	return text;
}

static int load_files(void **state)
{
	(void)state;
	MLX_JACCL_MESH = load_mlx("jaccl_mesh.json");
	MLX_RING = load_mlx("ring.json");
	MLX_JACCL_RING = load_mlx("jaccl_ring.json");
	MLX_ETHERNET = load_mlx("ethernet.json");
	MLX_OLD_ETHERNET = load_mlx("old_ethernet.json");
	MLX_OLD_RING = load_mlx("old_ring.json");
	MLX_OLD_JACCL = load_mlx("old_jaccl.json");
	MLX_FROM_LIST = load_mlx("from_list.json");
	return 0;
}

static int free_files(void **state)
{
	(void)state;
	free(MLX_JACCL_MESH);
	free(MLX_RING);
	free(MLX_JACCL_RING);
	free(MLX_ETHERNET);
	free(MLX_OLD_ETHERNET);
	free(MLX_OLD_RING);
	free(MLX_OLD_JACCL);
	free(MLX_FROM_LIST);
	return 0;
}

static struct mr_hostfile *parse_ok(const char *text)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = NULL;
	int rc = mr_hostfile_parse(text, strlen(text), "hosts.json", &hf, &err);

	if (rc)
		fail_msg("parse failed: %s", err.msg);
	assert_non_null(hf);
	return hf;
}

/* Parse, emit: the bytes must be exactly the input. */
static void check_round_trip(const char *text)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = parse_ok(text);
	struct mr_buf b = MR_BUF_INIT;

	assert_int_equal(mr_hostfile_emit(hf, &b, &err), 0);
	assert_string_equal(mr_buf_cstr(&b), text);
	assert_int_equal(b.len, strlen(text));
	mr_buf_release(&b);
	mr_hostfile_free(hf);
}

static void test_mlx_round_trips(void **state)
{
	const char *const files[] = {
		MLX_JACCL_MESH, MLX_RING,     MLX_JACCL_RING, MLX_ETHERNET,
		MLX_OLD_ETHERNET, MLX_OLD_RING, MLX_OLD_JACCL, MLX_FROM_LIST,
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		check_round_trip(files[i]);
}

static void test_mlx_model(void **state)
{
	struct mr_hostfile *hf;

	(void)state;
	hf = parse_ok(MLX_JACCL_MESH);
	assert_true(hf->object_form);
	assert_string_equal(hf->backend, "jaccl");
	assert_int_equal(hf->envs.nr, 1);
	assert_string_equal(hf->envs.v[0], "MLX_METAL_FAST_SYNCH=1");
	assert_int_equal(hf->nhosts, 4);
	assert_string_equal(hf->hosts[2].ssh, "m3");
	assert_int_equal(hf->hosts[2].ips.nr, 1);
	assert_string_equal(hf->hosts[2].ips.v[0], "10.0.0.3");
	assert_true(hf->hosts[2].has_rdma);
	assert_int_equal(hf->hosts[2].nrdma, 4);
	assert_int_equal(hf->hosts[2].rdma[2].kind, MR_RDMA_NULL);
	assert_int_equal(hf->hosts[2].rdma[2].devs.nr, 0);
	assert_int_equal(hf->hosts[2].rdma[3].kind, MR_RDMA_ONE);
	assert_string_equal(hf->hosts[2].rdma[3].devs.v[0], "rdma_en4");
	mr_hostfile_free(hf);

	hf = parse_ok(MLX_OLD_ETHERNET);
	assert_false(hf->object_form);
	assert_null(hf->backend);
	assert_false(hf->hosts[0].has_rdma);
	assert_int_equal(hf->hosts[0].nrdma, 0);
	mr_hostfile_free(hf);

	hf = parse_ok(MLX_RING);
	assert_string_equal(hf->backend, "ring");
	assert_true(hf->hosts[3].has_rdma);
	assert_int_equal(hf->hosts[3].nrdma, 0);
	assert_int_equal(hf->hosts[3].ips.nr, 2);
	mr_hostfile_free(hf);

	hf = parse_ok(MLX_ETHERNET);
	assert_string_equal(hf->backend, "");
	assert_string_equal(hf->envs.v[0], "GREETING=h\xc3\xa9llo \"w\xc3\xb6rld\"\tend");
	assert_string_equal(hf->envs.v[1], "EMOJI=\xf0\x9f\x98\x80");
	assert_string_equal(hf->hosts[1].ssh, "user@mac2");
	mr_hostfile_free(hf);
}

/* Every shape of an rdma cell, parsed, kept and written back. */
static void test_rdma_cells(void **state)
{
	static const char text[] =
		"[{\"ssh\": \"a\", \"rdma\": [null, \"rdma_en2\", [\"rdma_en3\", \"rdma_en4\"], [], [\"x\"]]},"
		" {\"ssh\": \"b\", \"rdma\": []}, {\"ssh\": \"c\", \"ips\": []}]";
	static const char want[] =
		"[\n"
		"    {\n"
		"        \"ssh\": \"a\",\n"
		"        \"ips\": [],\n"
		"        \"rdma\": [\n"
		"            null,\n"
		"            \"rdma_en2\",\n"
		"            [\n"
		"                \"rdma_en3\",\n"
		"                \"rdma_en4\"\n"
		"            ],\n"
		"            [],\n"
		"            [\n"
		"                \"x\"\n"
		"            ]\n"
		"        ]\n"
		"    },\n"
		"    {\n"
		"        \"ssh\": \"b\",\n"
		"        \"ips\": [],\n"
		"        \"rdma\": []\n"
		"    },\n"
		"    {\n"
		"        \"ssh\": \"c\",\n"
		"        \"ips\": []\n"
		"    }\n"
		"]";
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_buf b = MR_BUF_INIT;
	struct mr_hostfile *hf = parse_ok(text);
	const struct mr_host *a = &hf->hosts[0];

	(void)state;
	assert_int_equal(a->nrdma, 5);
	assert_int_equal(a->rdma[0].kind, MR_RDMA_NULL);
	assert_int_equal(a->rdma[1].kind, MR_RDMA_ONE);
	assert_int_equal(a->rdma[1].devs.nr, 1);
	assert_int_equal(a->rdma[2].kind, MR_RDMA_LIST);
	assert_int_equal(a->rdma[2].devs.nr, 2);
	assert_string_equal(a->rdma[2].devs.v[1], "rdma_en4");
	assert_int_equal(a->rdma[3].kind, MR_RDMA_LIST);
	assert_int_equal(a->rdma[3].devs.nr, 0);
	assert_int_equal(a->rdma[4].kind, MR_RDMA_LIST);
	assert_int_equal(a->rdma[4].devs.nr, 1);
	assert_true(hf->hosts[1].has_rdma);
	assert_false(hf->hosts[2].has_rdma);
	assert_int_equal(mr_hostfile_emit(hf, &b, &err), 0);
	assert_string_equal(mr_buf_cstr(&b), want);
	mr_buf_release(&b);
	mr_hostfile_free(hf);
	check_round_trip(want);
}

/* Built in code, written as the object form, read back equal. */
static void test_build_emit(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = mr_hostfile_new();
	struct mr_buf b = MR_BUF_INIT;
	int i;

	(void)state;
	assert_non_null(hf);
	assert_int_equal(mr_hostfile_emit(hf, &b, &err), 0);
	assert_string_equal(mr_buf_cstr(&b), "[]");
	mr_buf_reset(&b);
	hf->object_form = true;
	assert_int_equal(mr_hostfile_emit(hf, &b, &err), 0);
	assert_string_equal(mr_buf_cstr(&b),
			    "{\n    \"backend\": \"\",\n    \"envs\": [],\n    \"hosts\": []\n}");
	mr_buf_reset(&b);
	for (i = 0; i < 4; i++) {
		char name[8];
		snprintf(name, sizeof(name), "m%d", i + 1);
		assert_int_equal(mr_hostfile_add_host(hf, name, &err), i);
		struct mr_host *h = &hf->hosts[i];
		assert_int_equal(mr_strvec_pushf(&h->ips, "10.0.0.%d", i + 1), 0);
		h->has_rdma = true;
		h->rdma = calloc(4, sizeof(*h->rdma));
		assert_non_null(h->rdma);
		h->nrdma = 4;
		for (int j = 0, k = 0; j < 4; j++) {
			if (j == i)
				continue;
			h->rdma[j].kind = MR_RDMA_ONE;
			assert_int_equal(mr_strvec_pushf(&h->rdma[j].devs, "rdma_en%d", 2 + k++), 0);
		}
	}
	hf->backend = strdup("jaccl");
	assert_int_equal(mr_strvec_push(&hf->envs, "MLX_METAL_FAST_SYNCH=1"), 0);
	assert_int_equal(mr_hostfile_emit(hf, &b, &err), 0);
	assert_string_equal(mr_buf_cstr(&b), MLX_JACCL_MESH);
	assert_int_equal(mr_hostfile_check_rdma(hf, true, &err), 0);

	/* Not UTF-8: refused, buffer untouched. */
	mr_buf_reset(&b);
	free(hf->hosts[0].ssh);
	hf->hosts[0].ssh = strdup("bad\xff");
	assert_int_equal(mr_hostfile_emit(hf, &b, &err), MESHRUN_E_INVAL);
	assert_string_equal(err.msg, "hostfile: a name is not valid UTF-8");
	assert_int_equal(b.len, 0);
	mr_buf_release(&b);
	mr_hostfile_free(hf);
	mr_hostfile_free(NULL);
}

static void test_save_load(void **state)
{
	char dir[] = "/tmp/test_hostfile.XXXXXX";
	char path[256];
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = parse_ok(MLX_JACCL_RING), *back = NULL;
	struct mr_buf b = MR_BUF_INIT;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/hosts.json", dir);
	assert_int_equal(mr_hostfile_save(hf, path, &err), 0);
	/* The file holds exactly what MLX's json.dump writes: no trailing newline. */
	assert_int_equal(mr_read_file(path, 1 << 20, &b, &err), 0);
	assert_int_equal(b.len, strlen(MLX_JACCL_RING));
	assert_memory_equal(b.p, MLX_JACCL_RING, b.len);
	assert_int_equal(mr_hostfile_load(path, &back, &err), 0);
	assert_int_equal(back->nhosts, 4);
	assert_string_equal(back->backend, "jaccl-ring");
	mr_hostfile_free(back);
	back = NULL;

	/* Errors name the file, line and column. */
	static const char bad[] = "[\n  {\"ssh\": \"a\",}\n]";
	assert_int_equal(mr_write_file(path, bad, strlen(bad), 0644, &err), 0);
	assert_int_equal(mr_hostfile_load(path, &back, &err), MESHRUN_E_PARSE);
	assert_null(back);
	char want[512];
	snprintf(want, sizeof(want), "%s:2:15: malformed JSON (near '}')", path);
	assert_string_equal(err.msg, want);
	unlink(path);

	struct meshrun_err e2 = MESHRUN_ERR_INIT;
	assert_int_equal(mr_hostfile_load(path, &back, &e2), MESHRUN_E_SYS);
	snprintf(want, sizeof(want), "open '%s': No such file or directory", path);
	assert_string_equal(e2.msg, want);
	assert_int_equal(rmdir(dir), 0);
	mr_buf_release(&b);
	mr_hostfile_free(hf);
}

static void test_from_list(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = NULL;
	struct mr_buf b = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_hostfile_from_list("10.0.0.1,m2,::1,user@h3.local", &hf, &err), 0);
	assert_int_equal(hf->nhosts, 4);
	assert_int_equal(hf->hosts[0].ips.nr, 1);
	assert_string_equal(hf->hosts[0].ips.v[0], "10.0.0.1");
	assert_int_equal(hf->hosts[1].ips.nr, 0);
	assert_string_equal(hf->hosts[2].ips.v[0], "::1");
	assert_int_equal(hf->hosts[3].ips.nr, 0);
	assert_string_equal(hf->hosts[3].ssh, "user@h3.local");
	assert_int_equal(mr_hostfile_emit(hf, &b, &err), 0);
	assert_string_equal(mr_buf_cstr(&b), MLX_FROM_LIST);
	mr_hostfile_free(hf);
	mr_buf_release(&b);

	/* IPv6 forms, repeated hosts (several ranks on one machine), a bare name. */
	hf = NULL;
	assert_int_equal(mr_hostfile_from_list("fe80::1,2001:db8::a:1,h,h,127.0.0.1", &hf, &err), 0);
	assert_int_equal(hf->nhosts, 5);
	assert_string_equal(hf->hosts[1].ips.v[0], "2001:db8::a:1");
	assert_int_equal(hf->hosts[3].ips.nr, 0);
	mr_hostfile_free(hf);

	static const struct {
		const char *in;
		const char *msg;
	} bad[] = {
		{ "", "--hosts '': entry 1 is empty" },
		{ "a,,b", "--hosts 'a,,b': entry 2 is empty" },
		{ "a,", "--hosts 'a,': entry 2 is empty" },
		{ ",a", "--hosts ',a': entry 1 is empty" },
		{ "a;rm -rf /", "--hosts: entry 1 'a;rm -rf /' is not a [user@]host name or IP address" },
		{ "ok,-oProxyCommand=x", "--hosts: entry 2 '-oProxyCommand=x' is not a [user@]host name or IP address (it would be read as an ssh option)" },
		{ "a b", "--hosts: entry 1 'a b' is not a [user@]host name or IP address" },
		{ "$(id)", "--hosts: entry 1 '$(id)' is not a [user@]host name or IP address" },
		{ "`id`", "--hosts: entry 1 '`id`' is not a [user@]host name or IP address" },
		{ "user@", "--hosts: entry 1 'user@' is not a [user@]host name or IP address" },
		{ "@h", "--hosts: entry 1 '@h' is not a [user@]host name or IP address" },
		{ "a@b@c", "--hosts: entry 1 'a@b@c' is not a [user@]host name or IP address" },
		{ "h\n", "--hosts: entry 1 'h\n' is not a [user@]host name or IP address (no spaces around the commas)" },
		{ "127.0.0.1, 127.0.0.1", "--hosts: entry 2 ' 127.0.0.1' is not a [user@]host name or IP address (no spaces around the commas)" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		hf = NULL;
		assert_int_equal(mr_hostfile_from_list(bad[i].in, &hf, &e), MESHRUN_E_USAGE);
		assert_null(hf);
		assert_string_equal(e.msg, bad[i].msg);
	}
}

static void test_malformed(void **state)
{
	static const struct {
		const char *in;
		const char *msg;
	} cases[] = {
		{ "{\"hosts\": [{\"ssh\": \"a\"}, {\"ssh\": \"b\"}, {\"ssh\": \"c\", \"ips\": [3]}]}",
		  "hosts.json: hosts[2].ips[0]: expected a string, got number" },
		{ "[{\"ssh\": \"a\", \"ips\": [\"1.2.3.4\", null]}]",
		  "hosts.json: [0].ips[1]: expected a string, got null" },
		{ "[\n    {\"ssh\": \"a\"},\n    {\"ssh\" \"b\"}\n]",
		  "hosts.json:3:12: malformed JSON (near '\"b\"}')" },
		{ "[{\"ssh\": \"a\"}", "hosts.json:1:14: malformed JSON (at end of input)" },
		{ "", "hosts.json:1:1: malformed JSON (at end of input)" },
		{ "[{\"ssh\": \"a\"}] x", "hosts.json:1:16: malformed JSON: extra data after the document (near 'x')" },
		{ "\"m1\"", "hosts.json: top level: expected an array or an object, got string" },
		{ "[]", "hosts.json: top level: no hosts" },
		{ "{\"backend\": \"ring\"}", "hosts.json: top level: missing key 'hosts'" },
		{ "{\"hosts\": []}", "hosts.json: hosts: no hosts" },
		{ "{\"hosts\": {}}", "hosts.json: hosts: expected an array, got object" },
		{ "{\"backend\": 1, \"hosts\": [{\"ssh\": \"a\"}]}",
		  "hosts.json: backend: expected a string, got number" },
		{ "{\"envs\": \"A=1\", \"hosts\": [{\"ssh\": \"a\"}]}",
		  "hosts.json: envs: expected an array, got string" },
		{ "{\"envs\": [\"A=1\", \"B C=2\"], \"hosts\": [{\"ssh\": \"a\"}]}",
		  "hosts.json: envs[1]: 'B C=2' is not NAME=VALUE with a valid variable name" },
		{ "{\"envs\": [\"=x\"], \"hosts\": [{\"ssh\": \"a\"}]}",
		  "hosts.json: envs[0]: '=x' is not NAME=VALUE with a valid variable name" },
		{ "[{\"ssh\": \"a\"}, \"b\"]", "hosts.json: [1]: expected an object, got string" },
		{ "[{\"ssh\": \"a\"}, null]", "hosts.json: [1]: expected an object, got null" },
		{ "[{\"ips\": [\"1.2.3.4\"]}]", "hosts.json: [0]: missing key 'ssh'" },
		{ "{\"hosts\": [{\"ssh\": \"a\"}, {\"SSH\": \"b\"}]}", "hosts.json: hosts[1]: missing key 'ssh'" },
		{ "[{\"ssh\": true}]", "hosts.json: [0].ssh: expected a string, got bool" },
		{ "[{\"ssh\": \"\"}]", "hosts.json: [0].ssh: '' is not a host name or IP address" },
		{ "[{\"ssh\": \"a;rm -rf /\"}]",
		  "hosts.json: [0].ssh: 'a;rm -rf /' is not a host name or IP address" },
		{ "[{\"ssh\": \"a\", \"ips\": [\"1.2.3.4; reboot\"]}]",
		  "hosts.json: [0].ips[0]: '1.2.3.4; reboot' is not an IP address or host name" },
		{ "[{\"ssh\": \"a\", \"ips\": \"1.2.3.4\"}]",
		  "hosts.json: [0].ips: expected an array, got string" },
		{ "[{\"ssh\": \"a\", \"rdma\": null}]", "hosts.json: [0].rdma: expected an array, got null" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, 2]}]",
		  "hosts.json: [0].rdma[1]: expected null, a string or an array, got number" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, {}]}]",
		  "hosts.json: [0].rdma[1]: expected null, a string or an array, got object" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, [\"rdma_en2\", null]]}]",
		  "hosts.json: [0].rdma[1][1]: expected a string, got null" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"\"]}]",
		  "hosts.json: [0].rdma[1]: '' is not an RDMA device name" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"../../etc\"]}]",
		  "hosts.json: [0].rdma[1]: '../../etc' is not an RDMA device name" },
		{ "[{\"ssh\": \"a\", \"rdma\": [[\"x y\"]]}]",
		  "hosts.json: [0].rdma[0][0]: 'x y' is not an RDMA device name" },
		{ "[{\"ssh\": \"a\", \"ssh\": \"b\"}]", "hosts.json: [0]: duplicate key 'ssh'" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		struct mr_hostfile *hf = NULL;
		int rc = mr_hostfile_parse(cases[i].in, strlen(cases[i].in), "hosts.json", &hf, &err);
		if (rc != MESHRUN_E_PARSE || strcmp(err.msg, cases[i].msg))
			fail_msg("case %zu: rc %d, got \"%s\", want \"%s\"", i, rc, err.msg,
				 cases[i].msg);
		assert_null(hf);
	}
}

/* Unknown keys are ignored (as MLX), known keys in any order are accepted. */
static void test_lenient(void **state)
{
	struct mr_hostfile *hf;

	(void)state;
	hf = parse_ok("{\"hosts\": [{\"rdma\": [], \"comment\": 1, \"ips\": [\"1.2.3.4\"], \"ssh\": \"a\"}],"
		      " \"version\": 2, \"envs\": [\"EMPTY\"], \"backend\": \"ring\"}");
	assert_int_equal(hf->nhosts, 1);
	assert_string_equal(hf->hosts[0].ips.v[0], "1.2.3.4");
	assert_string_equal(hf->envs.v[0], "EMPTY");
	mr_hostfile_free(hf);
}

static struct mr_hostfile *matrix(const char *rows)
{
	return parse_ok(rows);
}

static void test_check_rdma(void **state)
{
	const struct {
		const char *json;
		bool mesh;
		const char *msg; /* NULL: valid */
	} cases[] = {
		{ MLX_JACCL_MESH, true, NULL },
		{ MLX_JACCL_RING, false, NULL },
		/* A mesh is also a valid ring. */
		{ MLX_JACCL_MESH, false, NULL },
		{ MLX_JACCL_RING, true,
		  "malformed hostfile: host 0 ('m1') rdma[2]: no RDMA device for peer 2 ('m3')" },
		{ MLX_RING, true,
		  "malformed hostfile: host 0 ('m1'): rdma has 0 entries, expected 4 (one per host)" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null]}]", true, NULL },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"r1\"]}, {\"ssh\": \"b\", \"rdma\": [\"r1\", null]}]",
		  false, NULL },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, [\"r1\", \"r2\"]]}, {\"ssh\": \"b\", \"rdma\": [[\"r1\", \"r2\"], null]}]",
		  false, NULL },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"r1\"]}, {\"ssh\": \"b\", \"rdma\": [\"r1\"]}]", true,
		  "malformed hostfile: host 1 ('b'): rdma has 1 entries, expected 2 (one per host)" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"r1\"]}, {\"ssh\": \"b\", \"rdma\": [\"r1\", \"r2\", null]}]",
		  true, "malformed hostfile: host 1 ('b'): rdma has 3 entries, expected 2 (one per host)" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"r1\"]}, {\"ssh\": \"b\", \"rdma\": [\"r1\", \"r2\"]}]",
		  true, "malformed hostfile: host 1 ('b') rdma[1]: expected null for the host itself, got 'r2'" },
		{ "[{\"ssh\": \"a\", \"rdma\": [[], \"r1\"]}, {\"ssh\": \"b\", \"rdma\": [\"r1\", null]}]",
		  false, "malformed hostfile: host 0 ('a') rdma[0]: expected null for the host itself, got '[]'" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, []]}, {\"ssh\": \"b\", \"rdma\": [\"r1\", null]}]",
		  true, "malformed hostfile: host 0 ('a') rdma[1]: no RDMA device for peer 1 ('b')" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"r1\", \"r2\"]},"
		  " {\"ssh\": \"b\", \"rdma\": [\"r1\", null, \"r2\"]},"
		  " {\"ssh\": \"c\", \"rdma\": [\"r1\", null, null]}]",
		  true, "malformed hostfile: host 2 ('c') rdma[1]: no RDMA device for peer 1 ('b')" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"r1\", \"r2\"]},"
		  " {\"ssh\": \"b\", \"rdma\": [\"r1\", null, \"r2\"]},"
		  " {\"ssh\": \"c\", \"rdma\": [\"r1\", null, null]}]",
		  false, "malformed hostfile: host 2 ('c') rdma[1]: no RDMA device for peer 1 ('b')" },
		/* Ring with unequal cable counts to the two neighbours. */
		{ "[{\"ssh\": \"a\", \"rdma\": [null, [\"r1\", \"r2\"], \"r3\"]},"
		  " {\"ssh\": \"b\", \"rdma\": [\"r1\", null, \"r2\"]},"
		  " {\"ssh\": \"c\", \"rdma\": [\"r1\", \"r2\", null]}]",
		  false, "malformed hostfile: host 0 ('a'): rdma[2] has 1 device(s) but rdma[1] has 2; a ring needs as many cables to each neighbour" },
		/* ...which is still a mesh. */
		{ "[{\"ssh\": \"a\", \"rdma\": [null, [\"r1\", \"r2\"], \"r3\"]},"
		  " {\"ssh\": \"b\", \"rdma\": [\"r1\", null, \"r2\"]},"
		  " {\"ssh\": \"c\", \"rdma\": [\"r1\", \"r2\", null]}]",
		  true, NULL },
		/* A 4-ring without the diagonal links is no mesh, but is a ring. */
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"x\", null, \"y\"]},"
		  " {\"ssh\": \"b\", \"rdma\": [\"x\", null, \"y\", null]},"
		  " {\"ssh\": \"c\", \"rdma\": [null, \"x\", null, \"y\"]},"
		  " {\"ssh\": \"d\", \"rdma\": [\"x\", null, \"y\", null]}]",
		  false, NULL },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"x\", null, \"y\"]},"
		  " {\"ssh\": \"b\", \"rdma\": [\"x\", null, \"y\", null]},"
		  " {\"ssh\": \"c\", \"rdma\": [null, \"x\", null, \"y\"]},"
		  " {\"ssh\": \"d\", \"rdma\": [\"x\", null, \"y\", null]}]",
		  true, "malformed hostfile: host 0 ('a') rdma[2]: no RDMA device for peer 2 ('c')" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		struct mr_hostfile *hf = matrix(cases[i].json);
		int rc = mr_hostfile_check_rdma(hf, cases[i].mesh, &err);
		if (!cases[i].msg) {
			if (rc)
				fail_msg("case %zu: unexpected error: %s", i, err.msg);
		} else if (rc != MESHRUN_E_INVAL || strcmp(err.msg, cases[i].msg)) {
			fail_msg("case %zu: rc %d, got \"%s\", want \"%s\"", i, rc, err.msg,
				 cases[i].msg);
		}
		mr_hostfile_free(hf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mlx_round_trips), cmocka_unit_test(test_mlx_model),
		cmocka_unit_test(test_rdma_cells),      cmocka_unit_test(test_build_emit),
		cmocka_unit_test(test_save_load),       cmocka_unit_test(test_from_list),
		cmocka_unit_test(test_malformed),       cmocka_unit_test(test_lenient),
		cmocka_unit_test(test_check_rdma),
	};
	return cmocka_run_group_tests(tests, load_files, free_files);
}
