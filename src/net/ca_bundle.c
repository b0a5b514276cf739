/* SPDX-License-Identifier: MIT */
/* The trust bundle a sandbox with TLS termination gets (net/gateway.h). */
#include "net/gateway.h"
#include "common/xalloc.h"

#include <stdio.h>
#include <string.h>

#define HOST_BUNDLE_MAX (4u << 20)

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
