/* SPDX-License-Identifier: MIT */
/*
 * airlock-agent: PID 1 of a daemon sandbox (docs/agent-protocol.md).
 *
 * It accepts the daemon on the listening socket it inherited as fd 3 (bound
 * at a host path the sandbox cannot see), starts commands on request --
 * each one dropped to the sandbox user with no capabilities, no_new_privs,
 * Landlock and seccomp, exactly like `airlock run` (jail_exec_workload) --
 * streams their output, keeps it for replays, and reaps every orphan.
 *
 * The daemon may go away and come back (a restart, a SIGKILL): the agent
 * keeps running its commands and buffering their output, and greets the new
 * connection with HELLO listing every command it knows. A new connection
 * replaces the old one; only the daemon can reach the socket.
 */
#include "agent/agent.h"
#include "common/proc.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "jail/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t agent_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void drop_conn(struct agent *a)
{
	if (a->conn_fd < 0)
		return;
	epoll_ctl(a->ep, EPOLL_CTL_DEL, a->conn_fd, NULL);
	close(a->conn_fd);
	a->conn_fd = -1;
	a->rlen = 0;
	agent_cmds_connection(a, false); /* what it had not read, the next one will ask for */
}

/* A frame buffer grown past this (a large replay chunk) is given back after its frame. */
#define AGENT_OUT_KEEP (64u * 1024)

struct proto_buf *agent_frame(struct agent *a, enum proto_type type, uint32_t id)
{
	proto_begin(&a->out, type, id);
	return &a->out;
}

void agent_send(struct agent *a, struct proto_buf *b)
{
	size_t off = 0;

	if (proto_finish(b) == 0 && a->conn_fd >= 0) {
		while (off < b->len) {
			ssize_t n = send(a->conn_fd, b->data + off, b->len - off, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				drop_conn(a); /* the daemon is gone; it will reconnect and replay */
				break;
			}
			off += (size_t)n;
		}
	}
	if (b->cap > AGENT_OUT_KEEP)
		proto_buf_free(b);
}

void agent_send_error(struct agent *a, uint32_t id, int err, const char *msg)
{
	struct proto_buf *b = agent_frame(a, PROTO_ERROR, id);

	proto_put_i32(b, PT_ERRNO, err);
	proto_put_str(b, PT_MESSAGE, msg, strlen(msg));
	agent_send(a, b);
}

static void send_hello(struct agent *a)
{
	struct proto_buf *b = agent_frame(a, PROTO_HELLO, 0);

	proto_put_u32(b, PT_VERSION, PROTO_VERSION);
	for (size_t i = 0; i < a->n_cmds; i++) {
		const struct agent_cmd *c = a->cmds[i];
		size_t mark = proto_nest_begin(b, PT_COMMAND);

		proto_put_str(b, PT_CMD_ID, c->id, strlen(c->id));
		proto_put_u32(b, PT_PID, (uint32_t)c->pid);
		if (c->finished)
			proto_put_i32(b, PT_STATUS, c->status);
		proto_put_u64(b, PT_OUT_BYTES, c->buf[0].total);
		proto_put_u64(b, PT_ERR_BYTES, c->buf[1].total);
		proto_put_u64(b, PT_TIME_MS, c->start_ms);
		proto_nest_end(b, mark);
	}
	agent_send(a, b);
}

static void handle_frame(struct agent *a, const uint8_t *frame, size_t len)
{
	struct proto_msg m;
	struct agent_cmd *c = NULL;
	int r = proto_decode(frame, len, &m);

	if (r < 0) {
		agent_send_error(a, 0, -r, "malformed frame");
		drop_conn(a);
		return;
	}
	if (m.cmd_id)
		c = agent_cmd_find(a, m.cmd_id, m.cmd_id_len);
	switch (m.type) {
	case PROTO_EXEC:
		agent_cmd_exec(a, &m, frame, len);
		return;
	case PROTO_PING:
		agent_send(a, agent_frame(a, PROTO_PONG, m.id));
		return;
	default:
		break;
	}
	if (!c) {
		agent_send_error(a, m.id, ENOENT, "no such command");
		return;
	}
	switch (m.type) {
	case PROTO_STDIN:
	case PROTO_STDIN_CLOSE:
		r = agent_cmd_stdin(a, c, m.data, m.data_len, m.type == PROTO_STDIN_CLOSE);
		if (r < 0) {
			agent_send_error(a, m.id, -r,
					 r == -EPIPE ? "stdin is closed" : "stdin buffer is full");
			return;
		}
		break;
	case PROTO_KILL:
		/* To the command's shim (cmd.c), which knows its whole tree. */
		if (!c->exited &&
		    sigqueue(c->pid, SIGRTMIN,
			     (union sigval){.sival_int = AGENT_KILL_VALUE(c->shim_job, m.signal)}) <
			0) {
			agent_send_error(a, m.id, errno, "kill");
			return;
		}
		break;
	case PROTO_REPLAY:
		agent_replay(a, c, m.stream, m.offset);
		break;
	case PROTO_RESIZE:
		if (agent_cmd_resize(c, m.rows, m.cols) < 0) {
			agent_send_error(a, m.id, errno, "TIOCSWINSZ");
			return;
		}
		break;
	default:
		agent_send_error(a, m.id, EPROTO, "unexpected message type");
		return;
	}
	agent_send(a, agent_frame(a, PROTO_OK, m.id));
}

static void read_conn(struct agent *a)
{
	ssize_t n;
	size_t off = 0;

	if (a->rcap - a->rlen < 65536) {
		a->rcap = a->rcap ? a->rcap * 2 : 131072;
		if (a->rcap > 2 * PROTO_MAX_FRAME)
			a->rcap = 2 * PROTO_MAX_FRAME;
		a->rbuf = xrealloc(a->rbuf, a->rcap);
	}
	n = recv(a->conn_fd, a->rbuf + a->rlen, a->rcap - a->rlen, 0);
	if (n <= 0) {
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			return;
		drop_conn(a);
		return;
	}
	a->rlen += (size_t)n;
	while (a->conn_fd >= 0) {
		long need = proto_frame_size(a->rbuf + off, a->rlen - off);

		if (need < 0) {
			drop_conn(a);
			return;
		}
		if (need == 0 || (size_t)need > a->rlen - off)
			break;
		handle_frame(a, a->rbuf + off, (size_t)need);
		off += (size_t)need;
	}
	if (a->conn_fd >= 0) {
		memmove(a->rbuf, a->rbuf + off, a->rlen - off);
		a->rlen -= off;
	}
}

static void accept_conn(struct agent *a)
{
	int fd = accept4(AGENT_LISTEN_FD, NULL, NULL, SOCK_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &a->w_conn};

	if (fd < 0)
		return;
	drop_conn(a); /* a new daemon replaces the old connection */
	a->conn_fd = fd;
	epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev);
	agent_cmds_connection(a, true);
	send_hello(a);
}

static void reap(struct agent *a)
{
	struct signalfd_siginfo si;
	int status;
	pid_t pid;

	while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si))
		;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		size_t i;

		for (i = 0; i < a->n_cmds; i++)
			if (a->cmds[i]->pid == pid && !a->cmds[i]->exited) {
				agent_cmd_reaped(a, a->cmds[i], status);
				break;
			}
		if (i == a->n_cmds)
			agent_shim_reaped(a, pid); /* an idle shim, or a command's orphan */
	}
}

/*
 * What every command would otherwise do for itself before exec, done once (a command
 * then costs about 170 fewer system calls): nothing ignored that exec would pass on,
 * the bounding set cut to what a root command may keep, the Landlock ruleset built.
 * On failure each command does it all itself, and reports what failed.
 *
 * The workload's seccomp filter goes on the agent itself, last: the agent never needs
 * what it denies (mounts, namespaces, ptrace, ...) once PID 1's set-up is done, and
 * every command inherits the filter through fork and exec instead of having the kernel
 * check and compile its own copy (~0.12 ms a command). If that fails, commands install
 * it themselves.
 */
static const char *const ll_paths[] = {"/workspace", "/tmp", JAIL_HOME, "/dev/shm", NULL};

/* Whether the areas are the inodes the ruleset names; with `keep`, they are recorded. */
static bool ll_same(struct agent *a, bool keep)
{
	bool same = true;

	for (size_t i = 0; i < ARRAY_SIZE(a->ll_areas); i++) {
		const char *p = i < 4 ? ll_paths[i] : a->workdir;
		struct stat st = {0};

		if (stat(p, &st) < 0)
			memset(&st, 0, sizeof(st));
		if (st.st_dev != a->ll_areas[i].dev || st.st_ino != a->ll_areas[i].ino)
			same = false;
		if (keep) {
			a->ll_areas[i].dev = st.st_dev;
			a->ll_areas[i].ino = st.st_ino;
		}
	}
	return same;
}

void agent_landlock_fresh(struct agent *a)
{
	struct al_error *err = NULL;
	int fd = -1;

	if (!a->prepared || a->landlock_fd < 0 || ll_same(a, false))
		return;
	/* A ruleset that cannot be made leaves the old one: writes to the areas fail, nothing
	 * is allowed that was not. */
	if (jail_landlock_build(a->workdir, &fd, &err) < 0 || fd < 0) {
		al_error_free(err);
		return;
	}
	close(a->landlock_fd);
	a->landlock_fd = fd;
	ll_same(a, true);
	agent_shims_retire(a);
}

static void prepare_commands(struct agent *a)
{
	struct al_error *err = NULL;

	a->landlock_fd = -1;
	jail_reset_signals();
	if (jail_bset_limit(&err) < 0 ||
	    jail_landlock_build(a->workdir, &a->landlock_fd, &err) < 0) {
		al_error_free(err);
		al_closep(&a->landlock_fd);
		return;
	}
	a->prepared = true;
	ll_same(a, true);
	if (jail_seccomp_install(&err) < 0) {
		al_error_free(err);
		return;
	}
	a->seccomp_held = true;
}

static int setup(struct agent *a)
{
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t mask;

	/* Our memory holds every command's environment: nobody inside may read it. */
	prctl(PR_SET_DUMPABLE, 0);
	prepare_commands(a);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGPIPE);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sigdelset(&mask, SIGPIPE);
	a->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	a->ep = epoll_create1(EPOLL_CLOEXEC);
	a->conn_fd = -1;
	if (a->sig_fd < 0 || a->ep < 0)
		return -1;
	a->w_listen.kind = W_LISTEN;
	a->w_conn.kind = W_CONN;
	a->w_sig.kind = W_SIGNAL;
	fcntl(AGENT_LISTEN_FD, F_SETFD, FD_CLOEXEC);
	ev.data.ptr = &a->w_listen;
	if (epoll_ctl(a->ep, EPOLL_CTL_ADD, AGENT_LISTEN_FD, &ev) < 0)
		return -1;
	ev.data.ptr = &a->w_sig;
	return epoll_ctl(a->ep, EPOLL_CTL_ADD, a->sig_fd, &ev);
}

/*
 * Page tables (bench/density: PageTables per sandbox). The kernel puts a static PIE's
 * program break far from its other mappings (at ELF_ET_DYN_BASE, where an interpreter
 * would be), so the first page musl's malloc takes there for its metadata needs a
 * page-table branch of its own: 3 pages, 12 KiB of each idle sandbox. A PROT_NONE page
 * reserved at the break makes that brk(2) fail, and malloc maps its metadata beside the
 * binary instead. A mapping nobody touches has no page tables.
 */
static void keep_heap_near(void)
{
	long brk0 = syscall(SYS_brk, 0);

	/* Best effort: without it malloc works as before. The raw call, as for brk: the
	 * mapping is never used, only kept. */
	if (brk0 > 0)
		(void)syscall(SYS_mmap, (brk0 + 4095) & ~4095L, 4096, PROT_NONE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
}

int main(int argc, char **argv)
{
	/* Static, not on the stack: its command table (8 KiB) stays untouched zero pages in
	 * the bss until commands fill it, where a zero-initialised local dirtied every page
	 * of it in each idle sandbox (bench/density: agents' PSS). */
	static struct agent a;
	struct epoll_event evs[32];

	keep_heap_near(); /* before the first malloc */
	a.workdir = "/workspace";

	for (int i = 1; i + 1 < argc; i += 2)
		if (strcmp(argv[i], "--workdir") == 0)
			a.workdir = argv[i + 1];
	/* Every command's EXEC and end pass through us and our shims (which inherit it); each
	 * command gets the default slice back (shim.c, child_entry). */
	al_sched_slice(0, AL_SLICE_HANDOFF_NS);
	if (getpid() != 1 || setup(&a) < 0)
		return 125; /* only ever PID 1 of a sandbox */
	/* Out of the writable areas: a process whose working directory is in one keeps the
	 * area's file system under an overlay mounted on it later, so a fork could not be
	 * copy-on-write (docs/snapshots.md); every command chdirs to its own. */
	if (chdir("/") < 0)
		return 125;
	for (;;) {
		int t1 = agent_shims_expire(&a), t2 = agent_cmds_expire(&a);
		int n = epoll_wait(a.ep, evs, 32, t1 < 0 || (t2 >= 0 && t2 < t1) ? t2 : t1);

		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;

			switch (w->kind) {
			case W_LISTEN:
				accept_conn(&a);
				break;
			case W_CONN:
				if (a.conn_fd >= 0)
					read_conn(&a);
				break;
			case W_SIGNAL:
				reap(&a);
				break;
			case W_OUT:
				agent_cmd_pump(&a, w->cmd, 1);
				break;
			case W_ERR:
				agent_cmd_pump(&a, w->cmd, 2);
				break;
			case W_IN:
				agent_cmd_stdin_ready(&a, w->cmd);
				break;
			case W_REPORT:
				agent_cmd_report(&a, w->cmd);
				break;
			}
		}
	}
}
