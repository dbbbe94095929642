/*
 * jaccl_stub.c - the jaccl ops table of a libmeshrun built without libibverbs
 * (MESHRUN_WITH_VERBS off): the backend counts as absent.
 */
#include "common/compat.h"
#include "coll/coll.h"
#include "common/err.h"

static int stub_init(struct meshrun_group *g, unsigned flags, struct meshrun_err *err)
{
	(void)g;
	(void)flags;
	return mr_err_set(err, MESHRUN_E_BACKEND, "backend 'jaccl' is not built into this libmeshrun (libibverbs was not found at build time)");
}

const struct mr_coll_ops mr_coll_jaccl_ops = { .name = "jaccl", .init = stub_init };
