/* SPDX-License-Identifier: MIT */
/*
 * Starting a sandbox's egress gateway as its own process (airlock-gateway,
 * next to the airlock binary), so that `airlock run` itself links nothing of
 * the network stack (libnftables, threads) and a crash of the gateway cannot
 * take the caller with it. Fail closed: nothing is routed, so when the
 * gateway dies nothing flows.
 *
 * Control channel (a socketpair, the gateway's fd 3): the gateway writes
 * "R\n" when ready or "E<errno> <message>\n"; the caller then sends the
 * sandbox's pid as text + "\n", the gateway makes the link (its sandbox end born
 * in the sandbox's namespace) and answers "A\n"
 * or an E line; from then on it serves until the channel closes.
 */
#ifndef AL_NET_GW_CLIENT_H
#define AL_NET_GW_CLIENT_H

#include <airlock/airlock.h>
#include <sys/types.h>

struct gw_client;

/* Spawn and wait until ready. An invalid policy is EINVAL with the gateway's message. */
int gw_client_start(const struct al_config *cfg, const char *sandbox_id, int log_fd,
		    struct gw_client **out, struct al_error **err);
int gw_client_attach(struct gw_client *c, pid_t pid, struct al_error **err);
/* The sandbox CA's certificate (PEM) when the policy has per-request rules, else NULL. */
const char *gw_client_ca_pem(const struct gw_client *c);
/* Close the channel, wait for the gateway to exit, free. NULL is fine. */
void gw_client_stop(struct gw_client *c);

#endif
