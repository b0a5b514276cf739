/* SPDX-License-Identifier: MIT */
/*
 * The one-shot pool: namespaces made ahead for `airlock run`, so that a run joins
 * finished ones instead of making them: its network namespace (~0.5 ms; for an
 * allowlist also the gateway's, its ruleset and the link), and the root of a sandbox
 * with default settings (a mount namespace, pivoted into its own tmpfs). Both are also
 * torn down off the caller's path: the refill that unpins them drops the last reference.
 *
 * Opt-in: nothing is pooled until `airlock pool fill` (src/cli/pool.c) writes the
 * pool's size. Layout, under ROOT (default /run/airlock/pool, $AIRLOCK_POOL):
 *
 *   ROOT/VERSION/size            how many entries of each kind to keep ready
 *   ROOT/VERSION/lock            held (flock) by whoever fills
 *   ROOT/VERSION/loopback/ID/sbx a namespace with loopback up (deny-all runs)
 *   ROOT/VERSION/link/ID/sbx     a sandbox namespace whose eth0 is configured ...
 *   ROOT/VERSION/link/ID/gw      ... and its gateway's namespace: gw0, the ruleset
 *   ROOT/VERSION/link/ID/gw.sock where a gateway made ahead in it waits to be claimed
 *                                (airlock-gateway-lite --pool-serve; host/gw_client.h)
 *   ROOT/VERSION/KIND/ID/mnt     the sandbox's root (jail_rootfs_ahead, default settings;
 *                                a run whose settings differ makes its own)
 *   ROOT/VERSION/claimed/ID      entries taken, waiting to be unmounted
 *   ROOT/VERSION/new/ID          entries being made (never claimed from here)
 *
 * Each namespace is pinned by a bind mount of its nsfs file. An entry is taken by
 * rename(2) into claimed/, which only one caller can win, and is never put back: a
 * namespace serves one sandbox at most. VERSION names the build's ruleset, addresses
 * and binary, so a new build never joins an old build's namespaces.
 */
#ifndef AL_JAIL_POOL_H
#define AL_JAIL_POOL_H

#include <airlock/airlock.h>
#include <stdbool.h>
#include <stddef.h>

#define JAIL_POOL_ROOT "/run/airlock/pool"
#define JAIL_POOL_MAX_SIZE 64u

enum jail_pool_kind { JAIL_POOL_LOOPBACK, JAIL_POOL_LINK };

struct jail_pool_claim {
	bool held;
	int sbx_fd;	   /* the sandbox's network namespace */
	int mnt_fd;	   /* its root: a mount namespace (both closed by release) */
	char dir[200];	   /* the pool's version directory */
	char entry[300];   /* the claimed entry's directory */
	char gw_path[320]; /* its gateway namespace file (JAIL_POOL_LINK) */
	char gw_sock[320]; /* where its gateway made ahead waits (JAIL_POOL_LINK; may be gone) */
	bool no_refill;	   /* release discards the entry but makes no new one */
	bool refill_only;  /* none was taken, but the pool is on: release refills it */
};

/* ROOT/VERSION for root (NULL: $AIRLOCK_POOL, else JAIL_POOL_ROOT). 0, or -1 if too long. */
int jail_pool_dir(const char *root, char *buf, size_t len);
/* The size `airlock pool fill` set (0: no pool here). */
unsigned jail_pool_size(const char *dir);
/* Take one ready entry of a kind: true if one was taken (c filled), false if the pool is
 * off, empty (then c->refill_only), or the entry was not sound (then it is discarded).
 * Never blocks. */
bool jail_pool_claim(const char *dir, enum jail_pool_kind kind, struct jail_pool_claim *c);
/* Does the pooled root suit a sandbox of these settings (no --image, --file, --workdir,
 * --disk or --hostname of its own, and no CA to install)? */
bool jail_pool_root_fits(const struct al_config *cfg, bool needs_ca);
/* After the run: a detached process (its own session, stdio on /dev/null, niced) unmounts
 * the claimed entry, if any, and tops the pool up (not with c->no_refill); the caller
 * does not wait for it. */
void jail_pool_release(struct jail_pool_claim *c);
/* Set the size and make entries until that many of each kind are ready (waits for a
 * filler already at work). Returns the number made, or -1 with err. */
int jail_pool_fill(const char *dir, unsigned size, struct al_error **err);
/* How many of each kind are ready. */
void jail_pool_count(const char *dir, unsigned *loopback, unsigned *link);
/* Unmount and remove every entry of every version under root, and the size: the pool is
 * off. Returns the number of namespaces released, or -1 with err. */
int jail_pool_drain(const char *root, struct al_error **err);
/* A gateway made ahead in the gateway namespace DIR/gw, listening on DIR/SOCK_NAME for
 * the run that claims it (airlock-gateway-lite --pool-serve: a deny-all policy and its
 * seccomp filter until then); returns once it listens: true, or false (nothing left
 * running). Its pid is not kept: it leaves when a connection closes without a claim, once
 * its socket is gone, or (idle_exit_s > 0, a recycled pair's, recycle.h) when nobody
 * claimed it for idle_exit_s seconds. */
bool jail_pool_start_gateway(const char *dir, const char *sock_name, unsigned idle_exit_s);
/* Tell the gateway waiting on DIR/SOCK, if there is one, to leave (a connection closed
 * without a claim), and remove the socket. */
void jail_pool_stop_gateway(const char *dir, const char *sock);

#endif
