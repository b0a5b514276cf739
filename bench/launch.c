/*
 * launch: start-up latency driver for comparing process launchers.
 *
 *   launch [--runs N] [--warmup N] [--timeout SEC] [--json FILE] [--no-rotate] [--pause-ms P]
 *          [--throughput SEC --workers W [--rounds R]]
 *          --name NAME [--max-runs M] [--] ARGV... [--name NAME ...]...
 *
 * Each contender's ARGV runs from the token after `--name NAME [--]` up to
 * the next token that is exactly `--name` (or the end of the command line),
 * so a contender's own argv cannot contain a bare `--name` token.
 *
 * Method
 *  - Contenders are alternated round-robin: every iteration launches each
 *    contender once, so slow drift of the machine (load, thermal, page cache)
 *    hits all of them alike.  By default the starting contender rotates each
 *    iteration (iteration i starts at contender i mod K) so that no contender
 *    is always the one that runs straight after another; --no-rotate keeps
 *    the fixed order 1..K.
 *  - One launch is timed with CLOCK_MONOTONIC from just before posix_spawn()
 *    to just after wait4() has reaped the child.  The child gets stdin, stdout
 *    and stderr on /dev/null (descriptors opened once, up front) and its own
 *    process group (so a hung run can be killed as a whole).
 *  - Every run, warm-up included, must exit with status 0.  A run that exits
 *    non-zero, dies from a signal, times out or cannot be spawned is counted
 *    as an error and left out of the statistics, never timed silently.  After
 *    the runs, one untimed diagnostic run per failing contender is made with
 *    stderr captured, and its first lines are printed.
 *  - A contender given --max-runs M (M < N) is timed in only M of the N
 *    iterations, spread evenly over the whole run (iteration t runs it when
 *    floor((t+1)M/N) > floor(tM/N)), so a slow peer still sees the same
 *    drift as the others without costing N runs.
 *  - Statistics per contender over successful timed runs: median, min, max,
 *    p90 (both quantiles by linear interpolation between order statistics,
 *    as numpy's default), mean, and the ratio of the median to the first
 *    contender's median.  CPU time (user+sys of the reaped child and of the
 *    descendants it waited for, from wait4's rusage) is reported in JSON.
 *
 * Throughput mode (--throughput SEC): instead of timing single launches,
 * each contender is run by W concurrent workers (forked processes, each a
 * spawn-wait loop, default 2) for SEC seconds in total, split into R rounds
 * (default 5) of SEC/R seconds; rounds alternate between the contenders
 * (rotating start) for the same drift reason.  A launch counts when it
 * exited 0; the rate of a round is successful launches / (time from the
 * round's start to its last worker's end), launches started before the
 * deadline being allowed to finish.  Reported: the overall rate (all
 * successes / all round time), and the median, min and max of the rounds;
 * and the host's busy CPU time per successful launch (user, nice, system,
 * irq and softirq of every CPU in /proc/stat over the contender's rounds,
 * so the kernel threads that clean up after a launch count, and the
 * hypervisor's steal does not).  With one worker that shows how much of a
 * launch's cost runs beside it (CPU per launch above wall time per launch).
 *
 * Exit status: 0 if every run succeeded, 1 if any run failed, 2 on usage or
 * set-up errors.
 *
 * Build: cc -O2 -Wall -Werror -o bench/launch bench/launch.c   (C11, no deps)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h> /* NAN, isnan, isinf: macros only, no -lm needed */
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct contender {
	const char *name;
	char **argv; /* NULL-terminated, points into a private copy */
	char *path;  /* argv[0] resolved against PATH */
	int argc;
	double *ms;  /* successful timed runs, wall ms */
	double *cpu; /* user+sys ms for the same runs */
	int n_ok;
	int n_err;	/* failed timed runs */
	int n_warm_err; /* failed warm-up runs */
	long max_runs;	/* 0: every iteration; else timed in only this many */
	char first_err[160];
	double median, min, max, p90, mean;
};

enum run_status { RUN_OK, RUN_FAIL };

static volatile sig_atomic_t alarm_fired;
static int devnull_r = -1, devnull_w = -1;
static double timeout_s = 60.0;

static volatile pid_t current_pid; /* child being timed, for SIGINT/SIGTERM */

static void on_alarm(int sig)
{
	(void)sig;
	alarm_fired = 1;
}

static void on_term(int sig)
{
	pid_t p = current_pid;
	if (p > 0) {
		kill(-p, SIGKILL);
		kill(p, SIGKILL);
	}
	_exit(128 + sig);
}

/*
 * Resolve argv[0] against PATH once, up front, so that timed runs exec the
 * binary directly (posix_spawnp would try each PATH entry on every launch).
 */
static char *resolve(const char *cmd)
{
	if (strchr(cmd, '/'))
		return access(cmd, X_OK) == 0 ? strdup(cmd) : NULL;
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/bin:/bin";
	char buf[PATH_MAX];
	while (*path) {
		size_t n = strcspn(path, ":");
		int m = snprintf(buf, sizeof buf, "%.*s%s%s", (int)n, path, n ? "/" : "./", cmd);
		if (m > 0 && (size_t)m < sizeof buf && access(buf, X_OK) == 0)
			return strdup(buf);
		path += n;
		if (*path == ':')
			path++;
	}
	return NULL;
}

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "launch: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(2);
}

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: launch [--runs N] [--warmup N] [--timeout SEC] [--json FILE] [--no-rotate]\n"
	       "              [--pause-ms P]\n"
	       "              [--throughput SEC [--workers W] [--rounds R]]\n"
	       "              --name NAME [--max-runs M] [--] ARGV... [--name NAME ...]...\n"
	       "\n"
	       "Alternates the contenders round-robin for N timed runs each (default 50,\n"
	       "after 3 warm-up runs each), timing posix_spawn..wait4 with CLOCK_MONOTONIC,\n"
	       "and prints median/min/max/p90 in ms plus each median's ratio to the first\n"
	       "contender's median.  Every run must exit 0; failures are counted as errors.\n"
	       "--max-runs M times that contender in only M of the N iterations, spread evenly.\n"
	       "--pause-ms P sleeps P ms (untimed) after every run of every contender, so that\n"
	       "work a run leaves behind (e.g. a pool's refill) never overlaps a timed run.\n"
	       "--throughput SEC instead counts successful launches per second with W\n"
	       "concurrent workers (default 2) over SEC seconds per contender, in R\n"
	       "alternated rounds (default 5), and the host's busy CPU time (all CPUs, from\n"
	       "/proc/stat) over a contender's rounds per successful launch.\n");
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long parse_long(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "launch: bad value for %s: '%s' (want %ld..%ld)\n", opt, s, lo, hi);
		exit(2);
	}
	return v;
}

/*
 * Run one launch.  Returns RUN_OK and sets *wall and *cpu on success; otherwise
 * RUN_FAIL with a description in err.  If errfd >= 0 the child's stderr goes
 * there instead of /dev/null (diagnostic runs only).
 */
static enum run_status run_once(struct contender *c, double *wall, double *cpu, char *err,
				size_t errlen, int errfd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	int rc;

	if ((rc = posix_spawn_file_actions_init(&fa)) ||
	    (rc = posix_spawn_file_actions_adddup2(&fa, devnull_r, 0)) ||
	    (rc = posix_spawn_file_actions_adddup2(&fa, devnull_w, 1)) ||
	    (rc = posix_spawn_file_actions_adddup2(&fa, errfd >= 0 ? errfd : devnull_w, 2))) {
		snprintf(err, errlen, "posix_spawn_file_actions: %s", strerror(rc));
		return RUN_FAIL;
	}
	posix_spawnattr_init(&at);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);

	/* Arm the timeout before the clock starts so it costs nothing inside. */
	struct itimerval it = {
	    {0, 0},
	    {(time_t)timeout_s, (suseconds_t)((timeout_s - (double)(time_t)timeout_s) * 1e6)}};
	alarm_fired = 0;
	setitimer(ITIMER_REAL, &it, NULL);

	pid_t pid;
	int status = 0;
	struct rusage ru;
	double t0 = now_ms();
	rc = posix_spawn(&pid, c->path, &fa, &at, c->argv, environ);
	pid_t w = -1;
	if (rc == 0) {
		current_pid = pid;
		while ((w = wait4(pid, &status, 0, &ru)) < 0 && errno == EINTR && !alarm_fired)
			;
	}
	double t1 = now_ms();
	if (w == pid)
		current_pid = 0;

	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);

	if (rc != 0) {
		snprintf(err, errlen, "posix_spawn %s: %s", c->argv[0], strerror(rc));
		return RUN_FAIL;
	}
	if (w < 0) {
		/* Timed out (or wait failed): kill the whole process group, reap. */
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		current_pid = 0;
		if (alarm_fired)
			snprintf(err, errlen, "timed out after %.1f s (killed)", timeout_s);
		else
			snprintf(err, errlen, "wait4: %s", strerror(errno));
		return RUN_FAIL;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		*wall = t1 - t0;
		*cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
		return RUN_OK;
	}
	if (WIFEXITED(status))
		snprintf(err, errlen, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(err, errlen, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(err, errlen, "unexpected wait status 0x%x", status);
	return RUN_FAIL;
}

/*
 * Whether contender c is timed in iteration t of n: always without
 * --max-runs, else in exactly max_runs iterations spread evenly over n.
 */
static int due(const struct contender *c, long t, long n)
{
	if (c->max_runs <= 0 || c->max_runs >= n)
		return 1;
	return ((t + 1) * c->max_runs) / n > (t * c->max_runs) / n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Quantile q in [0,1] of sorted v[0..n-1], linear interpolation (numpy default). */
static double quantile(const double *v, int n, double q)
{
	if (n <= 0)
		return NAN;
	double pos = q * (n - 1);
	int lo = (int)pos; /* pos >= 0: truncation == floor */
	int hi = lo + 1 < n ? lo + 1 : lo;
	return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

/* Print an argv so it can be pasted into a POSIX shell. */
static void fprint_quoted(FILE *f, char **argv)
{
	for (int i = 0; argv[i]; i++) {
		const char *a = argv[i];
		int plain = *a != '\0';
		for (const char *p = a; *p; p++)
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789-_./=:,+@%",
				    *p))
				plain = 0;
		if (i)
			fputc(' ', f);
		if (plain) {
			fputs(a, f);
			continue;
		}
		fputc('\'', f);
		for (const char *p = a; *p; p++) {
			if (*p == '\'')
				fputs("'\\''", f);
			else
				fputc(*p, f);
		}
		fputc('\'', f);
	}
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.4f", v);
}

static void read_loadavg(char *buf, size_t len)
{
	buf[0] = '\0';
	FILE *f = fopen("/proc/loadavg", "re");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/* One untimed run with stderr captured; prints the first lines. */
static void diagnose(struct contender *c)
{
	char path[] = "/tmp/launch-diag-XXXXXX";
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return;
	unlink(path);
	double w, cpu;
	char err[160] = "";
	enum run_status st = run_once(c, &w, &cpu, err, sizeof err, fd);
	fprintf(stderr, "launch: diagnostic run of '%s': %s\n", c->name,
		st == RUN_OK ? "succeeded this time" : err);
	lseek(fd, 0, SEEK_SET);
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return;
	}
	char line[512];
	int n = 0;
	while (fgets(line, sizeof line, f) && n < 20) {
		fprintf(stderr, "  stderr| %s", line);
		if (!strchr(line, '\n'))
			fputc('\n', stderr);
		n++;
	}
	if (n == 0)
		fprintf(stderr, "  (no stderr output)\n");
	fclose(f);
}

/* ---- throughput mode ---------------------------------------------------- */

struct tp_report {
	long ok, err;
	double end_ms;
	char first_err[160];
};

/* The host's busy CPU time so far, in ms (-1 if /proc/stat cannot be read). */
static double host_busy_ms(void)
{
	unsigned long long v[7] = {0};
	FILE *f = fopen("/proc/stat", "re");
	long hz = sysconf(_SC_CLK_TCK);
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
		   &v[5], &v[6]);
	fclose(f);
	if (n != 7 || hz <= 0)
		return -1;
	/* user nice system [idle iowait] irq softirq */
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6]) * 1e3 / (double)hz;
}

/* One worker process: spawn-wait loop until the deadline, then report. */
static void tp_worker(struct contender *c, double deadline, int fd)
{
	struct tp_report r;
	memset(&r, 0, sizeof r);
	while (now_ms() < deadline) {
		double w, cpu;
		char err[160];
		if (run_once(c, &w, &cpu, err, sizeof err, -1) == RUN_OK) {
			r.ok++;
		} else {
			if (!r.err)
				snprintf(r.first_err, sizeof r.first_err, "%s", err);
			r.err++;
		}
	}
	r.end_ms = now_ms();
	/* Smaller than PIPE_BUF: one atomic write. */
	if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
		_exit(1);
	_exit(0);
}

/* One round of W workers on contender c; sums into *tot, returns elapsed ms. */
static double tp_round(struct contender *c, long workers, double secs, struct tp_report *tot)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe: %s", strerror(errno));
	pid_t *pids = calloc((size_t)workers, sizeof *pids);
	if (!pids)
		die("out of memory%s", "");
	fflush(stdout);
	fflush(stderr);
	double t0 = now_ms(), deadline = t0 + secs * 1e3, end = t0;
	for (long w = 0; w < workers; w++) {
		pids[w] = fork();
		if (pids[w] < 0)
			die("fork: %s", strerror(errno));
		if (pids[w] == 0) {
			close(p[0]);
			tp_worker(c, deadline, p[1]);
		}
	}
	close(p[1]);
	memset(tot, 0, sizeof *tot);
	struct tp_report r;
	long got = 0;
	for (;;) {
		ssize_t n = read(p[0], &r, sizeof r);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof r)
			break;
		got++;
		tot->ok += r.ok;
		if (r.err && !tot->err)
			memcpy(tot->first_err, r.first_err, sizeof r.first_err);
		tot->err += r.err;
		if (r.end_ms > end)
			end = r.end_ms;
	}
	close(p[0]);
	for (long w = 0; w < workers; w++)
		while (waitpid(pids[w], NULL, 0) < 0 && errno == EINTR)
			;
	free(pids);
	if (got != workers) {
		tot->err++;
		snprintf(tot->first_err, sizeof tot->first_err, "%ld of %ld workers did not report",
			 workers - got, workers);
	}
	return end - t0;
}

static int throughput(struct contender *cs, int k, long seconds, long workers, long rounds,
		      int rotate, const char *json_path)
{
	double secs = (double)seconds / (double)rounds;
	double *rate = calloc((size_t)(k * rounds), sizeof *rate);
	double *el = calloc((size_t)k, sizeof *el), *busy = calloc((size_t)k, sizeof *busy);
	long *ok = calloc((size_t)k, sizeof *ok), *errs = calloc((size_t)k, sizeof *errs);
	char(*first)[160] = calloc((size_t)k, sizeof *first);
	if (!rate || !el || !busy || !ok || !errs || !first)
		die("out of memory%s", "");

	printf("launch: throughput, %d contender(s), %ld worker(s), %ld s each in %ld "
	       "alternated round(s) of %.2f s\n",
	       k, workers, seconds, rounds, secs);
	for (int c = 0; c < k; c++) {
		printf("  %-12s ", cs[c].name);
		fprint_quoted(stdout, cs[c].argv);
		putchar('\n');
	}
	fflush(stdout);
	char load_before[128], load_after[128];
	read_loadavg(load_before, sizeof load_before);
	struct timespec wall0;
	clock_gettime(CLOCK_REALTIME, &wall0);

	for (long r = 0; r < rounds; r++) {
		for (int j = 0; j < k; j++) {
			int c = rotate ? (int)((r + j) % k) : j;
			struct tp_report tot;
			double b0 = host_busy_ms(), e = tp_round(&cs[c], workers, secs, &tot), b1;

			b1 = host_busy_ms();
			busy[c] = busy[c] < 0 || b0 < 0 || b1 < 0 ? -1 : busy[c] + (b1 - b0);
			rate[c * rounds + r] = e > 0 ? (double)tot.ok * 1e3 / e : 0;
			el[c] += e;
			ok[c] += tot.ok;
			if (tot.err && !errs[c]) {
				memcpy(first[c], tot.first_err, sizeof first[c]);
				fprintf(stderr,
					"launch: %s: round %ld: %ld failed launch(es): %s\n",
					cs[c].name, r + 1, tot.err, tot.first_err);
			}
			errs[c] += tot.err;
		}
	}
	read_loadavg(load_after, sizeof load_after);

	double *med = calloc((size_t)k, sizeof *med), *mn = calloc((size_t)k, sizeof *mn),
	       *mx = calloc((size_t)k, sizeof *mx), *all = calloc((size_t)k, sizeof *all);
	double *tmp = calloc((size_t)rounds, sizeof *tmp);
	if (!med || !mn || !mx || !all || !tmp)
		die("out of memory%s", "");
	printf("\n%-12s %8s %6s %10s %10s %10s %10s %8s %11s\n", "contender", "ok", "err",
	       "overall/s", "median/s", "min/s", "max/s", "ratio", "cpu/launch");
	for (int c = 0; c < k; c++) {
		memcpy(tmp, &rate[c * rounds], (size_t)rounds * sizeof *tmp);
		qsort(tmp, (size_t)rounds, sizeof *tmp, cmp_double);
		med[c] = quantile(tmp, (int)rounds, 0.5);
		mn[c] = tmp[0];
		mx[c] = tmp[rounds - 1];
		all[c] = el[c] > 0 ? (double)ok[c] * 1e3 / el[c] : 0;
		printf("%-12s %8ld %6ld %10.1f %10.1f %10.1f %10.1f %7.2fx %8.3f ms\n", cs[c].name,
		       ok[c], errs[c], all[c], med[c], mn[c], mx[c],
		       all[0] > 0 ? all[c] / all[0] : NAN,
		       busy[c] >= 0 && ok[c] ? busy[c] / (double)ok[c] : NAN);
	}
	printf("(successful launches per second; ratio = overall rate / overall rate of '%s'; "
	       "cpu/launch = the host's busy CPU time over its rounds / its launches; "
	       "load avg before: %s, after: %s)\n",
	       cs[0].name, load_before, load_after);
	fflush(stdout);
	int any_err = 0;
	for (int c = 0; c < k; c++) {
		if (errs[c]) {
			any_err = 1;
			fprintf(stderr, "launch: ERROR: %s: %ld failed launch(es) (first: %s)\n",
				cs[c].name, errs[c], first[c]);
			diagnose(&cs[c]);
		}
	}
	if (json_path) {
		FILE *f = fopen(json_path, "we");
		if (!f) {
			fprintf(stderr, "launch: cannot write %s: %s\n", json_path,
				strerror(errno));
			return 2;
		}
		char tbuf[64];
		struct tm tm;
		gmtime_r(&wall0.tv_sec, &tm);
		strftime(tbuf, sizeof tbuf, "%Y-%m-%dT%H:%M:%SZ", &tm);
		fprintf(f, "{\n  \"tool\": \"launch\",\n  \"mode\": \"throughput\",\n"
			   "  \"started_utc\": ");
		json_str(f, tbuf);
		fprintf(f, ",\n  \"seconds\": %ld,\n  \"workers\": %ld,\n  \"rounds\": %ld,\n",
			seconds, workers, rounds);
		fprintf(f, "  \"host\": {\"online_cpus\": %ld, \"loadavg_before\": ",
			sysconf(_SC_NPROCESSORS_ONLN));
		json_str(f, load_before);
		fprintf(f, ", \"loadavg_after\": ");
		json_str(f, load_after);
		fprintf(f, "},\n  \"reference\": ");
		json_str(f, cs[0].name);
		fprintf(f, ",\n  \"contenders\": [\n");
		for (int c = 0; c < k; c++) {
			fprintf(f, "    {\"name\": ");
			json_str(f, cs[c].name);
			fprintf(f, ", \"argv\": [");
			for (int a = 0; a < cs[c].argc; a++) {
				if (a)
					fputs(", ", f);
				json_str(f, cs[c].argv[a]);
			}
			fprintf(f,
				"],\n     \"ok\": %ld, \"errors\": %ld, \"first_error\": ", ok[c],
				errs[c]);
			if (first[c][0])
				json_str(f, first[c]);
			else
				fputs("null", f);
			fprintf(f, ", \"seconds\": ");
			json_num(f, el[c] / 1e3);
			fprintf(f, ",\n     \"rate_per_s\": ");
			json_num(f, all[c]);
			fprintf(f, ", \"round_median_per_s\": ");
			json_num(f, med[c]);
			fprintf(f, ", \"round_min_per_s\": ");
			json_num(f, mn[c]);
			fprintf(f, ", \"round_max_per_s\": ");
			json_num(f, mx[c]);
			fprintf(f, ",\n     \"host_cpu_ms_per_launch\": ");
			json_num(f, busy[c] >= 0 && ok[c] ? busy[c] / (double)ok[c] : NAN);
			fprintf(f, ",\n     \"round_rates_per_s\": [");
			for (long r = 0; r < rounds; r++) {
				if (r)
					fputs(", ", f);
				json_num(f, rate[c * rounds + r]);
			}
			fprintf(f, "]}%s\n", c + 1 < k ? "," : "");
		}
		fprintf(f, "  ]\n}\n");
		if (fclose(f) != 0) {
			fprintf(stderr, "launch: error writing %s\n", json_path);
			return 2;
		}
	}
	return any_err ? 1 : 0;
}

int main(int argc, char **argv)
{
	long runs = 50, warmup = 3;
	long tp_seconds = 0, tp_workers = 2, tp_rounds = 5;
	const char *json_path = NULL;
	int rotate = 1;
	long pause_ms = 0;
	struct contender *cs = calloc((size_t)argc, sizeof *cs);
	int k = 0;
	if (!cs)
		die("out of memory%s", "");

	int i = 1;
	while (i < argc) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--runs") && i + 1 < argc) {
			runs = parse_long(a, argv[i + 1], 1, 10000000);
			i += 2;
		} else if (!strcmp(a, "--warmup") && i + 1 < argc) {
			warmup = parse_long(a, argv[i + 1], 0, 10000000);
			i += 2;
		} else if (!strcmp(a, "--timeout") && i + 1 < argc) {
			timeout_s = (double)parse_long(a, argv[i + 1], 1, 86400);
			i += 2;
		} else if (!strcmp(a, "--json") && i + 1 < argc) {
			json_path = argv[i + 1];
			i += 2;
		} else if (!strcmp(a, "--throughput") && i + 1 < argc) {
			tp_seconds = parse_long(a, argv[i + 1], 1, 86400);
			i += 2;
		} else if (!strcmp(a, "--workers") && i + 1 < argc) {
			tp_workers = parse_long(a, argv[i + 1], 1, 1024);
			i += 2;
		} else if (!strcmp(a, "--rounds") && i + 1 < argc) {
			tp_rounds = parse_long(a, argv[i + 1], 1, 10000);
			i += 2;
		} else if (!strcmp(a, "--pause-ms") && i + 1 < argc) {
			pause_ms = parse_long(a, argv[i + 1], 0, 60000);
			i += 2;
		} else if (!strcmp(a, "--no-rotate")) {
			rotate = 0;
			i++;
		} else if (!strcmp(a, "--name") && i + 1 < argc) {
			struct contender *c = &cs[k++];
			c->name = argv[i + 1];
			i += 2;
			if (i + 1 < argc && !strcmp(argv[i], "--max-runs")) {
				c->max_runs = parse_long("--max-runs", argv[i + 1], 1, 10000000);
				i += 2;
			}
			if (i < argc && !strcmp(argv[i], "--"))
				i++;
			int start = i;
			while (i < argc && strcmp(argv[i], "--name"))
				i++;
			c->argc = i - start;
			if (c->argc == 0)
				die("contender '%s' has an empty command", c->name);
			c->argv = calloc((size_t)c->argc + 1, sizeof *c->argv);
			if (!c->argv)
				die("out of memory%s", "");
			memcpy(c->argv, &argv[start], (size_t)c->argc * sizeof *c->argv);
			c->path = resolve(c->argv[0]);
			if (!c->path)
				die("command not found or not executable: %s", c->argv[0]);
		} else {
			usage(stderr);
			die("unexpected argument '%s' (options go before the first --name)", a);
		}
	}
	if (k == 0) {
		usage(stderr);
		return 2;
	}
	for (int a = 0; a < k; a++)
		for (int b = 0; b < a; b++)
			if (!strcmp(cs[a].name, cs[b].name))
				die("duplicate contender name '%s'", cs[a].name);

	devnull_r = open("/dev/null", O_RDONLY | O_CLOEXEC);
	devnull_w = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (devnull_r < 0 || devnull_w < 0)
		die("cannot open /dev/null: %s", strerror(errno));

	/* SIGALRM interrupts wait4 (no SA_RESTART) to implement --timeout. */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	if (tp_seconds)
		return throughput(cs, k, tp_seconds, tp_workers, tp_rounds, rotate, json_path);

	for (int c = 0; c < k; c++) {
		cs[c].ms = calloc((size_t)runs, sizeof(double));
		cs[c].cpu = calloc((size_t)runs, sizeof(double));
		if (!cs[c].ms || !cs[c].cpu)
			die("out of memory%s", "");
	}

	printf("launch: %d contender(s), %ld warm-up + %ld timed run(s) each, "
	       "alternated round-robin%s\n",
	       k, warmup, runs, rotate ? " (rotating start)" : "");
	for (int c = 0; c < k; c++) {
		if (cs[c].max_runs > 0 && cs[c].max_runs < runs)
			printf("  %-12s [%ld runs] ", cs[c].name, cs[c].max_runs);
		else
			printf("  %-12s ", cs[c].name);
		fprint_quoted(stdout, cs[c].argv);
		putchar('\n');
	}
	fflush(stdout);

	char load_before[128], load_after[128];
	read_loadavg(load_before, sizeof load_before);
	struct timespec wall0;
	clock_gettime(CLOCK_REALTIME, &wall0);

	long total = warmup + runs;
	for (long it = 0; it < total; it++) {
		int timed = it >= warmup;
		for (int j = 0; j < k; j++) {
			int c = rotate ? (int)((it + j) % k) : j;
			struct contender *ct = &cs[c];
			double w, cpu;
			char err[160];
			if (timed && !due(ct, it - warmup, runs))
				continue;
			if (pause_ms) {
				struct timespec p = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
				while (nanosleep(&p, &p) < 0 && errno == EINTR)
					;
			}
			if (run_once(ct, &w, &cpu, err, sizeof err, -1) == RUN_OK) {
				if (timed) {
					ct->ms[ct->n_ok] = w;
					ct->cpu[ct->n_ok] = cpu;
					ct->n_ok++;
				}
			} else {
				if (timed)
					ct->n_err++;
				else
					ct->n_warm_err++;
				if (ct->n_err + ct->n_warm_err == 1) {
					snprintf(ct->first_err, sizeof ct->first_err, "%s", err);
					fprintf(stderr, "launch: %s: %s run %ld failed: %s\n",
						ct->name, timed ? "timed" : "warm-up",
						timed ? it - warmup + 1 : it + 1, err);
				}
			}
		}
	}
	read_loadavg(load_after, sizeof load_after);

	int any_err = 0;
	for (int c = 0; c < k; c++) {
		struct contender *ct = &cs[c];
		if (ct->n_err || ct->n_warm_err)
			any_err = 1;
		if (ct->n_ok == 0) {
			ct->median = ct->min = ct->max = ct->p90 = ct->mean = NAN;
			continue;
		}
		double *s = malloc((size_t)ct->n_ok * sizeof *s);
		if (!s)
			die("out of memory%s", "");
		memcpy(s, ct->ms, (size_t)ct->n_ok * sizeof *s);
		qsort(s, (size_t)ct->n_ok, sizeof *s, cmp_double);
		ct->median = quantile(s, ct->n_ok, 0.5);
		ct->p90 = quantile(s, ct->n_ok, 0.9);
		ct->min = s[0];
		ct->max = s[ct->n_ok - 1];
		double sum = 0;
		for (int r = 0; r < ct->n_ok; r++)
			sum += s[r];
		ct->mean = sum / ct->n_ok;
		free(s);
	}

	double ref = cs[0].median;
	printf("\n%-12s %5s %5s %9s %9s %9s %9s %8s\n", "contender", "ok", "err", "median", "min",
	       "p90", "max", "ratio");
	for (int c = 0; c < k; c++) {
		struct contender *ct = &cs[c];
		printf("%-12s %5d %5d", ct->name, ct->n_ok, ct->n_err + ct->n_warm_err);
		if (ct->n_ok) {
			printf(" %9.3f %9.3f %9.3f %9.3f", ct->median, ct->min, ct->p90, ct->max);
			if (ref > 0 && !isnan(ref))
				printf(" %7.2fx", ct->median / ref);
			else
				printf(" %8s", "-");
		} else {
			printf(" %9s %9s %9s %9s %8s", "-", "-", "-", "-", "-");
		}
		putchar('\n');
	}
	printf("(times in ms, wall clock spawn..reap; ratio = median / median of '%s'; "
	       "load avg before: %s, after: %s)\n",
	       cs[0].name, load_before, load_after);
	fflush(stdout);

	for (int c = 0; c < k; c++) {
		struct contender *ct = &cs[c];
		if (ct->n_err || ct->n_warm_err) {
			fprintf(stderr,
				"launch: ERROR: %s: %d of %ld timed and %d of %ld warm-up "
				"runs failed (first: %s)\n",
				ct->name, ct->n_err,
				ct->max_runs > 0 && ct->max_runs < runs ? ct->max_runs : runs,
				ct->n_warm_err, warmup, ct->first_err);
			diagnose(ct);
		}
	}

	if (json_path) {
		FILE *f = fopen(json_path, "we");
		if (!f) {
			fprintf(stderr, "launch: cannot write %s: %s\n", json_path,
				strerror(errno));
			return 2;
		}
		struct utsname u;
		uname(&u);
		char tbuf[64];
		struct tm tm;
		gmtime_r(&wall0.tv_sec, &tm);
		strftime(tbuf, sizeof tbuf, "%Y-%m-%dT%H:%M:%SZ", &tm);
		fprintf(f, "{\n  \"tool\": \"launch\",\n  \"started_utc\": ");
		json_str(f, tbuf);
		fprintf(f,
			",\n  \"runs\": %ld,\n  \"warmup\": %ld,\n  \"rotate\": %s,\n"
			"  \"pause_ms\": %ld,\n",
			runs, warmup, rotate ? "true" : "false", pause_ms);
		fprintf(f, "  \"timer\": \"CLOCK_MONOTONIC, posix_spawn..wait4, ms\",\n");
		fprintf(f, "  \"quantiles\": \"linear interpolation\",\n");
		fprintf(f, "  \"host\": {\"kernel\": ");
		json_str(f, u.release);
		fprintf(f, ", \"machine\": ");
		json_str(f, u.machine);
		fprintf(f, ", \"online_cpus\": %ld, \"loadavg_before\": ",
			sysconf(_SC_NPROCESSORS_ONLN));
		json_str(f, load_before);
		fprintf(f, ", \"loadavg_after\": ");
		json_str(f, load_after);
		fprintf(f, "},\n  \"reference\": ");
		json_str(f, cs[0].name);
		fprintf(f, ",\n  \"contenders\": [\n");
		for (int c = 0; c < k; c++) {
			struct contender *ct = &cs[c];
			fprintf(f, "    {\n      \"name\": ");
			json_str(f, ct->name);
			fprintf(f, ",\n      \"argv\": [");
			for (int a = 0; a < ct->argc; a++) {
				if (a)
					fputs(", ", f);
				json_str(f, ct->argv[a]);
			}
			fprintf(f,
				"],\n      \"runs_planned\": %ld, \"ok\": %d, \"errors\": %d, "
				"\"warmup_errors\": %d,\n",
				ct->max_runs > 0 && ct->max_runs < runs ? ct->max_runs : runs,
				ct->n_ok, ct->n_err, ct->n_warm_err);
			fprintf(f, "      \"first_error\": ");
			if (ct->first_err[0])
				json_str(f, ct->first_err);
			else
				fputs("null", f);
			fprintf(f, ",\n      \"median_ms\": ");
			json_num(f, ct->median);
			fprintf(f, ", \"min_ms\": ");
			json_num(f, ct->min);
			fprintf(f, ", \"p90_ms\": ");
			json_num(f, ct->p90);
			fprintf(f, ", \"max_ms\": ");
			json_num(f, ct->max);
			fprintf(f, ", \"mean_ms\": ");
			json_num(f, ct->mean);
			fprintf(f, ",\n      \"ratio_to_reference\": ");
			json_num(f, (ref > 0 && ct->n_ok) ? ct->median / ref : NAN);
			double cmed = NAN;
			if (ct->n_ok) {
				double *s = malloc((size_t)ct->n_ok * sizeof *s);
				if (s) {
					memcpy(s, ct->cpu, (size_t)ct->n_ok * sizeof *s);
					qsort(s, (size_t)ct->n_ok, sizeof *s, cmp_double);
					cmed = quantile(s, ct->n_ok, 0.5);
					free(s);
				}
			}
			fprintf(f, ", \"cpu_median_ms\": ");
			json_num(f, cmed);
			fprintf(f, ",\n      \"samples_ms\": [");
			for (int r = 0; r < ct->n_ok; r++) {
				if (r)
					fputs(", ", f);
				json_num(f, ct->ms[r]);
			}
			fprintf(f, "]\n    }%s\n", c + 1 < k ? "," : "");
		}
		fprintf(f, "  ]\n}\n");
		if (fclose(f) != 0) {
			fprintf(stderr, "launch: error writing %s\n", json_path);
			return 2;
		}
	}
	return any_err ? 1 : 0;
}
