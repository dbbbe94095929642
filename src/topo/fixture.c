/*
 * fixture.c - load fixtures/<cluster>/ (layout in fixtures/README.md).
 */
#include "common/compat.h"

#include <sys/stat.h>

#include "common/err.h"
#include "common/fdio.h"
#include "common/json.h"
#include "common/shquote.h"
#include "topo/topo.h"

#define FIXTURE_FILE_MAX (16u << 20)

void mr_topo_fixture_free(struct mr_topo_fixture *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nhosts; i++) {
		free(f->hosts[i].name);
		free(f->hosts[i].en0);
		free(f->hosts[i].sp_json);
		free(f->hosts[i].hwports);
		free(f->hosts[i].ibv);
	}
	free(f->hosts);
	free(f->dir);
	cJSON_Delete(f->json);
	mr_topo_cluster_free(f->cluster);
	free(f);
}

/* Read dir/host/file into *out (NUL-terminated); optional files that do not
 * exist leave *out NULL. */
static int read_part(const char *dir, const char *host, const char *file, bool optional,
		     char **out, size_t *len, struct meshrun_err *err)
{
	struct mr_buf b = MR_BUF_INIT;
	char path[4096];
	struct stat st;
	int rc;

	*out = NULL;
	snprintf(path, sizeof(path), "%s/%s/%s", dir, host, file);
	if (optional && stat(path, &st) < 0 && errno == ENOENT)
		return 0;
	rc = mr_read_file(path, FIXTURE_FILE_MAX, &b, err);
	if (rc < 0) {
		mr_buf_release(&b);
		return rc;
	}
	if (len)
		*len = b.len;
	*out = mr_buf_detach(&b, NULL);
	if (!*out)
		*out = strdup("");
	if (!*out)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	return 0;
}

int mr_topo_fixture_load(const char *dir, struct mr_topo_fixture **out, struct meshrun_err *err)
{
	struct mr_topo_fixture *f = calloc(1, sizeof(*f));
	struct mr_json_path path = MR_JSON_PATH_INIT;
	struct mr_buf text = MR_BUF_INIT;
	char jpath[4096];
	const cJSON *hosts, *h;
	size_t i = 0;
	int rc;

	*out = NULL;
	if (!f)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	f->dir = strdup(dir);
	f->cluster = mr_topo_cluster_new();
	if (!f->dir || !f->cluster) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
		goto out;
	}
	snprintf(jpath, sizeof(jpath), "%s/cluster.json", dir);
	rc = mr_read_file(jpath, FIXTURE_FILE_MAX, &text, err);
	if (rc < 0)
		goto out;
	rc = mr_json_parse(mr_buf_cstr(&text), text.len, jpath, &f->json, err);
	if (rc < 0)
		goto out;
	rc = MESHRUN_E_PARSE;
	if (mr_json_want_object(f->json, jpath, &path, err) < 0)
		goto out;
	hosts = mr_json_member(f->json, "hosts");
	if (!hosts) {
		mr_json_missing(err, jpath, &path, "hosts");
		goto out;
	}
	mr_json_path_key(&path, "hosts");
	if (mr_json_want_array(hosts, jpath, &path, err) < 0)
		goto out;
	f->hosts = calloc((size_t)cJSON_GetArraySize(hosts) + 1, sizeof(*f->hosts));
	if (!f->hosts) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(h, hosts) {
		struct mr_topo_fixture_host *fh = &f->hosts[f->nhosts];
		const cJSON *v;
		const char *s;

		mr_json_path_index(&path, i++);
		rc = MESHRUN_E_PARSE;
		if (mr_json_want_object(h, jpath, &path, err) < 0)
			goto out;
		v = mr_json_member(h, "name");
		if (!v) {
			mr_json_missing(err, jpath, &path, "name");
			goto out;
		}
		mr_json_path_key(&path, "name");
		if (mr_json_want_string(v, jpath, &path, &s, err) < 0)
			goto out;
		if (!mr_is_hostname(s) || strchr(s, '/') || s[0] == '.') {
			mr_json_err(err, jpath, &path, "invalid host name '%.64s'", s);
			goto out;
		}
		mr_json_path_pop(&path);
		for (size_t k = 0; k < f->nhosts; k++)
			if (!strcmp(f->hosts[k].name, s)) {
				mr_json_err(err, jpath, &path, "host '%s' is listed twice", s);
				goto out;
			}
		fh->name = strdup(s);
		f->nhosts++;
		if (!fh->name) {
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
			goto out;
		}
		v = mr_json_member(h, "en0");
		if (v) {
			mr_json_path_key(&path, "en0");
			if (mr_json_want_string(v, jpath, &path, &s, err) < 0)
				goto out;
			if (!mr_is_ip(s)) {
				mr_json_err(err, jpath, &path, "not an IP address: '%.64s'", s);
				goto out;
			}
			mr_json_path_pop(&path);
			fh->en0 = strdup(s);
			if (!fh->en0) {
				rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
				goto out;
			}
		}
		v = mr_json_member(h, "sudo");
		if (v) {
			if (!cJSON_IsBool(v)) {
				mr_json_path_key(&path, "sudo");
				mr_json_err(err, jpath, &path, "expected a bool, got %s",
					    mr_json_type_name(v));
				goto out;
			}
			fh->nosudo = cJSON_IsFalse(v);
		}
		mr_json_path_pop(&path);

		rc = read_part(dir, fh->name, "system_profiler.json", false, &fh->sp_json,
			       &fh->sp_len, err);
		if (rc == 0)
			rc = read_part(dir, fh->name, "networksetup.txt", false, &fh->hwports, NULL, err);
		if (rc == 0)
			rc = read_part(dir, fh->name, "ibv_devices.txt", true, &fh->ibv, NULL, err);
		if (rc == 0)
			rc = mr_topo_cluster_add_host(f->cluster, fh->name, fh->sp_json, fh->sp_len,
						      fh->hwports, fh->ibv, err);
		if (rc < 0)
			goto out;
	}
	rc = mr_topo_cluster_finish(f->cluster, err);
	if (rc < 0)
		goto out;
	*out = f;
	f = NULL;
out:
	if (rc < 0)
		mr_err_prefix(err, "fixture '%s'", dir);
	mr_buf_release(&text);
	mr_topo_fixture_free(f);
	return rc;
}
