/*
 * setup.c - the setup commands of an IP plan: checked word by word, printed for a
 * person, or applied with `sudo -n` over the hal and verified with ping.
 *
 * Applying: one `/bin/sh -c SCRIPT` per host (never the login shell's syntax), all hosts in one parallel batch. SCRIPT
 * runs every command of the host in order (as MLX's "cmd ; cmd ; ..."), sends
 * their output to stderr, prints "fail K STATUS" on stdout for the K-th command
 * when it fails and "done" at the end, so a failure is pinned on one command
 * without a second round trip:
 *	sudo -n ifconfig bridge0 down >&2 || echo "fail 0 $?"
 *	sudo -n ifconfig en2 inet 192.168.0.1 netmask 255.255.255.252 >&2 || echo "fail 1 $?"
 *	...
 *	echo done
 * `ifconfig IF inet ...` failing is an error; `ifconfig bridge0 down` and
 * `route change` failing are warnings (the ping check decides whether the link
 * works).
 *
 * Verifying: for every planned cable, each end pings the other end's address
 * once through its own interface. meshsim's hosts are Linux with shims, real
 * hosts are Macs, so the check picks the form by `uname -s`:
 *   Linux:  ping -c 1 -W 1 -I IF PEER
 *   macOS:  ping -c 1 -t 1 PEER        (the route change pins PEER to IF)
 * IF and PEER are passed as positional arguments of a constant script, never
 * pasted into it. Failed pings are tried once more (the first packet may be lost
 * to address resolution on a link that just came up).
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/num.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "config/config_impl.h"
#include "topo/topo.h"

static const char netmask30[] = "255.255.255.252";

const char cfg_ping_script[] =
	"if [ \"$(uname -s)\" = Linux ]; then exec ping -c 1 -W 1 -I \"$1\" \"$2\"; "
	"else exec ping -c 1 -t 1 \"$2\"; fi";

/* A word of a setup command: a fixed keyword, an interface name or an IPv4 address. */
static bool word_ok(const char *w)
{
	static const char *const keywords[] = { "ifconfig", "route", "down", "inet", "netmask",
						"change", "-interface" };

	for (size_t i = 0; i < ARRAY_SIZE(keywords); i++)
		if (!strcmp(w, keywords[i]))
			return true;
	return mr_is_ifname(w) || mr_is_ipv4(w);
}

/*
 * Check the shape of one command: "ifconfig bridge0 down",
 * "ifconfig IF inet IP netmask 255.255.255.252", "route change IP -interface IF".
 */
static int check_cmd(const char *host, char *const *argv, size_t argc, struct meshrun_err *err)
{
	for (size_t k = 0; k < argc; k++)
		if (!word_ok(argv[k]))
			return mr_err_set(err, MESHRUN_E_INVAL,
					  "%s: setup command word %zu: refusing '%.40s' (not an interface name or IPv4 address)",
					  host, k, argv[k]);
	if (argc == 3 && !strcmp(argv[0], "ifconfig") && !strcmp(argv[2], "down"))
		return 0;
	if (argc == 6 && !strcmp(argv[0], "ifconfig") && mr_is_ifname(argv[1]) &&
	    !strcmp(argv[2], "inet") && mr_is_ipv4(argv[3]) && !strcmp(argv[4], "netmask") &&
	    !strcmp(argv[5], netmask30))
		return 0;
	if (argc == 5 && !strcmp(argv[0], "route") && !strcmp(argv[1], "change") &&
	    mr_is_ipv4(argv[2]) && !strcmp(argv[3], "-interface") && mr_is_ifname(argv[4]))
		return 0;
	return mr_err_set(err, MESHRUN_E_INVAL, "%s: unexpected setup command '%s ...' (%zu words)",
			  host, argc ? argv[0] : "", argc);
}

/* Append "sudo[ -n] w1 w2 ..." (each word quoted, though checked words need none). */
static int join_cmd(struct mr_buf *b, const char *sudo, char *const *argv, size_t argc)
{
	if (mr_buf_puts(b, sudo) < 0)
		return -1;
	for (size_t k = 0; k < argc; k++)
		if (mr_buf_putc(b, ' ') < 0 || mr_shquote(b, argv[k]) < 0)
			return -1;
	return 0;
}

int cfg_setup_lines(const struct mr_topo_plan *p, size_t i, const char *host,
		    struct mr_strvec *lines, struct meshrun_err *err)
{
	const struct mr_topo_host_cmds *hc = &p->cmds[i];

	for (size_t k = 0; k < hc->nr; k++) {
		const struct mr_strvec *av = &hc->v[k].argv;
		struct mr_buf b = MR_BUF_INIT;
		int rc = check_cmd(host, av->v, av->nr, err);

		if (rc < 0)
			return rc;
		if (join_cmd(&b, "sudo", av->v, av->nr) < 0 || mr_strvec_push(lines, mr_buf_cstr(&b)) < 0) {
			mr_buf_release(&b);
			return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
		}
		mr_buf_release(&b);
	}
	return 0;
}

int cfg_setup_script(const struct mr_topo_plan *p, size_t i, const char *host,
		       struct mr_buf *script, struct meshrun_err *err)
{
	const struct mr_topo_host_cmds *hc = &p->cmds[i];

	for (size_t k = 0; k < hc->nr; k++) {
		const struct mr_strvec *av = &hc->v[k].argv;
		int rc = check_cmd(host, av->v, av->nr, err);

		if (rc < 0)
			return rc;
		if (join_cmd(script, "sudo -n", av->v, av->nr) < 0 ||
		    mr_buf_printf(script, " >&2 || echo \"fail %zu $?\"\n", k) < 0)
			return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	}
	if (mr_buf_puts(script, "echo done\n") < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	return 0;
}

static void print_setup(struct cfg_run *c, const struct mr_topo_plan *p, struct mr_strvec *lines)
{
	for (size_t i = 0; i < c->nhosts; i++) {
		char title[512];
		size_t len = (size_t)snprintf(title, sizeof(title), "Setup for %s", c->hosts[i].name);
		char rule[512];

		(void)p;
		memset(rule, '=', MR_MIN(len, sizeof(rule) - 1));
		rule[MR_MIN(len, sizeof(rule) - 1)] = '\0';
		cfg_say(c, "%s\n%s", title, rule);
		for (size_t k = 0; k < lines[i].nr; k++)
			cfg_say(c, "%s", lines[i].v[k]);
		cfg_say(c, "%s", "");
	}
}

/* Read what a host script printed ("fail K STATUS" lines, then "done"); warn or fail. */
static int check_applied(struct cfg_run *c, const struct mr_topo_plan *p, size_t i,
			 const struct mr_hal_cmd *cmd, const struct mr_strvec *lines)
{
	const char *host = c->hosts[i].name;
	struct mr_strvec st = MR_STRVEC_INIT;
	char desc[256], errline[256];
	int rc = 0;

	cfg_first_line(&cmd->errout, errline, sizeof(errline));
	if (cmd->hal_rc < 0) {
		cfg_error(c, "%s: setup: %s", host, cmd->err.msg);
		return MR_CONFIG_EXIT_SETUP;
	}
	if (mr_strvec_split(&st, mr_buf_cstr(&cmd->out), '\n', true) < 0) {
		cfg_error(c, "out of memory");
		return MR_CONFIG_EXIT_SETUP;
	}
	if (!mr_hal_cmd_ok(cmd) || st.nr == 0 || strcmp(st.v[st.nr - 1], "done")) {
		cfg_error(c, "%s: setup script did not finish: %s%s%s", host,
			  mr_hal_cmd_describe(cmd, desc, sizeof(desc)), errline[0] ? ": " : "", errline);
		rc = MR_CONFIG_EXIT_SETUP;
		goto out;
	}
	for (size_t l = 0; l + 1 < st.nr; l++) {
		struct mr_strvec w = MR_STRVEC_INIT;
		uint64_t k = 0;
		int status = 0;
		bool fatal, ok;

		ok = p->cmds[i].nr > 0 && mr_strvec_split(&w, st.v[l], ' ', false) == 0 && w.nr == 3 &&
		     !strcmp(w.v[0], "fail") && mr_parse_u64(w.v[1], 0, p->cmds[i].nr - 1, &k) == 0 &&
		     mr_parse_int(w.v[2], 0, 255, &status) == 0;
		mr_strvec_release(&w);
		if (!ok) {
			cfg_error(c, "%s: setup script: unexpected output '%.60s'", host, st.v[l]);
			rc = MR_CONFIG_EXIT_SETUP;
			continue;
		}
		/* "ifconfig IF inet IP netmask M" must work; the rest is checked by ping */
		fatal = p->cmds[i].v[k].argv.nr == 6;
		if (fatal) {
			cfg_error(c, "%s: '%s' failed (exit status %d)%s%s", host, lines->v[k], status,
				  errline[0] ? ": " : "", errline);
			rc = MR_CONFIG_EXIT_SETUP;
		} else {
			cfg_warn(c, "%s: '%s' failed (exit status %d)%s%s", host, lines->v[k], status,
				 errline[0] ? ": " : "", errline);
		}
	}
out:
	mr_strvec_release(&st);
	return rc;
}

static int apply_setup(struct cfg_run *c, const struct mr_topo_plan *p, struct mr_strvec *lines)
{
	size_t n = c->nhosts;
	struct mr_hal_cmd *cmds = xcalloc(n, sizeof(*cmds));
	struct mr_buf *scripts = xcalloc(n, sizeof(*scripts));
	char *(*argvs)[4] = xcalloc(n, sizeof(*argvs));
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int rc = 0;

	cfg_step(c, "applying the setup on every host");
	for (size_t i = 0; i < n; i++) {
		if (cfg_setup_script(p, i, c->hosts[i].name, &scripts[i], &e) < 0) {
			cfg_error(c, "%s", e.msg);
			rc = MR_CONFIG_EXIT_SETUP;
			goto out;
		}
		argvs[i][0] = MR_SH_PATH;
		argvs[i][1] = "-c";
		argvs[i][2] = scripts[i].p ? scripts[i].p : "true";
		argvs[i][3] = NULL;
		cfg_cmd(c, &cmds[i], c->hosts[i].name, argvs[i]);
		cfg_say(c, "Running auto setup for %s", c->hosts[i].name);
		cfg_info(c, "%s: %s -c '%s'", c->hosts[i].name, MR_SH_PATH, argvs[i][2]);
	}
	if (cfg_hal_run(c, cmds, n, &e) < 0) {
		cfg_error(c, "setup: %s", e.msg);
		rc = MR_CONFIG_EXIT_SETUP;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		int r = check_applied(c, p, i, &cmds[i], &lines[i]);
		if (r && !rc)
			rc = r;
	}
	if (rc == 0)
		cfg_step_done(c, "setup applied on %zu hosts", n);
out:
	cfg_cmds_release(cmds, n);
	for (size_t i = 0; i < n; i++)
		mr_buf_release(&scripts[i]);
	free(argvs);
	free(scripts);
	free(cmds);
	return rc;
}

struct ping {
	size_t host, peer; /* who pings whom */
	const char *ifname, *peer_ip;
	char *argv[8];
};

int cfg_ping_links(struct cfg_run *c, const struct mr_topo_plan *p, const char *script, int mtu)
{
	size_t n = 2 * p->nlinks, nfail = 0;
	struct ping *pings = xcalloc(n ? n : 1, sizeof(*pings));
	struct mr_hal_cmd *cmds = xcalloc(n ? n : 1, sizeof(*cmds));
	size_t *idx = xcalloc(n ? n : 1, sizeof(*idx)); /* pings of this round */
	struct meshrun_err e = MESHRUN_ERR_INIT;
	size_t nround = n;
	char size[16];
	int rc = 0;

	snprintf(size, sizeof(size), "%d", mtu - 28); /* the ICMP payload of an MTU-sized packet */
	cfg_step(c, mtu ? "checking every link with a don't-fragment ping of the MTU"
			: "checking every link with a ping");
	for (size_t l = 0; l < p->nlinks; l++) {
		const struct mr_topo_link *lk = &p->links[l];
		for (int s = 0; s < 2; s++) {
			struct ping *pg = &pings[2 * l + (size_t)s];
			pg->host = lk->host[s];
			pg->peer = lk->host[1 - s];
			pg->ifname = lk->ifname[s];
			pg->peer_ip = lk->ip[1 - s];
			if (!mr_is_ifname(pg->ifname) || !mr_is_ipv4(pg->peer_ip)) {
				cfg_error(c, "%s: refusing to ping '%.40s' through '%.40s'",
					  c->hosts[pg->host].name, pg->peer_ip, pg->ifname);
				rc = MR_CONFIG_EXIT_SETUP;
				goto out;
			}
			pg->argv[0] = MR_SH_PATH;
			pg->argv[1] = "-c";
			pg->argv[2] = (char *)script;
			pg->argv[3] = "sh";
			pg->argv[4] = (char *)pg->ifname;
			pg->argv[5] = (char *)pg->peer_ip;
			pg->argv[6] = mtu ? size : NULL;
			pg->argv[7] = NULL;
		}
	}
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	for (int round = 0; round < 2 && nround; round++) {
		size_t nleft = 0;

		for (size_t r = 0; r < nround; r++)
			cfg_cmd(c, &cmds[r], c->hosts[pings[idx[r]].host].name, pings[idx[r]].argv);
		if (cfg_hal_run(c, cmds, nround, &e) < 0) {
			cfg_error(c, "ping check: %s", e.msg);
			cfg_cmds_release(cmds, nround);
			rc = MR_CONFIG_EXIT_SETUP;
			goto out;
		}
		for (size_t r = 0; r < nround; r++) {
			const struct ping *pg = &pings[idx[r]];
			char desc[256];

			if (mr_hal_cmd_ok(&cmds[r]))
				continue;
			if (round == 1) {
				const char *why = cmds[r].hal_rc < 0
					? cmds[r].err.msg : mr_hal_cmd_describe(&cmds[r], desc, sizeof(desc));
				if (mtu)
					cfg_error(c, "%s: %s: a %d-byte packet with don't-fragment to %s (%s) did not arrive: %s",
						  c->hosts[pg->host].name, pg->ifname, mtu, pg->peer_ip,
						  c->hosts[pg->peer].name, why);
				else
					cfg_error(c, "%s: %s: no answer from %s (%s) after setup: %s",
						  c->hosts[pg->host].name, pg->ifname, pg->peer_ip,
						  c->hosts[pg->peer].name, why);
				nfail++;
			}
			idx[nleft++] = idx[r];
		}
		cfg_cmds_release(cmds, nround);
		memset(cmds, 0, nround * sizeof(*cmds));
		nround = nleft;
	}
	if (nfail)
		rc = MR_CONFIG_EXIT_SETUP;
	else
		cfg_step_done(c, "all %zu link ends answer%s", n, mtu ? " at the full MTU" : "");
out:
	free(idx);
	free(cmds);
	free(pings);
	return rc;
}

int cfg_setup(struct cfg_run *c, const struct mr_topo_plan *p, bool apply)
{
	struct mr_strvec *lines = xcalloc(c->nhosts, sizeof(*lines));
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int rc = 0;

	/* Check and render every host's commands before anything is sent anywhere. */
	for (size_t i = 0; i < c->nhosts; i++) {
		if (cfg_setup_lines(p, i, c->hosts[i].name, &lines[i], &e) < 0) {
			/* Only remote output can make a word fail the check. */
			cfg_error(c, "%s", e.msg);
			rc = MR_CONFIG_EXIT_DISCOVERY;
			goto out;
		}
	}
	if (!apply) {
		print_setup(c, p, lines);
		goto out;
	}
	rc = apply_setup(c, p, lines);
	if (rc == 0)
		rc = cfg_ping_links(c, p, cfg_ping_script, 0);
out:
	for (size_t i = 0; i < c->nhosts; i++)
		mr_strvec_release(&lines[i]);
	free(lines);
	return rc;
}
