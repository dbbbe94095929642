/*
 * Unit tests for the persist daemon's frames (src/hal/persist_proto.c): fields
 * round-trip, a stream split anywhere parses the same, and every length a peer
 * sends is checked (frame bounds, strings past the body, lying counts, NUL bytes
 * in strings, error codes that are not errors). Also --persist's values
 * (mr_hal_persist_pick) and the peer-uid check of the portability layer.
 */
#include "common/compat.h"
#include "common/port.h"
#include "common/err.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/persist/persist_proto.h"
#include "hal/ssh_opts.h"

#include <setjmp.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static void build_spawn(struct mr_buf *b, uint32_t id)
{
	char *argv[] = { "sh", "-c", "echo 'a b'", NULL };
	char *env[] = { "K=V", "EMPTY=", NULL };
	size_t start;

	assert_int_equal(mr_pf_begin(b, MR_PF_SPAWN, id, &start), 0);
	assert_int_equal(mr_pf_put_str(b, "h1"), 0);
	assert_int_equal(mr_pf_put_str(b, NULL), 0);
	assert_int_equal(mr_pf_put_strv(b, argv), 0);
	assert_int_equal(mr_pf_put_strv(b, env), 0);
	assert_int_equal(mr_pf_end(b, start), 0);
}

static void check_spawn(const struct mr_pf_frame *f, uint32_t id)
{
	struct mr_strvec argv = MR_STRVEC_INIT, env = MR_STRVEC_INIT;
	struct mr_pf_reader r;
	char *host, *cwd;

	assert_int_equal(f->type, MR_PF_SPAWN);
	assert_int_equal(f->id, id);
	mr_pf_reader_init(&r, f);
	assert_int_equal(mr_pf_get_str(&r, &host), 0);
	assert_int_equal(mr_pf_get_str(&r, &cwd), 0);
	assert_int_equal(mr_pf_get_strv(&r, &argv), 0);
	assert_int_equal(mr_pf_get_strv(&r, &env), 0);
	assert_false(r.bad);
	assert_int_equal(r.left, 0);
	assert_string_equal(host, "h1");
	assert_null(cwd);
	assert_int_equal(argv.nr, 3);
	assert_string_equal(argv.v[2], "echo 'a b'");
	assert_null(argv.v[3]);
	assert_int_equal(env.nr, 2);
	assert_string_equal(env.v[1], "EMPTY=");
	free(host);
	mr_strvec_release(&argv);
	mr_strvec_release(&env);
}

static void test_roundtrip(void **state)
{
	struct mr_buf b = MR_BUF_INIT;
	struct mr_pf_frame f;
	size_t off = 0;

	(void)state;
	build_spawn(&b, 7);
	assert_int_equal(mr_pf_next(&b, &off, &f), 1);
	assert_int_equal(off, b.len);
	check_spawn(&f, 7);
	assert_int_equal(mr_pf_next(&b, &off, &f), 0); /* nothing more */
	mr_buf_release(&b);
}

/* A stream cut at every byte parses to the same frames, in order. */
static void test_split_stream(void **state)
{
	struct mr_buf all = MR_BUF_INIT, in = MR_BUF_INIT;
	struct mr_pf_frame f;
	size_t start, got = 0;

	(void)state;
	build_spawn(&all, 1);
	assert_int_equal(mr_pf_begin(&all, MR_PF_OUT, 1, &start), 0);
	assert_int_equal(mr_pf_put_bytes(&all, "x\0y", 3), 0);
	assert_int_equal(mr_pf_end(&all, start), 0);
	assert_int_equal(mr_pf_begin(&all, MR_PF_CLOSE_STDIN, 2, &start), 0); /* empty body */
	assert_int_equal(mr_pf_end(&all, start), 0);
	build_spawn(&all, 3);
	for (size_t i = 0; i < all.len; i++) {
		size_t off = 0;
		int rc;

		assert_int_equal(mr_buf_append(&in, all.p + i, 1), 0);
		while ((rc = mr_pf_next(&in, &off, &f)) == 1) {
			struct mr_pf_reader r;
			const char *d;
			size_t n;

			switch (got++) {
			case 0: check_spawn(&f, 1); break;
			case 1:
				assert_int_equal(f.type, MR_PF_OUT);
				mr_pf_reader_init(&r, &f);
				mr_pf_get_bytes(&r, &d, &n);
				assert_false(r.bad);
				assert_int_equal(n, 3);
				assert_memory_equal(d, "x\0y", 3);
				break;
			case 2:
				assert_int_equal(f.type, MR_PF_CLOSE_STDIN);
				assert_int_equal(f.id, 2);
				assert_int_equal(f.len, 0);
				break;
			case 3: check_spawn(&f, 3); break;
			default: fail();
			}
		}
		assert_int_equal(rc, 0);
		mr_buf_consume(&in, off);
	}
	assert_int_equal(got, 4);
	assert_int_equal(in.len, 0);
	mr_buf_release(&all);
	mr_buf_release(&in);
}

static void raw_frame(struct mr_buf *b, uint32_t len, const void *rest, size_t n)
{
	unsigned char h[4] = { (unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8),
			       (unsigned char)len };

	mr_buf_reset(b);
	assert_int_equal(mr_buf_append(b, h, 4), 0);
	if (n)
		assert_int_equal(mr_buf_append(b, rest, n), 0);
}

static void test_frame_bounds(void **state)
{
	struct mr_buf b = MR_BUF_INIT;
	struct mr_pf_frame f;
	size_t off;

	(void)state;
	raw_frame(&b, 4, "\1\0\0\0", 4); /* shorter than type + id */
	off = 0;
	assert_int_equal(mr_pf_next(&b, &off, &f), -1);
	raw_frame(&b, MR_PF_FRAME_MAX + 1, NULL, 0); /* too big: refused before it arrives */
	off = 0;
	assert_int_equal(mr_pf_next(&b, &off, &f), -1);
	assert_int_equal(off, 0);
	raw_frame(&b, 1000, "\1\0\0\0\1", 5); /* announced, not there yet */
	off = 0;
	assert_int_equal(mr_pf_next(&b, &off, &f), 0);
	assert_int_equal(off, 0);
	raw_frame(&b, 0, NULL, 0);
	b.len = 3; /* not even a length */
	off = 0;
	assert_int_equal(mr_pf_next(&b, &off, &f), 0);
	mr_buf_release(&b);
}

/* A body whose fields lie about their lengths: the reader goes bad, never past the end. */
static void test_body_bounds(void **state)
{
	struct mr_buf b = MR_BUF_INIT;
	struct mr_pf_frame f;
	struct mr_pf_reader r;
	struct mr_strvec sv = MR_STRVEC_INIT;
	size_t start, off;
	char *s;

	(void)state;
	/* a string claiming 100 bytes in a 6-byte body */
	assert_int_equal(mr_pf_begin(&b, MR_PF_REMOVE, 1, &start), 0);
	assert_int_equal(mr_pf_put_u32(&b, 100), 0);
	assert_int_equal(mr_buf_append(&b, "ab", 2), 0);
	assert_int_equal(mr_pf_end(&b, start), 0);
	off = 0;
	assert_int_equal(mr_pf_next(&b, &off, &f), 1);
	mr_pf_reader_init(&r, &f);
	assert_int_equal(mr_pf_get_str(&r, &s), -1);
	assert_null(s);
	assert_true(r.bad);
	assert_int_equal(mr_pf_get_u32(&r), 0); /* stays bad */

	/* a vector count larger than the body could hold */
	mr_buf_reset(&b);
	assert_int_equal(mr_pf_begin(&b, MR_PF_CONNECT, 1, &start), 0);
	assert_int_equal(mr_pf_put_u32(&b, 0x40000000), 0);
	assert_int_equal(mr_pf_put_str(&b, "h1"), 0);
	assert_int_equal(mr_pf_end(&b, start), 0);
	off = 0;
	assert_int_equal(mr_pf_next(&b, &off, &f), 1);
	mr_pf_reader_init(&r, &f);
	assert_int_equal(mr_pf_get_strv(&r, &sv), -1);
	assert_true(r.bad);
	assert_int_equal(sv.nr, 0);

	/* a NULL inside a vector, and a NUL byte inside a string */
	mr_buf_reset(&b);
	assert_int_equal(mr_pf_begin(&b, MR_PF_CONNECT, 1, &start), 0);
	assert_int_equal(mr_pf_put_u32(&b, 2), 0);
	assert_int_equal(mr_pf_put_str(&b, "h1"), 0);
	assert_int_equal(mr_pf_put_str(&b, NULL), 0);
	assert_int_equal(mr_pf_put_bytes(&b, "a\0b", 3), 0);
	assert_int_equal(mr_pf_end(&b, start), 0);
	off = 0;
	assert_int_equal(mr_pf_next(&b, &off, &f), 1);
	mr_pf_reader_init(&r, &f);
	assert_int_equal(mr_pf_get_strv(&r, &sv), -1);
	assert_true(r.bad);
	mr_strvec_release(&sv);
	mr_pf_reader_init(&r, &f);
	mr_pf_get_u32(&r);
	mr_pf_get_bytes(&r, (const char **)&s, &off);
	mr_pf_get_bytes(&r, (const char **)&s, &off);
	assert_false(r.bad);
	assert_int_equal(mr_pf_get_str(&r, &s), -1);
	assert_true(r.bad);

	/* a frame too big to write */
	mr_buf_reset(&b);
	assert_int_equal(mr_pf_put_bytes(&b, "", MR_PF_FRAME_MAX), -1);
	mr_buf_release(&b);
}

static void test_err_field(void **state)
{
	struct mr_buf b = MR_BUF_INIT;
	struct meshrun_err in = MESHRUN_ERR_INIT, out = MESHRUN_ERR_INIT;
	struct mr_pf_frame f;
	struct mr_pf_reader r;
	size_t start, off = 0;
	char big[3000];

	(void)state;
	in.code = MESHRUN_E_AUTH;
	in.sys_errno = 13;
	snprintf(in.msg, sizeof(in.msg), "ssh to 'h1' (10.0.0.1:22): authentication failed");
	assert_int_equal(mr_pf_begin(&b, MR_PF_REPLY, 9, &start), 0);
	assert_int_equal(mr_pf_put_err(&b, &in), 0);
	assert_int_equal(mr_pf_put_err(&b, NULL), 0);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(mr_pf_put_i32(&b, MESHRUN_E_PEER), 0);
	assert_int_equal(mr_pf_put_i32(&b, 0), 0);
	assert_int_equal(mr_pf_put_str(&b, big), 0);
	assert_int_equal(mr_pf_put_i32(&b, 5), 0); /* not an error code */
	assert_int_equal(mr_pf_put_i32(&b, 0), 0);
	assert_int_equal(mr_pf_put_str(&b, "x"), 0);
	assert_int_equal(mr_pf_end(&b, start), 0);
	assert_int_equal(mr_pf_next(&b, &off, &f), 1);
	mr_pf_reader_init(&r, &f);
	mr_pf_get_err(&r, &out);
	assert_int_equal(out.code, MESHRUN_E_AUTH);
	assert_int_equal(out.sys_errno, 13);
	assert_string_equal(out.msg, in.msg);
	mr_pf_get_err(&r, &out);
	assert_int_equal(out.code, 0);
	assert_string_equal(out.msg, "");
	mr_pf_get_err(&r, &out); /* cut to fit */
	assert_int_equal(out.code, MESHRUN_E_PEER);
	assert_int_equal(strlen(out.msg), sizeof(out.msg) - 1);
	assert_false(r.bad);
	mr_pf_get_err(&r, &out);
	assert_true(r.bad);
	mr_buf_release(&b);
}

static void test_persist_pick(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int64_t ms;
	bool stop;

	(void)state;
	unsetenv("MESHRUN_SSH_PERSIST");
	assert_int_equal(mr_hal_persist_pick(NULL, &ms, &stop, &err), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(mr_hal_persist_pick("10m", &ms, &stop, &err), 0);
	assert_int_equal(ms, 600000);
	assert_int_equal(mr_hal_persist_pick("90s", &ms, &stop, &err), 0);
	assert_int_equal(ms, 90000);
	assert_int_equal(mr_hal_persist_pick("1h", &ms, &stop, &err), 0);
	assert_int_equal(ms, 3600000);
	assert_int_equal(mr_hal_persist_pick("1500ms", &ms, &stop, &err), 0);
	assert_int_equal(ms, 1500);
	assert_int_equal(mr_hal_persist_pick("5", &ms, &stop, &err), 0);
	assert_int_equal(ms, 5000);
	assert_int_equal(mr_hal_persist_pick("off", &ms, &stop, &err), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(mr_hal_persist_pick("stop", &ms, &stop, &err), 0);
	assert_true(stop);
	assert_int_equal(mr_hal_persist_pick("soon", &ms, &stop, &err), MESHRUN_E_USAGE);
	assert_non_null(strstr(err.msg, "--persist 'soon'"));
	err = (struct meshrun_err)MESHRUN_ERR_INIT;
	assert_int_equal(mr_hal_persist_pick("h", &ms, &stop, &err), MESHRUN_E_USAGE);
	err = (struct meshrun_err)MESHRUN_ERR_INIT;
	setenv("MESHRUN_SSH_PERSIST", "2m", 1);
	assert_int_equal(mr_hal_persist_pick(NULL, &ms, &stop, &err), 0);
	assert_int_equal(ms, 120000);
	assert_int_equal(mr_hal_persist_pick("0", &ms, &stop, &err), 0); /* the flag wins */
	assert_int_equal(ms, 0);
	setenv("MESHRUN_SSH_PERSIST", "-3", 1);
	assert_int_equal(mr_hal_persist_pick(NULL, &ms, &stop, &err), MESHRUN_E_USAGE);
	assert_non_null(strstr(err.msg, "MESHRUN_SSH_PERSIST '-3'"));
	unsetenv("MESHRUN_SSH_PERSIST");
}

static void test_peer_uid(void **state)
{
	int sv[2];
	uid_t uid = (uid_t)-1;

	(void)state;
	assert_int_equal(mr_socketpair(AF_UNIX, SOCK_STREAM, MR_SOCK_CLOEXEC, sv), 0);
	assert_int_equal(mr_peer_uid(sv[0], &uid), 0);
	assert_int_equal(uid, geteuid());
	close(sv[0]);
	close(sv[1]);
}

/* RESOLVE and RESOLVED: host names out, (error, gap) per host back. */
static void test_resolve_frames(void **state)
{
	struct mr_buf b = MR_BUF_INIT;
	char *hosts[] = { "h1", "user@h2", NULL };
	struct meshrun_err e = MESHRUN_ERR_INIT, got;
	struct mr_strvec sv = MR_STRVEC_INIT;
	struct mr_pf_frame f;
	struct mr_pf_reader r;
	size_t start, off = 0;
	char *gap;

	(void)state;
	assert_int_equal(mr_pf_begin(&b, MR_PF_RESOLVE, 7, &start), 0);
	assert_int_equal(mr_pf_put_strv(&b, hosts), 0);
	assert_int_equal(mr_pf_end(&b, start), 0);
	mr_err_set(&e, MESHRUN_E_PARSE, "ssh -G for 'h2' failed");
	assert_int_equal(mr_pf_begin(&b, MR_PF_RESOLVED, 7, &start), 0);
	assert_int_equal(mr_pf_put_u32(&b, 2), 0);
	assert_int_equal(mr_pf_put_err(&b, NULL), 0);
	assert_int_equal(mr_pf_put_str(&b, "PKCS11Provider /x.so: libssh2 has no PKCS#11"), 0);
	assert_int_equal(mr_pf_put_err(&b, &e), 0);
	assert_int_equal(mr_pf_put_str(&b, NULL), 0);
	assert_int_equal(mr_pf_end(&b, start), 0);

	assert_int_equal(mr_pf_next(&b, &off, &f), 1);
	assert_int_equal(f.type, MR_PF_RESOLVE);
	mr_pf_reader_init(&r, &f);
	assert_int_equal(mr_pf_get_strv(&r, &sv), 0);
	assert_int_equal(sv.nr, 2);
	assert_string_equal(sv.v[1], "user@h2");
	assert_int_equal(mr_pf_next(&b, &off, &f), 1);
	assert_int_equal(f.type, MR_PF_RESOLVED);
	assert_int_equal(f.id, 7);
	mr_pf_reader_init(&r, &f);
	assert_int_equal(mr_pf_get_u32(&r), 2);
	mr_pf_get_err(&r, &got);
	assert_int_equal(got.code, 0);
	assert_int_equal(mr_pf_get_str(&r, &gap), 0);
	assert_string_equal(gap, "PKCS11Provider /x.so: libssh2 has no PKCS#11");
	free(gap);
	mr_pf_get_err(&r, &got);
	assert_int_equal(got.code, MESHRUN_E_PARSE);
	assert_string_equal(got.msg, "ssh -G for 'h2' failed");
	assert_int_equal(mr_pf_get_str(&r, &gap), 0);
	assert_null(gap);
	assert_false(r.bad);
	assert_int_equal(r.left, 0);
	mr_strvec_release(&sv);
	mr_buf_release(&b);
}

static void path_for(const char *cfg, char *out, size_t n)
{
	struct mr_hal_opts o = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;

	o.ssh_config = cfg;
	assert_int_equal(mr_hal_persist_path(&o, out, n, &err), 0);
}

/* The daemon's socket name follows the ssh_config file: an edit (content, or
 * only its mtime) names another daemon, so no `ssh -G` answer cached by the
 * old one is used; an unchanged file keeps the name. */
static void test_path_follows_config(void **state)
{
	char dir[] = "/tmp/mr-persist-path.XXXXXX", cfg[256], rt[300], p1[512], p2[512], p3[512], p4[512];
	struct timeval tv[2];
	FILE *fp;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(rt, sizeof(rt), "%s/run", dir);
	assert_int_equal(mkdir(rt, 0700), 0);
	setenv("XDG_RUNTIME_DIR", rt, 1);
	snprintf(cfg, sizeof(cfg), "%s/ssh_config", dir);
	path_for(cfg, p1, sizeof(p1)); /* no file yet */
	fp = fopen(cfg, "w");
	assert_non_null(fp);
	fputs("Host h1\n  HostName 10.0.0.1\n", fp);
	fclose(fp);
	path_for(cfg, p2, sizeof(p2));
	assert_string_not_equal(p1, p2);
	path_for(cfg, p3, sizeof(p3));
	assert_string_equal(p2, p3);
	/* the same size, another mtime */
	gettimeofday(&tv[0], NULL);
	tv[1] = tv[0];
	tv[1].tv_sec += 5;
	assert_int_equal(utimes(cfg, tv), 0);
	path_for(cfg, p4, sizeof(p4));
	assert_string_not_equal(p3, p4);
	assert_true(!strncmp(p4, rt, strlen(rt)));
	unsetenv("XDG_RUNTIME_DIR");
	unlink(cfg);
	snprintf(p1, sizeof(p1), "%s/meshrun", rt);
	rmdir(p1);
	rmdir(rt);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_split_stream),
		cmocka_unit_test(test_frame_bounds),
		cmocka_unit_test(test_body_bounds),
		cmocka_unit_test(test_err_field),
		cmocka_unit_test(test_persist_pick),
		cmocka_unit_test(test_peer_uid),
		cmocka_unit_test(test_resolve_frames),
		cmocka_unit_test(test_path_follows_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
