/* SPDX-License-Identifier: MIT */
/* The trust bundle a sandbox with TLS termination gets (gateway/gateway.h). */
#include "host/ca_bundle.h"
#include "net/contract.h"
#include "common/xalloc.h"

#include <stdio.h>
#include <string.h>

#define HOST_BUNDLE_MAX (4u << 20)

const char *const *net_ca_env(bool image_root)
{
	static const char *const etc[NET_CA_ENV_N] = {
	    "SSL_CERT_FILE=" NET_CA_BUNDLE_PATH, "CURL_CA_BUNDLE=" NET_CA_BUNDLE_PATH,
	    "REQUESTS_CA_BUNDLE=" NET_CA_BUNDLE_PATH, "GIT_SSL_CAINFO=" NET_CA_BUNDLE_PATH,
	    "NODE_EXTRA_CA_CERTS=" NET_CA_CERT_PATH};
	static const char *const run[NET_CA_ENV_N] = {
	    "SSL_CERT_FILE=" NET_CA_IMAGE_BUNDLE_PATH, "CURL_CA_BUNDLE=" NET_CA_IMAGE_BUNDLE_PATH,
	    "REQUESTS_CA_BUNDLE=" NET_CA_IMAGE_BUNDLE_PATH,
	    "GIT_SSL_CAINFO=" NET_CA_IMAGE_BUNDLE_PATH,
	    "NODE_EXTRA_CA_CERTS=" NET_CA_IMAGE_CERT_PATH};

	return image_root ? run : etc;
}

char *net_ca_bundle(const char *ca_pem)
{
	size_t pl = strlen(ca_pem), n = 0;
	char *b = xzalloc(HOST_BUNDLE_MAX + pl + 2);
	FILE *f = fopen(NET_HOST_CA_BUNDLE, "re");

	if (f) {
		n = fread(b, 1, HOST_BUNDLE_MAX, f);
		fclose(f);
	}
	if (n && b[n - 1] != '\n')
		b[n++] = '\n';
	memcpy(b + n, ca_pem, pl + 1);
	return b;
}
