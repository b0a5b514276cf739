/* SPDX-License-Identifier: MIT */
/*
 * HTTPS on the TCP listener (docs/daemon.md, "TLS"): the PEM certificate chain and key of
 * --tls-cert/--tls-key, read here (size-capped; the key must not be readable by group or
 * others) and checked with GnuTLS, the library libmicrohttpd uses, before the listener
 * starts: a file that does not parse or a pair that does not match is a start-up error
 * naming its flag, not a handshake that fails later. TLS 1.2 and 1.3 only.
 */
#include "api/api_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define API_TLS_FILE_MAX (1024 * 1024) /* a certificate chain or a key, PEM */

const char api_tls_priorities[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";

/* The whole of a PEM file, NUL-terminated (libmicrohttpd takes C strings). */
static char *tls_read(const char *flag, const char *path, bool secret, struct al_error **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t got = 0;

	if (fd < 0 || fstat(fd, &st) < 0)
		return al_error_set(err, errno, "%s '%s'", flag, path), NULL;
	if (!S_ISREG(st.st_mode))
		return al_error_msg(err, EINVAL, "%s '%s': not a regular file", flag, path), NULL;
	if (secret && (st.st_mode & 077))
		return al_error_msg(err, EPERM,
				    "%s '%s': readable by group or others (mode %03o; chmod 600 "
				    "it)",
				    flag, path, (unsigned)(st.st_mode & 0777)),
		       NULL;
	if (st.st_size <= 0 || st.st_size > API_TLS_FILE_MAX)
		return al_error_msg(err, EINVAL, "%s '%s': %s (a PEM file up to 1 MiB)", flag, path,
				    st.st_size <= 0 ? "empty" : "too large"),
		       NULL;
	buf = xzalloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return al_error_set(err, errno, "%s '%s': read", flag, path), NULL;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (memchr(buf, '\0', got))
		return al_error_msg(err, EINVAL, "%s '%s': not a PEM file", flag, path), NULL;
	return TAKE_PTR(buf);
}

/* Each file parses on its own (so the message names the right flag), then as a pair. */
static int tls_check(const struct api_opts *o, const char *cert, const char *key,
		     struct al_error **err)
{
	gnutls_datum_t cd = {(unsigned char *)cert, (unsigned)strlen(cert)};
	gnutls_datum_t kd = {(unsigned char *)key, (unsigned)strlen(key)};
	gnutls_x509_crt_t *crts = NULL;
	gnutls_x509_privkey_t pk = NULL;
	gnutls_certificate_credentials_t cr = NULL;
	unsigned n = 0;
	int r;

	r = gnutls_x509_crt_list_import2(&crts, &n, &cd, GNUTLS_X509_FMT_PEM, 0);
	for (unsigned i = 0; r >= 0 && i < n; i++)
		gnutls_x509_crt_deinit(crts[i]);
	gnutls_free(crts);
	if (r < 0 || n == 0)
		return al_error_msg(err, EINVAL, "--tls-cert '%s': no PEM certificate: %s",
				    o->tls_cert, r < 0 ? gnutls_strerror(r) : "empty");
	if (gnutls_x509_privkey_init(&pk) < 0)
		al_oom();
	r = gnutls_x509_privkey_import2(pk, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
	gnutls_x509_privkey_deinit(pk);
	if (r < 0)
		return al_error_msg(err, EINVAL,
				    "--tls-key '%s': no unencrypted PEM private key: %s",
				    o->tls_key, gnutls_strerror(r));
	if (gnutls_certificate_allocate_credentials(&cr) < 0)
		al_oom();
	r = gnutls_certificate_set_x509_key_mem2(cr, &cd, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
	gnutls_certificate_free_credentials(cr);
	if (r < 0)
		return al_error_msg(
		    err, EINVAL, "--tls-cert '%s' and --tls-key '%s': %s", o->tls_cert, o->tls_key,
		    r == GNUTLS_E_CERTIFICATE_KEY_MISMATCH ? "the key is not the certificate's"
							   : gnutls_strerror(r));
	return 0;
}

int api_tls_load(struct api *a, const struct api_opts *o, struct al_error **err)
{
	_cleanup_free_ char *cert = NULL;
	char *key = NULL;
	int r;

	if (!o->tls_cert && !o->tls_key)
		return o->tls_listen ? al_error_msg(err, EINVAL,
						    "--tls-listen needs --tls-cert and --tls-key")
				     : 0;
	if (!o->tls_cert || !o->tls_key)
		return al_error_msg(err, EINVAL, "%s without %s: give both or neither",
				    o->tls_cert ? "--tls-cert" : "--tls-key",
				    o->tls_cert ? "--tls-key" : "--tls-cert");
	if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
		return al_error_msg(err, ENOTSUP, "--tls-cert: libmicrohttpd is built without TLS");
	cert = tls_read("--tls-cert", o->tls_cert, false, err);
	if (!cert)
		return -EINVAL;
	key = tls_read("--tls-key", o->tls_key, true, err);
	if (!key)
		return -EINVAL;
	r = tls_check(o, cert, key, err);
	if (r < 0) {
		explicit_bzero(key, strlen(key));
		free(key);
		return r;
	}
	a->tls_cert = TAKE_PTR(cert);
	a->tls_key = key;
	return 0;
}

void api_tls_free(struct api *a)
{
	if (a->tls_key) {
		explicit_bzero(a->tls_key, strlen(a->tls_key));
		free(a->tls_key);
	}
	free(a->tls_cert);
	a->tls_key = a->tls_cert = NULL;
}

bool api_req_tls(const struct api_req *r)
{
	const union MHD_ConnectionInfo *i =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);

	return i && i->tls_session;
}

struct upgrade_job {
	struct api *api;
	void (*fn)(void *);
	void *arg;
};

static void *upgrade_thread(void *p)
{
	struct upgrade_job *j = p;
	struct api *a = j->api;

	j->fn(j->arg);
	free(j);
	__atomic_sub_fetch(&a->upgrades, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

void api_upgrade_run(struct MHD_Connection *c, struct api *a, int sock, void (*fn)(void *),
		     void *arg)
{
	const union MHD_ConnectionInfo *i =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	struct upgrade_job *j;
	pthread_attr_t at;
	pthread_t th;
	int r;

	if (!i || !i->tls_session)
		return fn(arg); /* plain TCP or the Unix socket: sock is the client's */
	j = xzalloc(sizeof(*j));
	*j = (struct upgrade_job){a, fn, arg};
	/* Counted before stopping is read, as api_stop sets stopping before it reads the
	 * count (both sequentially consistent): a handler api_stop does not wait for sees
	 * stopping here, and runs (and ends) inside this callback, while MHD still runs. */
	__atomic_add_fetch(&a->upgrades, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&a->stopping, __ATOMIC_SEQ_CST)) {
		shutdown(sock, SHUT_RDWR);
		upgrade_thread(j);
		return;
	}
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&th, &at, upgrade_thread, j);
	pthread_attr_destroy(&at);
	if (r != 0) { /* no thread: the handler meets the end of its socket and cleans up */
		shutdown(sock, SHUT_RDWR);
		upgrade_thread(j);
	}
}

void api_upgrade_wait(struct api *a)
{
	const struct timespec tick = {0, 10 * 1000 * 1000};

	while (__atomic_load_n(&a->upgrades, __ATOMIC_SEQ_CST) > 0)
		nanosleep(&tick, NULL);
}
