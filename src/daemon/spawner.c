/* SPDX-License-Identifier: MIT */
/*
 * Starting a sandbox from the multi-threaded daemon: fork a single-threaded
 * spawner (glibc makes malloc safe after fork), which runs the jail's
 * spawn sequence and reports over a pipe. When it exits, the sandbox's PID 1
 * is reparented to us (we are a child subreaper).
 */
#include "daemon/internal.h"
#include "jail/sandbox.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct spawn_report {
	int32_t code; /* 0 ok, else errno */
	int32_t pid;
	uint64_t start_time;
	char msg[480];
};

int dm_spawn(struct daemon *d, struct dm_sbx *s, const struct al_config *cfg,
	     struct al_error **err)
{
	struct spawn_report rep = {0};
	int p[2];
	pid_t child;
	ssize_t n;
	char sock[4096];

	snprintf(sock, sizeof(sock), "%s/%s.sock", d->sock_dir, s->id);
	if (pipe2(p, O_CLOEXEC) < 0)
		return al_error_set(err, errno, "pipe2");
	child = fork();
	if (child < 0) {
		close(p[0]), close(p[1]);
		return al_error_set(err, errno, "fork spawner");
	}
	if (child == 0) {
		struct jail_sandbox_spec spec = {
			.cfg = cfg,
			.agent_path = d->agent_path,
			.agent_sock = sock,
			.cgroup_name = s->id,
			.host_base = s->host_base,
		};
		struct jail_sandbox_info info = {0};
		struct al_error *e = NULL;

		close(p[0]);
		if (jail_sandbox_spawn(&spec, &info, &e) < 0) {
			rep.code = e ? e->code : EIO;
			snprintf(rep.msg, sizeof(rep.msg), "%s", e && e->msg ? e->msg : "spawn");
		} else {
			rep.pid = info.pid;
			rep.start_time = info.start_time;
		}
		(void)!write(p[1], &rep, sizeof(rep));
		_exit(0);
	}
	close(p[1]);
	do
		n = read(p[0], &rep, sizeof(rep));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	waitpid(child, NULL, 0); /* may already be reaped by the reaper thread: fine */
	if (n != (ssize_t)sizeof(rep))
		return al_error_set(err, EIO, "the sandbox spawner died");
	if (rep.code)
		return al_error_from(err, rep.code, rep.msg);
	s->pid = rep.pid;
	s->start_time = rep.start_time;
	return 0;
}
