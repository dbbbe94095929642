/*
 * ssh_config_parse.c - the built-in ssh_config parser (ssh_config.h's list of
 * what it understands): lines into Host and Match blocks, Include read in place,
 * then a host's values from the blocks that match it. Apart from ssh_config.c
 * because only the builtin resolver uses it (no OpenSSH client, OpenSSH < 6.8,
 * or MESHRUN_SSH_RESOLVER=builtin); `ssh -G` does all of this itself.
 */
#include "common/compat.h"
#include "common/array.h"
#include "hal/ssh_config_impl.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/num.h"

#include <ctype.h>
#include <glob.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define SSH_CONFIG_MAX (4u << 20)  /* a bigger ssh_config is not a config */
#define INCLUDE_DEPTH_MAX 16       /* OpenSSH's READCONF_MAX_DEPTH */

static const struct {
	const char *name;
	enum opt_key key;
	bool multi; /* several values on one line */
} known_keys[] = {
	{ "hostname", K_HOSTNAME, false },
	{ "user", K_USER, false },
	{ "port", K_PORT, false },
	{ "identityfile", K_IDENTITY, false },
	{ "userknownhostsfile", K_KNOWN_HOSTS, true },
	{ "stricthostkeychecking", K_STRICT, false },
	{ "connecttimeout", K_TIMEOUT, false },
	{ "certificatefile", K_CERT, false },
	{ "addressfamily", K_AF, false },
	{ "proxyjump", K_PROXYJUMP, false },
	{ "proxycommand", K_PROXYCMD, true },
	{ "identityagent", K_AGENT, false },
	{ "identitiesonly", K_IDONLY, false },
	{ "batchmode", K_NOOP, false },
	{ "loglevel", K_NOOP, false },
};

bool mr_ssh_pattern_match(const char *p, const char *s)
{
	for (;;) {
		if (!*p)
			return !*s;
		if (*p == '*') {
			while (*p == '*')
				p++;
			if (!*p)
				return true;
			for (; *s; s++)
				if (mr_ssh_pattern_match(p, s))
					return true;
			return false;
		}
		if (!*s)
			return false;
		if (*p != '?' && tolower((unsigned char)*p) != tolower((unsigned char)*s))
			return false;
		p++;
		s++;
	}
}

/* Note a directive the built-in parser skips (once per name). */
static int note_unsupported(struct mr_ssh_config *cfg, const char *name)
{
	struct mr_buf b = MR_BUF_INIT;

	for (size_t i = 0; i < cfg->unsupported.nr; i++)
		if (!strcasecmp(cfg->unsupported.v[i], name))
			return 0;
	if (mr_strvec_push(&cfg->unsupported, name) < 0)
		return -1;
	for (size_t i = 0; i < cfg->unsupported.nr; i++)
		if (mr_buf_printf(&b, "%s%s", i ? ", " : "", cfg->unsupported.v[i]) < 0) {
			mr_buf_release(&b);
			return -1;
		}
	free(cfg->unsupported_str);
	cfg->unsupported_str = mr_buf_detach(&b, NULL);
	return 0;
}

/*
 * Appends an empty block; returns its index, or -1 when out of memory. The
 * parser names the current block by index (NO_BLOCK: none yet), never by
 * pointer: a block added by an Include further down moves the array.
 */
#define NO_BLOCK ((ssize_t)-1)
static ssize_t add_block(struct mr_ssh_config *cfg)
{
	struct cfg_block *nb = mr_array_grow(cfg->blocks, cfg->nblocks + 1, &cfg->alloc, sizeof(*nb));

	if (!nb)
		return NO_BLOCK;
	cfg->blocks = nb;
	memset(&cfg->blocks[cfg->nblocks], 0, sizeof(cfg->blocks[0]));
	return (ssize_t)cfg->nblocks++;
}

static struct cfg_opt *add_opt(struct cfg_block *b)
{
	struct cfg_opt *no = mr_array_grow(b->opts, b->nopts + 1, &b->alloc, sizeof(*no));

	if (!no)
		return NULL;
	b->opts = no;
	memset(&b->opts[b->nopts], 0, sizeof(b->opts[0]));
	return &b->opts[b->nopts++];
}

/*
 * Split one line into words: whitespace separates, "double quotes" group, a word
 * starting with # ends the line. The keyword may be followed by '=' instead of
 * (or around) whitespace. Returns 0, or -1: *why says what is wrong with the
 * line ("unterminated quote"), or stays NULL when memory ran out.
 */
static int split_line(const char *line, struct mr_strvec *words, const char **why)
{
	const char *p = line;
	struct mr_buf w = MR_BUF_INIT;
	bool first = true;
	int rc = -1;

	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\r')
			p++;
		if (!first && words->nr == 1 && *p == '=') {
			p++;
			while (*p == ' ' || *p == '\t')
				p++;
		}
		if (!*p || *p == '#')
			break;
		mr_buf_reset(&w);
		while (*p && *p != ' ' && *p != '\t' && *p != '\r' && !(first && *p == '=')) {
			if (*p == '"') {
				const char *q = strchr(p + 1, '"');

				if (!q) {
					*why = "unterminated quote";
					goto out;
				}
				if (mr_buf_append(&w, p + 1, (size_t)(q - p - 1)) < 0)
					goto out;
				p = q + 1;
			} else {
				if (mr_buf_putc(&w, *p) < 0)
					goto out;
				p++;
			}
		}
		if (mr_strvec_push(words, mr_buf_cstr(&w)) < 0)
			goto out;
		first = false;
	}
	rc = 0;
out:
	mr_buf_release(&w);
	return rc;
}

int mr_sshcfg_parse_value(struct cfg_opt *o, const char *v, const char **why)
{
	int64_t ms;

	switch (o->key) {
	case K_PORT:
		if (mr_parse_int(v, 1, 65535, &o->ival) < 0) {
			*why = "bad port (expected 1..65535)";
			return -1;
		}
		break;
	case K_STRICT:
		if (!strcasecmp(v, "yes") || !strcasecmp(v, "ask") || !strcasecmp(v, "true"))
			o->ival = MR_SSH_STRICT_YES;
		else if (!strcasecmp(v, "accept-new"))
			o->ival = MR_SSH_STRICT_ACCEPT_NEW;
		else if (!strcasecmp(v, "no") || !strcasecmp(v, "off") || !strcasecmp(v, "false"))
			o->ival = MR_SSH_STRICT_NO;
		else {
			*why = "bad StrictHostKeyChecking (expected yes, no, accept-new)";
			return -1;
		}
		break;
	case K_TIMEOUT:
		if (!strcasecmp(v, "none")) {
			o->ival = -1;
			break;
		}
		if (mr_parse_duration_ms(v, INT32_MAX, &ms) < 0 || ms <= 0) {
			*why = "bad ConnectTimeout (expected seconds)";
			return -1;
		}
		o->ival = (int)ms;
		break;
	case K_AF:
		if (!strcasecmp(v, "any"))
			o->ival = AF_UNSPEC;
		else if (!strcasecmp(v, "inet"))
			o->ival = AF_INET;
		else if (!strcasecmp(v, "inet6"))
			o->ival = AF_INET6;
		else {
			*why = "bad AddressFamily (expected any, inet, inet6)";
			return -1;
		}
		break;
	case K_IDONLY:
		if (!strcasecmp(v, "yes") || !strcasecmp(v, "true"))
			o->ival = 1;
		else if (!strcasecmp(v, "no") || !strcasecmp(v, "false"))
			o->ival = 0;
		else {
			*why = "bad IdentitiesOnly (expected yes or no)";
			return -1;
		}
		break;
	default:
		break;
	}
	return 0;
}

/* Give nb the conditions of b (Include inside a Host or Match block). */
static int copy_conditions(struct cfg_block *nb, const struct cfg_block *b)
{
	nb->match_all = b->match_all;
	nb->never = b->never;
	if (mr_strvec_pushv(&nb->patterns, b->patterns.v) < 0 || mr_strvec_pushv(&nb->m_hosts, b->m_hosts.v) < 0 ||
	    mr_strvec_pushv(&nb->m_orig, b->m_orig.v) < 0 || mr_strvec_pushv(&nb->m_users, b->m_users.v) < 0)
		return -1;
	return 0;
}

/* "Match ...": all, host/originalhost/user LIST; anything else never applies. */
static int parse_match(struct mr_ssh_config *cfg, struct cfg_block *b, struct mr_strvec *w, const char **why)
{
	if (w->nr < 2) {
		*why = "Match without criteria";
		return -1;
	}
	for (size_t i = 1; i < w->nr; i++) {
		const char *c = w->v[i];
		struct mr_strvec *list = NULL;
		char what[64];

		if (!strcasecmp(c, "all")) {
			b->match_all = true;
			continue;
		}
		if (!strcasecmp(c, "host"))
			list = &b->m_hosts;
		else if (!strcasecmp(c, "originalhost"))
			list = &b->m_orig;
		else if (!strcasecmp(c, "user"))
			list = &b->m_users;
		if (list && i + 1 < w->nr) {
			if (mr_strvec_push(list, w->v[++i]) < 0)
				return -1;
			continue;
		}
		/* exec, canonical, final, localuser, localnetwork, tagged, !negations */
		snprintf(what, sizeof(what), "Match %s", c);
		if (note_unsupported(cfg, what) < 0)
			return -1;
		b->never = true;
		if (strcasecmp(c, "canonical") && strcasecmp(c, "final") && i + 1 < w->nr)
			i++; /* skip its argument */
	}
	if (b->match_all && (b->m_hosts.nr || b->m_orig.nr || b->m_users.nr))
		b->match_all = false; /* "all" with others: the others decide */
	return 0;
}

static int parse_text(struct mr_ssh_config *cfg, const char *text, size_t len, const char *name,
		      int depth, ssize_t *cur, struct meshrun_err *err);

/*
 * "Include PATH...": globs, relative to ~/.ssh; each file parsed in place.
 * Inside a block, each file's lines (and the outer lines after the Include) go
 * into a new block with the outer block's conditions.
 */
static int parse_include(struct mr_ssh_config *cfg, struct mr_strvec *w, const char *name, unsigned lineno,
			 int depth, ssize_t *cur, struct meshrun_err *err)
{
	ssize_t outer = *cur;
	int rc = 0;

	if (depth >= INCLUDE_DEPTH_MAX)
		return mr_err_set(err, MESHRUN_E_PARSE, "%s:%u: Include: nested too deep (%d levels)", name, lineno,
				  INCLUDE_DEPTH_MAX);
	for (size_t i = 1; i < w->nr && rc == 0; i++) {
		struct mr_buf pat = MR_BUF_INIT;
		glob_t g;
		char *t = mr_ssh_expand_tilde(w->v[i]);

		if (!t)
			return mr_err_set(err, MESHRUN_E_PARSE, "%s:%u: Include: cannot expand '%s'", name, lineno,
					  w->v[i]);
		if (t[0] == '/' ? mr_buf_puts(&pat, t) : mr_buf_printf(&pat, "%s/.ssh/%s", mr_ssh_home(), t)) {
			free(t);
			mr_buf_release(&pat);
			return mr_err_set(err, MESHRUN_E_NOMEM, "%s:%u: out of memory", name, lineno);
		}
		free(t);
		memset(&g, 0, sizeof(g));
		if (glob(mr_buf_cstr(&pat), 0, NULL, &g) == 0) {
			for (size_t k = 0; k < g.gl_pathc && rc == 0; k++) {
				struct mr_buf text = MR_BUF_INIT;
				ssize_t inner = NO_BLOCK;

				rc = mr_read_file(g.gl_pathv[k], SSH_CONFIG_MAX, &text, err);
				if (rc == 0 && outer != NO_BLOCK) {
					inner = add_block(cfg);
					if (inner == NO_BLOCK ||
					    copy_conditions(&cfg->blocks[inner], &cfg->blocks[outer]) < 0)
						rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory", g.gl_pathv[k]);
				}
				if (rc == 0)
					rc = parse_text(cfg, text.p ? text.p : "", text.len, g.gl_pathv[k], depth + 1,
							&inner, err);
				mr_buf_release(&text);
			}
		}
		globfree(&g);
		mr_buf_release(&pat);
	}
	if (rc == 0 && outer != NO_BLOCK) { /* back in the outer block after the Include line */
		ssize_t nb = add_block(cfg);

		if (nb == NO_BLOCK || copy_conditions(&cfg->blocks[nb], &cfg->blocks[outer]) < 0)
			return mr_err_set(err, MESHRUN_E_NOMEM, "%s:%u: out of memory", name, lineno);
		*cur = nb;
	}
	return rc;
}

/* The raw value of a line after its keyword (ProxyCommand takes the rest verbatim). */
static const char *line_rest(const char *line)
{
	const char *p = line;

	while (*p == ' ' || *p == '\t')
		p++;
	while (*p && *p != ' ' && *p != '\t' && *p != '=')
		p++;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '=')
		p++;
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static int parse_line(struct mr_ssh_config *cfg, ssize_t *cur, struct mr_strvec *w,
		      const char *line, const char **why)
{
	const char *key = w->v[0];
	struct cfg_opt *o;
	size_t k;

	if (!strcasecmp(key, "host")) {
		if (w->nr < 2) {
			*why = "Host without a pattern";
			return -1;
		}
		*cur = add_block(cfg);
		if (*cur == NO_BLOCK || mr_strvec_pushv(&cfg->blocks[*cur].patterns, w->v + 1) < 0)
			return -1;
		return 0;
	}
	if (!strcasecmp(key, "match")) {
		*cur = add_block(cfg);
		if (*cur == NO_BLOCK)
			return -1;
		return parse_match(cfg, &cfg->blocks[*cur], w, why);
	}
	for (k = 0; k < ARRAY_SIZE(known_keys); k++)
		if (!strcasecmp(key, known_keys[k].name))
			break;
	if (k == ARRAY_SIZE(known_keys))
		return note_unsupported(cfg, key); /* named in one warning, never silently */
	if (w->nr < 2) {
		*why = "missing value";
		return -1;
	}
	if (w->nr > 2 && !known_keys[k].multi) {
		*why = "garbage at end of line";
		return -1;
	}
	if (*cur == NO_BLOCK) {
		*cur = add_block(cfg);
		if (*cur == NO_BLOCK)
			return -1;
		cfg->blocks[*cur].match_all = true;
	}
	o = add_opt(&cfg->blocks[*cur]);
	if (!o)
		return -1;
	o->key = known_keys[k].key;
	if (o->key == K_PROXYCMD) {
		char *rest = strdup(line_rest(line));
		size_t n;

		if (!rest)
			return -1;
		n = strlen(rest); /* trailing blanks are not part of the command */
		while (n && (rest[n - 1] == ' ' || rest[n - 1] == '\t' || rest[n - 1] == '\r'))
			rest[--n] = '\0';
		k = (size_t)mr_strvec_push(&o->args, rest);
		free(rest);
		return (int)k;
	}
	if (mr_strvec_pushv(&o->args, w->v + 1) < 0)
		return -1;
	return mr_sshcfg_parse_value(o, w->v[1], why);
}

static int parse_text(struct mr_ssh_config *cfg, const char *text, size_t len, const char *name,
		      int depth, ssize_t *cur, struct meshrun_err *err)
{
	struct mr_strvec words = MR_STRVEC_INIT;
	char *line = NULL;
	size_t off = 0;
	unsigned lineno = 0;
	int rc = MESHRUN_E_NOMEM;

	while (off < len) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		const char *why = NULL;
		int split;

		lineno++;
		free(line);
		line = strndup(text + off, n);
		if (!line)
			goto fail_nomem;
		off += n + (nl ? 1 : 0);
		if (memchr(line, '\0', n)) {
			rc = mr_err_set(err, MESHRUN_E_PARSE, "%s:%u: NUL byte in line", name, lineno);
			goto fail;
		}
		mr_strvec_release(&words);
		split = split_line(line, &words, &why);
		if (split == 0 && words.nr && !strcasecmp(words.v[0], "include")) {
			if (words.nr < 2) {
				rc = mr_err_set(err, MESHRUN_E_PARSE, "%s:%u: Include: missing value", name, lineno);
				goto fail;
			}
			rc = parse_include(cfg, &words, name, lineno, depth, cur, err);
			if (rc < 0)
				goto fail;
			continue;
		}
		if (split < 0 || (words.nr && parse_line(cfg, cur, &words, line, &why) < 0)) {
			if (!why)
				goto fail_nomem;
			rc = mr_err_set(err, MESHRUN_E_PARSE, "%s:%u: %s: %s", name, lineno,
					words.nr ? words.v[0] : "line", why);
			goto fail;
		}
	}
	free(line);
	mr_strvec_release(&words);
	return 0;

fail_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s:%u: out of memory", name, lineno);
fail:
	free(line);
	mr_strvec_release(&words);
	return rc;
}

int mr_ssh_config_parse(struct mr_ssh_config **out, const char *text, size_t len,
			const char *name, struct meshrun_err *err)
{
	struct mr_ssh_config *cfg = calloc(1, sizeof(*cfg));
	ssize_t cur = NO_BLOCK;
	int rc;

	*out = NULL;
	if (!cfg)
		return mr_err_set(err, MESHRUN_E_NOMEM, "'%s': out of memory", name);
	rc = parse_text(cfg, text, len, name, 0, &cur, err);
	if (rc < 0) {
		mr_ssh_config_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

/* The built-in parser's part of a load: path (NULL: ~/.ssh/config, which may be
 * missing) read into cfg's blocks. */
int mr_sshcfg_load_builtin(struct mr_ssh_config *cfg, const char *path, struct meshrun_err *err)
{
	struct mr_buf text = MR_BUF_INIT;
	ssize_t cur = NO_BLOCK;
	char *def = NULL;
	int rc = 0;

	if (!path) {
		struct mr_buf b = MR_BUF_INIT;

		if (mr_buf_printf(&b, "%s/.ssh/config", mr_ssh_home()) < 0)
			return mr_err_set(err, MESHRUN_E_NOMEM, "ssh config path: out of memory");
		def = mr_buf_detach(&b, NULL);
		if (access(def, F_OK) < 0 && errno == ENOENT) {
			free(def);
			return 0; /* no file: an empty config */
		}
		path = def;
	}
	rc = mr_read_file(path, SSH_CONFIG_MAX, &text, err);
	if (rc == 0)
		rc = parse_text(cfg, text.p ? text.p : "", text.len, path, 0, &cur, err);
	mr_buf_release(&text);
	free(def);
	return rc;
}

/* A comma-separated OpenSSH pattern list: a negated hit refuses, else any hit. */
static bool list_matches(const char *list, const char *s)
{
	bool hit = false;
	const char *p = list;

	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		char pat[256];
		bool neg = *p == '!';

		if (n < sizeof(pat)) {
			memcpy(pat, p, n);
			pat[n] = '\0';
			if (mr_ssh_pattern_match(pat + neg, s)) {
				if (neg)
					return false;
				hit = true;
			}
		}
		p += n + (e ? 1 : 0);
	}
	return hit;
}

static bool block_matches(const struct cfg_block *b, const char *alias, const char *host, const char *user)
{
	bool hit = false;

	if (b->never)
		return false;
	if (b->match_all)
		return true;
	if (b->m_hosts.nr || b->m_orig.nr || b->m_users.nr) { /* Match: every criterion holds */
		for (size_t i = 0; i < b->m_hosts.nr; i++)
			if (!list_matches(b->m_hosts.v[i], host))
				return false;
		for (size_t i = 0; i < b->m_orig.nr; i++)
			if (!list_matches(b->m_orig.v[i], alias))
				return false;
		for (size_t i = 0; i < b->m_users.nr; i++)
			if (!list_matches(b->m_users.v[i], user))
				return false;
		return true;
	}
	for (size_t i = 0; i < b->patterns.nr; i++) {
		const char *p = b->patterns.v[i];

		if (p[0] == '!') {
			if (mr_ssh_pattern_match(p + 1, alias))
				return false;
		} else if (mr_ssh_pattern_match(p, alias)) {
			hit = true;
		}
	}
	return hit;
}

/* The built-in parser's view of alias (h->user: dest's user, or NULL). */
int mr_sshcfg_collect_builtin(const struct mr_ssh_config *cfg, struct mr_ssh_host_cfg *h, struct raw_opts *r)
{
	for (size_t i = 0; cfg && i < cfg->nblocks; i++) {
		const struct cfg_block *b = &cfg->blocks[i];
		const char *user = h->user ? h->user : mr_ssh_local_user();
		const char *why = NULL;
		char *host = NULL;
		bool hit;

		/* Match host sees the HostName set so far (tokens expanded), as OpenSSH does */
		if (r->hostname && !(host = mr_sshcfg_expand(r->hostname, false, h, &why)) && !why)
			return -1;
		hit = block_matches(b, h->alias, host ? host : h->alias, user);
		free(host);
		if (!hit)
			continue;
		for (size_t j = 0; j < b->nopts; j++) {
			const struct cfg_opt *o = &b->opts[j];
			const char *v = o->args.v[0];

			switch (o->key) {
			case K_HOSTNAME:
				if (!r->hostname)
					r->hostname = v;
				break;
			case K_USER:
				if (!h->user && !(h->user = strdup(v)))
					return -1;
				break;
			case K_PORT:
				if (!r->port)
					r->port = o->ival;
				break;
			case K_IDENTITY:
				if (mr_strvec_push(&r->ids, v) < 0)
					return -1;
				break;
			case K_CERT:
				if (mr_strvec_push(&r->certs, v) < 0)
					return -1;
				break;
			case K_KNOWN_HOSTS:
				if (!r->kh_set) {
					r->kh_set = true;
					if (mr_strvec_pushv(&r->kh, o->args.v) < 0)
						return -1;
				}
				break;
			case K_STRICT:
				if (!r->strict)
					r->strict = o->ival;
				break;
			case K_TIMEOUT:
				if (!r->timeout_ms)
					r->timeout_ms = o->ival;
				break;
			case K_AF:
				if (!r->have_af) {
					r->have_af = true;
					r->af = o->ival;
				}
				break;
			case K_PROXYJUMP:
				if (!r->jump && !r->cmd)
					r->jump = v;
				break;
			case K_PROXYCMD:
				if (!r->jump && !r->cmd)
					r->cmd = v;
				break;
			case K_AGENT:
				if (!r->agent)
					r->agent = v;
				break;
			case K_IDONLY:
				if (!r->have_idonly) {
					r->have_idonly = true;
					r->idonly = o->ival;
				}
				break;
			case K_NOOP:
				break;
			}
		}
	}
	return 0;
}
