/* Unit tests for sim/appleverbs: the rules table (rules.c) and the shared table (state.c). */
#include "common/compat.h"
#include "sim/appleverbs/rules.h"
#include "sim/appleverbs/state.h"
#include "common/err.h"
#include "common/errname.h"
#include "meshrun/err.h"

#include <setjmp.h>
#include <cmocka.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* The checked-in file is the built-in table, row for row. */
static void test_file_is_the_default(void **state)
{
	struct av_rules def, file;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	av_rules_default(&def);
	memset(&file, 0x55, sizeof(file));
	av_rules_default(&file);
	file.max_qp = 99; /* every row must come back from the file */
	file.qp_types = 0;
	file.send_without_recv = AV_DROPPED;
	assert_int_equal(av_rules_load(MESHRUN_SOURCE_DIR "/sim/appleverbs/apple-rules.json", &file, &err), 0);
	assert_memory_equal(&def, &file, sizeof(def));
	assert_int_equal(def.qp_types, 1u << AV_QPT_UC);
	assert_int_equal(def.max_qp, 10);
	assert_int_equal(def.max_qp_errno, EBUSY);
	assert_int_equal(def.max_mr, 100);
	assert_int_equal(def.send_without_recv, AV_HELD);
}

static void test_override(void **state)
{
	struct av_rules r;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	const char *t = "{\"format\": \"meshrun-rdma-rules/1\", \"observed\": {\"device\": \"rdma_en2\"},"
			" \"rules\": {\"qp_types\": {\"value\": [\"UC\", \"RC\"], \"errno\": \"ENOTSUP\"},"
			" \"max_qp_per_device\": {\"value\": 4, \"errno\": \"EAGAIN\", \"source\": \"probe\"},"
			" \"comp_channel\": {\"value\": true},"
			" \"opcodes\": {\"value\": [\"SEND\", \"SEND_WITH_IMM\"]},"
			" \"send_without_recv\": {\"value\": \"dropped\"},"
			" \"send_length\": {\"value\": \"at_most\"},"
			" \"max_msg_bytes\": {\"value\": 4096}}}";

	(void)state;
	av_rules_default(&r);
	assert_int_equal(av_rules_parse(t, strlen(t), "probe.json", &r, &err), 0);
	assert_int_equal(r.qp_types, (1u << AV_QPT_UC) | (1u << AV_QPT_RC));
	assert_int_equal(r.qp_type_errno, EOPNOTSUPP);
	assert_int_equal(r.max_qp, 4);
	assert_int_equal(r.max_qp_errno, EAGAIN);
	assert_true(r.comp_channel);
	assert_int_equal(r.opcodes, (1u << AV_OP_SEND) | (1u << AV_OP_SEND_IMM));
	assert_int_equal(r.send_without_recv, AV_DROPPED);
	assert_int_equal(r.send_length, AV_LEN_AT_MOST);
	assert_int_equal(r.max_msg_bytes, 4096);
	assert_int_equal(r.max_mr, 100); /* not in the file: the default */
}

static void test_errors(void **state)
{
	static const struct {
		const char *rules;   /* the "rules" object */
		const char *want;    /* in the message */
	} cases[] = {
		{ "{\"max_qps\": {\"value\": 1}}", "rules.max_qps: unknown rule" },
		{ "{\"max_qp_per_device\": {\"value\": \"ten\"}}", "rules.max_qp_per_device.value: expected" },
		{ "{\"max_qp_per_device\": {\"value\": -1}}", "rules.max_qp_per_device.value" },
		{ "{\"max_qp_per_device\": {\"errno\": \"EBUSY\"}}", "missing key 'value'" },
		{ "{\"max_qp_per_device\": {\"value\": 3, \"errno\": \"EBUZY\"}}", "unknown errno name 'EBUZY'" },
		{ "{\"gid_ipv4_index\": {\"value\": 1, \"errno\": \"EINVAL\"}}", "this rule has no errno" },
		{ "{\"qp_types\": {\"value\": [\"XRC\"]}}", "rules.qp_types.value[0]: unknown name 'XRC'" },
		{ "{\"srq\": {\"value\": 0}}", "rules.srq.value: expected true or false" },
		{ "{\"send_without_recv\": {\"value\": \"kept\"}}", "expected \"held\" or \"dropped\"" },
		{ "[]", "rules: expected" },
	};
	char text[512];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct av_rules r, before;
		struct meshrun_err err = MESHRUN_ERR_INIT;
		av_rules_default(&r);
		before = r;
		snprintf(text, sizeof(text), "{\"format\": \"meshrun-rdma-rules/1\", \"rules\": %s}", cases[i].rules);
		assert_int_equal(av_rules_parse(text, strlen(text), "r.json", &r, &err), MESHRUN_E_PARSE);
		if (!strstr(err.msg, cases[i].want) || strncmp(err.msg, "r.json", 6) != 0)
			fail_msg("case %zu: '%s' does not say '%s'", i, err.msg, cases[i].want);
		assert_memory_equal(&r, &before, sizeof(r)); /* unchanged on error */
	}
	struct av_rules r;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	const char *nofmt = "{\"rules\": {}}", *badfmt = "{\"format\": \"x/2\", \"rules\": {}}";
	av_rules_default(&r);
	assert_int_equal(av_rules_parse(nofmt, strlen(nofmt), "r.json", &r, &err), MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "missing key 'format'"));
	mr_err_clear(&err);
	assert_int_equal(av_rules_parse(badfmt, strlen(badfmt), "r.json", &r, &err), MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "expected \"meshrun-rdma-rules/1\""));
}

static void test_errno_names(void **state)
{
	(void)state;
	assert_int_equal(mr_errno_from_name("EBUSY"), EBUSY);
	assert_int_equal(mr_errno_from_name("EOPNOTSUPP"), EOPNOTSUPP);
	assert_int_equal(mr_errno_from_name("ENOTSUP"), EOPNOTSUPP);
	assert_int_equal(mr_errno_from_name("ETIMEDOUT"), ETIMEDOUT);
	assert_int_equal(mr_errno_from_name("ENOPE"), -1);
	assert_string_equal(mr_errno_name(EBUSY), "EBUSY");
	assert_string_equal(mr_errno_name(ENOMEM), "ENOMEM");
	assert_string_equal(mr_errno_name(-7), "E?");
	assert_string_equal(av_qpt_name(AV_QPT_UC), "UC");
	assert_string_equal(av_op_name(AV_OP_SEND_IMM), "SEND_WITH_IMM");
}

/* Rows of a process that is gone count no more: a killed rank leaks no QP budget. */
static void test_state_dead_rows(void **state)
{
	char path[] = "/tmp/test-appleverbs-XXXXXX";
	int fd = mkstemp(path);
	struct av_shared *s;
	pid_t child;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	s = av_state_open(path);
	assert_non_null(s);
	assert_int_equal(s->magic, AV_STATE_MAGIC);
	av_state_lock(s);
	int d = av_dev_find_add(s, "rdma_en2");
	assert_int_equal(av_dev_find_add(s, "rdma_en3"), d + 1);
	assert_int_equal(av_dev_find_add(s, "rdma_en2"), d);
	child = fork();
	if (child == 0)
		_exit(0);
	assert_int_equal(waitpid(child, NULL, 0), child);
	s->qps[0].pid = (uint32_t)getpid();
	s->qps[0].dev = (uint32_t)d;
	s->qps[1].pid = (uint32_t)child; /* reaped: gone */
	s->qps[1].dev = (uint32_t)d;
	s->qps[2].pid = (uint32_t)getpid();
	s->qps[2].dev = (uint32_t)d + 1;
	s->mrs[5].pid = (uint32_t)child;
	s->mrs[5].dev = (uint32_t)d;
	assert_int_equal(av_count_qps(s, (uint32_t)d), 1);
	assert_int_equal(s->qps[1].pid, 0);
	assert_int_equal(av_count_qps(s, (uint32_t)d + 1), 1);
	assert_int_equal(av_count_mrs(s, (uint32_t)d), 0);
	av_state_unlock(s);
	/* a lock left by a dead holder is taken over */
	s->lock = (uint32_t)child;
	av_state_lock(s);
	assert_int_equal(s->lock, (uint32_t)getpid());
	av_state_unlock(s);
	av_stat_add(s, AV_STAT_drops);
	assert_int_equal(s->stat[AV_STAT_drops], 1);
	assert_string_equal(av_stat_name(AV_STAT_drops), "drops");
	munmap(s, sizeof(*s));
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_is_the_default),
		cmocka_unit_test(test_override),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_errno_names),
		cmocka_unit_test(test_state_dead_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
