/* SPDX-License-Identifier: MIT */
/*
 * A sandbox's resource usage read from its cgroup (v2: cpu.stat, memory.current,
 * memory.max, memory.stat; v1: the memory controller's usage_in_bytes, limit_in_bytes and
 * stat, and the CPU time of the processes it holds, from /proc) and its writable tmpfs (statvfs of
 * its /tmp, through /proc/<pid>/root, which resolves inside the sandbox's mount namespace; nothing
 * is opened or written there). For the E2B front end's metrics.
 */
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* The first number after "key " in a cgroup file, or 0. */
static uint64_t cg_read(const char *dir, const char *file, const char *key)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char line[256];
	size_t kl = key ? strlen(key) : 0;

	while (f && fgets(line, sizeof(line), f)) {
		if (!key)
			return strtoull(line, NULL, 10); /* "max" reads as 0 */
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			return strtoull(line + kl + 1, NULL, 10);
	}
	return 0;
}

/* /sys/fs/cgroup<path> of pid's unified cgroup (v2) or, with v1, of its memory cgroup
 * (/sys/fs/cgroup/memory<path>); NULL if neither. */
static char *cg_dir(pid_t pid, bool *v1)
{
	_cleanup_free_ char *path = xasprintf("/proc/%d/cgroup", (int)pid);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char line[1024], *mem = NULL, *uni = NULL;

	while (f && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':'), *c2 = c ? strchr(c + 1, ':') : NULL;

		line[strcspn(line, "\n")] = '\0';
		if (!c2)
			continue;
		if (strncmp(line, "0::", 3) == 0 && !uni)
			uni = xasprintf("/sys/fs/cgroup%s", line + 3);
		else if (strncmp(c + 1, "memory:", 7) == 0 && !mem)
			mem = xasprintf("/sys/fs/cgroup/memory%s", c2 + 1);
	}
	*v1 = mem != NULL;
	if (mem) {
		free(uni);
		return mem;
	}
	return uni;
}

/* v1: the CPU time (user + system, µs) of the processes in the cgroup dir. */
static uint64_t cg_v1_cpu_usec(const char *dir)
{
	_cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", dir);
	_cleanup_fclose_ FILE *f = fopen(procs, "re");
	long tick = sysconf(_SC_CLK_TCK);
	uint64_t sum = 0;
	int pid;

	while (f && fscanf(f, "%d", &pid) == 1) {
		_cleanup_free_ char *stat = xasprintf("/proc/%d/stat", pid);
		_cleanup_fclose_ FILE *s = fopen(stat, "re");
		char buf[1024];
		unsigned long long ut = 0, st = 0;
		char *p;

		if (!s || !fgets(buf, sizeof(buf), s) || !(p = strrchr(buf, ')')))
			continue;
		/* after "pid (comm)": state is field 3, utime 14, stime 15 */
		if (sscanf(p + 2, "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu", &ut,
			   &st) == 2)
			sum += (ut + st) * 1000000ull / (uint64_t)(tick > 0 ? tick : 100);
	}
	return sum;
}

int dm_sandbox_usage(struct daemon *d, const char *team, const char *id, json_t **out,
		     struct al_error **err)
{
	_cleanup_free_ char *dir = NULL, *tmp = NULL;
	struct statvfs vfs = {0};
	bool v1 = false;
	uint64_t cpu = 0, mem = 0, max = 0, cache = 0;
	struct dm_sbx *s;
	pid_t pid = 0;

	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, id, err);
	if (s && s->state == DM_SBX_RUNNING)
		pid = s->pid;
	else if (s)
		al_error_msg(err, ESRCH, "sandbox '%s' is %s", s->id, dm_sbx_state_name(s->state));
	pthread_mutex_unlock(&d->mu);
	if (pid <= 0)
		return s ? -ESRCH : -ENOENT;
	dir = cg_dir(pid, &v1);
	if (dir && v1) {
		cpu = cg_v1_cpu_usec(dir);
		mem = cg_read(dir, "memory.usage_in_bytes", NULL);
		max = cg_read(dir, "memory.limit_in_bytes", NULL);
		cache = cg_read(dir, "memory.stat", "cache");
		if (max >= (1ull << 62)) /* v1's "no limit" */
			max = 0;
	} else if (dir) {
		cpu = cg_read(dir, "cpu.stat", "usage_usec");
		mem = cg_read(dir, "memory.current", NULL);
		max = cg_read(dir, "memory.max", NULL);
		cache = cg_read(dir, "memory.stat", "file");
	}
	tmp = xasprintf("/proc/%d/root/tmp", (int)pid);
	if (statvfs(tmp, &vfs) < 0)
		memset(&vfs, 0, sizeof(vfs));
	uint64_t disk_total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	uint64_t disk_used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
	*out = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "cpu_usec", (json_int_t)cpu, "memory_bytes",
			 (json_int_t)mem, "memory_max", (json_int_t)max, "memory_cache",
			 (json_int_t)cache, "disk_used", (json_int_t)disk_used, "disk_total",
			 (json_int_t)disk_total);
	if (!*out)
		al_oom();
	return 0;
}
