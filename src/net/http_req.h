/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.1 request heads from a sandbox, strictly per RFC 9112, and a strict
 * chunked-body decoder (docs/design/parsers.md).
 *
 * net_http_parse_request() reads a request head:
 *
 *   request-line = method SP request-target SP HTTP-version CRLF
 *
 * with exactly one SP between the parts, method a token of 1..32 bytes, and
 * version "HTTP/1.1" or "HTTP/1.0" (0.9, 2, 3 and anything else: 505).
 * Request-target forms:
 *
 *   origin-form     "/" path [ "?" query ]          any method but CONNECT
 *   absolute-form   "http://" authority path-abempty [ "?" query ]  (scheme
 *                   case-insensitive; no other scheme)  any method but CONNECT
 *   authority-form  host ":" port                   CONNECT only, port required
 *   asterisk-form   "*"                             OPTIONS only
 *
 * Target bytes are visible ASCII except '\\' and '#'. authority = host
 * [":" port] with host a reg-name of [A-Za-z0-9._-] (so no userinfo '@',
 * no '%'-escapes, no '\\') or an IPv6 literal "[" hex/':'/'.' "]" (no zone
 * id), and port 1..65535 in decimal without a leading zero.
 *
 * Header lines: name a token, ':' right after it (no whitespace: 400),
 * optional SP/HTAB, a value of visible ASCII, obs-text, SP and HTAB, optional
 * SP/HTAB, CRLF. No obs-fold (a line starting with SP/HTAB), no bare CR or
 * LF anywhere, no NUL or other control byte, no empty lines before the
 * request line. At most NET_HTTP_MAX_HEADERS fields and NET_HTTP_MAX_HEAD
 * bytes of head (431).
 *
 * Framing and identity (smuggling, D1-D3): Content-Length at most once, a
 * plain decimal without sign, comma, or leading zero; Transfer-Encoding at
 * most once and exactly "chunked"; never both; no Transfer-Encoding in
 * HTTP/1.0; Host at most once, a valid authority; Host required in HTTP/1.1
 * and for origin-form; if the target carries an authority (absolute- or
 * authority-form), a Host must name the same host (ASCII case-insensitive,
 * byte-exact otherwise, so "a." differs from "a") and the same port (a
 * missing port is 80 for http; for CONNECT a Host without port matches any).
 * Rather than letting the absolute-form win silently (RFC 9112 §3.2.2), a
 * disagreement is refused, so no later hop can choose differently.
 *
 * Zero allocation: every span points into the caller's buffer. Return
 * convention (picohttpparser): the head length (> 0), -1 malformed (req->why,
 * req->status = the HTTP status to answer: 400, 431, 501 or 505), or -2 need
 * more bytes.
 */
#ifndef AL_NET_HTTP_REQ_H
#define AL_NET_HTTP_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_HTTP_MAX_HEADERS 100
#define NET_HTTP_MAX_HEAD 65536
#define NET_HTTP_MAX_METHOD 32
#define NET_HTTP_MAX_HOST 255

struct net_http_span {
	const char *p; /* into the caller's buffer; NULL when absent */
	size_t len;
};

struct net_http_header {
	struct net_http_span name;  /* a token, original case */
	struct net_http_span value; /* without leading or trailing SP/HTAB */
};

enum net_http_form {
	NET_HTTP_ORIGIN = 1,
	NET_HTTP_ABSOLUTE,
	NET_HTTP_AUTHORITY,
	NET_HTTP_ASTERISK,
};

struct net_http_req {
	struct net_http_span method;
	struct net_http_span target; /* the whole request-target */
	enum net_http_form form;
	int minor;		     /* HTTP/1.<minor>: 1 or 0 */
	struct net_http_span scheme; /* "http" in any case for absolute-form, else NULL */
	/* The authority: from the target when it has one, else from Host. */
	struct net_http_span host; /* raw bytes; an IPv6 literal without its brackets */
	bool host_ipv6;
	uint16_t port; /* explicit, or 80 when implied (never 0 on success) */
	bool port_explicit;
	struct net_http_span path; /* path and query; absolute-form may give ""
				    * (meaning "/"); "*" for asterisk-form;
				    * NULL for authority-form */
	struct net_http_header headers[NET_HTTP_MAX_HEADERS];
	size_t n_headers;
	struct net_http_span host_header; /* the Host value, NULL if none */
	bool has_content_length;
	uint64_t content_length;
	bool chunked;
	size_t head_len; /* request line + fields + the empty line */
	const char *why; /* on -1, a static reason */
	int status;	 /* on -1, the status to answer with */
};

/*
 * Parse the request head at buf[0..len). last_len is the length of the
 * previous call on the same (grown) buffer, 0 at first: the terminating
 * empty line is looked for only in the new bytes, so feeding a head byte by
 * byte costs O(n), not O(n^2). Returns req->head_len, -1 or -2.
 */
long net_http_parse_request(const char *buf, size_t len, size_t last_len, struct net_http_req *req);

/* The first header called `name` (ASCII case-insensitive), or NULL. */
const struct net_http_header *net_http_find_header(const struct net_http_req *req,
						   const char *name);

/*
 * A response head from an upstream, as strictly: status-line "HTTP/1.0" or "HTTP/1.1",
 * SP, three digits 100..599, optionally SP and a reason phrase of visible bytes, SP and
 * HTAB; header lines as for requests (no obs-fold, no bare CR or LF, no control byte, at
 * most NET_HTTP_MAX_HEADERS fields and NET_HTTP_MAX_HEAD bytes). Framing: Content-Length
 * at most once, a plain decimal; Transfer-Encoding, over all its fields and list
 * elements, exactly one "chunked" (any other transfer coding is refused: a client would
 * decode it); never both. Content-Encoding: every element of every field is looked at;
 * `encoded` says one is other than "identity". Spans point into buf.
 */
struct net_http_resp {
	int minor;
	int status;
	struct net_http_span reason;
	struct net_http_header headers[NET_HTTP_MAX_HEADERS];
	size_t n_headers;
	bool has_content_length;
	uint64_t content_length;
	bool chunked;
	bool encoded;
	size_t head_len;
	const char *why; /* on -1, a static reason */
};

/* Parse the response head at buf[0..len). Returns resp->head_len, -1 or -2 (need more). */
long net_http_parse_response(const char *buf, size_t len, struct net_http_resp *resp);

/*
 * Strict chunked-body decoder (RFC 9112 §7.1), incremental. Chunk sizes are
 * 1..15 hex digits (no overflow possible), no leading or trailing
 * whitespace; chunk extensions are refused (a differential source, used by
 * no common client); every chunk's data is followed by exactly CRLF; the
 * last chunk ("0" CRLF) must be followed directly by CRLF: trailer fields
 * are refused. An optional cap on the decoded total.
 */
struct net_http_chunked {
	int state; /* internal; zero-initialize the struct to start */
	unsigned digits;
	uint64_t remaining; /* bytes left in the current chunk */
	uint64_t total;	    /* decoded bytes so far */
	uint64_t max_total; /* 0: no cap */
	const char *why;    /* on -1, a static reason */
};

/*
 * Feed in[0..len). Returns 1 with a data span (*data, *data_len, inside in)
 * when chunk data is available, 0 when the body ended (the final CRLF
 * consumed), -2 when all of in was framing and more is needed, -1 on error.
 * *consumed always says how many bytes of in were used (for 0, the rest of
 * in belongs to the next message). Call again with in + *consumed.
 */
int net_http_chunked_step(struct net_http_chunked *c, const char *in, size_t len, size_t *consumed,
			  const char **data, size_t *data_len);

#endif
