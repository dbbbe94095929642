/*
 * doctor_impl.h - what the files of `meshconfig doctor` share (not for other
 * modules; doctor.h is the contract).
 *
 *   doctor.c         options, the hal, the phases in order, the exit code
 *   doctor_facts.c   the script each host runs, and its output parsed (pure)
 *   doctor_checks.c  reach, software, housekeeping from the facts (pure: no
 *                    I/O), then the path phase's results; dr_check_facts also
 *                    runs doctor_cables.c's two checks, between software and
 *                    housekeeping
 *   doctor_cables.c  cables and rdma from the facts and the topology built
 *                    from them (pure), and the pings the path phase must try
 *   doctor_path.c    the job's endpoints, pings and connects over the hal
 *   doctor_report.c  the table and --json
 *   doctor_probe.c   the program the path phase runs on the hosts
 *
 * Calls go down: doctor.c -> doctor_path.c -> doctor_checks.c ->
 * doctor_cables.c -> doctor_facts.c (doctor_cables.c calls back only
 * dr_find, dr_cell, dr_have and dr_is_darwin); doctor_report.c and
 * doctor_probe.c are leaves.
 *
 * Phases (each one mr_hal_run batch over every host at once):
 *   1. reach:   `date +%s` on every host: the time to its end is the host's
 *               connect time, its answer the host's clock
 *   2. facts:   the facts script (doctor_facts.c) on every host reached
 *   3. checks:  doctor_checks.c and doctor_cables.c over the facts (no I/O)
 *   4. path:    listeners spawned (mr_hal_spawn, as meshrun spawns ranks),
 *               then one batch, a command per host: its pings, then its
 *               connects (doctor_path.c)
 *   5. report
 *
 * Ownership: struct doctor owns everything it points to (doctor_release);
 * findings own their strings.
 */
#ifndef MR_CONFIG_DOCTOR_IMPL_H
#define MR_CONFIG_DOCTOR_IMPL_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "config/doctor.h"
#include "hal/hal.h"
#include "hostfile/hostfile.h"
#include "topo/topo.h"

enum dr_check { DR_REACH, DR_SOFTWARE, DR_CABLES, DR_RDMA, DR_PATH, DR_HOUSE, DR_NCHECK };
/* A cell of the table: NA (not applicable, or not tried because an earlier
 * check failed), ok, warn (works, but worth knowing), FAIL. */
enum dr_status { DR_NA = 0, DR_OK, DR_WARN, DR_FAIL };

/* "reach", "software", "cables", "rdma", "path", "housekeeping" */
extern const char *const dr_check_names[DR_NCHECK];

/* Thresholds (doctor_checks.c, doctor_cables.c; documented in docs/guide-macs.md). */
#define DR_SLOW_CONNECT_MS 3000   /* reach: warn above */
#define DR_CLOCK_SKEW_MS 2000     /* housekeeping: fail when surely further off the median */
#define DR_DISK_FAIL_KB (100 * 1024)        /* free space where jobs write: fail below */
#define DR_DISK_WARN_KB (1024 * 1024)       /* warn below */
#define DR_APPLE_MAX_QP 10        /* Apple's Thunderbolt RDMA: queue pairs per device */

/* One problem: a row (host), a column (check), what is wrong and its fix. */
struct dr_finding {
	size_t host;
	enum dr_check check;
	enum dr_status status;  /* DR_WARN or DR_FAIL */
	const char *code;       /* stable name for --json and tests: "no-ipv4", ... */
	char *what;             /* "en2 has no IPv4 address (...)" */
	char *fix;              /* a command or an action; NULL: none to give */
};

/* ---- facts of one host (doctor_facts.c) ------------------------------------ */

#define DR_MAX_INET 8
#define DR_MAX_GID 16

struct dr_inet {
	uint32_t addr; /* host byte order */
	unsigned len;  /* prefix length */
};

/* One `ifconfig IF` report (macOS's format). */
struct dr_if {
	char name[16];
	bool up, running;        /* flags UP, RUNNING */
	bool status_known, active; /* "status: active|inactive" */
	unsigned mtu;            /* 0: not printed */
	struct dr_inet inet[DR_MAX_INET];
	size_t ninet;
	struct mr_strvec members; /* bridge: "member: en2 ..." lines */
};

struct dr_gid {
	int index;
	bool v4;                 /* IPv4-mapped (::ffff:a.b.c.d) */
};

/* One RDMA device: ibv_devices, ibv_devinfo -v, rdma link/resource (Linux). */
struct dr_dev {
	char name[64];
	char netdev[16];         /* Linux `rdma link`; "" elsewhere (rdma_enX -> enX) */
	bool described;          /* ibv_devinfo printed it */
	bool active;             /* port 1: PORT_ACTIVE */
	char state[32];          /* "PORT_DOWN (1)" as printed */
	struct dr_gid gids[DR_MAX_GID];
	size_t ngid;
	bool gids_listed;        /* ibv_devinfo -v printed GID lines for it */
	long max_qp;             /* -1: not printed */
	int qp_used;             /* QPs of other processes (`rdma resource`), -1 unknown */
};

struct dr_facts {
	bool ok;                 /* the script ran to its end and its output parsed */
	char os[32];             /* uname -s */
	char user[64], shell[128];
	char macos[32], build[32];  /* sw_vers ("" elsewhere) */
	char probe[1024];        /* meshconfig there (the path check's probe), "" none */
	char meshrun[1024], meshrun_version[80];
	bool python_asked;
	char python_version[32], mlx_version[32], python_err[200];
	char tmpdir[1024];
	int64_t avail_kb;        /* df -P -k of tmpdir: -1 unknown */
	char fs[160];            /* its filesystem (df's first column) */
	struct mr_strvec stale_dirs, live_dirs; /* meshrun.* job directories */
	bool tb;                 /* networksetup ran: hwports and sp are set */
	char *hwports, *sp;
	size_t sp_len;
	struct dr_if *ifs;
	size_t nifs;
	bool routes_known;
	struct mr_topo_routes routes;
	bool rdma_asked;
	int rdma_ctl;            /* -1 no rdma_ctl, 0 disabled, 1 enabled, 2 other answer */
	char rdma_ctl_text[64];
	bool ibv_ran;            /* ibv_devices ran */
	bool devinfo_ran;        /* ibv_devinfo ran */
	bool rdma_tool;          /* Linux `rdma` ran: qp_used counts are known */
	struct dr_dev *devs;
	size_t ndevs;
};

void dr_facts_release(struct dr_facts *f);

/* The script (POSIX sh, BSD or GNU userland) run as
 *   /bin/sh -c dr_facts_script doctor PROBE PYTHON RDMA
 * PROBE: this meshconfig's path ("" unknown), PYTHON: --python or "", RDMA: 1/0.
 * Its output: sections, each after a line "@@doctor NAME [ARG]". */
extern const char dr_facts_script[];

/* Parse the script's output into f (released first). A missing "end" section
 * (the script was cut off) leaves f->ok false with why in err. */
int dr_facts_parse(const char *text, struct dr_facts *f, struct meshrun_err *err);

/* Parsers of single command outputs (exposed for the unit tests). */
int dr_parse_ifconfig(const char *name, const char *text, struct dr_if *out);
int dr_parse_devinfo(const char *text, struct dr_dev *devs, size_t ndevs);
/* A GID as ibv_devinfo prints it (inet_ntop form or 8 hex groups) -> 16 bytes. */
bool dr_parse_gid(const char *s, unsigned char raw[16]);

/* Lookups in facts. */
const struct dr_if *dr_facts_if(const struct dr_facts *f, const char *name);
/* The interface holding addr (and the entry's prefix length), or NULL. */
const struct dr_if *dr_facts_if_of_addr(const struct dr_facts *f, uint32_t addr, unsigned *len);
const struct dr_dev *dr_facts_dev(const struct dr_facts *f, const char *name);
/* The interface of a device: netdev (Linux), else "rdma_enX" -> "enX"; "" none. */
void dr_dev_ifname(const struct dr_dev *d, const char *devname, char *out, size_t n);

/* "a.b.c.d" -> host byte order; false when not an IPv4 address. */
bool dr_ipv4(const char *s, uint32_t *out);
void dr_ipv4_str(uint32_t a, char *out, size_t n);

/* ---- the run ----------------------------------------------------------------- */

struct dr_host {
	char *name;              /* the ssh name, as in the hostfile */
	size_t *ranks;           /* hostfile entries on this host */
	size_t nranks;
	bool reached;
	char reach_err[MESHRUN_ERR_MSG_MAX];
	const char *reach_hint;  /* mr_hal_err_hint(), or NULL */
	int64_t connect_ms;      /* phase 1: batch start to `true` done */
	bool clock_known;
	int64_t clock_s;         /* `date +%s` there (phase 1) */
	int64_t wall_lo_ms, wall_hi_ms; /* our wall clock around it */
	struct dr_facts f;
	ssize_t topo;            /* index in d->tc, -1: not in it */
	enum dr_status st[DR_NCHECK];
};

/* A ping through one end of a cable, to the other end's address. */
struct dr_ping {
	size_t host, peer;
	char ifname[16], peer_if[16];
	char peer_ip[16];
	int result;              /* -1 not run, 0 answered, 1 no answer */
};

/* One address and port a rank listens on. */
struct dr_ep {
	size_t host;             /* the listening host (a row) */
	size_t rank;
	char ip[64];
	int port;
	bool skip;               /* its address is not on that host: not tried */
	char bind_err[32];       /* listener: "" bound, else the errno name */
	char bind_msg[128];
};

/* A connect the job makes: from a rank's host to an endpoint. */
struct dr_conn {
	size_t from;             /* the connecting host (a row) */
	size_t ep;               /* index in d->eps */
	bool tried;
	char err[32];            /* "" connected (and our listener answered), else the errno name */
	char msg[128];
	int64_t ms;
};

struct doctor {
	const struct mr_doctor_opts *o;
	struct mr_hal *hal;
	FILE *out, *err;
	struct mr_hostfile *hf;
	char backend[16];        /* effective: --backend, the hostfile's, else ring */
	bool want_rdma;
	const char *gid_index;   /* MESHRUN_IB_GID_INDEX from the hostfile's envs or --env */
	struct dr_host *hosts;
	size_t nhosts;
	size_t *rank_host;       /* hf->nhosts entries */
	struct mr_topo_cluster *tc; /* cables between the hosts whose Thunderbolt facts parsed */
	size_t *tc_host;         /* tc host index -> row */
	int mtu_mode;            /* most common MTU of the cabled Thunderbolt ends */
	struct dr_finding *finds;
	size_t nfinds, afinds;
	struct dr_ping *pings;
	size_t npings;
	struct dr_ep *eps;
	size_t neps;
	struct dr_conn *conns;
	size_t nconns;
	char path_note[160];     /* why the path check was not run, or "" */
	int timeout_ms;          /* per host command (0: the hal's) */
	int64_t t0_ms;
};

void doctor_release(struct doctor *d);

/* ---- doctor_checks.c ----------------------------------------------------------- */

/* Record a finding (the cell takes the worse status). */
void dr_find(struct doctor *d, size_t host, enum dr_check check, enum dr_status st,
	     const char *code, const char *fix, const char *fmt, ...) MR_PRINTF(7, 8);
/* Mark a cell checked (ok unless a finding made it worse). */
void dr_cell(struct doctor *d, size_t host, enum dr_check check, enum dr_status st);
/* The effective backend and what follows from it (RDMA wanted, GID index). */
int dr_job_setup(struct doctor *d, struct meshrun_err *err);
/* A host whose facts are in: reached, and the script ran to its end. */
bool dr_have(const struct doctor *d, size_t h);
/* The host's uname -s is Darwin (macOS). */
bool dr_is_darwin(const struct dr_facts *f);
/* Every check from the facts; fills d->pings with the pings to run. */
void dr_check_facts(struct doctor *d);
/* Ping results into the cables column. */
void dr_check_pings(struct doctor *d);
/* Bind and connect results into the path column. */
void dr_check_path(struct doctor *d);

/* ---- doctor_cables.c (called from dr_check_facts, in this order) -------------- */

/* Builds d->tc, d->tc_host (owned by d, freed in doctor_release) and
 * d->mtu_mode; judges every cable and the hostfile's addresses; appends the
 * pings to run to d->pings. */
void dr_check_cables(struct doctor *d);
/* The RDMA devices the hostfile names (when the backend wants RDMA), looked
 * up on the topology dr_check_cables built: call it after that. */
void dr_check_rdma(struct doctor *d);

/* ---- doctor_path.c -------------------------------------------------------------- */

/* d->eps and d->conns from the hostfile and backend (launch/env.h's ports). */
int dr_path_plan(struct doctor *d, struct meshrun_err *err);
/* Listeners, pings and connects over the hal; results into pings/eps/conns. */
int dr_path_run(struct doctor *d, struct meshrun_err *err);

/* ---- doctor_report.c ---------------------------------------------------------- */

/* The table and the findings (text), or the JSON document, on out. */
int dr_report(const struct doctor *d, FILE *out, bool json, double seconds);
/* Whether any cell failed. */
bool dr_any_fail(const struct doctor *d);

#endif
