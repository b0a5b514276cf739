/* SPDX-License-Identifier: MIT */
/*
 * The egress gateway of one sandbox (docs/network.md).
 *
 * A network namespace of its own (owned by the host's user namespace) holds
 * the far end of the sandbox's only link and an nftables ruleset with policy
 * drop. In it the gateway listens on 100.96.0.1: DNS (udp/tcp 53), the
 * explicit HTTP proxy (3128) and the transparent proxy (3129, where every
 * other TCP connection from the sandbox is redirected). Nothing is routed:
 * every byte that leaves is sent by the gateway itself, from sockets made in
 * the upstream namespace (the host's, or --upstream-netns), after one
 * decision function judged the name and every address was vetted.
 */
#ifndef AL_NET_GATEWAY_H
#define AL_NET_GATEWAY_H

#include <airlock/airlock.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

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
/* The host's CAs, then ca_pem: what NET_CA_BUNDLE_PATH holds. A heap string (ca_bundle.c). */
char *net_ca_bundle(const char *ca_pem);
/* The NET_CA_ENV_N "NAME=path" variables that make the usual clients (OpenSSL, curl,
 * Python requests, git, Node) trust the sandbox's CA where its root keeps it. */
#define NET_CA_ENV_N 5
const char *const *net_ca_env(bool image_root);

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

struct net_policy;
struct net_gateway;

struct net_gateway_opts {
	struct net_policy *policy;  /* taken over by the gateway */
	const char *upstream_netns; /* a name under /run/netns, a path, or NULL (the host's) */
	const char *upstream_dns;   /* "IP" or "IP:PORT"; NULL: the host's resolv.conf */
	int log_fd;                 /* egress decisions as JSON lines, or -1 */
	const char *sandbox_id;
	const char *ca_dir;         /* the sandbox CA's directory on the host (TLS termination) */
	const char *upstream_ca;    /* CA file for verifying terminated upstreams; NULL: system */
	bool ca_constrain;          /* name-constrain a new CA to the policy's domains */
	bool ca_ephemeral;          /* keep the CA key in memory only (one-shot runs) */
	/* A namespace from the one-shot pool (jail/pool.h): its ruleset and link are made
	 * (the sandbox joins the other end), so prepare and attach only bind and check. */
	const char *pooled_netns;
	unsigned max_conns; /* connections served at once (net_gateway_conn_budget); 0: the most */
};

/* Single-threaded phase (before the sandbox is cloned): the gateway namespace, the ruleset
 * and the listening sockets (bound ahead of the link's address with IP_FREEBIND). */
int net_gateway_prepare(const struct net_gateway_opts *o, struct net_gateway **out,
			struct al_error **err);
/* A gateway prepared ahead (for the one-shot pool, with a deny-all policy and no log):
 * before it starts serving, take the sandbox's settings from o -- upstream namespace and
 * resolver, sandbox id, log fd, and the policy (taken over, freed on failure). */
int net_gateway_configure(struct net_gateway *g, const struct net_gateway_opts *o,
			  struct al_error **err);
/* Make the link: gw0 here, eth0 created directly in the sandbox (its PID 1 is pid: no
 * move, which would wait for RCU), and give eth0 its address and route from outside
 * (the sandbox may be running, or building its root meanwhile). */
int net_gateway_attach(struct net_gateway *g, pid_t pid, struct al_error **err);
/* Replace the policy (taken over) and cut the live flows it refuses; returns when done.
 * Fails (policy freed, nothing changed) only when its rules need a CA that cannot be made. */
int net_gateway_set_policy(struct net_gateway *g, struct net_policy *p, struct al_error **err);
/* The sandbox CA's certificate (PEM), or NULL while no policy had rules. */
const char *net_gateway_ca_pem(struct net_gateway *g);
/* Start serving (threads). */
int net_gateway_start(struct net_gateway *g, struct al_error **err);
/* Or serve with no thread at first: each service's thread starts on its first traffic (a
 * one-shot sandbox that sends nothing costs none), until ctl reaches EOF (then 0). */
int net_gateway_serve_lazily(struct net_gateway *g, int ctl, struct al_error **err);
/* Stop serving: every thread and connection ended, every log line written; nothing freed
 * (for a process about to exit). Safe on a gateway never started, and twice. */
void net_gateway_quiesce(struct net_gateway *g);
/* Quiesce, then close and free everything. Safe on a gateway never started. */
void net_gateway_stop(struct net_gateway *g);

/* In the sandbox's network namespace: configure eth0. */
int net_sandbox_link_setup(struct al_error **err);

#endif
