/* SPDX-License-Identifier: MIT */
/*
 * Freezing a daemon sandbox for the moment a snapshot is captured, so that what is
 * captured is one consistent state and nothing in the sandbox can change a file while
 * the daemon reads it (a swapped symlink, a file grown under the copy).
 *
 * cgroup v2: the sandbox's own cgroup (airlock/<id>) has cgroup.freeze; "1" freezes every
 * process in it, cgroup.events says "frozen 1" once they all are.
 * cgroup v1: airlock keeps no freezer cgroup per sandbox (pids, memory, cpu only): the
 * first freeze makes freezer/airlock/<id>, moves every process of the sandbox's pids
 * cgroup there (again until none is left behind: a fork under way lands in its parent's
 * cgroup), and writes FROZEN to freezer.state until it reads back FROZEN. The thaw writes
 * THAWED; the processes stay in that cgroup, which is removed with the sandbox's others
 * (rmdir once empty, dm_freeze_forget).
 */
#include "daemon/freeze.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
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
#define FREEZE_WAIT_MS 3000

static const char *cg_root(void)
{
	const char *r = getenv("AIRLOCK_CGROUP_ROOT");

	return r && *r ? r : "/sys/fs/cgroup";
}

static bool cg_v2(const char *root)
{
	struct statfs sf;

	return statfs(root, &sf) == 0 && (unsigned long)sf.f_type == CGROUP2_SUPER_MAGIC;
}

static int put(const char *dir, const char *file, const char *val, struct al_error **err)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	_cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
	size_t n = strlen(val);

	if (fd < 0 || write(fd, val, n) != (ssize_t)n)
		return al_error_set(err, errno, "write '%s' to '%s'", val, p);
	return 0;
}

/* put without an error: -1 with errno (a process that exited while moved is no failure). */
static int put_raw(const char *dir, const char *file, const char *val)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	_cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
	size_t n = strlen(val);

	if (fd < 0 || write(fd, val, n) != (ssize_t)n)
		return -1;
	return 0;
}

static ssize_t get(const char *dir, const char *file, char *buf, size_t cap)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

static void nap_us(long us)
{
	struct timespec ts = {0, us * 1000};

	nanosleep(&ts, NULL);
}

/* Until file reads back with `want` in it, up to FREEZE_WAIT_MS: looked at every 0.25 ms
 * (a sandbox of a few idle processes freezes in well under a millisecond, and a fork by
 * copy-on-write waits for it). */
static int wait_for(const char *dir, const char *file, const char *want, struct al_error **err)
{
	char buf[512];

	for (long t = 0; t < FREEZE_WAIT_MS * 1000L; t += 250) {
		if (get(dir, file, buf, sizeof(buf)) > 0 && strstr(buf, want))
			return 0;
		nap_us(250);
	}
	return al_error_msg(err, ETIMEDOUT, "'%s/%s' did not say '%s' in %d ms", dir, file, want,
			    FREEZE_WAIT_MS);
}

/* v1: every process of the sandbox's pids cgroup into its freezer cgroup; how many moved. */
static int v1_gather(const char *pids_dir, const char *frz_dir, struct al_error **err)
{
	char buf[65536], *save = NULL;
	int moved = 0;

	if (get(pids_dir, "cgroup.procs", buf, sizeof(buf)) < 0)
		return al_error_set(err, errno, "read '%s/cgroup.procs'", pids_dir);
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char line[32];
		_cleanup_free_ char *proc = xasprintf("/proc/%s/cgroup", l);
		_cleanup_free_ char *want = NULL;
		char cur[4096];
		FILE *f = fopen(proc, "re");
		bool there = false;

		if (!f)
			continue; /* gone */
		want = xasprintf(":freezer:/airlock/%s\n", strrchr(frz_dir, '/') + 1);
		while (fgets(cur, sizeof(cur), f))
			if (strstr(cur, want))
				there = true;
		fclose(f);
		if (there)
			continue;
		snprintf(line, sizeof(line), "%s\n", l);
		if (put_raw(frz_dir, "cgroup.procs", line) == 0)
			moved++;
		else if (errno != ESRCH) /* ESRCH: it exited meanwhile */
			return al_error_set(err, errno, "move pid %s to '%s'", l, frz_dir);
	}
	return moved;
}

static int v1_freeze(const char *root, const char *id, struct al_error **err)
{
	_cleanup_free_ char *pids = xasprintf("%s/pids/airlock/%s", root, id);
	_cleanup_free_ char *top = xasprintf("%s/freezer/airlock", root);
	_cleanup_free_ char *dir = xasprintf("%s/%s", top, id);
	int moved;

	if ((mkdir(top, 0755) < 0 && errno != EEXIST) || (mkdir(dir, 0755) < 0 && errno != EEXIST))
		return al_error_set(err, errno, "mkdir '%s'", dir);
	for (int round = 0; round < 20; round++) {
		if ((moved = v1_gather(pids, dir, err)) < 0)
			return -1;
		if (put(dir, "freezer.state", "FROZEN", err) < 0 ||
		    wait_for(dir, "freezer.state", "FROZEN", err) < 0)
			return -1;
		/* Frozen: nothing forks now. Whatever was still outside is moved in (a task
		 * that joins a frozen cgroup is frozen) and checked once more. */
		if ((moved = v1_gather(pids, dir, err)) < 0)
			return -1;
		if (moved == 0)
			return 0;
	}
	return al_error_msg(err, EAGAIN, "sandbox %s kept forking while being frozen", id);
}

int dm_freeze(const char *id, bool frozen, struct al_error **err)
{
	const char *root = cg_root();
	_cleanup_free_ char *dir = NULL;

	if (cg_v2(root)) {
		dir = xasprintf("%s/airlock/%s", root, id);
		if (put(dir, "cgroup.freeze", frozen ? "1" : "0", err) < 0)
			return -1;
		return frozen ? wait_for(dir, "cgroup.events", "frozen 1", err) : 0;
	}
	if (frozen)
		return v1_freeze(root, id, err);
	dir = xasprintf("%s/freezer/airlock/%s", root, id);
	return put(dir, "freezer.state", "THAWED", err);
}

int dm_freeze_pids(const char *id, pid_t **out, size_t *n, struct al_error **err)
{
	const char *root = cg_root();
	_cleanup_free_ char *dir = cg_v2(root) ? xasprintf("%s/airlock/%s", root, id)
					       : xasprintf("%s/pids/airlock/%s", root, id);
	char buf[65536], *save = NULL;

	*out = NULL;
	*n = 0;
	if (get(dir, "cgroup.procs", buf, sizeof(buf)) < 0)
		return al_error_set(err, errno, "read '%s/cgroup.procs'", dir);
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		*out = xrealloc(*out, (*n + 1) * sizeof(**out));
		(*out)[(*n)++] = (pid_t)atoi(l);
	}
	return 0;
}

void dm_freeze_forget(const char *id)
{
	const char *root = cg_root();
	_cleanup_free_ char *dir = xasprintf("%s/freezer/airlock/%s", root, id);

	if (!cg_v2(root))
		(void)rmdir(dir);
}
