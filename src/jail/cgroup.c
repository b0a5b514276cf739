/* SPDX-License-Identifier: MIT */
/*
 * Per-sandbox cgroup: memory, pids and CPU limits, peak memory and OOM kills.
 *
 * cgroup v2 (a unified hierarchy at /sys/fs/cgroup): one directory under
 * airlock/, joined atomically at clone time with CLONE_INTO_CGROUP.
 * cgroup v1 (hybrid hosts, like ours): one directory per controller
 * (memory, pids, cpu) under airlock/, joined by the parent before the child
 * runs any sandbox code.
 *
 * The root is /sys/fs/cgroup unless AIRLOCK_CGROUP_ROOT says otherwise
 * (tests point it at a fake tree).
 */
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* pids first: made first and removed last, its directory stands for all three while any is
 * left, so that the sweep of one-shot leftovers lists only that (small) directory. */
enum { V1_PIDS, V1_MEMORY, V1_CPU, V1_N };
static const char *const v1_controllers[V1_N] = {"pids", "memory", "cpu"};

struct jail_cgroup {
	bool v2;
	char *dir[V1_N]; /* v2: dir[0] only */
	int v2_fd;
	/* Made ahead (jail_cgroup_ahead): the limits it has now. */
	uint64_t memory_bytes;
	uint32_t pids;
	double cpus;
	bool memory_by_child; /* v1 one-shot: the child makes and joins memory/ itself */
};

static int write_at(const char *dir, const char *file, const char *val, struct al_error **err)
{
	char path[PATH_MAX];
	_cleanup_close_ int fd = -1;
	size_t len = strlen(val);

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return al_error_set(err, errno, "open '%s'", path);
	if (write(fd, val, len) != (ssize_t)len)
		return al_error_set(err, errno, "write '%s' to '%s'", val, path);
	return 0;
}

/* Reads a number, or the value of "key N" in a flat-keyed file; 0 if absent. */
static uint64_t read_u64(const char *dir, const char *file, const char *key)
{
	char path[PATH_MAX], buf[4096];
	_cleanup_close_ int fd = -1;
	ssize_t n;
	char *p;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (n = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return 0;
	buf[n] = '\0';
	if (!key)
		return strtoull(buf, NULL, 10);
	for (p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		size_t kl = strlen(key);
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoull(p + kl + 1, NULL, 10);
	}
	return 0;
}

static const char *cgroup_root(void)
{
	const char *r = getenv("AIRLOCK_CGROUP_ROOT");

	return r && *r ? r : "/sys/fs/cgroup";
}

static int mkdir_ok(const char *path, struct al_error **err)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return al_error_set(err, errno, "mkdir '%s'", path);
	return 0;
}

/* mkdir a run's cgroup directory, and its parent airlock/ first if that is missing (only
 * on a host's first run). */
static int mkdir_cgroup(const char *dir, struct al_error **err)
{
	char parent[PATH_MAX];
	char *slash;

	if (mkdir(dir, 0755) == 0)
		return 0;
	if (errno == ENOENT) {
		snprintf(parent, sizeof(parent), "%s", dir);
		slash = strrchr(parent, '/');
		if (slash)
			*slash = '\0';
		if (mkdir_ok(parent, err) < 0)
			return -1;
		if (mkdir(dir, 0755) == 0)
			return 0;
	}
	return al_error_set(err, errno, "mkdir '%s'", dir);
}

/*
 * memory, pids, cpu on v2. A fresh cgroup has no limits, so only the set ones are written
 * (the one-shot path stays as short as it was); otherwise "max" lifts an old limit.
 */
static int limits_v2(struct jail_cgroup *cg, const struct al_config *cfg, bool fresh,
		     struct al_error **err)
{
	char val[64];

	snprintf(val, sizeof(val), "%llu", (unsigned long long)cfg->memory_bytes);
	if ((cfg->memory_bytes || !fresh) &&
	    write_at(cg->dir[0], "memory.max", cfg->memory_bytes ? val : "max", err) < 0)
		return -1;
	if (cfg->memory_bytes)
		write_at(cg->dir[0], "memory.swap.max", "0", NULL);
	snprintf(val, sizeof(val), "%u", cfg->pids);
	if ((cfg->pids || !fresh) &&
	    write_at(cg->dir[0], "pids.max", cfg->pids ? val : "max", err) < 0)
		return -1;
	snprintf(val, sizeof(val), "%llu 100000", (unsigned long long)(cfg->cpus * 100000));
	if ((cfg->cpus > 0 || !fresh) &&
	    write_at(cg->dir[0], "cpu.max", cfg->cpus > 0 ? val : "max 100000", err) < 0)
		return -1;
	return 0;
}

static int setup_v2(struct jail_cgroup *cg, const char *root, const char *name,
		    const struct al_config *cfg, struct al_error **err)
{
	char parent[PATH_MAX];

	snprintf(parent, sizeof(parent), "%s/airlock", root);
	if (mkdir_ok(parent, err) < 0)
		return -1;
	/* Delegate the controllers we use down to airlock/ and below. */
	write_at(root, "cgroup.subtree_control", "+memory +pids +cpu", NULL);
	write_at(parent, "cgroup.subtree_control", "+memory +pids +cpu", NULL);
	cg->dir[0] = xasprintf("%s/%s", parent, name);
	if (mkdir(cg->dir[0], 0755) < 0)
		return al_error_set(err, errno, "mkdir '%s'", cg->dir[0]);
	if (limits_v2(cg, cfg, true, err) < 0)
		return -1;
	cg->v2_fd = open(cg->dir[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cg->v2_fd < 0)
		return al_error_set(err, errno, "open '%s'", cg->dir[0]);
	return 0;
}

/* The v1 memory cgroup `dir`'s limits (fresh: as limits_v2). */
static int memory_limits_v1(const char *dir, const struct al_config *cfg, bool fresh,
			    struct al_error **err)
{
	char val[64];

	snprintf(val, sizeof(val), "%llu", (unsigned long long)cfg->memory_bytes);
	if (!cfg->memory_bytes)
		strcpy(val, "-1");
	if (cfg->memory_bytes || !fresh) {
		/* With swap accounting, memory+swap gets the same cap: no escape to swap. The
		 * memsw limit may never be below the memory one: when an old limit moves,
		 * memsw is written on both sides of it (one of the two may fail: fine). */
		if (!fresh)
			write_at(dir, "memory.memsw.limit_in_bytes", val, NULL);
		if (write_at(dir, "memory.limit_in_bytes", val, err) < 0)
			return -1;
		write_at(dir, "memory.memsw.limit_in_bytes", val, NULL);
	}
	return 0;
}

/* memory (unless the child makes it), pids, cpu on v1 (fresh: as limits_v2). */
static int limits_v1(struct jail_cgroup *cg, const struct al_config *cfg, bool fresh,
		     struct al_error **err)
{
	char val[64];

	if (!cg->memory_by_child && memory_limits_v1(cg->dir[V1_MEMORY], cfg, fresh, err) < 0)
		return -1;
	snprintf(val, sizeof(val), "%u", cfg->pids);
	if ((cfg->pids || !fresh) &&
	    write_at(cg->dir[V1_PIDS], "pids.max", cfg->pids ? val : "max", err) < 0)
		return -1;
	snprintf(val, sizeof(val), "%llu", (unsigned long long)(cfg->cpus * 100000));
	if ((cfg->cpus > 0 || !fresh) &&
	    (write_at(cg->dir[V1_CPU], "cpu.cfs_period_us", "100000", err) < 0 ||
	     write_at(cg->dir[V1_CPU], "cpu.cfs_quota_us", cfg->cpus > 0 ? val : "-1", err) < 0))
		return -1;
	return 0;
}

/* Every sandbox, one-shot or not, has a cpu cgroup of its own: its weight there (the
 * kernel's default for a new cgroup, the same for all) is what shares the CPU evenly
 * between sandboxes, whatever number of processes each runs. */
static int setup_v1(struct jail_cgroup *cg, const char *root, const char *name,
		    const struct al_config *cfg, struct al_error **err)
{
	for (int i = 0; i < V1_N; i++) {
		cg->dir[i] = xasprintf("%s/%s/airlock/%s", root, v1_controllers[i], name);
		if (i == V1_MEMORY && cg->memory_by_child)
			continue; /* jail_cgroup_join_memory, in the child */
		if (mkdir_cgroup(cg->dir[i], err) < 0) {
			free(cg->dir[i]);
			cg->dir[i] = NULL;
			return -1;
		}
	}
	return limits_v1(cg, cfg, true, err);
}

/* "run-<pid>-..." or "ahead-<pid>-...": the pid of the process that made it, else 0. */
static long maker_pid(const char *name)
{
	const char *p = strncmp(name, "run-", 4) == 0	  ? name + 4
			: strncmp(name, "ahead-", 6) == 0 ? name + 6
							  : NULL;
	char *end;
	long pid;

	if (!p)
		return 0;
	pid = strtol(p, &end, 10);
	return pid > 0 && *end == '-' ? pid : 0;
}

/* rmdir, retrying while busy (the last tasks on their way out) `tries` times 0.5 ms
 * apart; gone already is fine. -1 if it is left. */
static int rmdir_retry(const char *dir, int tries)
{
	int n, rc;

	for (n = 0; (rc = rmdir(dir)) < 0 && errno == EBUSY && n < tries; n++) {
		struct timespec ts = {0, 500000};
		nanosleep(&ts, NULL);
	}
	return rc < 0 && errno != ENOENT ? -1 : 0;
}

/* Remove a run's directories (dir[i]: NULL where it has none): pids/ (index 0 on v1) last,
 * and kept while another is left, so that it marks what is left for the next sweep. */
static int remove_dirs(char *const dir[V1_N], int tries)
{
	int r = 0;

	for (int i = V1_N - 1; i >= 0; i--)
		if (dir[i] && !(i == V1_PIDS && r < 0) && rmdir_retry(dir[i], tries) < 0)
			r = -1;
	return r;
}

/* One dead maker's `name`, from every v1 hierarchy. */
static void remove_v1_name(const char *root, const char *name)
{
	char path[V1_N][PATH_MAX];
	char *dir[V1_N];

	for (int i = 0; i < V1_N; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/%s/airlock/%s", root, v1_controllers[i],
			 name);
		dir[i] = path[i];
	}
	remove_dirs(dir, 0);
}

/*
 * Remove the cgroups of one-shot runs whose airlock process is gone (it was
 * SIGKILLed and could not clean up), and those a dead daemon's spawner made ahead.
 * Names are run-<pid>-<time> and ahead-<pid>-<n>; a live pid (even a reused one) keeps
 * its directory. On v1 the pids/ directory alone is read (each run's pids cgroup is
 * made first and removed last: destroy, remove_v1_name), unless `full`: then every
 * hierarchy, for leftovers of older builds that removed pids/ first. Reading a
 * directory is cheap for one-shot runs, but ~170 us with a daemon's 1,000 sandboxes
 * there, so airlockd sweeps once when it starts, not per create.
 */
static void sweep_stale(const char *root, bool v2, bool full)
{
	char dir[PATH_MAX];
	struct dirent *de;

	for (int i = 0; i < (v2 ? 1 : full ? V1_N : 1); i++) {
		_cleanup_closedir_ DIR *d = NULL;

		if (v2)
			snprintf(dir, sizeof(dir), "%s/airlock", root);
		else
			snprintf(dir, sizeof(dir), "%s/%s/airlock", root, v1_controllers[i]);
		d = opendir(dir);
		while (d && (de = readdir(d))) {
			long pid = maker_pid(de->d_name);

			if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
				continue;
			if (v2)
				unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
			else
				remove_v1_name(root, de->d_name);
		}
	}
}

static bool is_v2(const char *root)
{
	struct statfs sf;

	return statfs(root, &sf) == 0 && sf.f_type == (typeof(sf.f_type))CGROUP2_SUPER_MAGIC;
}

/*
 * The CPU hierarchy airlock owns, beside the host's own tasks:
 *   airlock/     every sandbox, each its own child with a new cgroup's weight (the same
 *                for all, so sandboxes share the CPU evenly whatever they run);
 *   airlockd/    the daemons and what they fork (the spawner, the gateways).
 * airlock/ weighs what one host task does (v1 1024; v2 100, like a slice): sandboxes
 * together never weigh more on the host than one more task (16 tasks' worth let
 * CPU-bound sandboxes delay every host process, an API client's included, by several
 * scheduler slices). airlockd/ weighs four times as much, so that however many
 * sandboxes spin, the daemon's part of their requests gets 80% of a CPU it contends
 * for with them; the default is written again at each start, over an older version's.
 */
int jail_cgroup_weigh_at(const char *root, bool v2, struct al_error **err)
{
	char sbx[PATH_MAX], dmn[PATH_MAX];

	snprintf(sbx, sizeof(sbx), "%s%s/airlock", root, v2 ? "" : "/cpu");
	snprintf(dmn, sizeof(dmn), "%s%s/" JAIL_CGROUP_DAEMON, root, v2 ? "" : "/cpu");
	if (v2)
		write_at(root, "cgroup.subtree_control", "+memory +pids +cpu", NULL);
	if (mkdir_ok(sbx, err) < 0 || mkdir_ok(dmn, err) < 0)
		return -1;
	if (write_at(sbx, v2 ? "cpu.weight" : "cpu.shares",
		     v2 ? JAIL_CGROUP_SANDBOXES_WEIGHT : JAIL_CGROUP_SANDBOXES_SHARES, err) < 0 ||
	    write_at(dmn, v2 ? "cpu.weight" : "cpu.shares",
		     v2 ? JAIL_CGROUP_DAEMON_WEIGHT : JAIL_CGROUP_DAEMON_SHARES, err) < 0 ||
	    write_at(dmn, "cgroup.procs", "0", err) < 0)
		return -1;
	return 0;
}

int jail_cgroup_join_daemon(struct al_error **err)
{
	const char *root = cgroup_root();

	return jail_cgroup_weigh_at(root, is_v2(root), err) < 0
		   ? al_error_wrap(err, "the daemon's cpu cgroup")
		   : 0;
}

bool jail_cgroup_at_clone(void)
{
	return is_v2(cgroup_root());
}

static int create(const char *name, const struct al_config *cfg, bool split,
		  struct jail_cgroup **out, struct al_error **err)
{
	const char *root = cgroup_root();
	struct jail_cgroup *cg = xzalloc(sizeof(*cg));
	int r;

	cg->v2_fd = -1;
	cg->v2 = is_v2(root);
	cg->memory_by_child = split && !cg->v2;
	r = cg->v2 ? setup_v2(cg, root, name, cfg, err) : setup_v1(cg, root, name, cfg, err);
	if (r < 0) {
		bool v2 = cg->v2;

		jail_cgroup_destroy(cg);
		return al_error_wrap(err, "cgroup (%s)", v2 ? "v2" : "v1");
	}
	*out = cg;
	return 0;
}

int jail_cgroup_create(const char *name, const struct al_config *cfg, struct jail_cgroup **out,
		       struct al_error **err)
{
	return create(name, cfg, false, out, err);
}

char *jail_cgroup_memory_path(const char *name)
{
	return xasprintf("%s/%s/airlock/%s", cgroup_root(), v1_controllers[V1_MEMORY], name);
}

int jail_cgroup_create_split(const char *name, const struct al_config *cfg,
			     struct jail_cgroup **out, struct al_error **err)
{
	return create(name, cfg, true, out, err);
}

int jail_cgroup_join_memory(const char *dir, const struct al_config *cfg, struct al_error **err)
{
	/* Its limits first, then us in it: nothing of ours runs unlimited in it. */
	if (mkdir_cgroup(dir, err) < 0 || memory_limits_v1(dir, cfg, true, err) < 0 ||
	    write_at(dir, "cgroup.procs", "0", err) < 0)
		return al_error_wrap(err, "cgroup (v1)");
	return 0;
}

int jail_cgroup_ahead(const struct al_config *cfg, struct jail_cgroup **out, struct al_error **err)
{
	const char *root = cgroup_root();
	struct timespec ts;
	char name[64];

	if (is_v2(root))
		return al_error_msg(err, ENOTSUP, "cgroup v2 directories cannot be renamed");
	clock_gettime(CLOCK_MONOTONIC, &ts); /* with the pid, a name no other one has */
	snprintf(name, sizeof(name), "ahead-%d-%lld%09ld", (int)getpid(), (long long)ts.tv_sec,
		 ts.tv_nsec);
	if (jail_cgroup_create(name, cfg, out, err) < 0)
		return -1;
	(*out)->memory_bytes = cfg->memory_bytes;
	(*out)->pids = cfg->pids;
	(*out)->cpus = cfg->cpus;
	return 0;
}

int jail_cgroup_take(struct jail_cgroup *cg, const char *name, const struct al_config *cfg,
		     struct al_error **err)
{
	const char *root = cgroup_root();
	char *to[V1_N];

	for (int i = 0; i < V1_N; i++)
		to[i] = xasprintf("%s/%s/airlock/%s", root, v1_controllers[i], name);
	for (int i = 0; i < V1_N; i++) {
		if (rename(cg->dir[i], to[i]) < 0) {
			int e = errno;

			/* Back to one name, so that destroying cg removes all three. */
			for (int j = 0; j < i; j++)
				rename(to[j], cg->dir[j]);
			al_error_set(err, e, "rename '%s' to '%s'", cg->dir[i], name);
			for (int j = 0; j < V1_N; j++)
				free(to[j]);
			return -1;
		}
	}
	for (int i = 0; i < V1_N; i++) {
		free(cg->dir[i]);
		cg->dir[i] = to[i];
	}
	if (cg->memory_bytes == cfg->memory_bytes && cg->pids == cfg->pids && cg->cpus == cfg->cpus)
		return 0;
	return limits_v1(cg, cfg, false, err) < 0 ? al_error_wrap(err, "cgroup limits") : 0;
}

struct jail_cgroup *jail_cgroup_open(const char *name)
{
	const char *root = cgroup_root();
	struct jail_cgroup *cg = xzalloc(sizeof(*cg));
	int i;

	cg->v2_fd = -1;
	cg->v2 = is_v2(root);
	for (i = 0; i < (cg->v2 ? 1 : V1_N); i++)
		cg->dir[i] = cg->v2 ? xasprintf("%s/airlock/%s", root, name)
				    : xasprintf("%s/%s/airlock/%s", root, v1_controllers[i], name);
	return cg;
}

int jail_cgroup_set_limits(const char *name, const struct al_config *cfg, struct al_error **err)
{
	struct jail_cgroup *cg = jail_cgroup_open(name);
	int r = cg->v2 ? limits_v2(cg, cfg, false, err) : limits_v1(cg, cfg, false, err);

	jail_cgroup_forget(cg);
	return r < 0 ? al_error_wrap(err, "cgroup limits") : 0;
}

void jail_cgroup_forget(struct jail_cgroup *cg)
{
	if (!cg)
		return;
	for (int i = 0; i < V1_N; i++)
		free(cg->dir[i]);
	if (cg->v2_fd >= 0)
		close(cg->v2_fd);
	free(cg);
}

void jail_cgroup_sweep(bool full)
{
	const char *root = cgroup_root();

	sweep_stale(root, is_v2(root), full);
}

int jail_cgroup_clone_fd(const struct jail_cgroup *cg)
{
	return cg && cg->v2 ? cg->v2_fd : -1;
}

int jail_cgroup_attach(struct jail_cgroup *cg, pid_t pid, struct al_error **err)
{
	char val[32];
	int i;

	if (cg->v2)
		return 0; /* joined at clone time */
	snprintf(val, sizeof(val), "%d", (int)pid);
	for (i = 0; i < V1_N; i++)
		if (cg->dir[i] && !(i == V1_MEMORY && cg->memory_by_child) &&
		    write_at(cg->dir[i], "cgroup.procs", val, err) < 0)
			return -1;
	return 0;
}

void jail_cgroup_stats(struct jail_cgroup *cg, uint64_t *peak_bytes, uint64_t *oom_kills)
{
	if (cg->v2) {
		*peak_bytes = read_u64(cg->dir[0], "memory.peak", NULL);
		*oom_kills = read_u64(cg->dir[0], "memory.events", "oom_kill");
	} else {
		*peak_bytes = read_u64(cg->dir[V1_MEMORY], "memory.max_usage_in_bytes", NULL);
		*oom_kills = read_u64(cg->dir[V1_MEMORY], "memory.oom_control", "oom_kill");
	}
}

struct jail_cgroup_reader {
	bool v2;
	int dir[2]; /* v2: airlock/; v1: memory/airlock/ and pids/airlock/ */
	int proc;   /* /proc */
};

struct jail_cgroup_reader *jail_cgroup_reader_open(void)
{
	const char *root = cgroup_root();
	struct jail_cgroup_reader *r = xzalloc(sizeof(*r));
	char path[PATH_MAX];

	r->v2 = is_v2(root);
	for (int i = 0; i < (r->v2 ? 1 : 2); i++) {
		snprintf(path, sizeof(path), "%s/%s%sairlock", root,
			 r->v2 ? "" : v1_controllers[i ? V1_PIDS : V1_MEMORY], r->v2 ? "" : "/");
		r->dir[i] = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	if (r->v2)
		r->dir[1] = -1;
	r->proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	return r;
}

void jail_cgroup_reader_close(struct jail_cgroup_reader *r)
{
	if (!r)
		return;
	for (int i = 0; i < 2; i++)
		if (r->dir[i] >= 0)
			close(r->dir[i]);
	if (r->proc >= 0)
		close(r->proc);
	free(r);
}

/* The file dir/name/file into buf (NUL-terminated): its length, or -1 (gone). */
static ssize_t read_at(int dir, const char *name, const char *file, char *buf, size_t cap)
{
	char path[PATH_MAX];
	_cleanup_close_ int fd = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "%s%s%s", name, name[0] ? "/" : "", file);
	fd = dir < 0 ? -1 : openat(dir, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (n = read(fd, buf, cap - 1)) < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* utime + stime + cutime + cstime of a process, in clock ticks (0 if gone). The command
 * name (field 2) is the sandbox's to choose: fields are counted after its last ')'. */
static uint64_t proc_cpu_ticks(int proc, const char *pid)
{
	char buf[1024];
	unsigned long long v[4];
	char *p;

	if (read_at(proc, pid, "stat", buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')))
		return 0;
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt, then ours */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &v[0],
		   &v[1], &v[2], &v[3]) != 4)
		return 0;
	return v[0] + v[1] + v[2] + v[3];
}

/* v1: the CPU time of the processes of pids/airlock/<name> (a process's cumulative times
 * hold its reaped children's, and every process of a sandbox is reaped inside it). */
static uint64_t v1_cpu_ns(const struct jail_cgroup_reader *r, const char *name)
{
	char path[PATH_MAX], pid[32];
	_cleanup_fclose_ FILE *f = NULL;
	uint64_t ticks = 0;
	long hz = sysconf(_SC_CLK_TCK);
	int fd;

	snprintf(path, sizeof(path), "%s/cgroup.procs", name);
	fd = r->dir[1] < 0 ? -1 : openat(r->dir[1], path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	f = fdopen(fd, "re");
	if (!f) {
		close(fd);
		return 0;
	}
	while (fscanf(f, "%31s", pid) == 1)
		ticks += proc_cpu_ticks(r->proc, pid);
	return hz > 0 ? ticks * (1000000000ull / (uint64_t)hz) : 0;
}

/* The value of "key N" in a flat-keyed file's text, or 0. */
static uint64_t keyed_u64(const char *text, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoull(p + kl + 1, NULL, 10);
	return 0;
}

int jail_cgroup_usage(const struct jail_cgroup_reader *r, const char *name, uint64_t *memory_bytes,
		      uint64_t *cpu_ns)
{
	char buf[4096];

	if (!name[0] || strchr(name, '/') ||
	    read_at(r->dir[0], name, r->v2 ? "memory.current" : "memory.usage_in_bytes", buf,
		    sizeof(buf)) < 0)
		return -ENOENT;
	*memory_bytes = strtoull(buf, NULL, 10);
	if (!r->v2) {
		*cpu_ns = v1_cpu_ns(r, name);
		return 0;
	}
	*cpu_ns = read_at(r->dir[0], name, "cpu.stat", buf, sizeof(buf)) < 0
		      ? 0
		      : keyed_u64(buf, "usage_usec") * 1000;
	return 0;
}

void jail_cgroup_kill(struct jail_cgroup *cg)
{
	/*
	 * v2: cgroup.kill. v1 has none; there, killing the sandbox's PID 1 makes the
	 * kernel kill every process of its pid namespace, which is the whole sandbox
	 * (killing pids read from cgroup.procs would race with pid reuse).
	 */
	if (cg->v2)
		write_at(cg->dir[0], "cgroup.kill", "1", NULL);
}

/* rmdir each directory, retrying while busy `tries` times; -1 if one is left. */
static int destroy(struct jail_cgroup *cg, int tries)
{
	int r;

	if (!cg)
		return 0;
	r = remove_dirs(cg->dir, tries);
	jail_cgroup_forget(cg);
	return r;
}

void jail_cgroup_remove(const char *dir)
{
	rmdir_retry(dir, 2000);
}

int jail_cgroup_destroy(struct jail_cgroup *cg)
{
	return destroy(cg, 2000);
}

int jail_cgroup_destroy_now(struct jail_cgroup *cg)
{
	return destroy(cg, 0);
}
