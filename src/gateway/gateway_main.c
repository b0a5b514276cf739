/* SPDX-License-Identifier: MIT */
/*
 * airlock-gateway: the egress gateway of one sandbox, as its own process
 * (see host/gw_client.h for the control protocol on fd 3).
 *
 *   airlock-gateway --policy JSON --sandbox ID --log-fd N
 *                   [--upstream-netns NS] [--upstream-dns IP[:PORT]]
 *                   [--ca-dir DIR [--ca-constrain 1]] [--upstream-ca FILE]
 *                   [--pooled-netns PATH]
 *   airlock-gateway --pool-serve PATH --pooled-netns NS [--idle-exit S]
 * a gateway made ahead for the one-shot pool or in a recycled pair, claimed by connecting
 * to PATH (pool_serve); with --idle-exit, one nobody claimed for S seconds takes its pair
 * out of ready/ and leaves (retire).
 * --policy-fd N in place of --policy: the policy read from fd N (gw_exec passes one too long
 * for an argv string, over 64 KiB, in a memfd as fd 5).
 * --pooled-netns: a gateway namespace from the one-shot pool (jail/ahead/pool.h), its ruleset
 * and link made; the sandbox joins the link's other end itself.
 * --ca-dir: where the sandbox's CA lives (made there when a policy first has
 * per-request rules; its certificate is DIR/ca.pem for the caller to install).
 *
 *   airlock-gateway --check-seccomp
 * installs the gateway's own seccomp filter and reports what it refuses and allows.
 *
 * Daemon mode (a sandbox that is already running, airlockd's):
 *   airlock-gateway --policy JSON --sandbox ID --attach-pid PID --generation N
 *                   --control-socket PATH --log-file PATH [--upstream-...]
 * attaches and configures the link from outside, points the sandbox's
 * /etc/resolv.conf at the gateway, writes "R\n" on fd 3 and closes it, then
 * serves until the sandbox's PID 1 dies. The daemon changes the policy by
 * connecting to PATH and sending "POLICY GENERATION JSON\n"; the answer is
 * "A GENERATION\n" once the new policy is in force and the flows it refuses
 * are cut, or "E<errno> message\n" -- and then the gateway is in deny-all.
 * Without --attach-pid but with --control-socket (airlockd's create, which starts
 * the gateway before the sandbox): "R\n" when ready, then the pid on fd 3, then
 * the same as above with "A\n" in place of the "R\n".
 */
#include "host/ca_bundle.h"
#include "common/json_seed.h"
#include "gateway/gateway.h"
#include "gateway/gw.h"
#include "net/gwctl.h"
#include "net/policy.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/fdpass.h"

#include <errno.h>
#include <limits.h>
#include <sys/ptrace.h>
#include <sys/mount.h>
#include <sched.h>
#include <pthread.h>
#include <stdbool.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/openat2.h>

#define CTL 3
#define GW_POLICY_READ_MAX (16u << 20) /* a policy read from --policy-fd, at most */

static int fail(struct al_error *err)
{
	net_gwctl_send(CTL, &(struct net_gwctl){.kind = NET_GWCTL_ERROR,
						.code = err ? err->code : EIO,
						.text = err && err->msg ? err->msg : "failed"});
	return 1;
}

/* Point the running sandbox's resolver at the gateway (its /etc is ours, not the sandbox's). */
static void set_resolver(pid_t pid)
{
	static const char conf[] =
	    "# airlock: the sandbox's egress gateway\nnameserver 100.96.0.1\n";
	struct open_how how = {.flags = O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			       .resolve =
				   RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS};
	char path[64];
	int root, fd;

	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return;
	fd = (int)syscall(SYS_openat2, root, "etc/resolv.conf", &how, sizeof(how));
	if (fd >= 0) {
		(void)!write(fd, conf, sizeof(conf) - 1);
		close(fd);
	}
	close(root);
}

/* Write one file into the running sandbox's /etc/airlock (created by its rootfs). */
static int put_in_sandbox(int root, const char *rel, const char *data)
{
	struct open_how how = {.flags = O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			       .mode = 0644,
			       .resolve =
				   RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS};
	int fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how)), r = 0;

	if (fd < 0)
		return -1;
	if (write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		r = -1;
	close(fd);
	return r;
}

/* A running sandbox whose policy now has per-request rules: give it the CA to trust. */
static void install_ca(struct net_gateway *g, pid_t pid, bool *done)
{
	const char *pem = net_gateway_ca_pem(g);
	char path[64], *bundle;
	bool image;
	int root;

	if (*done || !pem)
		return;
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return;
	bundle = net_ca_bundle(pem);
	/* Where the sandbox's root made room for it: /etc/airlock, or /run/airlock in an
	 * --image root. The bundle first, so a command that sees ca.pem also finds it. */
	image = faccessat(root, "etc/airlock", F_OK, AT_SYMLINK_NOFOLLOW) != 0;
	if (put_in_sandbox(root, (image ? NET_CA_IMAGE_BUNDLE_PATH : NET_CA_BUNDLE_PATH) + 1,
			   bundle) == 0 &&
	    put_in_sandbox(root, (image ? NET_CA_IMAGE_CERT_PATH : NET_CA_CERT_PATH) + 1, pem) == 0)
		*done = true;
	free(bundle);
	close(root);
}

/* Room for GW_MAX_CONNS spliced connections (the gateway is host root: it may raise its
 * hard limit up to fs.nr_open). Best effort: with less, connections beyond the fd limit
 * are refused and logged, nothing else breaks. fs.nr_open is read only when the limit is
 * refused (it is 1 Mi by default, far above GW_NOFILE). */
static void raise_nofile(void)
{
	struct rlimit rl = {.rlim_cur = GW_NOFILE, .rlim_max = GW_NOFILE};
	unsigned long nr_open = 0;
	FILE *f;

	if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
		return;
	f = fopen("/proc/sys/fs/nr_open", "re");
	if (f) {
		if (fscanf(f, "%lu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	if (nr_open && rl.rlim_max > nr_open) {
		rl.rlim_cur = rl.rlim_max = nr_open;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			return;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max; /* at least the soft limit up to the hard one */
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int control_listen(const char *path, struct al_error **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || strlen(path) >= sizeof(sa.sun_path))
		return al_error_set(err, fd < 0 ? errno : ENAMETOOLONG, "control socket '%s'",
				    path);
	strcpy(sa.sun_path, path);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, 4) < 0) {
		close(fd);
		return al_error_set(err, errno, "control socket '%s'", path);
	}
	return fd;
}

/* Deny-all, as generation gen (a failed update: never the old policy). */
static void set_deny_all(struct net_gateway *g, unsigned long long gen)
{
	struct net_policy *deny = net_policy_new(NET_POLICY_DENY_ALL);

	deny->generation = gen;
	net_gateway_set_policy(g, deny, NULL);
}

/* One control connection: "POLICY GEN JSON" lines (net/gwctl.h). */
static void control_serve(struct net_gateway *g, int c, pid_t pid, bool *ca_installed)
{
	char *line = malloc(1 << 20);
	size_t n = 0;

	while (line && n < (1 << 20) - 1) {
		ssize_t r = read(c, line + n, (1 << 20) - 1 - n);
		char *nl;

		if (r <= 0)
			break;
		n += (size_t)r;
		line[n] = '\0';
		while ((nl = strchr(line, '\n'))) {
			struct net_policy *p = NULL;
			struct al_error *err = NULL;
			struct net_gwctl m;
			bool ok;

			*nl = '\0';
			ok = net_gwctl_parse(line, &m) == 0 && m.kind == NET_GWCTL_POLICY;
			if (ok && net_policy_parse_string(m.text, strlen(m.text), &p, &err) == 0) {
				p->generation = m.gen;
				if (net_gateway_set_policy(g, p, &err) == 0) {
					install_ca(g, pid, ca_installed);
					net_gwctl_send(
					    c, &(struct net_gwctl){.kind = NET_GWCTL_ATTACHED,
								   .gen = m.gen});
				} else {
					set_deny_all(g, m.gen);
					net_gwctl_send(
					    c, &(struct net_gwctl){
						   .kind = NET_GWCTL_ERROR,
						   .code = err ? err->code : EIO,
						   .text = err && err->msg ? err->msg : "failed"});
				}
			} else {
				/* A failed update leaves deny-all, never the old policy. */
				set_deny_all(g, ok ? m.gen : 0);
				net_gwctl_send(c, &(struct net_gwctl){.kind = NET_GWCTL_ERROR,
								      .code = EINVAL,
								      .text = err && err->msg
										  ? err->msg
										  : "bad command"});
			}
			al_error_free(err);
			n -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, n + 1);
		}
	}
	free(line);
}

/*
 * Serve a daemon sandbox until its PID 1 is gone. `ready` ("R" or "A") goes to the caller
 * once the control socket listens and the CA (if any) is in the sandbox; with `start`, the
 * filter and the serving threads come after it (the sandbox's first connections wait in
 * the listeners' queues meanwhile), otherwise they are already running.
 */
static int serve_daemon_mode(struct net_gateway *g, pid_t pid, const char *ctl_path,
			     enum net_gwctl_kind ready, bool start)
{
	struct al_error *err = NULL;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), lfd = control_listen(ctl_path, &err);
	bool ca_installed = false;

	if (pidfd < 0 || lfd < 0)
		return fail(err);
	install_ca(g, pid, &ca_installed);
	net_gwctl_send(CTL, &(struct net_gwctl){.kind = ready});
	close(CTL);
	if (start && (gw_seccomp_install(&err) < 0 || net_gateway_start(g, &err) < 0))
		return fail(
		    err); /* the caller has gone on: nothing flows, the watchdog restarts us */
	for (;;) {
		struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN},
				      {.fd = lfd, .events = POLLIN}};

		if (poll(p, 2, -1) < 0 && errno == EINTR)
			continue;
		if (p[0].revents)
			break; /* the sandbox is gone */
		if (p[1].revents) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0) {
				control_serve(g, c, pid, &ca_installed);
				close(c);
			}
		}
	}
	unlink(ctl_path);
	net_gateway_stop(g);
	return 0;
}

/*
 * airlock-gateway --check-seccomp: install the gateway's filter, try what it must refuse
 * and what it must still allow, and print one "name result" line each (the test suite's
 * proof that the filter as built does its job; tests/integration/net/test_gw_seccomp.py).
 */
static void *thread_ok(void *arg)
{
	return arg;
}

static int check_seccomp(void)
{
	struct al_error *err = NULL;
	char *const argv[] = {"/bin/true", NULL};
	_cleanup_close_ int nsfd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int mntfd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	pthread_t t;

	if (gw_seccomp_install(&err) < 0) {
		printf("install %s\n", err->msg);
		return 1;
	}
#define TRY(name, call) printf("%s %s\n", name, (call) < 0 ? strerror(errno) : "allowed")
	TRY("execve", execve("/bin/true", argv, NULL));
	TRY("unshare", unshare(CLONE_NEWUSER));
	TRY("clone_newuser", syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
	TRY("clone3", syscall(SYS_clone3, NULL, 0));
	TRY("mount", mount("none", "/mnt", "tmpfs", 0, NULL));
	TRY("ptrace", ptrace(PTRACE_TRACEME, 0, 0, 0));
	TRY("bpf", syscall(SYS_bpf, 0, NULL, 0));
	TRY("setns_mnt", setns(mntfd, CLONE_NEWNS));
	TRY("setns_net", setns(nsfd, CLONE_NEWNET));
	TRY("setuid", setuid(0));
	TRY("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
	printf("thread %s\n",
	       pthread_create(&t, NULL, thread_ok, NULL) == 0 && pthread_join(t, NULL) == 0
		   ? "allowed"
		   : "failed");
#undef TRY
	return 0;
}

struct gw_args {
	struct net_gateway_opts o;
	const char *policy, *ctl_path, *log_file, *pool_serve;
	char *policy_buf; /* --policy-fd's text */
	unsigned long long generation;
	unsigned idle_exit; /* --idle-exit S: a pooled gateway unclaimed for S seconds leaves */
	pid_t attach_pid;
};

/* --policy-fd N: the policy text from fd N (a memfd: too long for argv), read whole and
 * closed; NULL if it cannot be (then "--policy is required" says so). Kept in *buf. */
static const char *read_policy_fd(int fd, char **buf)
{
	size_t cap = 1 << 16, len = 0;
	char *p = malloc(cap + 1);
	ssize_t n;

	while (p && fd >= 0 && (n = read(fd, p + len, cap - len)) > 0) {
		len += (size_t)n;
		if (len == cap) {
			char *q = cap >= GW_POLICY_READ_MAX ? NULL : realloc(p, cap * 2 + 1);

			if (!q) {
				free(p);
				p = NULL;
				break;
			}
			p = q;
			cap *= 2;
		}
	}
	if (fd >= 0)
		close(fd);
	if (p)
		p[len] = '\0';
	free(*buf);
	*buf = p;
	return p;
}

/* --max-conns: a whole number in [NET_GW_CONNS_MIN, NET_GW_CONNS_MAX]; anything else is
 * the least, so that a malformed bound never serves more than the one it stood for. */
static unsigned parse_conns(const char *v)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || n < NET_GW_CONNS_MIN ||
	    n > NET_GW_CONNS_MAX)
		return NET_GW_CONNS_MIN;
	return (unsigned)n;
}

/* "--key value" pairs, from argv or from a pooled gateway's claim. */
static void parse_args(struct gw_args *a, int n, char **kv)
{
	for (int i = 0; i + 1 < n; i += 2) {
		const char *k = kv[i], *v = kv[i + 1];

		if (strcmp(k, "--policy") == 0)
			a->policy = v;
		else if (strcmp(k, "--policy-fd") == 0)
			a->policy = read_policy_fd(atoi(v), &a->policy_buf);
		else if (strcmp(k, "--sandbox") == 0)
			a->o.sandbox_id = v;
		else if (strcmp(k, "--log-fd") == 0)
			a->o.log_fd = atoi(v);
		else if (strcmp(k, "--upstream-netns") == 0)
			a->o.upstream_netns = v;
		else if (strcmp(k, "--upstream-dns") == 0)
			a->o.upstream_dns = v;
		else if (strcmp(k, "--attach-pid") == 0)
			a->attach_pid = (pid_t)atoi(v);
		else if (strcmp(k, "--control-socket") == 0)
			a->ctl_path = v;
		else if (strcmp(k, "--log-file") == 0)
			a->log_file = v;
		else if (strcmp(k, "--ca-dir") == 0)
			a->o.ca_dir = v;
		else if (strcmp(k, "--upstream-ca") == 0)
			a->o.upstream_ca = v;
		else if (strcmp(k, "--ca-constrain") == 0)
			a->o.ca_constrain = strcmp(v, "0") != 0;
		else if (strcmp(k, "--ca-ephemeral") == 0)
			a->o.ca_ephemeral = strcmp(v, "0") != 0;
		else if (strcmp(k, "--pooled-netns") == 0)
			a->o.pooled_netns = v;
		else if (strcmp(k, "--pool-serve") == 0)
			a->pool_serve = v;
		else if (strcmp(k, "--idle-exit") == 0)
			a->idle_exit = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--generation") == 0)
			a->generation = strtoull(v, NULL, 10);
		else if (strcmp(k, "--max-conns") == 0)
			a->o.max_conns = parse_conns(v);
	}
}

/* The policy text, parsed: EINVAL with the problem named (the caller's mistake). */
static struct net_policy *parse_policy(const char *text, unsigned long long gen,
				       struct al_error **err)
{
	struct net_policy *p = NULL;

	if (!text) {
		al_error_msg(err, EINVAL, "airlock-gateway: --policy is required");
		return NULL;
	}
	if (net_policy_parse_string(text, strlen(text), &p, err) < 0) {
		al_error_wrap(err, "network policy");
		(*err)->code = EINVAL;
		return NULL;
	}
	p->generation = gen;
	return p;
}

/* Ready: say "R", then link the sandbox whose pid comes on CTL. Its pid; 0 if the caller
 * gave up; -1 when the link failed (said on CTL). */
/* The sandbox's pid from CTL: > 0, 0 when the caller gave up (EOF), -1 (said) if the line
 * is not one. */
static pid_t read_pid(void)
{
	struct al_error *err = NULL;
	struct net_gwctl m;
	char line[64];
	ssize_t n = read(CTL, line, sizeof(line) - 1);
	pid_t pid = 0;

	if (n <= 0)
		return 0;
	line[n] = '\0';
	if (line[n - 1] == '\n')
		line[n - 1] = '\0';
	if (net_gwctl_parse(line, &m) == 0 && m.kind == NET_GWCTL_PID)
		pid = (pid_t)m.gen;
	if (pid > 0)
		return pid;
	al_error_msg(&err, EPROTO, "expected the sandbox's pid, got '%.40s'", line);
	fail(err);
	return -1;
}

static pid_t await_link(struct net_gateway *g)
{
	struct al_error *err = NULL;
	pid_t pid;

	net_gwctl_send(CTL, &(struct net_gwctl){.kind = NET_GWCTL_READY});
	pid = read_pid();
	if (pid > 0 && net_gateway_attach(g, pid, &err) < 0) {
		fail(err);
		return -1;
	}
	return pid;
}

/* airlock moved us to a CPU of our own for the start-up (gw_client_start): our service
 * threads, which inherit this thread's CPUs, get all of airlock's again. */
static void take_parents_cpus(void)
{
	cpu_set_t cpus;

	if (sched_getaffinity(getppid(), sizeof(cpus), &cpus) == 0)
		sched_setaffinity(0, sizeof(cpus), &cpus);
}

/* The link is there: the sandbox may start its workload. What it sends waits in the
 * listeners' queues (they are bound and listening) for the service thread its first
 * packet starts (a run that sends nothing costs no thread). If this fails, the gateway
 * exits and nothing flows. With the gateway's namespace, which airlock may recycle
 * (jail/ahead/recycle.h). */
static void say_attached(struct net_gateway *g)
{
	if (al_send_with_fd(CTL, "A\n", 2, net_gateway_netns(g)) != 2)
		_exit(1);
}

/*
 * A one-shot's gateway once ready: link the sandbox whose pid comes on CTL, serve until
 * the caller closes CTL, then leave. A claimed pooled gateway (claimed) has its link made
 * with its namespace and its policy in place: it says so at once, and takes the pid
 * (which it does not need) after, so that the sandbox's set-up never waits for a round
 * trip to it.
 */
static int serve_one_shot(struct net_gateway *g, bool filtered, bool claimed)
{
	struct al_error *err = NULL;
	pid_t pid;

	if (claimed) {
		net_gwctl_send(CTL, &(struct net_gwctl){.kind = NET_GWCTL_READY});
		if (net_gateway_attach(g, 0, &err) < 0) /* pooled: the link running */
			return fail(err);
		say_attached(g);
		pid = read_pid();
	} else {
		pid = await_link(g);
		if (pid > 0)
			say_attached(g);
	}
	if (pid <= 0)
		return pid < 0; /* 0: the caller gave up */
	take_parents_cpus();
	/* Serve until the caller closes the channel (the sandbox ended, or airlock died). A
	 * service whose thread cannot start leaves us: nothing flows then (fail closed). */
	if ((!filtered && gw_seccomp_install(&err) < 0) ||
	    net_gateway_serve_lazily(g, CTL, &err) < 0)
		return fail(err);
	/* airlock waits for our exit: once every log line is out, leave the rest (threads'
	 * stacks, sockets, namespaces, memory) to the kernel instead of freeing it first. */
	net_gateway_quiesce(g);
	_exit(0);
}

/*
 * The claim of a pooled gateway: a 4-byte length, then that many bytes of NUL-separated
 * "--key\0value\0" pairs (the options above), the egress log's fd alongside (SCM_RIGHTS).
 * Returns the pairs in kv[0..*n), pointing into *buf; -1 if it is malformed.
 */
#define CLAIM_MAX (1u << 20)
static int read_claim(int c, char **buf, char **kv, int max_kv, int *n, int *log_fd)
{
	uint32_t len = 0;
	size_t got = 0;
	char *p;

	if (al_recv_with_fd(c, &len, sizeof(len), MSG_WAITALL, log_fd, NULL) != sizeof(len))
		return -1;
	if (len == 0 || len > CLAIM_MAX)
		return -1;
	*buf = malloc(len + 1);
	if (!*buf)
		return -1;
	while (got < len) {
		ssize_t r = read(c, *buf + got, len - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	(*buf)[len] = '\0';
	if ((*buf)[len - 1] != '\0')
		return -1; /* every string ends with its NUL */
	*n = 0;
	for (p = *buf; p < *buf + len; p += strlen(p) + 1) {
		if (*n == max_kv)
			return -1;
		kv[(*n)++] = p;
	}
	return *n % 2 == 0 ? 0 : -1;
}

/*
 * --idle-exit: a gateway waiting in a recycled pair (jail/ahead/recycle.h) that nobody
 * claimed takes its pair out of ROOT/ready, by rename(2) into ROOT/claimed/idle-NAME as a
 * run would take it (the pool's next sweep destroys it), and then may leave: no run can
 * be about to claim it. false if a run took the pair first (its claim is on its way) or
 * the entry is not in a ready/ directory.
 */
static bool retire(int dirfd)
{
	char self[64], path[PATH_MAX], from[PATH_MAX + 8], to[PATH_MAX + 16], *name, *sub;
	ssize_t n;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", dirfd);
	n = readlink(self, path, sizeof(path) - 1);
	if (n <= 0)
		return false;
	path[n] = '\0';
	name = strrchr(path, '/');
	if (!name || name == path)
		return false;
	*name++ = '\0';
	sub = strrchr(path, '/');
	if (!sub || strcmp(sub + 1, "ready") != 0)
		return false;
	snprintf(from, sizeof(from), "%s/%s", path, name);
	*sub = '\0';
	snprintf(to, sizeof(to), "%s/claimed/idle-%s", path, name);
	return rename(from, to) == 0;
}

/*
 * --pool-serve PATH: a gateway made ahead for the one-shot pool (src/jail/ahead/pool.h), in the
 * pooled namespace given by --pooled-netns, with its listeners bound. It says "P" on fd 3
 * when PATH listens, then waits for one claim there: the caller's connection becomes its
 * control channel and from then on it is an ordinary one-shot gateway. It leaves without a
 * claim when PATH is removed (the pool drained) or when a connection closes unclaimed.
 */
static int pool_serve(struct gw_args *a)
{
	struct al_error *err = NULL;
	struct net_gateway *g = NULL;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[sizeof(sa.sun_path)], *slash, *buf = NULL, *kv[32];
	const char *name;
	int lfd, c, n = 0, log_fd;
	_cleanup_close_ int dirfd = -1;
	struct gw_args claim = {.o.log_fd = -1, .generation = 1};
	double since;

	/* The pool's, not the terminal's or the pipes of whoever filled it (a caller that
	 * reads its filler's output to the end must not wait for us). */
	setsid();
	lfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (lfd < 0 || dup2(lfd, 0) < 0 || dup2(lfd, 1) < 0 || dup2(lfd, 2) < 0)
		_exit(1);
	close(lfd);
	a->o.policy = net_policy_new(NET_POLICY_DENY_ALL);
	if (!a->o.pooled_netns) {
		al_error_msg(&err, EINVAL, "--pool-serve needs --pooled-netns");
		return fail(err);
	}
	if (snprintf(dir, sizeof(dir), "%s", a->pool_serve) >= (int)sizeof(dir) ||
	    !(slash = strrchr(dir, '/'))) {
		al_error_msg(&err, ENAMETOOLONG, "--pool-serve '%s'", a->pool_serve);
		return fail(err);
	}
	*slash = '\0';
	name = slash + 1 - dir + a->pool_serve;		     /* the socket's name inside dir */
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC); /* follows the entry's renames */
	if (dirfd < 0 || net_gateway_prepare(&a->o, &g, &err) < 0)
		return fail(err);
	lfd = control_listen(a->pool_serve, &err);
	/* Everything that needs more than the gateway's own filter allows is done: from here
	 * on, idle and while it reads a claim, it runs under that filter. */
	if (lfd < 0 || gw_seccomp_install(&err) < 0)
		return fail(err);
	net_gwctl_send(CTL, &(struct net_gwctl){.kind = NET_GWCTL_POOLED});
	since = gw_mono_s();
	for (;;) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		struct stat st;

		/* every 5 s, or each idle time if that is shorter */
		if (poll(&p, 1,
			 a->idle_exit && a->idle_exit < 5 ? (int)a->idle_exit * 1000 : 5000) == 0) {
			if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				_exit(0); /* drained */
			if (a->idle_exit && gw_mono_s() - since >= a->idle_exit && retire(dirfd)) {
				unlinkat(dirfd, name, 0);
				_exit(0);
			}
			continue;
		}
		c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c >= 0)
			break;
	}
	close(lfd);
	unlinkat(dirfd, name, 0);
	if (dup2(c, CTL) < 0)
		_exit(1);
	close(c);
	if (read_claim(CTL, &buf, kv, 32, &n, &log_fd) < 0)
		_exit(0); /* closed unclaimed (a drain), or nonsense: nothing was served */
	parse_args(&claim, n, kv);
	claim.o.log_fd = log_fd;
	claim.o.policy = parse_policy(claim.policy, 1, &err);
	if (!claim.o.policy || claim.o.ca_dir || net_gateway_configure(g, &claim.o, &err) < 0) {
		if (!err)
			al_error_msg(&err, EINVAL, "a pooled gateway terminates no TLS (--ca-dir)");
		return fail(err);
	}
	return serve_one_shot(g, true, true);
}

int main(int argc, char **argv)
{
	struct gw_args a = {.o.log_fd = -1, .generation = 1};
	struct net_gateway *g = NULL;
	struct al_error *err = NULL;

	signal(SIGPIPE, SIG_IGN);
	al_json_seed(); /* before the policy's JSON */
	if (argc == 2 && strcmp(argv[1], "--check-seccomp") == 0)
		return check_seccomp();
	raise_nofile();
	parse_args(&a, argc - 1, argv + 1);
	if (a.pool_serve)
		return pool_serve(&a);
	/* An invalid policy is the caller's mistake: EINVAL, the message names the problem. */
	a.o.policy = parse_policy(a.policy, a.generation, &err);
	if (!a.o.policy)
		return fail(err);
	if (a.log_file)
		a.o.log_fd = open(a.log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (net_gateway_prepare(&a.o, &g, &err) < 0)
		return fail(err);
	if (a.attach_pid > 0) {
		if (!a.ctl_path) {
			al_error_msg(&err, EINVAL, "--attach-pid needs --control-socket");
			return fail(err);
		}
		if (net_gateway_attach(g, a.attach_pid, &err) < 0 || gw_seccomp_install(&err) < 0 ||
		    net_gateway_start(g, &err) < 0)
			return fail(err);
		set_resolver(a.attach_pid);
		return serve_daemon_mode(g, a.attach_pid, a.ctl_path, NET_GWCTL_READY, false);
	}
	if (a.ctl_path) {
		/* airlockd's create starts us before the sandbox exists: "R", then its pid on
		 * CTL, then the same as with --attach-pid, answering "A" as soon as the link and
		 * control socket are up. */
		pid_t pid = await_link(g);

		if (pid <= 0)
			return pid < 0; /* 0: the caller gave up */
		set_resolver(pid);
		return serve_daemon_mode(g, pid, a.ctl_path, NET_GWCTL_ATTACHED, true);
	}
	return serve_one_shot(g, false, false);
}
