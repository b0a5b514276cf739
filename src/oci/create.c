/* SPDX-License-Identifier: MIT */
/*
 * `create` and `start`. create builds the container as one airlock jail whose PID 1 waits
 * at the start gate (ROOT/ID/exec.fifo, src/jail/init.c), writes its pid to --pid-file and
 * exits: the engine's shim (a subreaper) then reaps PID 1, whose exit status is the
 * container's. start opens the gate.
 */
#include "oci/oci.h"
#include "jail/sandbox.h"
#include "jail/run.h"
#include "host/gw_client.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/fdpass.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct create_args {
	const char *bundle, *pid_file, *console, *id;
};

/* Everything a create owns until it succeeds (then the container owns it). */
struct building {
	struct oci_config c;
	struct oci_state st;
	struct jail_cgroup *cg;
	int sync[2], pidfd;
	pid_t pid;
	char *dir;
	const char *root;     /* --root */
	struct gw_client *gw; /* the egress gateway (a network-policy annotation), or NULL */
	bool linked;	      /* the gateway made the container's link (JMSG_LINK sent) */
	int log_fd;	      /* its egress log */
};

static int parse_create(int argc, char **argv, struct create_args *a)
{
	static const struct option opts[] = {{"bundle", required_argument, NULL, 'b'},
					     {"pid-file", required_argument, NULL, 'p'},
					     {"console-socket", required_argument, NULL, 'c'},
					     {"no-pivot", no_argument, NULL, 'n'},
					     {"no-new-keyring", no_argument, NULL, 'k'},
					     {"preserve-fds", required_argument, NULL, 'f'},
					     {NULL, 0, NULL, 0}};
	int ch;

	optind = 0; /* a fresh scan of a new argv (glibc, musl) */
	while ((ch = getopt_long_only(argc, argv, "+b:", opts, NULL)) != -1) {
		switch (ch) {
		case 'b':
			a->bundle = optarg;
			break;
		case 'p':
			a->pid_file = optarg;
			break;
		case 'c':
			a->console = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "0") != 0)
				return -2;
			break;
		case 'n': /* we never pivot into the bundle's root itself: nothing to change */
		case 'k': /* no session keyring is made: the seccomp floor refuses keyctl */
			break;
		default:
			return -1;
		}
	}
	if (optind != argc - 1)
		return -1;
	a->id = argv[optind];
	return 0;
}

/* Write the pid file whole or not at all (the shim reads it as soon as we exit). */
int oci_write_pid_file(const char *path, pid_t pid, struct al_error **err)
{
	_cleanup_free_ char *tmp = xasprintf("%s.tmp", path);
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d", (int)pid);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || write(fd, buf, (size_t)n) != n || rename(tmp, path) < 0)
		return al_error_set(err, errno, "write the pid file '%s'", path);
	return 0;
}

/* runc's console-socket protocol: one message, the PTY master as its only SCM_RIGHTS. */
static int send_console(const char *path, int master, struct al_error **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	static const char name[] = "/dev/pts/ptmx";

	if (strlen(path) >= sizeof(sa.sun_path))
		return al_error_msg(err, ENAMETOOLONG, "console socket '%s'", path);
	strcpy(sa.sun_path, path);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return al_error_set(err, errno, "connect to the console socket '%s'", path);
	if (al_send_with_fd(s, name, sizeof(name) - 1, master) < 0)
		return al_error_set(err, errno, "send the console to '%s'", path);
	return 0;
}

/* The gateway's answer: once it made the link, the workload may start (JMSG_LINK). */
static int gateway_step(struct building *b, struct al_error **err)
{
	int r = gw_client_step(b->gw, err);

	if (r < 0)
		return -1;
	if (r == 1 && !b->linked) {
		b->linked = true;
		if (jail_msg_send(b->sync[0], &(struct jail_msg){.type = JMSG_LINK}, -1) < 0)
			return al_error_msg(err, EPIPE, "container set-up channel");
	}
	return 0;
}

/* One message of the child's: 1 at READY, 0 for more, -1 with err. */
static int on_msg(struct building *b, const struct create_args *a, const struct jail_msg *m, int fd,
		  struct al_error **err)
{
	switch (m->type) {
	case JMSG_ERROR:
		return al_error_from(err, m->code, m->text);
	case JMSG_IDMAP: {
		struct jail_msg go = {.type = JMSG_GO};

		if (jail_write_idmaps(b->pid, OCI_SLOT_BASE + (b->st.slot << 16), err) < 0)
			return -1;
		if (jail_msg_send(b->sync[0], &go, -1) < 0)
			return al_error_msg(err, EPIPE, "container set-up channel");
		return 0;
	}
	case JMSG_PTY:
		if (!a->console)
			return al_error_msg(err, EINVAL,
					    "process.terminal is true but no --console-socket");
		return send_console(a->console, fd, err);
	case JMSG_READY:
		return 1;
	default:
		return al_error_msg(err, EPROTO, "unexpected message %u", m->type);
	}
}

/* Answer the child until it waits at the gate: its id maps, its PTY, its link, READY. */
static int drive(struct building *b, const struct create_args *a, struct al_error **err)
{
	for (;;) {
		struct pollfd p[2] = {
		    {.fd = b->sync[0], .events = POLLIN},
		    {.fd = b->gw && !b->linked ? gw_client_fd(b->gw) : -1, .events = POLLIN}};
		struct jail_msg m;
		_cleanup_close_ int fd = -1;
		int r;

		if (poll(p, 2, 30000) <= 0)
			return al_error_set(err, errno ? errno : ETIMEDOUT, "container set-up");
		if (p[1].revents && gateway_step(b, err) < 0)
			return -1;
		if (!p[0].revents)
			continue;
		r = jail_msg_recv(b->sync[0], &m, &fd);
		if (r == 0)
			return al_error_msg(err, ECHILD,
					    "the container's PID 1 died during set-up");
		if (r < 0)
			return al_error_set(err, -r, "container set-up channel");
		r = on_msg(b, a, &m, fd, err);
		if (r != 0)
			return r < 0 ? -1 : 0;
	}
}

/*
 * The network-policy annotation: a gateway of the container's own, with that policy, whose
 * control channel PID 1 holds (hold_fd), so that it serves exactly as long as the container
 * lives. Its egress log: the airlock.dev/egress-log annotation's file, else
 * ROOT/ID/egress.log. Where its upstream sockets live and which resolver it asks are the
 * operator's (airlock-oci's environment), never the container's.
 */
static int start_gateway(struct building *b, struct al_error **err)
{
	const char *log = json_string_value(
	    json_object_get(json_object_get(b->c.doc, "annotations"), OCI_EGRESS_LOG_ANNOTATION));
	_cleanup_free_ char *own = xasprintf("%s/egress.log", b->dir);

	if (!b->c.policy)
		return 0;
	b->log_fd = open(log ? log : own, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (b->log_fd < 0)
		return al_error_set(err, errno, "egress log '%s'", log ? log : own);
	b->c.cfg.net_policy_json = b->c.policy;
	b->c.cfg.upstream_netns = getenv("AIRLOCK_OCI_UPSTREAM_NETNS");
	b->c.cfg.upstream_dns = getenv("AIRLOCK_OCI_UPSTREAM_DNS");
	if (gw_client_start(&b->c.cfg, jail_policy_without_rules(b->c.policy), b->st.id, b->log_fd,
			    NULL, &b->gw, err) < 0 ||
	    gw_client_ready(b->gw, err) < 0)
		return al_error_wrap(err, "annotation %s", OCI_POLICY_ANNOTATION);
	b->c.oci.hold_fd = fcntl(gw_client_fd(b->gw), F_DUPFD_CLOEXEC, 3);
	if (b->c.oci.hold_fd < 0)
		return al_error_set(err, errno, "dup the gateway's channel");
	return 0;
}

/* The gate: a FIFO PID 1 opens for writing (as its own host uid: it owns it). */
static int make_gate(struct building *b, uid_t base, struct al_error **err)
{
	_cleanup_free_ char *fifo = xasprintf("%s/exec.fifo", b->dir);

	if (mkfifo(fifo, 0600) < 0 || chown(fifo, base, base) < 0)
		return al_error_set(err, errno, "mkfifo '%s'", fifo);
	b->c.oci.gate_fd = open(fifo, O_PATH | O_CLOEXEC);
	if (b->c.oci.gate_fd < 0)
		return al_error_set(err, errno, "open '%s'", fifo);
	return 0;
}

static int spawn(struct building *b, const struct create_args *a, struct al_error **err)
{
	uid_t base = OCI_SLOT_BASE + (b->st.slot << 16);
	struct jail_ctx ctx = {
	    .cfg = &b->c.cfg,
	    .host_base = base,
	    .uid = b->c.uid,
	    .envp = (char **)b->c.envp,
	    .stdio = {0, 1, 2},
	    .netns = b->c.netns_fd >= 0 ? JAIL_NETNS_AHEAD : JAIL_NETNS_CLONE,
	    .netns_fd = b->c.netns_fd,
	    .root = JAIL_ROOT_BUILD,
	    .cwd = b->c.cwd,
	    .oci = &b->c.oci,
	};

	if (b->c.cfg.tty)
		ctx.stdio[0] = ctx.stdio[1] = ctx.stdio[2] = -1;
	if (start_gateway(b, err) < 0)
		return -1;
	ctx.net_link = b->gw != NULL;
	ctx.ca_pem = gw_client_ca_pem(b->gw);
	if (make_gate(b, base, err) < 0 ||
	    jail_cgroup_create(b->st.cgroup, &b->c.cfg, &b->cg, err) < 0)
		return -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, b->sync) < 0)
		return al_error_set(err, errno, "socketpair");
	ctx.sync_fd = b->sync[1];
	if (jail_clone(&ctx, b->cg, &b->pid, &b->pidfd, err) < 0)
		return -1;
	al_closep(&b->sync[1]);
	al_closep(&b->c.netns_fd); /* the child holds its own copy */
	al_closep(&b->c.oci.hold_fd);
	if (b->gw && gw_client_send_pid(b->gw, b->pid, err) < 0)
		return -1;
	/* v1: the freezer too, before anything of the container's runs (the child waits). */
	if (oci_freezer_join(b->st.cgroup, b->pid, err) < 0)
		return -1;
	if (jail_release_child(b->cg, b->pid, b->sync[0], -1, err) < 0 || drive(b, a, err) < 0)
		return -1;
	b->st.pid = b->pid;
	if (jail_proc_start_time(b->pid, &b->st.start_time) < 0)
		return al_error_msg(err, ESRCH, "the container's PID 1 is gone");
	return 0;
}

static void undo(struct building *b)
{
	if (b->pidfd >= 0) {
		sys_pidfd_send_signal(b->pidfd, SIGKILL);
		waitid(P_PIDFD, (id_t)b->pidfd, NULL, WEXITED);
	}
	jail_cgroup_destroy(b->cg);
	b->cg = NULL;
	oci_freezer_remove(b->st.cgroup);
	al_closep(&b->c.oci.hold_fd);
	gw_client_stop(b->gw); /* PID 1 and its copy of the channel are gone: it ends */
	b->gw = NULL;
	if (b->dir)
		oci_remove_dir(b->root, b->st.id);
}

static void building_free(struct building *b)
{
	al_closep(&b->sync[0]);
	al_closep(&b->sync[1]);
	al_closep(&b->pidfd);
	al_closep(&b->c.oci.gate_fd);
	al_closep(&b->c.oci.hold_fd);
	al_closep(&b->log_fd);
	gw_client_release(b->gw); /* it serves on, as long as PID 1 holds its channel */
	oci_config_free(&b->c);
	oci_state_free(&b->st);
	free(b->dir);
}

static void now_rfc3339(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + strlen(buf), len - strlen(buf), ".%09ldZ", ts.tv_nsec);
}

static int do_create(const struct oci_opts *o, const struct create_args *a, struct al_error **err)
{
	struct building b = {.sync = {-1, -1}, .pidfd = -1, .log_fd = -1};
	_cleanup_close_ int lock = oci_lock(o->root, true, err);
	char bundle[4096];
	int r = -1;

	if (lock < 0)
		return -1;
	if (!oci_id_ok(a->id))
		return al_error_msg(err, EINVAL, "invalid container id '%s'", a->id);
	if (!realpath(a->bundle ? a->bundle : ".", bundle))
		return al_error_set(err, errno, "bundle '%s'", a->bundle ? a->bundle : ".");
	b.dir = oci_path(o->root, a->id, NULL);
	b.root = o->root;
	snprintf(b.st.id, sizeof(b.st.id), "%s", a->id);
	{
		_cleanup_free_ char *state = oci_path(o->root, a->id, "state.json");

		if (access(state, F_OK) == 0) {
			free(b.dir);
			return al_error_msg(err, EEXIST, "container with id %s already exists",
					    a->id);
		}
	}
	oci_remove_dir(o->root, a->id); /* what a create killed half-way may have left */
	if (oci_config_load(bundle, &b.c, err) < 0 || oci_slot_alloc(o->root, &b.st.slot, err) < 0)
		goto out;
	if (mkdir(b.dir, 0700) < 0) {
		al_error_set(err, errno, "mkdir '%s'", b.dir);
		free(b.dir);
		b.dir = NULL;
		goto out;
	}
	snprintf(b.st.bundle, sizeof(b.st.bundle), "%s", bundle);
	snprintf(b.st.rootfs, sizeof(b.st.rootfs), "%s", b.c.rootfs);
	/* Unique per state root too: podman's and containerd's may both hold an ID. */
	snprintf(b.st.cgroup, sizeof(b.st.cgroup), "oci-%08x-%.128s",
		 jail_fnv(2166136261u, o->root, strlen(o->root)), a->id);
	now_rfc3339(b.st.created, sizeof(b.st.created));
	b.st.annotations = json_incref(json_object_get(b.c.doc, "annotations"));
	if (spawn(&b, a, err) < 0 || oci_state_save(o->root, &b.st, err) < 0 ||
	    (a->pid_file && oci_write_pid_file(a->pid_file, b.pid, err) < 0))
		goto out;
	jail_cgroup_forget(b.cg); /* the container's now; delete removes it */
	b.cg = NULL;
	r = 0;
out:
	if (r < 0)
		undo(&b);
	building_free(&b);
	return r;
}

int oci_create(const struct oci_opts *o, int argc, char **argv)
{
	struct create_args a = {0};
	_cleanup_error_ struct al_error *err = NULL;
	int p = parse_create(argc, argv, &a);

	if (p == -2)
		return oci_fail(o, "--preserve-fds: no fd beyond stdio enters a sandbox");
	if (p < 0)
		return oci_fail(o, "usage: create [--bundle DIR] [--pid-file FILE] "
				   "[--console-socket PATH] ID");
	if (do_create(o, &a, &err) < 0)
		return oci_fail(o, "%s", err->msg);
	return 0;
}

/* Open the gate: PID 1 is blocked opening it for writing; it writes one byte once open. */
static int open_gate(const char *root, const struct oci_state *st, struct al_error **err)
{
	_cleanup_free_ char *fifo = oci_path(root, st->id, "exec.fifo");
	_cleanup_close_ int fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;

	if (fd < 0)
		return al_error_set(err, errno, "open '%s'", fifo);
	if (poll(&p, 1, 10000) != 1 || read(fd, &c, 1) != 1)
		return al_error_msg(err, ETIMEDOUT, "container %s did not start", st->id);
	unlink(fifo);
	return 0;
}

int oci_start(const struct oci_opts *o, int argc, char **argv)
{
	_cleanup_error_ struct al_error *err = NULL;
	_cleanup_close_ int lock = -1;
	struct oci_state st;
	const char *status;
	int r;

	if (argc != 2)
		return oci_fail(o, "usage: start ID");
	lock = oci_lock(o->root, true, &err);
	if (lock < 0 || oci_state_load(o->root, argv[1], &st, &err) < 0)
		return oci_fail(o, "%s", err->msg);
	status = oci_status(o->root, &st);
	if (strcmp(status, "created") != 0) {
		oci_state_free(&st);
		return oci_fail(o, "cannot start a container that has %s",
				strcmp(status, "stopped") == 0 ? "stopped" : "already started");
	}
	r = open_gate(o->root, &st, &err);
	oci_state_free(&st);
	return r < 0 ? oci_fail(o, "%s", err->msg) : 0;
}
