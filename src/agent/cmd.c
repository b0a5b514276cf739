/* SPDX-License-Identifier: MIT */
/* The agent's commands: start, output capture and replay, reaping. */
#include "agent/agent.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/syscalls.h"
#include "jail/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

struct agent_cmd *agent_cmd_find(struct agent *a, const char *id, size_t len)
{
	for (size_t i = 0; i < a->n_cmds; i++)
		if (strlen(a->cmds[i]->id) == len && memcmp(a->cmds[i]->id, id, len) == 0)
			return a->cmds[i];
	return NULL;
}

static void cmd_free(struct agent_cmd *c)
{
	free(c->in_buf);
	for (int i = 0; i < 3; i++)
		al_closep(&c->fd[i]);
	al_closep(&c->report_fd);
	free(c->buf[0].data);
	free(c->buf[1].data);
	free(c);
}

/* Make room in the table: forget the oldest command that finished over a second ago. */
static int make_room(struct agent *a)
{
	uint64_t now = agent_now_ms();

	if (a->n_cmds < AGENT_MAX_CMDS)
		return 0;
	for (size_t i = 0; i < a->n_cmds; i++) {
		if (a->cmds[i]->finished && a->cmds[i]->end_ms + 1000 < now) {
			cmd_free(a->cmds[i]);
			memmove(&a->cmds[i], &a->cmds[i + 1], (a->n_cmds - i - 1) * sizeof(a->cmds[0]));
			a->n_cmds--;
			return 0;
		}
	}
	return -1;
}

static char *dup_field(const char *s, size_t len)
{
	char *p = malloc(len + 1);

	if (!p)
		abort();
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

/* NULL-terminated heap copies of the EXEC's argv (env == false) or environment. */
static char **collect(const struct proto_msg *m, bool env)
{
	size_t n = env ? m->n_env : m->n_args, cursor = 0, len;
	char **v = calloc(n + 1, sizeof(*v));
	const char *s;

	if (!v)
		abort();
	/* The iterators are O(1) a step (index access would rescan the frame each time). */
	for (size_t i = 0; i < n; i++) {
		s = env ? proto_msg_next_env(m, &cursor, &len) : proto_msg_next_arg(m, &cursor, &len);
		v[i] = dup_field(s ? s : "", s ? len : 0);
	}
	return v;
}

/* The shim's fds: the command's stdio at 0..2, its report pipe, the Landlock ruleset. */
enum { SHIM_FD_REPORT = 3, SHIM_FD_LANDLOCK = 4 };

/*
 * What the report pipe carries, each record in one write (atomic, under PIPE_BUF): at most
 * one struct jail_exec_report from the command's process if its exec failed (err != 0),
 * then the shim's "done" record with the command's wait status as soon as it is reaped.
 * The agent answers EXIT on "done", without waiting for the shim's own exit.
 */
struct shim_done {
	int32_t zero; /* 0: tells it from an exec report, whose err is never 0 */
	int32_t status;
};

/* In the shim's child: become the command. */
__attribute__((noreturn)) static void child(struct agent *a, const struct proto_msg *m)
{
	struct al_config cfg;
	struct jail_ctx ctx = {.cfg = &cfg, .stdio = {0, 1, 2}};
	char *cwd = m->cwd ? dup_field(m->cwd, m->cwd_len) : NULL;

	memset(&cfg, 0, sizeof(cfg));
	cfg.argv = collect(m, false);
	cfg.workdir = a->workdir;
	ctx.envp = collect(m, true);
	ctx.uid = m->uid;
	ctx.cwd = cwd ? cwd : a->workdir;
	ctx.prepared = a->prepared;
	ctx.seccomp_held = a->seccomp_held;
	ctx.landlock_fd = a->landlock_fd >= 0 ? SHIM_FD_LANDLOCK : -1;
	jail_exec_workload(&ctx, -1, SHIM_FD_REPORT);
}

struct child_args {
	struct agent *a;
	const struct proto_msg *m;
};

static int child_entry(void *arg)
{
	struct child_args *ca = arg;

	child(ca->a, ca->m); /* unblocks its signals itself */
}

/* Keep only keep[0..n) open, renumbered 0..n-1 (the shim must not hold the agent's pipes
 * and sockets: another command would never see EOF on its stdin). A keep[i] < 0 leaves
 * slot i closed. */
static int keep_only(const int *keep, int n)
{
	int tmp[8];

	for (int i = 0; i < n; i++) /* first above every slot, so no dup2 below clobbers one */
		if (keep[i] >= 0 && (tmp[i] = fcntl(keep[i], F_DUPFD_CLOEXEC, 64)) < 0)
			return -1;
	for (int i = 0; i < n; i++)
		if (keep[i] >= 0 ? dup2(tmp[i], i) != i : (close(i), 0))
			return -1;
	return sys_close_range((unsigned)n, ~0U, 0);
}

/* Is pid a live (not zombie) descendant of root (following parents in /proc)? */
static bool descends_from(pid_t pid, pid_t root)
{
	for (int depth = 0; pid > 1 && depth < 64; depth++) {
		char state = 0;
		char path[64], buf[512], *p;
		int fd;
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return false;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			return false;
		buf[n] = '\0';
		p = strrchr(buf, ')');
		if (!p || sscanf(p + 2, "%c %d", &state, &pid) != 2)
			return false;
		if (depth == 0 && state == 'Z')
			return false; /* already dead; the shim reaps it */
		if (pid == root)
			return true;
	}
	return false;
}

/* SIGKILL every process of the command's tree, including those that left its process group
 * or session; orphans come back to the shim (a subreaper), so repeat until none is left. */
static void kill_tree(pid_t shim)
{
	for (int round = 0; round < 100; round++) {
		DIR *d = opendir("/proc");
		struct dirent *de;
		int killed = 0;

		while (d && (de = readdir(d))) {
			pid_t pid = (pid_t)atoi(de->d_name);

			if (pid > 1 && pid != shim && descends_from(pid, shim) &&
			    kill(pid, SIGKILL) == 0)
				killed++;
		}
		if (d)
			closedir(d);
		if (!killed)
			return;
		usleep(1000); /* let the killed die (and their children reach the shim) */
	}
}

/*
 * The shim, between the agent and a command: a child subreaper, so that the whole tree the
 * command makes stays below it (setsid and new process groups included). The agent's KILL
 * arrives as SIGRTMIN carrying the signal: SIGKILL (and so every timeout) kills the whole
 * tree; other signals go to the command's process group. When the command ends, the shim
 * ends the same way (exit code or signal); background processes it left keep running.
 */
__attribute__((noreturn)) static void shim(struct agent *a, const struct proto_msg *m, int stdio[3],
					   int report_w)
{
	int keep[5] = {stdio[0], stdio[1], stdio[2], report_w, a->landlock_fd};
	struct rlimit core = {0, 0};
	siginfo_t si;
	sigset_t all;
	pid_t cmd, self = getpid();
	int st = 0;

	if (keep_only(keep, 5) < 0)
		_exit(AL_EXIT_SETUP);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	setrlimit(RLIMIT_CORE, &core);
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	cmd = jail_clone_vfork(child_entry, &(struct child_args){a, m});
	/* Only the report pipe stays: the command's stdio must reach EOF with the command. */
	sys_close_range(0, SHIM_FD_REPORT - 1, 0);
	sys_close_range(SHIM_FD_REPORT + 1, ~0U, 0);
	if (cmd < 0)
		_exit(AL_EXIT_SETUP);
	for (;;) {
		if (sigwaitinfo(&all, &si) < 0)
			continue;
		if (si.si_signo == SIGCHLD) {
			pid_t p;
			bool done = false;

			while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
				if (p == cmd) {
					struct shim_done rec = {0, st};

					(void)!write(SHIM_FD_REPORT, &rec, sizeof(rec));
					done = true;
					break; /* st is the command's: reap the rest later */
				}
			}
			if (done)
				break;
		} else if (si.si_signo == SIGRTMIN) {
			int sig = si.si_value.sival_int;

			if (sig == SIGKILL)
				kill_tree(self);
			else if (kill(-cmd, sig) < 0)
				kill(cmd, sig);
		} else if (si.si_signo != SIGPIPE) {
			kill(-cmd, si.si_signo); /* a signal for the shim is meant for the command */
		}
	}
	if (WIFSIGNALED(st)) {
		int sig = WTERMSIG(st);

		signal(sig, SIG_DFL);
		sigemptyset(&all);
		sigaddset(&all, sig);
		sigprocmask(SIG_UNBLOCK, &all, NULL);
		raise(sig);
		_exit(128 + sig);
	}
	_exit(WEXITSTATUS(st));
}

static void watch_output(struct agent *a, struct agent_cmd *c)
{
	struct epoll_event ev = {.events = EPOLLIN};

	c->w_out = (struct watch){.kind = W_OUT, .cmd = c};
	c->w_err = (struct watch){.kind = W_ERR, .cmd = c};
	ev.data.ptr = &c->w_out;
	epoll_ctl(a->ep, EPOLL_CTL_ADD, c->fd[1], &ev);
	ev.data.ptr = &c->w_err;
	epoll_ctl(a->ep, EPOLL_CTL_ADD, c->fd[2], &ev);
	c->w_report = (struct watch){.kind = W_REPORT, .cmd = c};
	ev.data.ptr = &c->w_report;
	epoll_ctl(a->ep, EPOLL_CTL_ADD, c->report_fd, &ev);
}

int agent_cmd_exec(struct agent *a, const struct proto_msg *m)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1}, rep[2] = {-1, -1};
	struct proto_buf b = {0};
	struct agent_cmd *c;
	pid_t pid;

	if (agent_cmd_find(a, m->cmd_id, m->cmd_id_len)) {
		agent_send_error(a, m->id, EEXIST, "command id already used");
		return -1;
	}
	if (m->uid != 0 && m->uid != JAIL_USER_UID) {
		agent_send_error(a, m->id, EINVAL, "uid must be 0 or 1000");
		return -1;
	}
	if (make_room(a) < 0) {
		agent_send_error(a, m->id, EAGAIN, "too many running commands");
		return -1;
	}
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    pipe2(rep, O_CLOEXEC) < 0) {
		int e = errno;
		int *all[] = {in, out, errp, rep};
		for (int i = 0; i < 4; i++)
			al_closep(&all[i][0]), al_closep(&all[i][1]);
		agent_send_error(a, m->id, e, "pipe2");
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		int stdio[3] = {in[0], out[1], errp[1]};
		shim(a, m, stdio, rep[1]);
	}
	close(in[0]);
	close(out[1]);
	close(errp[1]);
	close(rep[1]);
	if (pid < 0) {
		int e = errno;
		close(in[1]), close(out[0]), close(errp[0]), close(rep[0]);
		agent_send_error(a, m->id, e, "fork");
		return -1;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	memcpy(c->id, m->cmd_id, m->cmd_id_len);
	c->pid = pid;
	c->fd[0] = in[1];
	c->fd[1] = out[0];
	c->fd[2] = errp[0];
	c->report_fd = rep[0];
	c->start_ms = agent_now_ms();
	fcntl(c->fd[0], F_SETFL, O_NONBLOCK);
	fcntl(c->fd[1], F_SETFL, O_NONBLOCK);
	fcntl(c->fd[2], F_SETFL, O_NONBLOCK);
	fcntl(c->report_fd, F_SETFL, O_NONBLOCK);
	a->cmds[a->n_cmds++] = c;
	watch_output(a, c);
	if (m->data_len || m->stdin_eof) /* the first stdin bytes came with the EXEC */
		agent_cmd_stdin(a, c, m->data, m->data_len, m->stdin_eof);
	proto_begin(&b, PROTO_OK, m->id);
	proto_put_u32(&b, PT_PID, (uint32_t)pid);
	agent_send(a, &b);
	return 0;
}

static void obuf_append(struct obuf *o, const char *p, size_t n)
{
	/* Keep the first AGENT_BUF_CAP bytes for replays; later bytes are only streamed. */
	if (o->len == o->total && o->len < AGENT_BUF_CAP) {
		size_t keep = n < AGENT_BUF_CAP - o->len ? n : AGENT_BUF_CAP - o->len;

		if (o->len + keep > o->cap) {
			o->cap = (o->len + keep) * 2;
			if (o->cap > AGENT_BUF_CAP)
				o->cap = AGENT_BUF_CAP;
			o->data = realloc(o->data, o->cap);
			if (!o->data)
				abort();
		}
		memcpy(o->data + o->len, p, keep);
		o->len += keep;
	}
	o->total += n;
}

static void stdin_close(struct agent *a, struct agent_cmd *c)
{
	if (c->fd[0] >= 0) {
		epoll_ctl(a->ep, EPOLL_CTL_DEL, c->fd[0], NULL);
		al_closep(&c->fd[0]);
	}
	c->in_len = c->in_off = 0;
	c->in_close = false;
}

/* Write what the pipe takes; wait for EPOLLOUT for the rest. */
void agent_cmd_stdin_ready(struct agent *a, struct agent_cmd *c)
{
	while (c->fd[0] >= 0 && c->in_off < c->in_len) {
		ssize_t n = write(c->fd[0], c->in_buf + c->in_off, c->in_len - c->in_off);

		if (n > 0) {
			c->in_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = &c->w_in};

			c->w_in = (struct watch){.kind = W_IN, .cmd = c};
			if (epoll_ctl(a->ep, EPOLL_CTL_MOD, c->fd[0], &ev) < 0)
				epoll_ctl(a->ep, EPOLL_CTL_ADD, c->fd[0], &ev);
			return;
		}
		stdin_close(a, c); /* EPIPE: the command closed its stdin; drop the rest */
		return;
	}
	if (c->fd[0] >= 0)
		epoll_ctl(a->ep, EPOLL_CTL_DEL, c->fd[0], NULL);
	c->in_len = c->in_off = 0;
	if (c->in_close)
		stdin_close(a, c);
}

int agent_cmd_stdin(struct agent *a, struct agent_cmd *c, const void *data, size_t len,
		    bool close_after)
{
	if (c->fd[0] < 0 || c->in_close)
		return len ? -EPIPE : 0; /* closing a closed stdin is a no-op */
	if (c->in_len - c->in_off + len > AGENT_STDIN_CAP)
		return -EAGAIN;
	if (len) {
		if (c->in_off) {
			memmove(c->in_buf, c->in_buf + c->in_off, c->in_len - c->in_off);
			c->in_len -= c->in_off;
			c->in_off = 0;
		}
		c->in_buf = realloc(c->in_buf, c->in_len + len);
		if (!c->in_buf)
			abort();
		memcpy(c->in_buf + c->in_len, data, len);
		c->in_len += len;
	}
	c->in_close = close_after;
	agent_cmd_stdin_ready(a, c);
	return 0;
}

void agent_send_output(struct agent *a, const struct agent_cmd *c, int stream, uint64_t off,
		       const char *data, size_t len)
{
	struct proto_buf b = {0};
	uint8_t s = (uint8_t)stream;

	proto_begin(&b, PROTO_OUTPUT, 0);
	proto_put_str(&b, PT_CMD_ID, c->id, strlen(c->id));
	proto_put_u8(&b, PT_STREAM, s);
	proto_put_u64(&b, PT_OFFSET, off);
	proto_put_bytes(&b, PT_DATA, data, len);
	agent_send(a, &b);
}

void agent_send_exit(struct agent *a, const struct agent_cmd *c)
{
	struct proto_buf b = {0};

	proto_begin(&b, PROTO_EXIT, 0);
	proto_put_str(&b, PT_CMD_ID, c->id, strlen(c->id));
	proto_put_i32(&b, PT_STATUS, c->status);
	if (c->exec_err) {
		proto_put_i32(&b, PT_ERRNO, c->exec_err);
		proto_put_str(&b, PT_MESSAGE, c->exec_msg, strlen(c->exec_msg));
	}
	proto_put_u64(&b, PT_TIME_MS, c->end_ms);
	agent_send(a, &b);
}

/* EXIT goes out once the process is reaped and both output pipes are drained. */
static void maybe_finish(struct agent *a, struct agent_cmd *c)
{
	if (c->finished || !c->exited || c->fd[1] >= 0 || c->fd[2] >= 0)
		return;
	c->finished = true;
	c->end_ms = agent_now_ms();
	stdin_close(a, c);
	agent_send_exit(a, c);
}

void agent_cmd_pump(struct agent *a, struct agent_cmd *c, int stream)
{
	char buf[65536];
	int *fd = &c->fd[stream];
	ssize_t n;

	while (*fd >= 0) {
		n = read(*fd, buf, sizeof(buf));
		if (n > 0) {
			uint64_t off = c->buf[stream - 1].total;

			obuf_append(&c->buf[stream - 1], buf, (size_t)n);
			agent_send_output(a, c, stream, off, buf, (size_t)n);
			if (!c->exited)
				return; /* one read per wakeup keeps the loop fair */
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && !c->exited)
			return;
		/* EOF, or (after exit) nothing more now: stop following this stream. The
		 * command's leftover children lose the pipe; the command has ended. */
		al_closep(fd);
	}
	maybe_finish(a, c);
}

static void report_close(struct agent *a, struct agent_cmd *c)
{
	if (c->report_fd >= 0)
		epoll_ctl(a->ep, EPOLL_CTL_DEL, c->report_fd, NULL);
	al_closep(&c->report_fd);
}

/* Read the records waiting in the report pipe; true if "done" came (*status set). */
static bool read_reports(struct agent *a, struct agent_cmd *c, int *status)
{
	union {
		struct jail_exec_report rep;
		struct shim_done done;
	} r;

	while (c->report_fd >= 0) {
		ssize_t n = read(c->report_fd, &r, sizeof(r.rep));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return false;
		if (n == (ssize_t)sizeof(r.done) && r.done.zero == 0) {
			*status = r.done.status;
			report_close(a, c); /* nothing follows "done" */
			return true;
		}
		if (n == (ssize_t)sizeof(r.rep) && r.rep.err != 0) {
			c->exec_err = r.rep.err;
			memcpy(c->exec_msg, r.rep.text, sizeof(c->exec_msg) - 1);
			continue;
		}
		report_close(a, c); /* EOF (the shim is gone) or a torn record */
	}
	return false;
}

static void ended(struct agent *a, struct agent_cmd *c, int status)
{
	c->exited = true;
	c->status = status;
	agent_cmd_pump(a, c, 1);
	agent_cmd_pump(a, c, 2);
	maybe_finish(a, c);
}

void agent_cmd_report(struct agent *a, struct agent_cmd *c)
{
	int status;

	if (!c->exited && read_reports(a, c, &status))
		ended(a, c, status);
}

/* The shim was reaped. Its "done" record, if it wrote one, says how the command ended;
 * without one (the shim itself was killed) its own status stands for the command's. */
void agent_cmd_reaped(struct agent *a, struct agent_cmd *c, int status)
{
	int done_status;

	if (read_reports(a, c, &done_status))
		status = done_status;
	report_close(a, c);
	ended(a, c, status);
}

void agent_replay(struct agent *a, struct agent_cmd *c, int stream, uint64_t off)
{
	for (int s = 1; s <= 2; s++) {
		const struct obuf *o = &c->buf[s - 1];
		uint64_t pos = off;

		if (stream && stream != s)
			continue;
		while (pos < o->len && a->conn_fd >= 0) {
			size_t n = o->len - pos < AGENT_CHUNK ? (size_t)(o->len - pos) : AGENT_CHUNK;

			agent_send_output(a, c, s, pos, o->data + pos, n);
			pos += n;
		}
	}
	if (c->finished)
		agent_send_exit(a, c);
}
