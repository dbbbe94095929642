/*
 * Unit tests for sim/proc.c mr_sim_run_jobs_cb(): the callback reports every
 * job once as it ends (not at the end of the batch), with its wait status, and
 * also a job that could not start.
 */
#include "common/compat.h"
#include "common/err.h"
#include "sim/proc.h"

#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#define NJ 4

struct seen {
	struct mr_sim_job *jobs;
	int calls[NJ];
	int status[NJ];
	bool started[NJ];
	size_t order[NJ], norder;
	char touch[64]; /* created when job 1 is reported */
};

static void on_done(struct mr_sim_job *j, void *ctx)
{
	struct seen *s = ctx;
	size_t i = (size_t)(j - s->jobs);

	assert_true(i < NJ);
	assert_true(j->done);
	s->calls[i]++;
	s->status[i] = j->status;
	s->started[i] = j->started;
	s->order[s->norder++] = i;
	if (i == 1) {
		FILE *f = fopen(s->touch, "w");

		assert_non_null(f);
		fclose(f);
	}
}

static void test_jobs_cb(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_sim_job jobs[NJ] = { MR_SIM_JOB_INIT, MR_SIM_JOB_INIT, MR_SIM_JOB_INIT,
				       MR_SIM_JOB_INIT };
	struct seen s = { .jobs = jobs };
	char dir[] = "/tmp/mr-simjobs-XXXXXX";
	int rc;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(s.touch, sizeof(s.touch), "%s/go", dir);
	/* job 0 ends only after the callback of job 1 ran */
	mr_sim_job_set(&jobs[0], "waiter", "sh", "-c",
		       "while [ ! -e \"$0\" ]; do sleep 0.01; done", s.touch, NULL);
	mr_sim_job_set(&jobs[1], "quick", "true", NULL);
	mr_sim_job_set(&jobs[2], "fails", "sh", "-c", "exit 2", NULL);
	mr_sim_job_set(&jobs[3], "missing", "mr-simjobs-no-such-program", NULL);
	rc = mr_sim_run_jobs_cb(jobs, NJ, 4, 20000, MR_SIM_KEEP_GOING, on_done, &s, &err);
	assert_true(rc < 0); /* the first failure (job 3 did not start) names it */
	assert_non_null(strstr(err.msg, "mr-simjobs-no-such-program"));
	assert_int_equal(s.norder, NJ);
	for (size_t i = 0; i < NJ; i++)
		assert_int_equal(s.calls[i], 1);
	assert_true(s.started[0] && WIFEXITED(s.status[0]) && WEXITSTATUS(s.status[0]) == 0);
	assert_true(WIFEXITED(s.status[1]) && WEXITSTATUS(s.status[1]) == 0);
	assert_true(WIFEXITED(s.status[2]) && WEXITSTATUS(s.status[2]) == 2);
	assert_false(s.started[3]);
	/* job 1 was reported before job 0, which waited for that */
	for (size_t k = 0; k < s.norder && s.order[k] != 1; k++)
		assert_int_not_equal(s.order[k], 0);
	for (size_t i = 0; i < NJ; i++)
		mr_sim_job_release(&jobs[i]);
	unlink(s.touch);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jobs_cb),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
