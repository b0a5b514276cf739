/* SPDX-License-Identifier: MIT */
/*
 * The gateway's control protocol: one codec for the lines airlock-gateway exchanges with
 * whoever started it (host/gw_client.c for a one-shot, daemon/netgw.c for airlockd).
 *
 *   R                  ready: namespace, ruleset and listeners made (the caller may
 *                      clone the sandbox / send its pid)
 *   A [GEN]            attached to the sandbox / policy GEN in force
 *   P                  a pooled gateway is waiting for its claim
 *   E<ERRNO> TEXT      failed: an errno value (1..4095) and a message on one line
 *   PID N              (to the gateway) link the sandbox whose PID 1 is N
 *   POLICY GEN JSON    (to the gateway) put this policy in force as generation GEN
 *
 * Lines end with '\n' and hold no other control character. The parser is strict: a line
 * that is not exactly one of these is refused, never half understood.
 */
#ifndef AL_NET_GWCTL_H
#define AL_NET_GWCTL_H

#include <stddef.h>

#define NET_GWCTL_LINE_MAX (1u << 20) /* the longest line either side accepts ('\n' incl.) */

enum net_gwctl_kind {
	NET_GWCTL_READY,
	NET_GWCTL_ATTACHED,
	NET_GWCTL_POOLED,
	NET_GWCTL_ERROR,
	NET_GWCTL_POLICY,
	NET_GWCTL_PID,
};

struct net_gwctl {
	enum net_gwctl_kind kind;
	int code;		/* ERROR: the errno value */
	unsigned long long gen; /* ATTACHED (0: none given), POLICY; PID: the pid (> 0) */
	const char *text;	/* ERROR: the message; POLICY: the JSON. Parsed: points into
				 * the line; sent: any text (control characters become ' ') */
};

/* One line, without its '\n': 0 and *m filled, or -1 (malformed). */
int net_gwctl_parse(const char *line, struct net_gwctl *m);
/* Write m as one line to fd (a message over NET_GWCTL_LINE_MAX is cut): 0, or -1 with
 * errno. Safe in a vfork child (no allocation for lines under 1 KiB). */
int net_gwctl_send(int fd, const struct net_gwctl *m);

#endif
