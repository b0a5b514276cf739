/* SPDX-License-Identifier: MIT */
/*
 * DNS messages at the sandbox boundary (docs/design/parsers.md).
 *
 * Three jobs:
 *
 *  1. net_dns_parse_query() reads a query that code in a sandbox sent to the
 *     gateway resolver. It is strict: exactly one question, QR=0, opcode
 *     QUERY, no AA/TC/Z bits, RCODE 0, no answer or authority records, at
 *     most one additional record and that one an EDNS0 OPT with version 0,
 *     a QNAME of plain (uncompressed) labels of 1..63 bytes, at most 255
 *     bytes on the wire, label bytes printable ASCII without '.', class IN,
 *     and no trailing bytes. The QNAME comes out both as its wire span and as
 *     dotted text (no trailing dot, original case); canonicalizing and
 *     judging that text is the caller's job (net_name_canon).
 *  2. net_dns_build_reply() / net_dns_build_answer() build the gateway's
 *     replies: an rcode (REFUSED, NXDOMAIN, SERVFAIL, FORMERR, NOERROR with no
 *     data = NODATA) echoing the question, or A/AAAA answers whose owner is
 *     a pointer to the question, with the TC bit when they do not fit.
 *  3. net_dns_parse_response() reads the answer of the gateway's own upstream
 *     resolver: the id and the question must echo what was asked, every
 *     name is decompressed with strictly backward pointers and bounded work,
 *     every section must be well formed, and the A/AAAA/CNAME records of the
 *     answer section on the CNAME chain from the question come out.
 *
 * Nothing allocates: spans point into the caller's message and text goes
 * into fixed arrays inside the caller's structs. No function recurses.
 *
 * Return convention (picohttpparser's): 0 success, -1 malformed or refused
 * (with ->why, a static string, and for queries the rcode to answer with),
 * -2 need more bytes (TCP framing only). These are pure parsers, not
 * fallible operations in the error-rule sense (src/common/error.h): they
 * never touch errno and the caller turns ->why into a log line or an al_error.
 */
#ifndef AL_NET_DNS_MSG_H
#define AL_NET_DNS_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NET_DNS_HEADER 12
#define NET_DNS_MAX_LABEL 63
#define NET_DNS_MAX_WIRE_NAME 255 /* RFC 1035 §3.1, including the root label */
#define NET_DNS_MAX_TEXT_NAME 253 /* dotted, without the trailing dot */
#define NET_DNS_UDP_MIN 512	  /* a client without EDNS, or advertising less */
#define NET_DNS_EDNS_SIZE 1232	  /* the payload size our replies advertise */
#define NET_DNS_MAX_CNAME 8	  /* CNAME hops followed in an upstream answer */
#define NET_DNS_MAX_PTR_HOPS 64	  /* compression pointers followed in one name */
#define NET_DNS_MAX_RECORDS 256	  /* records per section of an upstream answer */

enum net_dns_type {
	NET_DNS_A = 1,
	NET_DNS_NS = 2,
	NET_DNS_CNAME = 5,
	NET_DNS_SOA = 6,
	NET_DNS_NULL = 10,
	NET_DNS_PTR = 12,
	NET_DNS_MX = 15,
	NET_DNS_TXT = 16,
	NET_DNS_AAAA = 28,
	NET_DNS_OPT = 41,
	NET_DNS_SVCB = 64,
	NET_DNS_HTTPS = 65,
	NET_DNS_AXFR = 252,
	NET_DNS_ANY = 255,
};

enum net_dns_rcode {
	NET_DNS_NOERROR = 0,
	NET_DNS_FORMERR = 1,
	NET_DNS_SERVFAIL = 2,
	NET_DNS_NXDOMAIN = 3,
	NET_DNS_NOTIMP = 4,
	NET_DNS_REFUSED = 5,
};

#define NET_DNS_CLASS_IN 1

/* Header flag bits (the second 16-bit word). */
#define NET_DNS_F_QR 0x8000
#define NET_DNS_F_AA 0x0400
#define NET_DNS_F_TC 0x0200
#define NET_DNS_F_RD 0x0100
#define NET_DNS_F_RA 0x0080
#define NET_DNS_F_Z 0x0040
#define NET_DNS_F_AD 0x0020
#define NET_DNS_F_CD 0x0010

/* A query from the sandbox, as net_dns_parse_query() read it. */
struct net_dns_query {
	uint16_t id;
	uint16_t flags;	   /* the raw flags word; RD and CD are the ones echoed */
	bool rd;	   /* recursion desired */
	uint16_t qtype;	   /* any value: judging the type is the caller's job */
	uint16_t qclass;   /* always NET_DNS_CLASS_IN on success */
	bool edns;	   /* an OPT record was present */
	uint16_t edns_udp; /* its advertised payload size (raw; 0 without EDNS) */
	bool edns_do;	   /* its DO bit */
	/* SAFETY: qname_wire points into the caller's message, qname_wire_len
	 * (1..255) bytes, ending with the root label. */
	const uint8_t *qname_wire;
	size_t qname_wire_len;
	size_t question_len;		       /* qname + qtype + qclass */
	char qname[NET_DNS_MAX_TEXT_NAME + 1]; /* dotted, NUL-terminated, "" for the root */
	size_t qname_len;
	/* On -1: */
	const char *why; /* a static reason */
	int rcode;	 /* what to answer with: FORMERR, NOTIMP or REFUSED */
	bool answerable; /* a header came in with QR=0: a reply with ->id may be sent */
};

/*
 * Parse a DNS query (a UDP payload, or the message inside a TCP frame).
 * Returns 0, or -1 with q->why, q->rcode and q->answerable set. On -1 with
 * answerable and a question that was read (q->qname_wire != NULL) the reply
 * builders echo it; without one they send a bare header.
 */
int net_dns_parse_query(const uint8_t *msg, size_t len, struct net_dns_query *q);

/*
 * The DNS-over-TCP frame (RFC 1035 §4.2.2): a 16-bit length and the message.
 * Returns 0 with *msg and *msg_len (the span after the prefix) and *frame_len
 * (prefix + message), -2 if more bytes are needed (*frame_len then holds the
 * total needed if known, else 2), or -1 for a length below a DNS header.
 */
int net_dns_tcp_frame(const uint8_t *buf, size_t len, const uint8_t **msg, size_t *msg_len,
		      size_t *frame_len);

/*
 * The largest reply to send the client: 65535 over TCP; over UDP its EDNS
 * size clamped to 512..NET_DNS_EDNS_SIZE, or 512 without EDNS.
 */
size_t net_dns_reply_limit(const struct net_dns_query *q, bool tcp);

/*
 * Build a reply without answers: rcode is REFUSED, NXDOMAIN, SERVFAIL,
 * FORMERR, NOTIMP, or NOERROR for NODATA. Echoes id, RD, CD and the question
 * (if one was read), sets QR and RA, and adds an OPT record if the query had
 * one. Returns the length written, or -1 if cap is too small (cap >= 512
 * always suffices).
 */
ssize_t net_dns_build_reply(const struct net_dns_query *q, int rcode, uint8_t *out, size_t cap);

/* One address record for net_dns_build_answer(). */
struct net_dns_addr {
	uint16_t type; /* NET_DNS_A (addr[0..3]) or NET_DNS_AAAA (addr[0..15]) */
	uint32_t ttl;  /* seconds; values above 2^31-1 are sent as 2^31-1 */
	uint8_t addr[16];
};

/*
 * Build a NOERROR reply to a successfully parsed query with the given A/AAAA
 * records, each owned by the question name (a pointer to offset 12). Records
 * are added in order while the message (with its OPT record, if any) fits in
 * min(limit, cap); the first that does not fit sets TC and ends the list.
 * Returns the length written, or -1 for a bad record type or a cap too small
 * for the bare reply.
 */
ssize_t net_dns_build_answer(const struct net_dns_query *q, const struct net_dns_addr *addrs,
			     size_t n, size_t limit, uint8_t *out, size_t cap);

/* What the gateway asked upstream, for net_dns_parse_response(). */
struct net_dns_asked {
	uint16_t id;
	const uint8_t *qname_wire; /* uncompressed wire name, as sent */
	size_t qname_wire_len;
	uint16_t qtype;
};

/* One record of an upstream answer. */
struct net_dns_rr {
	uint16_t type;	   /* A, AAAA or CNAME */
	uint32_t ttl;	   /* clamped to 2^31-1 (RFC 2181 §8) */
	uint8_t addr[16];  /* A: 4 bytes, AAAA: 16 */
	size_t owner_off;  /* offset of the owner name in the message */
	size_t target_off; /* CNAME: offset of the target name */
};

/* The upstream answer, as net_dns_parse_response() read it. */
struct net_dns_response {
	uint16_t flags;
	int rcode;	  /* the 4-bit header rcode */
	bool tc;	  /* truncated: nothing past the question was read; retry over TCP */
	size_t n_rr;	  /* records filled in rr[] */
	size_t n_addr;	  /* of which A/AAAA */
	uint32_t min_ttl; /* smallest TTL on the chain (0 if none) */
	char final_name[NET_DNS_MAX_TEXT_NAME + 1]; /* the end of the CNAME chain */
	const char *why;			    /* on -1, a static reason */
};

/*
 * Parse an upstream response to `asked`. Returns 0 with the records of the
 * answer section that lie on the CNAME chain starting at the question (in
 * chain order: CNAMEs first, then the addresses of the final name), in
 * rr[0..n_rr); records of other owners or types are checked and skipped.
 * Only a NOERROR answer contributes records. -1 for anything malformed,
 * a mismatched id or question, a CNAME loop or chain longer than
 * NET_DNS_MAX_CNAME, or more chain records than max_rr.
 */
int net_dns_parse_response(const uint8_t *msg, size_t len, const struct net_dns_asked *asked,
			   struct net_dns_rr *rr, size_t max_rr, struct net_dns_response *res);

/*
 * Read the (possibly compressed) name at msg[off] as dotted text into
 * out[NET_DNS_MAX_TEXT_NAME + 1]. Pointers must go strictly backwards and
 * land past the header, at most NET_DNS_MAX_PTR_HOPS of them; labels follow
 * the query rules. *next gets the offset just after the name at `off`.
 * Returns the text length, or -1.
 */
int net_dns_read_name(const uint8_t *msg, size_t len, size_t off, char *out, size_t *next);

#endif
