/* SPDX-License-Identifier: MIT */
/*
 * A sandbox's resource usage read from its cgroup (v2: cpu.stat, memory.current,
 * memory.max, memory.stat) and its writable tmpfs (statvfs of its /tmp, through
 * /proc/<pid>/root, which resolves inside the sandbox's mount namespace; nothing is opened
 * or written there). For the E2B front end's metrics; a host without cgroup v2 gives 0s.
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

/* /sys/fs/cgroup<path> of pid's unified cgroup, or NULL. */
static char *cg_dir(pid_t pid)
{
	_cleanup_free_ char *path = xasprintf("/proc/%d/cgroup", (int)pid);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char line[1024];

	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			return xasprintf("/sys/fs/cgroup%s", line + 3);
		}
	}
	return NULL;
}

int dm_sandbox_usage(struct daemon *d, const char *team, const char *id, json_t **out,
		     struct al_error **err)
{
	_cleanup_free_ char *dir = NULL, *tmp = NULL;
	struct statvfs vfs = {0};
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
	dir = cg_dir(pid);
	tmp = xasprintf("/proc/%d/root/tmp", (int)pid);
	if (statvfs(tmp, &vfs) < 0)
		memset(&vfs, 0, sizeof(vfs));
	*out = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "cpu_usec",
			 (json_int_t)(dir ? cg_read(dir, "cpu.stat", "usage_usec") : 0),
			 "memory_bytes", (json_int_t)(dir ? cg_read(dir, "memory.current", NULL) : 0),
			 "memory_max", (json_int_t)(dir ? cg_read(dir, "memory.max", NULL) : 0),
			 "memory_cache", (json_int_t)(dir ? cg_read(dir, "memory.stat", "file") : 0),
			 "disk_used", (json_int_t)((vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize),
			 "disk_total", (json_int_t)(vfs.f_blocks * vfs.f_frsize));
	if (!*out)
		al_oom();
	return 0;
}
