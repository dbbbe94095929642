/*
 * doctor_report.c - what `meshconfig doctor` prints: one table, host by check,
 * then every problem with its fix; or the same as one JSON document (--json):
 *
 *   {"ok": false, "backend": "jaccl", "rdma": true, "seconds": 1.9,
 *    "checks": ["reach", "software", "cables", "rdma", "path", "housekeeping"],
 *    "hosts": [{"host": "m1", "ranks": [0], "reach": "ok", ..., "user": "root",
 *               "shell": "/bin/zsh", "macos": "26.2", "build": "25C56",
 *               "connect_ms": 120}, ...],
 *    "problems": [{"host": "m2", "check": "cables", "status": "fail",
 *                  "code": "no-ipv4", "what": "...", "fix": "..."}],
 *    "path_note": "..."}            (only when the path check was not run)
 * A cell is "ok", "warn", "fail" or "-" in JSON; "ok", "warn", "FAIL", "-" in
 * the table. Codes are stable (docs/guide-macs.md lists them); the texts are
 * for people.
 */
#include "common/compat.h"
#include "common/xalloc.h"
#include "config/doctor_impl.h"

#include <cjson/cJSON.h>

static const char *cell_text(enum dr_status s, bool json)
{
	switch (s) {
	case DR_OK:
		return "ok";
	case DR_WARN:
		return "warn";
	case DR_FAIL:
		return json ? "fail" : "FAIL";
	default:
		return "-";
	}
}

bool dr_any_fail(const struct doctor *d)
{
	for (size_t h = 0; h < d->nhosts; h++)
		for (int c = 0; c < DR_NCHECK; c++)
			if (d->hosts[h].st[c] == DR_FAIL)
				return true;
	return false;
}

static int report_json(const struct doctor *d, FILE *out, double seconds)
{
	cJSON *root = cJSON_CreateObject(), *checks, *hosts, *probs;
	char *text;
	int rc;

	if (!root)
		return -1;
	cJSON_AddBoolToObject(root, "ok", !dr_any_fail(d));
	cJSON_AddStringToObject(root, "backend", d->backend);
	cJSON_AddBoolToObject(root, "rdma", d->want_rdma);
	cJSON_AddNumberToObject(root, "seconds", (double)(int64_t)(seconds * 1000.0) / 1000.0);
	checks = cJSON_AddArrayToObject(root, "checks");
	for (int c = 0; c < DR_NCHECK; c++)
		cJSON_AddItemToArray(checks, cJSON_CreateString(dr_check_names[c]));
	hosts = cJSON_AddArrayToObject(root, "hosts");
	for (size_t h = 0; h < d->nhosts; h++) {
		const struct dr_host *H = &d->hosts[h];
		cJSON *o = cJSON_CreateObject(), *ranks;

		cJSON_AddItemToArray(hosts, o);
		cJSON_AddStringToObject(o, "host", H->name);
		ranks = cJSON_AddArrayToObject(o, "ranks");
		for (size_t k = 0; k < H->nranks; k++)
			cJSON_AddItemToArray(ranks, cJSON_CreateNumber((double)H->ranks[k]));
		for (int c = 0; c < DR_NCHECK; c++)
			cJSON_AddStringToObject(o, dr_check_names[c], cell_text(H->st[c], true));
		if (H->reached)
			cJSON_AddNumberToObject(o, "connect_ms", (double)H->connect_ms);
		if (H->f.ok) {
			cJSON_AddStringToObject(o, "user", H->f.user);
			cJSON_AddStringToObject(o, "shell", H->f.shell);
			cJSON_AddStringToObject(o, "os", H->f.os);
			if (H->f.macos[0]) {
				cJSON_AddStringToObject(o, "macos", H->f.macos);
				cJSON_AddStringToObject(o, "build", H->f.build);
			}
			cJSON_AddStringToObject(o, "meshrun", H->f.meshrun_version);
		}
	}
	probs = cJSON_AddArrayToObject(root, "problems");
	for (size_t i = 0; i < d->nfinds; i++) {
		const struct dr_finding *f = &d->finds[i];
		cJSON *o = cJSON_CreateObject();

		cJSON_AddItemToArray(probs, o);
		cJSON_AddStringToObject(o, "host", d->hosts[f->host].name);
		cJSON_AddStringToObject(o, "check", dr_check_names[f->check]);
		cJSON_AddStringToObject(o, "status", cell_text(f->status, true));
		cJSON_AddStringToObject(o, "code", f->code);
		cJSON_AddStringToObject(o, "what", f->what);
		if (f->fix)
			cJSON_AddStringToObject(o, "fix", f->fix);
		else
			cJSON_AddNullToObject(o, "fix");
	}
	if (d->path_note[0])
		cJSON_AddStringToObject(root, "path_note", d->path_note);
	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (!text)
		return -1;
	rc = fprintf(out, "%s\n", text) < 0 || fflush(out) != 0 ? -1 : 0;
	cJSON_free(text);
	return rc;
}

/* The same problem (check, status, code, text and fix) on another host. */
static bool same(const struct dr_finding *a, const struct dr_finding *b)
{
	return a->host != b->host && a->check == b->check && a->status == b->status &&
	       !strcmp(a->code, b->code) && !strcmp(a->what, b->what) &&
	       (a->fix && b->fix ? !strcmp(a->fix, b->fix) : a->fix == b->fix);
}

/* Whether finding i was printed already with an earlier host's. */
static bool same_earlier(const struct doctor *d, size_t i)
{
	for (size_t k = 0; k < d->nfinds; k++)
		if (d->finds[k].host < d->finds[i].host && same(&d->finds[k], &d->finds[i]))
			return true;
	return false;
}

static int report_text(const struct doctor *d, FILE *out, double seconds)
{
	size_t wname = 4, nfail = 0, nwarn = 0;
	char failing[256] = "";

	for (size_t h = 0; h < d->nhosts; h++)
		wname = MR_MAX(wname, strlen(d->hosts[h].name));
	wname = MR_MIN(wname, (size_t)40);
	fprintf(out, "%-*s", (int)wname + 2, "HOST");
	for (int c = 0; c < DR_NCHECK; c++)
		fprintf(out, c + 1 < DR_NCHECK ? "%-10s" : "%s", dr_check_names[c]);
	fputc('\n', out);
	for (size_t h = 0; h < d->nhosts; h++) {
		const struct dr_host *H = &d->hosts[h];
		bool bad = false;

		fprintf(out, "%-*.*s", (int)wname + 2, (int)wname, H->name);
		for (int c = 0; c < DR_NCHECK; c++) {
			fprintf(out, c + 1 < DR_NCHECK ? "%-10s" : "%s", cell_text(H->st[c], false));
			bad |= H->st[c] == DR_FAIL;
		}
		fputc('\n', out);
		if (bad && nfail++ < 8)
			snprintf(failing + strlen(failing), sizeof(failing) - strlen(failing), "%s%s",
				 nfail > 1 ? ", " : "", H->name);
	}
	/* the failures first, then the warnings, each in host order; the same
	 * problem on several hosts is one entry naming them all */
	if (d->nfinds)
		fputc('\n', out);
	for (int pass = 0; pass < 2; pass++)
		for (size_t h = 0; h < d->nhosts; h++)
			for (size_t i = 0; i < d->nfinds; i++) {
				const struct dr_finding *f = &d->finds[i];
				size_t n = 0;

				if (f->host != h || (f->status == DR_FAIL) != (pass == 0) || same_earlier(d, i))
					continue;
				for (size_t k = i; k < d->nfinds; k++)
					if (k == i || same(f, &d->finds[k]))
						fprintf(out, "%s%s", n++ ? ", " : "", d->hosts[d->finds[k].host].name);
				fprintf(out, " %s %s: %s\n", dr_check_names[f->check],
					f->status == DR_FAIL ? "FAIL" : "warn", f->what);
				if (f->fix)
					fprintf(out, "    fix: %s\n", f->fix);
				nwarn += f->status == DR_WARN;
			}
	fputc('\n', out);
	if (d->path_note[0])
		fprintf(out, "path: %s\n", d->path_note);
	if (nfail)
		fprintf(out, "%zu of %zu host%s cannot run the job yet: %s%s (%.1f s)\n", nfail, d->nhosts,
			d->nhosts == 1 ? "" : "s", failing, nfail > 8 ? ", ..." : "", seconds);
	else
		fprintf(out, "all %zu host%s ready for backend %s%s (%.1f s)\n", d->nhosts,
			d->nhosts == 1 ? "" : "s", d->backend,
			nwarn ? ", with warnings" : "", seconds);
	return fflush(out) != 0 || ferror(out) ? -1 : 0;
}

int dr_report(const struct doctor *d, FILE *out, bool json, double seconds)
{
	return json ? report_json(d, out, seconds) : report_text(d, out, seconds);
}
