/* SPDX-License-Identifier: MIT */
#include "host/gw_client.h"
#include "net/contract.h"
#include "net/gwctl.h"
#include "common/proc.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/fdpass.h"
#include "common/syscalls.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

struct gw_client {
	pid_t pid;
	int pidfd; /* a pooled gateway's (not our child): to wait for and signal it */
	int ctl;
	char ca_dir[64]; /* a private directory for the sandbox CA's certificate ("" if none) */
	char *ca_pem;	 /* the certificate, when the policy has per-request rules */
	enum { GW_STARTING, GW_READY, GW_LINKED } state;
	int netns;	     /* the gateway's namespace, sent with its "A" (a one-shot's), or -1 */
	bool policy_refused; /* its "E" came at start with EINVAL */
	char line[1024];     /* the control line being read */
	size_t len;
};

/* After "R": the gateway made a CA (the policy has rules) -- keep its certificate. */
static void read_ca(struct gw_client *c)
{
	char path[96];
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/ca.pem", c->ca_dir);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n < 65536 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		c->ca_pem = xzalloc((size_t)n + 1);
		if (fread(c->ca_pem, 1, (size_t)n, f) != (size_t)n) {
			free(c->ca_pem);
			c->ca_pem = NULL;
		}
	}
	fclose(f);
}

const char *gw_client_ca_pem(const struct gw_client *c)
{
	return c ? c->ca_pem : NULL;
}

/* One whole control line (net/gwctl.h): ready and attached move the state on, an error
 * line is the gateway's error. */
static int handle_line(struct gw_client *c, const char *line, struct al_error **err)
{
	struct net_gwctl m;

	if (net_gwctl_parse(line, &m) < 0)
		return al_error_msg(err, EPROTO, "the network gateway said '%.100s'", line);
	if (m.kind == NET_GWCTL_ERROR) {
		c->policy_refused = c->state == GW_STARTING && m.code == EINVAL;
		return al_error_from(err, m.code, m.text);
	}
	if (c->state == GW_STARTING && m.kind == NET_GWCTL_READY) {
		c->state = GW_READY;
		if (c->ca_dir[0])
			read_ca(c);
		return 0;
	}
	if (c->state == GW_READY && m.kind == NET_GWCTL_ATTACHED) {
		c->state = GW_LINKED;
		return 0;
	}
	return al_error_msg(err, EPROTO, "the network gateway said '%.100s'", line);
}

int gw_client_step(struct gw_client *c, struct al_error **err)
{
	char buf[256];
	int fd = -1;
	ssize_t n = al_recv_with_fd(c->ctl, buf, sizeof(buf), MSG_DONTWAIT, &fd, NULL);

	if (fd >= 0 && c->netns < 0)
		c->netns = fd;
	else if (fd >= 0)
		close(fd);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return c->state == GW_LINKED;
	if (n <= 0)
		return al_error_msg(err, EPIPE, "the network gateway exited (%s)",
				    c->state == GW_STARTING ? "start" : "attach");
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] != '\n') {
			if (c->len < sizeof(c->line) - 1)
				c->line[c->len++] = buf[i];
			continue;
		}
		c->line[c->len] = '\0';
		c->len = 0;
		if (handle_line(c, c->line, err) < 0)
			return -1;
	}
	return c->state == GW_LINKED;
}

int gw_client_fd(const struct gw_client *c)
{
	return c->ctl;
}

bool gw_client_policy_refused(const struct gw_client *c)
{
	return c && c->policy_refused;
}

char *gw_sibling(const char *name)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return xstrdup(name);
	self[n] = '\0';
	slash = strrchr(self, '/');
	*slash = '\0';
	return xasprintf("%s/%s", self, name);
}

struct exec_args {
	const char *path;
	const char *const *argv;
	int ctl, log_fd, policy_fd;
	const char *hint;
};

/* In the vfork child: fd 3 the control channel, fd 4 the egress log, nothing else; exec.
 * It shares our memory until then: only system calls whose effects are its own (fds,
 * its signal dispositions, raw, so that no libc state in our memory changes). */
static int exec_gateway(void *arg)
{
	static const struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} dfl = {SIG_DFL, 0, NULL, 0};
	struct exec_args *x = arg;
	/* Move them out of the way first: any may already sit on 3, 4 or 5. */
	int ctl = fcntl(x->ctl, F_DUPFD, 10),
	    log = x->log_fd >= 0 ? fcntl(x->log_fd, F_DUPFD, 10) : -1;
	int pol = x->policy_fd >= 0 ? fcntl(x->policy_fd, F_DUPFD, 10) : -1;

	if (ctl < 0 || dup2(ctl, 3) < 0 || (x->log_fd >= 0 && (log < 0 || dup2(log, 4) < 0)) ||
	    (x->policy_fd >= 0 && (pol < 0 || dup2(pol, GW_POLICY_FD) < 0)))
		_exit(127);
	if (x->log_fd < 0)
		close(4);
	sys_close_range(x->policy_fd >= 0 ? GW_POLICY_FD + 1 : GW_POLICY_FD, ~0U, 0);
	syscall(SYS_rt_sigaction, SIGPIPE, &dfl, NULL, sizeof(dfl.mask));
	execv(x->path, (char *const *)x->argv);
	{
		char msg[600]; /* under 1 KiB: net_gwctl_send allocates nothing */
		int e = errno;

		snprintf(msg, sizeof(msg), "cannot run %.300s: %s%s%.200s", x->path, strerror(e),
			 x->hint ? " " : "", x->hint ? x->hint : "");
		net_gwctl_send(
		    3, &(struct net_gwctl){.kind = NET_GWCTL_ERROR, .code = e, .text = msg});
	}
	_exit(127);
}

/* A policy too long for one argv string (the kernel caps each at 128 KiB) travels in a
 * memfd instead: "--policy JSON" becomes "--policy-fd 5". -1 if it need not (or cannot). */
static int policy_memfd(const char **args)
{
	for (size_t i = 0; args[i] && args[i + 1]; i++) {
		size_t len = strlen(args[i + 1]), off = 0;
		int fd;

		if (strcmp(args[i], "--policy") != 0 || len <= GW_POLICY_ARGV_MAX)
			continue;
		fd = memfd_create("airlock-policy", MFD_CLOEXEC);
		while (fd >= 0 && off < len) {
			ssize_t n = write(fd, args[i + 1] + off, len - off);

			if (n <= 0) {
				close(fd);
				return -1; /* then argv, and its E2BIG says why */
			}
			off += (size_t)n;
		}
		if (fd < 0 || lseek(fd, 0, SEEK_SET) < 0) {
			if (fd >= 0)
				close(fd);
			return -1;
		}
		args[i] = "--policy-fd";
		args[i + 1] = GW_POLICY_FD_ARG;
		return fd;
	}
	return -1;
}

pid_t gw_exec(const char *path, const char *const *argv, int ctl, int log_fd, const char *hint)
{
	const char *args[48];
	size_t n = 0;
	int pfd = -1;
	pid_t pid;

	while (n < ARRAY_SIZE(args) - 1 && argv[n]) {
		args[n] = argv[n];
		n++;
	}
	args[n] = NULL;
	if (!argv[n]) /* all of it copied */
		pfd = policy_memfd(args);
	/* vfork-style: no copy of the caller's address space (for airlockd: every thread's
	 * stack and mapping) to make and tear down again; we are suspended until it execs. */
	pid = al_clone_vfork(exec_gateway, &(struct exec_args){path, pfd >= 0 ? args : argv, ctl,
							       log_fd, pfd, hint});
	if (pfd >= 0)
		close(pfd);
	return pid;
}

int gw_client_start(const struct al_config *cfg, bool no_rules, const char *sandbox_id, int log_fd,
		    const char *pooled_netns, struct gw_client **out, struct al_error **err)
{
	struct gw_client *c = xzalloc(sizeof(*c));
	char *path = NULL, logfd[16], conns[16];
	int sp[2];
	const char *argv[28];
	int a = 0;

	c->pidfd = c->netns = -1;

	*out = c;
	c->ctl = -1;
	/* A policy without per-request rules never needs TLS termination (a one-shot's policy
	 * never changes): the gateway built without OpenSSL starts ~0.5 ms sooner. */
	if (no_rules) {
		path = gw_sibling("airlock-gateway-lite");
		if (access(path, X_OK) < 0) { /* not installed next to us: the full one */
			free(path);
			path = NULL;
		}
	}
	if (!path)
		path = gw_sibling("airlock-gateway");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		free(path);
		return al_error_set(err, errno, "socketpair");
	}
	snprintf(logfd, sizeof(logfd), "%d", log_fd >= 0 ? 4 : -1);
	argv[a++] = "airlock-gateway";
	argv[a++] = "--policy";
	argv[a++] = cfg->net_policy_json;
	argv[a++] = "--sandbox";
	argv[a++] = sandbox_id;
	argv[a++] = "--log-fd";
	argv[a++] = logfd;
	snprintf(conns, sizeof(conns), "%u", net_gateway_conn_budget(cfg->memory_bytes, cfg->pids));
	argv[a++] = "--max-conns", argv[a++] = conns;
	if (cfg->upstream_netns)
		argv[a++] = "--upstream-netns", argv[a++] = cfg->upstream_netns;
	if (cfg->upstream_dns)
		argv[a++] = "--upstream-dns", argv[a++] = cfg->upstream_dns;
	/* The CA (made only if the policy has per-request rules): constrained to the policy's
	 * domains (a one-shot policy never changes), its key in the gateway's memory only. A
	 * policy known to have no rules needs no place for it. */
	snprintf(c->ca_dir, sizeof(c->ca_dir), "/tmp/airlock-ca-XXXXXX");
	if (!no_rules && mkdtemp(c->ca_dir)) {
		argv[a++] = "--ca-dir", argv[a++] = c->ca_dir;
		argv[a++] = "--ca-constrain", argv[a++] = "1";
		argv[a++] = "--ca-ephemeral", argv[a++] = "1";
	} else {
		c->ca_dir[0] = '\0';
	}
	if (cfg->upstream_ca)
		argv[a++] = "--upstream-ca", argv[a++] = cfg->upstream_ca;
	if (pooled_netns)
		argv[a++] = "--pooled-netns", argv[a++] = pooled_netns;
	argv[a] = NULL;
	c->pid = gw_exec(path, argv, sp[1], log_fd, NULL);
	/* Making its namespace, link and ruleset, its start-up is the allowlisted run's
	 * longest chain: on a CPU of its own while we and the sandbox's child share this one
	 * (-0.14 to -0.32 ms here; this host packs tasks onto one vCPU). It takes back our
	 * CPUs before its service threads start. Joining a pair made ahead or recycled, it
	 * has little to do and starts after the clone, whose child is on the other CPU:
	 * it stays on ours (lone allowlisted runs, 2 x 300 alternated: 1.03 / 1.03x deny-all
	 * against 1.08 / 1.10x moved). */
	if (c->pid > 0 && !pooled_netns)
		al_move_elsewhere(c->pid);
	close(sp[1]);
	c->ctl = sp[0];
	if (c->pid < 0) {
		free(path);
		return al_error_set(err, errno, "start the network gateway");
	}
	free(path);
	return 0;
}

/* The claim (see airlock-gateway's read_claim): length, "--key\0value\0" pairs, log fd. */
static int send_claim(int fd, const char *const *kv, int n, int log_fd)
{
	size_t len = 0, off = sizeof(uint32_t);
	ssize_t sent;
	uint32_t len32;
	char *buf;

	for (int i = 0; i < n; i++)
		len += strlen(kv[i]) + 1;
	buf = xzalloc(sizeof(len32) + len);
	len32 = (uint32_t)len;
	memcpy(buf, &len32, sizeof(len32));
	for (int i = 0; i < n; i++) {
		memcpy(buf + off, kv[i], strlen(kv[i]) + 1);
		off += strlen(kv[i]) + 1;
	}
	/* The fd goes with the first bytes; a stream socket may take the rest later. */
	sent = al_send_with_fd(fd, buf, off, log_fd);
	for (size_t done = sent > 0 ? (size_t)sent : 0; sent > 0 && done < off;
	     done += (size_t)sent)
		sent = send(fd, buf + done, off - done, MSG_NOSIGNAL);
	free(buf);
	return sent > 0 ? 0 : -1;
}

int gw_client_start_pooled(const struct al_config *cfg, bool no_rules, const char *sandbox_id,
			   int log_fd, const char *sock_path, struct gw_client **out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	const char *kv[12];
	char conns[16];
	int n = 0, fd;
	struct gw_client *c;

	*out = NULL;
	if (!no_rules || strlen(sock_path) >= sizeof(sa.sun_path))
		return -1;
	strcpy(sa.sun_path, sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.pid <= 0) {
		close(fd);
		return -1;
	}
	kv[n++] = "--policy", kv[n++] = cfg->net_policy_json;
	kv[n++] = "--sandbox", kv[n++] = sandbox_id;
	snprintf(conns, sizeof(conns), "%u", net_gateway_conn_budget(cfg->memory_bytes, cfg->pids));
	kv[n++] = "--max-conns", kv[n++] = conns;
	if (cfg->upstream_netns)
		kv[n++] = "--upstream-netns", kv[n++] = cfg->upstream_netns;
	if (cfg->upstream_dns)
		kv[n++] = "--upstream-dns", kv[n++] = cfg->upstream_dns;
	c = xzalloc(sizeof(*c));
	c->ctl = fd;
	c->netns = -1;
	c->pid = cred.pid;
	/* Opened before it can have exited: a claimed gateway only exits once ctl closes. */
	c->pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
	if (c->pidfd < 0 || send_claim(fd, kv, n, log_fd) < 0) {
		if (c->pidfd >= 0)
			close(c->pidfd);
		close(fd);
		free(c);
		return -1;
	}
	*out = c;
	return 0;
}

int gw_client_ready(struct gw_client *c, struct al_error **err)
{
	while (c->state == GW_STARTING) {
		struct pollfd p = {.fd = c->ctl, .events = POLLIN};

		if (poll(&p, 1, 10000) <= 0)
			return al_error_msg(err, ETIMEDOUT,
					    "the network gateway did not answer (start)");
		if (gw_client_step(c, err) < 0)
			return -1;
	}
	return 0;
}

int gw_client_send_pid(struct gw_client *c, pid_t pid, struct al_error **err)
{
	if (net_gwctl_send(c->ctl, &(struct net_gwctl){.kind = NET_GWCTL_PID,
						       .gen = (unsigned long long)pid}) == 0)
		return 0;
	/* The gateway is gone: its last words (an "E" line) say why better than EPIPE. */
	if (gw_client_step(c, err) < 0)
		return -1;
	return al_error_set(err, errno ? errno : EPIPE, "talk to the network gateway");
}

void gw_client_close(struct gw_client *c)
{
	if (c)
		al_closep(&c->ctl); /* EOF: the gateway writes its last lines and exits */
}

static void free_client(struct gw_client *c)
{
	if (c->netns >= 0)
		close(c->netns);
	if (c->ca_dir[0]) {
		char path[96];
		snprintf(path, sizeof(path), "%s/ca.pem", c->ca_dir);
		unlink(path);
		rmdir(c->ca_dir);
	}
	free(c->ca_pem);
	free(c);
}

void gw_client_release(struct gw_client *c)
{
	if (!c)
		return;
	al_closep(&c->ctl);
	al_closep(&c->pidfd);
	free_client(c);
}

void gw_client_abandon(struct gw_client *c)
{
	if (!c)
		return;
	gw_client_close(c);
	if (c->pidfd >= 0) { /* a pooled gateway: not our child */
		sys_pidfd_send_signal(c->pidfd, SIGKILL);
		close(c->pidfd);
	} else if (c->pid > 0) {
		kill(c->pid, SIGKILL);
	}
	free_client(c);
}

void gw_client_hand_over(struct gw_client *c, int *ctl, int *pidfd)
{
	*ctl = *pidfd = -1;
	if (!c)
		return;
	*ctl = TAKE_FD(c->ctl);
	*pidfd = c->pidfd >= 0 ? TAKE_FD(c->pidfd) : gw_client_pidfd(c);
	free_client(c);
}

int gw_client_pidfd(const struct gw_client *c)
{
	if (!c)
		return -1;
	if (c->pidfd >= 0)
		return fcntl(c->pidfd, F_DUPFD_CLOEXEC, 3);
	return c->pid > 0 ? (int)syscall(SYS_pidfd_open, c->pid, 0) : -1;
}

int gw_client_netns(const struct gw_client *c)
{
	return c ? c->netns : -1;
}

void gw_client_stop(struct gw_client *c)
{
	if (!c)
		return;
	gw_client_close(c);
	if (c->pidfd >= 0) { /* a pooled gateway: not our child, so no waitpid */
		struct pollfd p = {.fd = c->pidfd, .events = POLLIN};

		if (poll(&p, 1, 5000) <= 0)
			sys_pidfd_send_signal(c->pidfd, SIGKILL);
		close(c->pidfd);
	} else if (c->pid > 0) {
		int pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0), st;
		struct pollfd p = {.fd = pidfd, .events = POLLIN};

		/* It exits when it sees the channel close; give it 5 s, then make it. */
		if (pidfd < 0 || poll(&p, 1, 5000) <= 0)
			kill(c->pid, SIGKILL);
		if (pidfd >= 0)
			close(pidfd);
		waitpid(c->pid, &st, 0);
	}
	free_client(c);
}
