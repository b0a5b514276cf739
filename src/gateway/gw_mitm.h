/* SPDX-License-Identifier: MIT */
/* What the TLS-terminating proxy's two halves share: gw_mitm.c (the sandbox's side: its TLS
 * session, the request, the upstream's TLS) and gw_mitm_resp.c (the response: relayed
 * raw, or scanned and redacted when a secret was injected). */
#ifndef AL_GATEWAY_GW_MITM_H
#define AL_GATEWAY_GW_MITM_H

#include "gateway/gw.h"
#include "net/rules.h"

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RESP_HEAD_MAX 65536
#define MAX_INTERIM 16 /* 1xx heads skipped before the final one */

/* A BIO that first replays the ClientHello we already read, then the socket. */
struct replay {
	struct net_gateway *g;
	int fd;
	const char *pre;
	size_t pre_len, pre_off;
};

/* One terminated request. */
struct mitm {
	struct gw_conn *k;
	SSL *cs, *us; /* client (sandbox) side, upstream side */
	struct replay rp;
	char *secrets[NET_SECRET_MAX_TOKENS]; /* net_rule_secret_tokens, longest first */
	size_t n_secrets, max_secret;
	uint64_t redacted; /* secrets overwritten in what went back to the sandbox */
	bool head_req;	   /* the request was HEAD: the response has no body */
};

/* All of p[0..n) into s: 0, or -1. */
int mitm_write_all(SSL *s, const void *p, size_t n);
/* Answer the sandbox inside its TLS session, and log. */
void mitm_answer(struct mitm *m, int status, const char *reason, const char *text);
/* Overwrite every secret in buf[0..n) with '*'. */
void mitm_redact(struct mitm *m, char *buf, size_t n);
/* Relay the upstream's response to the sandbox (gw_mitm_resp.c): raw, or scanned for the
 * injected secrets when there are any. 0, or -1 (the flow is over). */
int mitm_relay_response(struct mitm *m);

#endif
