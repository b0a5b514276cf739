/* SPDX-License-Identifier: MIT */
/*
 * Starting sandboxes from the multi-threaded daemon.
 *
 * The jail's spawn sequence must run in a single-threaded process (its
 * clone3 child goes on to malloc; glibc only makes that safe across fork()).
 * A process forked per create would copy the daemon's whole address space --
 * with 1,000 sandboxes, 1,000 threads and thousands of mappings, most of a
 * create's time (bench/density). So one spawner process is forked when the
 * daemon opens, before its threads and store, and execs the static `airlock`
 * binary next to airlockd (`airlock __spawner`, src/jail/ahead/spawner.c): its
 * clone3 per sandbox then copies 13 mappings, not the ~170 of airlockd's
 * libraries (~0.5 ms a create). If that binary cannot be run or is of another
 * build (its hello says), the forked child serves itself. It serves every create over a
 * SOCK_SEQPACKET pair: one request (the sandbox's few settings) in, one report out, one at a time.
 * Its clone3 uses CLONE_PARENT, so each sandbox's PID 1 is the daemon's child (reaped by its reaper
 * thread with __WALL: such a child has no exit signal). If the spawner dies it is forked again on
 * the next create.
 */
#include "daemon/internal.h"
#include "jail/ahead/spawner.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/selfpath.h"
#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

_Static_assert(DM_ID_LEN == JAIL_SPAWN_ID_LEN, "a sandbox id fits the spawner's record");

/* Wait for the spawner's hello: 0 if it is of this build (jail_spawn_abi), else why not. */
static int spawner_hello(int fd, pid_t pid, const char *exe, struct al_error **err)
{
	struct jail_spawn_report hello = {0};
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char want[64];
	ssize_t n = -1;

	jail_spawn_abi(want);
	if (poll(&p, 1, 5000) == 1)
		n = recv(fd, &hello, sizeof(hello), MSG_DONTWAIT);
	hello.msg[sizeof(hello.msg) - 1] = '\0';
	if (n == (ssize_t)sizeof(hello) && hello.code == 0 && hello.pid == pid &&
	    strcmp(hello.msg, want) == 0)
		return 0;
	if (n != (ssize_t)sizeof(hello))
		return al_error_msg(err, EPROTO, "the sandbox spawner '%s' did not say hello", exe);
	return al_error_msg(err, EPROTO,
			    "the sandbox spawner '%s' is another build ('%.64s', not '%s')", exe,
			    hello.msg, want);
}

/* Fork a spawner: the airlock binary at exe (or, with exe NULL, this process's own copy),
 * its channel as fd 3; on return it has said hello. */
static int spawner_fork_one(struct daemon *d, const char *exe, struct al_error **err)
{
	char *argv[] = {"airlock", "__spawner", d->agent_path, d->sock_dir, NULL};
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
		/* Nothing of the daemon's but the channel, as fd 3 (no store, no listeners). */
		if (sp[1] == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(sp[1], 3) < 0)
			_exit(127);
		sys_close_range(4, ~0U, 0);
		if (exe)
			execve(exe, argv, environ);
		jail_spawner_serve(3, d->agent_path, d->sock_dir);
	}
	close(sp[1]);
	if (spawner_hello(sp[0], pid, exe ? exe : "(in airlockd)", err) < 0) {
		kill(pid, SIGKILL); /* the reaper (or, before it runs, the next one) takes it */
		close(sp[0]);
		return -1;
	}
	d->spawner_fd = sp[0];
	d->spawner_pid = pid;
	return 0;
}

/* Fork the spawner (under spawn_mu, or before any thread exists): the small airlock
 * binary if it is there and of this build, else airlockd's own copy, with a warning. */
static int spawner_fork(struct daemon *d, struct al_error **err)
{
	const char *exe = d->spawner_exe;
	struct al_error *why = NULL;

	if (!exe)
		al_error_msg(&why, ENOENT, "cannot name the airlock binary next to airlockd");
	else if (access(exe, X_OK) < 0)
		al_error_set(&why, errno, "no runnable sandbox spawner at '%s'", exe);
	else if (spawner_fork_one(d, exe, &why) == 0)
		return 0;
	dm_log(d, "%s; spawning sandboxes from airlockd itself (slower)",
	       why && why->msg ? why->msg : "the sandbox spawner failed");
	al_error_free(why);
	return spawner_fork_one(d, NULL, err);
}

int dm_spawner_start(struct daemon *d, struct al_error **err)
{
	pthread_mutex_init(&d->spawn_mu, NULL);
	d->spawner_fd = -1;
	d->spawner_exe = al_sibling_path("airlock"); /* the static one; NULL: none */
	return spawner_fork(d, err);
}

void dm_spawner_stop(struct daemon *d)
{
	if (d->spawner_fd >= 0)
		close(d->spawner_fd); /* EOF: it exits */
	d->spawner_fd = -1;
}

/* One request and its report; -1 when the spawner is gone. */
static int spawner_call(struct daemon *d, const struct jail_spawn_req *q,
			struct jail_spawn_report *rep)
{
	ssize_t n;

	if (send(d->spawner_fd, q, sizeof(*q), MSG_NOSIGNAL) != (ssize_t)sizeof(*q))
		return -1;
	do
		n = recv(d->spawner_fd, rep, sizeof(*rep), 0);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*rep) ? 0 : -1;
}

int dm_spawn(struct daemon *d, struct dm_sbx *s, struct al_error **err)
{
	struct jail_spawn_req q = {.spec = s->spec, .host_base = s->host_base};
	struct jail_spawn_report rep = {0};
	int r = -1;

	snprintf(q.id, sizeof(q.id), "%s", s->id);
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
		return *err ? -1 : al_error_msg(err, EIO, "the sandbox spawner died");
	rep.msg[sizeof(rep.msg) - 1] = '\0';
	if (rep.code)
		return al_error_from(err, rep.code, rep.msg);
	s->pid = rep.pid;
	s->start_time = rep.start_time;
	return 0;
}
