/* SPDX-License-Identifier: MIT */
/* The jail backend's interface for daemon sandboxes (PID 1 = airlock-agent). */
#ifndef AL_JAIL_SANDBOX_H
#define AL_JAIL_SANDBOX_H

#include <airlock/airlock.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct jail_cgroup;

struct jail_sandbox_spec {
	const struct al_config *cfg;	  /* limits, image, workdir, hostname */
	const char *agent_path;		  /* the static airlock-agent binary on the host */
	const char *agent_sock;		  /* host path for the agent's listening socket */
	const char *cgroup_name;	  /* e.g. the sandbox id; created under airlock/ */
	uid_t host_base;		  /* first host id of the sandbox's 65536-id range */
	bool parent_is_ours;		  /* PID 1 becomes a child of our parent (CLONE_PARENT) */
	bool netns_ahead;		  /* PID 1 joins netns_fd (jail_netns_make; still ours to */
	int netns_fd;			  /* close) instead of a network namespace of its own */
	bool ipcns_ahead;		  /* PID 1 joins ipcns_fd (jail_ipcns_make; still ours to */
	int ipcns_fd;			  /* close) instead of an IPC namespace of its own */
	bool mntns_ahead;		  /* PID 1 joins mntns_fd, a root made ahead for this cfg */
	int mntns_fd;			  /* (jail_rootfs_ahead; still ours to close) */
	struct jail_cgroup *cgroup_ahead; /* NULL, or one made by jail_cgroup_ahead: the spawn
					   * renames it to cgroup_name or removes it */
	const char *etc_shared;		  /* NULL, or jail_ctx's etc_shared (jail.h) */
};

struct jail_sandbox_info {
	pid_t pid;	     /* host pid of PID 1 */
	uint64_t start_time; /* /proc/PID/stat field 22, to recognise it after a restart */
};

/* From a single-threaded process only (see sandbox.c). */
int jail_sandbox_spawn(const struct jail_sandbox_spec *spec, struct jail_sandbox_info *info,
		       struct al_error **err);
int jail_proc_start_time(pid_t pid, uint64_t *out);

/* Stop a sandbox: SIGKILL to PID 1 (after checking it is still the same process) takes the
 * whole pid namespace; then remove its cgroup. Safe to call for one already gone. -1 if
 * the cgroup is still there after ~1 s (its last tasks are slow to go: a sandbox killed
 * in the middle of an out-of-memory storm); jail_sandbox_reclaim tries again. */
int jail_sandbox_kill(pid_t pid, uint64_t start_time, const char *cgroup_name);
/* Only the first half of jail_sandbox_kill: SIGKILL to PID 1 if it is still the same
 * process, and wait (up to 5 s) until it and so its whole pid namespace are gone. The
 * cgroup is left for jail_sandbox_reclaim. */
void jail_sandbox_end(pid_t pid, uint64_t start_time);
/* The same, and *root (if PID 1 was still ours, else -1) holds the sandbox's mount
 * namespace: its mounts are not torn down as PID 1 exits but when *root is closed, so a
 * caller waiting for the end does not wait for that (~0.2 ms here) too. meanwhile (if not
 * NULL) is called once, with arg, after the SIGKILL (or once PID 1 is known gone) and before
 * the wait: work that must not wait for the end runs while the kernel tears it down. */
void jail_sandbox_end_held(pid_t pid, uint64_t start_time, int *root, void (*meanwhile)(void *),
			   void *arg);
/* One more attempt, without waiting, at removing what jail_sandbox_kill left: 0 once gone. */
int jail_sandbox_reclaim(const char *cgroup_name);
/* Set the memory, pids and CPU limits of a live sandbox (a warm one being handed out). */
int jail_sandbox_set_limits(const char *cgroup_name, const struct al_config *cfg,
			    struct al_error **err);
/* Peak memory and OOM kills of a live sandbox's cgroup (0 if unknown). */
void jail_sandbox_stats(const char *cgroup_name, uint64_t *peak, uint64_t *oom_kills);

#endif
