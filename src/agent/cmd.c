/* SPDX-License-Identifier: MIT */
/* The agent's commands: start, output capture and replay, reaping. */
#include "agent/agent.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "jail/jail.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <termios.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
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
	al_closep(&c->pty);
	for (int i = 0; i < 3; i++)
		al_closep(&c->fd[i]);
	al_closep(&c->report_fd);
	al_closep(&c->shim_ctl);
	free(c->job);
	free(c->buf[0].data);
	free(c->buf[1].data);
	free(c);
}

/* For expiries (idle shims, kept output, the table): a clock that does not jump. */
static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A finished command's output is kept for a daemon that lost the connection before it had
 * read all of it and asks again (REPLAY): until a daemon has been connected for
 * AGENT_KEEP_MS since the command ended (a daemon that connects asks at once for what it
 * missed). Then it is freed: a sandbox that runs many commands must not hold every one's
 * output (up to AGENT_BUF_CAP a stream each) in its memory. A later REPLAY of it sends
 * only its EXIT. */
static void release_output(struct agent_cmd *c)
{
	for (int i = 0; i < 2; i++) {
		free(c->buf[i].data);
		c->buf[i].data = NULL;
		c->buf[i].len = c->buf[i].cap = 0; /* total stays: the offsets go on */
	}
}

/* A finished command's output may go from seen_ms + AGENT_KEEP_MS on. */
static void mark_seen(struct agent *a, struct agent_cmd *c, uint64_t now)
{
	c->seen_ms = now;
	if (now + AGENT_KEEP_MS < a->kept_due)
		a->kept_due = now + AGENT_KEEP_MS;
}

int agent_cmds_expire(struct agent *a)
{
	uint64_t now = mono_ms(), next = UINT64_MAX;

	if (a->kept_due > now)
		return a->kept_due == UINT64_MAX ? -1 : (int)(a->kept_due - now);
	for (size_t i = 0; i < a->n_cmds; i++) {
		struct agent_cmd *c = a->cmds[i];

		if (!c->finished || !c->seen_ms || (!c->buf[0].data && !c->buf[1].data))
			continue;
		if (c->seen_ms + AGENT_KEEP_MS <= now)
			release_output(c);
		else if (c->seen_ms + AGENT_KEEP_MS < next)
			next = c->seen_ms + AGENT_KEEP_MS;
	}
	a->kept_due = next;
	return next == UINT64_MAX ? -1 : (int)(next - now);
}

void agent_cmds_connection(struct agent *a, bool up)
{
	uint64_t now = mono_ms();

	for (size_t i = 0; i < a->n_cmds; i++) {
		struct agent_cmd *c = a->cmds[i];

		if (c->finished && !up)
			c->seen_ms = 0;
		else if (c->finished && !c->seen_ms)
			mark_seen(a, c, now);
	}
}

/* Make room in the table: forget the oldest finished command whose EXIT a daemon has had
 * AGENT_FORGET_MS to read (commands come only from a connected daemon, which asks first
 * for what it missed). */
static int make_room(struct agent *a)
{
	uint64_t now = mono_ms();

	if (a->n_cmds < AGENT_MAX_CMDS)
		return 0;
	for (size_t i = 0; i < a->n_cmds; i++) {
		if (a->cmds[i]->finished && a->cmds[i]->seen_ms &&
		    a->cmds[i]->seen_ms + AGENT_FORGET_MS <= now) {
			cmd_free(a->cmds[i]);
			memmove(&a->cmds[i], &a->cmds[i + 1],
				(a->n_cmds - i - 1) * sizeof(a->cmds[0]));
			a->n_cmds--;
			return 0;
		}
	}
	return -1;
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

static void shim_forget(struct agent *a, size_t i)
{
	close(a->idle[i].ctl);
	memmove(&a->idle[i], &a->idle[i + 1], (a->n_idle - i - 1) * sizeof(a->idle[0]));
	a->n_idle--;
}

/* The shim of a command that ended said it waits for another: keep it, newest last (and let
 * the oldest go if there are enough already: its socket's EOF ends it). */
static void shim_park(struct agent *a, pid_t pid, int ctl, uint32_t jobs)
{
	if (a->n_idle == AGENT_IDLE_SHIMS)
		shim_forget(a, 0);
	a->idle[a->n_idle].pid = pid;
	a->idle[a->n_idle].ctl = ctl;
	a->idle[a->n_idle].jobs = jobs;
	a->idle[a->n_idle].since_ms = mono_ms();
	a->n_idle++;
}

void agent_shim_reaped(struct agent *a, pid_t pid)
{
	for (size_t i = 0; i < a->n_idle; i++) {
		if (a->idle[i].pid == pid) {
			shim_forget(a, i);
			return;
		}
	}
}

void agent_shims_retire(struct agent *a)
{
	while (a->n_idle)
		shim_forget(a, 0); /* EOF: it exits */
}

int agent_shims_expire(struct agent *a)
{
	uint64_t now = mono_ms();

	while (a->n_idle && a->idle[0].since_ms + AGENT_SHIM_IDLE_MS <= now)
		shim_forget(a, 0); /* EOF: it exits */
	return a->n_idle ? (int)(a->idle[0].since_ms + AGENT_SHIM_IDLE_MS - now) : -1;
}

/* Hand the command to the newest idle shim: its pid, or -1 (none, a frame too large for a
 * shim's buffer, or it could not take it: then it is let go; the caller forks a new one). */
static pid_t shim_reuse(struct agent *a, const uint8_t *frame, size_t len, const int fds[4],
			int *ctl, uint32_t *job)
{
	if (len > AGENT_SHIM_JOB_MAX)
		return -1;
	while (a->n_idle) {
		size_t i = a->n_idle - 1;
		pid_t pid = a->idle[i].pid;

		if (agent_shim_send(a->idle[i].ctl, frame, len, fds) == 0) {
			*ctl = a->idle[i].ctl;
			*job = a->idle[i].jobs + 1;
			a->n_idle--;
			return pid;
		}
		shim_forget(a, i); /* gone, or not listening: next one */
	}
	return -1;
}

/* The four pipes of a command (in, out, err, report pairs; the agent's ends non-blocking). */
static int make_pipes(int p[8])
{
	for (int i = 0; i < 4; i++) {
		if (pipe2(&p[2 * i], O_CLOEXEC) < 0) {
			int e = errno;

			for (int j = 0; j < 2 * i; j++)
				close(p[j]);
			return -e;
		}
	}
	/* stdin's write end, the read ends of stdout, stderr and the report */
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	fcntl(p[2], F_SETFL, O_NONBLOCK);
	fcntl(p[4], F_SETFL, O_NONBLOCK);
	fcntl(p[6], F_SETFL, O_NONBLOCK);
	return 0;
}

/* Spare pipes for the next command, once a command has ended (see struct agent). */
static void make_spare(struct agent *a)
{
	if (!a->have_spare)
		a->have_spare = make_pipes(a->spare) == 0;
}

/*
 * A TTY command's PTY, in the sandbox's own devpts, laid out as make_pipes' pipes: the slave
 * is the command's stdin, stdout and stderr (p[0], p[3], p[5]), the master the agent's stdin
 * and stdout ends (p[1], p[2]); stderr has no agent end (p[4] -1: a PTY is one stream). Only
 * the report pipe is a pipe. *master: one more dup, kept for RESIZE. 0, or -errno.
 */
static int make_pty(const struct proto_msg *m, int p[8], int *master)
{
	struct winsize ws = {.ws_row = (unsigned short)(m->rows ? m->rows : 24),
			     .ws_col = (unsigned short)(m->cols ? m->cols : 80)};
	_cleanup_close_ int mfd = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	_cleanup_close_ int sfd = -1;
	int e;

	if (mfd < 0 || unlockpt(mfd) < 0 || ioctl(mfd, TIOCSWINSZ, &ws) < 0)
		return -errno;
	sfd = ioctl(mfd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (sfd < 0 || pipe2(&p[6], O_CLOEXEC) < 0)
		return -errno;
	fcntl(p[6], F_SETFL, O_NONBLOCK);
	p[0] = fcntl(sfd, F_DUPFD_CLOEXEC, 0);
	p[3] = fcntl(sfd, F_DUPFD_CLOEXEC, 0);
	p[5] = TAKE_FD(sfd);
	p[1] = fcntl(mfd, F_DUPFD_CLOEXEC, 0);
	p[2] = fcntl(mfd, F_DUPFD_CLOEXEC, 0);
	p[4] = -1;
	*master = TAKE_FD(mfd);
	if (p[0] >= 0 && p[3] >= 0 && p[1] >= 0 && p[2] >= 0)
		return 0;
	e = errno;
	for (int i = 0; i < 8; i++)
		if (p[i] >= 0)
			close(p[i]);
	al_closep(master);
	return -e;
}

int agent_cmd_resize(struct agent_cmd *c, uint32_t rows, uint32_t cols)
{
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};

	if (c->pty < 0)
		return errno = ENOTTY, -1;
	if (c->finished)
		return errno = ESRCH, -1;
	return ioctl(c->pty, TIOCSWINSZ, &ws); /* the kernel sends SIGWINCH to its foreground */
}

static int take_pipes(struct agent *a, int p[8])
{
	if (!a->have_spare)
		return make_pipes(p);
	memcpy(p, a->spare, sizeof(a->spare));
	a->have_spare = false;
	return 0;
}

/* A new shim for command m, on pipes p (make_pipes' order); *ctl: a control socket for the
 * commands after this one. A sandbox's first command gets one too: its second command then
 * skips the fork (about 0.2 ms measured), and the idle shim a one-command sandbox leaves
 * costs its stop nothing measurable (docs/performance.md, "Shims"). Without the socket
 * (or if it cannot be made) the shim serves this one only. */
static pid_t fork_shim(struct agent *a, const struct proto_msg *m, const int p[8], int *ctl)
{
	int sv[2] = {-1, -1};
	sigset_t all, old;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		sv[0] = sv[1] = -1;
	/* The shim is born with every signal blocked: a KILL (SIGRTMIN, whose default is to
	 * end the process) sent the instant after the OK found a shim that had not blocked it
	 * yet, and the command ended "signaled 35" instead of 9. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid != 0)
		sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid == 0) {
		int stdio[3] = {p[0], p[3], p[5]};

		agent_shim_main(a, m, stdio, p[7], sv[1]);
	}
	if (sv[1] >= 0)
		close(sv[1]);
	*ctl = sv[0];
	if (pid < 0)
		al_closep(ctl);
	return pid;
}

/* The shim's ends of the pipes (it has its own copies now, or they went with its job). */
static void close_shim_ends(const int p[8])
{
	close(p[0]);
	close(p[3]);
	close(p[5]);
	close(p[7]);
}

static void close_agent_ends(const int p[8])
{
	close(p[1]);
	close(p[2]);
	close(p[4]);
	close(p[6]);
}

/* c now runs on shim pid (control socket ctl; c is its job-th command) with pipes p: the
 * agent's ends watched, and the stdin its EXEC m carried queued. */
static void cmd_attach(struct agent *a, struct agent_cmd *c, const struct proto_msg *m, pid_t pid,
		       int ctl, uint32_t job, const int p[8])
{
	c->pid = pid;
	c->shim_ctl = ctl;
	c->shim_job = job;
	c->fd[0] = p[1];
	c->fd[1] = p[2];
	c->fd[2] = p[4];
	c->report_fd = p[6];
	watch_output(a, c);
	if (m->data_len || m->stdin_eof) /* the first stdin bytes came with the EXEC */
		agent_cmd_stdin(a, c, m->data, m->data_len, m->stdin_eof);
}

int agent_cmd_exec(struct agent *a, const struct proto_msg *m, const uint8_t *frame, size_t len)
{
	/* in[0], in[1], out[0], out[1], err[0], err[1], rep[0], rep[1] */
	int p[8], ctl = -1, r, e, pty = -1;
	struct proto_buf *b;
	struct agent_cmd *c;
	uint32_t job = 1;
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
	r = m->tty ? make_pty(m, p, &pty) : take_pipes(a, p);
	if (r < 0) {
		agent_send_error(a, m->id, -r, m->tty ? "opening a PTY" : "pipe2");
		return -1;
	}
	agent_landlock_fresh(a);
	pid = shim_reuse(a, frame, len, (int[]){p[0], p[3], p[5], p[7]}, &ctl, &job);
	if (pid < 0)
		pid = fork_shim(a, m, p, &ctl);
	e = errno;
	close_shim_ends(p);
	if (pid < 0) {
		close_agent_ends(p);
		al_closep(&pty);
		agent_send_error(a, m->id, e, "fork");
		return -1;
	}
	c = xzalloc(sizeof(*c));
	c->pty = pty;
	memcpy(c->id, m->cmd_id, m->cmd_id_len);
	c->start_ms = agent_now_ms();
	if (job > 1) { /* an idle shim's: kept until it says it took it (AGENT_SHIM_ACK) */
		c->job = xrealloc(NULL, len);
		memcpy(c->job, frame, len);
		c->job_len = len;
	}
	a->cmds[a->n_cmds++] = c;
	cmd_attach(a, c, m, pid, ctl, job, p);
	b = agent_frame(a, PROTO_OK, m->id);
	proto_put_u32(b, PT_PID, (uint32_t)pid);
	agent_send(a, b);
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
			o->data = xrealloc(o->data, o->cap);
		}
		memcpy(o->data + o->len, p, keep);
		o->len += keep;
	}
	o->total += n;
}

static void stdin_unwatch(struct agent *a, struct agent_cmd *c)
{
	if (c->in_watched)
		epoll_ctl(a->ep, EPOLL_CTL_DEL, c->fd[0], NULL);
	c->in_watched = false;
}

static void stdin_close(struct agent *a, struct agent_cmd *c)
{
	if (c->fd[0] >= 0) {
		stdin_unwatch(a, c);
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
			if (!c->in_watched)
				c->in_watched = epoll_ctl(a->ep, EPOLL_CTL_ADD, c->fd[0], &ev) == 0;
			return;
		}
		stdin_close(a, c); /* EPIPE: the command closed its stdin; drop the rest */
		return;
	}
	if (c->fd[0] >= 0)
		stdin_unwatch(a, c);
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
		c->in_buf = xrealloc(c->in_buf, c->in_len + len);
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
	struct proto_buf *b = agent_frame(a, PROTO_OUTPUT, 0);
	uint8_t s = (uint8_t)stream;

	proto_put_str(b, PT_CMD_ID, c->id, strlen(c->id));
	proto_put_u8(b, PT_STREAM, s);
	proto_put_u64(b, PT_OFFSET, off);
	proto_put_bytes(b, PT_DATA, data, len);
	agent_send(a, b);
}

void agent_send_exit(struct agent *a, const struct agent_cmd *c)
{
	struct proto_buf *b = agent_frame(a, PROTO_EXIT, 0);

	proto_put_str(b, PT_CMD_ID, c->id, strlen(c->id));
	proto_put_i32(b, PT_STATUS, c->status);
	if (c->exec_err) {
		proto_put_i32(b, PT_ERRNO, c->exec_err);
		proto_put_str(b, PT_MESSAGE, c->exec_msg, strlen(c->exec_msg));
	}
	proto_put_u64(b, PT_TIME_MS, c->end_ms);
	agent_send(a, b);
}

/* EXIT goes out once the process is reaped and both output pipes are drained. */
static void maybe_finish(struct agent *a, struct agent_cmd *c)
{
	if (c->finished || !c->exited || c->fd[1] >= 0 || c->fd[2] >= 0)
		return;
	c->finished = true;
	c->end_ms = agent_now_ms();
	if (a->conn_fd >= 0)
		mark_seen(a, c, mono_ms());
	stdin_close(a, c);
	agent_send_exit(a, c);
	make_spare(a);
}

/*
 * Stop following an output stream: out of the epoll set first, then closed. A TTY
 * command's stream is a dup of its PTY master, which c->pty and stdin keep open: an epoll
 * registration lasts while any dup of its file does, so a plain close would leave it
 * reporting the master's EPOLLHUP (its command gone) in a busy loop.
 */
static void stream_close(struct agent *a, int *fd)
{
	if (*fd >= 0)
		epoll_ctl(a->ep, EPOLL_CTL_DEL, *fd, NULL);
	al_closep(fd);
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
		stream_close(a, fd);
	}
	maybe_finish(a, c);
}

static void report_close(struct agent *a, struct agent_cmd *c)
{
	if (c->report_fd >= 0)
		epoll_ctl(a->ep, EPOLL_CTL_DEL, c->report_fd, NULL);
	al_closep(&c->report_fd);
}

/* Read the records waiting in the report pipe; true if "done" came (*status set, and
 * *again: the shim waits for another command). */
static bool read_reports(struct agent *a, struct agent_cmd *c, int *status, bool *again)
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
			*again = r.done.again != 0;
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

/* Did the idle shim that was handed c take it (its ack, read here)? */
static bool shim_took_job(struct agent_cmd *c)
{
	char k = 0;

	return c->shim_ctl >= 0 && recv(c->shim_ctl, &k, 1, MSG_DONTWAIT) == 1 &&
	       k == AGENT_SHIM_ACK;
}

/* The idle shim handed c died before it took it (killed while idle; the command was in
 * its socket and went with it, the shim's ends of c's pipes too): c has not started, and
 * starts now on a new shim, with new pipes and the stdin its EXEC carried. 0, or -1 (then
 * the shim's death stands for the command's end, as before). */
static int restart(struct agent *a, struct agent_cmd *c)
{
	struct proto_msg m;
	int p[8], ctl = -1, pty = -1;
	pid_t pid;

	if (proto_decode(c->job, c->job_len, &m) < 0 || m.type != PROTO_EXEC ||
	    (m.tty ? make_pty(&m, p, &pty) : make_pipes(p)) < 0)
		return -1;
	pid = fork_shim(a, &m, p, &ctl);
	close_shim_ends(p);
	if (pid < 0) {
		close_agent_ends(p);
		al_closep(&pty);
		return -1;
	}
	stdin_close(a, c);
	stream_close(a, &c->fd[1]);
	stream_close(a, &c->fd[2]);
	report_close(a, c);
	al_closep(&c->shim_ctl);
	al_closep(&c->pty);
	c->pty = pty;
	cmd_attach(a, c, &m, pid, ctl, 1, p);
	free(c->job); /* m pointed into it: used up above */
	c->job = NULL;
	return 0;
}

void agent_cmd_report(struct agent *a, struct agent_cmd *c)
{
	bool again = false;
	int status;

	if (c->exited || !read_reports(a, c, &status, &again))
		return;
	if (c->job) { /* it took the command: its ack waits in the socket */
		shim_took_job(c);
		free(c->job);
		c->job = NULL;
	}
	if (again && c->shim_ctl >= 0) /* its shim waits for the next command */
		shim_park(a, c->pid, c->shim_ctl, c->shim_job);
	else if (c->shim_ctl >= 0)
		close(c->shim_ctl);
	c->shim_ctl = -1;
	ended(a, c, status);
}

/* The shim was reaped. Its "done" record, if it wrote one, says how the command ended;
 * without one (the shim itself was killed) its own status stands for the command's. */
void agent_cmd_reaped(struct agent *a, struct agent_cmd *c, int status)
{
	bool again;
	int done_status;

	if (read_reports(a, c, &done_status, &again))
		status = done_status;
	else if (c->job && !shim_took_job(c) && restart(a, c) == 0)
		return; /* an idle shim that died with the command unread: it runs on a new one */
	report_close(a, c);
	al_closep(&c->shim_ctl); /* gone: never parked */
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
			size_t n =
			    o->len - pos < AGENT_CHUNK ? (size_t)(o->len - pos) : AGENT_CHUNK;

			agent_send_output(a, c, s, pos, o->data + pos, n);
			pos += n;
		}
	}
	if (c->finished)
		agent_send_exit(a, c);
}
