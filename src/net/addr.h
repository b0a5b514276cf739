/* SPDX-License-Identifier: MIT */
/*
 * IP literals, CIDR ranges and the address vetting of the egress boundary
 * (docs/network.md, docs/security-model.md).
 *
 * Parsing is strict: inet_pton() only. Every legacy numeric spelling that
 * inet_aton() or getaddrinfo() would turn into an address ("2130706433",
 * "0x7f.1", "127.1", "0177.0.0.1", "127.000.0.1", "1.2.3.4 ") is refused.
 *
 * Vetting decides whether the gateway may dial an address, in this order:
 *   1. the gateway, the host and the sandbox pool (struct net_vet_ctx):
 *      always refused, no policy can open them;
 *   2. subnets.deny: refused (deny wins over allow and over an allowed name);
 *   2b. loopback, 0.0.0.0/8 and the unspecified address (and their mapped
 *      forms): always refused -- seen from the gateway they are the gateway;
 *   3. subnets.allow: allowed, even a private or otherwise forbidden range;
 *   4. the other built-in forbidden ranges (link-local,
 *      cloud metadata, RFC 1918, CGNAT, IETF/benchmarking, multicast,
 *      reserved, broadcast; ::, ::1, ULA, link- and site-local, multicast,
 *      Teredo, local-use NAT64, everything outside 2000::/3): refused;
 *   5. otherwise public: allowed. The documentation ranges 192.0.2.0/24,
 *      198.51.100.0/24, 203.0.113.0/24 and 2001:db8::/32 are public here,
 *      because the tests use them as "the internet".
 * An IPv6 address that embeds an IPv4 address (v4-mapped ::ffff:0:0/96,
 * SIIT ::ffff:0:0:0/96, v4-compatible ::/96, NAT64 64:ff9b::/96, 6to4
 * 2002::/16) is refused if either it or the embedded IPv4 address is refused
 * in steps 1, 2 or 4; step 3 looks at the embedded IPv4 address only (an
 * IPv6 CIDR cannot open the IPv4 space through a mapping).
 */
#ifndef AL_NET_ADDR_H
#define AL_NET_ADDR_H

#include <airlock/airlock.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct net_policy;

/* A verdict of the boundary. DENY is zero so that a forgotten value refuses. */
enum net_verdict {
	NET_DENY = 0,
	NET_ALLOW = 1,
};

/* An IP address. family is AF_INET (bytes[0..3], network order) or AF_INET6. */
struct net_addr {
	int family;
	uint8_t bytes[16];
};

/* A CIDR range: addr has every host bit zero; prefix is 0..32 or 0..128. */
struct net_cidr {
	struct net_addr addr;
	unsigned prefix;
};

/*
 * What the policy cannot open: the gateway's own addresses, the host's, the
 * sandbox address pool. Filled by the gateway from its configuration. May be
 * passed as NULL when there is nothing to add.
 */
struct net_vet_ctx {
	const struct net_cidr *forbidden;
	size_t n_forbidden;
};

/* Longest formatted address ("[" + INET6_ADDRSTRLEN + "]/128"). */
#define NET_ADDR_STRLEN 56

/*
 * Parse the len bytes at s as an IP literal: dotted-quad IPv4 as inet_pton()
 * takes it, IPv6, or "[IPv6]" (the bracket form of URI authorities). No zone
 * ids, no spaces, no other spelling. Returns 0, or -EINVAL with err naming
 * the string.
 */
int net_addr_parse(const char *s, size_t len, struct net_addr *out, struct al_error **err);

/* Does the string look like an attempt at an IP literal (only digits, dots, hex, "x",
 * ':' and brackets)? Used to tell "bad address" from "bad name" in messages. */
bool net_addr_looks_literal(const char *s, size_t len);

/* Format a (IPv6 in RFC 5952 form, as inet_ntop writes it) into buf. */
void net_addr_format(const struct net_addr *a, char buf[NET_ADDR_STRLEN]);

/*
 * Parse "ADDR/PREFIX", or a bare ADDR (a /32 or /128). The prefix is decimal
 * without leading zeros and within the family's range. Host bits must be
 * zero: "10.1.2.3/8" is refused (with the network it probably meant), so a
 * policy never says something other than what it does.
 */
int net_cidr_parse(const char *s, size_t len, struct net_cidr *out, struct al_error **err);

/* Format as "ADDR/PREFIX" (always with the prefix). */
void net_cidr_format(const struct net_cidr *c, char buf[NET_ADDR_STRLEN]);

/* Is a inside c? Families must agree (no implicit mapping). */
bool net_cidr_contains(const struct net_cidr *c, const struct net_addr *a);

/* Same range? */
bool net_cidr_equal(const struct net_cidr *a, const struct net_cidr *b);

/* If a is an IPv6 address that embeds an IPv4 address (see above), store it in v4. */
bool net_addr_embedded_v4(const struct net_addr *a, struct net_addr *v4);

/*
 * May the gateway dial a (an address it resolved for an allowed name, or a
 * literal)? See the order above. p may be NULL (no subnets rules); a
 * deny-all policy refuses everything. *reason (if reason is not NULL) is
 * set to a static string from a fixed vocabulary: "gateway", "subnet_deny",
 * "subnet_allow", "public", "deny_all", "loopback", "this_network",
 * "link_local", "metadata", "private", "cgnat", "ietf", "benchmark",
 * "multicast", "reserved", "broadcast", "unspecified", "ula", "site_local",
 * "teredo", "nat64_local", "discard", "unallocated".
 */
enum net_verdict net_addr_vet(const struct net_addr *a, const struct net_policy *p,
			      const struct net_vet_ctx *ctx, const char **reason);

/*
 * The verdict for an IP literal the sandbox stated as a destination
 * (CONNECT 203.0.113.20:443, http://[2001:db8::1]/, a transparent flow's
 * destination): under allow-all, net_addr_vet(); otherwise only when a
 * subnets.allow entry covers it and net_addr_vet() allows it -- an address
 * is never allowed because it belongs to an allowed name. The extra reason
 * is "ip_literal" (public but not covered by subnets.allow).
 */
enum net_verdict net_addr_decide_literal(const struct net_addr *a, const struct net_policy *p,
					 const struct net_vet_ctx *ctx, const char **reason);

#endif
