/* SPDX-License-Identifier: MIT */
/*
 * The embedded backend: every command is one `airlock run --json` child (the sibling
 * binary), with the command line's flags, the session's staging workspace copied in with
 * --file, the call's stdin from a memfd and the egress log in a file. Cancelling kills the
 * child with SIGTERM, which kills its sandbox (airlock run's own contract: nothing stays).
 */
#include "mcp/mcp.h"
#include "common/cleanup.h"
#include "common/selfpath.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct emb {
	char *airlock; /* the sibling `airlock` */
	struct mcp_staging *st;
};

struct child {
	pid_t pid;
	int out, err;
	char *obuf, *ebuf;
	size_t olen, elen;
};

/* argv for `airlock run --json ...` (a heap array of borrowed and owned strings, freed by
 * free_argv: owned ones are those at the indexes in `owned`). */
struct argv_buf {
	char **v;
	size_t n;
	char *owned[4];
	size_t n_owned;
};

static void push(struct argv_buf *a, const char *s)
{
	a->v = xrealloc(a->v, (a->n + 2) * sizeof(*a->v));
	a->v[a->n++] = (char *)s;
	a->v[a->n] = NULL;
}

static void push_owned(struct argv_buf *a, char *s)
{
	a->owned[a->n_owned++] = s;
	push(a, s);
}

static void argv_free(struct argv_buf *a)
{
	for (size_t i = 0; i < a->n_owned; i++)
		free(a->owned[i]);
	free(a->v);
}

static void run_argv(struct mcp_server *s, const struct mcp_cmd *cmd, struct argv_buf *a)
{
	struct emb *e = s->be_state;
	struct mcp_opts *o = s->opts;

	push(a, e->airlock);
	push(a, "run");
	push(a, "--json");
	for (size_t i = 0; i < o->n_run_args; i++)
		push(a, o->run_args[i]);
	push(a, "--timeout");
	push_owned(a, xasprintf("%llums", (unsigned long long)cmd->timeout_ms));
	push(a, "--output-limit");
	push_owned(a, xasprintf("%llu", (unsigned long long)o->output_limit));
	if (o->policy_json) {
		push(a, "--egress-log");
		push(a, o->egress_log ? o->egress_log : mcp_staging_egress(e->st));
	}
	if (e->st && !mcp_staging_empty(e->st)) {
		push(a, "--file");
		push_owned(a, xasprintf("%s:/workspace", mcp_staging_workspace(e->st)));
	}
	if (cmd->cwd) {
		push(a, "--workdir");
		push(a, cmd->cwd);
	}
	push(a, "--");
	for (char **p = cmd->argv; *p; p++)
		push(a, *p);
}

/* Start argv with stdin from in_fd and stdout/stderr into pipes; signals as by default. */
static int spawn(char **argv, int in_fd, struct child *c, struct al_error **err)
{
	int o[2] = {-1, -1}, e[2] = {-1, -1}, r;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, def;

	if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0) {
		r = errno;
		for (int i = 0; i < 2; i++) {
			if (o[i] >= 0)
				close(o[i]);
			if (e[i] >= 0)
				close(e[i]);
		}
		return al_error_set(err, r, "pipe");
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
	posix_spawn_file_actions_adddup2(&fa, o[1], 1);
	posix_spawn_file_actions_adddup2(&fa, e[1], 2);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGTERM);
	sigaddset(&def, SIGHUP);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	r = posix_spawn(&c->pid, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(o[1]);
	close(e[1]);
	c->out = o[0];
	c->err = e[0];
	if (r != 0) {
		close(o[0]);
		close(e[0]);
		return al_error_set(err, r, "run '%s'", argv[0]);
	}
	return 0;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void drain(int *fd, char **buf, size_t *len)
{
	char chunk[65536];
	ssize_t n = read(*fd, chunk, sizeof(chunk));

	if (n < 0 && errno == EINTR)
		return;
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return;
	}
	*buf = xrealloc(*buf, *len + (size_t)n + 1);
	memcpy(*buf + *len, chunk, (size_t)n);
	*len += (size_t)n;
	(*buf)[*len] = '\0';
}

/* Read the child's output to its end, with a progress notification every second; then reap
 * it. Returns its wait status. */
static int collect(struct mcp_job *job, struct child *c, double total)
{
	double start = now_s(), tick = start + 1;
	int status = 0;
	siginfo_t si;

	while (c->out >= 0 || c->err >= 0) {
		struct pollfd p[2] = {{.fd = c->out, .events = POLLIN},
				      {.fd = c->err, .events = POLLIN}};
		double wait = tick - now_s();

		poll(p, 2, wait > 0 ? (int)(wait * 1000) + 1 : 0);
		if (now_s() >= tick) {
			char msg[64];

			snprintf(msg, sizeof(msg), "running for %.0fs", tick - start);
			mcp_progress(job, tick - start, total, msg);
			tick += 1;
		}
		if (p[0].revents)
			drain(&c->out, &c->obuf, &c->olen);
		if (p[1].revents)
			drain(&c->err, &c->ebuf, &c->elen);
	}
	/* Reaped only after job->pid is cleared, so a late cancel cannot hit a reused pid. */
	while (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&job->srv->lock);
	job->pid = 0;
	pthread_mutex_unlock(&job->srv->lock);
	while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

/* stdin for the child: a memfd with the call's bytes, or /dev/null. */
static int stdin_fd(const struct mcp_cmd *cmd, struct al_error **err)
{
	int fd;
	size_t done = 0;

	if (!cmd->stdin_data || !cmd->stdin_len)
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	else
		fd = memfd_create("airlock-mcp-stdin", MFD_CLOEXEC);
	if (fd < 0)
		return al_error_set(err, errno, "stdin");
	while (done < cmd->stdin_len) {
		ssize_t n = write(fd, cmd->stdin_data + done, cmd->stdin_len - done);

		if (n <= 0) {
			close(fd);
			return al_error_set(err, errno, "write stdin");
		}
		done += (size_t)n;
	}
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The result's fields from airlock run's JSON object. */
static json_t *outcome(json_t *j)
{
	static const char *const keys[] = {"stdout",	       "stderr",      "exit_code",
					   "signal",	       "reason",      "stdout_truncated",
					   "stderr_truncated", "duration_ms", "error"};
	json_t *r = json_object();

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (json_object_get(j, keys[i]))
			json_object_set(r, keys[i], json_object_get(j, keys[i]));
	return r;
}

static json_t *emb_exec(struct mcp_job *job, const struct mcp_cmd *cmd, struct al_error **err)
{
	struct mcp_server *s = job->srv;
	struct argv_buf a = {0};
	struct child c = {.pid = -1, .out = -1, .err = -1};
	_cleanup_close_ int in = stdin_fd(cmd, err);
	json_t *j = NULL, *r = NULL;
	int status;

	if (in < 0)
		return NULL;
	run_argv(s, cmd, &a);
	if (spawn(a.v, in, &c, err) < 0) {
		argv_free(&a);
		return NULL;
	}
	argv_free(&a);
	pthread_mutex_lock(&s->lock);
	job->pid = c.pid;
	if (atomic_load(&job->cancelled))
		kill(c.pid, SIGTERM); /* cancelled before the pid was known */
	pthread_mutex_unlock(&s->lock);
	status = collect(job, &c, (double)cmd->timeout_ms / 1000);
	j = c.olen ? json_loadb(c.obuf, c.olen, 0, NULL) : NULL;
	if (json_is_object(j))
		r = outcome(j);
	else if (WIFEXITED(status) && WEXITSTATUS(status) == AL_EXIT_USAGE)
		al_error_msg(err, EINVAL, "refused: %s", c.ebuf ? c.ebuf : "usage error");
	else
		al_error_msg(err, EIO, "airlock run ended (status %d) without a result: %s", status,
			     c.ebuf ? c.ebuf : "");
	json_decref(j);
	free(c.obuf);
	free(c.ebuf);
	return r;
}

static json_t *emb_write(struct mcp_server *s, const char *rel, const char *data, size_t len,
			 struct al_error **err)
{
	struct emb *e = s->be_state;
	uint64_t cap = s->opts->disk_set ? s->opts->disk : 1ull << 30; /* run's default --disk */

	if (mcp_staging_write(e->st, rel, data, len, cap, err) < 0)
		return NULL;
	return json_pack("{s:s+, s:I}", "path", "/workspace/", rel, "size", (json_int_t)len);
}

static json_t *emb_read(struct mcp_server *s, const char *rel, struct al_error **err)
{
	struct emb *e = s->be_state;
	size_t len = 0;
	bool truncated = false;
	_cleanup_free_ char *data =
	    mcp_staging_read(e->st, rel, MCP_FILE_MAX, &len, &truncated, err);

	return data ? mcp_file_result(rel, data, len, truncated) : NULL;
}

static json_t *emb_list(struct mcp_server *s, const char *rel, struct al_error **err)
{
	struct emb *e = s->be_state;
	json_t *entries = mcp_staging_list(e->st, rel, err);

	if (!entries)
		return NULL;
	return json_pack("{s:s+, s:o}", "path", rel[0] ? "/workspace/" : "/workspace", rel,
			 "entries", entries);
}

static json_t *emb_reset(struct mcp_server *s, struct al_error **err)
{
	al_error_msg(err, EINVAL, "reset: there is no sandbox between calls in embedded mode");
	return NULL;
}

/* The egress log file (the user's --egress-log, or the session's): its last 4 MiB. */
static char *emb_egress(struct mcp_server *s, size_t *len, struct al_error **err)
{
	struct emb *e = s->be_state;
	const char *path = s->opts->egress_log ? s->opts->egress_log : mcp_staging_egress(e->st);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat sb;
	char *buf;
	ssize_t n;
	off_t off = 0;
	size_t size;

	*len = 0;
	if (fd < 0 && errno == ENOENT)
		return xstrdup(""); /* nothing logged yet */
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		return al_error_set(err, fd < 0 ? errno : EINVAL, "open '%s'", path), NULL;
	/* its tail: what resources/read returns (and the byte before it, to cut at a line) */
	if (sb.st_size > (off_t)MCP_EGRESS_MAX + 1)
		off = sb.st_size - (off_t)MCP_EGRESS_MAX - 1;
	size = (size_t)(sb.st_size - off);
	buf = xzalloc(size + 1);
	while (*len < size && (n = pread(fd, buf + *len, size - *len, off + (off_t)*len)) > 0)
		*len += (size_t)n;
	buf[*len] = '\0';
	return buf;
}

static void emb_close(struct mcp_server *s)
{
	struct emb *e = s->be_state;

	mcp_staging_free(e->st);
	free(e->airlock);
	free(e);
}

const struct mcp_backend mcp_embedded = {
    .exec = emb_exec,
    .write_file = emb_write,
    .read_file = emb_read,
    .list_files = emb_list,
    .reset = emb_reset,
    .egress_log = emb_egress,
    .close = emb_close,
};

/*
 * The command line's flags are judged by `airlock run` itself before any protocol: one run
 * of /bin/true with them (a policy document included); a usage error there is ours.
 */
static int dry_run(struct mcp_server *s, struct al_error **err)
{
	char *argv[] = {"true", NULL};
	struct mcp_cmd cmd = {.argv = argv, .timeout_ms = 10000};
	struct argv_buf a = {0};
	struct child c = {.out = -1, .err = -1};
	_cleanup_close_ int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int status = 0, r = 0;

	run_argv(s, &cmd, &a);
	r = spawn(a.v, in, &c, err);
	argv_free(&a);
	if (r < 0)
		return -1;
	while (c.out >= 0 || c.err >= 0) {
		struct pollfd p[2] = {{.fd = c.out, .events = POLLIN},
				      {.fd = c.err, .events = POLLIN}};
		poll(p, 2, -1);
		if (p[0].revents)
			drain(&c.out, &c.obuf, &c.olen);
		if (p[1].revents)
			drain(&c.err, &c.ebuf, &c.elen);
	}
	while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == AL_EXIT_USAGE)
		r = al_error_msg(err, EINVAL, "%s", c.ebuf ? c.ebuf : "usage error");
	free(c.obuf);
	free(c.ebuf);
	return r;
}

int mcp_embedded_open(struct mcp_server *s, struct al_error **err)
{
	struct emb *e = xzalloc(sizeof(*e));

	s->be = &mcp_embedded;
	s->be_state = e;
	e->airlock = al_sibling_path("airlock");
	if (!e->airlock || access(e->airlock, X_OK) < 0) {
		free(e->airlock);
		free(e);
		return al_error_msg(err, ENOENT, "cannot find the airlock binary next to me");
	}
	if (!(e->st = mcp_staging_new(err)) || dry_run(s, err) < 0) {
		mcp_staging_free(e->st);
		free(e->airlock);
		free(e);
		return -1;
	}
	return 0;
}
