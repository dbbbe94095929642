#include "common/compat.h"
#include "common/array.h"
#include "hal/ssh_config.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/num.h"
#include "common/shquote.h"
#include "common/spawn.h"
#include "common/port.h"
#include "common/timeutil.h"

#include <ctype.h>
#include <glob.h>
#include <libssh2.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SSH_CONFIG_MAX (4u << 20)  /* a bigger ssh_config is not a config */
#define INCLUDE_DEPTH_MAX 16       /* OpenSSH's READCONF_MAX_DEPTH */
#define SSH_G_PARALLEL 32          /* `ssh -G` processes at once */
#define SSH_G_TIMEOUT_MS 10000     /* Match exec may run anything: do not wait forever */
#define SSH_G_OUT_MAX (1u << 20)

enum opt_key {
	K_HOSTNAME,
	K_USER,
	K_PORT,
	K_IDENTITY,
	K_KNOWN_HOSTS,
	K_STRICT,
	K_TIMEOUT,
	K_CERT,
	K_AF,
	K_PROXYJUMP,
	K_PROXYCMD,
	K_AGENT,
	K_IDONLY,
	K_NOOP,     /* understood, no effect for us */
};

struct cfg_opt {
	enum opt_key key;
	struct mr_strvec args; /* one value, or several for UserKnownHostsFile */
	int ival;              /* parsed Port, StrictHostKeyChecking, ConnectTimeout */
};

struct cfg_block {
	struct mr_strvec patterns; /* empty with match_all: applies to everyone */
	struct mr_strvec m_hosts;  /* Match host (comma lists, one entry per criterion) */
	struct mr_strvec m_orig;   /* Match originalhost */
	struct mr_strvec m_users;  /* Match user */
	bool match_all;
	bool never;                /* a Match block with an unsupported criterion */
	struct cfg_opt *opts;
	size_t nopts, alloc;
};

/* One `ssh -G` result: its output, or why it failed. */
struct g_entry {
	char *dest;
	char *text;
	struct meshrun_err err;
	bool done;
	bool no_g;  /* ssh refused -G as an unknown option: OpenSSH before 6.8 */
};

struct mr_ssh_config {
	struct cfg_block *blocks;
	size_t nblocks, alloc;
	struct mr_strvec unsupported; /* built-in parser: directives it skipped */
	char *unsupported_str;
	char *ssh_bin;                /* `ssh -G` resolves; NULL: the blocks above */
	char *file;                   /* its -F FILE, NULL: ssh's defaults */
	bool fell_back;               /* ssh had no -G: the blocks were read after all */
	struct g_entry *g;
	size_t ng, g_alloc;
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
	return parse_value(o, w->v[1], why);
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

/* The built-in parser's part of a load: path (NULL: ~/.ssh/config, which may be
 * missing) read into cfg's blocks. */
static int load_builtin(struct mr_ssh_config *cfg, const char *path, struct meshrun_err *err)
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
		rc = load_builtin(cfg, path, err);
	if (rc < 0) {
		mr_ssh_config_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
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

/* Expand ~ at the start (paths only) and %-tokens. NULL on error, with *why
 * saying what is wrong with v, or left NULL when memory ran out. */
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

/* Values as written (first one wins), before tokens are expanded. */
struct raw_opts {
	const char *hostname, *jump, *cmd, *agent;
	struct mr_strvec ids, certs, kh;
	int port, strict, timeout_ms, af, idonly;
	bool have_af, have_idonly, kh_set, gssapi;
	const char *pkcs11;
};

static void raw_release(struct raw_opts *r)
{
	mr_strvec_release(&r->ids);
	mr_strvec_release(&r->certs);
	mr_strvec_release(&r->kh);
}

/* The built-in parser's view of alias (h->user: dest's user, or NULL). */
static int collect_builtin(const struct mr_ssh_config *cfg, struct mr_ssh_host_cfg *h, struct raw_opts *r)
{
	for (size_t i = 0; cfg && i < cfg->nblocks; i++) {
		const struct cfg_block *b = &cfg->blocks[i];
		const char *user = h->user ? h->user : mr_ssh_local_user();
		const char *why = NULL;
		char *host = NULL;
		bool hit;

		/* Match host sees the HostName set so far (tokens expanded), as OpenSSH does */
		if (r->hostname && !(host = expand(r->hostname, false, h, &why)) && !why)
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

/* `ssh -G`'s lines ("key value", keys in lower case) into r; values point into text. */
static int collect_g(char *text, struct mr_ssh_host_cfg *h, struct raw_opts *r, const char **why)
{
	for (char *line = text, *next; line && *line; line = next) {
		char *v;
		struct cfg_opt o;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		v = strchr(line, ' ');
		if (!v)
			continue;
		*v++ = '\0';
		memset(&o, 0, sizeof(o));
		if (!strcmp(line, "hostname")) {
			r->hostname = v;
		} else if (!strcmp(line, "user")) {
			if (!h->user && !(h->user = strdup(v)))
				return -1;
		} else if (!strcmp(line, "port")) {
			o.key = K_PORT;
			if (parse_value(&o, v, why) < 0)
				return -1;
			r->port = o.ival;
		} else if (!strcmp(line, "identityfile")) {
			if (mr_strvec_push(&r->ids, v) < 0)
				return -1;
		} else if (!strcmp(line, "certificatefile")) {
			if (mr_strvec_push(&r->certs, v) < 0)
				return -1;
		} else if (!strcmp(line, "userknownhostsfile")) {
			r->kh_set = true;
			if (mr_strvec_split(&r->kh, v, ' ', true) < 0)
				return -1;
		} else if (!strcmp(line, "stricthostkeychecking") || !strcmp(line, "connecttimeout") ||
			   !strcmp(line, "addressfamily") || !strcmp(line, "identitiesonly")) {
			o.key = line[0] == 's' ? K_STRICT : line[0] == 'c' ? K_TIMEOUT : line[0] == 'a' ? K_AF : K_IDONLY;
			if (parse_value(&o, v, why) < 0)
				return -1;
			if (o.key == K_STRICT)
				r->strict = o.ival;
			else if (o.key == K_TIMEOUT)
				r->timeout_ms = o.ival;
			else if (o.key == K_AF)
				r->af = o.ival;
			else
				r->idonly = o.ival;
		} else if (!strcmp(line, "proxyjump")) {
			r->jump = v;
		} else if (!strcmp(line, "proxycommand")) {
			r->cmd = v;
		} else if (!strcmp(line, "identityagent")) {
			r->agent = v;
		} else if (!strcmp(line, "gssapiauthentication")) {
			r->gssapi = !strcmp(v, "yes") || !strcmp(v, "true");
		} else if (!strcmp(line, "pkcs11provider")) {
			r->pkcs11 = v;
		}
	}
	return 0;
}

static int push_expanded(struct mr_strvec *v, const char *raw, bool path, const struct mr_ssh_host_cfg *h,
			 const char **why)
{
	char *p = expand(raw, path, h, why);
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
	h->hostname = expand(r->hostname ? r->hostname : h->alias, false, h, why);
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
		h->proxy_command = expand(r->cmd, false, h, why);
		if (!h->proxy_command)
			return -1;
	}
	if (r->agent) {
		if (!strcasecmp(r->agent, "none")) {
			h->identity_agent_none = true;
		} else if (strcmp(r->agent, "SSH_AUTH_SOCK")) {
			const char *v = r->agent[0] == '$' ? getenv(r->agent + 1) : NULL;

			h->identity_agent = v ? strdup(v) : r->agent[0] == '$' ? NULL : expand(r->agent, true, h, why);
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

static struct g_entry *g_find(struct mr_ssh_config *cfg, const char *dest)
{
	for (size_t i = 0; i < cfg->ng; i++)
		if (!strcmp(cfg->g[i].dest, dest))
			return &cfg->g[i];
	return NULL;
}

/* Appends an entry for dest; returns its index, or -1 when out of memory. */
static ssize_t g_add(struct mr_ssh_config *cfg, const char *dest)
{
	struct g_entry *ng = mr_array_grow(cfg->g, cfg->ng + 1, &cfg->g_alloc, sizeof(*ng));

	if (!ng)
		return -1;
	cfg->g = ng;
	memset(&cfg->g[cfg->ng], 0, sizeof(cfg->g[0]));
	if (!(cfg->g[cfg->ng].dest = strdup(dest)))
		return -1;
	return (ssize_t)cfg->ng++;
}

/*
 * One `ssh -G` in flight. It names its entry by index, not pointer: g_add for the
 * next destination may move cfg->g while earlier runs are still being collected.
 */
struct g_run {
	size_t e;
	pid_t pid;
	int fd[2];             /* stdout, stderr (read ends); -1 when closed */
	struct mr_buf out, err;
};

/* Start `ssh -G [-F FILE] DEST` for e (a failure goes into e->err). */
static void g_start(struct mr_ssh_config *cfg, struct g_run *r)
{
	struct g_entry *e = &cfg->g[r->e];
	char *argv[6];
	size_t a = 0;
	struct mr_spawn_opts so;
	int fds[3];

	r->pid = -1;
	r->fd[0] = r->fd[1] = -1;
	argv[a++] = (char *)"ssh";
	argv[a++] = (char *)"-G";
	if (cfg->file) {
		argv[a++] = (char *)"-F";
		argv[a++] = cfg->file;
	}
	argv[a++] = e->dest; /* validated by mr_ssh_dest_split: no leading '-' */
	argv[a] = NULL;
	memset(&so, 0, sizeof(so));
	so.file = cfg->ssh_bin;
	so.argv = argv;
	so.what = "ssh -G";
	if (mr_spawn_piped(&so, false, &r->pid, fds, &e->err) < 0) {
		r->pid = -1;
		e->done = true;
		return;
	}
	r->fd[0] = fds[1];
	r->fd[1] = fds[2];
}

/* Collect every started run's output and exit (they run at the same time). */
static void g_collect(struct mr_ssh_config *cfg, struct g_run *runs, size_t n)
{
	int64_t end = mr_now_ms() + SSH_G_TIMEOUT_MS;
	struct pollfd pfd[2 * SSH_G_PARALLEL];
	struct g_run *who[2 * SSH_G_PARALLEL];
	int which[2 * SSH_G_PARALLEL];

	for (;;) {
		nfds_t np = 0;
		int rc;

		for (size_t i = 0; i < n; i++)
			for (int k = 0; k < 2; k++)
				if (runs[i].fd[k] >= 0) {
					pfd[np].fd = runs[i].fd[k];
					pfd[np].events = POLLIN;
					who[np] = &runs[i];
					which[np++] = k;
				}
		if (!np || mr_now_ms() >= end)
			break;
		rc = poll(pfd, np, mr_ms_left(end));
		if (rc < 0 && errno != EINTR)
			break;
		for (nfds_t i = 0; rc > 0 && i < np; i++) {
			struct g_run *r = who[i];
			struct mr_buf *b = which[i] ? &r->err : &r->out;
			char buf[8192];
			ssize_t got;

			if (!pfd[i].revents)
				continue;
			got = read(pfd[i].fd, buf, sizeof(buf));
			if (got > 0 && b->len < SSH_G_OUT_MAX)
				mr_buf_append(b, buf, (size_t)got);
			else if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN))
				mr_close(&r->fd[which[i]]);
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct g_run *r = &runs[i];
		struct g_entry *e = &cfg->g[r->e];
		int status = 0;
		bool late = r->fd[0] >= 0 || r->fd[1] >= 0;

		mr_close(&r->fd[0]);
		mr_close(&r->fd[1]);
		if (r->pid > 0) {
			if (late)
				kill(r->pid, SIGKILL);
			while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
				;
		}
		if (e->done) {
			/* failed to start: e->err holds why */
		} else if (late) {
			mr_err_set(&e->err, MESHRUN_E_TIMEOUT, "ssh -G for '%s': no answer within %d ms "
				   "(a 'Match exec' that hangs?)", e->dest, SSH_G_TIMEOUT_MS);
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			const char *m = mr_buf_cstr(&r->err);
			int len = (int)strcspn(m, "\n");

			/* getopt's words: "unknown" (OpenSSH's own), "illegal" (BSD), "invalid" (glibc) */
			e->no_g = strstr(m, "option -- G") || strstr(m, "option -- 'G'");

			mr_err_set(&e->err, MESHRUN_E_PARSE, "ssh -G for '%s' failed%s%.*s", e->dest,
				   len ? ": " : "", len, m);
		} else if (!(e->text = mr_buf_detach(&r->out, NULL))) {
			mr_err_set(&e->err, MESHRUN_E_NOMEM, "ssh -G for '%s': out of memory", e->dest);
		}
		e->done = true;
		mr_buf_release(&r->out);
		mr_buf_release(&r->err);
	}
}

void mr_ssh_config_prefetch(struct mr_ssh_config *cfg, const char *const *dests, size_t n)
{
	struct g_run runs[SSH_G_PARALLEL];
	size_t i = 0;

	if (!cfg || !cfg->ssh_bin)
		return;
	while (i < n) {
		size_t k = 0;

		memset(runs, 0, sizeof(runs));
		for (; i < n && k < SSH_G_PARALLEL; i++) {
			struct meshrun_err e = MESHRUN_ERR_INIT;
			ssize_t idx;

			if (mr_ssh_dest_split(dests[i], NULL, NULL, &e) < 0 || g_find(cfg, dests[i]))
				continue; /* the lookup reports a bad destination */
			idx = g_add(cfg, dests[i]);
			if (idx < 0) {
				i = n; /* out of memory: the lookups try one by one */
				break;
			}
			runs[k].e = (size_t)idx;
			g_start(cfg, &runs[k]);
			k++;
		}
		g_collect(cfg, runs, k);
	}
}

/*
 * OpenSSH before 6.8 has no -G: the built-in parser reads the config instead, from
 * now on, said once (with what it skips). The cached answers go (all failures).
 */
static int fall_back_builtin(struct mr_ssh_config *cfg, struct meshrun_err *err)
{
	int rc = load_builtin(cfg, cfg->file, err);

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
		if (collect_g(gtext, &h, &r, &why) < 0)
			goto fail_why;
	} else if (cfg && cfg->ssh_bin) {
		struct g_entry *e = g_find(cfg, dest);

		if (!e) {
			mr_ssh_config_prefetch(cfg, &dest, 1);
			e = g_find(cfg, dest);
		}
		if (!e)
			goto nomem;
		if (!e->text && e->no_g) {
			rc = fall_back_builtin(cfg, err);
			if (rc < 0)
				goto out;
			if (collect_builtin(cfg, &h, &r) < 0)
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
		if (collect_g(gtext, &h, &r, &why) < 0)
			goto fail_why;
	} else if (collect_builtin(cfg, &h, &r) < 0) {
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
