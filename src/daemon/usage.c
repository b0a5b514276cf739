/* SPDX-License-Identifier: MIT */
/*
 * A running sandbox's resource usage, for the E2B front end's metrics: memory and CPU time
 * from its cgroup (jail_cgroup_usage, the reader the Prometheus metrics use too), its
 * memory limit from its spec, and its disk from a statvfs of its /tmp through
 * /proc/<pid>/root (which resolves inside the sandbox's mount namespace; nothing is opened
 * or written there).
 */
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/internal.h"
#include "jail/jail.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

int dm_sandbox_usage(struct daemon *d, const char *team, const char *id, json_t **out,
		     struct al_error **err)
{
	_cleanup_free_ char *tmp = NULL, *name = NULL;
	struct jail_cgroup_reader *cg;
	struct statvfs vfs = {0};
	struct dm_sbx *s;
	uint64_t mem = 0, cpu_ns = 0, limit = 0;
	pid_t pid = 0;

	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, id, err);
	if (s && s->state == DM_SBX_RUNNING) {
		pid = s->pid;
		limit = s->spec.memory_bytes;
		name = xstrdup(s->id);
	} else if (s) {
		al_error_msg(err, ESRCH, "sandbox '%s' is %s", s->id, dm_sbx_state_name(s->state));
	}
	pthread_mutex_unlock(&d->mu);
	if (pid <= 0)
		return s ? -ESRCH : -ENOENT;
	cg = jail_cgroup_reader_open();
	if (jail_cgroup_usage(cg, name, &mem, &cpu_ns) < 0)
		mem = cpu_ns = 0;
	jail_cgroup_reader_close(cg);
	tmp = xasprintf("/proc/%d/root/tmp", (int)pid);
	if (statvfs(tmp, &vfs) < 0)
		memset(&vfs, 0, sizeof(vfs));
	uint64_t disk_total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	uint64_t disk_used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;

	*out = json_pack("{s:I,s:I,s:I,s:I,s:I}", "cpu_usec", (json_int_t)(cpu_ns / 1000),
			 "memory_bytes", (json_int_t)mem, "memory_max", (json_int_t)limit,
			 "disk_used", (json_int_t)disk_used, "disk_total", (json_int_t)disk_total);
	if (!*out)
		al_oom();
	return 0;
}
