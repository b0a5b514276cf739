/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's certificate authority (OpenSSL 3), for TLS termination of
 * domains with per-request rules (docs/network.md, "TLS termination").
 *
 * One CA per sandbox: an EC P-256 key and a self-signed certificate (basic
 * constraints CA:TRUE, pathlen 0, key usage certSign only), optionally
 * name-constrained to a list of DNS subtrees. The key lives in the gateway's
 * memory and in a 0600 file on the host (so a restarted gateway serves the same
 * CA); it never enters the sandbox. Leaf certificates (one shared leaf key,
 * a fresh serial, SAN = the name, 7 days) are minted per name and cached,
 * at most NET_CA_MAX_LEAVES; the cache is dropped on every policy change.
 */
#ifndef AL_GATEWAY_CA_H
#define AL_GATEWAY_CA_H

#include "common/error.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define NET_CA_MAX_LEAVES 256

struct net_ca;

/*
 * Load the CA from dir/ca.key and dir/ca.pem, or make one there (names: DNS
 * subtrees to constrain it to, NULL for none). dir is created 0700. Without
 * keep_key only dir/ca.pem is written: the key lives in memory alone.
 */
int net_ca_open(const char *dir, const char *sandbox_id, const char *const *names, size_t n_names,
		bool keep_key, struct net_ca **out, struct al_error **err);
void net_ca_free(struct net_ca *ca);
/* The CA certificate, PEM (owned by ca). */
const char *net_ca_cert_pem(const struct net_ca *ca);
/*
 * A leaf for name as (X509 *, EVP_PKEY *) with their own references; the
 * caller frees them. Minted on first use, then cached. 0 or -errno.
 */
int net_ca_leaf(struct net_ca *ca, const char *name, void **x509, void **pkey,
		struct al_error **err);
/* Forget every cached leaf (a policy change). */
void net_ca_drop_leaves(struct net_ca *ca);
/* How many leaves are cached; how many were minted in all. */
size_t net_ca_n_leaves(struct net_ca *ca);

#endif
