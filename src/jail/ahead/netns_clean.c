/* SPDX-License-Identifier: MIT */
/*
 * Is a deny-all sandbox's network namespace as the sandbox found it (recycle.h)? Read
 * from inside: this thread joins it, reads its /proc/thread-self/net files, and comes
 * back. The sandbox had no capability over the namespace (made in the initial user
 * namespace), so what it can leave is sockets and what sockets fill; the checks look for
 * those, and for any change it could only have made with a capability (defence in depth).
 */
#include "jail/ahead/recycle.h"
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "host/link.h"
#include "host/nft.h"
#include "net/contract.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/tcp_metrics.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { FILE_MAX = 16384 };

/* The whole file into buf (NUL-terminated): its length, -1 if absent, -2 if too long. */
static ssize_t slurp(const char *path, char *buf)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t r;

	if (fd < 0)
		return -1;
	while ((r = read(fd, buf + n, FILE_MAX - 1 - n)) > 0)
		if ((n += (size_t)r) >= FILE_MAX - 1)
			return -2;
	if (r < 0)
		return -1;
	buf[n] = '\0';
	return (ssize_t)n;
}

static int dirty(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return 1;
}

/* Lines after the first `skip` (the headers). */
static unsigned lines_after(const char *s, unsigned skip)
{
	unsigned n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n > skip ? n - skip : 0;
}

/* sockstat and sockstat6: every "inuse" and "tw" count of this namespace 0 (TCP, UDP,
 * UDP-Lite and raw sockets of IPv4 and IPv6 that are bound, listening or connected,
 * orphans in FIN_WAIT or LAST_ACK included; and TIME_WAIT). Not "sockets:
 * used": it counts sockets until they are freed, which for netlink sockets and TCP
 * listeners waits for an RCU grace period (with lazy RCU, seconds) after their release;
 * a released socket is in no table and holds nothing anyone could reach. */
static int check_sockstat(const char *name, char *buf, char *why, size_t len)
{
	static const char *const keys[] = {"inuse ", "tw "};
	char path[64];

	snprintf(path, sizeof(path), "/proc/thread-self/net/%s", name);
	if (slurp(path, buf) < 0)
		return dirty(why, len, "cannot read %s", name);
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++)
		for (const char *p = strstr(buf, keys[k]); p; p = strstr(p + 1, keys[k]))
			if (atol(p + strlen(keys[k])) != 0) {
				const char *eol = strchr(p, '\n');
				const char *bol = p;

				while (bol > buf && bol[-1] != '\n')
					bol--;
				return dirty(why, len, "%s: %.*s", name,
					     (int)((eol ? eol : p + strlen(p)) - bol), bol);
			}
	return 0;
}

/* protocols: every protocol's count of this namespace's sockets 0. One file for every
 * kind of socket the kernel has (unix, netlink, packet, ping, raw, TCP, UDP, SCTP, vsock
 * and whatever else is loaded), counted when made (TCP and ping when hashed) and uncounted
 * when released; the kernel's own sockets are not counted. A membership of a multicast
 * or anycast group is a socket's and is dropped with it. */
static int check_protocols(char *buf, char *why, size_t len)
{
	char head[3][16];

	if (slurp("/proc/thread-self/net/protocols", buf) < 0)
		return dirty(why, len, "cannot read protocols");
	if (sscanf(buf, "%15s %15s %15s", head[0], head[1], head[2]) != 3 ||
	    strcmp(head[0], "protocol") != 0 || strcmp(head[2], "sockets") != 0)
		return dirty(why, len, "protocols: a header not understood: %.60s", buf);
	for (const char *l = strchr(buf, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		char name[32];
		unsigned size;
		long n;

		if (sscanf(l + 1, "%31s %u %ld", name, &size, &n) != 3)
			return dirty(why, len, "protocols: a line not understood: %.60s", l + 1);
		if (n != 0)
			return dirty(why, len, "protocols: %ld %s socket%s", n, name,
				     n == 1 ? "" : "s");
	}
	return 0;
}

/* What outlives a socket: a flow label its socket let linger (the header alone). And no
 * anycast address (no header). */
static int check_lingering(char *buf, char *why, size_t len)
{
	ssize_t n = slurp("/proc/thread-self/net/ip6_flowlabel", buf);

	/* absent: no IPv6 in this kernel */
	if (n != -1 && (n < 0 || lines_after(buf, 1) > 0))
		return dirty(why, len, "ip6_flowlabel has %u entries",
			     n < 0 ? 999u : lines_after(buf, 1));
	if (slurp("/proc/thread-self/net/anycast6", buf) > 0)
		return dirty(why, len, "an anycast address: %.80s", buf);
	return 0;
}

/* What a namespace's configuration must be: its links (lo first), the routes of its main
 * IPv4 table, all through `via` (NULL: none). */
struct shape {
	const char *links[2]; /* lo, and the link's end or NULL */
	unsigned routes;
	const char *via;
};

static const struct shape loopback_only = {{"lo", NULL}, 0, NULL};
static const struct shape sandbox_end = {{"lo", NET_SBX_LINK}, 2, NET_SBX_LINK};
static const struct shape gateway_end = {{"lo", NET_GW_LINK}, 1, NET_GW_LINK};

/* /proc/net/dev lists exactly the links of sh, in any order. */
static bool links_are(const char *buf, const struct shape *sh)
{
	unsigned want = sh->links[1] ? 2 : 1, seen = 0;
	const char *l = strchr(buf, '\n');

	l = l ? strchr(l + 1, '\n') : NULL; /* two header lines */
	if (!l || lines_after(buf, 2) != want)
		return false;
	for (; l && l[1]; l = strchr(l + 1, '\n')) {
		const char *name = l + 1 + strspn(l + 1, " ");

		for (unsigned i = 0; i < want; i++) {
			size_t n = strlen(sh->links[i]);

			if (strncmp(name, sh->links[i], n) == 0 && name[n] == ':')
				seen |= 1u << i;
		}
	}
	return seen == (1u << want) - 1;
}

/* /proc/net/route: sh->routes lines, every one through sh->via. */
static bool routes_are(const char *buf, const struct shape *sh)
{
	if (lines_after(buf, 1) != sh->routes)
		return false;
	for (const char *l = strchr(buf, '\n'); l && l[1]; l = strchr(l + 1, '\n'))
		if (strncmp(l + 1, sh->via, strlen(sh->via)) != 0 || l[1 + strlen(sh->via)] != '\t')
			return false;
	return true;
}

/* Only the links of sh, only lo's own IPv6 address (or none: lo down), its routes alone,
 * no neighbour entry, no conntrack entry. */
static int check_config(const struct shape *sh, char *buf, char *why, size_t len)
{
	ssize_t n;

	if (slurp("/proc/thread-self/net/dev", buf) < 0)
		return dirty(why, len, "cannot read dev");
	if (!links_are(buf, sh))
		return dirty(why, len, "a link other than %s%s%s", sh->links[0],
			     sh->links[1] ? " and " : "", sh->links[1] ? sh->links[1] : "");
	n = slurp("/proc/thread-self/net/if_inet6", buf); /* absent: no IPv6 in this kernel */
	if (n != -1 &&
	    (n < 0 || lines_after(buf, 0) > 1 ||
	     (sh == &loopback_only && lines_after(buf, 0) != 1) ||
	     (n > 0 && strncmp(buf, "00000000000000000000000000000001 01 80 10 80", 44) != 0)))
		return dirty(why, len, "an IPv6 address other than lo's ::1: %.80s", buf);
	if (slurp("/proc/thread-self/net/route", buf) < 0 || !routes_are(buf, sh))
		return dirty(why, len, "a route in the main IPv4 table not made with it");
	if (slurp("/proc/thread-self/net/arp", buf) > 0 && lines_after(buf, 1) != 0)
		return dirty(why, len, "a neighbour entry: %.80s", strchr(buf, '\n') + 1);
	if (slurp("/proc/sys/net/netfilter/nf_conntrack_count", buf) > 0 && atol(buf) != 0)
		return dirty(why, len, "%ld conntrack entries", atol(buf));
	if (slurp("/proc/thread-self/net/nf_conntrack_expect", buf) > 0)
		return dirty(why, len, "a conntrack expectation");
	return 0;
}

/* A generic netlink request on nl; its first reply into buf. Length, or -1. */
static ssize_t genl_ask(int nl, uint16_t type, uint8_t cmd, uint8_t version, uint16_t flags,
			const char *name, char *buf, size_t size)
{
	struct {
		struct nlmsghdr n;
		struct genlmsghdr g;
		char attrs[64];
	} req = {.n = {.nlmsg_type = type, .nlmsg_flags = NLM_F_REQUEST | flags, .nlmsg_seq = 1},
		 .g = {.cmd = cmd, .version = version}};
	size_t len = NLMSG_LENGTH(GENL_HDRLEN);

	if (name) {
		struct nlattr *a = (struct nlattr *)((char *)&req + len);

		a->nla_type = CTRL_ATTR_FAMILY_NAME;
		a->nla_len = (uint16_t)(NLA_HDRLEN + strlen(name) + 1);
		memcpy((char *)a + NLA_HDRLEN, name, strlen(name) + 1);
		len += NLA_ALIGN(a->nla_len);
	}
	req.n.nlmsg_len = (uint32_t)len;
	if (send(nl, &req, len, 0) != (ssize_t)len)
		return -1;
	return recv(nl, buf, size, 0);
}

/* Empty the TCP metrics cache (per namespace: the RTT, cwnd and Fast Open cookie kept per
 * peer address after a connection closes, and readable by anyone: 2^24 loopback addresses
 * would carry arbitrary data). 0 also where the kernel has no such cache. */
static int flush_tcp_metrics(char *buf, size_t size)
{
	_cleanup_close_ int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	int family = -1;
	ssize_t n;

	if (nl < 0)
		return -1;
	n = genl_ask(nl, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, 0, TCP_METRICS_GENL_NAME, buf, size);
	if (n < (ssize_t)NLMSG_HDRLEN || !NLMSG_OK(h, (size_t)n))
		return -1;
	if (h->nlmsg_type == NLMSG_ERROR)
		return ((struct nlmsgerr *)NLMSG_DATA(h))->error == -ENOENT ? 0 : -1;
	for (struct nlattr *a = (struct nlattr *)((char *)NLMSG_DATA(h) + GENL_HDRLEN);
	     (char *)a + NLA_HDRLEN <= (char *)h + h->nlmsg_len && a->nla_len >= NLA_HDRLEN;
	     a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))
		if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
			family = *(uint16_t *)((char *)a + NLA_HDRLEN);
	if (family < 0)
		return -1;
	/* DEL without an address: every entry of this namespace (needs CAP_NET_ADMIN over
	 * it, which airlock has and the sandbox had not). */
	n = genl_ask(nl, (uint16_t)family, TCP_METRICS_CMD_DEL, TCP_METRICS_GENL_VERSION, NLM_F_ACK,
		     NULL, buf, size);
	if (n < (ssize_t)NLMSG_HDRLEN || !NLMSG_OK(h, (size_t)n) || h->nlmsg_type != NLMSG_ERROR)
		return -1;
	return ((struct nlmsgerr *)NLMSG_DATA(h))->error == 0 ? 0 : -1;
}

/* Run fn in namespace ns_fd and come back. */
static int in_netns(int ns_fd, int (*fn)(void *), void *arg)
{
	_cleanup_close_ int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int r;

	if (home < 0 || setns(ns_fd, CLONE_NEWNET) < 0)
		return -1;
	r = fn(arg);
	if (setns(home, CLONE_NEWNET) < 0)
		return JAIL_NS_STRANDED;
	return r;
}

struct clean_args {
	bool recycled;
	const struct shape *shape;
	char *why;
	size_t len;
};

/* A link's end: its neighbour entry for the other end deleted (the only address on the
 * link; what it holds is when that end was last heard from). */
static int forget_peer(const struct shape *sh, char *why, size_t len)
{
	const char *peer = sh == &sandbox_end ? NET_GW_ADDR : NET_SBX_ADDR;
	struct al_error *err = NULL;
	struct in_addr a;
	int nl, r;

	inet_pton(AF_INET, peer, &a);
	nl = net_nl_open(&err);
	r = nl < 0 ? -1 : net_neigh_del4(nl, sh->links[1], a, &err);
	if (nl >= 0)
		close(nl);
	if (r < 0)
		dirty(why, len, "%s", err && err->msg ? err->msg : "neighbour");
	al_error_free(err);
	return r < 0 ? 1 : 0;
}

/* The gateway's end: its conntrack table emptied, its ruleset as it was made. */
static int gateway_state(char *why, size_t len)
{
	uint32_t gen = 0;

	if (net_nft_generation(&gen) < 0 || gen != NET_NFT_GEN_MADE)
		return dirty(why, len, "its ruleset changed (nf_tables generation %u)", gen);
	if (net_ct_flush() < 0)
		return dirty(why, len, "its conntrack table could not be flushed");
	return 0;
}

static int clean_in(void *arg)
{
	struct clean_args *a = arg;
	_cleanup_free_ char *buf = malloc(FILE_MAX);
	int r;

	if (!buf)
		return dirty(a->why, a->len, "out of memory");
	if (a->recycled &&
	    (slurp("/proc/sys/net/ipv4/tcp_max_tw_buckets", buf) < 0 || strcmp(buf, "0\n") != 0))
		return dirty(a->why, a->len, "tcp_max_tw_buckets is not 0");
	if (a->shape->links[1] && (r = forget_peer(a->shape, a->why, a->len)) != 0)
		return r;
	if (a->shape == &gateway_end && (r = gateway_state(a->why, a->len)) != 0)
		return r;
	if ((r = check_sockstat("sockstat", buf, a->why, a->len)) != 0 ||
	    (r = check_sockstat("sockstat6", buf, a->why, a->len)) != 0 ||
	    (r = check_protocols(buf, a->why, a->len)) != 0 ||
	    (r = check_lingering(buf, a->why, a->len)) != 0 ||
	    (r = check_config(a->shape, buf, a->why, a->len)) != 0)
		return r;
	/* Last: its own socket is one of this namespace's while it lives. */
	if (flush_tcp_metrics(buf, FILE_MAX) < 0)
		return dirty(a->why, a->len, "the TCP metrics cache could not be flushed");
	return 0;
}

int jail_netns_clean(int ns_fd, bool recycled, char *why, size_t len)
{
	struct clean_args a = {
	    .recycled = recycled, .shape = &loopback_only, .why = why, .len = len};
	int r = in_netns(ns_fd, clean_in, &a);

	if (r == -1)
		snprintf(why, len, "cannot enter it: %s", strerror(errno));
	return r;
}

int jail_netns_clean_link(int sbx_fd, int gw_fd, char *why, size_t len)
{
	char side[160] = "";
	struct clean_args a = {
	    .recycled = true, .shape = &gateway_end, .why = side, .len = sizeof(side)};
	int r = in_netns(gw_fd, clean_in, &a);

	if (r == 0) {
		a.shape = &sandbox_end;
		r = in_netns(sbx_fd, clean_in, &a);
	}
	if (r == -1 && !side[0])
		snprintf(side, sizeof(side), "cannot enter it: %s", strerror(errno));
	if (r != 0 && r != JAIL_NS_STRANDED)
		snprintf(why, len, "%s's end: %s",
			 a.shape == &gateway_end ? "the gateway" : "the sandbox", side);
	return r;
}

static int prepare_in(void *arg)
{
	int fd = open("/proc/sys/net/ipv4/tcp_max_tw_buckets", O_WRONLY | O_CLOEXEC);
	int r = fd >= 0 && write(fd, "0\n", 2) == 2 ? 0 : -1;

	(void)arg;
	if (fd >= 0)
		close(fd);
	return r;
}

int jail_netns_prepare(int ns_fd)
{
	return in_netns(ns_fd, prepare_in, NULL);
}
