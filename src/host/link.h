/* SPDX-License-Identifier: MIT */
/* rtnetlink, by hand (no exec of `ip`): veth pairs, addresses, routes, namespaces. */
#ifndef AL_HOST_LINK_H
#define AL_HOST_LINK_H

#include <airlock/airlock.h>
#include <netinet/in.h>
#include <sys/types.h>

/* The two ends of a pair made across namespaces: gw0 gets this index, eth0 the next
 * (different indexes make carrier changes urgent for the kernel; link.c). */
#define NET_VETH_INDEX 10

/* All of these act in the network namespace of the calling thread. */
int net_nl_open(struct al_error **err);
int net_veth_create(int nl, const char *name, const char *peer, struct al_error **err);
/* The same with the peer created directly in the network namespace of process peer_pid
 * (0: here). Cheaper than creating it here and moving it: a move waits for RCU. */
int net_veth_create_in(int nl, const char *name, const char *peer, pid_t peer_pid,
		       struct al_error **err);
/* The same with the peer created in the network namespace nsfd refers to. */
int net_veth_create_in_fd(int nl, const char *name, const char *peer, int peer_nsfd,
			  struct al_error **err);
int net_link_up(int nl, const char *ifname, struct al_error **err);
int net_addr_add4(int nl, const char *ifname, struct in_addr addr, int prefix,
		  struct al_error **err);
int net_route_default4(int nl, struct in_addr gw, struct al_error **err);
/* Delete the IPv4 neighbour entry of addr on ifname (none there: 0 too). */
int net_neigh_del4(int nl, const char *ifname, struct in_addr addr, struct al_error **err);
/* /proc/sys/net/ipv6/conf/IF/disable_ipv6 = 1 (ignored where IPv6 is absent). */
void net_disable_ipv6(const char *ifname);
/* net.ipv4.tcp_max_tw_buckets = 0 in this thread's network namespace: no TIME_WAIT is kept
 * (both ends of a sandbox's link: so that the pair can be recycled, jail/ahead/recycle.h). */
void net_no_time_wait(void);

/* In the sandbox's network namespace: configure eth0 (address, up, default route). */
int net_sandbox_link_setup(struct al_error **err);
/*
 * The sandbox's link (net/contract.h), the one place it is made: for a gateway attaching
 * to a sandbox and for the one-shot pool's entries alike. Called in the gateway's
 * namespace with nl open there: gw0 gets its address and comes up first, then eth0 is
 * made directly in sbx_ns and configured from outside (up second, it gets its queueing
 * discipline at once; gw0's comes with the kernel's linkwatch work, which the gateway
 * waits for before its sandbox may start). Returns with the calling thread in sbx_ns
 * (on failure, in either): the caller goes back where it wants to be.
 */
int net_link_make(int nl, int sbx_ns, struct al_error **err);

#endif
