/* SPDX-License-Identifier: MIT */
/* Parent-side primitives shared by one-shot runs (run.c) and daemon sandboxes (sandbox.c). */
#include "jail/jail.h"
#include "common/proc.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/*
 * In the child, first thing: nothing of the caller's but what the set-up needs. Whatever
 * airlock inherited without FD_CLOEXEC (a caller's open file, a pipe, its stdio) would
 * otherwise stay open in the sandbox's PID 1 for the sandbox's whole life. 0..2 not in
 * use become /dev/null (the host's, opened before the root changes): a later open never
 * lands there by accident. A failure ends the child, saying why (nothing of the sandbox's
 * has run).
 */
static void keep_only_our_fds(const struct jail_ctx *ctx)
{
	struct al_error *err = NULL;
	int keep[14], n = 0, null_fd;
	unsigned next = 3;

	keep[n++] = ctx->sync_fd;
	for (int i = 0; i < 3; i++)
		keep[n++] = ctx->stdio[i];
	keep[n++] = ctx->netns == JAIL_NETNS_AHEAD ? ctx->netns_fd : -1;
	keep[n++] = jail_ipc_join_fd(ctx);
	keep[n++] = ctx->root != JAIL_ROOT_BUILD ? ctx->mntns_fd : -1;
	keep[n++] = ctx->agent_path ? ctx->agent_fd : -1; /* a one-shot's are 0, not set */
	keep[n++] = ctx->agent_path ? ctx->listen_fd : -1;
	keep[n++] = ctx->prepared ? ctx->landlock_fd : -1;
	keep[n++] = ctx->oci ? ctx->oci->gate_fd : -1; /* an OCI container's (container.c) */
	keep[n++] = ctx->oci ? ctx->oci->hold_fd : -1;
	keep[n++] = ctx->oci ? ctx->oci->uts_fd : -1;
	qsort(keep, (size_t)n, sizeof(keep[0]), cmp_int);
	for (int i = 0; i < n; i++) {
		if (keep[i] < (int)next)
			continue; /* -1, a duplicate, or one of 0..2 */
		if (keep[i] > (int)next && sys_close_range(next, (unsigned)keep[i] - 1, 0) < 0)
			goto fail;
		next = (unsigned)keep[i] + 1;
	}
	if (sys_close_range(next, ~0U, 0) < 0)
		goto fail;
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3; fd++) {
		bool used = false;

		for (int i = 0; i < n; i++)
			used |= keep[i] == fd;
		if (!used && (null_fd < 0 || (null_fd != fd && dup2(null_fd, fd) < 0)))
			goto fail;
	}
	if (null_fd > 2)
		close(null_fd);
	return;
fail:
	al_error_set(&err, errno, "close the caller's file descriptors in the sandbox");
	jail_child_fail(ctx->sync_fd, err);
}

int jail_clone(struct jail_ctx *ctx, struct jail_cgroup *cg, pid_t *pid_out, int *pidfd_out,
	       struct al_error **err)
{
	struct al_clone_args args = {
	    .flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
		     AL_CLONE_NEWTIME | CLONE_PIDFD,
	    .pidfd = (uint64_t)(uintptr_t)pidfd_out,
	    .exit_signal = SIGCHLD,
	};
	int cgfd = jail_cgroup_clone_fd(cg);
	pid_t pid;

	if (ctx->netns != JAIL_NETNS_CLONE) /* the child joins it (child.c, C4, C5b) */
		args.flags &= ~(uint64_t)CLONE_NEWNET;
	if (ctx->root != JAIL_ROOT_BUILD) /* the child joins it (child.c, C5) */
		args.flags &= ~(uint64_t)CLONE_NEWNS;
	if (jail_ipc_join_fd(ctx) >= 0) /* an OCI pod's, or one made ahead (child.c, C4) */
		args.flags &= ~(uint64_t)CLONE_NEWIPC;
	if (ctx->oci && ctx->oci->uts_fd >= 0)
		args.flags &= ~(uint64_t)CLONE_NEWUTS;
	if (ctx->clone_parent) { /* clone3 wants no exit signal then: reap with __WALL */
		args.flags |= CLONE_PARENT;
		args.exit_signal = 0;
	}
	if (cgfd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgfd;
	}
	pid = sys_clone3(&args);
	if (pid < 0)
		return al_error_set(err, errno, "clone3 (new namespaces)");
	if (pid == 0) {
		/* Child: only our fds (the parent's ends go too), then the ordered set-up
		 * (never returns). */
		keep_only_our_fds(ctx);
		jail_child_main(ctx);
	}
	*pid_out = pid;
	return 0;
}

void jail_note_cpus(struct jail_ctx *ctx, int crowd_fd)
{
	unsigned n;

	ctx->cpus_moved = false;
	if (sched_getaffinity(0, sizeof(ctx->cpus), &ctx->cpus) < 0)
		return;
	n = (unsigned)CPU_COUNT(&ctx->cpus);
	ctx->cpus_moved = n > 1 && !jail_crowd_full(crowd_fd, n, true);
}

void jail_child_elsewhere(const struct jail_ctx *ctx, pid_t pid)
{
	if (ctx->cpus_moved)
		al_cpu_move_off_here(&ctx->cpus, pid);
}

int jail_release_child(struct jail_cgroup *cg, pid_t pid, int sync_fd, int pass_fd,
		       struct al_error **err)
{
	struct jail_msg go = {.type = JMSG_GO};

	int r = jail_cgroup_attach(cg, pid, err);

	if (r == 0 && jail_msg_send(sync_fd, &go, pass_fd) < 0)
		r = al_error_set(err, errno ? errno : EPIPE, "sync with the sandbox");
	if (r < 0)
		jail_take_child_error(sync_fd, err);
	return r < 0 ? -1 : 0;
}

int jail_write_idmaps(pid_t pid, uid_t base, struct al_error **err)
{
	static const char *const files[] = {"uid_map", "gid_map"};
	char path[64], map[64];
	int len = snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)base, JAIL_UID_RANGE);

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		_cleanup_close_ int fd = -1;

		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, map, (size_t)len) != len)
			return al_error_set(err, errno, "write '%s'", path);
	}
	return 0;
}
