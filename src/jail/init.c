/* SPDX-License-Identifier: MIT */
/*
 * PID 1 of a one-shot sandbox. It starts the workload, reaps every orphan,
 * and when the workload ends reports its wait status to the parent and
 * exits -- which makes the kernel kill whatever else is left in the pid
 * namespace (double-forked daemons, setsid'd children, anything).
 *
 * If the parent dies, the sync socket reads EOF and PID 1 exits: a sandbox
 * never outlives the airlock process that owns it.
 */
#include "jail/jail.h"
#include "common/proc.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <stdio.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

/* Open a PTY in the sandbox's own devpts; returns the master, *slave gets the peer. */
static int open_pty(const struct winsize *ws, int *slave, struct al_error **err)
{
	_cleanup_close_ int master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	int unlock = 0;

	if (master < 0)
		return al_error_set(err, errno, "open /dev/pts/ptmx");
	if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
		return al_error_set(err, errno, "unlockpt");
	*slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY);
	if (*slave < 0)
		return al_error_set(err, errno, "TIOCGPTPEER");
	if (ws->ws_row && ioctl(master, TIOCSWINSZ, ws) < 0)
		return al_error_set(err, errno, "TIOCSWINSZ");
	return TAKE_FD(master);
}

/* An OCI container's rlimit, as far as it lowers ours: never above the hard limit the
 * sandbox already has (userns.c), which a sandbox could not raise anyway. */
static void lower_rlimit(const struct jail_rlimit *l)
{
	struct rlimit cur;

	if (getrlimit(l->resource, &cur) < 0)
		return;
	if (l->hard < cur.rlim_max)
		cur.rlim_max = l->hard;
	cur.rlim_cur = l->soft < cur.rlim_max ? l->soft : cur.rlim_max;
	setrlimit(l->resource, &cur);
}

void jail_exec_workload(const struct jail_ctx *ctx, int tty_slave, int exec_pipe)
{
	struct al_error *err = NULL;
	struct rlimit core = {0, 0};
	sigset_t none;
	int i, e, ll_fd = ctx->prepared ? ctx->landlock_fd : -1;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (!ctx->prepared)
		jail_reset_signals(); /* exec resets caught signals, not ignored ones */
	setsid();
	if (tty_slave >= 0) {
		ioctl(tty_slave, TIOCSCTTY, 0);
		for (i = 0; i < 3; i++)
			dup2(tty_slave, i);
	} else {
		for (i = 0; i < 3; i++)
			dup2(ctx->stdio[i], i);
	}
	/* Only stdio and the exec-error pipe (close-on-exec) survive, and until Landlock is
	 * applied a ruleset built ahead. That one is shared with every later command: the
	 * workload must never hold it (landlock_add_rule on it would widen the next
	 * command's rights), so it is closed right after use and close-on-exec until then,
	 * whatever flags it arrived with. */
	if (exec_pipe == 3 ? fcntl(3, F_SETFD, FD_CLOEXEC) < 0 : dup3(exec_pipe, 3, O_CLOEXEC) < 0)
		_exit(AL_EXIT_SETUP);
	exec_pipe = 3;
	if (ll_fd >= 0 &&
	    (ll_fd == 4 ? fcntl(4, F_SETFD, FD_CLOEXEC) < 0 : dup3(ll_fd, 4, O_CLOEXEC) < 0))
		_exit(AL_EXIT_SETUP);
	ll_fd = ll_fd >= 0 ? 4 : -1;
	sys_close_range(ll_fd >= 0 ? 5 : 4, ~0U, 0);
	setrlimit(RLIMIT_CORE, &core);
	for (size_t k = 0; ctx->oci && k < ctx->oci->n_rlimits; k++)
		lower_rlimit(&ctx->oci->rlimits[k]);
	umask(022);
	if (ctx->cwd && chdir(ctx->cwd) < 0) {
		struct jail_exec_report rep = {.err = errno};

		snprintf(rep.text, sizeof(rep.text), "working directory '%s': %s", ctx->cwd,
			 strerror(errno));
		(void)!write(exec_pipe, &rep, sizeof(rep));
		if (ctx->oci)
			dprintf(2, "airlock-oci: %s\n", rep.text);
		_exit(AL_EXIT_NOEXEC);
	}

	if (jail_drop_privileges(ctx, &err) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    (ctx->prepared ? jail_landlock_restrict(ll_fd, &err) : jail_landlock_apply(ctx, &err)) <
		0 ||
	    (ll_fd >= 0 && close(ll_fd) < 0) ||
	    (!ctx->seccomp_held && jail_seccomp_install(&err) < 0) ||
	    (ctx->oci && jail_seccomp_install_extra(ctx->oci->seccomp, &err) < 0)) {
		/* A set-up failure, not the command's: reported as a negative errno. */
		struct jail_exec_report rep = {.err = -(err ? err->code : errno)};

		if (err && err->msg)
			strncpy(rep.text, err->msg, sizeof(rep.text) - 1);
		(void)!write(exec_pipe, &rep, sizeof(rep));
		_exit(AL_EXIT_SETUP);
	}
	environ = ctx->envp;
	jail_execvp(ctx->argv ? ctx->argv : ctx->cfg->argv);
	e = errno;
	/* An OCI process says why on its own stderr, as runc and crun do (an engine shows it). */
	if (ctx->oci)
		dprintf(2, "airlock-oci: exec \"%s\": %s\n",
			(ctx->argv ? ctx->argv : ctx->cfg->argv)[0], strerror(e));
	{
		struct jail_exec_report rep = {.err = e};
		(void)!write(exec_pipe, &rep, sizeof(rep));
	}
	_exit(e == ENOENT ? AL_EXIT_NOTFOUND : AL_EXIT_NOEXEC);
}

/* Run file; a file the kernel cannot run (no #! line) runs under /bin/sh, as POSIX asks of
 * execvp. Returns only on failure, with errno from the first attempt. */
static void exec_file(const char *file, char *const argv[])
{
	size_t n = 0;

	execve(file, argv, environ);
	if (errno != ENOEXEC)
		return;
	while (n <= JAIL_SH_MAX_ARGS && argv[n])
		n++;
	if (n <= JAIL_SH_MAX_ARGS) { /* on the stack: this may run in a vfork child */
		const char *sh[JAIL_SH_MAX_ARGS + 2];

		sh[0] = "/bin/sh";
		sh[1] = file;
		for (size_t i = 1; i <= n; i++)
			sh[i + 1] = argv[i]; /* argv[n] is the NULL */
		execve(sh[0], (char *const *)sh, environ);
	}
	errno = ENOEXEC;
}

void jail_execvp(char *const argv[])
{
	const char *file = argv[0], *path = getenv("PATH"), *p;
	bool eacces = false;
	char buf[PATH_MAX];

	if (!file || !*file) {
		errno = ENOENT;
		return;
	}
	if (strchr(file, '/')) {
		exec_file(file, argv);
		return;
	}
	for (p = path ? path : "/usr/local/bin:/bin:/usr/bin";; p++) {
		const char *end = strchrnul(p, ':');
		size_t dl = (size_t)(end - p);

		if (dl + 1 + strlen(file) < sizeof(buf)) {
			memcpy(buf, p, dl);
			buf[dl] = '/';
			strcpy(buf + dl + (dl > 0),
			       file); /* an empty entry is the working directory */
			exec_file(buf, argv);
			switch (errno) {
			case EACCES:
				eacces = true;
				break;
			case ENOENT:
			case ENOTDIR:
			case ENAMETOOLONG:
			case ELOOP:
			case ESTALE:
			case ENODEV:
			case ETIMEDOUT:
				break;
			default:
				return; /* it exists and cannot run: say why */
			}
		}
		if (!*end)
			break;
		p = end;
	}
	errno = eacces ? EACCES : ENOENT;
}

void jail_reset_signals(void)
{
	/* The kernel's sigaction: glibc's wrappers refuse 32 and 33 (its own), which a caller
	 * may still have ignored, and exec would pass that on. */
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} dfl = {SIG_DFL, 0, NULL, 0};

	for (int i = 1; i <= 64; i++)
		if (i != SIGKILL && i != SIGSTOP)
			syscall(SYS_rt_sigaction, i, &dfl, NULL, sizeof(dfl.mask));
}

struct workload_args {
	const struct jail_ctx *ctx;
	int slave;
	int *pipefd;
};

static int workload_entry(void *arg)
{
	struct workload_args *w = arg;

	close(w->pipefd[0]); /* our own fd table (no CLONE_FILES) */
	jail_exec_workload(w->ctx, w->slave, w->pipefd[1]);
}

/* The signals an OCI container's PID 1 passes on to the workload (`kill ID SIG`); the
 * kernel would drop them otherwise (PID 1 of a pid namespace has no default actions). */
static const int oci_forwarded[] = {SIGHUP,  SIGINT,   SIGQUIT, SIGTERM, SIGUSR1,
				    SIGUSR2, SIGWINCH, SIGCONT, SIGALRM};

/*
 * OCI: tell the starter (`airlock-oci create`) we are set up, then wait at the start gate
 * until `airlock-oci start` opens the FIFO for reading. From then on PID 1 answers to no
 * one: its starter has exited and the engine's shim (a subreaper) reaps it.
 */
static int oci_gate(struct jail_ctx *ctx, struct al_error **err)
{
	struct jail_msg m = {.type = JMSG_READY};
	char path[64];
	int fd;

	if (jail_msg_send(ctx->sync_fd, &m, -1) < 0)
		return al_error_set(err, errno, "sending READY");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", ctx->oci->gate_fd);
	do
		fd = open(path, O_WRONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return al_error_set(err, errno, "open the start gate");
	(void)!write(fd, "0", 1);
	close(fd);
	close(ctx->oci->gate_fd);
	close(ctx->sync_fd);
	ctx->sync_fd = -1;
	return 0;
}

/* OCI: PID 1's exit status is the container's (the shim reaps PID 1): the workload's
 * code, or 128 + the signal that killed it (what engines report either way). */
__attribute__((noreturn)) static void oci_exit(int status)
{
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

void jail_init_main(struct jail_ctx *ctx)
{
	struct al_error *err = NULL;
	struct jail_msg m = {.type = JMSG_EXIT};
	int pipefd[2], slave = -1, master = -1, sfd, status = 0;
	struct pollfd pfd[2];
	sigset_t mask;
	pid_t wl;

	if (ctx->cfg->tty) {
		struct jail_msg pm = {.type = JMSG_PTY};

		master = open_pty(&ctx->winsz, &slave, &err);
		if (master < 0)
			jail_child_fail(ctx->sync_fd, err);
		if (jail_msg_send(ctx->sync_fd, &pm, master) < 0) {
			al_error_set(&err, errno, "sending the PTY");
			jail_child_fail(ctx->sync_fd, err);
		}
		close(master);
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	for (size_t i = 0; ctx->oci && i < ARRAY_SIZE(oci_forwarded); i++)
		sigaddset(&mask, oci_forwarded[i]);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
		al_error_set(&err, errno, "signalfd/pipe in init");
		jail_child_fail(ctx->sync_fd, err);
	}
	/* The gateway, started alongside the sandbox, makes and configures eth0 from outside
	 * while we were set up: the workload starts once it is there. */
	if (jail_wait_link(ctx, &err) < 0)
		jail_child_fail(ctx->sync_fd, err);
	if (ctx->oci && oci_gate(ctx, &err) < 0)
		jail_child_fail(ctx->sync_fd, err);
	wl = al_clone_vfork(workload_entry, &(struct workload_args){ctx, slave, pipefd});
	if (wl < 0) {
		al_error_set(&err, errno, "start the workload");
		jail_child_fail(ctx->sync_fd, err);
	}
	close(pipefd[1]);
	if (slave >= 0)
		close(slave);
	for (int i = 0; i < 3; i++)
		if (ctx->stdio[i] >= 0)
			close(ctx->stdio[i]);

	pfd[0] = (struct pollfd){.fd = sfd, .events = POLLIN};
	pfd[1] = (struct pollfd){.fd = ctx->sync_fd, .events = POLLIN};
	for (;;) {
		struct signalfd_siginfo si;
		pid_t p;
		int st;

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			_exit(1);
		if (pfd[1].revents)
			_exit(1); /* the parent is gone (or misbehaves): end the sandbox */
		while (read(sfd, &si, sizeof(si)) > 0)
			if (si.ssi_signo != SIGCHLD && wl > 0)
				kill(wl, (int)si.ssi_signo);
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			if (p == wl)
				status = st, wl = 0;
		if (wl == 0)
			break;
	}
	if (ctx->oci)
		oci_exit(status);
	{
		struct jail_exec_report rep = {0};
		if (read(pipefd[0], &rep, sizeof(rep)) != sizeof(rep))
			rep.err = 0;
		m.exec_errno = rep.err;
		memcpy(m.text, rep.text, sizeof(rep.text));
	}
	m.status = status;
	jail_msg_send(ctx->sync_fd, &m, -1);
	_exit(0);
}
