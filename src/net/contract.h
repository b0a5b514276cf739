/* SPDX-License-Identifier: MIT */
/*
 * The contract between a sandbox and its egress gateway (docs/network.md): the link's
 * addresses and names, the gateway's ports, where a sandbox finds the CA of a TLS-
 * terminating policy, and how many connections a sandbox's gateway serves.
 *
 * The jail (which builds sandboxes), the host plumbing (which makes links and starts
 * gateways), the daemon and the gateway process all build on these values; nothing else
 * of the gateway is visible outside src/gateway/. Root templates are keyed by a hash of
 * this file (meson.build: template_layout.h), so change it knowing every template is
 * made again.
 */
#ifndef AL_NET_CONTRACT_H
#define AL_NET_CONTRACT_H

#include <stdbool.h>
#include <stdint.h>

#define NET_GW_ADDR "100.96.0.1"
#define NET_SBX_ADDR "100.96.0.2"
#define NET_LINK_PREFIX 30
#define NET_SBX_LINK "eth0"
#define NET_GW_LINK "gw0"
#define NET_DNS_PORT 53
#define NET_PROXY_PORT 3128
#define NET_TPROXY_PORT 3129
/* In the sandbox, when its policy has per-request rules (TLS termination): its CA, and the
 * system's CAs plus it (what SSL_CERT_FILE, CURL_CA_BUNDLE, ... point at). */
#define NET_CA_CERT_PATH "/etc/airlock/ca.pem"
#define NET_CA_BUNDLE_PATH "/etc/airlock/ca-bundle.pem"
/* The same in --image roots, whose /etc is the image's (read-only): /run is ours there. */
#define NET_CA_IMAGE_CERT_PATH "/run/airlock/ca.pem"
#define NET_CA_IMAGE_BUNDLE_PATH "/run/airlock/ca-bundle.pem"
#define NET_HOST_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
/* How many "NAME=path" variables make the usual clients trust the sandbox's CA
 * (host/ca_bundle.h: net_ca_env). */
#define NET_CA_ENV_N 5

/*
 * Connections one sandbox's gateway serves at once. Each may hold a thread of the gateway
 * (host root, outside the sandbox's cgroups) and, at worst, about 256 KiB of its memory: a
 * request head of up to 64 KiB, the thread's touched stack, two splice pipes. So the
 * number follows the sandbox's own limits: 4 per process it may have, 1 per MiB of its
 * memory (the gateway's worst case is then a quarter of the sandbox's own memory), never
 * under NET_GW_CONNS_MIN, never over NET_GW_CONNS_MAX; a limit of 0 (none) does not bound
 * it. Beyond it a connection is accepted, closed and logged "too_many_connections".
 */
#define NET_GW_CONNS_MIN 64u
#define NET_GW_CONNS_MAX 16384u
static inline unsigned net_gateway_conn_budget(uint64_t memory_bytes, uint32_t pids)
{
	uint64_t n = NET_GW_CONNS_MAX;

	if (pids && (uint64_t)pids * 4 < n)
		n = (uint64_t)pids * 4;
	if (memory_bytes && memory_bytes / (1u << 20) < n)
		n = memory_bytes / (1u << 20);
	return n < NET_GW_CONNS_MIN ? NET_GW_CONNS_MIN : (unsigned)n;
}

#endif
