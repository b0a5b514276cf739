/* SPDX-License-Identifier: MIT */
/*
 * One airlockd per state directory. Two daemons on one directory would both
 * manage the same sandboxes: each agent takes the newest connection and drops
 * the other, both watchdogs act on the same expiries, both write one store.
 * The first daemon holds an exclusive flock on STATE/airlockd.lock for its
 * whole life (the kernel lets it go when the daemon ends, however it ends); a
 * second one is refused at start, naming the holder's pid.
 */
#include "daemon/internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int dm_state_lock(struct daemon *d, struct al_error **err)
{
	_cleanup_free_ char *path = xasprintf("%s/airlockd.lock", d->state_dir);
	_cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	char pid[32];
	ssize_t n;

	if (fd < 0)
		return al_error_set(err, errno, "open '%s'", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		if (e != EWOULDBLOCK)
			return al_error_set(err, e, "lock '%s'", path);
		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		return al_error_msg(err, EBUSY,
				    "state directory '%s' is in use by another airlockd (pid %s): "
				    "stop it first, or give this one another --state-dir",
				    d->state_dir, pid[0] ? pid : "unknown");
	}
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		return al_error_set(err, errno, "write '%s'", path);
	d->lock_fd = TAKE_FD(fd);
	return 0;
}

void dm_state_unlock(struct daemon *d)
{
	if (d->lock_fd >= 0)
		close(d->lock_fd); /* the lock goes with it; the file stays (no race on unlink) */
	d->lock_fd = -1;
}
