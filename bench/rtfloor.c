/*
 * rtfloor: the floor of a daemon command's round trip on this machine, in the same run.
 *
 *   rtfloor --port P --count N [--warmup N] [--raw FILE] [-- CMD [ARG]...]
 *
 * A command's round trip (POST .../commands {"cmd":"true","wait":true}) cannot cost less
 * than the two things it must do: one HTTP request and answer on a kept-alive loopback
 * connection, and one fork, exec and wait of the command. This client does exactly those,
 * back to back, on the host and with no sandbox: N times,
 *   - GET /v1/health on one kept-alive TCP connection to 127.0.0.1:P (TCP_NODELAY, the
 *     request in one send(), the answer read until its Content-Length is complete: the
 *     daemon's cheapest route, so HTTP's own cost and airlockd's parsing are in it);
 *   - vfork + execve CMD (default /bin/true) + waitpid, as a sandbox's shim starts a
 *     command (CLONE_VM|CLONE_VFORK), with stdio on /dev/null.
 * Each iteration's three times (ms: http, exec, and both from the first byte sent to the
 * reaped child) go to --raw FILE, one line each; stdout gets one JSON object with their
 * medians. bench/daemon runs it between its round-trip blocks so drift hits both alike.
 *
 * Exit status: 0 when every iteration was OK; 1 when one failed (a non-200 answer, a
 * framing error, a command that did not exit 0), with a message; 2 on usage errors.
 *
 * Build: cc -O2 -Wall -Wextra -Werror -o rtfloor bench/rtfloor.c (C17, glibc only)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RESP_MAX 65536

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int fail(const char *what)
{
	fprintf(stderr, "rtfloor: %s: %s\n", what, errno ? strerror(errno) : "failed");
	return -1;
}

/* One GET /v1/health and its whole answer; 0 if it was a 200 with a complete body. */
static int http_once(int fd, int port)
{
	char req[128], buf[RESP_MAX + 1];
	size_t have = 0;
	int len = snprintf(req, sizeof(req),
			   "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port);

	if (send(fd, req, (size_t)len, MSG_NOSIGNAL) != len)
		return fail("send");
	for (;;) {
		ssize_t n = recv(fd, buf + have, RESP_MAX - have, 0);
		char *end, *cl;
		long body;

		if (n <= 0) {
			errno = n == 0 ? ECONNRESET : errno;
			return fail("recv");
		}
		have += (size_t)n;
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (!end) {
			if (have == RESP_MAX) {
				errno = EMSGSIZE;
				return fail("header");
			}
			continue;
		}
		if (strncmp(buf, "HTTP/1.1 200 ", 13) != 0) {
			errno = 0;
			return fail("not a 200 answer");
		}
		cl = strcasestr(buf, "\r\ncontent-length:");
		if (!cl || cl > end) {
			errno = 0;
			return fail("no Content-Length");
		}
		body = strtol(cl + 17, NULL, 10);
		if (body < 0 || (size_t)body > RESP_MAX - (size_t)(end + 4 - buf)) {
			errno = EMSGSIZE;
			return fail("body");
		}
		if (have == (size_t)(end + 4 - buf) + (size_t)body)
			return 0;
		if (have > (size_t)(end + 4 - buf) + (size_t)body) {
			errno = 0;
			return fail("more bytes than the answer (pipelined?)");
		}
	}
}

static int exec_once(char **argv, int devnull)
{
	int st;
	pid_t pid = vfork();

	if (pid < 0)
		return fail("vfork");
	if (pid == 0) {
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		return fail("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		errno = 0;
		return fail("the command did not exit 0");
	}
	return 0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, long n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static long arg_long(const char *s, const char *name)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > 10000000) {
		fprintf(stderr, "rtfloor: %s: not a count: %s\n", name, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static char *def_cmd[] = {"/bin/true", NULL};
	char **cmd = def_cmd;
	const char *raw = NULL;
	long port = -1, count = -1, warmup = 5;
	double *t[3];
	FILE *rf = NULL;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int fd, one = 1, devnull;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0 && i + 1 < argc) {
			cmd = argv + i + 1;
			break;
		}
		if (i + 1 >= argc) {
			fprintf(stderr,
				"usage: rtfloor --port P --count N [--warmup N] [--raw FILE] "
				"[-- CMD [ARG]...]\n");
			return 2;
		}
		if (strcmp(argv[i], "--port") == 0)
			port = arg_long(argv[++i], "--port");
		else if (strcmp(argv[i], "--count") == 0)
			count = arg_long(argv[++i], "--count");
		else if (strcmp(argv[i], "--warmup") == 0)
			warmup = arg_long(argv[++i], "--warmup");
		else if (strcmp(argv[i], "--raw") == 0)
			raw = argv[++i];
		else {
			fprintf(stderr, "rtfloor: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (port <= 0 || port > 65535 || count <= 0) {
		fprintf(stderr, "rtfloor: --port (1-65535) and --count (> 0) are required\n");
		return 2;
	}
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (devnull < 0 || fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fail("set-up");
		return 1;
	}
	for (long i = 0; i < warmup; i++)
		if (http_once(fd, (int)port) < 0 || exec_once(cmd, devnull) < 0)
			return 1;
	for (int k = 0; k < 3; k++) {
		if (!(t[k] = calloc((size_t)count, sizeof(double)))) {
			fail("calloc");
			return 1;
		}
	}
	for (long i = 0; i < count; i++) {
		double a = now_ms(), b, c;

		if (http_once(fd, (int)port) < 0)
			return 1;
		b = now_ms();
		if (exec_once(cmd, devnull) < 0)
			return 1;
		c = now_ms();
		t[0][i] = b - a;
		t[1][i] = c - b;
		t[2][i] = c - a;
	}
	if (raw) {
		if (!(rf = fopen(raw, "w"))) {
			fail(raw);
			return 1;
		}
		for (long i = 0; i < count; i++)
			fprintf(rf, "%.4f %.4f %.4f\n", t[0][i], t[1][i], t[2][i]);
		if (fclose(rf) != 0) {
			fail(raw);
			return 1;
		}
	}
	printf("{\"n\":%ld,\"http_median_ms\":%.4f,\"exec_median_ms\":%.4f,"
	       "\"both_median_ms\":%.4f}\n",
	       count, median(t[0], count), median(t[1], count), median(t[2], count));
	return 0;
}
