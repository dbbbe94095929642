/* ssh_hostkey.c - known_hosts handling of the ssh backend; see ssh_hostkey.h. */
#include "common/compat.h"
#include "hal/libssh2/ssh_hostkey.h"
#include "hal/hal.h"

#include "common/buf.h"

#include <fcntl.h>
#include <unistd.h>

static void b64_nopad(const unsigned char *in, size_t n, char *out, size_t outsz)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n && o + 5 < outsz; i += 3) {
		unsigned v = (unsigned)in[i] << 16;

		if (i + 1 < n)
			v |= (unsigned)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		out[o++] = tab[(v >> 18) & 63];
		out[o++] = tab[(v >> 12) & 63];
		if (i + 1 < n)
			out[o++] = tab[(v >> 6) & 63];
		if (i + 2 < n)
			out[o++] = tab[v & 63];
	}
	out[o] = '\0';
}

void mr_ssh_hostkey_prefer(const struct mr_ssh_hostkey *k)
{
	static const struct {
		int bit;
		const char *alg;
		size_t keylen;
	} types[] = {
		{ LIBSSH2_KNOWNHOST_KEY_ED25519, "ssh-ed25519", 51 },
		{ LIBSSH2_KNOWNHOST_KEY_ECDSA_256, "ecdsa-sha2-nistp256", 104 },
		{ LIBSSH2_KNOWNHOST_KEY_ECDSA_384, "ecdsa-sha2-nistp384", 136 },
		{ LIBSSH2_KNOWNHOST_KEY_ECDSA_521, "ecdsa-sha2-nistp521", 172 },
		{ LIBSSH2_KNOWNHOST_KEY_SSHRSA, "ssh-rsa", 279 },
	};
	unsigned char dummy[512];
	struct mr_buf known = MR_BUF_INIT, rest = MR_BUF_INIT;

	/*
	 * Which key types does known_hosts hold for this host? Check a key that
	 * cannot match: MISMATCH means an entry of that type exists (this also
	 * works for hashed host names, which we could not match ourselves).
	 */
	memset(dummy, 0xA5, sizeof(dummy));
	for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
		int mask = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | types[i].bit;
		bool have = false;

		if (k->kh) {
			have = libssh2_knownhost_checkp(k->kh, k->hostname, k->port, (char *)dummy,
							types[i].keylen, mask, NULL) ==
			       LIBSSH2_KNOWNHOST_CHECK_MISMATCH;
			if (!have && strcmp(k->alias, k->hostname))
				have = libssh2_knownhost_checkp(k->kh, k->alias, k->port,
								(char *)dummy, types[i].keylen, mask,
								NULL) == LIBSSH2_KNOWNHOST_CHECK_MISMATCH;
		}
		mr_buf_printf(have ? &known : &rest, "%s%s", (have ? known.len : rest.len) ? "," : "",
			      types[i].alg);
	}
	if (known.len && rest.len)
		mr_buf_printf(&known, ",%s", mr_buf_cstr(&rest));
	libssh2_session_method_pref(k->s, LIBSSH2_METHOD_HOSTKEY,
				    known.len ? mr_buf_cstr(&known) : mr_buf_cstr(&rest));
	mr_buf_release(&known);
	mr_buf_release(&rest);
}

static const char *key_type_name(int type)
{
	switch (type) {
	case LIBSSH2_HOSTKEY_TYPE_ED25519: return "ED25519";
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_256:
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_384:
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return "ECDSA";
	case LIBSSH2_HOSTKEY_TYPE_RSA: return "RSA";
	case LIBSSH2_HOSTKEY_TYPE_DSS: return "DSA";
	default: return "unknown";
	}
}

static int key_type_bit(int type)
{
	switch (type) {
	case LIBSSH2_HOSTKEY_TYPE_ED25519: return LIBSSH2_KNOWNHOST_KEY_ED25519;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
	case LIBSSH2_HOSTKEY_TYPE_RSA: return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
	case LIBSSH2_HOSTKEY_TYPE_DSS: return LIBSSH2_KNOWNHOST_KEY_SSHDSS;
	default: return 0;
	}
}

/* Append the new key to the first known_hosts file as one line (never rewrite it). */
static int add_known_host(const struct mr_ssh_hostkey *k, const char *key, size_t len, int bit)
{
	struct libssh2_knownhost *entry = NULL;
	char name[300], line[4096];
	size_t outlen = 0;
	int fd, rc = -1;

	if (!k->add_to || !k->kh)
		return -1;
	if (k->port == 22)
		snprintf(name, sizeof(name), "%s", k->hostname);
	else
		snprintf(name, sizeof(name), "[%s]:%d", k->hostname, k->port);
	if (libssh2_knownhost_addc(k->kh, name, NULL, key, len, NULL, 0,
				   LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | bit,
				   &entry) < 0)
		return -1;
	if (libssh2_knownhost_writeline(k->kh, entry, line, sizeof(line), &outlen,
					LIBSSH2_KNOWNHOST_FILE_OPENSSH) < 0)
		return -1;
	fd = open(k->add_to, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (write(fd, line, outlen) == (ssize_t)outlen)
		rc = 0;
	close(fd);
	return rc;
}

static void kh_list(const struct mr_ssh_hostkey *k, char *buf, size_t bufsz)
{
	struct mr_buf b = MR_BUF_INIT;

	for (size_t i = 0; i < k->files->nr; i++)
		mr_buf_printf(&b, "%s'%s'", i ? ", " : "", k->files->v[i]);
	snprintf(buf, bufsz, "%s", b.len ? mr_buf_cstr(&b) : "(no known_hosts file)");
	mr_buf_release(&b);
}

bool mr_ssh_hostkey_check(const struct mr_ssh_hostkey *k, char *msg, size_t n, int *why)
{
	size_t len = 0;
	int type = 0, bit, mask, rc;
	const char *key = libssh2_session_hostkey(k->s, &len, &type);
	const char *hash = libssh2_hostkey_hash(k->s, LIBSSH2_HOSTKEY_HASH_SHA256);
	char fp[64] = "?", files[1024];

	if (hash)
		b64_nopad((const unsigned char *)hash, 32, fp, sizeof(fp));
	bit = key_type_bit(type);
	if (!key || !bit) {
		snprintf(msg, n, "server sent no usable host key");
		return false;
	}
	mask = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | bit;
	rc = k->kh ? libssh2_knownhost_checkp(k->kh, k->hostname, k->port, key, len, mask, NULL)
		   : LIBSSH2_KNOWNHOST_CHECK_NOTFOUND;
	if (k->kh && rc == LIBSSH2_KNOWNHOST_CHECK_NOTFOUND && strcmp(k->alias, k->hostname))
		rc = libssh2_knownhost_checkp(k->kh, k->alias, k->port, key, len, mask, NULL);
	kh_list(k, files, sizeof(files));
	switch (rc) {
	case LIBSSH2_KNOWNHOST_CHECK_MATCH:
		return true;
	case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
		if (k->strict == MR_SSH_STRICT_NO)
			return true;
		snprintf(msg, n,
			 "host key has changed: the server's %s key SHA256:%s does not match %s",
			     key_type_name(type), fp, files);
		*why = MR_HAL_WHY_HOSTKEY_CHANGED;
		return false;
	case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
		if (k->strict != MR_SSH_STRICT_ACCEPT_NEW && k->strict != MR_SSH_STRICT_NO) {
			snprintf(msg, n,
				 "host key is unknown: %s key SHA256:%s is not in %s (accept it with the accept-new-hostkeys option or add it to known_hosts)",
				     key_type_name(type), fp, files);
			return false;
		}
		if (add_known_host(k, key, len, bit) < 0 && k->add_to) {
			snprintf(msg, n, "cannot add %s key SHA256:%s to '%s'",
				     key_type_name(type), fp, k->add_to);
			return false;
		}
		return true;
	default:
		snprintf(msg, n, "host key check failed for %s key SHA256:%s",
			     key_type_name(type), fp);
		return false;
	}
}

