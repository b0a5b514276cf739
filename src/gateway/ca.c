/* SPDX-License-Identifier: MIT */
/* The sandbox's certificate authority (ca.h). */
#include "gateway/ca.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct ca_leaf {
	char *name;
	X509 *cert;
};

struct net_ca {
	EVP_PKEY *key; /* the CA's */
	X509 *cert;
	char *pem;
	EVP_PKEY *leaf_key; /* shared by every leaf of this sandbox */
	pthread_mutex_t mu;
	struct ca_leaf leaves[NET_CA_MAX_LEAVES];
	size_t n_leaves, next_evict;
};

static int ssl_err(struct al_error **err, const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();

	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return al_error_msg(err, EPROTO, "%s: %s", what, e ? buf : "failed");
}

static EVP_PKEY *ec_key(void)
{
	return EVP_EC_gen("P-256");
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *e;
	int r;

	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!e)
		return -1;
	r = X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
	return r == 1 ? 0 : -1;
}

static int set_serial(X509 *x)
{
	unsigned char b[16];
	BIGNUM *bn;
	int r;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return -1;
	b[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(b, sizeof(b), NULL);
	r = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) ? 0 : -1;
	BN_free(bn);
	return r;
}

static int make_ca(struct net_ca *ca, const char *sandbox_id, const char *const *names,
		   size_t n_names, struct al_error **err)
{
	X509 *x = X509_new();
	X509_NAME *nm;
	char cn[128];

	ca->key = ec_key();
	if (!x || !ca->key)
		goto fail;
	snprintf(cn, sizeof(cn), "airlock sandbox %.64s CA", sandbox_id ? sandbox_id : "");
	X509_set_version(x, 2);
	if (set_serial(x) < 0 || !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), 60L * 60 * 24 * 30))
		goto fail;
	X509_set_pubkey(x, ca->key);
	nm = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(nm, "O", MBSTRING_ASC, (const unsigned char *)"airlock", -1, -1,
				   0);
	X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, nm);
	if (add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
	    add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    add_ext(x, x, NID_subject_key_identifier, "hash") < 0)
		goto fail;
	if (n_names) {
		/* permitted;DNS:a.test,permitted;DNS:b.test ... */
		size_t cap = 64;
		char *nc;

		for (size_t i = 0; i < n_names; i++)
			cap += strlen(names[i]) + 16;
		nc = xzalloc(cap);
		strcpy(nc, "critical");
		for (size_t i = 0; i < n_names; i++) {
			strcat(nc, ",permitted;DNS:");
			strcat(nc, names[i]);
		}
		if (add_ext(x, x, NID_name_constraints, nc) < 0) {
			free(nc);
			goto fail;
		}
		free(nc);
	}
	if (!X509_sign(x, ca->key, EVP_sha256()))
		goto fail;
	ca->cert = x;
	return 0;
fail:
	X509_free(x);
	return ssl_err(err, "making the sandbox CA");
}

static char *to_pem(X509 *x)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out = NULL;
	long n;

	if (b && PEM_write_bio_X509(b, x)) {
		n = BIO_get_mem_data(b, &data);
		out = xzalloc((size_t)n + 1);
		memcpy(out, data, (size_t)n);
	}
	BIO_free(b);
	return out;
}

static int write_file(const char *path, const char *data, mode_t mode, struct al_error **err)
{
	char tmp[4096];
	int fd;
	size_t n = strlen(data);

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return al_error_set(err, errno, "create '%s'", tmp);
	if (write(fd, data, n) != (ssize_t)n || fsync(fd) < 0) {
		int e = errno ? errno : EIO;
		close(fd);
		unlink(tmp);
		return al_error_set(err, e, "write '%s'", tmp);
	}
	close(fd);
	if (rename(tmp, path) < 0)
		return al_error_set(err, errno, "rename '%s'", tmp);
	return 0;
}

static int load_ca(struct net_ca *ca, const char *kpath, const char *cpath, struct al_error **err)
{
	FILE *f = fopen(kpath, "re");

	if (!f)
		return al_error_set(err, errno, "open '%s'", kpath);
	ca->key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	f = fopen(cpath, "re");
	if (!f)
		return al_error_set(err, errno, "open '%s'", cpath);
	ca->cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (!ca->key || !ca->cert || X509_check_private_key(ca->cert, ca->key) != 1)
		return ssl_err(err, "loading the sandbox CA");
	return 0;
}

int net_ca_open(const char *dir, const char *sandbox_id, const char *const *names, size_t n_names,
		bool keep_key, struct net_ca **out, struct al_error **err)
{
	struct net_ca *ca = xzalloc(sizeof(*ca));
	_cleanup_free_ char *kpath = xasprintf("%s/ca.key", dir);
	_cleanup_free_ char *cpath = xasprintf("%s/ca.pem", dir);
	int r = 0;

	pthread_mutex_init(&ca->mu, NULL);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		r = al_error_set(err, errno, "mkdir '%s'", dir);
	} else if (access(kpath, F_OK) == 0) {
		r = load_ca(ca, kpath, cpath, err);
	} else if ((r = make_ca(ca, sandbox_id, names, n_names, err)) == 0) {
		BIO *b = BIO_new(BIO_s_mem());
		char *data;
		long n;

		if (!b || !PEM_write_bio_PrivateKey(b, ca->key, NULL, NULL, 0, NULL, NULL)) {
			r = ssl_err(err, "encoding the CA key");
		} else {
			n = BIO_get_mem_data(b, &data);
			_cleanup_free_ char *k = xzalloc((size_t)n + 1);
			_cleanup_free_ char *pem = to_pem(ca->cert);
			memcpy(k, data, (size_t)n);
			/* the certificate first: a key without it is never left behind */
			r = write_file(cpath, pem ? pem : "", 0644, err);
			if (r == 0 && keep_key)
				r = write_file(kpath, k, 0600, err);
			OPENSSL_cleanse(k, (size_t)n);
		}
		BIO_free(b);
	}
	if (r == 0) {
		ca->pem = to_pem(ca->cert);
		ca->leaf_key = ec_key();
		if (!ca->pem || !ca->leaf_key)
			r = ssl_err(err, "the leaf key");
	}
	if (r < 0) {
		net_ca_free(ca);
		return r;
	}
	*out = ca;
	return 0;
}

void net_ca_free(struct net_ca *ca)
{
	if (!ca)
		return;
	net_ca_drop_leaves(ca);
	EVP_PKEY_free(ca->key);
	EVP_PKEY_free(ca->leaf_key);
	X509_free(ca->cert);
	free(ca->pem);
	pthread_mutex_destroy(&ca->mu);
	free(ca);
}

const char *net_ca_cert_pem(const struct net_ca *ca)
{
	return ca->pem;
}

static X509 *mint(struct net_ca *ca, const char *name)
{
	X509 *x = X509_new();
	X509_NAME *nm;
	char san[300];

	if (!x)
		return NULL;
	X509_set_version(x, 2);
	if (set_serial(x) < 0 || !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), 60L * 60 * 24 * 7))
		goto fail;
	X509_set_pubkey(x, ca->leaf_key);
	nm = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)name, -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(ca->cert));
	snprintf(san, sizeof(san), "DNS:%s", name);
	if (add_ext(x, ca->cert, NID_subject_alt_name, san) < 0 ||
	    add_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
	    add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature") < 0 ||
	    add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") < 0 ||
	    add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always") < 0)
		goto fail;
	if (!X509_sign(x, ca->key, EVP_sha256()))
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

int net_ca_leaf(struct net_ca *ca, const char *name, void **x509, void **pkey,
		struct al_error **err)
{
	X509 *x = NULL;

	pthread_mutex_lock(&ca->mu);
	for (size_t i = 0; i < ca->n_leaves; i++)
		if (!strcmp(ca->leaves[i].name, name)) {
			x = ca->leaves[i].cert;
			break;
		}
	if (!x) {
		struct ca_leaf *slot;

		x = mint(ca, name);
		if (!x) {
			pthread_mutex_unlock(&ca->mu);
			return ssl_err(err, "minting a leaf certificate");
		}
		if (ca->n_leaves < NET_CA_MAX_LEAVES) {
			slot = &ca->leaves[ca->n_leaves++];
		} else { /* full: replace the oldest */
			slot = &ca->leaves[ca->next_evict];
			ca->next_evict = (ca->next_evict + 1) % NET_CA_MAX_LEAVES;
			free(slot->name);
			X509_free(slot->cert);
		}
		slot->name = xstrdup(name);
		slot->cert = x;
	}
	X509_up_ref(x);
	EVP_PKEY_up_ref(ca->leaf_key);
	pthread_mutex_unlock(&ca->mu);
	*x509 = x;
	*pkey = ca->leaf_key;
	return 0;
}

void net_ca_drop_leaves(struct net_ca *ca)
{
	pthread_mutex_lock(&ca->mu);
	for (size_t i = 0; i < ca->n_leaves; i++) {
		free(ca->leaves[i].name);
		X509_free(ca->leaves[i].cert);
	}
	ca->n_leaves = 0;
	ca->next_evict = 0;
	pthread_mutex_unlock(&ca->mu);
}

size_t net_ca_n_leaves(struct net_ca *ca)
{
	size_t n;

	pthread_mutex_lock(&ca->mu);
	n = ca->n_leaves;
	pthread_mutex_unlock(&ca->mu);
	return n;
}
