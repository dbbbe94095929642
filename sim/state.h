/*
 * state.h - what `meshsim up` records in the state directory, so that status,
 * exec, fault and down work from any later process.
 *
 * Layout of <state> (mr_sim_state_dir(name)):
 *   state.json            this file: name, subnet, hosts, cables, soft-RoCE note
 *   faults                active faults, one per line ("unplug h1:en3", "stop h2",
 *                         "nosudo h3", "latency h1:en3 5ms", "rate h1:en3 40gbit
 *                         (both ends)", "loss h1:en3 5% (sent by that end)",
 *                         "flap h1:en3 2000ms (pid N)", "partition h1,h2|h3,h4");
 *                         a cable's rate/flap/unplug is keyed by its first end
 *   id_ed25519[.pub]      the user key; authorized_keys: its public half
 *   ssh_config            Host <host> blocks (HostName, User root, IdentityFile, ...)
 *   known_hosts           "<host>,<addr> ssh-ed25519 KEY" per host
 *   root.batch            the `ip -batch` run in the root namespace
 *   <host>/bin/           the shims (first on the PATH of ssh sessions)
 *   <host>/fixture/       system_profiler.json, networksetup.txt, ibv_devices.txt
 *   <host>/live/          what the shims answer now (see live.h)
 *   <host>/ssh_host_ed25519_key[.pub], sshd_config, sshd.pid, sshd.log, net.batch
 *   <host>/nosudo         present while sudo is refused on that host
 *   <host>/flap-<if>.pid  the flapper of the cable whose first end is <host>:<if>
 *                         (it runs in <host>'s namespace, so `down` ends it)
 *
 * state.json:
 *   {"name": "mst1", "subnet": 57, "fixture": "/path", "rxe": false,
 *    "rxe_note": "...", "pretend_rdma": false, "hosts": [{"name": "h1",
 *    "nosudo": false, "rdma": ["rdma_en2"], "rdma_live": false}, ...],
 *    "cables": [["h1", "en2", "h2", "en2"], ...]}
 * "cables" are the veth pairs that exist now (`fault recable` changes them);
 * "rdma_live": the host's rdma devices exist. Host i's namespace, address and
 * management link follow from plan.h.
 *
 * Ownership: a struct mr_sim_state owns its strings and cluster;
 * mr_sim_state_free() releases them (NULL is a no-op).
 */
#ifndef MR_SIM_STATE_H
#define MR_SIM_STATE_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "meshrun/err.h"
#include "sim/model.h"

struct mr_sim_state {
	char *name;                     /* cluster name */
	unsigned subnet;                /* K of 10.230.K.0/24 (/23 above 250 hosts: plan.h) */
	char *fixture;                  /* fixture folder or topology spec it came from */
	bool rxe;                       /* soft-RoCE devices were made */
	char *rxe_note;                 /* why not, or NULL */
	bool pretend_rdma;              /* up --pretend-rdma: ibv_devices lists devices anyway */
	struct mr_sim_cluster *cluster; /* hosts and cables (no fixture texts) */
};

int mr_sim_state_emit(const struct mr_sim_state *st, struct mr_buf *out);
/* Parse state.json text; name prefixes errors. */
int mr_sim_state_parse(const char *text, size_t len, const char *name, struct mr_sim_state **out,
		       struct meshrun_err *err);
/* Read <state>/state.json of cluster `name`. MESHRUN_E_NOTFOUND when no such cluster. */
int mr_sim_state_load(const char *name, struct mr_sim_state **out, struct meshrun_err *err);
void mr_sim_state_free(struct mr_sim_state *st);

/* Active faults of a cluster (missing file: none). */
int mr_sim_faults_load(const char *state_dir, struct mr_strvec *out, struct meshrun_err *err);
/*
 * Set (line non-NULL) or clear (line NULL) the fault with key `key` (its first
 * two words, e.g. "unplug h1:en3") and save the file.
 */
int mr_sim_faults_update(const char *state_dir, const char *key, const char *line,
			 struct meshrun_err *err);

#endif
