/*
 * cycle: a daemon sandbox's whole life over HTTP, timed from C, alternated with one-shot runs.
 *
 *   cycle --port P --token T --count N [--warmup N] [--airlock PATH] [--pause-ms P]
 *         [--timeout SEC] [--raw FILE]
 *
 * One cycle, on one kept-alive TCP connection to 127.0.0.1:P (TCP_NODELAY, each request in
 * one send()), is what an SDK does to run one command in a new sandbox:
 *   1. POST /v1/sandboxes {}                                    (201, the sandbox's id)
 *   2. POST /v1/sandboxes/ID/commands {"cmd":"true","wait":true}  (200; the last NDJSON line
 *      is the "exit" event with "exit_code":0)
 *   3. POST /v1/sandboxes/ID/stop                               (200)
 * With --airlock PATH, each cycle is alternated with one `PATH run -- /bin/true`
 * (posix_spawn, stdio on /dev/null, timed to its reaping with wait4; it must exit 0), the
 * two swapping places every iteration so that drift hits both alike. --pause-ms P sleeps P
 * ms (untimed) after each of them, so that what one leaves to do in the background (a
 * one-shot's namespace check, a stopped sandbox's unmount, a pool's refill) is done before
 * the other starts: each is timed from the same quiet machine. Both are timed with
 * CLOCK_MONOTONIC by the same process, so neither pays a client the other does not: this is
 * the comparison of issue 31's "create + run + stop <= 1.0x a one-shot" (bench/daemon runs
 * it; Python's http.client costs ~0.2-0.4 ms more per request on these hosts).
 *
 * Answers may carry a Content-Length or be chunked (a command that runs longer than the
 * daemon waits to answer in one piece); anything else is an error: another status, a
 * status line or header over 64 KiB, a body over 1 MiB, broken chunk framing, bytes after
 * the answer, a hang-up, no answer within --timeout seconds (default 30). A create that
 * says "warm":true came from the daemon's pool (`airlock serve --pool N`): such cycles are
 * reported apart from cold ones.
 *
 * Output: one JSON object on stdout, medians in ms:
 *   {"n":N,"cycle_median_ms":..,"create_median_ms":..,"run_median_ms":..,
 *    "stop_median_ms":..,"warm_n":W,"warm_median_ms":..|null,"cold_n":C,
 *    "cold_median_ms":..|null,"oneshot_median_ms":..|null,"ratio":cycle/oneshot|null}
 * --raw FILE writes every timed iteration: "cycle create run stop warm(0|1) oneshot|-".
 *
 * Exit status: 0 when every cycle and run was OK; 1 on the first failure, with a message;
 * 2 on usage errors.
 *
 * Build: cc -O2 -Wall -Wextra -Werror -o cycle bench/cycle.c (C17, glibc only)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 65536
#define BODY_MAX (1 << 20)

extern char **environ;

struct conn {
	int fd;
	int port;
	const char *token;
	char in[HEAD_MAX + 1]; /* bytes read and not yet used */
	size_t have;
	char *body; /* the last answer's body (chunks joined), NUL-terminated */
	size_t body_len;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int fail(const char *what, const char *why)
{
	fprintf(stderr, "cycle: %s: %s\n", what, why);
	return -1;
}

/* Read more into c->in; -1 on a hang-up, an error or the timeout. */
static int fill(struct conn *c, const char *what)
{
	ssize_t n;

	if (c->have == HEAD_MAX)
		return fail(what, "answer too large for the buffer");
	n = recv(c->fd, c->in + c->have, HEAD_MAX - c->have, 0);
	if (n == 0)
		return fail(what, "the server hung up");
	if (n < 0)
		return fail(what, errno == EAGAIN ? "no answer in time" : strerror(errno));
	c->have += (size_t)n;
	c->in[c->have] = '\0';
	return 0;
}

/* Take n bytes of body (already in c->in or still to come) into c->body. */
static int take_body(struct conn *c, size_t n, const char *what)
{
	char *grown;

	if (c->body_len + n > BODY_MAX)
		return fail(what, "body over 1 MiB");
	grown = realloc(c->body, c->body_len + n + 1);
	if (!grown)
		return fail(what, "out of memory");
	c->body = grown;
	while (n) {
		size_t k;

		if (!c->have && fill(c, what) < 0)
			return -1;
		k = c->have < n ? c->have : n;
		memcpy(c->body + c->body_len, c->in, k);
		c->body_len += k;
		memmove(c->in, c->in + k, c->have - k);
		c->have -= k;
		c->in[c->have] = '\0';
		n -= k;
	}
	c->body[c->body_len] = '\0';
	return 0;
}

/* One line (up to CRLF) from the stream, CRLF removed, into line[cap]. */
static int take_line(struct conn *c, char *line, size_t cap, const char *what)
{
	char *eol;

	while (!(eol = memmem(c->in, c->have, "\r\n", 2)))
		if (fill(c, what) < 0)
			return -1;
	if ((size_t)(eol - c->in) >= cap)
		return fail(what, "chunk framing line too long");
	memcpy(line, c->in, (size_t)(eol - c->in));
	line[eol - c->in] = '\0';
	memmove(c->in, eol + 2, c->have - (size_t)(eol + 2 - c->in));
	c->have -= (size_t)(eol + 2 - c->in);
	c->in[c->have] = '\0';
	return 0;
}

static int take_chunks(struct conn *c, const char *what)
{
	char line[64];

	for (;;) {
		char *end;
		unsigned long n;

		if (take_line(c, line, sizeof(line), what) < 0)
			return -1;
		errno = 0;
		n = strtoul(line, &end, 16);
		if (end == line || (*end && *end != ';') || errno || n > BODY_MAX)
			return fail(what, "bad chunk size");
		if (n == 0)
			break;
		if (take_body(c, n, what) < 0 || take_line(c, line, sizeof(line), what) < 0)
			return -1;
		if (line[0])
			return fail(what, "chunk not followed by CRLF");
	}
	do { /* trailer fields, up to the empty line */
		if (take_line(c, line, sizeof(line), what) < 0)
			return -1;
	} while (line[0]);
	return 0;
}

/* Send one request and read its whole answer; 0 if its status was `want`. */
static int request(struct conn *c, const char *path, const char *body, int want, const char *what)
{
	char req[1024], *end, *cl, *te;
	size_t blen = body ? strlen(body) : 0, head;
	int len = snprintf(req, sizeof(req),
			   "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
			   "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
			   path, c->port, c->token, blen, body ? body : "");
	int status;
	long length = -1;

	if (len < 0 || (size_t)len >= sizeof(req))
		return fail(what, "request too long");
	if (send(c->fd, req, (size_t)len, MSG_NOSIGNAL) != len)
		return fail(what, strerror(errno));
	while (!(end = strstr(c->in, "\r\n\r\n")))
		if (fill(c, what) < 0)
			return -1;
	if (sscanf(c->in, "HTTP/1.1 %3d ", &status) != 1)
		return fail(what, "not an HTTP/1.1 status line");
	end[2] = '\0'; /* the header fields end at the first CRLF of CRLFCRLF */
	cl = strcasestr(c->in, "\r\ncontent-length:");
	te = strcasestr(c->in, "\r\ntransfer-encoding: chunked\r\n");
	if (cl) {
		char *e;

		length = strtol(cl + 17, &e, 10);
		if (length < 0 || e == cl + 17 || (*e != '\r' && *e != ' '))
			return fail(what, "bad Content-Length");
	}
	head = (size_t)(end + 4 - c->in);
	memmove(c->in, c->in + head, c->have - head);
	c->have -= head;
	c->in[c->have] = '\0';
	c->body_len = 0;
	if (cl && !te) {
		if (take_body(c, (size_t)length, what) < 0)
			return -1;
	} else if (te && !cl) {
		if (take_chunks(c, what) < 0)
			return -1;
	} else {
		return fail(what, "neither a Content-Length nor chunked (or both)");
	}
	if (c->have)
		return fail(what, "bytes after the answer");
	if (status != want) {
		fprintf(stderr, "cycle: %s: status %d, not %d: %.300s\n", what, status, want,
			c->body ? c->body : "");
		return -1;
	}
	return 0;
}

/* The new sandbox's id from a create's answer, and whether the pool served it. */
static int parse_create(const char *body, char *id, size_t cap, bool *warm)
{
	const char *p = strstr(body, "{\"sandbox\":{\"id\":\"");
	size_t n;

	if (!p)
		return fail("create", "no sandbox id in the answer");
	p += strlen("{\"sandbox\":{\"id\":\"");
	n = strcspn(p, "\"");
	if (!p[n] || n == 0 || n >= cap)
		return fail("create", "bad sandbox id");
	memcpy(id, p, n);
	id[n] = '\0';
	*warm = strstr(body, "\"warm\":true") != NULL;
	return 0;
}

/* The last non-empty NDJSON line is the exit event of a command that exited 0? */
static int check_exit(const char *body, size_t len)
{
	const char *line;

	while (len && body[len - 1] == '\n')
		len--;
	line = len ? memrchr(body, '\n', len) : NULL;
	line = line ? line + 1 : body;
	if (!len || !memmem(line, len - (size_t)(line - body), "\"type\":\"exit\"", 13) ||
	    !memmem(line, len - (size_t)(line - body), "\"exit_code\":0,", 14))
		return fail("command", "its last line is not an exit with code 0");
	return 0;
}

/* One cycle; t[0..2]: create, run, stop (ms). */
static int one_cycle(struct conn *c, double t[3], bool *warm)
{
	char id[128], path[256];
	double a = now_ms(), b, d;

	if (request(c, "/v1/sandboxes", "{}", 201, "create") < 0 ||
	    parse_create(c->body, id, sizeof(id), warm) < 0)
		return -1;
	b = now_ms();
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/commands", id);
	if (request(c, path, "{\"cmd\":\"true\",\"wait\":true}", 200, "command") < 0 ||
	    check_exit(c->body, c->body_len) < 0)
		return -1;
	d = now_ms();
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/stop", id);
	if (request(c, path, NULL, 200, "stop") < 0)
		return -1;
	t[0] = b - a;
	t[1] = d - b;
	t[2] = now_ms() - d;
	return 0;
}

/* `airlock run -- /bin/true`: its time in ms, or -1. */
static double one_shot(const char *airlock, int devnull)
{
	char *argv[] = {(char *)airlock, "run", "--", "/bin/true", NULL};
	posix_spawn_file_actions_t fa;
	double a = now_ms();
	pid_t pid;
	int st, e;

	posix_spawn_file_actions_init(&fa);
	for (int i = 0; i < 3; i++)
		posix_spawn_file_actions_adddup2(&fa, devnull, i);
	e = posix_spawn(&pid, airlock, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e) {
		fail(airlock, strerror(e));
		return -1;
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fail(airlock, "`run -- /bin/true` did not exit 0");
		return -1;
	}
	return now_ms() - a;
}

/* Sleep ms milliseconds (0: not at all); always 0, for use in a condition. */
static int rest(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (ms && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return 0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n) (sorted in place), or -1 for none. */
static double median(double *v, long n)
{
	if (n <= 0)
		return -1;
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void json_ms(const char *key, double v, bool last)
{
	if (v < 0)
		printf("\"%s\":null%s", key, last ? "" : ",");
	else
		printf("\"%s\":%.4f%s", key, v, last ? "" : ",");
}

static long arg_long(const char *s, const char *name, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > max) {
		fprintf(stderr, "cycle: %s: not a number from 0 to %ld: %s\n", name, max, s);
		exit(2);
	}
	return v;
}

static int usage(void)
{
	fprintf(stderr, "usage: cycle --port P --token T --count N [--warmup N] [--airlock PATH] "
			"[--pause-ms P] [--timeout SEC] [--raw FILE]\n");
	return 2;
}

int main(int argc, char **argv)
{
	static struct conn c = {.fd = -1};
	const char *airlock = NULL, *raw = NULL;
	long count = -1, warmup = 3, port = -1, timeout = 30, pause_ms = 0;
	/* cycle, create, run, stop, one-shot; then the cycles apart: warm ones from the front,
	 * cold ones from the back */
	double *t[6];
	char *warm_flag;
	long n_warm = 0, n_cold = 0;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct timeval tv;
	int one = 1, devnull;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			return usage();
		if (strcmp(argv[i], "--port") == 0)
			port = arg_long(argv[++i], "--port", 65535);
		else if (strcmp(argv[i], "--token") == 0)
			c.token = argv[++i];
		else if (strcmp(argv[i], "--count") == 0)
			count = arg_long(argv[++i], "--count", 10000000);
		else if (strcmp(argv[i], "--warmup") == 0)
			warmup = arg_long(argv[++i], "--warmup", 10000000);
		else if (strcmp(argv[i], "--airlock") == 0)
			airlock = argv[++i];
		else if (strcmp(argv[i], "--pause-ms") == 0)
			pause_ms = arg_long(argv[++i], "--pause-ms", 10000);
		else if (strcmp(argv[i], "--timeout") == 0)
			timeout = arg_long(argv[++i], "--timeout", 3600);
		else if (strcmp(argv[i], "--raw") == 0)
			raw = argv[++i];
		else
			return usage();
	}
	if (port <= 0 || count <= 0 || !c.token || timeout <= 0 || strpbrk(c.token, "\r\n") ||
	    strlen(c.token) > 256) {
		fprintf(stderr, "cycle: --port (1-65535), --token (one line) and --count (> 0) "
				"are required\n");
		return 2;
	}
	c.port = (int)port;
	tv.tv_sec = timeout;
	tv.tv_usec = 0;
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (devnull < 0 || c.fd < 0 ||
	    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(c.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fail("set-up", strerror(errno));
		return 1;
	}
	for (int k = 0; k < 6; k++)
		if (!(t[k] = calloc((size_t)count, sizeof(double))))
			return fail("set-up", "out of memory"), 1;
	warm_flag = calloc((size_t)count, 1);
	if (!warm_flag)
		return fail("set-up", "out of memory"), 1;
	for (long i = 0; i < warmup + count; i++) {
		double parts[3], shot = -1;
		bool warm = false, shot_first = i % 2;
		long k = i - warmup;

		if (airlock && shot_first &&
		    ((shot = one_shot(airlock, devnull)) < 0 || rest(pause_ms)))
			return 1;
		if (one_cycle(&c, parts, &warm) < 0 || rest(pause_ms))
			return 1;
		if (airlock && !shot_first &&
		    ((shot = one_shot(airlock, devnull)) < 0 || rest(pause_ms)))
			return 1;
		if (k < 0)
			continue;
		t[0][k] = parts[0] + parts[1] + parts[2];
		for (int j = 0; j < 3; j++)
			t[j + 1][k] = parts[j];
		t[4][k] = shot;
		warm_flag[k] = warm;
		if (warm)
			t[5][n_warm++] = t[0][k];
		else
			t[5][count - ++n_cold] = t[0][k];
	}
	if (raw) {
		FILE *rf = fopen(raw, "w");

		if (!rf)
			return fail(raw, strerror(errno)), 1;
		for (long k = 0; k < count; k++) {
			fprintf(rf, "%.4f %.4f %.4f %.4f %d ", t[0][k], t[1][k], t[2][k], t[3][k],
				warm_flag[k]);
			if (airlock)
				fprintf(rf, "%.4f\n", t[4][k]);
			else
				fprintf(rf, "-\n");
		}
		if (fclose(rf) != 0)
			return fail(raw, strerror(errno)), 1;
	}
	{
		double cyc = median(t[0], count), shot = airlock ? median(t[4], count) : -1;

		printf("{\"n\":%ld,", count);
		json_ms("cycle_median_ms", cyc, false);
		json_ms("create_median_ms", median(t[1], count), false);
		json_ms("run_median_ms", median(t[2], count), false);
		json_ms("stop_median_ms", median(t[3], count), false);
		printf("\"warm_n\":%ld,", n_warm);
		json_ms("warm_median_ms", median(t[5], n_warm), false);
		printf("\"cold_n\":%ld,", n_cold);
		json_ms("cold_median_ms", median(t[5] + count - n_cold, n_cold), false);
		json_ms("oneshot_median_ms", shot, false);
		if (shot > 0)
			printf("\"ratio\":%.4f}\n", cyc / shot);
		else
			printf("\"ratio\":null}\n");
	}
	return 0;
}
