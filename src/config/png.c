/*
 * png.c - meshconfig --png FILE: the DOT graph rendered by GraphViz.
 *
 * `dot -Tpng -o FILE` runs on this machine through the local hal (an argv, no
 * shell, so FILE may hold any character) with the DOT text on its stdin. An
 * exec failure comes back as MESHRUN_E_EXEC with the child's errno, so "dot is
 * not installed" is told apart from "dot failed" (whose stderr is quoted).
 */
#include "common/compat.h"
#include "config/config_impl.h"
#include "common/err.h"
#include "hal/hal.h"

#define PNG_TIMEOUT_MS 120000 /* a 256-host graph takes dot seconds, not minutes */

int cfg_render_png(const struct mr_buf *dot, const char *path, struct meshrun_err *err)
{
	char *argv[] = { (char *)"dot", (char *)"-Tpng", (char *)"-o", (char *)path, NULL };
	struct mr_hal_opts ho = { 0 };
	struct mr_hal_cmd c = { 0 };
	struct mr_hal *hal = NULL;
	int rc;

	ho.run_timeout_ms = PNG_TIMEOUT_MS;
	if ((rc = mr_hal_new_local(&hal, &ho, err)) < 0)
		return rc;
	c.host = "127.0.0.1";
	c.argv = argv;
	c.stdin_data = dot->p;
	c.stdin_len = dot->len;
	rc = mr_hal_run(hal, &c, 1, err);
	if (rc == 0 && c.hal_rc == MESHRUN_E_EXEC && c.err.sys_errno == ENOENT) {
		rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
				"--png: GraphViz 'dot' is not installed (Debian: apt-get install graphviz; macOS: brew install graphviz); --dot prints the graph instead");
	} else if (rc == 0 && c.hal_rc < 0) {
		rc = mr_err_set(err, MESHRUN_E_EXEC, "--png: %s", c.err.msg);
	} else if (rc == 0 && !mr_hal_cmd_ok(&c)) {
		char why[128];

		while (c.errout.len && (c.errout.p[c.errout.len - 1] == '\n' || c.errout.p[c.errout.len - 1] == '\r'))
			c.errout.p[--c.errout.len] = '\0';
		rc = mr_err_set(err, MESHRUN_E_EXEC, "--png: 'dot -Tpng -o %s' failed (%s)%s%s", path,
				mr_hal_cmd_describe(&c, why, sizeof(why)), c.errout.len ? ": " : "",
				mr_buf_cstr(&c.errout));
	}
	mr_hal_cmd_release(&c);
	mr_hal_free(hal);
	return rc;
}
