/* SPDX-License-Identifier: MIT */
/*
 * Strict HTTP/1.1 request-head parser and chunked decoder. Contract in
 * http_req.h; rationale in docs/design/parsers.md.
 *
 * The head is located first (CRLF CRLF within NET_HTTP_MAX_HEAD bytes), then
 * split into lines by next_line(), which refuses any CR not followed by LF
 * and any LF not preceded by CR. All later scans stay inside one line.
 */
#include "net/http_req.h"

#include <string.h>

static long fail(struct net_http_req *req, int status, const char *why)
{
	req->why = why;
	req->status = status;
	return -1;
}

static bool is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c);
}

static bool is_token(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_tchar((unsigned char)p[i]))
			return false;
	return n > 0;
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

static bool span_ieq(const char *p, size_t n, const char *lit)
{
	size_t i;

	for (i = 0; i < n && lit[i]; i++)
		if (lower(p[i]) != lower(lit[i]))
			return false;
	return i == n && !lit[i];
}

static bool span_is(const char *p, size_t n, const char *lit)
{
	return strlen(lit) == n && memcmp(p, lit, n) == 0;
}

/*
 * The line at buf[*pos..end): returns its length (CRLF excluded) and moves
 * *pos past the CRLF, or -1 for a bare CR or LF. The caller guarantees
 * buf[end-2..end) is CRLF, so the scan stops inside the head.
 */
static long next_line(const char *buf, size_t end, size_t *pos)
{
	for (size_t i = *pos; i < end; i++) {
		if (buf[i] == '\n')
			return -1;
		if (buf[i] != '\r')
			continue;
		if (i + 1 >= end || buf[i + 1] != '\n')
			return -1;
		long n = (long)(i - *pos);
		*pos = i + 2;
		return n;
	}
	return -1;
}

/* A decimal port 1..65535 without sign or leading zero. */
static bool parse_port(const char *p, size_t n, uint16_t *port)
{
	unsigned v = 0;

	if (n == 0 || n > 5 || p[0] == '0')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	if (v > 65535)
		return false;
	*port = (uint16_t)v;
	return true;
}

static bool host_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c == '.' || c == '-' || c == '_';
}

struct authority {
	struct net_http_span host;
	bool ipv6;
	uint16_t port;
	bool port_explicit;
};

/* host [":" port]; host = reg-name of [A-Za-z0-9._-] or "[" IPv6 "]". */
static bool parse_authority(const char *p, size_t n, struct authority *a)
{
	size_t h = 0, i;

	memset(a, 0, sizeof(*a));
	if (n && p[0] == '[') {
		const char *close = memchr(p, ']', n);
		bool colon = false;

		if (!close || close - p < 3)
			return false;
		for (const char *c = p + 1; c < close; c++) {
			if (!*c || !strchr("0123456789abcdefABCDEF:.", *c))
				return false;
			colon |= *c == ':';
		}
		if (!colon)
			return false;
		a->host = (struct net_http_span){p + 1, (size_t)(close - p - 1)};
		a->ipv6 = true;
		h = (size_t)(close - p) + 1;
	} else {
		for (h = 0; h < n && p[h] != ':'; h++)
			if (!host_char(p[h]))
				return false;
		if (h == 0 || h > NET_HTTP_MAX_HOST)
			return false;
		a->host = (struct net_http_span){p, h};
	}
	if (h == n)
		return true;
	if (p[h] != ':')
		return false;
	i = h + 1;
	a->port_explicit = true;
	return parse_port(p + i, n - i, &a->port);
}

/* Target bytes: visible ASCII but '\\' (WHATWG reads it as '/') and '#' (never sent). */
static bool target_ok(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c <= 0x20 || c >= 0x7f || c == '\\' || c == '#')
			return false;
	}
	return n > 0;
}

static long parse_target(struct net_http_req *req, struct authority *a)
{
	const char *t = req->target.p, *end;
	size_t n = req->target.len, auth;
	bool connect = span_is(req->method.p, req->method.len, "CONNECT");

	if (!target_ok(t, n))
		return fail(req, 400, "bad byte in the request-target");
	if (connect) {
		req->form = NET_HTTP_AUTHORITY;
		if (!parse_authority(t, n, a) || !a->port_explicit)
			return fail(req, 400, "CONNECT target is not host:port");
		return 0;
	}
	if (n == 1 && t[0] == '*') {
		if (!span_is(req->method.p, req->method.len, "OPTIONS"))
			return fail(req, 400, "asterisk-form outside OPTIONS");
		req->form = NET_HTTP_ASTERISK;
		req->path = req->target;
		return 0;
	}
	if (t[0] == '/') {
		req->form = NET_HTTP_ORIGIN;
		req->path = req->target;
		return 0;
	}
	if (n < 7 || !span_ieq(t, 7, "http://"))
		return fail(req, 400,
			    "request-target is not origin-, http absolute- or authority-form");
	req->form = NET_HTTP_ABSOLUTE;
	req->scheme = (struct net_http_span){t, 4};
	end = t + n;
	for (auth = 7; t + auth < end && t[auth] != '/' && t[auth] != '?'; auth++)
		;
	if (!parse_authority(t + 7, auth - 7, a))
		return fail(req, 400, "bad authority in the absolute-form");
	req->path = (struct net_http_span){t + auth, n - auth};
	return 0;
}

static long parse_request_line(struct net_http_req *req, const char *line, size_t n)
{
	const char *sp1 = memchr(line, ' ', n), *sp2, *ver;
	size_t vlen;

	if (!sp1 || sp1 == line)
		return fail(req, 400, "malformed request line");
	req->method = (struct net_http_span){line, (size_t)(sp1 - line)};
	if (!is_token(line, req->method.len) || req->method.len > NET_HTTP_MAX_METHOD)
		return fail(req, 400, "method is not a token");
	sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - line));
	if (!sp2 || sp2 == sp1 + 1)
		return fail(req, 400, "malformed request line");
	req->target = (struct net_http_span){sp1 + 1, (size_t)(sp2 - sp1 - 1)};
	ver = sp2 + 1;
	vlen = n - (size_t)(ver - line);
	if (span_is(ver, vlen, "HTTP/1.1"))
		req->minor = 1;
	else if (span_is(ver, vlen, "HTTP/1.0"))
		req->minor = 0;
	else if (vlen == 8 && memcmp(ver, "HTTP/", 5) == 0 && ver[5] >= '0' && ver[5] <= '9' &&
		 ver[6] == '.' && ver[7] >= '0' && ver[7] <= '9')
		return fail(req, 505, "HTTP version not supported");
	else if (span_is(ver, vlen, "HTTP/2") || span_is(ver, vlen, "HTTP/3"))
		return fail(req, 505, "HTTP version not supported");
	else
		return fail(req, 400, "malformed HTTP version");
	return 0;
}

/* Content-Length: 1..18 digits, no sign, no leading zero (but "0"). */
static bool parse_length(const char *p, size_t n, uint64_t *v)
{
	*v = 0;
	if (n == 0 || n > 18 || (p[0] == '0' && n > 1))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		*v = *v * 10 + (uint64_t)(p[i] - '0');
	}
	return true;
}

/* The framing and identity fields; others pass through unchecked. */
static long special_header(struct net_http_req *req, const struct net_http_header *h, bool *te)
{
	const char *n = h->name.p, *v = h->value.p;
	size_t nl = h->name.len, vl = h->value.len;

	if (span_ieq(n, nl, "content-length")) {
		if (req->has_content_length)
			return fail(req, 400, "duplicate Content-Length");
		if (!parse_length(v, vl, &req->content_length))
			return fail(req, 400, "Content-Length is not a plain decimal");
		req->has_content_length = true;
	} else if (span_ieq(n, nl, "transfer-encoding")) {
		if (*te)
			return fail(req, 400, "duplicate Transfer-Encoding");
		*te = true;
		if (!span_is(v, vl, "chunked"))
			return fail(req, 501, "Transfer-Encoding other than \"chunked\"");
		req->chunked = true;
	} else if (span_ieq(n, nl, "host")) {
		if (req->host_header.p)
			return fail(req, 400, "duplicate Host");
		req->host_header = h->value;
	}
	return 0;
}

/* One field line into h; NULL, or why it is malformed. */
static const char *split_field(const char *line, size_t n, struct net_http_header *h)
{
	const char *colon = memchr(line, ':', n);
	size_t vs, ve;

	if (line[0] == ' ' || line[0] == '\t')
		return "obs-fold or whitespace before a header line";
	if (!colon || colon == line)
		return "header line without a name and colon";
	for (const char *c = line; c < colon; c++) {
		if (*c == ' ' || *c == '\t')
			return "whitespace between header name and colon";
		if (!is_tchar((unsigned char)*c))
			return "header name is not a token";
	}
	vs = (size_t)(colon - line) + 1;
	for (size_t i = vs; i < n; i++) {
		unsigned char c = (unsigned char)line[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return "control byte in a header value";
	}
	while (vs < n && (line[vs] == ' ' || line[vs] == '\t'))
		vs++;
	for (ve = n; ve > vs && (line[ve - 1] == ' ' || line[ve - 1] == '\t'); ve--)
		;
	h->name = (struct net_http_span){line, (size_t)(colon - line)};
	h->value = (struct net_http_span){line + vs, ve - vs};
	return NULL;
}

static long parse_header_line(struct net_http_req *req, const char *line, size_t n, bool *te)
{
	struct net_http_header h;
	const char *why = split_field(line, n, &h);

	if (why)
		return fail(req, 400, why);
	if (req->n_headers >= NET_HTTP_MAX_HEADERS)
		return fail(req, 431, "too many header fields");
	req->headers[req->n_headers] = h;
	return special_header(req, &req->headers[req->n_headers++], te);
}

static bool same_host(const struct authority *a, const struct authority *b)
{
	if (a->ipv6 != b->ipv6 || a->host.len != b->host.len)
		return false;
	for (size_t i = 0; i < a->host.len; i++)
		if (lower(a->host.p[i]) != lower(b->host.p[i]))
			return false;
	return true;
}

/* Cross-field rules: framing, Host presence and agreement, the effective authority. */
static long check_head(struct net_http_req *req, struct authority *target, bool te)
{
	struct authority host;

	if (te && req->has_content_length)
		return fail(req, 400, "both Transfer-Encoding and Content-Length");
	if (te && req->minor == 0)
		return fail(req, 400, "Transfer-Encoding in HTTP/1.0");
	if (!req->host_header.p) {
		if (req->minor == 1)
			return fail(req, 400, "HTTP/1.1 request without Host");
		if (req->form == NET_HTTP_ORIGIN || req->form == NET_HTTP_ASTERISK)
			return fail(req, 400, "no Host and no authority in the target");
	} else if (!parse_authority(req->host_header.p, req->host_header.len, &host)) {
		return fail(req, 400, "malformed Host");
	} else if (req->form == NET_HTTP_ORIGIN || req->form == NET_HTTP_ASTERISK) {
		*target = host;
	} else if (!same_host(target, &host)) {
		return fail(req, 400, "Host differs from the target's authority");
	} else if (req->form == NET_HTTP_AUTHORITY
		       ? host.port_explicit && host.port != target->port
		       : (host.port_explicit ? host.port : 80) !=
			     (target->port_explicit ? target->port : 80)) {
		return fail(req, 400, "Host port differs from the target's authority");
	}
	req->host = target->host;
	req->host_ipv6 = target->ipv6;
	req->port_explicit = target->port_explicit;
	req->port = target->port_explicit ? target->port : 80;
	return 0;
}

/* Where the head ends (just past CRLF CRLF), 0 if not yet, looking only at new bytes. */
static size_t head_end(const char *buf, size_t len, size_t last_len)
{
	size_t from = last_len > 3 && last_len <= len ? last_len - 3 : 0;

	if (len > NET_HTTP_MAX_HEAD)
		len = NET_HTTP_MAX_HEAD;
	for (size_t i = from; i + 4 <= len; i++)
		if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' &&
		    buf[i + 3] == '\n')
			return i + 4;
	return 0;
}

long net_http_parse_request(const char *buf, size_t len, size_t last_len, struct net_http_req *req)
{
	struct authority target = {0};
	size_t end, pos = 0;
	bool te = false;
	long n;

	memset(req, 0, sizeof(*req));
	end = head_end(buf, len, last_len);
	if (!end)
		return len >= NET_HTTP_MAX_HEAD ? fail(req, 431, "request head too large") : -2;
	n = next_line(buf, end, &pos);
	if (n < 0)
		return fail(req, 400, "bare CR or LF");
	if (n == 0)
		return fail(req, 400, "empty line before the request line");
	if (parse_request_line(req, buf, (size_t)n) < 0 || parse_target(req, &target) < 0)
		return -1;
	for (;;) {
		const char *line = buf + pos;

		n = next_line(buf, end, &pos);
		if (n < 0)
			return fail(req, 400, "bare CR or LF");
		if (n == 0)
			break;
		if (parse_header_line(req, line, (size_t)n, &te) < 0)
			return -1;
	}
	if (pos != end || check_head(req, &target, te) < 0)
		return req->why ? -1 : fail(req, 400, "malformed head");
	req->head_len = end;
	return (long)end;
}

const struct net_http_header *net_http_find_header(const struct net_http_req *req, const char *name)
{
	for (size_t i = 0; i < req->n_headers; i++)
		if (span_ieq(req->headers[i].name.p, req->headers[i].name.len, name))
			return &req->headers[i];
	return NULL;
}

/* ---- response heads ---- */

static long rfail(struct net_http_resp *resp, const char *why)
{
	resp->why = why;
	return -1;
}

/* "HTTP/1.x" SP 3DIGIT [SP reason-phrase]; the reason is visible bytes, SP and HTAB. */
static long parse_status_line(struct net_http_resp *resp, const char *line, size_t n)
{
	if (n < 12 || memcmp(line, "HTTP/1.", 7) || (line[7] != '0' && line[7] != '1') ||
	    line[8] != ' ')
		return rfail(resp, "malformed status line");
	resp->minor = line[7] - '0';
	for (size_t i = 9; i < 12; i++)
		if (line[i] < '0' || line[i] > '9')
			return rfail(resp, "status code is not three digits");
	resp->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
	if (resp->status < 100 || resp->status > 599)
		return rfail(resp, "status code out of range");
	if (n > 12 && line[12] != ' ')
		return rfail(resp, "malformed status line");
	for (size_t i = 13; i < n; i++) {
		unsigned char c = (unsigned char)line[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return rfail(resp, "control byte in the reason phrase");
	}
	resp->reason = (struct net_http_span){line + (n > 12 ? 13 : 12), n > 12 ? n - 13 : 0};
	return 0;
}

/*
 * The elements of a comma-separated list value, OWS trimmed, empty ones skipped: calls
 * each(element) and stops at the first non-zero.
 */
static long each_element(struct net_http_resp *resp, const struct net_http_span *v,
			 long (*each)(struct net_http_resp *, const char *, size_t))
{
	size_t i = 0;

	while (i < v->len) {
		size_t s = i, e;
		long r;

		while (i < v->len && v->p[i] != ',')
			i++;
		e = i++;
		while (s < e && (v->p[s] == ' ' || v->p[s] == '\t'))
			s++;
		while (e > s && (v->p[e - 1] == ' ' || v->p[e - 1] == '\t'))
			e--;
		if (e > s && (r = each(resp, v->p + s, e - s)) != 0)
			return r;
	}
	return 0;
}

static long content_coding(struct net_http_resp *resp, const char *p, size_t n)
{
	if (!span_ieq(p, n, "identity"))
		resp->encoded = true;
	return 0;
}

static long transfer_coding(struct net_http_resp *resp, const char *p, size_t n)
{
	if (resp->chunked || !span_ieq(p, n, "chunked"))
		return rfail(resp, "Transfer-Encoding other than one \"chunked\"");
	resp->chunked = true;
	return 0;
}

/* The framing and coding fields, every occurrence of each. */
static long resp_special(struct net_http_resp *resp, const struct net_http_header *h, bool *te)
{
	const char *n = h->name.p;
	size_t nl = h->name.len;

	if (span_ieq(n, nl, "content-length")) {
		if (resp->has_content_length)
			return rfail(resp, "duplicate Content-Length");
		if (!parse_length(h->value.p, h->value.len, &resp->content_length))
			return rfail(resp, "Content-Length is not a plain decimal");
		resp->has_content_length = true;
	} else if (span_ieq(n, nl, "transfer-encoding")) {
		*te = true;
		return each_element(resp, &h->value, transfer_coding);
	} else if (span_ieq(n, nl, "content-encoding")) {
		return each_element(resp, &h->value, content_coding);
	}
	return 0;
}

long net_http_parse_response(const char *buf, size_t len, struct net_http_resp *resp)
{
	size_t end, pos = 0;
	bool te = false;
	long n;

	memset(resp, 0, sizeof(*resp));
	end = head_end(buf, len, 0);
	if (!end)
		return len >= NET_HTTP_MAX_HEAD ? rfail(resp, "response head too large") : -2;
	n = next_line(buf, end, &pos);
	if (n < 0)
		return rfail(resp, "bare CR or LF");
	if (parse_status_line(resp, buf, (size_t)n) < 0)
		return -1;
	for (;;) {
		const char *line = buf + pos, *why;
		struct net_http_header *h = &resp->headers[resp->n_headers];

		n = next_line(buf, end, &pos);
		if (n < 0)
			return rfail(resp, "bare CR or LF");
		if (n == 0)
			break;
		if (resp->n_headers >= NET_HTTP_MAX_HEADERS)
			return rfail(resp, "too many header fields");
		if ((why = split_field(line, (size_t)n, h)))
			return rfail(resp, why);
		resp->n_headers++;
		if (resp_special(resp, h, &te) < 0)
			return -1;
	}
	if (te && !resp->chunked)
		return rfail(resp, "empty Transfer-Encoding");
	if (te && resp->has_content_length)
		return rfail(resp, "both Transfer-Encoding and Content-Length");
	if (pos != end)
		return rfail(resp, "malformed head");
	resp->head_len = end;
	return (long)end;
}

enum {
	CH_SIZE = 0,
	CH_SIZE_LF,
	CH_DATA,
	CH_DATA_CR,
	CH_DATA_LF,
	CH_LAST_CR,
	CH_LAST_LF,
	CH_DONE,
	CH_ERROR,
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int chunk_fail(struct net_http_chunked *c, size_t i, size_t *consumed, const char *why)
{
	c->state = CH_ERROR;
	c->why = why;
	*consumed = i;
	return -1;
}

/* One framing byte; 0 to go on, -1 on error, 1 when the body ended. */
static int chunk_byte(struct net_http_chunked *c, char ch)
{
	int v;

	switch (c->state) {
	case CH_SIZE:
		if ((v = hexval(ch)) >= 0) {
			if (c->digits++ == 15)
				return (c->why = "chunk size over 15 hex digits"), -1;
			c->remaining = c->remaining << 4 | (uint64_t)v;
			return 0;
		}
		if (ch == '\r' && c->digits) {
			c->state = CH_SIZE_LF;
			return 0;
		}
		c->why = ch == ';' ? "chunk extensions refused" : "malformed chunk size line";
		return -1;
	case CH_SIZE_LF:
		if (ch != '\n')
			return (c->why = "bare CR after a chunk size"), -1;
		c->digits = 0;
		c->state = c->remaining ? CH_DATA : CH_LAST_CR;
		return 0;
	case CH_DATA_CR:
		c->state = CH_DATA_LF;
		return ch == '\r' ? 0 : ((c->why = "chunk data not followed by CRLF"), -1);
	case CH_DATA_LF:
		c->state = CH_SIZE;
		return ch == '\n' ? 0 : ((c->why = "chunk data not followed by CRLF"), -1);
	case CH_LAST_CR:
		c->state = CH_LAST_LF;
		return ch == '\r' ? 0 : ((c->why = "trailer fields refused"), -1);
	case CH_LAST_LF:
		c->state = CH_DONE;
		return ch == '\n' ? 1 : ((c->why = "bare CR after the last chunk"), -1);
	default:
		return (c->why = "decoder state"), -1;
	}
}

int net_http_chunked_step(struct net_http_chunked *c, const char *in, size_t len, size_t *consumed,
			  const char **data, size_t *data_len)
{
	*data = NULL;
	*data_len = 0;
	if (c->state == CH_ERROR)
		return chunk_fail(c, 0, consumed, c->why ? c->why : "decoder failed before");
	if (c->state == CH_DONE) {
		*consumed = 0;
		return 0;
	}
	for (size_t i = 0; i < len; i++) {
		if (c->state == CH_DATA) {
			size_t n = len - i < c->remaining ? len - i : (size_t)c->remaining;

			if (c->max_total && n > c->max_total - c->total)
				return chunk_fail(c, i, consumed, "chunked body over its cap");
			c->total += n;
			c->remaining -= n;
			if (!c->remaining)
				c->state = CH_DATA_CR;
			*data = in + i;
			*data_len = n;
			*consumed = i + n;
			return 1;
		}
		int r = chunk_byte(c, in[i]);
		if (r < 0)
			return chunk_fail(c, i, consumed, c->why);
		if (r > 0) {
			*consumed = i + 1;
			return 0;
		}
	}
	*consumed = len;
	return -2;
}
