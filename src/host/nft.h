/* SPDX-License-Identifier: MIT */
/* The gateway namespace's nftables ruleset: one atomic transaction, built at build time. */
#ifndef AL_HOST_NFT_H
#define AL_HOST_NFT_H

#include <airlock/airlock.h>
#include <stddef.h>
#include <stdint.h>

/*
 * In the calling thread's network namespace (the gateway's): a `table inet
 * airlock` with policy drop everywhere. From the sandbox link (NET_GW_LINK)
 * only DNS and the explicit proxy port on the gateway address are accepted,
 * with the sandbox's own source address (no spoofing); every other TCP
 * connection is redirected to the transparent proxy port; nothing is
 * forwarded, no UDP but DNS, no ICMP, no IPv6. Sends the bytes of
 * gw_nft_batch.h (tools/gen_nft_batch.c) and checks every acknowledgement.
 */
int net_nft_apply(struct al_error **err);
/* The nf_tables generation of the calling thread's network namespace (1 in a new one; each
 * transaction adds 1, so a gateway's namespace whose ruleset is as it was made has 2). 0,
 * or -1. */
int net_nft_generation(uint32_t *gen);
#define NET_NFT_GEN_MADE 2u
/* Delete every conntrack entry of the calling thread's network namespace. 0, or -1. */
int net_ct_flush(void);

/*
 * Build time only (tools/nft_build.c, with libnftnl): the transaction's netlink
 * messages into buf[0..size), sequence numbers from first_seq (the batch's begin),
 * its length in *len and the number of acknowledgements to expect (every message
 * between begin and end asks for one) in *n_acks. 0, or -ENOMEM if size is too small.
 */
int net_nft_build(void *buf, size_t size, uint32_t first_seq, size_t *len, uint32_t *n_acks);

#endif
