/*
 * sim.c - --simulate DIR: every host command is answered by the replay hal.
 *
 * The fixture folder gives the discovery answers (DIR/<host>/system_profiler.json,
 * networksetup.txt, ibv_devices.txt, see src/hal/replay.h) and DIR/cluster.json
 * the hosts, in order. On top of that the simulated hosts answer:
 *   true                       exit 0 (every host is reachable)
 *   sudo -n true               exit 0, or 1 for a host with "sudo": false
 *   ipconfig getifaddr en0     the host's "en0" address, else exit 1 (none)
 *   ipconfig getifaddr en1     exit 1 (none)
 *   the routes (netstat)       exit 1, as on a non-Mac (the plan takes MLX's ranges)
 *   /bin/sh -c ...             the setup scripts and ping checks: "done", exit 0
 *   sudo -n /bin/sh -c ...     --at-boot's install and --undo: "done", exit 0
 *   the LaunchDaemon check     exit 1: none (boot.h)
 * so that --auto-setup runs its whole path (apply, verify) without changing
 * anything anywhere.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/json.h"
#include "common/shquote.h"
#include "config/config_impl.h"
#include "hal/replay.h"

#include <sys/stat.h>

#define CLUSTER_JSON_MAX ((size_t)4 << 20)

/* Per-host answers from cluster.json's host objects ("en0", "sudo"). */
static int host_answers(struct mr_replay *rp, const char *dir, struct meshrun_err *err)
{
	struct mr_buf text = MR_BUF_INIT;
	cJSON *root = NULL;
	const cJSON *hosts, *h;
	char file[4096];
	struct stat st;
	int rc = 0;

	snprintf(file, sizeof(file), "%s/cluster.json", dir);
	if (stat(file, &st) < 0 && errno == ENOENT)
		return 0; /* replay takes the subfolders as hosts */
	rc = mr_read_file(file, CLUSTER_JSON_MAX, &text, err);
	if (rc == 0)
		rc = mr_json_parse(mr_buf_cstr(&text), text.len, file, &root, err);
	if (rc < 0)
		goto out;
	hosts = cJSON_IsArray(root) ? root : mr_json_member(root, "hosts");
	cJSON_ArrayForEach(h, hosts) {
		const cJSON *name = mr_json_member(h, "name");
		const cJSON *en0 = mr_json_member(h, "en0");
		const cJSON *sudo = mr_json_member(h, "sudo");
		char line[64];

		if (!cJSON_IsString(name))
			continue; /* a plain name, or an error mr_replay_load() reported */
		if (cJSON_IsString(en0) && mr_is_ip(en0->valuestring)) {
			snprintf(line, sizeof(line), "%s\n", en0->valuestring);
			rc = mr_replay_add(rp, name->valuestring, "ipconfig getifaddr en0", 0, line,
					   NULL, 0, 0);
		}
		if (rc == 0 && cJSON_IsFalse(sudo))
			rc = mr_replay_add(rp, name->valuestring, "sudo -n true", 1, NULL,
					   "sudo: a password is required\n", 0, 0);
		if (rc < 0) {
			mr_err_set(err, rc, "replay: cannot script host '%.64s'", name->valuestring);
			goto out;
		}
	}
out:
	cJSON_Delete(root);
	mr_buf_release(&text);
	return rc;
}

int cfg_sim_hal(const char *dir, const struct mr_hal_opts *ho, struct mr_hal **out,
		struct meshrun_err *err)
{
	static const struct {
		const char *pattern;
		int status;
		const char *out, *errout;
	} defaults[] = {
		{ "true", 0, NULL, NULL },
		{ "sudo -n true", 0, NULL, NULL },
		{ "ipconfig getifaddr *", 1, NULL, NULL },
		{ "/bin/sh -c *", 0, "done\n", NULL },
		{ "sudo -n /bin/sh -c *", 0, "done\n", NULL }, /* --at-boot, --undo */
		/* after "/bin/sh -c *": answers added later are matched first */
		{ "/bin/sh -c '[ \"$(uname -s)\" = Darwin ]*", 1, NULL, NULL },
		/* no LaunchDaemon of an earlier --at-boot (boot.h) */
		{ "/bin/sh -c '[ -e *", 1, NULL, NULL },
	};
	struct mr_replay *rp = NULL;
	int rc;

	*out = NULL;
	rc = mr_replay_new(&rp);
	if (rc < 0)
		return mr_err_set(err, rc, "out of memory");
	rc = mr_replay_load(rp, dir, err);
	if (rc < 0)
		goto fail;
	if (mr_replay_host_count(rp) == 0) {
		rc = mr_err_set(err, MESHRUN_E_NOTFOUND, "simulate: no hosts in fixture '%s'", dir);
		goto fail;
	}
	for (size_t i = 0; i < ARRAY_SIZE(defaults); i++) {
		rc = mr_replay_add(rp, "*", defaults[i].pattern, defaults[i].status, defaults[i].out,
				   defaults[i].errout, 0, 0);
		if (rc < 0) {
			mr_err_set(err, rc, "out of memory");
			goto fail;
		}
	}
	rc = host_answers(rp, dir, err);
	if (rc < 0)
		goto fail;
	return mr_hal_new_replay(out, rp, ho, err);
fail:
	mr_err_prefix(err, "--simulate");
	mr_replay_free(rp);
	return rc;
}
