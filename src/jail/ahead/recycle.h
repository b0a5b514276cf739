/* SPDX-License-Identifier: MIT */
/*
 * Recycled network namespaces for deny-all one-shots (`airlock run`, no policy or
 * "deny-all"): a namespace is reused by the next run only once it is proven to carry
 * nothing over but counters (docs/security.md, "Recycled network namespaces").
 *
 * Every such namespace was made by airlock as host root, in the initial user namespace,
 * before the sandbox made its own user namespace: the sandbox never holds CAP_NET_ADMIN
 * or CAP_NET_RAW over it, so it cannot change its sysctls, links, addresses, routes or
 * rules; all it can leave behind is sockets, and caches the kernel fills for sockets
 * (TCP metrics). After a run, once every process of the sandbox is dead, airlock checks
 * the namespace from inside (netns_clean.c): no socket of any kind, no TIME_WAIT, no
 * conntrack entry, only lo with its own addresses and no route of the main table; then it
 * flushes the TCP metrics cache and puts it back. Anything else: it is destroyed, never
 * reused, and the reason is logged in ROOT/log.
 *
 * The pool fills itself: nothing is made for it. A run that found it empty makes its own
 * namespace as before and, if that namespace is clean at the end and the pool below its
 * size, leaves it in the pool (one bind mount) instead of destroying it.
 *
 * Layout, under ROOT (default /run/airlock/netns, $AIRLOCK_NETNS_POOL):
 *
 *   ROOT/ready/nINODE/ns       a namespace ready for the next run (nsfs bind mount)
 *   ROOT/claimed/PID-nINODE/ns taken by the run PID (rename(2): one claimer wins); put
 *                              back by a rename, or destroyed. A claim whose run is gone
 *                              (killed) is destroyed by the next sweep, never put back.
 *   ROOT/new/PID-nINODE/ns     being adopted (never claimed from here)
 *   ROOT/log                   one line per namespace destroyed, with the reason
 *
 * Off for a run with `airlock run --fresh-netns`; off for the whole host while
 * JAIL_RECYCLE_OFF_FILE exists.
 */
#ifndef AL_JAIL_RECYCLE_H
#define AL_JAIL_RECYCLE_H

#include <airlock/airlock.h>
#include <stdbool.h>
#include <stddef.h>

#define JAIL_RECYCLE_ROOT "/run/airlock/netns"
#define JAIL_RECYCLE_OFF_FILE "/etc/airlock/fresh-netns"
#define JAIL_RECYCLE_MAX 64u

/* Where a run's namespace came from, and so what happens to it at the end. */
enum jail_recycle_state {
	JAIL_RECYCLE_OFF,     /* not recycled: made and destroyed as always */
	JAIL_RECYCLE_CLAIMED, /* taken from ROOT/ready: checked, then back or destroyed */
	JAIL_RECYCLE_FRESH,   /* made for this run: checked, then adopted or destroyed */
};

struct jail_recycle {
	enum jail_recycle_state state;
	int fd;		 /* the namespace (CLAIMED: to join; FRESH: once known), or -1 */
	char root[200];	 /* ROOT */
	char entry[300]; /* CLAIMED: ROOT/claimed/PID-NAME */
};

/* ROOT: root, else $AIRLOCK_NETNS_POOL, else JAIL_RECYCLE_ROOT (a relative path counts as
 * none). NULL while JAIL_RECYCLE_OFF_FILE exists, or if the path is too long. */
const char *jail_recycle_root(const char *root, char *buf, size_t len);
/* Take a ready namespace: CLAIMED with c->fd, else FRESH (the run makes its own and may
 * hand it in with jail_recycle_adopt_fd). Never blocks; never fails. */
void jail_recycle_claim(const char *root, struct jail_recycle *c);
/* FRESH: the run's own namespace (a copy of fd is kept). */
void jail_recycle_adopt_fd(struct jail_recycle *c, int fd);
/* After the run, every process of the sandbox dead: the namespace checked and put back
 * (or adopted), or destroyed and logged. Closes c->fd. 0 when put back or adopted, 1 when
 * destroyed or left as it was (a full pool); JAIL_NS_STRANDED when this thread could not
 * leave the namespace it checked (the caller must exit). */
int jail_recycle_release(struct jail_recycle *c);
/* Destroy claims of runs that no longer exist. Returns how many. */
int jail_recycle_sweep(const char *root);
/* Destroy every ready namespace and every dead run's claim. Returns how many. */
int jail_recycle_drain(const char *root);
/* How many are ready. */
unsigned jail_recycle_count(const char *root);

/* netns_clean.c: in namespace ns_fd, from inside: does anything of a sandbox remain?
 * 0: clean (then its TCP metrics are flushed), 1: not (why says what), -1: could not
 * tell (why too), JAIL_NS_STRANDED: this thread could not get back to its namespace.
 * recycled: the namespace was prepared for reuse (jail_netns_prepare) before. */
int jail_netns_clean(int ns_fd, bool recycled, char *why, size_t len);
/* Make a namespace ready for reuse: net.ipv4.tcp_max_tw_buckets = 0 (no TIME_WAIT is
 * ever kept, so a run that used TCP leaves nothing behind). 0, -1, JAIL_NS_STRANDED. */
int jail_netns_prepare(int ns_fd);

#endif
