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

/* Files that list sockets (or what only a live socket holds): the header alone. Not tcp,
 * tcp6, udp, udp6, udplite, udplite6: those walk the host's whole hash tables (8 ms for
 * tcp on a busy host); sockstat's per-namespace counts of the same sockets stand for
 * them (check_sockstat). */
static const char *const socket_lists[] = {
    "raw", "raw6", "unix", "packet", "icmp", "icmp6", "mcfilter", "mcfilter6", "ip6_flowlabel",
};

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

static int check_lists(char *buf, char *why, size_t len)
{
	char path[64];
	ssize_t n;

	for (size_t i = 0; i < ARRAY_SIZE(socket_lists); i++) {
		snprintf(path, sizeof(path), "/proc/thread-self/net/%s", socket_lists[i]);
		n = slurp(path, buf);
		if (n == -1)
			continue; /* not built into this kernel: nothing of it either */
		if (n < 0 || lines_after(buf, 1) > 0)
			return dirty(why, len, "%s has %u entries", socket_lists[i],
				     n < 0 ? 999u : lines_after(buf, 1));
	}
	/* anycast6 has no header; netlink lists the kernel's own sockets (port 0) too */
	if (slurp("/proc/thread-self/net/anycast6", buf) > 0)
		return dirty(why, len, "an anycast address: %.80s", buf);
	if (slurp("/proc/thread-self/net/netlink", buf) < 0)
		return dirty(why, len, "cannot read netlink");
	for (const char *l = strchr(buf, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		char sk[40];
		unsigned eth;
		long pid;

		if (sscanf(l + 1, "%39s %u %ld", sk, &eth, &pid) != 3 || pid != 0)
			return dirty(why, len, "a netlink socket of a process: %.60s", l + 1);
	}
	return 0;
}

/* Only lo, only its own addresses, nothing in the main IPv4 table, no conntrack entry. */
static int check_config(char *buf, char *why, size_t len)
{
	const char *l;
	ssize_t n;

	if (slurp("/proc/thread-self/net/dev", buf) < 0)
		return dirty(why, len, "cannot read dev");
	l = strchr(buf, '\n');
	l = l ? strchr(l + 1, '\n') : NULL;
	if (!l || lines_after(buf, 2) != 1 || strncmp(l + 1 + strspn(l + 1, " "), "lo:", 3) != 0)
		return dirty(why, len, "a link other than lo");
	n = slurp("/proc/thread-self/net/if_inet6", buf); /* absent: no IPv6 in this kernel */
	if (n != -1 && (n < 0 || lines_after(buf, 0) != 1 ||
			strncmp(buf, "00000000000000000000000000000001 01 80 10 80", 44) != 0))
		return dirty(why, len, "an IPv6 address other than lo's ::1: %.80s", buf);
	if (slurp("/proc/thread-self/net/route", buf) < 0 || lines_after(buf, 1) != 0)
		return dirty(why, len, "a route in the main IPv4 table");
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
	char *why;
	size_t len;
};

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
	if ((r = check_sockstat("sockstat", buf, a->why, a->len)) != 0 ||
	    (r = check_sockstat("sockstat6", buf, a->why, a->len)) != 0 ||
	    (r = check_lists(buf, a->why, a->len)) != 0 ||
	    (r = check_config(buf, a->why, a->len)) != 0)
		return r;
	/* Last: its own socket is one of this namespace's while it lives. */
	if (flush_tcp_metrics(buf, FILE_MAX) < 0)
		return dirty(a->why, a->len, "the TCP metrics cache could not be flushed");
	return 0;
}

int jail_netns_clean(int ns_fd, bool recycled, char *why, size_t len)
{
	struct clean_args a = {.recycled = recycled, .why = why, .len = len};
	int r = in_netns(ns_fd, clean_in, &a);

	if (r == -1)
		snprintf(why, len, "cannot enter it: %s", strerror(errno));
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
