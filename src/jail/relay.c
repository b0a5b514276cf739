/* SPDX-License-Identifier: MIT */
#include "jail/relay.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void relay_init(struct relay *rl, const struct al_config *cfg, const struct al_io *io,
		struct al_result *res)
{
	memset(rl, 0, sizeof(*rl));
	rl->cfg = cfg;
	rl->io = io;
	rl->res = res;
	rl->sync_fd = rl->pidfd = rl->out_fd = rl->err_fd = rl->in_fd = rl->pty_fd = -1;
	rl->mnt_fd = -1;
	rl->stdin_done = io->stdin_fd < 0;
	rl->q[0].fd = io->on_output ? -1 : io->out_fd;
	rl->q[1].fd = io->on_output ? -1 : io->err_fd;
}

static void kill_sandbox(struct relay *rl, enum al_reason why)
{
	if (rl->killed || rl->init_reaped)
		return;
	rl->killed = true;
	rl->killed_for = why;
	/* PID 1's death takes the whole pid namespace with it. */
	sys_pidfd_send_signal(rl->pidfd, SIGKILL);
	jail_cgroup_kill(rl->cg);
}

static void deliver(struct relay *rl, enum al_stream s, const char *buf, size_t n)
{
	uint64_t *count = s == AL_STDOUT ? &rl->res->stdout_bytes : &rl->res->stderr_bytes;
	bool *trunc = s == AL_STDOUT ? &rl->res->stdout_truncated : &rl->res->stderr_truncated;
	uint64_t limit = rl->cfg->output_limit;
	size_t keep = n;

	if (limit) {
		uint64_t room = *count >= limit ? 0 : limit - *count;
		if (keep > room) {
			keep = (size_t)room;
			*trunc = true;
		}
	}
	*count += n;
	if (!keep)
		return;
	if (rl->q[s - 1].fd >= 0) {
		/* Queue it; the loop writes when the caller's fd is writable. */
		typeof(rl->q[0]) *q = &rl->q[s - 1];

		if (q->off == q->len)
			q->off = q->len = 0;
		q->buf = xrealloc(q->buf, q->len + keep);
		memcpy(q->buf + q->len, buf, keep);
		q->len += keep;
	} else if (rl->io->on_output) {
		rl->io->on_output(rl->io->ctx, s, buf, keep);
	}
}

/* Write queued output; a pipe accepts PIPE_BUF bytes without blocking once it polls writable. */
static void flush_queue(struct relay *rl, int i)
{
	typeof(rl->q[0]) *q = &rl->q[i];
	size_t n = q->len - q->off < PIPE_BUF ? q->len - q->off : PIPE_BUF;
	ssize_t w = write(q->fd, q->buf + q->off, n);

	if (w > 0) {
		q->off += (size_t)w;
	} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
		q->off = q->len; /* the reader is gone (EPIPE): drop what is left */
		q->fd = -1;
	}
}

/* Drain what is readable on an output fd; closes it at EOF. */
static void pump_output(struct relay *rl, int *fd, enum al_stream s)
{
	char buf[65536];
	ssize_t n = read(*fd, buf, sizeof(buf));

	if (n > 0) {
		deliver(rl, s, buf, (size_t)n);
		return;
	}
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	al_closep(fd); /* EOF, or EIO on a PTY whose last slave is gone */
}

static void stop_stdin(struct relay *rl)
{
	rl->stdin_done = true;
	rl->in_len = rl->in_off = 0;
	if (rl->pty_fd < 0)
		al_closep(&rl->in_fd);
}

static void pump_stdin_read(struct relay *rl)
{
	ssize_t n = read(rl->io->stdin_fd, rl->inbuf, sizeof(rl->inbuf));

	if (n > 0) {
		rl->in_len = (size_t)n;
		rl->in_off = 0;
	} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
		if (rl->pty_fd >= 0) {
			/* End of input on a terminal: the line discipline's EOF character. */
			rl->inbuf[0] = 4;
			rl->in_len = 1;
			rl->in_off = 0;
			rl->stdin_done = true;
			return;
		}
		stop_stdin(rl);
	}
}

static void pump_stdin_write(struct relay *rl)
{
	int fd = rl->pty_fd >= 0 ? rl->pty_fd : rl->in_fd;
	ssize_t n = write(fd, rl->inbuf + rl->in_off, rl->in_len - rl->in_off);

	if (n > 0) {
		rl->in_off += (size_t)n;
		if (rl->in_off == rl->in_len) {
			rl->in_len = rl->in_off = 0;
			if (rl->stdin_done && rl->pty_fd < 0)
				stop_stdin(rl);
		}
	} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
		stop_stdin(rl); /* the sandbox closed its stdin: drop the rest */
	}
}

static void handle_msg(struct relay *rl)
{
	struct al_error *err = NULL;
	struct jail_msg m;
	int fd = -1, r = jail_msg_recv(rl->sync_fd, &m, &fd);

	if (r <= 0) {
		al_closep(&rl->sync_fd);
		if (fd >= 0)
			close(fd);
		return;
	}
	switch (m.type) {
	case JMSG_IDMAP: {
		struct jail_msg go = {.type = JMSG_GO};

		if (jail_write_idmaps(rl->pid, rl->host_base, &err) < 0) {
			rl->setup_error = xstrdup(err->msg);
			al_error_free(err);
			kill_sandbox(rl, AL_REASON_SETUP_FAILED);
			break;
		}
		jail_msg_send(rl->sync_fd, &go, -1);
		if (rl->mnt_fd < 0) { /* its pid is ours until reaped: no other process's */
			char path[64];

			snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)rl->pid);
			rl->mnt_fd = open(path, O_RDONLY | O_CLOEXEC);
		}
		break;
	}
	case JMSG_ERROR:
		free(rl->setup_error);
		rl->setup_error = xstrdup(m.text);
		rl->setup_code = m.code;
		rl->child_failed = true;
		break;
	case JMSG_PTY:
		if (fd >= 0 && rl->pty_fd < 0) {
			rl->pty_fd = fd;
			fcntl(fd, F_SETFL, O_NONBLOCK);
			fd = -1;
		}
		break;
	case JMSG_EXIT:
		rl->got_exit = true;
		rl->exit_msg = m;
		break;
	default:
		break;
	}
	if (fd >= 0)
		close(fd);
}

/* The gateway answered: once the link is made the workload may start (JMSG_LINK). */
static void handle_gateway(struct relay *rl)
{
	struct al_error *err = NULL;
	int r = gw_client_step(rl->gw, &err);

	if (r == 0 && gw_client_ca_pem(rl->gw) && !rl->sandbox_has_ca)
		r = al_error_msg(&err, EPROTO,
				 "the network policy has per-request rules but the "
				 "sandbox was built without their CA");
	if (r == 0)
		return;
	if (r > 0) {
		jail_msg_send(rl->sync_fd, &(struct jail_msg){.type = JMSG_LINK}, -1);
	} else {
		/* A child that failed first took the link's namespace with it: its reason is
		 * the one to tell, not the gateway's "enter the sandbox netns". */
		rl->policy_refused = gw_client_policy_refused(rl->gw);
		if (!rl->child_failed) {
			if (!rl->policy_refused && rl->sync_fd >= 0)
				jail_take_child_error(rl->sync_fd, &err);
			free(rl->setup_error);
			rl->setup_error = xstrdup(err->msg);
			rl->setup_code = err->code;
		}
		al_error_free(err);
		kill_sandbox(rl, AL_REASON_SETUP_FAILED);
	}
	rl->gw = NULL; /* linked, or failed: nothing more to follow */
}

static void handle_signal(struct relay *rl)
{
	struct signalfd_siginfo si;

	while (read(rl->io->signal_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGWINCH) {
			struct winsize ws;
			if (rl->pty_fd >= 0 && rl->io->tty_fd >= 0 &&
			    ioctl(rl->io->tty_fd, TIOCGWINSZ, &ws) == 0)
				ioctl(rl->pty_fd, TIOCSWINSZ, &ws);
			continue;
		}
		if (!rl->killed)
			rl->res->interrupt_signal = (int)si.ssi_signo;
		kill_sandbox(rl, AL_REASON_INTERRUPTED);
	}
}

static void reap_init(struct relay *rl)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PIDFD, (id_t)rl->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
		return;
	rl->init_reaped = true;
	rl->init_status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
}

enum {
	PF_SYNC,
	PF_PID,
	PF_OUT,
	PF_ERR,
	PF_PTY,
	PF_IN_R,
	PF_IN_W,
	PF_SIG,
	PF_QOUT,
	PF_QERR,
	PF_GW,
	PF_N
};

static bool queued(const struct relay *rl)
{
	return (rl->q[0].fd >= 0 && rl->q[0].off < rl->q[0].len) ||
	       (rl->q[1].fd >= 0 && rl->q[1].off < rl->q[1].len);
}

void relay_loop(struct relay *rl)
{
	struct pollfd p[PF_N];
	int i;

	for (;;) {
		bool outputs_open = rl->out_fd >= 0 || rl->err_fd >= 0 || rl->pty_fd >= 0;
		int timeout = -1;

		/* Done when the sandbox is gone, its output drained and delivered -- or, if the
		 * caller stops reading, when it interrupts us. */
		if (rl->init_reaped && !outputs_open && rl->sync_fd < 0 &&
		    (!queued(rl) || rl->killed_for == AL_REASON_INTERRUPTED))
			break;
		for (i = 0; i < PF_N; i++)
			p[i] = (struct pollfd){.fd = -1};
		p[PF_SYNC] = (struct pollfd){.fd = rl->sync_fd, .events = POLLIN};
		p[PF_PID].fd = rl->init_reaped ? -1 : rl->pidfd;
		p[PF_PID].events = POLLIN;
		p[PF_OUT] = (struct pollfd){.fd = rl->out_fd, .events = POLLIN};
		p[PF_ERR] = (struct pollfd){.fd = rl->err_fd, .events = POLLIN};
		p[PF_PTY] = (struct pollfd){.fd = rl->pty_fd, .events = POLLIN};
		if (!rl->init_reaped && !rl->stdin_done && rl->in_len == 0 &&
		    (rl->in_fd >= 0 || rl->pty_fd >= 0))
			p[PF_IN_R] = (struct pollfd){.fd = rl->io->stdin_fd, .events = POLLIN};
		if (rl->in_len)
			p[PF_IN_W] = (struct pollfd){.fd = rl->pty_fd >= 0 ? rl->pty_fd : rl->in_fd,
						     .events = POLLOUT};
		p[PF_SIG] = (struct pollfd){.fd = rl->io->signal_fd, .events = POLLIN};
		if (rl->gw)
			p[PF_GW] = (struct pollfd){.fd = gw_client_fd(rl->gw), .events = POLLIN};
		for (i = 0; i < 2; i++)
			if (rl->q[i].fd >= 0 && rl->q[i].off < rl->q[i].len)
				p[PF_QOUT + i] =
				    (struct pollfd){.fd = rl->q[i].fd, .events = POLLOUT};
		if (rl->deadline_ms > 0 && !rl->killed) {
			double left = rl->deadline_ms - jail_now_ms();
			if (left <= 0) {
				kill_sandbox(rl, AL_REASON_TIMEOUT);
				continue;
			}
			timeout = (int)ceil(left);
		}
		if (poll(p, PF_N, timeout) < 0) {
			if (errno == EINTR)
				continue;
			kill_sandbox(rl, AL_REASON_SETUP_FAILED);
			break;
		}
		if (p[PF_SYNC].revents)
			handle_msg(rl);
		if (p[PF_OUT].revents)
			pump_output(rl, &rl->out_fd, AL_STDOUT);
		if (p[PF_ERR].revents)
			pump_output(rl, &rl->err_fd, AL_STDERR);
		if (p[PF_PTY].revents && rl->pty_fd >= 0) {
			pump_output(rl, &rl->pty_fd, AL_STDOUT);
			if (rl->pty_fd < 0)
				rl->stdin_done = true;
		}
		if (p[PF_IN_R].revents)
			pump_stdin_read(rl);
		if (p[PF_IN_W].revents)
			pump_stdin_write(rl);
		if (p[PF_SIG].revents)
			handle_signal(rl);
		if (p[PF_GW].revents && rl->gw)
			handle_gateway(rl);
		for (i = 0; i < 2; i++)
			if (p[PF_QOUT + i].revents && rl->q[i].fd >= 0)
				flush_queue(rl, i);
		if (p[PF_PID].revents)
			reap_init(rl);
	}
}

static void describe_exec_failure(struct relay *rl, int e)
{
	struct al_result *res = rl->res;
	const char *cmd = rl->cfg->argv[0];

	res->reason = AL_REASON_EXEC_FAILED;
	res->exit_code = e == ENOENT ? AL_EXIT_NOTFOUND : AL_EXIT_NOEXEC;
	res->error = xasprintf("cannot execute '%s': %s", cmd,
			       e == ENOENT ? "command not found" : strerror(e));
}

void relay_finish(struct relay *rl)
{
	struct al_result *res = rl->res;
	int st = rl->exit_msg.status, e = rl->exit_msg.exec_errno;

	if (rl->killed && rl->killed_for != AL_REASON_SETUP_FAILED) {
		res->reason = rl->killed_for;
		res->signal = SIGKILL;
	} else if (rl->setup_error) {
		res->reason = AL_REASON_SETUP_FAILED;
		res->error = TAKE_PTR(rl->setup_error);
	} else if (rl->got_exit && e > 0) {
		describe_exec_failure(rl, e);
	} else if (rl->got_exit && e < 0) {
		res->reason = AL_REASON_SETUP_FAILED;
		res->error = xasprintf("securing the workload: %s",
				       rl->exit_msg.text[0] ? rl->exit_msg.text : strerror(-e));
	} else if (rl->got_exit && WIFEXITED(st)) {
		res->reason = AL_REASON_EXITED;
		res->exit_code = WEXITSTATUS(st);
		if (rl->oom_kills && res->exit_code == 128 + SIGKILL)
			res->reason = AL_REASON_OOM; /* a shell reporting its OOM-killed child */
	} else if (rl->got_exit && WIFSIGNALED(st)) {
		res->signal = WTERMSIG(st);
		res->reason = res->signal == SIGSYS			  ? AL_REASON_SECCOMP
			      : (res->signal == SIGKILL && rl->oom_kills) ? AL_REASON_OOM
									  : AL_REASON_SIGNALED;
	} else if (rl->oom_kills) {
		res->reason = AL_REASON_OOM;
		res->signal = SIGKILL;
	} else {
		res->reason = AL_REASON_SETUP_FAILED;
		res->error =
		    xasprintf("the sandbox's init ended unexpectedly (status %d)", rl->init_status);
	}
	free(rl->setup_error);
	rl->setup_error = NULL;
	al_closep(&rl->sync_fd);
	al_closep(&rl->out_fd);
	al_closep(&rl->err_fd);
	al_closep(&rl->in_fd);
	al_closep(&rl->pty_fd);
	al_closep(&rl->mnt_fd); /* unless the caller took it */
	free(rl->q[0].buf);
	free(rl->q[1].buf);
}
