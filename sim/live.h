/*
 * live.h - what discovery sees on a simulated host now: its system_profiler
 * SPThunderboltDataType -json rendered from the recorded fixture and the
 * cluster's current cables (state.json, minus the cables a fault unplugged).
 *
 * Per Thunderbolt receptacle of a host (a bus of the fixture whose
 * receptacle_1_tag.receptacle_id_key N names networksetup's "Thunderbolt N"):
 *   - the fixture shows the same cable that is plugged now: kept as recorded;
 *   - a cable is plugged that the fixture does not show there (meshsim fault
 *     recable): one Mac in _items naming the peer's bus UUID, the receptacle
 *     "receptacle_connected" at the cable's speed (a bus recorded without a
 *     domain_uuid_key gets a synthetic one, so that the peer can name it);
 *   - no cable now where the fixture shows one (unplug, or moved away): the
 *     receptacle as macOS shows an empty one: no _items, receptacle_1_tag
 *     {current_speed_key "Up to N Gb/s", link_status_key "0x100",
 *     receptacle_id_key, receptacle_status_key "receptacle_no_devices_connected"};
 *   - anything else (a dock, a one-sided report meshsim does not simulate, an
 *     idle bus): kept as recorded.
 * A host with nothing changed gets its fixture back byte for byte; a changed one
 * is printed in system_profiler's layout (one space per level, keys in order).
 *
 * Files (under <state>/<host>/, read by the shims, see render.h):
 *   live/system_profiler.json   the rendering above
 *   live/ibv_devices.txt        the fixture's ibv_devices where the host's RDMA
 *                               devices exist (or `up --pretend-rdma`), else the
 *                               header-only output of ibv_devices without devices
 *   live/unplugged/<if>         present while that end's cable is pulled; holds
 *                               the administrative state ("up"/"down") the
 *                               interface gets back when it is plugged in again
 *
 * Ownership: callers own every buffer; nothing here keeps a pointer.
 */
#ifndef MR_SIM_LIVE_H
#define MR_SIM_LIVE_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "meshrun/err.h"
#include "sim/model.h"
#include "sim/state.h"

/* ibv_devices with no device: its two header lines (rdma-core's ibv_devices). */
extern const char mr_sim_ibv_none[];

/*
 * Which cables of c are plugged in: plugged[i] (c->ncables entries) is false
 * when a line of faults reads "unplug HOST:IF" for an end of cable i.
 */
void mr_sim_live_plugged(const struct mr_sim_cluster *c, const struct mr_strvec *faults,
			 bool *plugged);

/*
 * The interface names of host h's Thunderbolt receptacles (from h->sp_json and
 * h->hwports) appended to out.
 */
int mr_sim_live_ports(const struct mr_sim_host *h, struct mr_strvec *out, struct meshrun_err *err);

/*
 * Render every host's system_profiler JSON: out[i] (c->nhosts buffers, appended
 * to) for host i, changed[i] (may be NULL) whether it differs from the fixture.
 * Needs every host's sp_json, sp_len and hwports; the fixture's own cables are
 * found from them (src/topo), the live ones are c's cables where plugged[] is
 * true (NULL: all). Errors name the host and file.
 */
int mr_sim_live_render(const struct mr_sim_cluster *c, const bool *plugged, struct mr_buf *out,
		       bool *changed, struct meshrun_err *err);

/*
 * Write live/system_profiler.json of every host of st (state folder state_dir)
 * from <host>/fixture/{system_profiler.json,networksetup.txt} and the cables
 * and faults now recorded. Each file is replaced through a rename.
 */
int mr_sim_live_refresh(const char *state_dir, const struct mr_sim_state *st,
			struct meshrun_err *err);

#endif
