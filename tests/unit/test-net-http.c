/* SPDX-License-Identifier: MIT */
/*
 * src/net/http_req.c: real requests (curl 7.88 direct, through a proxy,
 * CONNECT, chunked upload, captured with `nc -l`), every refusal of the
 * request line, target forms, header grammar and smuggling rules
 * (HTTP-1..8, -10, -11), incremental parsing, and the chunked decoder.
 */
#include "net/http_req.h"
#include "tap.h"

#include <string.h>

static const char curl_get[] = {
    0x47, 0x45, 0x54, 0x20, 0x2f, 0x70, 0x61, 0x74, 0x68, 0x3f, 0x71, 0x3d, 0x31, 0x20, 0x48,
    0x54, 0x54, 0x50, 0x2f, 0x31, 0x2e, 0x31, 0x0d, 0x0a, 0x48, 0x6f, 0x73, 0x74, 0x3a, 0x20,
    0x61, 0x6c, 0x6c, 0x6f, 0x77, 0x65, 0x64, 0x2e, 0x74, 0x65, 0x73, 0x74, 0x3a, 0x31, 0x38,
    0x30, 0x38, 0x30, 0x0d, 0x0a, 0x55, 0x73, 0x65, 0x72, 0x2d, 0x41, 0x67, 0x65, 0x6e, 0x74,
    0x3a, 0x20, 0x63, 0x75, 0x72, 0x6c, 0x2f, 0x37, 0x2e, 0x38, 0x38, 0x2e, 0x31, 0x0d, 0x0a,
    0x41, 0x63, 0x63, 0x65, 0x70, 0x74, 0x3a, 0x20, 0x2a, 0x2f, 0x2a, 0x0d, 0x0a, 0x0d, 0x0a};
static const char curl_proxy[] = {
    0x47, 0x45, 0x54, 0x20, 0x68, 0x74, 0x74, 0x70, 0x3a, 0x2f, 0x2f, 0x61, 0x6c, 0x6c, 0x6f, 0x77,
    0x65, 0x64, 0x2e, 0x74, 0x65, 0x73, 0x74, 0x2f, 0x78, 0x20, 0x48, 0x54, 0x54, 0x50, 0x2f, 0x31,
    0x2e, 0x31, 0x0d, 0x0a, 0x48, 0x6f, 0x73, 0x74, 0x3a, 0x20, 0x61, 0x6c, 0x6c, 0x6f, 0x77, 0x65,
    0x64, 0x2e, 0x74, 0x65, 0x73, 0x74, 0x0d, 0x0a, 0x55, 0x73, 0x65, 0x72, 0x2d, 0x41, 0x67, 0x65,
    0x6e, 0x74, 0x3a, 0x20, 0x63, 0x75, 0x72, 0x6c, 0x2f, 0x37, 0x2e, 0x38, 0x38, 0x2e, 0x31, 0x0d,
    0x0a, 0x41, 0x63, 0x63, 0x65, 0x70, 0x74, 0x3a, 0x20, 0x2a, 0x2f, 0x2a, 0x0d, 0x0a, 0x50, 0x72,
    0x6f, 0x78, 0x79, 0x2d, 0x43, 0x6f, 0x6e, 0x6e, 0x65, 0x63, 0x74, 0x69, 0x6f, 0x6e, 0x3a, 0x20,
    0x4b, 0x65, 0x65, 0x70, 0x2d, 0x41, 0x6c, 0x69, 0x76, 0x65, 0x0d, 0x0a, 0x0d, 0x0a};
static const char curl_connect[] = {
    0x43, 0x4f, 0x4e, 0x4e, 0x45, 0x43, 0x54, 0x20, 0x61, 0x6c, 0x6c, 0x6f, 0x77, 0x65, 0x64,
    0x2e, 0x74, 0x65, 0x73, 0x74, 0x3a, 0x34, 0x34, 0x33, 0x20, 0x48, 0x54, 0x54, 0x50, 0x2f,
    0x31, 0x2e, 0x31, 0x0d, 0x0a, 0x48, 0x6f, 0x73, 0x74, 0x3a, 0x20, 0x61, 0x6c, 0x6c, 0x6f,
    0x77, 0x65, 0x64, 0x2e, 0x74, 0x65, 0x73, 0x74, 0x3a, 0x34, 0x34, 0x33, 0x0d, 0x0a, 0x55,
    0x73, 0x65, 0x72, 0x2d, 0x41, 0x67, 0x65, 0x6e, 0x74, 0x3a, 0x20, 0x63, 0x75, 0x72, 0x6c,
    0x2f, 0x37, 0x2e, 0x38, 0x38, 0x2e, 0x31, 0x0d, 0x0a, 0x50, 0x72, 0x6f, 0x78, 0x79, 0x2d,
    0x43, 0x6f, 0x6e, 0x6e, 0x65, 0x63, 0x74, 0x69, 0x6f, 0x6e, 0x3a, 0x20, 0x4b, 0x65, 0x65,
    0x70, 0x2d, 0x41, 0x6c, 0x69, 0x76, 0x65, 0x0d, 0x0a, 0x0d, 0x0a};
static const char curl_post_chunked[] = {
    0x50, 0x4f, 0x53, 0x54, 0x20, 0x2f, 0x75, 0x70, 0x20, 0x48, 0x54, 0x54, 0x50, 0x2f, 0x31, 0x2e,
    0x31, 0x0d, 0x0a, 0x48, 0x6f, 0x73, 0x74, 0x3a, 0x20, 0x31, 0x32, 0x37, 0x2e, 0x30, 0x2e, 0x30,
    0x2e, 0x31, 0x3a, 0x31, 0x38, 0x30, 0x38, 0x33, 0x0d, 0x0a, 0x55, 0x73, 0x65, 0x72, 0x2d, 0x41,
    0x67, 0x65, 0x6e, 0x74, 0x3a, 0x20, 0x63, 0x75, 0x72, 0x6c, 0x2f, 0x37, 0x2e, 0x38, 0x38, 0x2e,
    0x31, 0x0d, 0x0a, 0x41, 0x63, 0x63, 0x65, 0x70, 0x74, 0x3a, 0x20, 0x2a, 0x2f, 0x2a, 0x0d, 0x0a,
    0x54, 0x72, 0x61, 0x6e, 0x73, 0x66, 0x65, 0x72, 0x2d, 0x45, 0x6e, 0x63, 0x6f, 0x64, 0x69, 0x6e,
    0x67, 0x3a, 0x20, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x65, 0x64, 0x0d, 0x0a, 0x43, 0x6f, 0x6e, 0x74,
    0x65, 0x6e, 0x74, 0x2d, 0x54, 0x79, 0x70, 0x65, 0x3a, 0x20, 0x61, 0x70, 0x70, 0x6c, 0x69, 0x63,
    0x61, 0x74, 0x69, 0x6f, 0x6e, 0x2f, 0x78, 0x2d, 0x77, 0x77, 0x77, 0x2d, 0x66, 0x6f, 0x72, 0x6d,
    0x2d, 0x75, 0x72, 0x6c, 0x65, 0x6e, 0x63, 0x6f, 0x64, 0x65, 0x64, 0x0d, 0x0a, 0x0d, 0x0a, 0x36,
    0x0d, 0x0a, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x0a, 0x0d, 0x0a, 0x30, 0x0d, 0x0a, 0x0d, 0x0a};

static struct net_http_req req;

static long parse(const char *s)
{
	return net_http_parse_request(s, strlen(s), 0, &req);
}

static bool span_is(struct net_http_span s, const char *lit)
{
	return s.p && s.len == strlen(lit) && memcmp(s.p, lit, s.len) == 0;
}

static void real_requests(void)
{
	long n;

	n = net_http_parse_request(curl_get, sizeof(curl_get), 0, &req);
	CHECK(n == (long)sizeof(curl_get) && req.form == NET_HTTP_ORIGIN &&
		  span_is(req.host, "allowed.test") && req.port == 18080 &&
		  span_is(req.path, "/path?q=1") && req.n_headers == 3,
	      "curl GET origin-form");
	n = net_http_parse_request(curl_proxy, sizeof(curl_proxy), 0, &req);
	CHECK(n == (long)sizeof(curl_proxy) && req.form == NET_HTTP_ABSOLUTE &&
		  span_is(req.scheme, "http") && span_is(req.host, "allowed.test") &&
		  req.port == 80 && !req.port_explicit && span_is(req.path, "/x"),
	      "curl -x proxy GET absolute-form");
	n = net_http_parse_request(curl_connect, sizeof(curl_connect), 0, &req);
	CHECK(n == (long)sizeof(curl_connect) && req.form == NET_HTTP_AUTHORITY &&
		  span_is(req.host, "allowed.test") && req.port == 443 && !req.path.p,
	      "curl CONNECT authority-form");
	n = net_http_parse_request(curl_post_chunked, sizeof(curl_post_chunked), 0, &req);
	CHECK(n > 0 && req.chunked && !req.has_content_length &&
		  net_http_find_header(&req, "content-type") != NULL,
	      "curl chunked POST head");
	struct net_http_chunked c = {0};
	const char *d;
	size_t used, dl;
	int r = net_http_chunked_step(&c, curl_post_chunked + n,
				      sizeof(curl_post_chunked) - (size_t)n, &used, &d, &dl);
	CHECK(r == 1 && dl == 6 && memcmp(d, "hello\n", 6) == 0, "its chunk decodes");
	size_t off = (size_t)n + used;
	r = net_http_chunked_step(&c, curl_post_chunked + off, sizeof(curl_post_chunked) - off,
				  &used, &d, &dl);
	CHECK(r == 0 && off + used == sizeof(curl_post_chunked), "and its body ends exactly");
	size_t bad = 0;
	for (size_t k = 0; k < sizeof(curl_proxy); k++)
		bad += net_http_parse_request(curl_proxy, k, k ? k - 1 : 0, &req) != -2;
	CHECK(bad == 0, "every prefix of a real head: need more");
}

struct tcase {
	const char *req;
	long want; /* 0: accepted (head length = strlen), else -1 / -2 */
	int status;
	const char *what;
};

#define H "Host: a.test\r\n"
static const struct tcase cases[] = {
    {"GET / HTTP/1.1\r\n" H "\r\n", 0, 0, "minimal GET"},
    {"GET / HTTP/1.0\r\n" H "\r\n", 0, 0, "HTTP/1.0 with Host"},
    {"GET http://a.test/ HTTP/1.0\r\n\r\n", 0, 0, "HTTP/1.0 absolute-form without Host"},
    {"CONNECT a.test:443 HTTP/1.0\r\n\r\n", 0, 0, "HTTP/1.0 CONNECT without Host (python 3.11)"},
    {"GET / HTTP/1.0\r\n\r\n", -1, 400, "HTTP/1.0 origin-form without Host"},
    {"GET / HTTP/1.1\r\n\r\n", -1, 400, "HTTP/1.1 without Host (HTTP-4)"},
    {"GET / HTTP/0.9\r\n" H "\r\n", -1, 505, "HTTP/0.9"},
    {"GET / HTTP/2.0\r\n" H "\r\n", -1, 505, "HTTP/2.0"},
    {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", -1, 505, "h2 prior-knowledge preface (HTTP-10)"},
    {"GET / HTTP/1.1 \r\n" H "\r\n", -1, 400, "space after the version"},
    {"GET / http/1.1\r\n" H "\r\n", -1, 400, "lower-case version"},
    {"GET /\r\n\r\n", -1, 400, "HTTP/0.9 request line"},
    {"GET  / HTTP/1.1\r\n" H "\r\n", -1, 400, "double space"},
    {"GET\t/ HTTP/1.1\r\n" H "\r\n", -1, 400, "tab separator"},
    {" GET / HTTP/1.1\r\n" H "\r\n", -1, 400, "leading space"},
    {"\r\nGET / HTTP/1.1\r\n" H "\r\n", -1, 400, "empty line before the request line"},
    {"G(T / HTTP/1.1\r\n" H "\r\n", -1, 400, "method not a token"},
    {"GETTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT / HTTP/1.1\r\n" H "\r\n", -1, 400, "33-byte method"},
    {"get / HTTP/1.1\r\n" H "\r\n", 0, 0, "unknown method token passes (the proxy judges)"},
    {"GET /a b HTTP/1.1\r\n" H "\r\n", -1, 400, "space in the target"},
    {"GET /a\\b HTTP/1.1\r\n" H "\r\n", -1, 400, "backslash in the target"},
    {"GET /a#f HTTP/1.1\r\n" H "\r\n", -1, 400, "fragment in the target"},
    {"GET /\x7f HTTP/1.1\r\n" H "\r\n", -1, 400, "DEL in the target"},
    {"GET /\xc3\xa9 HTTP/1.1\r\n" H "\r\n", -1, 400, "high byte in the target"},
    {"GET * HTTP/1.1\r\n" H "\r\n", -1, 400, "asterisk-form for GET"},
    {"OPTIONS * HTTP/1.1\r\n" H "\r\n", 0, 0, "OPTIONS *"},
    {"GET a.test:80 HTTP/1.1\r\n" H "\r\n", -1, 400, "authority-form for GET"},
    {"GET https://a.test/ HTTP/1.1\r\n" H "\r\n", -1, 400, "https absolute-form"},
    {"GET ftp://a.test/ HTTP/1.1\r\n" H "\r\n", -1, 400, "ftp absolute-form"},
    {"GET HTTP://A.TEST HTTP/1.1\r\nHost: a.test\r\n\r\n", 0, 0,
     "scheme and host caseless, empty path"},
    {"GET http://a.test?q HTTP/1.1\r\n" H "\r\n", 0, 0, "absolute-form with query, no path"},
    {"GET http://a.test/x HTTP/1.1\r\nHost: denied.test\r\n\r\n", -1, 400,
     "absolute-form vs Host (HTTP-1)"},
    {"GET http://a.test:8080/ HTTP/1.1\r\n" H "\r\n", -1, 400, "absolute-form port vs Host port"},
    {"GET http://a.test:80/ HTTP/1.1\r\n" H "\r\n", 0, 0, "explicit :80 equals implied 80"},
    {"GET http://a.test./ HTTP/1.1\r\n" H "\r\n", -1, 400, "trailing dot differs"},
    {"GET http://a.test@denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n", -1, 400,
     "userinfo (HTTP-8)"},
    {"GET http://denied.test%2ea.test/ HTTP/1.1\r\n" H "\r\n", -1, 400, "percent in host (HTTP-8)"},
    {"GET http://a.test:80.denied.test/ HTTP/1.1\r\n" H "\r\n", -1, 400, "port smuggling (HTTP-8)"},
    {"GET http://a.test:/ HTTP/1.1\r\n" H "\r\n", -1, 400, "empty port"},
    {"GET http://a.test:080/ HTTP/1.1\r\n" H "\r\n", -1, 400, "leading-zero port"},
    {"GET http://a.test:65536/ HTTP/1.1\r\n" H "\r\n", -1, 400, "port 65536"},
    {"GET http:///x HTTP/1.1\r\n" H "\r\n", -1, 400, "empty authority"},
    {"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", 0, 0, "CONNECT, Host without port"},
    {"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:444\r\n\r\n", -1, 400, "CONNECT vs Host port"},
    {"CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n", -1, 400, "CONNECT vs Host name"},
    {"CONNECT a.test HTTP/1.1\r\n" H "\r\n", -1, 400, "CONNECT without port (HTTP-8)"},
    {"CONNECT a.test:0 HTTP/1.1\r\nHost: a.test\r\n\r\n", -1, 400, "CONNECT port 0 (HTTP-8)"},
    {"CONNECT a.test:443@d.test:443 HTTP/1.1\r\n" H "\r\n", -1, 400,
     "CONNECT with userinfo (HTTP-8)"},
    {"CONNECT / HTTP/1.1\r\n" H "\r\n", -1, 400, "CONNECT origin-form"},
    {"CONNECT [::ffff:169.254.169.254]:80 HTTP/1.1\r\nHost: [::ffff:169.254.169.254]:80\r\n\r\n", 0,
     0, "CONNECT IPv6 literal parses (the guard refuses it)"},
    {"CONNECT [fe80::1%25x.a.test]:80 HTTP/1.1\r\n" H "\r\n", -1, 400, "IPv6 zone id"},
    {"CONNECT ::1:80 HTTP/1.1\r\n" H "\r\n", -1, 400, "IPv6 without brackets"},
    {"CONNECT [a.test]:80 HTTP/1.1\r\n" H "\r\n", -1, 400, "brackets around a name"},
    {"GET / HTTP/1.1\r\nHost: a.test\r\nHost: denied.test\r\n\r\n", -1, 400,
     "duplicate Host (HTTP-3)"},
    {"GET / HTTP/1.1\r\nHost: a.test\r\nhost: a.test\r\n\r\n", -1, 400, "duplicate equal Host"},
    {"GET / HTTP/1.1\r\nHost : a.test\r\n\r\n", -1, 400, "space before the colon (HTTP-4)"},
    {"GET / HTTP/1.1\r\nHost: a.test@d.test\r\n\r\n", -1, 400, "Host with userinfo (HTTP-4)"},
    {"GET / HTTP/1.1\r\nHost: a.test:80x\r\n\r\n", -1, 400, "Host with a bad port (HTTP-4)"},
    {"GET / HTTP/1.1\r\nHost: a.test d.test\r\n\r\n", -1, 400, "Host with a space (HTTP-4)"},
    {"GET / HTTP/1.1\r\nHost:\r\n\r\n", -1, 400, "empty Host"},
    {"GET / HTTP/1.1\r\nHost:a.test  \r\n\r\n", 0, 0, "Host without OWS, trailing OWS trimmed"},
    {"GET / HTTP/1.1\r\n" H "X: 1\r\n  folded\r\n\r\n", -1, 400, "obs-fold (HTTP-11)"},
    {"GET / HTTP/1.1\r\n " H "\r\n", -1, 400, "whitespace before the first field"},
    {"GET / HTTP/1.1\n" H "\r\n", -1, 400, "bare LF after the request line (HTTP-11)"},
    {"GET / HTTP/1.1\r\n"
     "Host: a.test\n"
     "X: y\r\n\r\n",
     -1, 400, "bare LF after a field"},
    {"GET / HTTP/1.1\r\n"
     "X: a\rb\r\n" H "\r\n",
     -1, 400, "bare CR in a value"},
    {"GET / HTTP/1.1\r\n" H "X: a\0b\r\n\r\n", -1, 400, "NUL in a value (HTTP-11)"},
    {"GET / HTTP/1.1\r\n" H "X: a\x01"
     "b\r\n\r\n",
     -1, 400, "control byte in a value"},
    {"GET / HTTP/1.1\r\n" H "X: caf\xc3\xa9\tok\r\n\r\n", 0, 0, "obs-text and HTAB in a value"},
    {"GET / HTTP/1.1\r\n" H "X(y): 1\r\n\r\n", -1, 400, "header name not a token"},
    {"GET / HTTP/1.1\r\n" H ": 1\r\n\r\n", -1, 400, "empty header name"},
    {"GET / HTTP/1.1\r\n" H "NoColon\r\n\r\n", -1, 400, "header line without a colon"},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", -1, 400,
     "CL + TE (HTTP-5)"},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n", -1, 400,
     "TE + CL"},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: xchunked\r\n\r\n", -1, 501,
     "TE xchunked (HTTP-6)"},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked, identity\r\n\r\n", -1, 501,
     "TE list (HTTP-6)"},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: Chunked\r\n\r\n", -1, 501, "TE Chunked (HTTP-6)"},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", -1,
     400, "TE twice (HTTP-6)"},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding:  chunked \r\n\r\n", 0, 0,
     "TE with OWS around chunked"},
    {"POST / HTTP/1.0\r\n" H "Transfer-Encoding: chunked\r\n\r\n", -1, 400, "TE in HTTP/1.0"},
    {"POST / HTTP/1.1\r\n" H "Content-Length: +4\r\n\r\n", -1, 400, "signed CL (HTTP-6)"},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 4\r\nContent-Length: 5\r\n\r\n", -1, 400,
     "two CLs (HTTP-6)"},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 4\r\ncontent-length: 4\r\n\r\n", -1, 400,
     "two equal CLs"},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 4, 4\r\n\r\n", -1, 400, "CL list"},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 0x10\r\n\r\n", -1, 400, "hex CL"},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 04\r\n\r\n", -1, 400, "leading-zero CL"},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 1234567890123456789\r\n\r\n", -1, 400, "19-digit CL"},
    {"POST / HTTP/1.1\r\n" H "Content-Length: \r\n\r\n", -1, 400, "empty CL"},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 0\r\n\r\n", 0, 0, "CL 0"},
    {"GET / HTTP/1.1\r\n" H, -2, 0, "no empty line yet"},
    {"GET / HTTP/1.1\r\n" H "\r", -2, 0, "half of the last CRLF"},
    {"", -2, 0, "nothing"},
};

static void table(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct tcase *t = &cases[i];
		size_t len = strlen(t->req);
		long n;

		if (strstr(t->what, "NUL in a value"))
			len = strlen("GET / HTTP/1.1\r\n" H "X: a") + 1 + strlen("b\r\n\r\n");
		n = net_http_parse_request(t->req, len, 0, &req);
		bool ok = t->want == 0 ? n == (long)len : n == t->want;
		CHECK(ok && (t->want != -1 || req.status == t->status), "%s -> %ld %d %s", t->what,
		      n, req.status, req.why ? req.why : "");
	}
}

static void limits(void)
{
	static char buf[NET_HTTP_MAX_HEAD + 200];
	size_t n = 0, bad = 0;
	long r;

	n += (size_t)sprintf(buf, "GET / HTTP/1.1\r\n" H);
	for (int i = 1; i < NET_HTTP_MAX_HEADERS; i++)
		n += (size_t)sprintf(buf + n, "X-%d: v\r\n", i);
	strcpy(buf + n, "\r\n");
	CHECK(net_http_parse_request(buf, n + 2, 0, &req) == (long)n + 2 && req.n_headers == 100,
	      "100 header fields accepted");
	n += (size_t)sprintf(buf + n, "X-last: v\r\n\r\n");
	CHECK(net_http_parse_request(buf, n, 0, &req) == -1 && req.status == 431,
	      "101 header fields: 431 (HTTP-11)");
	n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\n" H "X: ");
	memset(buf + n, 'a', sizeof(buf) - n);
	CHECK(net_http_parse_request(buf, NET_HTTP_MAX_HEAD - 1, 0, &req) == -2,
	      "64 KiB - 1 without an end: need more");
	CHECK(net_http_parse_request(buf, NET_HTTP_MAX_HEAD, 0, &req) == -1 && req.status == 431,
	      "64 KiB without an end: 431 (HTTP-11)");
	memcpy(buf + NET_HTTP_MAX_HEAD - 2, "\r\n\r\n", 4);
	CHECK(net_http_parse_request(buf, NET_HTTP_MAX_HEAD + 2, 0, &req) == -1 &&
		  req.status == 431,
	      "a head ending 2 bytes past 64 KiB: 431");
	memcpy(buf + NET_HTTP_MAX_HEAD - 4, "\r\n\r\n", 4);
	CHECK(net_http_parse_request(buf, NET_HTTP_MAX_HEAD + 2, 0, &req) == NET_HTTP_MAX_HEAD,
	      "a head of exactly 64 KiB accepted");
	for (size_t k = 0; k < sizeof(curl_connect); k++) {
		r = net_http_parse_request(curl_connect, k, 0, &req);
		if (r != -2 || net_http_parse_request(curl_connect, sizeof(curl_connect), k,
						      &req) != (long)sizeof(curl_connect))
			bad++;
	}
	CHECK(bad == 0, "last_len from any prefix gives the same head");
	const char *two =
	    "GET / HTTP/1.1\r\nHost: a.test\r\n\r\nGET / HTTP/1.1\r\nHost: d.test\r\n\r\n";
	r = parse(two);
	CHECK(r == 32 && span_is(req.host, "a.test"), "pipelined: the first head only (HTTP-7)");
	CHECK(net_http_parse_request(two + r, strlen(two) - (size_t)r, 0, &req) == 32 &&
		  span_is(req.host, "d.test"),
	      "then the second, judged on its own");
	CHECK(parse("GET / HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n\r\n") > 0 && req.host_ipv6 &&
		  span_is(req.host, "2001:db8::1") && req.port == 8080,
	      "IPv6 Host: brackets stripped, port kept");
	CHECK(parse("GET / HTTP/1.1\r\nUpgrade: h2c\r\n" H "\r\n") > 0 &&
		  span_is(net_http_find_header(&req, "UPGRADE")->value, "h2c"),
	      "Upgrade exposed for the caller to refuse (HTTP-10)");
}

struct chunk_out {
	int r;
	char data[256];
	size_t len, used;
};

/* Run the decoder over s fed `slice` bytes at a time. */
static struct chunk_out decode(const char *s, size_t slice, uint64_t cap)
{
	struct net_http_chunked c = {.max_total = cap};
	struct chunk_out o = {.r = -2};
	size_t n = strlen(s), pos = 0, used, dl;
	const char *d;

	while (pos < n) {
		size_t len = n - pos < slice ? n - pos : slice;
		o.r = net_http_chunked_step(&c, s + pos, len, &used, &d, &dl);
		pos += used;
		if (o.r == 1 && o.len + dl < sizeof(o.data)) {
			memcpy(o.data + o.len, d, dl);
			o.len += dl;
		}
		if (o.r == 0 || o.r == -1)
			break;
	}
	if (o.r == 1)
		o.r = -2; /* data delivered, input used up: the body wants more */
	o.used = pos;
	return o;
}

static void chunked(void)
{
	static const struct {
		const char *in;
		int r;
		const char *data;
		const char *what;
	} cs[] = {
	    {"5\r\nhello\r\n0\r\n\r\n", 0, "hello", "one chunk"},
	    {"3\r\nabc\r\nA\r\n0123456789\r\n0\r\n\r\n", 0, "abc0123456789",
	     "two chunks, upper hex"},
	    {"00003\r\nabc\r\n0\r\n\r\n", 0, "abc", "leading zeros within 15 digits"},
	    {"0\r\n\r\n", 0, "", "empty body"},
	    {"1000000000000000\r\n", -1, "", "16 hex digits refused (overflow)"},
	    {"5;ext=1\r\nhello\r\n0\r\n\r\n", -1, "", "chunk extension refused (HTTP-6)"},
	    {"5 \r\nhello\r\n0\r\n\r\n", -1, "", "space after the size refused"},
	    {" 5\r\nhello\r\n0\r\n\r\n", -1, "", "space before the size refused"},
	    {"5\nhello\r\n0\r\n\r\n", -1, "", "bare LF after the size refused"},
	    {"5\r\nhelloX\r\n0\r\n\r\n", -1, "hello", "data longer than its size refused"},
	    {"5\r\nhello\n0\r\n\r\n", -1, "hello", "bare LF after data refused"},
	    {"0\r\nX-Trailer: y\r\n\r\n", -1, "", "trailer fields refused"},
	    {"\r\n", -1, "", "empty size line refused"},
	    {"-1\r\n", -1, "", "negative size refused"},
	    {"0x5\r\nhello\r\n0\r\n\r\n", -1, "", "0x prefix refused"},
	    {"5\r\nhel", -2, "hel", "incomplete: need more"},
	    {"5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\n", 0, "hello", "next request left unread"},
	};

	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		struct chunk_out a = decode(cs[i].in, 1 << 20, 0), b = decode(cs[i].in, 1, 0);
		bool ok = a.r == cs[i].r && a.len == strlen(cs[i].data) &&
			  memcmp(a.data, cs[i].data, a.len) == 0 && b.r == a.r && b.len == a.len &&
			  b.used == a.used && memcmp(a.data, b.data, a.len) == 0;
		CHECK(ok, "chunked: %s (whole and byte by byte) -> %d", cs[i].what, a.r);
	}
	struct chunk_out o = decode("5\r\nhello\r\n0\r\n\r\nGET", 1 << 20, 0);
	CHECK(o.used == 15, "consumed stops at the body's end");
	o = decode("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", 1 << 20, 8);
	CHECK(o.r == -1, "decoded total over max_total refused");
	struct net_http_chunked c = {0};
	size_t used, dl;
	const char *d;
	net_http_chunked_step(&c, "zz", 2, &used, &d, &dl);
	CHECK(net_http_chunked_step(&c, "0\r\n\r\n", 5, &used, &d, &dl) == -1,
	      "an error is sticky");
	c = (struct net_http_chunked){0};
	net_http_chunked_step(&c, "0\r\n\r\n", 5, &used, &d, &dl);
	CHECK(net_http_chunked_step(&c, "5\r\n", 3, &used, &d, &dl) == 0 && used == 0,
	      "after the end, nothing more is taken");
}

/* Response heads (what the terminated path scans when a secret is aboard). */
static void responses(void)
{
	static const struct {
		const char *head;
		long want; /* 0: the whole input; -1, -2 */
		int status;
		bool chunked, encoded;
		const char *what;
	} rcases[] = {
	    {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", 0, 200, 0, 0, "plain"},
	    {"HTTP/1.0 204\r\n\r\n", 0, 204, 0, 0, "no reason phrase"},
	    {"HTTP/1.1 100 Continue\r\n\r\n", 0, 100, 0, 0, "interim"},
	    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 200, 1, 0, "chunked"},
	    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked \r\n\r\n", 0, 200, 1, 0,
	     "chunked, caseless"},
	    {"HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\n\r\n", 0, 200, 0, 0, "identity"},
	    {"HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Encoding: gzip\r\n\r\n", 0,
	     200, 0, 1, "a second Content-Encoding field counts"},
	    {"HTTP/1.1 200 OK\r\nContent-Encoding: identity, br\r\n\r\n", 0, 200, 0, 1, "a list"},
	    {"HTTP/1.1 200 OK\r\nContent-Encoding: ,\r\n\r\n", 0, 200, 0, 0, "empty elements"},
	    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", -1, 0, 0, 0,
	     "a transfer coding but chunked"},
	    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
	     -1, 0, 0, 0, "chunked twice"},
	    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\n", -1, 0, 0, 0, "empty TE"},
	    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", -1, 0, 0,
	     0, "TE and CL"},
	    {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", -1, 0, 0, 0,
	     "CL twice"},
	    {"HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n", -1, 0, 0, 0, "CL with a sign"},
	    {"HTTP/1.1 200 OK\nContent-Encoding: gzip\r\n\r\n", -1, 0, 0, 0, "bare LF"},
	    {"HTTP/1.1 200 OK\r\n Content-Encoding: gzip\r\n\r\n", -1, 0, 0, 0, "obs-fold"},
	    {"HTTP/1.1 200 OK\r\nContent-Encoding : gzip\r\n\r\n", -1, 0, 0, 0, "SP before colon"},
	    {"HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n", -1, 0, 0, 0, "control byte"},
	    {"HTTP/2 200 OK\r\n\r\n", -1, 0, 0, 0, "HTTP/2"},
	    {"HTTP/1.1 20 OK\r\n\r\n", -1, 0, 0, 0, "two digits"},
	    {"HTTP/1.1 600 X\r\n\r\n", -1, 0, 0, 0, "out of range"},
	    {"HTTP/1.1 200OK\r\n\r\n", -1, 0, 0, 0, "no SP before the reason"},
	    {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n", -2, 0, 0, 0, "incomplete"},
	};
	static struct net_http_resp resp;

	for (size_t i = 0; i < sizeof(rcases) / sizeof(rcases[0]); i++) {
		size_t len = strlen(rcases[i].head);
		long n = net_http_parse_response(rcases[i].head, len, &resp);
		bool ok = rcases[i].want == 0 ? n == (long)len && resp.status == rcases[i].status &&
						    resp.chunked == rcases[i].chunked &&
						    resp.encoded == rcases[i].encoded
					      : n == rcases[i].want;

		CHECK(ok, "response: %s -> %ld %s", rcases[i].what, n, resp.why ? resp.why : "");
	}
}

int main(void)
{
	real_requests();
	table();
	limits();
	chunked();
	responses();
	return tap_done();
}
