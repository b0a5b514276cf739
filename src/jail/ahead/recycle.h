/* SPDX-License-Identifier: MIT */
/*
 * Recycled network namespaces for one-shots (`airlock run`): a deny-all run's loopback-only
 * namespace, and an allowlisted run's linked pair (the sandbox's namespace and its
 * gateway's, with the link and the ruleset), are reused by the next run of the same kind
 * only once they are proven to carry nothing over but counters (docs/security.md,
 * "Recycled network namespaces").
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
 * A linked pair: the sandbox never held a capability over either namespace, and its gateway
 * (airlock's own, R2 in docs/security.md) is dead before the check. Both sides are checked
 * as above (their link, addresses and routes as made, no TIME_WAIT: the link's ends keep
 * none, host/link.h), the neighbour entries of the link deleted, the gateway's conntrack
 * table flushed, and its ruleset's generation is the one it was born with (no change since
 * its one transaction). The ruleset's log rate limit is state a sandbox can drain: a pair
 * rests JAIL_RECYCLE_REST_MS after a run (the limit's whole burst back) before it is taken.
 *
 * A pair put back by a detached check (jail_recycle_release_detached) gets a gateway of
 * its own waiting in its gateway namespace, started after the check and before the pair
 * is ready: airlock-gateway-lite --pool-serve ENTRY/gw-ID.sock, ID naming that binary.
 * The next rules-free run with the same gateway binary next to it hands it its policy,
 * sandbox id and egress-log fd over that socket instead of starting one, as with an entry
 * of the one-shot pool (pool.h). That gateway never served anyone: one is started per
 * put-back, and it exits with the run that claimed it. A run whose policy has rules (the
 * full gateway), or with another gateway binary, takes only pairs without one: never a
 * second gateway beside a waiting one. A run that cannot claim a pair's waiting gateway
 * destroys the pair and makes its own. Destroying a ready pair (expired, drained) sends
 * its waiting gateway away. A waiting gateway nobody claims for JAIL_RECYCLE_IDLE_S takes
 * its pair out of ready/ (rename into claimed/idle-NAME, as a run would) and leaves; the
 * pool's next sweep destroys that pair. So no gateway outlives a minute of idleness.
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
 *   ROOT/link-VERSION/...      linked pairs, the same three directories; an entry holds
 *                              `ns` (the sandbox's) and `gw` (its gateway's), and
 *                              `gw-ID.sock` while a gateway waits there; its mtime is when
 *                              it was put back. VERSION hashes the ruleset, the
 *                              link's addresses and the entry's layout.
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
#define JAIL_RECYCLE_REST_MS 120 /* the ruleset's log limit: a burst of 5 at 50/s is 100 ms */
#define JAIL_RECYCLE_IDLE_S 60	 /* a pair unused this long is destroyed (4 stay ready) */

/* Where a run's namespace came from, and so what happens to it at the end. */
enum jail_recycle_state {
	JAIL_RECYCLE_OFF,     /* not recycled: made and destroyed as always */
	JAIL_RECYCLE_CLAIMED, /* taken from ROOT/ready: checked, then back or destroyed */
	JAIL_RECYCLE_FRESH,   /* made for this run: checked, then adopted or destroyed */
};

struct jail_recycle {
	enum jail_recycle_state state;
	bool link;	   /* a linked pair (an allowlist), not a loopback-only namespace */
	int fd;		   /* the namespace (CLAIMED: to join; FRESH: once known), or -1 */
	int gw_fd;	   /* link: its gateway's namespace (CLAIMED, or FRESH once known), or -1 */
	char log[200];	   /* ROOT, where the log is */
	char root[220];	   /* where its ready/, claimed/ and new/ are: ROOT or ROOT/link-VERSION */
	char entry[300];   /* CLAIMED: ROOT/claimed/PID-NAME */
	char gw_path[320]; /* link, CLAIMED: ENTRY/gw, for its gateway to join */
	char gw_name[24];  /* link: gw-ID.sock, where a gateway of ours waits ("": none) */
	char gw_sock[330]; /* link, CLAIMED: ENTRY/gw_name if a gateway of ours waits there */
	bool gateway;	   /* release: start a waiting gateway in a pair before it is ready */
	int gateway_nice;  /* at this nice value */
};

/* ROOT: root, else $AIRLOCK_NETNS_POOL, else JAIL_RECYCLE_ROOT (a relative path counts as
 * none). NULL while JAIL_RECYCLE_OFF_FILE exists, or if the path is too long. */
const char *jail_recycle_root(const char *root, char *buf, size_t len);
/* Take a ready namespace (link: a ready pair rested JAIL_RECYCLE_REST_MS; with
 * waiting_ok false, only one without a waiting gateway): CLAIMED with c->fd (and
 * c->gw_fd, c->gw_path, c->gw_sock), else FRESH (the run makes its own and may hand it in
 * with jail_recycle_adopt_fd, and for a pair jail_recycle_adopt_gw_fd). Never blocks;
 * never fails. */
void jail_recycle_claim(const char *root, bool link, bool waiting_ok, struct jail_recycle *c);
/* CLAIMED: the claim is given up (why: logged) and destroyed; FRESH from now on. */
void jail_recycle_give_up(struct jail_recycle *c, const char *why);
/* FRESH: the run's own namespace (a copy of fd is kept). */
void jail_recycle_adopt_fd(struct jail_recycle *c, int fd);
/* FRESH link: its gateway's namespace (a copy of fd is kept; not if it is this thread's). */
void jail_recycle_adopt_gw_fd(struct jail_recycle *c, int fd);
/* After the run, every process of the sandbox dead: the namespace checked and put back
 * (or adopted), or destroyed and logged. Closes c->fd. 0 when put back or adopted, 1 when
 * destroyed or left as it was (a full pool); JAIL_NS_STRANDED when this thread could not
 * leave the namespace it checked (the caller must exit). */
int jail_recycle_release(struct jail_recycle *c);
/* What else a detached check's child does first, for a caller about to exit (the run's
 * cgroups removed): fn(arg) in the child, before the check. */
struct jail_recycle_also {
	void (*fn)(void *arg);
	void *arg;
};
/* The same in a detached child (its own session, stdio on /dev/null, every other fd of the
 * caller closed), for a caller about to exit: its exit does not wait for the check. wait_fd
 * (a pidfd: a pair's gateway; -1: none) is sent SIGKILL and its exit awaited before the
 * check, by the child: a caller that also holds the gateway's channel closes it only after
 * this returns (the child holds a copy until the signal is sent), so that the caller wakes
 * nothing whose work would land on its CPU ahead of its own exit. *last_fd (-1: none) is an
 * fd whose last close is work (the sandbox's mount namespace: its unmounts): with a child,
 * the caller's copy is closed before the child is let go and the child's after, so that
 * work is the child's; -1 on return in every case. *taken: whether a child took the work,
 * `also` included (else nothing of `also` was done). Returns 1 (nothing to tell the
 * caller), or, when no child could be made, what jail_recycle_release returns (the gateway
 * killed and awaited here first). */
int jail_recycle_release_detached(struct jail_recycle *c, int wait_fd, int *last_fd,
				  const struct jail_recycle_also *also, bool *taken);
/* A pair's gateway ended before its check: SIGKILL through pidfd (-1: none), and its exit
 * awaited (up to 5 s). */
void jail_recycle_end_gateway(int pidfd);
/* Wait until every check under way (detached or not) is done. */
void jail_recycle_settle(const char *root);
/* Destroy claims of runs that no longer exist (ROOT's, and its pairs' of every version).
 * Returns how many. */
int jail_recycle_sweep(const char *root);
/* Destroy every ready namespace and pair and every dead run's claim. Returns how many. */
int jail_recycle_drain(const char *root);
/* How many are ready: loopback-only namespaces, and (link != NULL) pairs of this build. */
unsigned jail_recycle_count(const char *root, unsigned *link);

/* netns_clean.c: in namespace ns_fd, from inside: does anything of a sandbox remain?
 * 0: clean (then its TCP metrics are flushed), 1: not (why says what), -1: could not
 * tell (why too), JAIL_NS_STRANDED: this thread could not get back to its namespace.
 * recycled: the namespace was prepared for reuse (jail_netns_prepare) before. */
int jail_netns_clean(int ns_fd, bool recycled, char *why, size_t len);
/* The same for a linked pair, both sides (recycle.h): 0 clean (then its neighbour
 * entries are deleted, its gateway's conntrack table flushed, the TCP metrics of both
 * flushed), 1 not, -1 could not tell, JAIL_NS_STRANDED. */
int jail_netns_clean_link(int sbx_fd, int gw_fd, char *why, size_t len);
/* Make a namespace ready for reuse: net.ipv4.tcp_max_tw_buckets = 0 (no TIME_WAIT is
 * ever kept, so a run that used TCP leaves nothing behind). 0, -1, JAIL_NS_STRANDED. */
int jail_netns_prepare(int ns_fd);

#endif
