/* SPDX-License-Identifier: MIT */
/*
 * The gateway namespace's ruleset, sent as the netlink bytes tools/gen_nft_batch.c made from
 * tools/nft_build.c at build time (the rules are listed there). One send, then one
 * acknowledgement per message; the kernel applies all of the transaction or none of it.
 */
#include "host/nft.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "gw_nft_batch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* Stop at the first error: the kernel rejected the whole transaction then. */
static int read_acks(int fd, struct al_error **err)
{
	union {
		char b[8192];
		struct nlmsghdr align;
	} buf;
	uint32_t got = 0;

	while (got < GW_NFT_BATCH_ACKS) {
		ssize_t n = recv(fd, buf.b, sizeof(buf.b), 0);
		int left = (int)n;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return al_error_set(err, n < 0 ? errno : EIO,
					    "nft ruleset for the gateway");
		for (struct nlmsghdr *h = &buf.align; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			if (h->nlmsg_type != NLMSG_ERROR)
				continue;
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				return al_error_msg(err, EIO,
						    "nft ruleset for the gateway: short ack");
			if (e->error)
				return al_error_set(
				    err, -e->error,
				    "nft ruleset for the gateway (message %u of %u)",
				    h->nlmsg_seq - GW_NFT_BATCH_FIRST_ACK + 1, GW_NFT_BATCH_ACKS);
			got++;
		}
	}
	return 0;
}

/* One request of netfilter subsystem subsys on a new socket; its first reply into buf.
 * The reply's length, or -1. */
static ssize_t nfnl_ask(uint16_t subsys, uint16_t msg, uint16_t flags, void *buf, size_t size)
{
	struct {
		struct nlmsghdr n;
		struct nfgenmsg g;
	} req = {.n = {.nlmsg_len = sizeof(req),
		       .nlmsg_type = (uint16_t)(subsys << 8 | msg),
		       .nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags),
		       .nlmsg_seq = 1},
		 .g = {.nfgen_family = AF_UNSPEC, .version = NFNETLINK_V0}};
	struct timeval patience = {.tv_sec = 5};
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience)) < 0 ||
	    send(fd, &req, sizeof(req), 0) != (ssize_t)sizeof(req))
		return -1;
	return recv(fd, buf, size, 0);
}

int net_nft_generation(uint32_t *gen)
{
	union {
		char b[512];
		struct nlmsghdr align;
	} buf;
	ssize_t n = nfnl_ask(NFNL_SUBSYS_NFTABLES, NFT_MSG_GETGEN, 0, buf.b, sizeof(buf.b));
	struct nlmsghdr *h = &buf.align;

	if (n < (ssize_t)NLMSG_HDRLEN || !NLMSG_OK(h, (size_t)n) ||
	    h->nlmsg_type != (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWGEN))
		return -1;
	for (struct nlattr *a =
		 (struct nlattr *)((char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct nfgenmsg)));
	     (char *)a + NLA_HDRLEN <= (char *)h + h->nlmsg_len && a->nla_len >= NLA_HDRLEN;
	     a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))
		if ((a->nla_type & NLA_TYPE_MASK) == NFTA_GEN_ID &&
		    a->nla_len >= NLA_HDRLEN + sizeof(uint32_t)) {
			uint32_t be;

			memcpy(&be, (char *)a + NLA_HDRLEN, sizeof(be));
			*gen = ntohl(be);
			return 0;
		}
	return -1;
}

int net_ct_flush(void)
{
	union {
		char b[512];
		struct nlmsghdr align;
	} buf;
	ssize_t n =
	    nfnl_ask(NFNL_SUBSYS_CTNETLINK, IPCTNL_MSG_CT_DELETE, NLM_F_ACK, buf.b, sizeof(buf.b));
	struct nlmsghdr *h = &buf.align;

	if (n < (ssize_t)NLMSG_HDRLEN || !NLMSG_OK(h, (size_t)n) || h->nlmsg_type != NLMSG_ERROR)
		return -1;
	return ((struct nlmsgerr *)NLMSG_DATA(h))->error == 0 ? 0 : -1;
}

int net_nft_apply(struct al_error **err)
{
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	struct timeval patience = {.tv_sec = 10}; /* a missing acknowledgement never hangs us */
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	ssize_t n;

	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience)) < 0)
		return al_error_set(err, errno, "nft ruleset for the gateway: netlink");
	n = sendto(fd, gw_nft_batch, sizeof(gw_nft_batch), 0, (struct sockaddr *)&kernel,
		   sizeof(kernel));
	if (n != (ssize_t)sizeof(gw_nft_batch))
		return al_error_set(err, n < 0 ? errno : EIO, "nft ruleset for the gateway: send");
	return read_acks(fd, err);
}
