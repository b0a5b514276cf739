/*
 * httpload: HTTP/1.1 load client for airlockd's command round trip.
 *
 *   httpload --port P --token T --sandbox ID [--sandbox ID ...] [--body JSON]
 *            (--count N | --seconds S) [--warmup N] [--rate R] [--timeout SEC]
 *            [--raw FILE] [--seed N]
 *
 * Every --sandbox gets one kept-alive TCP connection to 127.0.0.1:P (with
 * TCP_NODELAY; up to 1024 connections, the same id may repeat).  On it the
 * client sends, one at a time, `POST /v1/sandboxes/ID/commands` with a Bearer
 * token and a JSON body (default {"cmd":"true","wait":true}).  The request is
 * formatted once per connection and handed to the kernel with one send().
 * Each response is read in full before the next request goes out (no
 * pipelining).  Everything runs in one thread around one epoll loop, with
 * non-blocking sockets and a timerfd for due times and timeouts.
 *
 * A round trip is OK when the status is 200 and the last non-empty line of
 * the NDJSON body contains "type":"exit" and "exit_code":0.  Anything else
 * is an error and is counted: another status, a malformed or oversized
 * response (status line and header fields over 64 KiB, decoded body over
 * 16 MiB, bad chunk framing), a connection that fails or closes early, or
 * no complete response within --timeout seconds of the request (default
 * 10).  The first three errors are printed on stderr with an excerpt of
 * what was received.  After a framing, connection or timeout error the
 * connection is closed and a new one opened for the next request (in a
 * closed loop, 10 ms later if the connect itself failed).  Responses may be chunked or carry a
 * Content-Length (or, if they have neither, end when the server closes);
 * "Connection: close" is honoured by reconnecting, not counted as an error.
 *
 * Method
 *  - --warmup N: every connection first makes N untimed round trips, back
 *    to back; timing starts only once all connections have finished them.
 *  - --count N: every connection makes N timed round trips.  --seconds S:
 *    connections keep starting requests until S seconds after the start;
 *    requests in flight then are completed and counted, none is started
 *    later.
 *  - Closed loop (default): a connection sends its next request as soon as
 *    the previous response is complete.  Latency runs (CLOCK_MONOTONIC) from
 *    just before the request is written to the moment the last byte of its
 *    response has been parsed.
 *  - Open loop (--rate R): every connection has its own Poisson arrival
 *    process with mean R per second (exponential gaps drawn from a
 *    splitmix64 stream seeded from --seed and the connection's index, so a
 *    run is reproducible).  A request that falls due while the previous one
 *    is still in flight is sent right after it, and its latency is counted
 *    from its scheduled time, so queueing behind a slow response is
 *    measured (no coordinated omission).  With --seconds, requests
 *    scheduled before the end are sent.  Warm-up is always closed-loop.
 *  - "seconds" is the timed phase's wall time: from its start to the last
 *    completion (with --seconds, at least S).  Quantiles interpolate
 *    linearly between order statistics (numpy's default, pos = p*(n-1)).
 *    Errors in warm-up are counted in "errors" like the others.
 *
 * Output: one JSON object on stdout:
 *   {"connections":C,"n":OK,"errors":E,"seconds":T,"rate_per_conn":R|null,
 *    "median_ms":..,"p90_ms":..,"p99_ms":..,"min_ms":..,"max_ms":..,
 *    "mean_ms":..,"per_s":OK/T}
 * --raw FILE also writes every timed OK latency in ms, one a line, in the
 * order the responses completed.
 *
 * Exit status: 0 if at least one round trip was OK and there was no error,
 * 1 otherwise (the JSON is printed all the same), 2 on usage or set-up
 * errors.
 *
 * Build: cc -O2 -Wall -Wextra -Werror -o bench/httpload bench/httpload.c
 *        (C17, glibc, no other dependencies; no -lm)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h> /* isfinite, NAN: macros only, no -lm needed */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

enum {
	MAX_CONNS = 1024,
	HDR_MAX = 64 * 1024,	     /* status line + header fields; also trailers */
	BODY_MAX = 16 * 1024 * 1024, /* decoded body */
	CHUNK_LINE_MAX = 4096,	     /* chunk-size line with its extensions */
	READ_MIN = 16 * 1024,	     /* free input space guaranteed for a read() */
	IN_CAP = HDR_MAX + READ_MIN, /* per-connection input buffer */
	MAX_INTERIM = 8,	     /* 1xx responses tolerated before the final one */
	MAX_SHOWN = 3,		     /* errors printed on stderr */
	EXCERPT = 160,		     /* bytes of a response quoted in an error */
	MAX_EVENTS = 64,
};

static const int64_t NS_PER_S = 1000000000;
static const int64_t RECONNECT_DELAY_NS = 10000000; /* after a failed connect */
static const int64_t NEVER = INT64_MAX;
static const uint64_t TIMER_TAG = UINT64_MAX; /* epoll data of the timerfd */
static const char DEFAULT_BODY[] = "{\"cmd\":\"true\",\"wait\":true}";

struct opts {
	int port;
	const char *token;
	const char *body;
	const char *sandbox[MAX_CONNS];
	int n_sandbox;
	long count;	/* > 0: --count mode */
	double seconds; /* > 0: --seconds mode */
	long warmup;
	double rate; /* > 0: open loop */
	double timeout;
	const char *raw;
	uint64_t seed;
};

/* Where the response parser is. */
enum pstate {
	P_HEAD,	      /* status line and header fields */
	P_LEN,	      /* Content-Length body */
	P_CHUNK_SIZE, /* chunk-size line */
	P_CHUNK_DATA,
	P_CHUNK_END, /* CRLF after chunk data */
	P_TRAILER,   /* trailer fields after the last chunk */
	P_EOF,	     /* body delimited by the server closing */
	P_DONE,
};

enum pres { PR_MORE, PR_DONE, PR_ERR };

struct resp {
	enum pstate st;
	int status;
	int close_after; /* Connection: close, HTTP/1.0 or EOF-delimited */
	int interim;	 /* 1xx responses skipped so far */
	size_t scan;	 /* bytes already searched for a line end */
	size_t trailer;	 /* trailer bytes so far */
	uint64_t remain; /* P_LEN, P_CHUNK_DATA: bytes still due */
	size_t got;	 /* raw bytes received for this request */
	char status_line[EXCERPT];
	char *body; /* decoded body; the buffer is kept between requests */
	size_t body_len, body_cap;
};

enum cstate {
	C_IDLE,	      /* no request in flight; fd may be open or -1 */
	C_CONNECTING, /* request started, waiting for connect() */
	C_BUSY,	      /* request (being) sent, response being read */
	C_DONE,	      /* no more requests in this phase */
};

struct conn {
	int idx;
	const char *sandbox;
	int fd;
	uint32_t gen; /* bumped per socket; stale epoll events are ignored */
	uint32_t ev;  /* current epoll mask */
	enum cstate st;
	char *req;
	size_t req_len, req_off;
	long left;	    /* --count: requests still to start in this phase */
	int64_t due;	    /* open loop: scheduled time of the next request */
	int64_t not_before; /* no connect before this (after a failed one) */
	int64_t origin;	    /* latency origin of the request in flight */
	int64_t deadline;   /* timeout of the request in flight */
	uint64_t rng;
	char *in;	       /* raw input, IN_CAP bytes */
	size_t in_len, in_pos; /* valid bytes, parsed bytes */
	struct resp r;
	char why[160];	  /* parser's description of a framing error */
	char ex[EXCERPT]; /* and the bytes it was about */
	size_t ex_len;
};

struct ctx {
	const struct opts *o;
	struct conn *conns;
	int n;
	int ep, tfd;
	int64_t armed; /* expiry the timerfd is set to, NEVER if disarmed */
	struct sockaddr_in addr;
	int64_t timeout_ns;
	int timed;	    /* phase: 0 warm-up, 1 timed */
	int open_loop;	    /* timed phase with --rate */
	int64_t end;	    /* --seconds: nothing is started at or after this */
	int64_t t0, t_last; /* timed phase start, last completion */
	long errors;
	double *lat; /* OK latencies of the timed phase, ms */
	size_t n_lat, cap_lat;
};

/* ---- small helpers ------------------------------------------------------- */

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static void fatal(const char *fmt, ...)
{
	va_list ap;
	fputs("httpload: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: httpload --port P --token T --sandbox ID [--sandbox ID ...] [--body JSON]\n"
	    "                (--count N | --seconds S) [--warmup N] [--rate R] [--timeout SEC]\n"
	    "                [--raw FILE] [--seed N]\n"
	    "\n"
	    "One kept-alive connection per --sandbox to 127.0.0.1:P, each POSTing BODY\n"
	    "(default %s) to /v1/sandboxes/ID/commands, one request\n"
	    "at a time.  A round trip is OK on status 200 with a last NDJSON line of type\n"
	    "exit and exit_code 0.  --count N round trips per connection, or --seconds S\n"
	    "in all; --warmup N untimed ones first.  Closed loop unless --rate R, which\n"
	    "sends Poisson arrivals at R/s per connection (seeded by --seed, default 1)\n"
	    "and times each from its scheduled moment.  --timeout SEC per request\n"
	    "(default 10).  Prints one JSON object with latency quantiles in ms; --raw\n"
	    "FILE also writes each OK latency.  Exit 0 all OK, 1 on errors, 2 on usage.\n",
	    DEFAULT_BODY);
}

static void usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("httpload: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(httpload --help for usage)\n", stderr);
	exit(2);
}

/* Integer option: decimal digits only, within lo..hi. */
static long parse_long(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = (*s >= '0' && *s <= '9') ? strtol(s, &end, 10) : 0;
	if (!(*s >= '0' && *s <= '9') || errno || *end || v < lo || v > hi)
		usage_error("bad value for %s: '%s' (want an integer in %ld..%ld)", opt, s, lo, hi);
	return v;
}

/* Real option: plain decimal, finite, lo < v <= hi. */
static double parse_pos_double(const char *opt, const char *s, double lo, double hi)
{
	char *end;
	errno = 0;
	int plain = (*s >= '0' && *s <= '9') || *s == '.';
	double v = plain ? strtod(s, &end) : 0;
	if (!plain || errno || *end || !isfinite(v) || !(v > lo) || v > hi)
		usage_error("bad value for %s: '%s' (want a number > %g and <= %g)", opt, s, lo,
			    hi);
	return v;
}

static uint64_t parse_u64(const char *opt, const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = (*s >= '0' && *s <= '9') ? strtoull(s, &end, 10) : 0;
	if (!(*s >= '0' && *s <= '9') || errno || *end)
		usage_error("bad value for %s: '%s' (want an unsigned integer)", opt, s);
	return (uint64_t)v;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/*
 * Natural logarithm of a positive normal double, without libm: split off the
 * binary exponent, bring the mantissa m into [sqrt(1/2), sqrt(2)) and sum
 * ln(m) = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172 (terms shrink 34x each).
 */
static double ln_pos(double x)
{
	uint64_t b;
	memcpy(&b, &x, sizeof b);
	int e = (int)((b >> 52) & 0x7ff) - 1023;
	b = (b & ((1ULL << 52) - 1)) | (1023ULL << 52);
	double m;
	memcpy(&m, &b, sizeof m);
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e++;
	}
	double s = (m - 1) / (m + 1), s2 = s * s, term = s, sum = 0;
	for (int k = 1; k < 40; k += 2) {
		sum += term / k;
		term *= s2;
	}
	return 2 * sum + e * 0.69314718055994530942;
}

/* Exponential gap with mean 1/rate seconds, in ns. */
static int64_t exp_gap_ns(uint64_t *rng, double rate)
{
	double u = (double)((splitmix64(rng) >> 11) + 1) * 0x1p-53; /* (0, 1] */
	return (int64_t)(-ln_pos(u) / rate * 1e9);
}

/* Copy n bytes into dst (EXCERPT bytes) for an error message. */
static size_t take_excerpt(char *dst, const char *p, size_t n)
{
	if (!p)
		return 0;
	if (n > EXCERPT)
		n = EXCERPT;
	memcpy(dst, p, n);
	return n;
}

/* Print bytes as a quoted string, escaping anything that is not printable. */
static void print_excerpt(FILE *f, const char *p, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch == '\r')
			fputs("\\r", f);
		else if (ch == '\n')
			fputs("\\n", f);
		else if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			fprintf(f, "\\x%02x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

/* What to quote of a response cut short: its status line, else raw input. */
static const char *partial_excerpt(const struct conn *c, size_t *len)
{
	if (c->r.status_line[0]) {
		*len = strlen(c->r.status_line);
		return c->r.status_line;
	}
	size_t n = c->in_len - c->in_pos;
	*len = n < EXCERPT ? n : EXCERPT;
	return c->in + c->in_pos;
}

/* Count an error; print the first MAX_SHOWN. */
static void report(struct ctx *x, const struct conn *c, const char *what, const char *ex,
		   size_t ex_len)
{
	x->errors++;
	if (x->errors > MAX_SHOWN)
		return;
	fprintf(stderr, "httpload: error on connection %d (sandbox %s, %s): %s", c->idx, c->sandbox,
		x->timed ? "timed" : "warm-up", what);
	if (ex_len) {
		fputs(": ", stderr);
		print_excerpt(stderr, ex, ex_len);
	}
	fputc('\n', stderr);
}

/* ---- response parser ----------------------------------------------------- */

/* Record a framing error with the bytes it concerns; returns PR_ERR. */
static enum pres bad(struct conn *c, const char *why, const char *p, size_t n)
{
	snprintf(c->why, sizeof c->why, "%s", why);
	c->ex_len = take_excerpt(c->ex, p, n);
	return PR_ERR;
}

static int is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* Field-value / reason-phrase byte: HTAB, SP, VCHAR or obs-text. */
static int is_text(unsigned char ch)
{
	return ch == '\t' || (ch >= 0x20 && ch != 0x7f);
}

static int hexval(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Case-insensitive comparison of p[0..n) with a lower-case literal. */
static int ieq(const char *p, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/*
 * Split a header line (without CRLF) into name and value, the value with
 * optional whitespace trimmed.  Returns 0 if the line is malformed.
 */
static int split_field(const char *p, size_t n, size_t *name_len, const char **val, size_t *val_len)
{
	size_t i = 0;
	while (i < n && is_tchar((unsigned char)p[i]))
		i++;
	if (i == 0 || i == n || p[i] != ':')
		return 0;
	*name_len = i;
	size_t a = i + 1, b = n;
	for (size_t k = a; k < n; k++)
		if (!is_text((unsigned char)p[k]))
			return 0;
	while (a < b && (p[a] == ' ' || p[a] == '\t'))
		a++;
	while (b > a && (p[b - 1] == ' ' || p[b - 1] == '\t'))
		b--;
	*val = p + a;
	*val_len = b - a;
	return 1;
}

/* "HTTP/1.x DDD[ reason]"; sets *status and *minor. */
static int status_line_ok(const char *p, size_t n, int *status, int *minor)
{
	if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9' || p[8] != ' ')
		return 0;
	for (int i = 9; i < 12; i++)
		if (p[i] < '0' || p[i] > '9')
			return 0;
	if (n > 12 && p[12] != ' ')
		return 0;
	for (size_t i = 13; i < n; i++)
		if (!is_text((unsigned char)p[i]))
			return 0;
	*minor = p[7] - '0';
	*status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	return *status >= 100 && *status <= 599;
}

/* Whether a Connection value lists the token "close". */
static int lists_close(const char *v, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && v[j] != ',')
			j++;
		size_t a = i, b = j;
		while (a < b && (v[a] == ' ' || v[a] == '\t'))
			a++;
		while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
			b--;
		if (ieq(v + a, b - a, "close"))
			return 1;
		i = j + 1;
	}
	return 0;
}

/* Content-Length value: 1..19 digits, nothing else. */
static int parse_length(const char *v, size_t n, uint64_t *out)
{
	if (n == 0 || n > 19)
		return 0;
	uint64_t x = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return 0;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*out = x;
	return 1;
}

/*
 * Parse a complete header section p[0..n), which ends with the blank line,
 * and choose how the body is framed.
 */
static enum pres parse_head(struct conn *c, const char *p, size_t n)
{
	struct resp *r = &c->r;
	const char *end = p + n;
	const char *nl = memchr(p, '\n', n);
	if (!nl || nl == p || nl[-1] != '\r')
		return bad(c, "status line not terminated by CRLF", p, n);
	size_t len = (size_t)(nl - 1 - p);
	size_t sl = len < sizeof r->status_line - 1 ? len : sizeof r->status_line - 1;
	memcpy(r->status_line, p, sl);
	r->status_line[sl] = '\0';
	int minor;
	if (!status_line_ok(p, len, &r->status, &minor))
		return bad(c, "malformed status line", p, len);

	int chunked = 0, te_seen = 0, cl_seen = 0, close_after = minor == 0;
	uint64_t cl = 0;
	for (const char *q = nl + 1; q < end; q = nl + 1) {
		nl = memchr(q, '\n', (size_t)(end - q));
		if (!nl || nl == q || nl[-1] != '\r')
			return bad(c, "header line not terminated by CRLF", q, (size_t)(end - q));
		size_t ll = (size_t)(nl - 1 - q);
		if (ll == 0)
			break; /* the blank line */
		size_t name_len, val_len;
		const char *val;
		if (!split_field(q, ll, &name_len, &val, &val_len))
			return bad(c, "malformed header field", q, ll);
		if (ieq(q, name_len, "content-length")) {
			uint64_t v;
			if (!parse_length(val, val_len, &v))
				return bad(c, "bad Content-Length", q, ll);
			if (cl_seen && v != cl)
				return bad(c, "conflicting Content-Length fields", q, ll);
			cl_seen = 1;
			cl = v;
		} else if (ieq(q, name_len, "transfer-encoding")) {
			if (te_seen || !ieq(val, val_len, "chunked"))
				return bad(c, "unsupported Transfer-Encoding", q, ll);
			te_seen = chunked = 1;
		} else if (ieq(q, name_len, "connection")) {
			if (lists_close(val, val_len))
				close_after = 1;
		}
	}

	if (r->status < 200) {
		if (r->status == 101)
			return bad(c, "unexpected 101 Switching Protocols", p, len);
		if (++r->interim > MAX_INTERIM)
			return bad(c, "too many 1xx responses", p, len);
		r->st = P_HEAD; /* an interim response: the real one follows */
		return PR_MORE;
	}
	if (chunked && cl_seen)
		return bad(c, "both Transfer-Encoding and Content-Length", p, n);
	r->close_after = close_after;
	if (r->status == 204 || r->status == 304) {
		r->st = P_DONE;
	} else if (chunked) {
		r->st = P_CHUNK_SIZE;
	} else if (cl_seen) {
		if (cl > BODY_MAX)
			return bad(c, "Content-Length exceeds 16 MiB", p, n);
		r->remain = cl;
		r->st = cl ? P_LEN : P_DONE;
	} else {
		r->close_after = 1;
		r->st = P_EOF;
	}
	return PR_MORE;
}

/*
 * Examine a chunk-size line at p[0..n): 1*HEXDIG [ BWS ";" ext ] CRLF.
 * Returns PR_DONE with *size and *line_len (CRLF included), PR_MORE if the
 * line is incomplete, PR_ERR if it is malformed or too long.
 */
static enum pres chunk_line(struct conn *c, const char *p, size_t n, uint64_t *size,
			    size_t *line_len)
{
	size_t i = 0;
	uint64_t v = 0;
	while (i < n && hexval((unsigned char)p[i]) >= 0) {
		v = v * 16 + (uint64_t)hexval((unsigned char)p[i]);
		if (v > BODY_MAX)
			return bad(c, "chunk size exceeds 16 MiB", p, n);
		i++;
	}
	if (i == 0 && n > 0)
		return bad(c, "chunk size is not hexadecimal", p, n);
	size_t j = i;
	while (j < n && (p[j] == ' ' || p[j] == '\t'))
		j++;
	if (j < n && p[j] == ';') {
		j++;
		while (j < n && p[j] != '\r' && is_text((unsigned char)p[j]))
			j++;
	} else if (j > i && j < n) {
		return bad(c, "whitespace after chunk size without extension", p, n);
	}
	if (j < n && p[j] != '\r')
		return bad(c, "bad byte in chunk-size line", p, n);
	if (j + 1 < n && p[j + 1] != '\n')
		return bad(c, "chunk-size line not terminated by CRLF", p, n);
	if (j + 2 > CHUNK_LINE_MAX)
		return bad(c, "chunk-size line too long", p, n);
	if (j + 1 >= n)
		return PR_MORE;
	*size = v;
	*line_len = j + 2;
	return PR_DONE;
}

static enum pres body_append(struct conn *c, const char *p, size_t n)
{
	struct resp *r = &c->r;
	if (n > (size_t)BODY_MAX - r->body_len)
		return bad(c, "body exceeds 16 MiB", p, n);
	if (r->body_len + n > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 4096;
		while (cap < r->body_len + n)
			cap *= 2;
		if (cap > BODY_MAX)
			cap = BODY_MAX;
		char *b = realloc(r->body, cap);
		if (!b)
			return bad(c, "out of memory for the body", NULL, 0);
		r->body = b;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, p, n);
	r->body_len += n;
	return PR_MORE;
}

/* Take a Content-Length or chunk-data slice of what is buffered. */
static enum pres take_body(struct conn *c, const char *p, size_t avail)
{
	size_t k = avail < c->r.remain ? avail : (size_t)c->r.remain;
	if (k && body_append(c, p, k) == PR_ERR)
		return PR_ERR;
	c->in_pos += k;
	c->r.remain -= k;
	return PR_MORE;
}

/* One step of the parser over the buffered input. */
static enum pres parse_step(struct conn *c, int *progress)
{
	struct resp *r = &c->r;
	const char *p = c->in + c->in_pos;
	size_t avail = c->in_len - c->in_pos;
	size_t pos0 = c->in_pos;
	enum pstate st0 = r->st;
	enum pres rc = PR_MORE;

	switch (r->st) {
	case P_HEAD: {
		if (avail == 0)
			break;
		if (memcmp(p, "HTTP/", avail < 5 ? avail : 5) != 0)
			return bad(c, "response does not start with HTTP/", p, avail);
		size_t from = r->scan >= 3 ? r->scan - 3 : 0;
		const char *e = memmem(p + from, avail - from, "\r\n\r\n", 4);
		/* Fail fast on bare LFs among the new header bytes. */
		size_t lim = e ? (size_t)(e + 4 - p) : avail;
		for (const char *lf = p + r->scan; (lf = memchr(lf, '\n', lim - (size_t)(lf - p)));
		     lf++)
			if (lf == p || lf[-1] != '\r')
				return bad(c, "bare LF in the header section", p, lim);
		if (!e) {
			if (avail >= HDR_MAX)
				return bad(c, "header section exceeds 64 KiB", p, avail);
			r->scan = avail;
			break;
		}
		size_t hl = (size_t)(e + 4 - p);
		if (hl > HDR_MAX)
			return bad(c, "header section exceeds 64 KiB", p, avail);
		c->in_pos += hl;
		r->scan = 0;
		rc = parse_head(c, p, hl);
		*progress = 1; /* an interim response leaves st at P_HEAD */
		break;
	}
	case P_LEN:
		rc = take_body(c, p, avail);
		if (rc != PR_ERR && r->remain == 0)
			r->st = P_DONE;
		break;
	case P_CHUNK_SIZE: {
		uint64_t size;
		size_t ll;
		if (avail == 0)
			break;
		rc = chunk_line(c, p, avail, &size, &ll);
		if (rc != PR_DONE)
			break;
		rc = PR_MORE;
		c->in_pos += ll;
		if (size == 0) {
			r->st = P_TRAILER;
			r->scan = 0;
		} else if (size > (size_t)BODY_MAX - r->body_len) {
			return bad(c, "body exceeds 16 MiB", p, ll);
		} else {
			r->remain = size;
			r->st = P_CHUNK_DATA;
		}
		break;
	}
	case P_CHUNK_DATA:
		rc = take_body(c, p, avail);
		if (rc != PR_ERR && r->remain == 0)
			r->st = P_CHUNK_END;
		break;
	case P_CHUNK_END:
		if (avail >= 1 && (p[0] != '\r' || (avail >= 2 && p[1] != '\n')))
			return bad(c, "chunk data not followed by CRLF", p, avail);
		if (avail >= 2) {
			c->in_pos += 2;
			r->st = P_CHUNK_SIZE;
		}
		break;
	case P_TRAILER: {
		const char *nl =
		    avail > r->scan ? memchr(p + r->scan, '\n', avail - r->scan) : NULL;
		if (!nl) {
			if (r->trailer + avail > HDR_MAX)
				return bad(c, "trailer section exceeds 64 KiB", p, avail);
			r->scan = avail;
			break;
		}
		size_t ll = (size_t)(nl - p) + 1;
		if (ll < 2 || nl[-1] != '\r')
			return bad(c, "trailer line not terminated by CRLF", p, ll);
		r->trailer += ll;
		if (r->trailer > HDR_MAX)
			return bad(c, "trailer section exceeds 64 KiB", p, ll);
		size_t name_len, val_len;
		const char *val;
		if (ll > 2 && !split_field(p, ll - 2, &name_len, &val, &val_len))
			return bad(c, "malformed trailer field", p, ll);
		c->in_pos += ll;
		r->scan = 0;
		if (ll == 2)
			r->st = P_DONE;
		break;
	}
	case P_EOF:
		rc = avail ? body_append(c, p, avail) : PR_MORE;
		c->in_pos += rc == PR_ERR ? 0 : avail;
		break;
	case P_DONE:
		if (avail)
			return bad(c, "unexpected bytes after the response", p, avail);
		return PR_DONE;
	}
	if (c->in_pos != pos0 || r->st != st0)
		*progress = 1;
	return rc;
}

/* Run the parser over everything buffered. */
static enum pres parse(struct conn *c)
{
	for (;;) {
		int progress = 0;
		enum pres rc = parse_step(c, &progress);
		if (rc != PR_MORE || !progress)
			return rc;
	}
}

/*
 * Whether the last non-empty line of an NDJSON body reports a successful
 * exit.  *line and *len give that line (len 0 if there is none).
 */
static int ndjson_exit_ok(const char *b, size_t n, const char **line, size_t *len)
{
	*line = b;
	*len = 0;
	size_t end = n;
	for (;;) {
		size_t start = end;
		while (start > 0 && b[start - 1] != '\n')
			start--;
		size_t k = start;
		while (k < end && (b[k] == ' ' || b[k] == '\t' || b[k] == '\r'))
			k++;
		if (k < end) {
			*line = b + start;
			*len = end - start;
			break;
		}
		if (start == 0)
			return 0;
		end = start - 1;
	}
	static const char code[] = "\"exit_code\":0";
	if (!memmem(*line, *len, "\"type\":\"exit\"", 13))
		return 0;
	const char *p = *line, *e = *line + *len;
	while ((p = memmem(p, (size_t)(e - p), code, sizeof code - 1))) {
		p += sizeof code - 1;
		if (p == e || (*p && strchr(",} \t\r", *p)))
			return 1;
	}
	return 0;
}

/* ---- connections ---------------------------------------------------------- */

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->ev = 0;
	c->in_len = c->in_pos = 0;
}

static int set_events(struct ctx *x, struct conn *c, uint32_t ev)
{
	if (c->ev == ev)
		return 0;
	struct epoll_event e = {.events = ev,
				.data.u64 = (uint64_t)c->gen << 32 | (uint32_t)c->idx};
	if (epoll_ctl(x->ep, EPOLL_CTL_MOD, c->fd, &e) < 0)
		return -1;
	c->ev = ev;
	return 0;
}

static void push_latency(struct ctx *x, double ms)
{
	if (x->n_lat == x->cap_lat) {
		size_t cap = x->cap_lat ? x->cap_lat * 2 : 4096;
		double *v = realloc(x->lat, cap * sizeof *v);
		if (!v)
			fatal("out of memory for %zu latencies", cap);
		x->lat = v;
		x->cap_lat = cap;
	}
	x->lat[x->n_lat++] = ms;
}

/* The request in flight is over (either way); the connection goes idle. */
static void request_end(struct ctx *x, struct conn *c, int64_t now)
{
	c->st = C_IDLE;
	if (x->timed && now > x->t_last)
		x->t_last = now;
}

static void request_failed(struct ctx *x, struct conn *c, int64_t now, int drop, const char *what,
			   const char *ex, size_t ex_len)
{
	report(x, c, what, ex, ex_len);
	if (drop)
		conn_close(c);
	request_end(x, c, now);
}

static void connect_failed(struct ctx *x, struct conn *c, int err)
{
	char what[96];
	int64_t now = mono_ns();
	snprintf(what, sizeof what, "connect: %s", strerror(err));
	if (!x->open_loop) /* the arrival process paces an open loop already */
		c->not_before = now + RECONNECT_DELAY_NS;
	request_failed(x, c, now, 1, what, NULL, 0);
}

/* Open a socket and start connecting: 1 connected, 0 in progress, -errno. */
static int conn_open(struct ctx *x, struct conn *c)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1, err;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
		goto fail;
	c->gen++;
	struct epoll_event e = {.events = EPOLLOUT,
				.data.u64 = (uint64_t)c->gen << 32 | (uint32_t)c->idx};
	if (epoll_ctl(x->ep, EPOLL_CTL_ADD, fd, &e) < 0)
		goto fail;
	c->fd = fd;
	c->ev = EPOLLOUT;
	c->in_len = c->in_pos = 0;
	if (connect(fd, (const struct sockaddr *)&x->addr, sizeof x->addr) == 0)
		return 1;
	if (errno == EINPROGRESS)
		return 0;
	err = errno;
	conn_close(c);
	return -err;
fail:
	err = errno;
	close(fd);
	return -err;
}

/* Write (the rest of) the request; wait for EPOLLOUT if the socket is full. */
static void send_request(struct ctx *x, struct conn *c)
{
	while (c->req_off < c->req_len) {
		ssize_t k = send(c->fd, c->req + c->req_off, c->req_len - c->req_off, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (set_events(x, c, EPOLLIN | EPOLLOUT) < 0)
				break;
			return;
		}
		if (k < 0) {
			char what[96];
			snprintf(what, sizeof what, "send: %s", strerror(errno));
			request_failed(x, c, mono_ns(), 1, what, NULL, 0);
			return;
		}
		c->req_off += (size_t)k;
	}
	if (c->req_off == c->req_len && set_events(x, c, EPOLLIN) == 0)
		return;
	char what[96];
	snprintf(what, sizeof what, "epoll_ctl: %s", strerror(errno));
	request_failed(x, c, mono_ns(), 1, what, NULL, 0);
}

/* The connection is up: time the request from here (closed loop) and send. */
static void begin_send(struct ctx *x, struct conn *c)
{
	c->st = C_BUSY;
	c->req_off = 0;
	if (!x->open_loop)
		c->origin = mono_ns();
	send_request(x, c);
}

static void reset_resp(struct conn *c)
{
	struct resp *r = &c->r;
	r->st = P_HEAD;
	r->status = 0;
	r->close_after = 0;
	r->interim = 0;
	r->scan = 0;
	r->trailer = 0;
	r->remain = 0;
	r->got = 0;
	r->status_line[0] = '\0';
	r->body_len = 0;
	c->in_len = c->in_pos = 0;
}

static void start_request(struct ctx *x, struct conn *c, int64_t now)
{
	if (!x->timed || x->o->count)
		c->left--;
	if (x->open_loop) {
		c->origin = c->due;
		c->due += exp_gap_ns(&c->rng, x->o->rate);
	}
	reset_resp(c);
	c->deadline = now + x->timeout_ns;
	if (c->fd < 0) {
		int rc = conn_open(x, c);
		if (rc < 0) {
			connect_failed(x, c, -rc);
			return;
		}
		if (rc == 0) {
			c->st = C_CONNECTING;
			return;
		}
	}
	begin_send(x, c);
}

/* Whether the connection has another request to make in this phase. */
static int has_next(const struct ctx *x, const struct conn *c, int64_t now)
{
	if (!x->timed || x->o->count)
		return c->left > 0;
	return x->open_loop ? c->due < x->end : now < x->end;
}

static int64_t start_time(const struct ctx *x, const struct conn *c)
{
	int64_t t = x->open_loop ? c->due : 0;
	return t > c->not_before ? t : c->not_before;
}

/* Start the connection's next request if it is idle and the request is due. */
static void maybe_start(struct ctx *x, struct conn *c, int64_t now)
{
	if (c->st != C_IDLE)
		return;
	if (!has_next(x, c, now)) {
		c->st = C_DONE;
		return;
	}
	if (start_time(x, c) <= now)
		start_request(x, c, now);
}

/* A complete response: judge it. */
static void complete(struct ctx *x, struct conn *c, int64_t now)
{
	struct resp *r = &c->r;
	int drop = r->close_after || c->req_off < c->req_len;
	const char *line;
	size_t len;
	char what[64];
	if (r->status != 200) {
		char ex[EXCERPT];
		int k = snprintf(ex, sizeof ex, "%s | ", r->status_line);
		size_t n = k < 0 ? 0 : (size_t)k >= sizeof ex ? sizeof ex - 1 : (size_t)k;
		size_t b = r->body_len < sizeof ex - n ? r->body_len : sizeof ex - n;
		if (b)
			memcpy(ex + n, r->body, b);
		snprintf(what, sizeof what, "HTTP status %d", r->status);
		request_failed(x, c, now, drop, what, ex, n + b);
		return;
	}
	if (!ndjson_exit_ok(r->body, r->body_len, &line, &len)) {
		/* Quote from "exit_code" on, if there, where the reason follows. */
		const char *at = len ? memmem(line, len, "\"exit_code\"", 11) : NULL;
		if (at) {
			len -= (size_t)(at - line);
			line = at;
		}
		request_failed(x, c, now, drop,
			       len ? "last NDJSON line is not an exit with exit_code 0"
				   : "no non-empty NDJSON line in the body",
			       line, len < EXCERPT ? len : EXCERPT);
		return;
	}
	if (x->timed)
		push_latency(x, (double)(now - c->origin) / 1e6);
	if (drop)
		conn_close(c);
	request_end(x, c, now);
}

/* The server closed the connection while a response was due. */
static void closed_early(struct ctx *x, struct conn *c)
{
	struct resp *r = &c->r;
	if (r->st == P_EOF) {
		r->st = P_DONE;
		complete(x, c, mono_ns());
		return;
	}
	size_t len;
	const char *ex = partial_excerpt(c, &len);
	request_failed(x, c, mono_ns(), 1,
		       r->got ? "connection closed mid-response"
			      : "connection closed before the response",
		       ex, len);
}

/* Read and parse what has arrived for the request in flight. */
static void conn_read(struct ctx *x, struct conn *c)
{
	for (;;) {
		if (c->in_pos == c->in_len) {
			c->in_pos = c->in_len = 0;
		} else if (IN_CAP - c->in_len < READ_MIN) {
			memmove(c->in, c->in + c->in_pos, c->in_len - c->in_pos);
			c->in_len -= c->in_pos;
			c->in_pos = 0;
		}
		size_t room = IN_CAP - c->in_len;
		ssize_t k = read(c->fd, c->in + c->in_len, room);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (k < 0) {
			char what[96];
			size_t len;
			snprintf(what, sizeof what, "read: %s", strerror(errno));
			const char *ex = partial_excerpt(c, &len);
			request_failed(x, c, mono_ns(), 1, what, ex, len);
			return;
		}
		if (k == 0) {
			closed_early(x, c);
			return;
		}
		c->in_len += (size_t)k;
		c->r.got += (size_t)k;
		enum pres rc = parse(c);
		if (rc == PR_DONE) {
			complete(x, c, mono_ns());
			return;
		}
		if (rc == PR_ERR) {
			request_failed(x, c, mono_ns(), 1, c->why, c->ex, c->ex_len);
			return;
		}
		if ((size_t)k < room)
			return; /* drained */
	}
}

/* Readable while no request is in flight: the server closed, or misbehaved. */
static void idle_read(struct ctx *x, struct conn *c)
{
	char b[EXCERPT];
	ssize_t k = read(c->fd, b, sizeof b);
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (k > 0)
		report(x, c, "unsolicited bytes from the server", b, (size_t)k);
	conn_close(c);
}

static void connect_done(struct ctx *x, struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof err;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		connect_failed(x, c, err);
		return;
	}
	begin_send(x, c);
}

static void conn_event(struct ctx *x, struct conn *c, uint32_t ev)
{
	if (c->st == C_CONNECTING) {
		connect_done(x, c);
	} else {
		if ((ev & EPOLLOUT) && c->st == C_BUSY && c->req_off < c->req_len)
			send_request(x, c);
		if (c->fd >= 0 && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
			if (c->st == C_BUSY)
				conn_read(x, c);
			else
				idle_read(x, c);
		}
	}
	maybe_start(x, c, mono_ns());
}

/* ---- the loop ---------------------------------------------------------------- */

static void arm_timer(struct ctx *x, int64_t when)
{
	if (when == x->armed)
		return;
	struct itimerspec its;
	memset(&its, 0, sizeof its);
	if (when != NEVER) {
		if (when <= 0)
			when = 1; /* an all-zero it_value would disarm */
		its.it_value.tv_sec = (time_t)(when / NS_PER_S);
		its.it_value.tv_nsec = (long)(when % NS_PER_S);
	}
	if (timerfd_settime(x->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		fatal("timerfd_settime: %s", strerror(errno));
	x->armed = when;
}

/*
 * Time out overdue requests, start due ones, and return the earliest moment
 * something has to happen next; *active counts connections not done.
 */
static int64_t service(struct ctx *x, int *active)
{
	int64_t now = mono_ns(), next = NEVER;
	*active = 0;
	for (int i = 0; i < x->n; i++) {
		struct conn *c = &x->conns[i];
		if ((c->st == C_BUSY || c->st == C_CONNECTING) && now >= c->deadline) {
			char what[96];
			size_t len;
			const char *ex = partial_excerpt(c, &len);
			snprintf(what, sizeof what, "no complete response within %g s",
				 x->o->timeout);
			request_failed(x, c, now, 1, what, ex, len);
		}
		maybe_start(x, c, now);
		int64_t t;
		switch (c->st) {
		case C_DONE:
			continue;
		case C_IDLE:
			t = start_time(x, c);
			break;
		default:
			t = c->deadline;
			break;
		}
		if (t < next)
			next = t;
		(*active)++;
	}
	return next;
}

static void run_phase(struct ctx *x, int timed)
{
	int64_t now = mono_ns();
	x->timed = timed;
	x->open_loop = timed && x->o->rate > 0;
	x->t0 = x->t_last = now;
	x->end = timed && x->o->seconds > 0 ? now + (int64_t)(x->o->seconds * 1e9) : NEVER;
	for (int i = 0; i < x->n; i++) {
		struct conn *c = &x->conns[i];
		c->left = timed ? x->o->count : x->o->warmup;
		c->due = x->open_loop ? now + exp_gap_ns(&c->rng, x->o->rate) : now;
		c->st = C_IDLE;
	}
	struct epoll_event evs[MAX_EVENTS];
	for (;;) {
		int active;
		int64_t next = service(x, &active);
		if (!active)
			break;
		arm_timer(x, next);
		int n = epoll_wait(x->ep, evs, MAX_EVENTS, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fatal("epoll_wait: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64;
			if (tag == TIMER_TAG) {
				uint64_t ticks;
				if (read(x->tfd, &ticks, sizeof ticks) == (ssize_t)sizeof ticks)
					x->armed = NEVER; /* one-shot: it has expired */
				continue;
			}
			uint32_t idx = (uint32_t)tag;
			if (idx >= (uint32_t)x->n)
				continue;
			struct conn *c = &x->conns[idx];
			if ((uint32_t)(tag >> 32) != c->gen || c->fd < 0)
				continue; /* for a socket closed earlier in this batch */
			conn_event(x, c, evs[i].events);
		}
	}
}

/* ---- set-up and results ------------------------------------------------------ */

static void parse_args(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	o->body = DEFAULT_BODY;
	o->timeout = 10;
	o->seed = 1;
	unsigned seen = 0;
	static const char *const names[] = {"--port",	 "--token",  "--body",	 "--count",
					    "--seconds", "--warmup", "--rate",	 "--timeout",
					    "--raw",	 "--seed",   "--sandbox"};
	const int n_names = (int)(sizeof names / sizeof names[0]);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		}
		int k = 0;
		while (k < n_names && strcmp(a, names[k]) != 0)
			k++;
		if (k == n_names)
			usage_error(
			    a[0] == '-' ? "unknown option '%s'" : "unexpected argument '%s'", a);
		if (i + 1 >= argc)
			usage_error("%s needs a value", a);
		const char *v = argv[++i];
		if (strcmp(a, "--sandbox") != 0 && (seen & (1u << k)))
			usage_error("%s given more than once", a);
		seen |= 1u << k;
		if (!strcmp(a, "--port"))
			o->port = (int)parse_long(a, v, 1, 65535);
		else if (!strcmp(a, "--token"))
			o->token = v;
		else if (!strcmp(a, "--body"))
			o->body = v;
		else if (!strcmp(a, "--count"))
			o->count = parse_long(a, v, 1, 1000000000L);
		else if (!strcmp(a, "--seconds"))
			o->seconds = parse_pos_double(a, v, 0, 1e6);
		else if (!strcmp(a, "--warmup"))
			o->warmup = parse_long(a, v, 0, 1000000000L);
		else if (!strcmp(a, "--rate"))
			o->rate = parse_pos_double(a, v, 0, 1e6);
		else if (!strcmp(a, "--timeout"))
			o->timeout = parse_pos_double(a, v, 0, 1e6);
		else if (!strcmp(a, "--raw"))
			o->raw = v;
		else if (!strcmp(a, "--seed"))
			o->seed = parse_u64(a, v);
		else if (o->n_sandbox == MAX_CONNS)
			usage_error("at most %d --sandbox options", MAX_CONNS);
		else
			o->sandbox[o->n_sandbox++] = v;
	}
	if (!o->port)
		usage_error("--port is required");
	if (!o->token)
		usage_error("--token is required");
	if (!o->n_sandbox)
		usage_error("at least one --sandbox is required");
	if (!o->count == !(o->seconds > 0))
		usage_error("give exactly one of --count and --seconds");
	if (o->rate > 0 && o->rate < 1e-3)
		usage_error("--rate must be at least 0.001");
	if (!*o->token)
		usage_error("--token is empty");
	for (const char *p = o->token; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			usage_error("--token may only contain printable ASCII without spaces");
	for (int i = 0; i < o->n_sandbox; i++) {
		const char *s = o->sandbox[i];
		if (!*s || strlen(s) > 256 ||
		    strspn(s,
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-") !=
			strlen(s))
			usage_error("bad --sandbox '%s' (want 1..256 of [A-Za-z0-9._~-])", s);
	}
	if (strlen(o->body) > BODY_MAX)
		usage_error("--body is longer than 16 MiB");
}

/* Let the process hold one descriptor per connection plus a few. */
static void raise_fd_limit(int need)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= (rlim_t)need)
		return;
	rl.rlim_cur = rl.rlim_max < (rlim_t)need ? rl.rlim_max : (rlim_t)need;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < (rlim_t)need)
		fprintf(stderr,
			"httpload: warning: open-file limit below %d, connections may fail\n",
			need);
}

static void setup(struct ctx *x, const struct opts *o)
{
	memset(x, 0, sizeof *x);
	x->o = o;
	x->n = o->n_sandbox;
	x->armed = NEVER;
	x->timeout_ns = (int64_t)(o->timeout * 1e9);
	x->addr.sin_family = AF_INET;
	x->addr.sin_port = htons((uint16_t)o->port);
	x->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	raise_fd_limit(x->n + 32);

	x->ep = epoll_create1(EPOLL_CLOEXEC);
	if (x->ep < 0)
		fatal("epoll_create1: %s", strerror(errno));
	x->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (x->tfd < 0)
		fatal("timerfd_create: %s", strerror(errno));
	struct epoll_event e = {.events = EPOLLIN, .data.u64 = TIMER_TAG};
	if (epoll_ctl(x->ep, EPOLL_CTL_ADD, x->tfd, &e) < 0)
		fatal("epoll_ctl: %s", strerror(errno));

	x->conns = calloc((size_t)x->n, sizeof *x->conns);
	if (!x->conns)
		fatal("out of memory");
	size_t body_len = strlen(o->body);
	uint64_t seed = o->seed;
	for (int i = 0; i < x->n; i++) {
		struct conn *c = &x->conns[i];
		c->idx = i;
		c->sandbox = o->sandbox[i];
		c->fd = -1;
		c->rng = splitmix64(&seed);
		c->in = malloc(IN_CAP);
		size_t cap = body_len + strlen(c->sandbox) + strlen(o->token) + 256;
		c->req = malloc(cap);
		if (!c->in || !c->req)
			fatal("out of memory");
		int k = snprintf(c->req, cap,
				 "POST /v1/sandboxes/%s/commands HTTP/1.1\r\n"
				 "Host: 127.0.0.1:%d\r\n"
				 "Authorization: Bearer %s\r\n"
				 "Content-Type: application/json\r\n"
				 "Content-Length: %zu\r\n"
				 "\r\n",
				 c->sandbox, o->port, o->token, body_len);
		if (k < 0 || (size_t)k + body_len >= cap)
			fatal("request does not fit its buffer");
		memcpy(c->req + k, o->body, body_len);
		c->req_len = (size_t)k + body_len;
	}
}

static void teardown(struct ctx *x)
{
	for (int i = 0; i < x->n; i++) {
		conn_close(&x->conns[i]);
		free(x->conns[i].in);
		free(x->conns[i].req);
		free(x->conns[i].r.body);
	}
	free(x->conns);
	free(x->lat);
	close(x->tfd);
	close(x->ep);
}

static int cmp_double(const void *a, const void *b)
{
	double u = *(const double *)a, v = *(const double *)b;
	return (u > v) - (u < v);
}

/* Quantile q of sorted v[0..n), linear interpolation (numpy's default). */
static double quantile(const double *v, size_t n, double q)
{
	if (n == 0)
		return NAN;
	double pos = q * (double)(n - 1);
	size_t lo = (size_t)pos;
	size_t hi = lo + 1 < n ? lo + 1 : lo;
	return v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
}

static void json_num(FILE *f, const char *key, double v, int prec)
{
	if (isnan(v) || isinf(v))
		fprintf(f, ",\"%s\":null", key);
	else
		fprintf(f, ",\"%s\":%.*f", key, prec, v);
}

/* Write --raw; returns 0 on success. */
static int write_raw(const struct ctx *x, const char *path)
{
	FILE *f = fopen(path, "we");
	if (!f) {
		fprintf(stderr, "httpload: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < x->n_lat; i++)
		fprintf(f, "%.4f\n", x->lat[i]);
	int bad_write = ferror(f);
	if (fclose(f) != 0 || bad_write) {
		fprintf(stderr, "httpload: writing %s failed\n", path);
		return -1;
	}
	return 0;
}

static void print_results(const struct ctx *x, double secs)
{
	size_t n = x->n_lat;
	double *v = NULL, sum = 0;
	if (n) {
		v = malloc(n * sizeof *v);
		if (!v)
			fatal("out of memory");
		memcpy(v, x->lat, n * sizeof *v);
		qsort(v, n, sizeof *v, cmp_double);
		for (size_t i = 0; i < n; i++)
			sum += v[i];
	}
	printf("{\"connections\":%d,\"n\":%zu,\"errors\":%ld", x->n, n, x->errors);
	json_num(stdout, "seconds", secs, 6);
	if (x->o->rate > 0)
		printf(",\"rate_per_conn\":%g", x->o->rate);
	else
		printf(",\"rate_per_conn\":null");
	json_num(stdout, "median_ms", quantile(v, n, 0.5), 4);
	json_num(stdout, "p90_ms", quantile(v, n, 0.9), 4);
	json_num(stdout, "p99_ms", quantile(v, n, 0.99), 4);
	json_num(stdout, "min_ms", n ? v[0] : NAN, 4);
	json_num(stdout, "max_ms", n ? v[n - 1] : NAN, 4);
	json_num(stdout, "mean_ms", n ? sum / (double)n : NAN, 4);
	json_num(stdout, "per_s", secs > 0 ? (double)n / secs : NAN, 2);
	printf("}\n");
	free(v);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct ctx x;
	parse_args(argc, argv, &o);
	if (o.raw) {
		/* Fail on an unwritable path now, not after the run. */
		FILE *f = fopen(o.raw, "we");
		if (!f)
			fatal("%s: %s", o.raw, strerror(errno));
		fclose(f);
	}
	setup(&x, &o);

	if (o.warmup)
		run_phase(&x, 0);
	run_phase(&x, 1);
	int64_t last = x.t_last;
	if (o.seconds > 0 && x.end > last)
		last = x.end;
	double secs = (double)(last - x.t0) / 1e9;

	int rc = x.n_lat > 0 && x.errors == 0 ? 0 : 1;
	if (x.errors > MAX_SHOWN)
		fprintf(stderr, "httpload: %ld errors in all (only the first %d shown)\n", x.errors,
			MAX_SHOWN);
	if (o.raw && write_raw(&x, o.raw) < 0)
		rc = 2;
	print_results(&x, secs);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "httpload: writing the results failed\n");
		rc = 2;
	}
	teardown(&x);
	return rc;
}
