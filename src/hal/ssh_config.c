/*
 * ssh_config.c - ssh_config.h's API: which resolver a load picks, a lookup (the
 * cached `ssh -G` answer or the built-in blocks, then tokens, ~ and what libssh2
 * cannot do), and the helpers around destinations and paths. The built-in
 * parser is in ssh_config_parse.c, the `ssh -G` runs in ssh_config_g.c
 * (ssh_config_impl.h: what they share).
 */
#include "common/compat.h"
#include "hal/ssh_config_impl.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/shquote.h"
#include "common/spawn.h"

#include <ctype.h>
#include <libssh2.h>
#include <pwd.h>
#include <strings.h>
#include <unistd.h>

const char *mr_ssh_home(void)
{
	const char *h = getenv("HOME");
	struct passwd *pw;

	if (h && *h)
		return h;
	pw = getpwuid(getuid());
	if (pw && pw->pw_dir && *pw->pw_dir)
		return pw->pw_dir;
	return "/";
}

const char *mr_ssh_local_user(void)
{
	const char *u = getenv("USER");
	struct passwd *pw;

	if (u && *u)
		return u;
	pw = getpwuid(getuid());
	return pw && pw->pw_name ? pw->pw_name : "root";
}

char *mr_ssh_expand_tilde(const char *path)
{
	struct mr_buf b = MR_BUF_INIT;
	const char *rest, *home;

	if (path[0] != '~')
		return strdup(path);
	rest = strchr(path, '/');
	if (!rest)
		rest = path + strlen(path);
	if (rest == path + 1) {
		home = mr_ssh_home();
	} else {
		char name[256];
		struct passwd *pw;
		size_t n = (size_t)(rest - path - 1);

		if (n >= sizeof(name))
			return NULL;
		memcpy(name, path + 1, n);
		name[n] = '\0';
		pw = getpwnam(name);
		if (!pw)
			return NULL;
		home = pw->pw_dir;
	}
	if (mr_buf_puts(&b, home) < 0 || mr_buf_puts(&b, rest) < 0) {
		mr_buf_release(&b);
		return NULL;
	}
	return mr_buf_detach(&b, NULL);
}

static void block_release(struct cfg_block *b)
{
	for (size_t i = 0; i < b->nopts; i++)
		mr_strvec_release(&b->opts[i].args);
	free(b->opts);
	mr_strvec_release(&b->patterns);
	mr_strvec_release(&b->m_hosts);
	mr_strvec_release(&b->m_orig);
	mr_strvec_release(&b->m_users);
}

void mr_ssh_config_free(struct mr_ssh_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->nblocks; i++)
		block_release(&cfg->blocks[i]);
	free(cfg->blocks);
	mr_strvec_release(&cfg->unsupported);
	free(cfg->unsupported_str);
	free(cfg->ssh_bin);
	free(cfg->file);
	for (size_t i = 0; i < cfg->ng; i++) {
		free(cfg->g[i].dest);
		free(cfg->g[i].text);
	}
	free(cfg->g);
	free(cfg);
}

const char *mr_ssh_config_resolver(const struct mr_ssh_config *cfg)
{
	return cfg ? cfg->ssh_bin : NULL;
}

const char *mr_ssh_config_unsupported(const struct mr_ssh_config *cfg)
{
	return cfg ? cfg->unsupported_str : NULL;
}

/* MESHRUN_SSH_RESOLVER: auto (default), ssh, builtin. NULL: builtin. */
static int pick_resolver(char **bin, struct meshrun_err *err)
{
	const char *mode = getenv("MESHRUN_SSH_RESOLVER");

	*bin = NULL;
	if (mode && *mode && strcmp(mode, "auto") && strcmp(mode, "ssh") && strcmp(mode, "builtin"))
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "MESHRUN_SSH_RESOLVER='%s': expected auto, ssh or builtin", mode);
	if (mode && !strcmp(mode, "builtin"))
		return 0;
	*bin = mr_which("ssh", NULL);
	if (!*bin && errno == ENOMEM)
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh config: out of memory");
	if (!*bin && mode && !strcmp(mode, "ssh"))
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "MESHRUN_SSH_RESOLVER=ssh: no 'ssh' program on PATH (install an OpenSSH client)");
	return 0;
}

int mr_ssh_config_load(struct mr_ssh_config **out, const char *path, struct meshrun_err *err)
{
	const char *env = getenv("MESHRUN_SSH_CONFIG");
	struct mr_ssh_config *cfg;
	char *bin = NULL;
	int rc;

	*out = NULL;
	rc = pick_resolver(&bin, err);
	if (rc < 0)
		return rc;
	if (!path && env && *env)
		path = env;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg || (path && !(cfg->file = strdup(path)))) {
		free(cfg);
		free(bin);
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh config: out of memory");
	}
	cfg->ssh_bin = bin;
	if (bin && path && access(path, R_OK) < 0)
		rc = mr_err_set(err, errno == ENOENT ? MESHRUN_E_NOTFOUND : MESHRUN_E_SYS,
				"ssh config '%s': %s", path, strerror(errno));
	else if (!bin)
		rc = mr_sshcfg_load_builtin(cfg, path, err);
	if (rc < 0) {
		mr_ssh_config_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

/* Expand ~ at the start (paths only) and %-tokens. NULL on error, with *why
 * saying what is wrong with v, or left NULL when memory ran out. */
char *mr_sshcfg_expand(const char *v, bool path, const struct mr_ssh_host_cfg *h, const char **why)
{
	struct mr_buf b = MR_BUF_INIT;
	char *tilde = NULL;
	const char *s = v;

	if (path && v[0] == '~') {
		tilde = mr_ssh_expand_tilde(v);
		if (!tilde) {
			*why = "cannot expand '~'";
			return NULL;
		}
		s = tilde;
	}
	for (; *s; s++) {
		const char *add = NULL;
		char num[256];

		if (*s != '%') {
			if (mr_buf_putc(&b, *s) < 0)
				goto nomem;
			continue;
		}
		switch (s[1]) {
		case '%': add = "%"; break;
		case 'h': add = h->hostname ? h->hostname : h->alias; break;
		case 'n': add = h->alias; break;
		case 'd': add = mr_ssh_home(); break;
		case 'u': add = mr_ssh_local_user(); break;
		case 'r': add = h->user ? h->user : mr_ssh_local_user(); break;
		case 'p': snprintf(num, sizeof(num), "%d", h->port ? h->port : 22); add = num; break;
		case 'i': snprintf(num, sizeof(num), "%u", (unsigned)getuid()); add = num; break;
		case 'l':
		case 'L':
			if (gethostname(num, sizeof(num)) < 0)
				num[0] = '\0';
			num[sizeof(num) - 1] = '\0';
			if (s[1] == 'L' && strchr(num, '.'))
				*strchr(num, '.') = '\0';
			add = num;
			break;
		default:
			*why = "unknown %-token";
			goto fail;
		}
		if (mr_buf_puts(&b, add) < 0)
			goto nomem;
		s++;
	}
	free(tilde);
	return mr_buf_detach(&b, NULL);
nomem:
	*why = NULL;
fail:
	free(tilde);
	mr_buf_release(&b);
	return NULL;
}

static bool valid_user(const char *s)
{
	if (!*s || s[0] == '-')
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
			return false;
	return true;
}

int mr_ssh_dest_split(const char *dest, char **user, char **host, struct meshrun_err *err)
{
	const char *at = strrchr(dest, '@');
	const char *h = at ? at + 1 : dest;
	char *u = NULL, *hh = NULL;

	if (user)
		*user = NULL;
	if (host)
		*host = NULL;
	/* An IPv6 address has no '@'; a name may not start with '-' (an ssh option). */
	if (!mr_is_ip(h) && !mr_is_hostname(h))
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "ssh destination '%s': '%s' is not a host name or IP address%s",
				  dest, h, h[0] == '-' ? " (it would be read as an ssh option)" : "");
	if (at) {
		u = strndup(dest, (size_t)(at - dest));
		if (!u)
			return mr_err_set(err, MESHRUN_E_NOMEM, "ssh destination '%s': out of memory", dest);
		if (!valid_user(u)) {
			int rc = mr_err_set(err, MESHRUN_E_USAGE,
					    "ssh destination '%s': '%s' is not a user name "
					    "(letters, digits, '_', '.', '-'; not starting with '-')",
					    dest, u);
			free(u);
			return rc;
		}
	}
	if (host && !(hh = strdup(h))) {
		free(u);
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh destination '%s': out of memory", dest);
	}
	if (user)
		*user = u;
	else
		free(u);
	if (host)
		*host = hh;
	return 0;
}

void mr_ssh_host_cfg_release(struct mr_ssh_host_cfg *h)
{
	MR_FREE(h->dest);
	MR_FREE(h->alias);
	MR_FREE(h->hostname);
	MR_FREE(h->user);
	MR_FREE(h->proxy_jump);
	MR_FREE(h->proxy_command);
	MR_FREE(h->identity_agent);
	mr_strvec_release(&h->identity_files);
	mr_strvec_release(&h->known_hosts);
	mr_strvec_release(&h->certificate_files);
	mr_strvec_release(&h->libssh2_gaps);
	mr_strvec_release(&h->auth_notes);
	*h = (struct mr_ssh_host_cfg)MR_SSH_HOST_CFG_INIT;
}

bool mr_ssh_key_is_sk(const char *path)
{
	size_t n = strlen(path);
	char pub[4096], head[8] = "";
	FILE *f;

	if (n >= 3 && !strcmp(path + n - 3, "_sk"))
		return true;
	if (snprintf(pub, sizeof(pub), "%s.pub", path) >= (int)sizeof(pub))
		return false;
	f = fopen(pub, "r");
	if (!f)
		return false;
	if (!fgets(head, sizeof(head), f))
		head[0] = '\0';
	fclose(f);
	return !strncmp(head, "sk-", 3);
}

static void raw_release(struct raw_opts *r)
{
	mr_strvec_release(&r->ids);
	mr_strvec_release(&r->certs);
	mr_strvec_release(&r->kh);
}

static int push_expanded(struct mr_strvec *v, const char *raw, bool path, const struct mr_ssh_host_cfg *h,
			 const char **why)
{
	char *p = mr_sshcfg_expand(raw, path, h, why);
	int rc;

	if (!p)
		return -1;
	rc = mr_strvec_push(v, p);
	free(p);
	return rc;
}

/* Tokens, ~, and what libssh2 cannot do: the effective options in h. -1 with
 * *why saying what is wrong, or with *why NULL when memory ran out. */
static int finish(struct mr_ssh_host_cfg *h, const struct raw_opts *r, const char **why)
{
	h->port = r->port;
	h->strict = (enum mr_ssh_strict)r->strict;
	h->connect_timeout_ms = r->timeout_ms > 0 ? r->timeout_ms : 0;
	h->address_family = r->af;
	h->identities_only = r->idonly == 1;
	h->hostname = mr_sshcfg_expand(r->hostname ? r->hostname : h->alias, false, h, why);
	if (!h->hostname)
		return -1;
	for (size_t i = 0; i < r->ids.nr; i++)
		if (push_expanded(&h->identity_files, r->ids.v[i], true, h, why) < 0)
			return -1;
	for (size_t i = 0; i < r->certs.nr; i++)
		if (push_expanded(&h->certificate_files, r->certs.v[i], true, h, why) < 0)
			return -1;
	if (r->kh.nr == 1 && !strcasecmp(r->kh.v[0], "none")) {
		h->known_hosts_none = true;
	} else {
		for (size_t i = 0; i < r->kh.nr; i++)
			if (push_expanded(&h->known_hosts, r->kh.v[i], true, h, why) < 0)
				return -1;
	}
	if (r->jump && strcasecmp(r->jump, "none") && !(h->proxy_jump = strdup(r->jump)))
		goto nomem;
	if (r->cmd && strcasecmp(r->cmd, "none") && !h->proxy_jump) {
		h->proxy_command = mr_sshcfg_expand(r->cmd, false, h, why);
		if (!h->proxy_command)
			return -1;
	}
	if (r->agent) {
		if (!strcasecmp(r->agent, "none")) {
			h->identity_agent_none = true;
		} else if (strcmp(r->agent, "SSH_AUTH_SOCK")) {
			const char *v = r->agent[0] == '$' ? getenv(r->agent + 1) : NULL;

			h->identity_agent = v ? strdup(v)
					    : r->agent[0] == '$' ? NULL : mr_sshcfg_expand(r->agent, true, h, why);
			if (!h->identity_agent && r->agent[0] != '$')
				return -1;
		}
	}
	/* What libssh2 cannot do, named with the option. */
	if (r->pkcs11 && strcasecmp(r->pkcs11, "none") &&
	    mr_strvec_pushf(&h->libssh2_gaps, "PKCS11Provider %s: libssh2 has no PKCS#11 support", r->pkcs11) < 0)
		goto nomem;
	for (size_t i = 0; i < h->identity_files.nr; i++) {
		const char *k = h->identity_files.v[i];

		if (access(k, F_OK) == 0 && mr_ssh_key_is_sk(k) &&
		    mr_strvec_pushf(&h->libssh2_gaps, "IdentityFile %s: a FIDO security key (sk-), which libssh2 cannot use",
				    k) < 0)
			goto nomem;
	}
#if LIBSSH2_VERSION_NUM < 0x010b00
	/* Measured with 1.10 against OpenSSH 9.2: sshd accepts the certificate in the
	 * query, then refuses the signature ("Failed publickey ... ED25519"). */
	for (size_t i = 0; i < h->certificate_files.nr; i++)
		if (access(h->certificate_files.v[i], F_OK) == 0 &&
		    mr_strvec_pushf(&h->libssh2_gaps, "CertificateFile %s: libssh2 %s cannot sign with a user certificate",
				    h->certificate_files.v[i], LIBSSH2_VERSION) < 0)
			goto nomem;
#endif
	if (r->gssapi && mr_strvec_push(&h->auth_notes, "GSSAPIAuthentication yes: libssh2 has no GSSAPI (Kerberos), "
				     "only publickey is tried") < 0)
		goto nomem;
	return 0;
nomem:
	*why = NULL;
	return -1;
}

/*
 * OpenSSH before 6.8 has no -G: the built-in parser reads the config instead, from
 * now on, said once (with what it skips). The cached answers go (all failures).
 */
static int fall_back_builtin(struct mr_ssh_config *cfg, struct meshrun_err *err)
{
	int rc = mr_sshcfg_load_builtin(cfg, cfg->file, err);

	if (rc < 0)
		return rc;
	mr_warn("ssh config: '%s' has no -G (OpenSSH older than 6.8): hosts are resolved by the built-in parser%s%s",
		cfg->ssh_bin, cfg->unsupported_str ? ", which ignores: " : "",
		cfg->unsupported_str ? cfg->unsupported_str : "");
	for (size_t i = 0; i < cfg->ng; i++) {
		free(cfg->g[i].dest);
		free(cfg->g[i].text);
	}
	free(cfg->g);
	cfg->g = NULL;
	cfg->ng = cfg->g_alloc = 0;
	free(cfg->ssh_bin);
	cfg->ssh_bin = NULL;
	cfg->fell_back = true;
	return 0;
}

bool mr_ssh_config_fell_back(const struct mr_ssh_config *cfg)
{
	return cfg && cfg->fell_back;
}

static int lookup(struct mr_ssh_config *cfg, const char *dest, const char *g_text,
		  struct mr_ssh_host_cfg *out, struct meshrun_err *err)
{
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	struct raw_opts r;
	char *gtext = NULL;
	const char *why = NULL;
	int rc;

	memset(&r, 0, sizeof(r));
	*out = h;
	rc = mr_ssh_dest_split(dest, &h.user, &h.alias, err);
	if (rc < 0)
		return rc;
	h.user_from_dest = h.user != NULL;
	h.dest = strdup(dest);
	if (!h.dest)
		goto nomem;
	if (g_text) {
		gtext = strdup(g_text);
		if (!gtext)
			goto nomem;
		h.from_ssh_g = true;
		if (mr_sshcfg_collect_g(gtext, &h, &r, &why) < 0)
			goto fail_why;
	} else if (cfg && cfg->ssh_bin) {
		struct g_entry *e = mr_sshcfg_g_find(cfg, dest);

		if (!e) {
			mr_ssh_config_prefetch(cfg, &dest, 1);
			e = mr_sshcfg_g_find(cfg, dest);
		}
		if (!e)
			goto nomem;
		if (!e->text && e->no_g) {
			rc = fall_back_builtin(cfg, err);
			if (rc < 0)
				goto out;
			if (mr_sshcfg_collect_builtin(cfg, &h, &r) < 0)
				goto nomem;
			goto resolved;
		}
		if (!e->text) {
			rc = mr_err_set(err, e->err.code ? e->err.code : MESHRUN_E_NOMEM, "%s",
					e->err.code ? e->err.msg : "ssh -G: out of memory");
			goto out;
		}
		gtext = strdup(e->text);
		if (!gtext)
			goto nomem;
		h.from_ssh_g = true;
		if (mr_sshcfg_collect_g(gtext, &h, &r, &why) < 0)
			goto fail_why;
	} else if (mr_sshcfg_collect_builtin(cfg, &h, &r) < 0) {
		goto nomem;
	}
resolved:
	if (finish(&h, &r, &why) < 0)
		goto fail_why;
	raw_release(&r);
	free(gtext);
	*out = h;
	return 0;

fail_why:
	if (!why)
		goto nomem;
	rc = mr_err_set(err, MESHRUN_E_PARSE, "ssh config for '%s': %s", dest, why);
	goto out;
nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "ssh config for '%s': out of memory", dest);
out:
	raw_release(&r);
	free(gtext);
	mr_ssh_host_cfg_release(&h);
	return rc;
}

int mr_ssh_config_lookup(struct mr_ssh_config *cfg, const char *dest,
			 struct mr_ssh_host_cfg *out, struct meshrun_err *err)
{
	return lookup(cfg, dest, NULL, out, err);
}

int mr_ssh_host_cfg_from_g(const char *dest, const char *ssh_g_output, struct mr_ssh_host_cfg *out,
			   struct meshrun_err *err)
{
	return lookup(NULL, dest, ssh_g_output, out, err);
}
