/* SPDX-License-Identifier: MIT */
/*
 * Daemon sandboxes: spawn a long-lived sandbox whose PID 1 is airlock-agent.
 *
 * Call this from a single-threaded process (the daemon forks a spawner for
 * it): the child of clone3 allocates memory, which is only safe when no
 * other thread can hold the allocator's locks. The sandbox does not depend
 * on its spawner: PID 1 is reparented to the nearest subreaper (the daemon)
 * when the spawner exits, and it survives the daemon too.
 */
#include "jail/jail.h"
#include "jail/sandbox.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Field 22 of /proc/PID/stat: start time in clock ticks since boot. */
int jail_proc_start_time(pid_t pid, uint64_t *out)
{
	char path[64], buf[1024], *p;
	_cleanup_close_ int fd = -1;
	ssize_t n;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (n = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return -ESRCH;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
	if (!p)
		return -EINVAL;
	for (field = 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	*out = strtoull(p, NULL, 10);
	return 0;
}

/* Answer the child's IDMAP request; succeed when the sync socket closes at the agent's exec
 * (and PID 1 is still alive: a crash closes the socket too). */
static int drive_setup(int sync_fd, pid_t pid, int pidfd, uid_t base, struct al_error **err)
{
	struct jail_msg m;
	int fd, r;

	for (;;) {
		r = jail_msg_recv(sync_fd, &m, &fd);
		if (fd >= 0)
			close(fd);
		if (r == 0) {
			struct pollfd pf = {.fd = pidfd, .events = POLLIN};

			/* EOF: close-on-exec fired and the agent runs -- unless PID 1 died (its
			 * pidfd is readable; this works whoever its parent is, see CLONE_PARENT).
			 */
			if (poll(&pf, 1, 0) == 1)
				return al_error_msg(err, ECHILD,
						    "the sandbox's PID 1 died during set-up");
			return 0;
		}
		if (r < 0)
			return al_error_set(err, -r, "sandbox set-up channel");
		if (m.type == JMSG_ERROR)
			return al_error_from(err, m.code, m.text);
		if (m.type == JMSG_IDMAP) {
			struct jail_msg go = {.type = JMSG_GO};

			if (jail_write_idmaps(pid, base, err) < 0)
				return -1;
			if (jail_msg_send(sync_fd, &go, -1) < 0)
				return al_error_msg(err, EPIPE, "sandbox set-up channel");
		}
	}
}

int jail_sandbox_spawn(const struct jail_sandbox_spec *spec, struct jail_sandbox_info *info,
		       struct al_error **err)
{
	struct jail_ctx ctx = {
	    .cfg = spec->cfg,
	    .host_base = spec->host_base,
	    .uid = JAIL_USER_UID,
	    .stdio = {-1, -1, -1},
	    .agent_path = spec->agent_path,
	    .agent_sock = spec->agent_sock,
	    .agent_fd = -1,
	    .listen_fd = -1,
	    .clone_parent = spec->parent_is_ours,
	    .netns = spec->netns_ahead ? JAIL_NETNS_AHEAD : JAIL_NETNS_CLONE,
	    .netns_fd = spec->netns_fd,
	    .ipc_ahead = spec->ipcns_ahead,
	    .ipcns_fd = spec->ipcns_fd,
	    .root = spec->mntns_ahead && jail_rootfs_can_ahead(spec->cfg) ? JAIL_ROOT_AHEAD
									  : JAIL_ROOT_BUILD,
	    .mntns_fd = spec->mntns_fd,
	    .etc_shared = spec->etc_shared,
	};
	struct jail_cgroup *cg = NULL;
	int sync[2] = {-1, -1}, pidfd = -1, r;
	pid_t pid = -1;

	/* A cgroup made ahead is renamed (~0.15 ms less than three mkdirs and the limits);
	 * if that fails, it goes and the usual one is made. */
	if (spec->cgroup_ahead &&
	    jail_cgroup_take(spec->cgroup_ahead, spec->cgroup_name, spec->cfg, NULL) == 0) {
		cg = spec->cgroup_ahead;
	} else {
		jail_cgroup_destroy_now(spec->cgroup_ahead);
		if (jail_cgroup_create(spec->cgroup_name, spec->cfg, &cg, err) < 0)
			return -1;
	}
	/* Here, in the host's network namespace: see child.c, C4b. */
	if (jail_agent_prepare(&ctx, err) < 0) {
		r = -1;
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0) {
		r = al_error_set(err, errno, "socketpair");
		goto fail;
	}
	ctx.sync_fd = sync[1];
	r = jail_clone(&ctx, cg, &pid, &pidfd, err);
	al_closep(&sync[1]);
	if (r == 0)
		r = jail_release_child(cg, pid, sync[0], -1, err);
	if (r == 0)
		r = drive_setup(sync[0], pid, pidfd, spec->host_base, err);
	al_closep(&sync[0]);
	if (r < 0)
		goto fail;
	info->pid = pid;
	if (jail_proc_start_time(pid, &info->start_time) < 0)
		info->start_time = 0;
	al_closep(&pidfd);
	al_closep(&ctx.agent_fd);
	al_closep(&ctx.listen_fd);
	jail_cgroup_forget(cg); /* the cgroup lives on with the sandbox */
	return 0;
fail:
	al_closep(&ctx.agent_fd);
	al_closep(&ctx.listen_fd);
	if (pidfd >= 0) {
		sys_pidfd_send_signal(pidfd, SIGKILL);
		waitid(P_PIDFD, (id_t)pidfd, NULL, WEXITED);
		close(pidfd);
	}
	al_closep(&sync[0]);
	jail_cgroup_destroy(cg);
	return al_error_wrap(err, "starting sandbox");
}

void jail_sandbox_end(pid_t pid, uint64_t start_time)
{
	jail_sandbox_end_held(pid, start_time, NULL, NULL, NULL);
}

void jail_sandbox_end_held(pid_t pid, uint64_t start_time, int *root, void (*meanwhile)(void *),
			   void *arg)
{
	int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	int mnt = -1;
	uint64_t st = 0;

	if (root)
		*root = -1;
	if (root && pidfd >= 0) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
		mnt = open(path, O_RDONLY | O_CLOEXEC);
	}
	/* Only if pid is still our PID 1, not a process that reused the number (checked after
	 * both opens: what they opened is that process's). */
	if (pidfd >= 0 && jail_proc_start_time(pid, &st) == 0 && st == start_time) {
		struct pollfd p = {.fd = pidfd, .events = POLLIN};

		sys_pidfd_send_signal(pidfd, SIGKILL);
		if (meanwhile)
			meanwhile(arg);
		meanwhile = NULL;
		poll(&p, 1, 5000); /* readable once PID 1 (and so its whole namespace) is gone */
		if (root)
			*root = TAKE_FD(mnt);
	}
	if (meanwhile)
		meanwhile(arg);
	if (mnt >= 0)
		close(mnt);
	if (pidfd >= 0)
		close(pidfd);
}

int jail_sandbox_kill(pid_t pid, uint64_t start_time, const char *cgroup_name)
{
	struct jail_cgroup *cg;

	jail_sandbox_end(pid, start_time);
	cg = jail_cgroup_open(cgroup_name);
	jail_cgroup_kill(cg);
	return jail_cgroup_destroy(cg);
}

int jail_sandbox_reclaim(const char *cgroup_name)
{
	struct jail_cgroup *cg = jail_cgroup_open(cgroup_name);

	jail_cgroup_kill(cg);
	return jail_cgroup_destroy_now(cg);
}

void jail_sandbox_stats(const char *cgroup_name, uint64_t *peak, uint64_t *oom_kills)
{
	struct jail_cgroup *cg = jail_cgroup_open(cgroup_name);

	jail_cgroup_stats(cg, peak, oom_kills);
	jail_cgroup_forget(cg);
}

int jail_sandbox_set_limits(const char *cgroup_name, const struct al_config *cfg,
			    struct al_error **err)
{
	return jail_cgroup_set_limits(cgroup_name, cfg, err);
}
