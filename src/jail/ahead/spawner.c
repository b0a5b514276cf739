/* SPDX-License-Identifier: MIT */
/*
 * The sandbox spawner's serve loop (spawner.h). It runs the jail's spawn sequence, which
 * must run in a single-threaded process (its clone3 child goes on to malloc; glibc only
 * makes that safe across fork()), and is built into the static `airlock` binary, which
 * airlockd execs as its spawner: a clone3 from a process with airlockd's ~170 mappings
 * (libmicrohttpd, SQLite, libarchive, ICU...) copies them, and the agent's exec tears
 * them down again, ~0.5 ms of every create (docs/performance.md, "Spawner").
 */
#include "jail/ahead/spawner.h"
#include "jail/jail.h"
#include "jail/sandbox.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * What the next sandboxes need and no request changes, made while the spawner waits for a
 * create (together ~1.2 ms of a create's path here), each used by one sandbox only and
 * never entered before:
 *  - its network namespace: loopback up and nothing else;
 *  - its IPC namespace (empty; the clone's own mqueue mount took ~60 us of the create);
 *  - its root (jail_rootfs_ahead), for the settings of the last create (only for the
 *    host runtime and the default workdir): a create whose root differs
 *    (jail_spec_same_root) builds its own, and the next root is made for its settings;
 *  - on cgroup v1, its cgroups (jail_cgroup_ahead), with the last create's limits: the
 *    create renames them (and writes the limits that differ).
 * If one cannot be made, the sandbox makes its own as before; if the spawner could not
 * come back to the host's namespaces, it ends (the daemon forks another): the agents'
 * sockets must be made in the host's network namespace, and every host path lies in the
 * host's mount namespace.
 *
 * Up to AHEAD_SETS of each are kept, [0] going to the next create. The first is made as
 * soon as a create took the last one; the spare only once no create came for
 * AHEAD_QUIET_MS, so that its ~1.2 ms of CPU does not land on the new sandbox's first
 * command, which its client sends right after the create (on 2 CPUs: the first command
 * ~1 ms faster), while two creates in a row still find theirs made.
 */
#define AHEAD_SETS 2
#define AHEAD_QUIET_MS 10
struct ahead {
	int netns_fd[AHEAD_SETS];
	int ipcns_fd[AHEAD_SETS];
	int mntns_fd[AHEAD_SETS];
	struct jail_spec root_for; /* the settings every mntns_fd was made for (or is to be) */
	struct jail_cgroup *cg[AHEAD_SETS];
	struct al_config limits; /* the last create's memory, pids and CPU */
	bool no_cg;		 /* cgroups cannot be made ahead here (v2) */
	const char *etc_shared;	 /* etc_shared_dir, or NULL */
};

/* JAIL_ETC_SHARED, the shared /etc files of daemon sandboxes (jail_ctx's etc_shared), made
 * if missing; NULL (each root gets its own copies) if it cannot be, or is not a directory
 * of root's that only root can write. A fixed path, whatever the daemon's state directory:
 * a sandbox's mountinfo shows where its binds come from. */
static const char *etc_shared_dir(void)
{
	struct stat st;

	mkdir("/run/airlock", 0755);
	if ((mkdir(JAIL_ETC_SHARED, 0700) < 0 && errno != EEXIST) ||
	    lstat(JAIL_ETC_SHARED, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 022))
		return NULL;
	return JAIL_ETC_SHARED;
}

/* The parts of set i that are missing, made (one attempt each). */
static void make_ahead(struct ahead *a, int i)
{
	struct al_error *e = NULL;

	if (a->netns_fd[i] < 0 && jail_netns_make(&a->netns_fd[i], &e) == JAIL_NS_STRANDED)
		_exit(1);
	al_error_free(e);
	e = NULL;
	if (a->ipcns_fd[i] < 0 && jail_ipcns_make(&a->ipcns_fd[i], &e) == JAIL_NS_STRANDED)
		_exit(1);
	al_error_free(e);
	e = NULL;
	if (!a->cg[i] && !a->no_cg && jail_cgroup_ahead(&a->limits, &a->cg[i], &e) < 0)
		a->no_cg = e && e->code == ENOTSUP;
	al_error_free(e);
	e = NULL;
	if (a->mntns_fd[i] < 0) {
		struct al_config cfg;
		struct jail_ctx ctx = {
		    .cfg = &cfg, .uid = JAIL_USER_UID, .etc_shared = a->etc_shared};

		jail_spec_config(&a->root_for, &cfg);
		if (jail_rootfs_can_ahead(&cfg) &&
		    jail_rootfs_ahead(&ctx, &a->mntns_fd[i], &e) == JAIL_NS_STRANDED)
			_exit(1);
		al_error_free(e);
	}
}

/* Set i has every part that can be made ahead here. */
static bool ahead_ready(const struct ahead *a, int i)
{
	struct al_config cfg;

	jail_spec_config(&a->root_for, &cfg);
	return a->netns_fd[i] >= 0 && a->ipcns_fd[i] >= 0 && (a->no_cg || a->cg[i]) &&
	       (a->mntns_fd[i] >= 0 || !jail_rootfs_can_ahead(&cfg));
}

/* No create within ms milliseconds on the channel. */
static bool quiet_for(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 0;
}

/* The first set made now if a create took it, the spare once creates pause. */
static void keep_ahead(struct ahead *a, int fd)
{
	if (!ahead_ready(a, 0))
		make_ahead(a, 0);
	if (ahead_ready(a, 0) && !ahead_ready(a, 1) && quiet_for(fd, AHEAD_QUIET_MS))
		make_ahead(a, 1);
}

/* The roots made ahead fit this create? Else they stay for one that they fit, or, if the
 * create could have had one, go, and the next ones are made for these settings. */
static bool ahead_fits(struct ahead *a, const struct jail_spec *want, const struct al_config *cfg)
{
	if (!jail_rootfs_can_ahead(cfg))
		return false;
	if (a->mntns_fd[0] >= 0 && jail_spec_same_root(&a->root_for, want))
		return true;
	for (int i = 0; i < AHEAD_SETS; i++)
		al_closep(&a->mntns_fd[i]);
	a->root_for = *want;
	return false;
}

/* Part [0] went to a sandbox (or is gone): our fd on it closed, the next one moves up. */
static void drop_first(int *fds)
{
	al_closep(&fds[0]);
	memmove(fds, fds + 1, (AHEAD_SETS - 1) * sizeof(*fds));
	fds[AHEAD_SETS - 1] = -1;
}

void jail_spawn_abi(char out[64])
{
	snprintf(out, 64, "airlock %s spawn %zu/%zu", AIRLOCK_VERSION,
		 sizeof(struct jail_spawn_req), sizeof(struct jail_spawn_report));
}

void jail_spawner_serve(int fd, const char *agent_arg, const char *sock_arg)
{
	/* Copies: the arguments may lie in our argv area, which each sandbox's PID 1 wipes in
	 * its copy of our memory before it execs the agent (child.c), and the agent's path
	 * is in the message of an exec that fails after that. */
	const char *agent_path = xstrdup(agent_arg), *sock_dir = xstrdup(sock_arg);
	struct jail_spawn_report hello = {.pid = (int32_t)getpid()};
	struct jail_spawn_req q;
	ssize_t n;
	struct ahead ahead = {0};

	for (int i = 0; i < AHEAD_SETS; i++)
		ahead.netns_fd[i] = ahead.ipcns_fd[i] = ahead.mntns_fd[i] = -1;
	al_config_init(&ahead.limits);
	jail_spec_defaults(&ahead.root_for);
	fcntl(fd, F_SETFD, FD_CLOEXEC); /* no sandbox's PID 1 keeps the channel */

	/* No PR_SET_PDEATHSIG: it fires when the forking *thread* ends. The channel's EOF
	 * (the daemon closed it, or died) is what ends the spawner. */
	prctl(PR_SET_NAME, "airlockd-spawn");
	signal(SIGPIPE, SIG_IGN);
	_Static_assert(sizeof(hello.msg) >= 64, "the hello fits a report");
	jail_spawn_abi(hello.msg);
	if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t)sizeof(hello))
		_exit(0);
	jail_cgroup_sweep(true); /* all leftovers: once, not per create (cgroup.c) */
	ahead.etc_shared = etc_shared_dir();
	for (;;) {
		struct jail_spawn_report rep = {0};
		struct al_config cfg;
		struct jail_sandbox_info info = {0};
		struct al_error *e = NULL;
		char sock[4096];
		int r;
		struct jail_sandbox_spec spec;

		keep_ahead(&ahead, fd);
		n = recv(fd, &q, sizeof(q), 0);
		if (n != (ssize_t)sizeof(q))
			break;
		spec = (struct jail_sandbox_spec){
		    .cfg = &cfg,
		    .agent_path = agent_path,
		    .agent_sock = sock,
		    .cgroup_name = q.id,
		    .host_base = q.host_base,
		    .parent_is_ours = true,
		    .netns_ahead = ahead.netns_fd[0] >= 0,
		    .netns_fd = ahead.netns_fd[0],
		    .ipcns_ahead = ahead.ipcns_fd[0] >= 0,
		    .ipcns_fd = ahead.ipcns_fd[0],
		    .cgroup_ahead = ahead.cg[0],
		    .etc_shared = ahead.etc_shared,
		};

		q.id[sizeof(q.id) - 1] = q.spec.image[sizeof(q.spec.image) - 1] = '\0';
		q.spec.workdir[sizeof(q.spec.workdir) - 1] = '\0';
		jail_spec_config(&q.spec, &cfg);
		snprintf(sock, sizeof(sock), "%s/%s.sock", sock_dir, q.id);
		spec.mntns_ahead = ahead_fits(&ahead, &q.spec, &cfg);
		spec.mntns_fd = ahead.mntns_fd[0];
		r = jail_sandbox_spawn(&spec, &info, &e);
		/* PID 1 joined them (or died): never given to another. */
		memmove(ahead.cg, ahead.cg + 1, (AHEAD_SETS - 1) * sizeof(*ahead.cg));
		ahead.cg[AHEAD_SETS - 1] = NULL; /* [0] is the sandbox's now, or removed */
		ahead.limits.memory_bytes = cfg.memory_bytes;
		ahead.limits.pids = cfg.pids;
		ahead.limits.cpus = cfg.cpus;
		drop_first(ahead.netns_fd);
		drop_first(ahead.ipcns_fd);
		if (spec.mntns_ahead)
			drop_first(ahead.mntns_fd);
		if (r < 0) {
			rep.code = e ? e->code : EIO;
			snprintf(rep.msg, sizeof(rep.msg), "%s", e && e->msg ? e->msg : "spawn");
		} else {
			rep.pid = info.pid;
			rep.start_time = info.start_time;
		}
		al_error_free(e);
		if (send(fd, &rep, sizeof(rep), MSG_NOSIGNAL) != (ssize_t)sizeof(rep))
			break;
		/* The next set is made (keep_ahead) while the daemon finishes this create. A
		 * failed set-up's PID 1 was our parent's child: nothing of it to reap here. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	for (int i = 0; i < AHEAD_SETS; i++)
		jail_cgroup_destroy_now(ahead.cg[i]);
	_exit(0);
}
