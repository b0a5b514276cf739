/* SPDX-License-Identifier: MIT */
/*
 * Starting a sandbox's egress gateway as its own process (airlock-gateway,
 * next to the airlock binary), so that `airlock run` itself links nothing of
 * the network stack (libnftnl, threads) and a crash of the gateway cannot
 * take the caller with it. Fail closed: nothing is routed, so when the
 * gateway dies nothing flows.
 *
 * Control channel (a socketpair, the gateway's fd 3): the gateway writes
 * "R\n" when ready or "E<errno> <message>\n"; the caller then sends the
 * sandbox's pid as text + "\n", the gateway makes the link (its sandbox end born
 * in the sandbox's namespace, configured from outside) and answers "A\n"
 * or an E line; from then on it serves until the channel closes.
 *
 * The gateway starts while the sandbox is being built: gw_client_start() does
 * not wait; gw_client_ready() does (before the clone only when the sandbox needs
 * the CA the gateway makes). The sandbox's pid can be sent as soon as it exists;
 * gw_client_step() then follows the replies from an event loop (the relay).
 */
#ifndef AL_HOST_GW_CLIENT_H
#define AL_HOST_GW_CLIENT_H

#include <airlock/airlock.h>
#include <stdbool.h>
#include <sys/types.h>

struct gw_client;

/* NAME in the directory of the running binary (a heap string; NAME itself if that
 * directory cannot be read). */
char *gw_sibling(const char *name);
/* Start a gateway binary, vfork-style: ctl becomes its fd 3 (the control channel), log_fd
 * its fd 4 (-1: none), every other fd is closed. If it cannot be run, an E line on the
 * channel says why (hint appended). Returns its pid, or -1 with errno. */
/* A --policy longer than GW_POLICY_ARGV_MAX goes to the gateway as --policy-fd 5 (a memfd). */
#define GW_POLICY_ARGV_MAX (64 * 1024)
#define GW_POLICY_FD 5
#define GW_POLICY_FD_ARG "5"
pid_t gw_exec(const char *path, const char *const *argv, int ctl, int log_fd, const char *hint);

/* Spawn; does not wait. A policy surely without per-request rules (no_rules:
 * jail_policy_without_rules) gets airlock-gateway-lite, when it is next to airlock, and no
 * CA. pooled_netns: the gateway namespace of a pool entry (jail/ahead/pool.h), or NULL. */
int gw_client_start(const struct al_config *cfg, bool no_rules, const char *sandbox_id, int log_fd,
		    const char *pooled_netns, struct gw_client **out, struct al_error **err);
/* Claim the gateway a pool entry made ahead, waiting at sock_path (jail/ahead/pool.h: the lite
 * gateway, so only for a policy surely without rules): it takes the policy, sandbox id,
 * upstream settings and log fd, and from then on is like one started. -1 (nothing to
 * report: the caller starts one instead) if there is none, or it is gone. */
int gw_client_start_pooled(const struct al_config *cfg, bool no_rules, const char *sandbox_id,
			   int log_fd, const char *sock_path, struct gw_client **out);
/* Wait until ready (once; later calls return 0). An invalid policy is EINVAL with the
 * gateway's message. */
int gw_client_ready(struct gw_client *c, struct al_error **err);
/* Link sandbox pid; do not wait. */
int gw_client_send_pid(struct gw_client *c, pid_t pid, struct al_error **err);
/* The control channel, to poll for reading; then gw_client_step(): 1 once the link is made,
 * 0 while not yet, -1 with err (the gateway failed, or exited). */
int gw_client_fd(const struct gw_client *c);
int gw_client_step(struct gw_client *c, struct al_error **err);
/* Did the gateway refuse the policy itself (the caller's mistake, not a set-up failure)? */
bool gw_client_policy_refused(const struct gw_client *c);
/* The sandbox CA's certificate (PEM) when the policy has per-request rules, else NULL
 * (known once ready). */
const char *gw_client_ca_pem(const struct gw_client *c);
/* Close the channel: the gateway finishes and exits. NULL is fine. */
void gw_client_close(struct gw_client *c);
/* Close the channel (if not yet), wait for the gateway to exit, free. NULL is fine. */
void gw_client_stop(struct gw_client *c);
/* A pidfd of the gateway (a new fd), or -1. */
int gw_client_pidfd(const struct gw_client *c);
/* The gateway's network namespace, as it sent it with its "A" (c's fd, valid while c
 * lives), or -1. */
int gw_client_netns(const struct gw_client *c);
/* Close our end of the channel and free c, neither waiting nor killing: for a gateway
 * whose channel another process holds too (an OCI container's PID 1, src/oci/), which
 * serves until that one's end closes. */
void gw_client_release(struct gw_client *c);
/* For a caller about to exit, when nothing the gateway would still write is wanted (no
 * egress log): SIGKILL it and free c without waiting for its exit (~0.3 ms here). */
void gw_client_abandon(struct gw_client *c);
/* The same, left to another process: free c without a word to the gateway, handing over
 * its channel (*ctl) and a pidfd of it (*pidfd), each -1 if none. Whoever holds them
 * SIGKILLs it through *pidfd before closing *ctl: the channel's end or the signal wakes the
 * gateway, and a gateway woken on the caller's CPU would run its exit (~0.3 ms) ahead of
 * the caller's own (jail/ahead/recycle.h, jail_recycle_release_detached). */
void gw_client_hand_over(struct gw_client *c, int *ctl, int *pidfd);

#endif
