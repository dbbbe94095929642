/* Unit tests for src/coll/tcp/wire.c: the ring's hello and control frames, fed byte by byte and broken. */
#include "common/compat.h"
#include "coll/tcp/wire.h"

#include <setjmp.h>
#include <cmocka.h>

static size_t make(unsigned char *buf, uint32_t rank, unsigned lane, const char *token)
{
	struct mr_hello h;

	memset(&h, 0, sizeof(h));
	h.version = MR_WIRE_VERSION;
	h.lane = lane;
	h.rank = rank;
	h.size = 4;
	h.nconn = 2;
	h.token_len = strlen(token);
	memcpy(h.token, token, h.token_len);
	return mr_hello_encode(&h, buf);
}

static void test_roundtrip_incremental(void **state)
{
	unsigned char buf[MR_HELLO_MAX];
	struct mr_hello h;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	size_t len = make(buf, 3, 1, "tok-123");

	(void)state;
	assert_int_equal(len, MR_HELLO_FIXED + 7);
	for (size_t got = 0; got < len; got++) {
		int rc = mr_hello_decode(buf, got, &h, &err);
		assert_true(rc > (int)got); /* asks for more, never errs on a prefix */
	}
	assert_int_equal(mr_hello_decode(buf, len, &h, &err), 0);
	assert_int_equal(h.rank, 3);
	assert_int_equal(h.lane, 1);
	assert_int_equal(mr_hello_check(&h, 3, 4, 2, "tok-123", 7, &err), 0);
	assert_int_equal(err.code, 0);
}

static void test_refusals(void **state)
{
	unsigned char buf[MR_HELLO_MAX];
	struct mr_hello h;
	size_t len;

	(void)state;
	{ /* garbage: the first byte already tells */
		struct meshrun_err err = MESHRUN_ERR_INIT;
		assert_int_equal(mr_hello_decode((const unsigned char *)"GET / HTTP/1.1\r\n", 1, &h, &err), MESHRUN_E_PROTO);
		assert_non_null(strstr(err.msg, "bad magic"));
	}
	{ /* wrong version */
		struct meshrun_err err = MESHRUN_ERR_INIT;
		len = make(buf, 1, 0, "");
		buf[4] = 9;
		assert_int_equal(mr_hello_decode(buf, len, &h, &err), MESHRUN_E_PROTO);
		assert_non_null(strstr(err.msg, "protocol version 9"));
	}
	{ /* token length beyond the limit */
		struct meshrun_err err = MESHRUN_ERR_INIT;
		len = make(buf, 1, 0, "");
		buf[20] = 0xff;
		buf[21] = 0xff;
		assert_int_equal(mr_hello_decode(buf, len, &h, &err), MESHRUN_E_PROTO);
	}
	{ /* another job's token */
		struct meshrun_err err = MESHRUN_ERR_INIT;
		len = make(buf, 1, 0, "job-a");
		assert_int_equal(mr_hello_decode(buf, len, &h, &err), 0);
		assert_int_equal(mr_hello_check(&h, 1, 4, 2, "job-b", 5, &err), MESHRUN_E_AUTH);
		assert_non_null(strstr(err.msg, "job token does not match"));
	}
	{ /* token absent on one side only */
		struct meshrun_err err = MESHRUN_ERR_INIT;
		len = make(buf, 1, 0, "");
		assert_int_equal(mr_hello_decode(buf, len, &h, &err), 0);
		assert_int_equal(mr_hello_check(&h, 1, 4, 2, "job-b", 5, &err), MESHRUN_E_AUTH);
	}
	{ /* not the expected neighbour, wrong size, lane out of range */
		struct meshrun_err e1 = MESHRUN_ERR_INIT, e2 = MESHRUN_ERR_INIT, e3 = MESHRUN_ERR_INIT;
		len = make(buf, 2, 0, "t");
		assert_int_equal(mr_hello_decode(buf, len, &h, &e1), 0);
		assert_int_equal(mr_hello_check(&h, 1, 4, 2, "t", 1, &e1), MESHRUN_E_PROTO);
		assert_non_null(strstr(e1.msg, "expected rank 1"));
		assert_int_equal(mr_hello_check(&h, 2, 5, 2, "t", 1, &e2), MESHRUN_E_PROTO);
		assert_non_null(strstr(e2.msg, "group size 4"));
		len = make(buf, 2, 7, "t");
		assert_int_equal(mr_hello_decode(buf, len, &h, &e3), 0);
		assert_int_equal(mr_hello_check(&h, 2, 4, 2, "t", 1, &e3), MESHRUN_E_PROTO);
		len = make(buf, 2, MR_LANE_P2P, "t");
		struct meshrun_err e4 = MESHRUN_ERR_INIT;
		assert_int_equal(mr_hello_decode(buf, len, &h, &e4), 0);
		assert_int_equal(mr_hello_check(&h, 2, 4, 2, "t", 1, &e4), 0);
	}
}

static void test_frames(void **state)
{
	unsigned char buf[MR_FRAME_HDR];
	struct mr_frame_hdr f = { MR_FRAME_MSG, 1, 3, 12345 }, g;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	mr_frame_encode(&f, buf);
	assert_int_equal(mr_frame_decode(buf, 4, &g, &err), 0);
	assert_int_equal(g.type, MR_FRAME_MSG);
	assert_int_equal(g.src, 1);
	assert_int_equal(g.dst, 3);
	assert_int_equal(g.len, 12345);
	assert_int_equal(mr_frame_decode(buf, 3, &g, &err), MESHRUN_E_PROTO); /* dst outside */
	buf[0] = 77;
	struct meshrun_err e2 = MESHRUN_ERR_INIT;
	assert_int_equal(mr_frame_decode(buf, 4, &g, &e2), MESHRUN_E_PROTO);
	assert_non_null(strstr(e2.msg, "unknown frame type 77"));
	struct mr_frame_hdr a = { MR_FRAME_ABORT, 0, 0, MR_FRAME_MAX_ABORT + 1 };
	mr_frame_encode(&a, buf);
	struct meshrun_err e3 = MESHRUN_ERR_INIT;
	assert_int_equal(mr_frame_decode(buf, 4, &g, &e3), MESHRUN_E_PROTO);
	struct mr_frame_hdr hb = { MR_FRAME_HB, 0, 1, 5 };
	mr_frame_encode(&hb, buf);
	struct meshrun_err e4 = MESHRUN_ERR_INIT;
	assert_int_equal(mr_frame_decode(buf, 4, &g, &e4), MESHRUN_E_PROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_incremental),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_frames),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
