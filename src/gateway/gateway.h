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
#ifndef AL_GATEWAY_GATEWAY_H
#define AL_GATEWAY_GATEWAY_H

#include "net/contract.h"

#include <airlock/airlock.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct net_policy;
struct net_gateway;

struct net_gateway_opts {
	struct net_policy *policy;  /* taken over by the gateway */
	const char *upstream_netns; /* a name under /run/netns, a path, or NULL (the host's) */
	const char *upstream_dns;   /* "IP" or "IP:PORT"; NULL: the host's resolv.conf */
	int log_fd;		    /* egress decisions as JSON lines, or -1 */
	const char *sandbox_id;
	const char *ca_dir;	 /* the sandbox CA's directory on the host (TLS termination) */
	const char *upstream_ca; /* CA file for verifying terminated upstreams; NULL: system */
	bool ca_constrain;	 /* name-constrain a new CA to the policy's domains */
	bool ca_ephemeral;	 /* keep the CA key in memory only (one-shot runs) */
	/* A namespace from the one-shot pool (jail/ahead/pool.h): its ruleset and link are made
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
/* The gateway's network namespace (its fd, the gateway's own), or -1. */
int net_gateway_netns(const struct net_gateway *g);
/* Quiesce, then close and free everything. Safe on a gateway never started. */
void net_gateway_stop(struct net_gateway *g);

/* In the sandbox's network namespace: configure eth0. */
int net_sandbox_link_setup(struct al_error **err);

#endif
