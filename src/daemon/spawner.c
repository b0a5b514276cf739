/* SPDX-License-Identifier: MIT */
/*
 * Starting sandboxes from the multi-threaded daemon.
 *
 * The jail's spawn sequence must run in a single-threaded process (its
 * clone3 child goes on to malloc; glibc only makes that safe across fork()).
 * A process forked per create would copy the daemon's whole address space --
 * with 1,000 sandboxes, 1,000 threads and thousands of mappings, most of a
 * create's time (bench/density). So one spawner process is forked when the
 * daemon opens, while it is still small, and serves every create over a
 * SOCK_SEQPACKET pair: one request (the sandbox's few settings) in, one
 * report out, one at a time. Its clone3 uses CLONE_PARENT, so each sandbox's
 * PID 1 is the daemon's child (reaped by its reaper thread with __WALL: such a
 * child has no exit signal), as before. If
 * the spawner dies it is forked again on the next create.
 */
#include "daemon/internal.h"
#include "jail/jail.h"
#include "jail/sandbox.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct spawn_req {
	uint64_t memory_bytes, disk_bytes;
	double cpus;
	uint32_t pids;
	uint32_t host_base;
	char id[DM_ID_LEN + 1];
	char image[1024]; /* "" = the host runtime */
	char workdir[1024];
};

struct spawn_report {
	int32_t code; /* 0 ok, else errno */
	int32_t pid;
	uint64_t start_time;
	char msg[480];
};

/*
 * What the next sandbox needs and no request changes, made while the spawner waits for a
 * create (together ~1.2 ms of a create's path here), each used by one sandbox only and
 * never entered before:
 *  - its network namespace: loopback up and nothing else;
 *  - its root (jail_rootfs_ahead), for the settings of the last create (the size of its
 *    disk; only the host runtime and the default workdir): a create that asks for others
 *    builds its own, and the next root is made for those;
 *  - on cgroup v1, its cgroups (jail_cgroup_ahead), with the last create's limits: the
 *    create renames them (and writes the limits that differ).
 * If one cannot be made, the sandbox makes its own as before; if the spawner could not
 * come back to the host's namespaces, it ends (the daemon forks another): the agents'
 * sockets must be made in the host's network namespace, and every host path lies in the
 * host's mount namespace.
 */
struct ahead {
	int netns_fd;
	int mntns_fd;
	uint64_t disk_bytes; /* the settings mntns_fd was made for (or is to be) */
	struct jail_cgroup *cg;
	struct al_config limits; /* the last create's memory, pids and CPU */
	bool no_cg;              /* cgroups cannot be made ahead here (v2) */
};

static void make_ahead(struct ahead *a)
{
	struct al_error *e = NULL;

	if (a->netns_fd < 0 && jail_netns_make(&a->netns_fd, &e) == JAIL_NS_STRANDED)
		_exit(1);
	al_error_free(e);
	e = NULL;
	if (!a->cg && !a->no_cg && jail_cgroup_ahead(&a->limits, &a->cg, &e) < 0)
		a->no_cg = e && e->code == ENOTSUP;
	al_error_free(e);
	e = NULL;
	if (a->mntns_fd < 0) {
		struct al_config cfg;
		struct jail_ctx ctx = {.cfg = &cfg, .uid = JAIL_USER_UID};

		al_config_init(&cfg);
		cfg.workdir = "/workspace";
		cfg.disk_bytes = a->disk_bytes;
		if (jail_rootfs_ahead(&ctx, &a->mntns_fd, &e) == JAIL_NS_STRANDED)
			_exit(1);
		al_error_free(e);
	}
}

/* The root made ahead fits this create? Else it stays for one that it fits, and the next
 * one is made for these settings. */
static bool ahead_fits(struct ahead *a, const struct al_config *cfg)
{
	uint64_t want = cfg->disk_bytes ? cfg->disk_bytes : JAIL_DISK_DEFAULT;

	if (!jail_rootfs_can_ahead(cfg))
		return false;
	if (a->mntns_fd >= 0 && want == a->disk_bytes)
		return true;
	al_closep(&a->mntns_fd);
	a->disk_bytes = want;
	return false;
}

/* The spawner process: serve requests until the daemon closes its end. */
static void __attribute__((noreturn)) spawner_main(int fd, const char *agent_path,
						   const char *sock_dir)
{
	struct spawn_req q;
	ssize_t n;
	struct ahead ahead = {.netns_fd = -1, .mntns_fd = -1, .disk_bytes = JAIL_DISK_DEFAULT};

	al_config_init(&ahead.limits);

	/* No PR_SET_PDEATHSIG: it fires when the forking *thread* ends. The channel's EOF
	 * (the daemon closed it, or died) is what ends the spawner. */
	prctl(PR_SET_NAME, "airlockd-spawn");
	signal(SIGPIPE, SIG_IGN);
	jail_cgroup_sweep(); /* one-shot leftovers: once, not per create (cgroup.c) */
	make_ahead(&ahead);
	while ((n = recv(fd, &q, sizeof(q), 0)) == (ssize_t)sizeof(q)) {
		struct spawn_report rep = {0};
		struct al_config cfg;
		struct jail_sandbox_info info = {0};
		struct al_error *e = NULL;
		char sock[4096];
		int r;
		struct jail_sandbox_spec spec = {
			.cfg = &cfg,
			.agent_path = agent_path,
			.agent_sock = sock,
			.cgroup_name = q.id,
			.host_base = q.host_base,
			.parent_is_ours = true,
			.netns_ahead = ahead.netns_fd >= 0,
			.netns_fd = ahead.netns_fd,
			.cgroup_ahead = ahead.cg,
		};

		q.id[sizeof(q.id) - 1] = q.image[sizeof(q.image) - 1] = '\0';
		q.workdir[sizeof(q.workdir) - 1] = '\0';
		al_config_init(&cfg);
		cfg.image = q.image[0] ? q.image : NULL;
		cfg.workdir = q.workdir;
		cfg.cpus = q.cpus;
		cfg.timeout_ms = 0; /* the daemon's timer owns the lifetime */
		cfg.pids = q.pids;
		if (q.memory_bytes)
			cfg.memory_bytes = q.memory_bytes;
		if (q.disk_bytes)
			cfg.disk_bytes = q.disk_bytes;
		snprintf(sock, sizeof(sock), "%s/%s.sock", sock_dir, q.id);
		spec.mntns_ahead = ahead_fits(&ahead, &cfg);
		spec.mntns_fd = ahead.mntns_fd;
		r = jail_sandbox_spawn(&spec, &info, &e);
		/* PID 1 joined them (or died): never given to another. */
		ahead.cg = NULL; /* the sandbox's now, or removed */
		ahead.limits.memory_bytes = cfg.memory_bytes;
		ahead.limits.pids = cfg.pids;
		ahead.limits.cpus = cfg.cpus;
		al_closep(&ahead.netns_fd);
		if (spec.mntns_ahead)
			al_closep(&ahead.mntns_fd);
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
		make_ahead(&ahead); /* while the daemon finishes this create */
		/* A failed set-up's PID 1 was our parent's child: nothing of it to reap here. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	jail_cgroup_destroy_now(ahead.cg);
	_exit(0);
}

/* Fork the spawner (under spawn_mu, or before any thread exists). */
static int spawner_fork(struct daemon *d, struct al_error **err)
{
	int sp[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return al_error_set(err, errno, "socketpair (spawner)");
	pid = fork();
	if (pid < 0) {
		close(sp[0]);
		close(sp[1]);
		return al_error_set(err, errno, "fork the sandbox spawner");
	}
	if (pid == 0) {
		int fd = sp[1];

		/* Nothing of the daemon's but the channel: no store, no listeners. */
		if (fd != 3 && (dup2(fd, 3) < 0 || close(fd) < 0))
			_exit(127);
		sys_close_range(4, ~0U, 0);
		spawner_main(3, d->agent_path, d->sock_dir);
	}
	close(sp[1]);
	d->spawner_fd = sp[0];
	d->spawner_pid = pid;
	return 0;
}

int dm_spawner_start(struct daemon *d, struct al_error **err)
{
	pthread_mutex_init(&d->spawn_mu, NULL);
	d->spawner_fd = -1;
	return spawner_fork(d, err);
}

void dm_spawner_stop(struct daemon *d)
{
	if (d->spawner_fd >= 0)
		close(d->spawner_fd); /* EOF: it exits */
	d->spawner_fd = -1;
}

/* One request and its report; -1 when the spawner is gone. */
static int spawner_call(struct daemon *d, const struct spawn_req *q, struct spawn_report *rep)
{
	ssize_t n;

	if (send(d->spawner_fd, q, sizeof(*q), MSG_NOSIGNAL) != (ssize_t)sizeof(*q))
		return -1;
	do
		n = recv(d->spawner_fd, rep, sizeof(*rep), 0);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*rep) ? 0 : -1;
}

int dm_spawn(struct daemon *d, struct dm_sbx *s, const struct al_config *cfg,
	     struct al_error **err)
{
	struct spawn_req q = {
		.memory_bytes = cfg->memory_bytes,
		.disk_bytes = cfg->disk_bytes,
		.cpus = cfg->cpus,
		.pids = cfg->pids,
		.host_base = s->host_base,
	};
	struct spawn_report rep = {0};
	int r = -1;

	if ((cfg->image && strlen(cfg->image) >= sizeof(q.image)) ||
	    strlen(cfg->workdir ? cfg->workdir : "") >= sizeof(q.workdir))
		return al_error_msg(err, ENAMETOOLONG, "image or workdir path too long");
	snprintf(q.id, sizeof(q.id), "%s", s->id);
	snprintf(q.image, sizeof(q.image), "%s", cfg->image ? cfg->image : "");
	snprintf(q.workdir, sizeof(q.workdir), "%s", cfg->workdir ? cfg->workdir : "/workspace");
	pthread_mutex_lock(&d->spawn_mu);
	for (int attempt = 0; attempt < 2 && r < 0; attempt++) {
		if (d->spawner_fd < 0 && spawner_fork(d, err) < 0)
			break;
		r = spawner_call(d, &q, &rep);
		if (r < 0) { /* it died (or was killed): a new one, once */
			close(d->spawner_fd);
			d->spawner_fd = -1;
		}
	}
	pthread_mutex_unlock(&d->spawn_mu);
	if (r < 0)
		return *err ? -1 : al_error_set(err, EIO, "the sandbox spawner died");
	rep.msg[sizeof(rep.msg) - 1] = '\0';
	if (rep.code)
		return al_error_from(err, rep.code, rep.msg);
	s->pid = rep.pid;
	s->start_time = rep.start_time;
	return 0;
}
