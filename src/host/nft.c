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

#include <errno.h>
#include <linux/netlink.h>
#include <sys/socket.h>
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
