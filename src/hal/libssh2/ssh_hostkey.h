/*
 * ssh_hostkey.h - known_hosts handling of the ssh backend (libssh2 1.10).
 *
 * mr_ssh_hostkey_prefer() runs before the handshake: it orders the host key
 * algorithms by the key types known_hosts holds for the host (libssh2 would
 * otherwise negotiate ECDSA first and a file holding only the ed25519 key would
 * fail the check), ed25519 first when nothing is known.
 * mr_ssh_hostkey_check() runs after it: the server's key is checked against
 * known_hosts under the host's HostName (and, if not found there, its alias),
 * honouring StrictHostKeyChecking; a new key accepted by accept-new/no is
 * appended to add_to as one line (the file is never rewritten). On refusal it
 * writes a message naming the key type and its SHA256 fingerprint.
 */
#ifndef MR_SSH_HOSTKEY_H
#define MR_SSH_HOSTKEY_H

#include "common/compat.h"
#include "common/strvec.h"
#include "hal/ssh_config.h"

#include <libssh2.h>

struct mr_ssh_hostkey {
	LIBSSH2_SESSION *s;
	LIBSSH2_KNOWNHOSTS *kh;       /* with every known_hosts file read; may be NULL */
	const char *hostname;         /* HostName */
	const char *alias;            /* the name the user gave */
	int port;
	enum mr_ssh_strict strict;    /* YES, ACCEPT_NEW or NO (UNSET counts as YES) */
	const struct mr_strvec *files;/* the files read, for messages */
	const char *add_to;           /* where new keys go; NULL: nowhere */
};

void mr_ssh_hostkey_prefer(const struct mr_ssh_hostkey *k);
/* true: accepted; false: refused, msg (n bytes) says why, and *why is
 * MR_HAL_WHY_HOSTKEY_CHANGED when another key is recorded (else left alone). */
bool mr_ssh_hostkey_check(const struct mr_ssh_hostkey *k, char *msg, size_t n, int *why);

#endif
