/*
 * mtu.c - --mtu N (boot.h): set on both ends of every planned link, read back
 * (a refusal does not show in ifconfig's exit status on macOS), then checked
 * with a don't-fragment ping of N bytes over every link, from both ends.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "config/boot.h"
#include "topo/topo.h"

/* $1 the MTU, then the interfaces: set each one's and read it back; print
 * "refused IF HAS [WHAT IFCONFIG SAID]" for each that does not have it then. */
static const char set_script[] =
	"n=$1; shift\n"
	"for i; do\n"
	"\tw=$(sudo -n ifconfig \"$i\" mtu \"$n\" 2>&1 >/dev/null | sed -n 1p)\n"
	"\tm=$(ifconfig \"$i\" 2>/dev/null | sed -n '1s/.* mtu \\([0-9][0-9]*\\).*/\\1/p')\n"
	"\t[ \"$m\" = \"$n\" ] || echo \"refused $i ${m:-none} $w\"\n"
	"done\n"
	"echo done\n";

/* $1 IF, $2 PEER, $3 payload: one don't-fragment packet of that size, as root
 * on macOS (its ping caps a user's packets at net.inet.raw.maxdgram, boot.h). */
static const char df_ping_script[] =
	"if [ \"$(uname -s)\" = Linux ]; then exec ping -c 1 -W 2 -M do -s \"$3\" -I \"$1\" \"$2\"; "
	"else exec sudo -n ping -c 1 -t 2 -D -s \"$3\" \"$2\"; fi";

/* The planned interfaces of host i, in plan order (pointers into p). */
static void host_ports(const struct mr_topo_plan *p, size_t i, const char **out, size_t *n)
{
	*n = 0;
	for (size_t l = 0; l < p->nlinks; l++)
		for (int s = 0; s < 2; s++)
			if (p->links[l].host[s] == i)
				out[(*n)++] = p->links[l].ifname[s];
}

/* Host h's "refused IF HAS WHY" line for interface ifn, or NULL: it has the MTU. */
static const char *refusal(const struct mr_strvec *lines, const char *ifn)
{
	size_t n = strlen(ifn);

	for (size_t k = 0; k < lines->nr; k++)
		if (!strncmp(lines->v[k], "refused ", 8) && !strncmp(lines->v[k] + 8, ifn, n) &&
		    lines->v[k][8 + n] == ' ')
			return lines->v[k] + 9 + n;
	return NULL;
}

static void print_mtu(struct cfg_run *c, const struct mr_topo_plan *p, const char **ports)
{
	for (size_t i = 0; i < c->nhosts; i++) {
		size_t n;

		host_ports(p, i, ports, &n);
		if (!n)
			continue;
		cfg_say(c, "MTU for %s (--mtu %d)", c->hosts[i].name, c->o->mtu);
		for (size_t k = 0; k < n; k++)
			cfg_say(c, "sudo ifconfig %s mtu %d", ports[k], c->o->mtu);
		cfg_say(c, "%s", "");
	}
}

/* Set the MTU everywhere; every end without it afterwards is named. */
static int set_mtu(struct cfg_run *c, const struct mr_topo_plan *p, const char **ports)
{
	size_t n = c->nhosts, nbad = 0;
	struct mr_hal_cmd *cmds = xcalloc(n, sizeof(*cmds));
	struct mr_strvec *argvs = xcalloc(n, sizeof(*argvs));
	struct mr_strvec *lines = xcalloc(n, sizeof(*lines));
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char mtu[16];
	int rc = 0;

	snprintf(mtu, sizeof(mtu), "%d", c->o->mtu);
	cfg_step(c, "setting the MTU of every link end");
	for (size_t i = 0; i < n; i++) {
		size_t np;

		host_ports(p, i, ports, &np);
		mr_strvec_push(&argvs[i], MR_SH_PATH);
		mr_strvec_push(&argvs[i], "-c");
		mr_strvec_push(&argvs[i], set_script);
		mr_strvec_push(&argvs[i], "sh");
		mr_strvec_push(&argvs[i], mtu);
		for (size_t k = 0; k < np; k++) {
			if (!mr_is_ifname(ports[k])) {
				cfg_error(c, "%s: refusing interface name '%.40s'", c->hosts[i].name, ports[k]);
				rc = MR_CONFIG_EXIT_DISCOVERY;
				goto out;
			}
			mr_strvec_push(&argvs[i], ports[k]);
		}
		cfg_cmd(c, &cmds[i], c->hosts[i].name, argvs[i].v);
	}
	if (cfg_hal_run(c, cmds, n, &e) < 0) {
		cfg_error(c, "--mtu: %s", e.msg);
		rc = MR_CONFIG_EXIT_SETUP;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char desc[256];

		if (!mr_hal_cmd_ok(&cmds[i]) ||
		    mr_strvec_split(&lines[i], mr_buf_cstr(&cmds[i].out), '\n', true) < 0 ||
		    !lines[i].nr || strcmp(lines[i].v[lines[i].nr - 1], "done")) {
			cfg_error(c, "%s: setting the MTU did not finish: %s", c->hosts[i].name,
				  cmds[i].hal_rc < 0 ? cmds[i].err.msg
						     : mr_hal_cmd_describe(&cmds[i], desc, sizeof(desc)));
			rc = MR_CONFIG_EXIT_SETUP;
		}
	}
	if (rc)
		goto out;
	/* name each cable with an end that does not have the MTU now */
	for (size_t l = 0; l < p->nlinks; l++) {
		const struct mr_topo_link *lk = &p->links[l];

		for (int s = 0; s < 2; s++) {
			size_t h = lk->host[s];
			const char *r = refusal(&lines[h], lk->ifname[s]);
			size_t hl;

			if (!r)
				continue;
			hl = strcspn(r, " ");
			cfg_error(c, "cable %s:%s <-> %s:%s: %s:%s refuses mtu %s (it has %.*s)%s%.200s",
				  c->hosts[lk->host[0]].name, lk->ifname[0], c->hosts[lk->host[1]].name,
				  lk->ifname[1], c->hosts[h].name, lk->ifname[s], mtu, (int)MR_MIN(hl, (size_t)15), r,
				  r[hl] && r[hl + 1] ? "; ifconfig said: " : "", r[hl] ? r + hl + 1 : "");
			nbad++;
		}
	}
	if (nbad)
		rc = MR_CONFIG_EXIT_SETUP;
	else
		cfg_step_done(c, "mtu %s on %zu link ends", mtu, 2 * p->nlinks);
out:
	cfg_cmds_release(cmds, n);
	for (size_t i = 0; i < n; i++) {
		mr_strvec_release(&argvs[i]);
		mr_strvec_release(&lines[i]);
	}
	free(lines);
	free(argvs);
	free(cmds);
	return rc;
}

int cfg_mtu(struct cfg_run *c, const struct mr_topo_plan *p, bool apply)
{
	const char **ports = xcalloc(2 * p->nlinks + 1, sizeof(*ports));
	int rc = 0;

	if (!apply)
		print_mtu(c, p, ports);
	else if ((rc = set_mtu(c, p, ports)) == 0)
		rc = cfg_ping_links(c, p, df_ping_script, c->o->mtu);
	free(ports);
	return rc;
}
