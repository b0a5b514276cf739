/* SPDX-License-Identifier: MIT */
/*
 * The one-shot pool: network namespaces made ahead for `airlock run`, so that a run
 * joins a finished namespace instead of making one (~0.5 ms each, and for an allowlist
 * also the gateway's ruleset and the link: ~1.5 ms of set-up in all).
 *
 * Opt-in: nothing is pooled until `airlock pool fill` (src/cli/pool.c) writes the
 * pool's size. Layout, under ROOT (default /run/airlock/netpool, $AIRLOCK_NETPOOL):
 *
 *   ROOT/VERSION/size            how many entries of each kind to keep ready
 *   ROOT/VERSION/lock            held (flock) by whoever fills
 *   ROOT/VERSION/loopback/ID/sbx a namespace with loopback up (deny-all runs)
 *   ROOT/VERSION/link/ID/sbx     a sandbox namespace whose eth0 is configured ...
 *   ROOT/VERSION/link/ID/gw      ... and its gateway's namespace: gw0, the ruleset
 *   ROOT/VERSION/claimed/ID      entries taken, waiting to be unmounted
 *   ROOT/VERSION/new/ID          entries being made (never claimed from here)
 *
 * Each namespace is pinned by a bind mount of its nsfs file. An entry is taken by
 * rename(2) into claimed/, which only one caller can win, and is never put back: a
 * namespace serves one sandbox at most. VERSION names the build's ruleset and
 * addresses, so a new build never joins an old build's namespaces.
 */
#ifndef AL_NET_NETPOOL_H
#define AL_NET_NETPOOL_H

#include <airlock/airlock.h>
#include <stdbool.h>
#include <stddef.h>

#define NETPOOL_ROOT "/run/airlock/netpool"
#define NETPOOL_MAX_SIZE 64u

enum netpool_kind { NETPOOL_LOOPBACK, NETPOOL_LINK };

struct netpool_claim {
	bool held;
	int sbx_fd;          /* the sandbox's namespace (the caller closes it) */
	char dir[200];       /* the pool's version directory */
	char entry[300];     /* the claimed entry's directory */
	char gw_path[320];   /* its gateway namespace file (NETPOOL_LINK) */
};

/* ROOT/VERSION for root (NULL: $AIRLOCK_NETPOOL, else NETPOOL_ROOT). 0, or -1 if too long. */
int netpool_dir(const char *root, char *buf, size_t len);
/* The size `airlock pool fill` set (0: no pool here). */
unsigned netpool_size(const char *dir);
/* Take one ready entry of a kind: true if one was taken (c filled), false if the pool is
 * off, empty, or the entry was not sound (then it is discarded). Never blocks. */
bool netpool_claim(const char *dir, enum netpool_kind kind, struct netpool_claim *c);
/* After the run: a detached process (its own session, stdio on /dev/null, niced) unmounts
 * the claimed entry and tops the pool up; the caller does not wait for it. */
void netpool_release(struct netpool_claim *c);
/* Set the size and make entries until that many of each kind are ready (waits for a
 * filler already at work). Returns the number made, or -1 with err. */
int netpool_fill(const char *dir, unsigned size, struct al_error **err);
/* How many of each kind are ready. */
void netpool_count(const char *dir, unsigned *loopback, unsigned *link);
/* Unmount and remove every entry of every version under root, and the size: the pool is
 * off. Returns the number of namespaces released, or -1 with err. */
int netpool_drain(const char *root, struct al_error **err);

#endif
