/* SPDX-License-Identifier: MIT */
/*
 * What the ruleset drops, in the egress log: the drop rules of the gateway's
 * table carry `log group 1 prefix "<reason>"`, and this NFLOG listener (a
 * netlink socket made in the gateway namespace) turns each packet into a
 * decision line: layer "nft", verdict deny, the rule's reason, the packet's
 * destination. The log's rate limit turns floods into a counter.
 */
#include "gateway/gw.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NFLOG_GROUP 1

static int config(int fd, uint16_t type_attr, const void *data, size_t len, uint8_t family)
{
	char buf[256] __attribute__((aligned(4))) = {0};
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	struct nfgenmsg *g = NLMSG_DATA(h);
	struct nlattr *a;

	h->nlmsg_len = NLMSG_LENGTH(sizeof(*g));
	h->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	h->nlmsg_flags = NLM_F_REQUEST;
	g->nfgen_family = family;
	g->version = NFNETLINK_V0;
	g->res_id = htons(NFLOG_GROUP);
	a = (struct nlattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));
	a->nla_type = type_attr;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, data, len);
	h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
	return send(fd, buf, h->nlmsg_len, 0) == (ssize_t)h->nlmsg_len ? 0 : -1;
}

int gw_nflog_open(struct al_error **err)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
	struct nfulnl_msg_config_mode mode = {.copy_range = htonl(96),
					      .copy_mode = NFULNL_COPY_PACKET};
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

	if (fd < 0)
		return al_error_set(err, errno, "socket(NETLINK_NETFILTER)");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    config(fd, NFULA_CFG_CMD, &cmd, sizeof(cmd), AF_UNSPEC) < 0 ||
	    config(fd, NFULA_CFG_MODE, &mode, sizeof(mode), AF_UNSPEC) < 0 ||
	    config(fd, NFULA_CFG_QTHRESH, &(uint32_t){htonl(1)}, 4, AF_UNSPEC) < 0 ||
	    config(fd, NFULA_CFG_TIMEOUT, &(uint32_t){0}, 4, AF_UNSPEC) < 0) {
		int e = errno;
		close(fd);
		return al_error_set(err, e, "NFLOG group %d", NFLOG_GROUP);
	}
	return fd;
}

/* One logged packet: the rule's reason (prefix) and where the packet was going. */
static void handle_packet(struct net_gateway *g, struct nlmsghdr *h)
{
	struct nfgenmsg *gm = NLMSG_DATA(h);
	char *p = (char *)gm + NLMSG_ALIGN(sizeof(*gm));
	char *end = (char *)h + h->nlmsg_len;
	const uint8_t *pkt = NULL;
	size_t pkt_len = 0;
	char reason[64] = "dropped";
	struct net_addr dst = {0};
	bool have_dst = false;
	int port = 0;

	while (p + NLA_HDRLEN <= end) {
		struct nlattr *a = (struct nlattr *)p;
		size_t alen = a->nla_len;

		if (alen < NLA_HDRLEN || p + alen > end)
			break;
		if ((a->nla_type & NLA_TYPE_MASK) == NFULA_PREFIX)
			snprintf(reason, sizeof(reason), "%.*s", (int)(alen - NLA_HDRLEN - 1),
				 p + NLA_HDRLEN);
		else if ((a->nla_type & NLA_TYPE_MASK) == NFULA_PAYLOAD)
			pkt = (const uint8_t *)p + NLA_HDRLEN, pkt_len = alen - NLA_HDRLEN;
		p += NLA_ALIGN(alen);
	}
	/* SAFETY: every read below is bounds-checked against pkt_len. */
	if (pkt && pkt_len >= 20 && (pkt[0] >> 4) == 4) {
		size_t ihl = (size_t)(pkt[0] & 0x0f) * 4;

		dst.family = AF_INET;
		memcpy(dst.bytes, pkt + 16, 4);
		have_dst = true;
		if ((pkt[9] == IPPROTO_TCP || pkt[9] == IPPROTO_UDP) && pkt_len >= ihl + 4)
			port = (pkt[ihl + 2] << 8) | pkt[ihl + 3];
	} else if (pkt && pkt_len >= 40 && (pkt[0] >> 4) == 6) {
		dst.family = AF_INET6;
		memcpy(dst.bytes, pkt + 24, 16);
		have_dst = true;
	}
	(void)gm;
	gw_log(g,
	       &(struct gw_event){
		   .layer = "nft", .reason = reason, .addr = have_dst ? &dst : NULL, .port = port});
}

void *gw_nflog_main(void *arg)
{
	struct net_gateway *g = arg;
	char buf[8192] __attribute__((aligned(4)));

	while (gw_wait(g, g->fd_nflog, POLLIN, -1) == 0) {
		ssize_t n = recv(g->fd_nflog, buf, sizeof(buf), MSG_DONTWAIT);
		struct nlmsghdr *h;

		if (n <= 0)
			continue;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n))
			if (h->nlmsg_type == ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
				handle_packet(g, h);
	}
	return NULL;
}
