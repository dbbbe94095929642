/*
 * cmdopts.c - see cmdopts.h: every meshsim subcommand's usage, summary,
 * options and --help text.
 */
#include "common/compat.h"
#include "sim/cmdopts.h"
#include "sim/doctor.h"

static const struct {
	const char *name, *usage, *summary, *trailer;
} subs[MR_SIM_NSUB] = {
	[MR_SIM_UP] = {
		"up", "meshsim up FIXTURE_DIR|TOPOLOGY [--name NAME] [--pretend-rdma]",
		"bring a cluster up (root)",
		"Brings up one network namespace and sshd per host of the fixture folder\n"
		"(or of a generated topology: mesh:4, ring:8,cables=2, ...). Needs root.\n"
		"On a terminal one line shows the step and the hosts done so far; in a log\n"
		"each finished step is one [INFO] line.\n"
		"ibv_devices lists a host's RDMA devices only where soft-RoCE made them\n"
		"(the kernel has rdma_rxe); one line names the hosts without RDMA and why.\n"
		"The hosts log in like Macs: root's login shell is zsh and `hostname` is\n"
		"the host's name (each sshd has mount and UTS namespaces of its own:\n"
		"nothing under /etc changes), and shims answer uname (Darwin, arm64),\n"
		"sw_vers, sysctl hw.model/hw.ncpu, ping and netstat -rn in macOS's syntax,\n"
		"refusing GNU forms as macOS does.\n",
	},
	[MR_SIM_DOWN] = {
		"down", "meshsim down [NAME]", "remove everything it made",
		"Removes every namespace, link, process and file of cluster NAME (default\n"
		"meshsim), also what a crashed or half-made bring-up left behind.\n",
	},
	[MR_SIM_STATUS] = {
		"status", "meshsim status [NAME]", "hosts, cables, addresses, faults",
		"Shows the hosts (namespace, addresses, sshd), cables and faults of NAME;\n"
		"without NAME, one line per cluster that is up.\n",
	},
	[MR_SIM_EXEC] = {
		"exec", "meshsim exec [--name NAME] HOST -- COMMAND [ARG...]",
		"run a command in a host",
		"Runs COMMAND in HOST's network namespace (and, while its sshd runs, with\n"
		"its hostname) with its shims first on PATH; exits with COMMAND's status\n"
		"(127 when it cannot be run).\n",
	},
	[MR_SIM_FAULT] = {
		"fault", "meshsim fault [--name NAME] FAULT ARGS",
		"unplug/plug, recable, stop/start, reboot, nosudo/sudo, latency, rate, loss, flap, maxmtu, partition/heal, one per doctor check",
		"Faults:\n"
		"  unplug HOST:IF | plug HOST:IF   cable pulled/plugged in (both ends: no carrier,\n"
		"                                   'status: inactive', an empty receptacle in\n"
		"                                   system_profiler)\n"
		"  recable HOST:IF HOST:IF          a cable between these two ports (the cables\n"
		"                                   there before are removed)\n"
		"  stop HOST | start HOST           host unreachable (processes killed, en0 down) / back\n"
		"                                   (sshd and its launchd start again; the network\n"
		"                                   stays as it was)\n"
		"  reboot HOST                      the host restarts: its processes end, its ports,\n"
		"                                   addresses, routes, MTUs and bridge0 are as at boot\n"
		"                                   (ports in bridge0), its TMPDIR is emptied, then\n"
		"                                   sshd and its launchd start: the plists of its own\n"
		"                                   /Library/LaunchDaemons are loaded (printed)\n"
		"  nosudo HOST | sudo HOST          sudo fails as 'sudo -n' does / works again\n"
		"  latency HOST:IF DELAY            tc netem delay on that end (0 removes it; 0 on an\n"
		"                                   end without latency does nothing)\n"
		"  rate HOST:IF RATE                the cable at RATE (40gbit, 100mbit) both ways: tc\n"
		"                                   tbf on both ends (off removes it)\n"
		"  loss HOST:IF PCT                 PCT% (0.01..100) of what that end sends dropped at\n"
		"                                   random: nftables netdev ingress at the other end\n"
		"                                   (0 removes it)\n"
		"  flap HOST:IF PERIOD              the cable down and up every PERIOD (100ms..1h) by a\n"
		"                                   background process in its first end's host; off,\n"
		"                                   recable, stop of that host or 'meshsim down' end it\n"
		"  maxmtu HOST:IF N                 that port refuses an MTU above N (68..65535) as\n"
		"                                   macOS's ifconfig does: a warning, exit 0 (off\n"
		"                                   removes it)\n"
		"  partition HOSTS|HOSTS | heal     no traffic between the two groups (h1,h2|h3,h4) on\n"
		"                                   cables or en0: nftables netdev ingress drops in\n"
		"                                   each host (ssh from this machine still works) /\n"
		"                                   all of it gone ('partition off' too)\n"
		MR_SIM_DOCTOR_FAULTS_HELP
		"Active faults are listed by 'meshsim status'.\n"
		"Exit status 3: not supported here, checked before anything changes (latency\n"
		"without sch_netem, rate without sch_tbf, loss or partition without nft or the\n"
		"kernel's nf_tables), with the reason.\n",
	},
	[MR_SIM_GEN] = {
		"gen", "meshsim gen TOPOLOGY -o DIR", "write a generated fixture set",
		"Writes a fixture set (cluster.json, <host>/system_profiler.json,\n"
		"networksetup.txt, ibv_devices.txt) for TOPOLOGY: mesh:N, ring:N,\n"
		"ring:N,cables=2, mesh:N,missing=h1-h3, ring:N,nordma=h2, speed=40,\n"
		"rings:RxC (R rings of C hosts, each ring's last host cabled to the\n"
		"next ring's first). Up to 500 hosts (more than 250 get a /23).\n",
	},
};

void mr_sim_sub_opts(enum mr_sim_sub sub, struct mr_sim_args *a, struct mr_opt *opts)
{
	/* unlisted entries are zero: MR_OPT_END */
	const struct mr_opt all[MR_SIM_NSUB][MR_SIM_MAX_OPTS] = {
		[MR_SIM_UP] = {
			MR_OPT_STRING_D('n', "name", &a->name, "NAME", MR_SIM_DEFAULT_NAME,
					"cluster name: namespaces NAME-<host>, state in "
					"$MESHSIM_STATE_DIR/NAME"),
			MR_OPT_BOOL(0, "pretend-rdma", &a->pretend_rdma,
				    "ibv_devices lists the fixture's RDMA devices even where none "
				    "exist (topology verdicts only: jaccl jobs fail)"),
			MR_OPT_END(),
		},
		[MR_SIM_DOWN] = { MR_OPT_END() },
		[MR_SIM_STATUS] = { MR_OPT_END() },
		[MR_SIM_EXEC] = {
			MR_OPT_STRING_D('n', "name", &a->name, "NAME", MR_SIM_DEFAULT_NAME,
					"cluster name"),
			MR_OPT_END(),
		},
		[MR_SIM_FAULT] = {
			MR_OPT_STRING_D('n', "name", &a->name, "NAME", MR_SIM_DEFAULT_NAME,
					"cluster name"),
			MR_OPT_END(),
		},
		[MR_SIM_GEN] = {
			MR_OPT_STRING('o', "output", &a->output, "DIR",
				      "folder to write the fixture set into"),
			MR_OPT_END(),
		},
	};

	memcpy(opts, all[sub], sizeof(all[sub]));
}

const struct mr_optdoc_cmd *mr_sim_sub_doc(enum mr_sim_sub sub)
{
	static struct mr_sim_args scratch = MR_SIM_ARGS_INIT;
	static struct mr_opt tables[MR_SIM_NSUB][MR_SIM_MAX_OPTS];
	static struct mr_optdoc_cmd docs[MR_SIM_NSUB];

	if (!docs[sub].name) {
		mr_sim_sub_opts(sub, &scratch, tables[sub]);
		docs[sub].name = subs[sub].name;
		docs[sub].usage = subs[sub].usage;
		docs[sub].summary = subs[sub].summary;
		docs[sub].opts = tables[sub];
		docs[sub].trailer = subs[sub].trailer;
	}
	return &docs[sub];
}
