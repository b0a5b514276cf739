/* SPDX-License-Identifier: MIT */
#include "host/link.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "net/contract.h"

#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One request in a flat, aligned buffer (so the compiler sees its real size). */
struct nlreq {
	union {
		struct nlmsghdr h;
		char raw[1024];
	};
};

static void *tail(struct nlreq *r)
{
	return r->raw + NLMSG_ALIGN(r->h.nlmsg_len);
}

static struct rtattr *put_attr(struct nlreq *r, unsigned short type, const void *data, size_t len)
{
	struct rtattr *a = tail(r);

	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(a), data, len);
	r->h.nlmsg_len = NLMSG_ALIGN(r->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
	return a;
}

static void end_nest(struct nlreq *r, struct rtattr *nest)
{
	nest->rta_len = (unsigned short)((char *)tail(r) - (char *)nest);
}

int net_nl_open(struct al_error **err)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0)
		return al_error_set(err, errno, "socket(NETLINK_ROUTE)");
	return fd;
}

/* Send one request and wait for its ACK. */
static int talk(int nl, struct nlreq *r, const char *what, struct al_error **err)
{
	char buf[4096];
	ssize_t n;
	struct nlmsghdr *h;

	r->h.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	r->h.nlmsg_seq++;
	if (send(nl, r, r->h.nlmsg_len, 0) < 0)
		return al_error_set(err, errno, "netlink send (%s)", what);
	n = recv(nl, buf, sizeof(buf), 0);
	if (n < 0)
		return al_error_set(err, errno, "netlink recv (%s)", what);
	for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr *e = NLMSG_DATA(h);
			if (e->error)
				return al_error_set(err, -e->error, "netlink: %s", what);
			return 0;
		}
	}
	return al_error_msg(err, EPROTO, "netlink: no answer to %s", what);
}

static void link_req(struct nlreq *r, unsigned short type, unsigned short flags, int ifindex)
{
	struct ifinfomsg *ifi;

	memset(r, 0, sizeof(*r));
	r->h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
	r->h.nlmsg_type = type;
	r->h.nlmsg_flags = flags;
	ifi = NLMSG_DATA(&r->h);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
}

static int ifindex_of(const char *ifname, struct al_error **err)
{
	unsigned idx = if_nametoindex(ifname);

	if (!idx)
		return al_error_set(err, errno ? errno : ENODEV, "interface '%s'", ifname);
	return (int)idx;
}

int net_veth_create(int nl, const char *name, const char *peer, struct al_error **err)
{
	return net_veth_create_in(nl, name, peer, 0, err);
}

/* The peer goes into the namespace named by attribute ns_attr (a pid or an fd; 0: none).
 * index, peer_index: the two ends' interface indexes (0, 0: the kernel picks). */
static int veth_create(int nl, const char *name, const char *peer, unsigned short ns_attr,
		       uint32_t ns, int index, int peer_index, struct al_error **err)
{
	struct nlreq r;
	struct rtattr *info, *data, *pinfo;
	struct ifinfomsg pifi = {.ifi_family = AF_UNSPEC, .ifi_index = peer_index};
	uint32_t one = 1;

	/*
	 * One queue each way on both ends, said up front. Without it veth makes one per
	 * possible CPU and then cuts each end down to one, and every cut is a
	 * synchronize_net(): two expedited RCU grace periods (~0.06 ms each here, on the
	 * gateway's path to a linked sandbox), for a queue count nothing of ours uses.
	 */
	link_req(&r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, index);
	put_attr(&r, IFLA_IFNAME, name, strlen(name) + 1);
	put_attr(&r, IFLA_NUM_TX_QUEUES, &one, sizeof(one));
	put_attr(&r, IFLA_NUM_RX_QUEUES, &one, sizeof(one));
	info = put_attr(&r, IFLA_LINKINFO, NULL, 0);
	put_attr(&r, IFLA_INFO_KIND, "veth", 4);
	data = put_attr(&r, IFLA_INFO_DATA, NULL, 0);
	pinfo = put_attr(&r, VETH_INFO_PEER, &pifi, sizeof(pifi));
	put_attr(&r, IFLA_IFNAME, peer, strlen(peer) + 1);
	put_attr(&r, IFLA_NUM_TX_QUEUES, &one, sizeof(one));
	put_attr(&r, IFLA_NUM_RX_QUEUES, &one, sizeof(one));
	if (ns_attr) /* born in the sandbox: no move, so no synchronize_net() (~20 ms) */
		put_attr(&r, ns_attr, &ns, sizeof(ns));
	end_nest(&r, pinfo);
	end_nest(&r, data);
	end_nest(&r, info);
	return talk(nl, &r, "create veth", err);
}

/*
 * A pair whose ends live in two fresh namespaces would both get index 2 (after lo), and
 * a veth whose peer's index equals its own looks like a device of no other's to the
 * kernel's link watcher: its carrier change then waits for the watcher's next round, up
 * to a second, before the end counts as running (and the gateway waits for that). With
 * two different indexes the change is urgent and done at once. If either index is taken
 * (a namespace with more devices), the kernel picks them.
 */
static int veth_create_split(int nl, const char *name, const char *peer, unsigned short ns_attr,
			     uint32_t ns, struct al_error **err)
{
	struct al_error *first = NULL;

	if (veth_create(nl, name, peer, ns_attr, ns, NET_VETH_INDEX, NET_VETH_INDEX + 1, &first) ==
	    0)
		return 0;
	if (first->code != EBUSY && first->code != EEXIST) {
		*err = first;
		return -1;
	}
	al_error_free(first);
	return veth_create(nl, name, peer, ns_attr, ns, 0, 0, err);
}

int net_veth_create_in(int nl, const char *name, const char *peer, pid_t peer_pid,
		       struct al_error **err)
{
	if (peer_pid <= 0)
		return veth_create(nl, name, peer, 0, 0, 0, 0, err);
	return veth_create_split(nl, name, peer, IFLA_NET_NS_PID, (uint32_t)peer_pid, err);
}

int net_veth_create_in_fd(int nl, const char *name, const char *peer, int peer_nsfd,
			  struct al_error **err)
{
	return veth_create_split(nl, name, peer, IFLA_NET_NS_FD, (uint32_t)peer_nsfd, err);
}

int net_link_up(int nl, const char *ifname, struct al_error **err)
{
	struct nlreq r;
	struct ifinfomsg *ifi;
	int idx = ifindex_of(ifname, err);

	if (idx < 0)
		return idx;
	link_req(&r, RTM_NEWLINK, 0, idx);
	ifi = NLMSG_DATA(&r.h);
	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP;
	return talk(nl, &r, "link up", err);
}

int net_addr_add4(int nl, const char *ifname, struct in_addr addr, int prefix,
		  struct al_error **err)
{
	struct nlreq r;
	struct ifaddrmsg *ifa;
	int idx = ifindex_of(ifname, err);

	if (idx < 0)
		return idx;
	memset(&r, 0, sizeof(r));
	r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
	r.h.nlmsg_type = RTM_NEWADDR;
	r.h.nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	ifa = NLMSG_DATA(&r.h);
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)prefix;
	ifa->ifa_index = (unsigned)idx;
	put_attr(&r, IFA_LOCAL, &addr, sizeof(addr));
	put_attr(&r, IFA_ADDRESS, &addr, sizeof(addr));
	return talk(nl, &r, "add address", err);
}

int net_neigh_del4(int nl, const char *ifname, struct in_addr addr, struct al_error **err)
{
	struct nlreq r;
	struct ndmsg *nd;
	struct al_error *e = NULL;
	int idx = ifindex_of(ifname, err);

	if (idx < 0)
		return idx;
	memset(&r, 0, sizeof(r));
	r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
	r.h.nlmsg_type = RTM_DELNEIGH;
	nd = NLMSG_DATA(&r.h);
	nd->ndm_family = AF_INET;
	nd->ndm_ifindex = idx;
	put_attr(&r, NDA_DST, &addr, sizeof(addr));
	if (talk(nl, &r, "delete a neighbour", &e) == 0)
		return 0;
	if (e->code == ENOENT) { /* none: nothing was sent on the link */
		al_error_free(e);
		return 0;
	}
	*err = e;
	return -1;
}

int net_route_default4(int nl, struct in_addr gw, struct al_error **err)
{
	struct nlreq r;
	struct rtmsg *rt;

	memset(&r, 0, sizeof(r));
	r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	r.h.nlmsg_type = RTM_NEWROUTE;
	r.h.nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	rt = NLMSG_DATA(&r.h);
	rt->rtm_family = AF_INET;
	rt->rtm_table = RT_TABLE_MAIN;
	rt->rtm_protocol = RTPROT_BOOT;
	rt->rtm_scope = RT_SCOPE_UNIVERSE;
	rt->rtm_type = RTN_UNICAST;
	put_attr(&r, RTA_GATEWAY, &gw, sizeof(gw));
	return talk(nl, &r, "add default route", err);
}

void net_disable_ipv6(const char *ifname)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifname);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, "1", 1);
		close(fd);
	}
}

void net_no_time_wait(void)
{
	int fd = open("/proc/sys/net/ipv4/tcp_max_tw_buckets", O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		(void)!write(fd, "0\n", 2);
		close(fd);
	}
}

int net_sandbox_link_setup(struct al_error **err)
{
	_cleanup_close_ int nl = net_nl_open(err);
	struct in_addr me, gw;

	inet_pton(AF_INET, NET_SBX_ADDR, &me);
	inet_pton(AF_INET, NET_GW_ADDR, &gw);
	if (nl < 0)
		return -1;
	net_disable_ipv6(NET_SBX_LINK);
	net_no_time_wait();
	if (net_addr_add4(nl, NET_SBX_LINK, me, NET_LINK_PREFIX, err) < 0 ||
	    net_link_up(nl, NET_SBX_LINK, err) < 0 || net_route_default4(nl, gw, err) < 0)
		return al_error_wrap(err, "sandbox network link");
	return 0;
}

int net_link_make(int nl, int sbx_ns, struct al_error **err)
{
	struct in_addr gw;

	inet_pton(AF_INET, NET_GW_ADDR, &gw);
	if (net_veth_create_in_fd(nl, NET_GW_LINK, NET_SBX_LINK, sbx_ns, err) < 0 ||
	    net_addr_add4(nl, NET_GW_LINK, gw, NET_LINK_PREFIX, err) < 0)
		return -1;
	net_disable_ipv6(NET_GW_LINK);
	net_no_time_wait();
	if (net_link_up(nl, NET_GW_LINK, err) < 0)
		return -1;
	/* Its end is configured from outside: the sandbox need not wait for the link before
	 * it builds its root, only before its workload starts. */
	if (setns(sbx_ns, CLONE_NEWNET) < 0)
		return al_error_set(err, errno, "enter the sandbox's network namespace");
	return net_sandbox_link_setup(err);
}
