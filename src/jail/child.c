/* SPDX-License-Identifier: MIT */
/*
 * The jail's set-up sequence, in order, in one place. Order matters for
 * security; each step says why it sits where it does.
 *
 * The child starts as host root in fresh mount, pid, net, ipc and uts
 * namespaces that are owned by the host's initial user namespace. It builds
 * everything while it still has host privilege, then enters a new user
 * namespace of its own. So nothing inside the sandbox -- not even its uid 0
 * -- holds a capability over its mount, network, uts or ipc namespace: those
 * belong to a user namespace the sandbox is not in.
 *
 * Before C1 (spawn.c, jail_clone): every inherited fd closed but those the set-up needs;
 * 0..2 not needed become the host's /dev/null.
 *
 * Parent side (run.c):
 *   P1. v2: create the cgroup (the clone joins it)
 *   P2. clone3(NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWTIME [|INTO_CGROUP]) -> this child
 *   P3. v1: create the cgroups while the child builds its root (the child makes its
 *       memory one itself, C4c; the parent pids and cpu) (and, deny-all, the
 *       network namespace: JAIL_NETNS_LATER), attach the child; send GO (with that
 *       namespace). The child waits for it before its cgroup namespace, C5b: limits are
 *       in place before any sandbox code runs
 *   P5. on IDMAP: write uid_map/gid_map (0..65535 -> an unprivileged host range); send GO
 */
#include "jail/jail.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

extern char **environ;

static int wait_go(struct jail_ctx *ctx, struct al_error **err)
{
	return jail_wait_msg(ctx, JMSG_GO, err);
}

/* C5b's GO: with JAIL_NETNS_LATER, the network namespace the parent made comes with it. */
static int wait_go_join(struct jail_ctx *ctx, struct al_error **err)
{
	int fd = -1;

	if (ctx->netns != JAIL_NETNS_LATER)
		return wait_go(ctx, err);
	if (jail_wait_msg_fd(ctx, JMSG_GO, &fd, err) < 0)
		return -1;
	if (fd < 0)
		return al_error_msg(err, EPROTO, "GO came without the network namespace");
	if (setns(fd, CLONE_NEWNET) < 0) {
		int e = errno;

		close(fd);
		return al_error_set(err, e, "setns to the network namespace made meanwhile");
	}
	close(fd);
	return 0;
}

/*
 * PID 1 is a copy of airlock: its argv and environment areas hold the caller's
 * command line and environment, which /proc/1/cmdline shows to anyone inside
 * and /proc/1/environ to anyone who could read PID 1's memory. Wipe both
 * areas (bounds from /proc/self/stat fields 48-51) and leave a plain name.
 */
static void scrub_inherited_memory(void)
{
	char buf[2048], *p;
	unsigned long long v[4] = {0};
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), field;
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	environ = NULL;
	if (n <= 0)
		return;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	for (field = 2; p && *p && field < 52; p++) {
		if (*p != ' ')
			continue;
		field++;
		if (field >= 48 && field <= 51) /* arg_start arg_end env_start env_end */
			v[field - 48] = strtoull(p + 1, NULL, 10);
	}
	if (v[0] && v[1] > v[0] && v[1] - v[0] < (1u << 20)) {
		memset((void *)(uintptr_t)v[0], 0, (size_t)(v[1] - v[0]));
		strcpy((char *)(uintptr_t)v[0], "airlock-init");
	}
	if (v[2] && v[3] > v[2] && v[3] - v[2] < (64u << 20))
		memset((void *)(uintptr_t)v[2], 0, (size_t)(v[3] - v[2]));
}

/* What PID 1 still needs of the caller's argv area, copied before it is wiped. */
static void keep_copies(struct jail_ctx *ctx)
{
	size_t n = 0;

	while (ctx->cfg->argv && ctx->cfg->argv[n])
		n++;
	ctx->argv = xzalloc((n + 1) * sizeof(char *));
	for (size_t i = 0; i < n; i++)
		ctx->argv[i] = xstrdup(ctx->cfg->argv[i]);
	ctx->workdir = xstrdup(ctx->cfg->workdir ? ctx->cfg->workdir : "/workspace");
}

/*
 * C4. uts and net: a fixed hostname, loopback up, nothing else. A daemon sandbox
 *     joins the namespace its spawner made ahead for it (never entered before, its
 *     loopback up: jail_netns_make) instead of the one a clone would make. A deny-all
 *     one-shot may join a recycled one (jail/ahead/recycle.h): made the same way, by host
 *     root in the initial user namespace, for an earlier deny-all run, and found clean
 *     after it; here, before C6, we still hold host privilege, and the sandbox will hold
 *     none over it.
 */
static int child_uts_net(struct jail_ctx *ctx, struct al_error **err)
{
	const char *host = ctx->cfg->hostname ? ctx->cfg->hostname : JAIL_HOSTNAME_DEFAULT;
	int ipc = jail_ipc_join_fd(ctx);

	/* An OCI container of a pod joins its pod's IPC and UTS namespaces (made by our own
	 * clone for the pod's first container, src/oci/ checks); a joined UTS namespace keeps
	 * its hostname. A daemon sandbox joins the IPC namespace made ahead for it. */
	if (ipc >= 0 && setns(ipc, CLONE_NEWIPC) < 0)
		return al_error_set(err, errno, "setns to the IPC namespace given");
	if (ctx->ipc_ahead)
		close(ctx->ipcns_fd);
	if (ctx->oci && ctx->oci->uts_fd >= 0) {
		if (setns(ctx->oci->uts_fd, CLONE_NEWUTS) < 0)
			return al_error_set(err, errno, "setns to the UTS namespace given");
	} else if (sethostname(host, strlen(host)) < 0) {
		return al_error_set(err, errno, "sethostname");
	}
	switch (ctx->netns) {
	case JAIL_NETNS_AHEAD:
		if (setns(ctx->netns_fd, CLONE_NEWNET) < 0)
			return al_error_set(err, errno,
					    "setns to the network namespace made ahead");
		close(ctx->netns_fd);
		return 0;
	case JAIL_NETNS_CLONE:
		return jail_loopback_up(err) < 0 ? -1 : 0;
	case JAIL_NETNS_LATER:
		return 0; /* it comes with GO (C5b) */
	}
	return al_error_msg(err, EINVAL, "unknown network namespace mode %d", (int)ctx->netns);
}

/*
 * C5. The filesystem: fresh tmpfs root, read-only runtime, /proc, /dev, copies
 *     of --file sources, pivot_root, old root detached. A daemon sandbox may join a
 *     root its spawner made ahead for exactly this configuration (never entered by any
 *     sandbox before: jail_rootfs_ahead), and only finish it: owner, /proc. A one-shot
 *     with default settings gets a private copy of a read-only root template
 *     (template.c) and adds only its own parts: a writable tmpfs, devpts, /proc.
 */
static int child_rootfs(struct jail_ctx *ctx, struct al_error **err)
{
	int r;

	switch (ctx->root) {
	case JAIL_ROOT_AHEAD:
		r = jail_rootfs_enter_ahead(ctx, ctx->mntns_fd, err);
		close(ctx->mntns_fd);
		return r < 0 ? -1 : 0;
	case JAIL_ROOT_TEMPLATE:
		r = jail_rootfs_enter_template(ctx, ctx->mntns_fd, err);
		close(ctx->mntns_fd);
		return r < 0 ? -1 : 0;
	case JAIL_ROOT_BUILD:
		return jail_rootfs_build(ctx, err) < 0 ? -1 : 0;
	}
	return al_error_msg(err, EINVAL, "unknown root mode %d", (int)ctx->root);
}

/*
 * C5b. Wait until the parent has put us in our cgroups (v1: it makes and joins them
 *     while we build the above, on the other CPU), so that the cgroup namespace
 *     below is rooted at the sandbox's own cgroup. Nothing of the sandbox's has run
 *     yet: its limits are in place before its first instruction.
 */
static int child_enter_limits(struct jail_ctx *ctx, struct al_error **err)
{
	if (wait_go_join(ctx, err) < 0)
		return -1;
	if (ctx->cpus_moved && sched_setaffinity(0, sizeof(ctx->cpus), &ctx->cpus) < 0)
		return al_error_set(err, errno, "sched_setaffinity (the caller's CPUs)");
	if (unshare(CLONE_NEWCGROUP) < 0)
		return al_error_set(err, errno, "unshare(CLONE_NEWCGROUP)");
	return 0;
}

/*
 * C6. Leave host privilege for good: the sandbox's rlimits, then a new user namespace
 *     made as the sandbox's own host uid, not as root (userns.c: what the kernel
 *     counts per user inside ends at that uid, not at host root's), whose id maps
 *     the parent writes (we cannot map a range ourselves).
 */
static int child_leave_host_privilege(struct jail_ctx *ctx, struct al_error **err)
{
	struct jail_msg m = {.type = JMSG_IDMAP};

	if (jail_userns_enter(ctx, err) < 0)
		return -1;
	if (jail_msg_send(ctx->sync_fd, &m, -1) < 0 || wait_go(ctx, err) < 0) {
		if (!*err)
			al_error_msg(err, EPIPE, "sending IDMAP");
		return -1;
	}
	if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		return al_error_set(err, errno, "setresuid(0) in the sandbox user namespace");
	return 0;
}

/*
 * The steps in order; each helper above carries the reason for its place. Any
 * failure is reported to the parent over the sync socket and ends this process.
 */
void jail_child_main(struct jail_ctx *ctx)
{
	struct al_error *err = NULL;

	/* C1. A one-shot run dies with airlock (the death signal is cleared by the uid change
	 *     below; from then on the sync socket's EOF plays that role, see init.c). A daemon
	 *     sandbox must outlive its spawner and the daemon itself: no death signal. */
	if (!ctx->agent_path && !ctx->oci)
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* an OCI container outlives `create` too */
	/* C2. Own session: no controlling terminal of the caller's, no job-control signals. */
	setsid();
	/* C4. uts and net (child_uts_net). */
	if (child_uts_net(ctx, &err) < 0)
		jail_child_fail(ctx->sync_fd, err);

	/* C4c. A one-shot on cgroup v1: our memory cgroup, made with its limit and joined by
	 *      ourselves, while the parent makes the pids one (and the network namespace);
	 *      it attaches us there before GO (C5b). */
	if (ctx->cg_memory && jail_cgroup_join_memory(ctx->cg_memory, ctx->cfg, &err) < 0)
		jail_child_fail(ctx->sync_fd, err);

	/* C4b. Daemon sandboxes: the agent binary and its listening socket were opened by the
	 *      spawner, in the host's network namespace (so the socket's host path does not
	 *      show in the sandbox's /proc/net/unix); they cross into the sandbox as fds. */

	/* C5. The filesystem (child_rootfs). */
	if (child_rootfs(ctx, &err) < 0)
		jail_child_fail(ctx->sync_fd, err);

	/* C5b. The parent's GO: cgroups in place, then the cgroup namespace. */
	if (child_enter_limits(ctx, &err) < 0)
		jail_child_fail(ctx->sync_fd, err);

	/* C6. Leave host privilege for good (child_leave_host_privilege). */
	if (child_leave_host_privilege(ctx, &err) < 0)
		jail_child_fail(ctx->sync_fd, err);

	/* C7. PID 1 holds the caller's memory image: make it undumpable (no /proc/1/mem,
	 *     /proc/1/environ for anyone inside) and wipe the inherited environment. */
	prctl(PR_SET_DUMPABLE, 0);
	keep_copies(ctx);
	scrub_inherited_memory();

	/* C8. Become the sandbox's init: start the workload (which drops what is left:
	 *     caps, no_new_privs, Landlock, seccomp; security.c), wait, report. A daemon
	 *     sandbox execs the agent instead, which does the same for each command. */
	if (ctx->agent_path)
		jail_agent_exec(ctx);
	jail_init_main(ctx);
}
