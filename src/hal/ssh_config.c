#include "common/compat.h"
#include "common/array.h"
#include "hal/ssh_config.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/num.h"
#include "common/shquote.h"

#include <ctype.h>
#include <pwd.h>
#include <strings.h>
#include <unistd.h>

#define SSH_CONFIG_MAX (4u << 20)  /* a bigger ssh_config is not a config */

enum opt_key {
	K_HOSTNAME,
	K_USER,
	K_PORT,
	K_IDENTITY,
	K_KNOWN_HOSTS,
	K_STRICT,
	K_TIMEOUT,
};

struct cfg_opt {
	enum opt_key key;
	struct mr_strvec args; /* one value, or several for UserKnownHostsFile */
	int ival;              /* parsed Port, StrictHostKeyChecking, ConnectTimeout */
};

struct cfg_block {
	struct mr_strvec patterns; /* empty with match_all: applies to everyone */
	bool match_all;
	bool never;                /* an unsupported Match block */
	struct cfg_opt *opts;
	size_t nopts, alloc;
};

struct mr_ssh_config {
	struct cfg_block *blocks;
	size_t nblocks, alloc;
};

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
}

void mr_ssh_config_free(struct mr_ssh_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->nblocks; i++)
		block_release(&cfg->blocks[i]);
	free(cfg->blocks);
	free(cfg);
}

static struct cfg_block *add_block(struct mr_ssh_config *cfg)
{
	struct cfg_block *nb = mr_array_grow(cfg->blocks, cfg->nblocks + 1, &cfg->alloc, sizeof(*nb));

	if (!nb)
		return NULL;
	cfg->blocks = nb;
	memset(&cfg->blocks[cfg->nblocks], 0, sizeof(cfg->blocks[0]));
	return &cfg->blocks[cfg->nblocks++];
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
 * (or around) whitespace. Returns 0, or -1 for an unterminated quote.
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
	if (rc < 0 && !*why)
		*why = "out of memory";
	mr_buf_release(&w);
	return rc;
}

static int parse_value(struct cfg_opt *o, const char *v, const char **why)
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
		if (!strcasecmp(v, "yes") || !strcasecmp(v, "ask"))
			o->ival = MR_SSH_STRICT_YES;
		else if (!strcasecmp(v, "accept-new"))
			o->ival = MR_SSH_STRICT_ACCEPT_NEW;
		else if (!strcasecmp(v, "no") || !strcasecmp(v, "off"))
			o->ival = MR_SSH_STRICT_NO;
		else {
			*why = "bad StrictHostKeyChecking (expected yes, no, accept-new)";
			return -1;
		}
		break;
	case K_TIMEOUT:
		if (mr_parse_duration_ms(v, INT32_MAX, &ms) < 0 || ms <= 0) {
			*why = "bad ConnectTimeout (expected seconds)";
			return -1;
		}
		o->ival = (int)ms;
		break;
	default:
		break;
	}
	return 0;
}

static int parse_line(struct mr_ssh_config *cfg, struct cfg_block **cur, struct mr_strvec *w,
		      const char **why)
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
		if (!*cur || mr_strvec_pushv(&(*cur)->patterns, w->v + 1) < 0)
			return -1;
		return 0;
	}
	if (!strcasecmp(key, "match")) {
		*cur = add_block(cfg);
		if (!*cur)
			return -1;
		if (w->nr == 2 && !strcasecmp(w->v[1], "all"))
			(*cur)->match_all = true;
		else
			(*cur)->never = true;
		return 0;
	}
	for (k = 0; k < ARRAY_SIZE(known_keys); k++)
		if (!strcasecmp(key, known_keys[k].name))
			break;
	if (k == ARRAY_SIZE(known_keys))
		return 0; /* unknown keys are ignored, as the contract says */
	if (w->nr < 2) {
		*why = "missing value";
		return -1;
	}
	if (w->nr > 2 && !known_keys[k].multi) {
		*why = "garbage at end of line";
		return -1;
	}
	if (!*cur) {
		*cur = add_block(cfg);
		if (!*cur)
			return -1;
		(*cur)->match_all = true;
	}
	o = add_opt(*cur);
	if (!o)
		return -1;
	o->key = known_keys[k].key;
	if (mr_strvec_pushv(&o->args, w->v + 1) < 0)
		return -1;
	return parse_value(o, w->v[1], why);
}

int mr_ssh_config_parse(struct mr_ssh_config **out, const char *text, size_t len,
			const char *name, struct meshrun_err *err)
{
	struct mr_ssh_config *cfg = calloc(1, sizeof(*cfg));
	struct cfg_block *cur = NULL;
	struct mr_strvec words = MR_STRVEC_INIT;
	char *line = NULL;
	size_t off = 0;
	unsigned lineno = 0;
	int rc = MESHRUN_E_NOMEM;

	*out = NULL;
	if (!cfg)
		return mr_err_set(err, MESHRUN_E_NOMEM, "'%s': out of memory", name);
	while (off < len) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		const char *why = NULL;

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
		if (split_line(line, &words, &why) < 0 || (words.nr && parse_line(cfg, &cur, &words, &why) < 0)) {
			if (!why)
				goto fail_nomem;
			rc = mr_err_set(err, MESHRUN_E_PARSE, "%s:%u: %s: %s", name, lineno,
					words.nr ? words.v[0] : "line", why);
			goto fail;
		}
	}
	free(line);
	mr_strvec_release(&words);
	*out = cfg;
	return 0;

fail_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s:%u: out of memory", name, lineno);
fail:
	free(line);
	mr_strvec_release(&words);
	mr_ssh_config_free(cfg);
	return rc;
}

int mr_ssh_config_load(struct mr_ssh_config **out, const char *path, struct meshrun_err *err)
{
	struct mr_buf text = MR_BUF_INIT;
	char *def = NULL;
	const char *env = getenv("MESHRUN_SSH_CONFIG");
	bool must_exist = true;
	int rc;

	*out = NULL;
	if (!path && env && *env)
		path = env;
	if (!path) {
		struct mr_buf b = MR_BUF_INIT;

		if (mr_buf_printf(&b, "%s/.ssh/config", mr_ssh_home()) < 0)
			return mr_err_set(err, MESHRUN_E_NOMEM, "ssh config path: out of memory");
		def = mr_buf_detach(&b, NULL);
		path = def;
		must_exist = false;
	}
	if (!must_exist && access(path, F_OK) < 0 && errno == ENOENT) {
		free(def);
		return mr_ssh_config_parse(out, "", 0, "(none)", err);
	}
	rc = mr_read_file(path, SSH_CONFIG_MAX, &text, err);
	if (rc == 0)
		rc = mr_ssh_config_parse(out, text.p ? text.p : "", text.len, path, err);
	mr_buf_release(&text);
	free(def);
	return rc;
}

static bool block_matches(const struct cfg_block *b, const char *alias)
{
	bool hit = false;

	if (b->never)
		return false;
	if (b->match_all)
		return true;
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

/* Expand ~ at the start (paths only) and %-tokens. NULL with *why on error. */
static char *expand(const char *v, bool path, const struct mr_ssh_host_cfg *h, const char **why)
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
	*why = "out of memory";
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
	mr_strvec_release(&h->identity_files);
	mr_strvec_release(&h->known_hosts);
	*h = (struct mr_ssh_host_cfg)MR_SSH_HOST_CFG_INIT;
}

int mr_ssh_config_lookup(const struct mr_ssh_config *cfg, const char *dest,
			 struct mr_ssh_host_cfg *out, struct meshrun_err *err)
{
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	/* Raw values first (first one wins), expanded once User and HostName are known. */
	const char *hostname = NULL;
	struct mr_strvec ids = MR_STRVEC_INIT;
	const struct mr_strvec *kh = NULL;
	const char *why = NULL;
	int rc = MESHRUN_E_NOMEM;

	*out = h;
	rc = mr_ssh_dest_split(dest, &h.user, &h.alias, err);
	if (rc < 0)
		return rc;
	rc = MESHRUN_E_NOMEM;
	h.user_from_dest = h.user != NULL;
	const char *alias = h.alias;
	h.dest = strdup(dest);
	if (!h.dest)
		goto fail;
	for (size_t i = 0; cfg && i < cfg->nblocks; i++) {
		const struct cfg_block *b = &cfg->blocks[i];

		if (!block_matches(b, alias))
			continue;
		for (size_t j = 0; j < b->nopts; j++) {
			const struct cfg_opt *o = &b->opts[j];

			switch (o->key) {
			case K_HOSTNAME:
				if (!hostname)
					hostname = o->args.v[0];
				break;
			case K_USER:
				if (!h.user && !(h.user = strdup(o->args.v[0])))
					goto fail;
				break;
			case K_PORT:
				if (!h.port)
					h.port = o->ival;
				break;
			case K_IDENTITY:
				if (mr_strvec_push(&ids, o->args.v[0]) < 0)
					goto fail;
				break;
			case K_KNOWN_HOSTS:
				if (!kh)
					kh = &o->args;
				break;
			case K_STRICT:
				if (!h.strict)
					h.strict = (enum mr_ssh_strict)o->ival;
				break;
			case K_TIMEOUT:
				if (!h.connect_timeout_ms)
					h.connect_timeout_ms = o->ival;
				break;
			}
		}
	}
	h.hostname = expand(hostname ? hostname : alias, false, &h, &why);
	if (!h.hostname)
		goto fail_why;
	for (size_t i = 0; i < ids.nr; i++) {
		char *p = expand(ids.v[i], true, &h, &why);

		if (!p)
			goto fail_why;
		rc = mr_strvec_push(&h.identity_files, p);
		free(p);
		if (rc < 0) {
			rc = MESHRUN_E_NOMEM;
			goto fail;
		}
	}
	if (kh && kh->nr == 1 && !strcasecmp(kh->v[0], "none")) {
		h.known_hosts_none = true;
	} else {
		for (size_t i = 0; kh && i < kh->nr; i++) {
			char *p = expand(kh->v[i], true, &h, &why);

			if (!p)
				goto fail_why;
			rc = mr_strvec_push(&h.known_hosts, p);
			free(p);
			if (rc < 0) {
				rc = MESHRUN_E_NOMEM;
				goto fail;
			}
		}
	}
	mr_strvec_release(&ids);
	*out = h;
	return 0;

fail_why:
	rc = mr_err_set(err, !strcmp(why, "out of memory") ? MESHRUN_E_NOMEM : MESHRUN_E_PARSE,
			"ssh config for '%s': %s", dest, why);
	goto out;
fail:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "ssh config for '%s': out of memory", dest);
out:
	mr_strvec_release(&ids);
	mr_ssh_host_cfg_release(&h);
	return rc;
}
