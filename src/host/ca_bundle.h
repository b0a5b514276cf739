/* SPDX-License-Identifier: MIT */
/* The sandbox's CA as the usual clients find it (net/contract.h names the paths). */
#ifndef AL_HOST_CA_BUNDLE_H
#define AL_HOST_CA_BUNDLE_H

#include "net/contract.h"

#include <stdbool.h>

/* The host's CAs, then ca_pem: what NET_CA_BUNDLE_PATH holds. A heap string. */
char *net_ca_bundle(const char *ca_pem);
/* The NET_CA_ENV_N "NAME=path" variables that make the usual clients (OpenSSL, curl,
 * Python requests, git, Node) trust the sandbox's CA where its root keeps it. */
const char *const *net_ca_env(bool image_root);

#endif
