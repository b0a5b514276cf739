/* SPDX-License-Identifier: MIT */
/* The jail backend: internal interface shared by its files. */
#ifndef AL_JAIL_JAIL_H
#define AL_JAIL_JAIL_H

#include <airlock/airlock.h>
#include <sched.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <time.h>

#include "common/syscalls.h"

#define JAIL_UID_RANGE 65536u
#define JAIL_USER_UID 1000u
#define JAIL_HOME "/home/user"
#define JAIL_HOSTNAME_DEFAULT "sandbox"
#define JAIL_DISK_DEFAULT (1ULL << 30) /* the root tmpfs without --disk */

struct jail_cgroup;

#define JAIL_OCI_MOUNTS_MAX 64 /* mounts of an OCI container's config beyond ours */

/* A mount an OCI container's config asks for, beyond the sandbox's own (oci_mounts.c).
 * The caller vetted the source; the child opens it in its own mount namespace and checks
 * again what it opened. */
struct jail_mount {
	const char *src;     /* bind: the host file or directory; NULL for tmpfs */
	const char *dst;     /* normal form, absolute, inside the sandbox */
	bool dir;	     /* the target is a directory (tmpfs always) */
	bool rdonly;	     /* read-only (every mount is nosuid and nodev) */
	bool recursive;	     /* rbind: the source's submounts too, each checked as it is */
	uint64_t tmpfs_size; /* tmpfs: its size in bytes */
};

/* An rlimit an OCI container's config asks for. */
struct jail_rlimit {
	int resource;
	uint64_t soft, hard;
};

/* What an OCI container (container.c, src/oci/) asks of the jail beyond a one-shot's. */
struct jail_oci {
	int gate_fd; /* O_PATH of the start FIFO: PID 1 reports JMSG_READY, then starts the
		      * workload only once it can open it for writing (at `start`) */
	int hold_fd; /* -1, or an fd PID 1 keeps for its whole life (its gateway's control
		      * socket: the gateway ends with the container) and never passes on */
	int ipc_fd;  /* -1, or an IPC namespace to join instead of a new one */
	int uts_fd;  /* -1, or a UTS namespace to join (its hostname is left alone) */
	gid_t gid;   /* the workload's gid (its uid is ctx->uid) and supplementary gids */
	const gid_t *groups;
	size_t n_groups;
	uint64_t caps; /* the capabilities the config grants: the workload keeps only those of
			* ours (security.c) that are here too */
	const struct jail_mount *mounts;
	size_t n_mounts;
	const void *seccomp; /* a struct sock_fprog installed after ours, or NULL */
	/* process.rlimits: each only ever lowers what the sandbox has (init.c) */
	const struct jail_rlimit *rlimits;
	size_t n_rlimits;
	/* linux.maskedPaths and readonlyPaths in /proc (normal form; others are ignored: there
	 * is no /sys), in addition to airlock's own masking (rootfs.c) */
	const char *const *masked;
	size_t n_masked;
	const char *const *readonly;
	size_t n_readonly;
	/* root.readonly false: the image's top-level entries come from an overlay whose lower
	 * is the image (idmapped, never written) and whose upper is a tmpfs of root_size
	 * bytes (oci_root.c); else they are bound read-only */
	bool writable_root;
	uint64_t root_size;
};

/* Everything the child needs, prepared by the parent before clone. */
/* Where a sandbox's root comes from (child.c, C5). */
enum jail_root {
	JAIL_ROOT_BUILD,    /* a new mount namespace, the root built in it */
	JAIL_ROOT_AHEAD,    /* join mntns_fd, a root made ahead for this configuration
			     * (jail_rootfs_ahead), and finish it */
	JAIL_ROOT_TEMPLATE, /* join mntns_fd, a read-only root template (template.c), take a
			     * private copy and add the sandbox's own parts
			     * (jail_rootfs_enter_template) */
};

/* Where a sandbox's network namespace comes from (child.c, C4 and C5b). */
enum jail_netns {
	JAIL_NETNS_CLONE, /* the clone makes it; the child brings loopback up */
	JAIL_NETNS_AHEAD, /* join netns_fd, a fresh one made ahead (jail_netns_make) */
	JAIL_NETNS_LATER, /* cloned without CLONE_NEWNET: the parent makes it (loopback up)
			   * while the child builds its root, and sends it with GO */
};

struct jail_ctx {
	const struct al_config *cfg;
	uid_t host_base; /* inside uid/gid 0 maps to this host id; the range is JAIL_UID_RANGE */
	uid_t uid;	 /* the workload's uid/gid inside (JAIL_USER_UID, or 0 with --root) */
	char **envp;	 /* the workload's complete environment */
	int sync_fd;	 /* child's end of the sync socket */
	int stdio[3];	 /* child's ends of the stdio pipes (-1 in tty mode: the PTY is used) */
	struct winsize winsz;  /* initial PTY size */
	bool net_link;	       /* the sandbox has a link to its gateway (eth0) */
	bool link_ready;       /* JMSG_LINK came: the gateway made and configured eth0 */
	const char *ca_pem;    /* the sandbox CA to trust (TLS termination), or NULL */
	bool clone_parent;     /* PID 1 is our parent's child, not ours (CLONE_PARENT) */
	enum jail_netns netns; /* where its network namespace comes from */
	int netns_fd;	       /* JAIL_NETNS_AHEAD: the namespace to join */
	bool ipc_ahead;	       /* join ipcns_fd, a fresh IPC namespace made ahead */
	int ipcns_fd;	       /* (jail_ipcns_make), instead of one the clone makes */
	enum jail_root root;   /* where its root comes from */
	int mntns_fd;	       /* JAIL_ROOT_AHEAD, JAIL_ROOT_TEMPLATE: the namespace to join */
	bool cpus_moved;       /* the parent moved us off its CPU for the set-up: take back */
	cpu_set_t cpus;	       /* these (the parent's own) at GO (jail_child_elsewhere) */
	const char *cg_memory; /* v1 one-shot: make and join this memory cgroup (C4c) */
	/* A directory only root can reach (a daemon's), where generated /etc files that never
	 * change after set-up are kept once, by content, and bound read-only into each root
	 * (rootfs.c, put_etc_file); NULL: each root gets copies of its own. */
	const char *etc_shared;

	/* Daemon sandboxes: PID 1 execs the agent instead of running a command. */
	const char *agent_path; /* NULL for one-shot runs */
	const char *agent_sock; /* host path of the agent's listening socket */
	int agent_fd;		/* set in the child: the agent binary, for fexecve */
	int listen_fd;		/* set in the child: the agent's listening socket */
	const char *cwd;	/* agent commands: chdir here before exec (NULL: keep) */
	/* Heap copies made by PID 1 before it wipes its inherited argv area (child.c). */
	char **argv;	     /* NULL: cfg->argv */
	const char *workdir; /* NULL: cfg->workdir */
	/* Work done once ahead by a long-lived parent (the agent), not per workload: no
	 * signal ignored, the bounding set cut to the --root caps, the Landlock ruleset built
	 * (landlock_fd; -1: no Landlock here; not 0..3, which become stdio and the
	 * exec-error pipe). */
	bool prepared;
	int landlock_fd;
	/* The parent (the agent) already runs under the workload's seccomp filter, which
	 * every child inherits: installing it again would only stack a second copy. */
	bool seccomp_held;
	/* An OCI container (NULL otherwise): PID 1 outlives its starter (no death signal, no
	 * sync socket after JMSG_READY), forwards signals to the workload and exits with its
	 * status (init.c). */
	const struct jail_oci *oci;
};

/* The IPC namespace the child joins instead of one its clone makes (an OCI pod's, or one
 * made ahead: jail_ipcns_make), or -1. */
static inline int jail_ipc_join_fd(const struct jail_ctx *ctx)
{
	if (ctx->oci && ctx->oci->ipc_fd >= 0)
		return ctx->oci->ipc_fd;
	return ctx->ipc_ahead ? ctx->ipcns_fd : -1;
}

/* FNV-1a over n bytes, from h (2166136261u to start): names of things made ahead. */
static inline uint32_t jail_fnv(uint32_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

/* The monotonic clock in milliseconds (timeouts, durations). */
static inline double jail_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* spawn.c: clone the child into its namespaces (and cgroup on v2); the child closes every
 * fd but ctx's own (the parent's ends among them) and runs jail_child_main(ctx). */
int jail_clone(struct jail_ctx *ctx, struct jail_cgroup *cg, pid_t *pid_out, int *pidfd_out,
	       struct al_error **err);
/* spawn.c: before the clone, note the caller's CPUs in ctx; after it, move the child to
 * the others for its set-up, which overlaps the parent's work (the cgroups on v1, the
 * network namespace) instead of waiting behind it on one CPU. The child takes the
 * caller's CPUs back at GO, before anything of the sandbox's runs. Nothing happens with
 * a single CPU, nor when the one-shot launches under way (crowd_fd, below) already
 * number as many as the CPUs: the others are busy then, and the move only costs. */
void jail_note_cpus(struct jail_ctx *ctx, int crowd_fd);
void jail_child_elsewhere(const struct jail_ctx *ctx, pid_t pid);
/* crowd.c: the one-shot launches under way on this host. Join: hold a slot of `path`
 * (a POSIX lock the kernel drops when this process ends; none if 16 tries find theirs
 * taken) and return its fd, or -1 if the file cannot be opened (then none are counted).
 * Others: how many other launches hold one, counted up to `enough`. */
#define JAIL_CROWD_FILE "/run/airlock/launches"
/* Generated /etc files daemon sandboxes share, bound read-only (rootfs.c, put_etc_file). */
#define JAIL_ETC_SHARED "/run/airlock/etc"
int jail_crowd_join(const char *path);
unsigned jail_crowd_others(int fd, unsigned enough);
/* Do the launches under way fill `cpus` CPUs (0: unknown, never full)? `counted`: we hold
 * a slot ourselves (then at least one other is needed even with one CPU). */
bool jail_crowd_full(int fd, unsigned cpus, bool counted);
/* The CPUs this process may run on, or 0. */
unsigned jail_crowd_cpus(void);
/* spawn.c: cgroup v1 attach, then tell the child to go on. */
int jail_release_child(struct jail_cgroup *cg, pid_t pid, int sync_fd, int pass_fd,
		       struct al_error **err);
/* spawn.c: uid_map/gid_map of the child's user namespace: 0..65535 -> base.. */
int jail_write_idmaps(pid_t pid, uid_t base, struct al_error **err);

/* userns.c, in the child: the sandbox's rlimits, then its user namespace, made as its own
 * host uid (ctx->host_base) so that the kernel's per-user counts of what happens inside
 * end there and not at host root's (as root where the host refuses that). */
#define JAIL_RLIMIT_SIGPENDING 4096u /* queued signals of the whole sandbox */
#define JAIL_RLIMIT_MSGQUEUE 819200u /* POSIX message-queue bytes (the kernel's default) */
#define JAIL_RLIMIT_NOFILE 65536u    /* open files a process (soft and hard) */
int jail_userns_enter(const struct jail_ctx *ctx, struct al_error **err);

/* child.c: the ordered set-up inside the clone; never returns. */
__attribute__((noreturn)) void jail_child_main(struct jail_ctx *ctx);
/* msg.c: wait for the parent's message `want` (a JMSG_LINK on the way is noted in ctx). */
int jail_wait_msg(struct jail_ctx *ctx, uint32_t want, struct al_error **err);
/* The same, keeping an fd that came with it (*fd: -1 if none). */
int jail_wait_msg_fd(struct jail_ctx *ctx, uint32_t want, int *fd, struct al_error **err);
/* msg.c: with a network link, wait for JMSG_LINK (unless it came already). */
int jail_wait_link(struct jail_ctx *ctx, struct al_error **err);

/* rootfs.c: build the sandbox's root under a fresh tmpfs and pivot into it. */
int jail_rootfs_build(struct jail_ctx *ctx, struct al_error **err);
/* rootfs.c: whether a root for cfg can be made ahead: the host runtime, the default
 * workdir, no --file copies. */
bool jail_rootfs_can_ahead(const struct al_config *cfg);
/* rootfs.c, in a long-lived single-threaded parent (the daemon's spawner): a new mount
 * namespace holding the root jail_rootfs_build would make for ctx, already pivoted into,
 * but without /proc (it belongs to the sandbox's pid namespace) and with the writable
 * places still owned by host root (the owner is known per sandbox). The caller is back in
 * its own namespace on return: 0 and *out, or -1 (nothing made); JAIL_NS_STRANDED: it
 * could not go back, and the process must end. Each one is for one sandbox only. */
int jail_rootfs_ahead(const struct jail_ctx *ctx, int *out, struct al_error **err);
/* rootfs.c, in the child instead of jail_rootfs_build: join that namespace, give the
 * writable places to the sandbox user, mount /proc, chdir to /workspace. */
int jail_rootfs_enter_ahead(struct jail_ctx *ctx, int mntns_fd, struct al_error **err);

/* oci_mounts.c: an OCI container's mounts (ctx->oci): open the bind sources (fds[i], -1
 * for a tmpfs) while the host's tree is still there, then mount them all under the new
 * root at root_fd. */
int jail_oci_mounts_open(const struct jail_ctx *ctx, int *fds, struct al_error **err);
int jail_oci_mounts(int root_fd, const struct jail_ctx *ctx, const int *fds, struct al_error **err);
/* oci_mounts.c: is fd on a kernel filesystem (proc, sysfs, cgroup, ...), whose files are
 * handles on the host? */
bool jail_kernel_fs(int fd);
/* oci_mounts.c: ctx->oci's masked and read-only /proc paths, /proc being at top/proc. */
int jail_oci_proc_paths(const char *top, const struct jail_ctx *ctx, struct al_error **err);
/* oci_root.c: an OCI container's writable root (ctx->oci->writable_root). _open: the image's
 * layers (image_fd, or the layers of an engine's overlay), idmapped clones, while host paths
 * are still reachable (none for a read-only root). _overlay: an overlay of them and a private
 * tmpfs, made under stage_fd (at stage, the new root being built); *merged gets an O_PATH fd
 * on it. _hide detaches what it left under stage (the overlay lives on through what was
 * bound from it). */
#define JAIL_OCI_LAYERS_MAX 128
struct jail_oci_root {
	int trees[JAIL_OCI_LAYERS_MAX];
	size_t n;
};
int jail_oci_root_open(const struct jail_ctx *ctx, int image_fd, struct jail_oci_root *root,
		       struct al_error **err);
void jail_oci_root_close(struct jail_oci_root *root);
int jail_oci_root_overlay(const struct jail_ctx *ctx, const char *stage, int stage_fd,
			  const struct jail_oci_root *root, int *merged, struct al_error **err);
int jail_oci_root_hide(const char *stage, int stage_fd, struct al_error **err);

/* pin.c: keep namespace ns_fd at path (a new empty file, bind-mounted; removed again if the
 * mount fails). */
int jail_pin(int ns_fd, const char *path, struct al_error **err);
/* pin.c: unmount every layer of a pin at path, and remove its file. */
void jail_unpin(const char *path);
/* pin.c: only a directory of our own that no one else may write in holds pins to join. */
bool jail_dir_is_ours(const char *dir);
/* The next entry's name in d, skipping "." and ".." (and names longer than max: none of
 * ours); NULL at the end. */
const char *jail_next_entry(DIR *d, size_t max);
/* pin.c: the namespace pinned at path if it is one of this type (CLONE_NEW*), else -1. */
int jail_pin_open(const char *path, int type);

/* rootfs.c: the i-th host path the default runtime brings in, in buf; false past the last. */
bool jail_rootfs_host_path(size_t i, char *buf, size_t len);
/* rootfs.c: jail_rootfs_can_ahead and the default hostname: the root every such sandbox
 * has alike (what the pool's roots and the templates hold). */
bool jail_rootfs_is_default(const struct al_config *cfg);
/* rootfs.c, in a process of its own that stays there: a new mount namespace whose root is
 * the read-only skeleton every default one-shot shares (template.c). */
int jail_rootfs_template_make(bool net_link, struct al_error **err);
/* rootfs.c, in the child instead of jail_rootfs_build: a private copy of that namespace,
 * with the sandbox's own writable tmpfs, devpts and /proc. */
int jail_rootfs_enter_template(struct jail_ctx *ctx, int mntns_fd, struct al_error **err);

/* copy.c: create the absolute sandbox path dir (and parents) under root_fd without ever
 * following a symlink; the last component is owned by owner. Returns an O_PATH dir fd. */
int jail_mkdir_p(int root_fd, const char *path, uid_t owner, struct al_error **err);
/* copy.c: copy host file/dir (opened as src_fd) to dst inside root_fd, owned by uid:gid. */
int jail_copy_in(int src_fd, const char *src_name, int root_fd, const char *dst, uid_t uid,
		 gid_t gid, struct al_error **err);

/* agent_exec.c: in the child, daemon sandboxes only. */
int jail_agent_prepare(struct jail_ctx *ctx, struct al_error **err);
__attribute__((noreturn)) void jail_agent_exec(struct jail_ctx *ctx);

/* init.c: in a freshly forked workload process: wire stdio (ctx->stdio, or the PTY slave),
 * drop every privilege, exec ctx->cfg->argv with ctx->envp. On failure writes a
 * struct jail_exec_report to exec_pipe and exits. Never returns. */
__attribute__((noreturn)) void jail_exec_workload(const struct jail_ctx *ctx, int tty_slave,
						  int exec_pipe);

/* init.c: execvp as POSIX has it, whatever the libc: PATH search (default /usr/local/bin:/bin:
 * /usr/bin), EACCES if some candidate was not executable, and a file without a #! line run
 * by /bin/sh (glibc's execvp does it, musl's does not). Returns only on failure (errno).
 * Safe in a vfork child: nothing allocated (the sh argv is on the stack, so at most
 * JAIL_SH_MAX_ARGS arguments get that fallback). */
#define JAIL_SH_MAX_ARGS 1024
void jail_execvp(char *const argv[]);

/* init.c: every signal back to SIG_DFL (what exec would not do for ignored ones), glibc's
 * internal 32 and 33 included. */
void jail_reset_signals(void);

/* init.c: PID 1 of the sandbox: start the workload, wait, report; never returns. */
__attribute__((noreturn)) void jail_init_main(struct jail_ctx *ctx);

/* security.c: the last steps before exec, in the workload process. */
int jail_drop_privileges(const struct jail_ctx *ctx, struct al_error **err);
/* Drop from the bounding set every capability that not even a --root workload keeps. */
int jail_bset_limit(struct al_error **err);
/* Build the Landlock ruleset (writes under wd and the writable places); *fd_out is -1
 * when the kernel has no Landlock. */
int jail_landlock_build(const char *wd, int *fd_out, struct al_error **err);
int jail_landlock_apply(const struct jail_ctx *ctx, struct al_error **err);
/* Apply a built ruleset (-1: none, a no-op). */
int jail_landlock_restrict(int ruleset, struct al_error **err);
int jail_seccomp_install(struct al_error **err);
/* An OCI container's own filter (a struct sock_fprog), after ours; NULL: nothing. */
int jail_seccomp_install_extra(const void *prog, struct al_error **err);

/* netns.c */
int jail_loopback_up(struct al_error **err);
/* A fresh network namespace, its loopback up, for a sandbox to join later (the daemon's
 * spawner makes the next one while it waits for a create). The calling thread is back in
 * its own namespace on return: 0, or -1 (nothing made). JAIL_NS_STRANDED: it could not
 * go back, and the process must end (what it opens next would be inside the new one). */
#define JAIL_NS_STRANDED (-2)
int jail_netns_make(int *out, struct al_error **err);
/* The same for an IPC namespace (no SysV object, no message queue in it): a clone that
 * makes one spends ~60 us on it (its mqueue mount) on the create's path. */
int jail_ipcns_make(int *out, struct al_error **err);

/* cgroup.c: limits. v2 where the host has it, v1 otherwise. */
struct jail_cgroup;
/* Remove what one-shot runs killed before their clean-up left (run-<pid>-*, pid gone),
 * and the cgroups a dead spawner made ahead (ahead-<pid>-*). v1: read pids/ alone (the
 * marker of a run's cgroups while any is left), or every hierarchy if `full`. */
void jail_cgroup_sweep(bool full);
/* The daemon's side of the CPU hierarchy (cgroup.c): airlock/ (the sandboxes together)
 * and JAIL_CGROUP_DAEMON/ beside it get their weights (v1 cpu.shares, v2 cpu.weight), and
 * the calling process (with its threads, and what it forks from then on) joins the
 * latter. airlockd calls it once at start, before its threads. The _at form takes the
 * root and its version (tests). */
#define JAIL_CGROUP_DAEMON "airlockd"
#define JAIL_CGROUP_SANDBOXES_SHARES "1024"
#define JAIL_CGROUP_SANDBOXES_WEIGHT "100"
#define JAIL_CGROUP_DAEMON_SHARES "4096"
#define JAIL_CGROUP_DAEMON_WEIGHT "400"
int jail_cgroup_join_daemon(struct al_error **err);
int jail_cgroup_weigh_at(const char *root, bool v2, struct al_error **err);
/* True when the clone itself joins the cgroup (v2), which must then exist before it; on
 * v1 the parent may make the cgroups after the clone, while the child builds its root. */
bool jail_cgroup_at_clone(void);
/* Every sandbox's cgroup: memory, pids and cpu (v1: one directory each), under airlock/,
 * with cfg's limits. Its cpu weight is a new cgroup's default, the same for every
 * sandbox: they share the CPU evenly among themselves (jail_cgroup_join_daemon). */
int jail_cgroup_create(const char *name, const struct al_config *cfg, struct jail_cgroup **out,
		       struct al_error **err);
/* A one-shot's cgroups made in two halves, the child's set-up and the parent's at once
 * (v1 only: on v2 the clone joins one cgroup made before it): the parent makes pids/
 * and cpu/ with jail_cgroup_create_split and attaches the child to them; the child makes
 * memory/ at jail_cgroup_memory_path(name) with its limit and joins it itself,
 * jail_cgroup_join_memory, before anything of the sandbox's runs. An airlock killed
 * between the two can leave memory/ without its pids/ marker: the full sweep (every 64th
 * run, airlockd's start) removes it. */
char *jail_cgroup_memory_path(const char *name);
int jail_cgroup_create_split(const char *name, const struct al_config *cfg,
			     struct jail_cgroup **out, struct al_error **err);
int jail_cgroup_join_memory(const char *dir, const struct al_config *cfg, struct al_error **err);
/* rmdir a cgroup directory, retrying while its last task is still on its way out. */
void jail_cgroup_remove(const char *dir);
/* A directory fd for CLONE_INTO_CGROUP (v2), or -1 (v1: attach after clone). */
int jail_cgroup_clone_fd(const struct jail_cgroup *cg);
int jail_cgroup_attach(struct jail_cgroup *cg, pid_t pid, struct al_error **err);
void jail_cgroup_stats(struct jail_cgroup *cg, uint64_t *peak_bytes, uint64_t *oom_kills);
/* What sandboxes' cgroups use now, read through directory fds opened once (a scrape of
 * airlockd's metrics reads every sandbox's): jail_cgroup_usage gives the memory of the
 * cgroup `name` (v2 memory.current, v1 memory.usage_in_bytes) and its CPU time so far (v2
 * cpu.stat usage_usec; v1, where airlock keeps no cpuacct cgroup, the user+system time of
 * its live processes and of those they reaped, from /proc); -ENOENT when it is gone. */
struct jail_cgroup_reader;
struct jail_cgroup_reader *jail_cgroup_reader_open(void);
int jail_cgroup_usage(const struct jail_cgroup_reader *r, const char *name, uint64_t *memory_bytes,
		      uint64_t *cpu_ns);
void jail_cgroup_reader_close(struct jail_cgroup_reader *r);
void jail_cgroup_kill(struct jail_cgroup *cg);
/* A cgroup made ahead of need by a long-lived process (airlockd's spawner), with cfg's
 * limits, named ahead-<pid>-<n>; v1 only (v2 cannot rename: -1, ENOTSUP). */
int jail_cgroup_ahead(const struct al_config *cfg, struct jail_cgroup **out, struct al_error **err);
/* Make it name's (three renames) and give it cfg's limits where they differ. On failure
 * cg still names what is there, for jail_cgroup_destroy. */
int jail_cgroup_take(struct jail_cgroup *cg, const char *name, const struct al_config *cfg,
		     struct al_error **err);
/* A handle on an existing cgroup (a daemon sandbox's), without writing limits. */
struct jail_cgroup *jail_cgroup_open(const char *name);
/* Set (or lift) the memory, pids and CPU limits of an existing sandbox's cgroup. */
int jail_cgroup_set_limits(const char *name, const struct al_config *cfg, struct al_error **err);
/* Frees the handle, leaving the cgroup in place. */
void jail_cgroup_forget(struct jail_cgroup *cg);
/* Remove it (and free cg), waiting up to 1 s for its last tasks to leave; -1 if some
 * directory is still there. _now: one attempt, no wait. */
int jail_cgroup_destroy(struct jail_cgroup *cg);
int jail_cgroup_destroy_now(struct jail_cgroup *cg);

/* msg.c: the parent <-> child sync protocol (SOCK_SEQPACKET, one message per packet). */
enum jail_msg_type {
	JMSG_GO = 1, /* parent -> child: continue */
	JMSG_IDMAP,  /* child -> parent: I am in my user namespace, write my id maps */
	JMSG_ERROR,  /* child -> parent: set-up failed (code, text) */
	JMSG_PTY,    /* child -> parent: the PTY master travels as SCM_RIGHTS */
	JMSG_EXIT,   /* child -> parent: the workload ended (status, exec_errno) */
	JMSG_LINK,   /* parent -> child: the network link is made; may come before the
		      * GO that answers IDMAP */
	JMSG_READY,  /* child -> parent (OCI): set up, waiting at the start gate */
};

struct jail_msg {
	uint32_t type;
	int32_t code;
	int32_t status;
	int32_t exec_errno;
	char text[480];
};

/* What the workload writes to PID 1 when it could not exec (close-on-exec pipe). */
struct jail_exec_report {
	int32_t err; /* > 0: execve errno; < 0: -errno of a failed security step */
	char text[256];
};

int jail_msg_send(int fd, const struct jail_msg *m, int pass_fd);
/* Returns 1 with a message, 0 on EOF, <0 on error; *got_fd receives a passed fd or -1. */
int jail_msg_recv(int fd, struct jail_msg *m, int *got_fd);
/* In the child: report err to the parent and exit with AL_EXIT_SETUP. */
__attribute__((noreturn)) void jail_child_fail(int sync_fd, struct al_error *err);
/* Parent, after a step with the child failed: if the child had already failed (and gone),
 * the reason it sent replaces *err (the parent's own EPIPE or ESRCH says nothing). */
void jail_take_child_error(int sync_fd, struct al_error **err);

#endif
