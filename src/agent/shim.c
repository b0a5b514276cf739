/* SPDX-License-Identifier: MIT */
/*
 * The shim: the process between the agent and a command. A child subreaper, so that the
 * whole tree the command makes stays below it (setsid and new process groups included).
 * The agent's KILL arrives as SIGRTMIN carrying the signal: SIGKILL (and so every timeout)
 * kills the whole tree; other signals go to the command's process group.
 *
 * When the command has ended and left nothing running below the shim, the shim says so in
 * its "done" record and waits on its control socket for the agent's next command (an EXEC
 * frame, its stdin, stdout, stderr and report pipe beside it): a fork and an exit less per
 * command (~0.13 ms here). Each KILL names the command it is for (AGENT_KILL_VALUE): one
 * the agent sent before it learnt that the last command had ended is ignored. When the command left
 * processes running, or the agent lets it go (its socket closes), the shim ends the way the command
 * ended (exit code or signal); background processes keep running, below PID 1.
 */
#include "agent/agent.h"
#include "common/proc.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "common/fdpass.h"
#include "common/syscalls.h"
#include "jail/jail.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The shim's fds: the command's stdio at 0..2, its report pipe, the Landlock ruleset, and
 * the control socket on which the next command comes. */
enum { SHIM_FD_REPORT = 3, SHIM_FD_LANDLOCK = 4, SHIM_FD_CTL = 5, SHIM_NFDS = 6 };

static char *dup_field(const char *s, size_t len)
{
	char *p = xrealloc(NULL, len + 1);

	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

/* NULL-terminated heap copies of the EXEC's argv (env == false) or environment. */
static char **collect(const struct proto_msg *m, bool env)
{
	size_t n = env ? m->n_env : m->n_args, cursor = 0, len;
	char **v = xzalloc((n + 1) * sizeof(*v));
	const char *s;

	/* The iterators are O(1) a step (index access would rescan the frame each time). */
	for (size_t i = 0; i < n; i++) {
		s = env ? proto_msg_next_env(m, &cursor, &len)
			: proto_msg_next_arg(m, &cursor, &len);
		v[i] = dup_field(s ? s : "", s ? len : 0);
	}
	return v;
}

/* What the command's process needs, built by the shim before the clone and freed after it
 * (a shim serves many commands: its heap must not grow by each one's argv and environment). */
struct command {
	struct al_config cfg;
	struct jail_ctx ctx;
	char *cwd;
	bool tty; /* stdio (0..2) is the slave of a PTY: it becomes the controlling terminal */
};

static void command_build(struct command *c, struct agent *a, const struct proto_msg *m)
{
	memset(c, 0, sizeof(*c));
	c->cwd = m->cwd ? dup_field(m->cwd, m->cwd_len) : NULL;
	c->tty = m->tty;
	c->ctx.argv = collect(m, false);
	c->cfg.workdir = a->workdir;
	c->ctx.cfg = &c->cfg;
	c->ctx.stdio[0] = 0, c->ctx.stdio[1] = 1, c->ctx.stdio[2] = 2;
	c->ctx.envp = collect(m, true);
	c->ctx.uid = m->uid;
	c->ctx.cwd = c->cwd ? c->cwd : a->workdir;
	c->ctx.prepared = a->prepared;
	c->ctx.seccomp_held = a->seccomp_held;
	c->ctx.landlock_fd = a->landlock_fd >= 0 ? SHIM_FD_LANDLOCK : -1;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static void command_free(struct command *c)
{
	strv_free(c->ctx.argv);
	strv_free(c->ctx.envp);
	free(c->cwd);
}

/* In the shim's child (sharing its memory until exec): become the command. */
static int child_entry(void *arg)
{
	struct command *c = arg;

	al_sched_slice(0, 0); /* not our short slice (agent.c): the command runs as any task */
	/* unblocks its signals itself; a PTY's slave is stdin */
	jail_exec_workload(&c->ctx, c->tty ? 0 : -1, SHIM_FD_REPORT);
}

/* Keep only these open, renumbered to their SHIM_FD_* slots (the shim must not hold the
 * agent's pipes and sockets: another command would never see EOF on its stdin); a -1 leaves
 * its slot closed. The Landlock ruleset and the control socket are close-on-exec: each
 * command also closes everything above its stdio and report pipe before it runs anything
 * of its own (jail_exec_workload). Exits on failure: no command could run. */
static void adopt_fds(const int cmd_fds[4], int landlock, int ctl)
{
	const int keep[SHIM_NFDS] = {cmd_fds[0], cmd_fds[1], cmd_fds[2], cmd_fds[3], landlock, ctl};
	int tmp[SHIM_NFDS];

	for (int i = 0; i < SHIM_NFDS; i++) /* first above every slot: no dup below clobbers one */
		if (keep[i] >= 0 && (tmp[i] = fcntl(keep[i], F_DUPFD_CLOEXEC, 64)) < 0)
			_exit(AL_EXIT_SETUP);
	for (int i = 0; i < SHIM_NFDS; i++)
		if (keep[i] >= 0 ? dup3(tmp[i], i, i >= SHIM_FD_LANDLOCK ? O_CLOEXEC : 0) != i
				 : (close(i), 0))
			_exit(AL_EXIT_SETUP);
	if (sys_close_range(SHIM_NFDS, ~0U, 0) < 0)
		_exit(AL_EXIT_SETUP);
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

/* Start the command and wait until it is reaped, following the agent's signals meanwhile;
 * its wait status. The command's stdio is ours only until it has started. */
static int run_command(struct agent *a, const struct proto_msg *m, pid_t self, uint32_t n_job)
{
	struct command c;
	sigset_t all;
	siginfo_t si;
	pid_t cmd;
	int st = 0;

	sigfillset(&all);
	command_build(&c, a, m);
	cmd = al_clone_vfork(child_entry, &c);
	command_free(&c); /* it has exec'd (or exited) by now */
	/* The command's stdio must reach EOF with the command. */
	sys_close_range(0, SHIM_FD_REPORT - 1, 0);
	if (cmd < 0)
		_exit(AL_EXIT_SETUP); /* no "done": the agent takes our status for the command's */
	for (;;) {
		if (sigwaitinfo(&all, &si) < 0)
			continue;
		if (si.si_signo == SIGCHLD) {
			pid_t p;

			while ((p = waitpid(-1, &st, WNOHANG)) > 0)
				if (p == cmd)
					return st; /* st is the command's: reap the rest later */
		} else if (si.si_signo == SIGRTMIN) {
			int sig = si.si_value.sival_int & 0xff;

			/* A KILL the agent sent for an earlier command of ours, before it knew
			 * that one had ended: not for this one. */
			if (si.si_value.sival_int != AGENT_KILL_VALUE(n_job, sig))
				continue;
			if (sig == SIGKILL)
				kill_tree(self);
			else if (kill(-cmd, sig) < 0)
				kill(cmd, sig);
		} else if (si.si_signo != SIGPIPE) {
			kill(-cmd,
			     si.si_signo); /* a signal for the shim is meant for the command */
		}
	}
}

/* Nothing of the last command's tree is left below us (dead ones reaped on the way)? */
static bool tree_empty(void)
{
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG | __WALL);

		if (p > 0)
			continue;
		return p < 0 && errno == ECHILD;
	}
}

/* The agent's next command: an EXEC frame (into buf, decoded into m) with its four fds
 * beside it (stdin, stdout, stderr, report pipe). -1 when the agent lets us go (EOF), -2
 * when what came is not a command we can run (the agent counts it as ours all the same). */
static int next_job(uint8_t *buf, struct proto_msg *m, int fds[4])
{
	size_t got = 0;
	int flags = 0;
	ssize_t n = al_recv_with_fds(SHIM_FD_CTL, buf, AGENT_SHIM_JOB_MAX, 0, fds, 4, &got, &flags);

	if (n > 0 && got == 4 && !(flags & (MSG_TRUNC | MSG_CTRUNC)) &&
	    proto_decode(buf, (size_t)n, m) == 0 && m->type == PROTO_EXEC)
		return 0;
	for (size_t i = 0; i < got; i++)
		close(fds[i]);
	return n > 0 ? -2 : -1;
}

__attribute__((noreturn)) static void exit_like(int st)
{
	if (WIFSIGNALED(st)) {
		int sig = WTERMSIG(st);
		sigset_t one;

		signal(sig, SIG_DFL);
		sigemptyset(&one);
		sigaddset(&one, sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		raise(sig);
		_exit(128 + sig);
	}
	_exit(WEXITSTATUS(st));
}

void agent_shim_main(struct agent *a, const struct proto_msg *m, int stdio[3], int report_w,
		     int ctl)
{
	struct rlimit core = {0, 0};
	struct proto_msg job;
	uint32_t n_job = 1; /* which of our commands runs (AGENT_KILL_VALUE) */
	uint8_t *buf = NULL;
	sigset_t all;
	pid_t self = getpid();

	adopt_fds((int[]){stdio[0], stdio[1], stdio[2], report_w}, a->landlock_fd, ctl);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	setrlimit(RLIMIT_CORE, &core);
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		int st = run_command(a, m, self, n_job), fds[4];
		/* Another command only with room to take it and nothing of this one left. */
		bool again =
		    ctl >= 0 && (buf || (buf = malloc(AGENT_SHIM_JOB_MAX))) && tree_empty();
		struct shim_done rec = {0, st, again};

		(void)!write(SHIM_FD_REPORT, &rec, sizeof(rec));
		if (!again)
			exit_like(st);
		close(SHIM_FD_REPORT); /* nothing follows "done" */
		switch (next_job(buf, &job, fds)) {
		case 0:
			(void)!send(SHIM_FD_CTL, &(char){AGENT_SHIM_ACK}, 1,
				    MSG_DONTWAIT | MSG_NOSIGNAL);
			break;
		case -1:
			_exit(0); /* let go: no command of ours is running */
		default:
			_exit(AL_EXIT_SETUP); /* our exit stands for that command's: a set-up
						 failure */
		}
		adopt_fds(fds, a->landlock_fd >= 0 ? SHIM_FD_LANDLOCK : -1, SHIM_FD_CTL);
		m = &job;
		n_job++;
	}
}

int agent_shim_send(int ctl, const uint8_t *frame, size_t len, const int fds[4])
{
	return al_send_with_fds(ctl, frame, len, fds, 4, MSG_DONTWAIT) == (ssize_t)len ? 0 : -1;
}
