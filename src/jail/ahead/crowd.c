/* SPDX-License-Identifier: MIT */
/*
 * How many one-shot launches are under way on this host, counted cheaply and
 * without any state that a crash could leave wrong.
 *
 * Each `airlock run` holds a POSIX write lock on one byte (its slot) of
 * JAIL_CROWD_FILE for as long as it lives; the kernel drops the lock when the
 * process ends, however it ends. Counting the others is F_GETLK over the slot
 * range: our own lock never conflicts with our own query, so every answer is
 * another launch's slot. Only a hint, for scheduling (spawn.c) and for the one-shot
 * pool's refill (run.c): any failure means "no others seen", which is what airlock
 * assumed before it counted.
 */
#include "jail/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SLOTS = 1024, PROBES = 16 };

static int lock_byte(int fd, int cmd, short type, off_t start, off_t len, struct flock *out)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
	int r = fcntl(fd, cmd, &fl);

	if (out)
		*out = fl;
	return r;
}

int jail_crowd_join(const char *path)
{
	char dir[256];
	const char *slash = strrchr(path, '/');
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0 && errno == ENOENT && slash && (size_t)(slash - path) < sizeof(dir)) {
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
		mkdir(dir, 0755); /* /run/airlock, as the pool makes it */
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0)
		return -1;
	/* Our slot: the first free one from a place our pid picks, so that concurrent
	 * launches seldom try the same bytes. A few tries only: with that many launches
	 * under way we still count them (the fd), uncounted ourselves. */
	for (int i = 0; i < PROBES; i++)
		if (lock_byte(fd, F_SETLK, F_WRLCK, (getpid() + i * 7) % SLOTS, 1, NULL) == 0)
			break;
	return fd;
}

/* Other launches' slots in [lo, hi), counted up to `enough`. F_GETLK reports one
 * conflicting lock of the range, not always the lowest: both sides of it are counted (a
 * lock over several bytes, which no launch takes, counts once). */
static unsigned count_in(int fd, off_t lo, off_t hi, unsigned enough)
{
	struct flock fl;
	unsigned n;
	off_t end;

	if (enough == 0 || lo >= hi || lock_byte(fd, F_GETLK, F_WRLCK, lo, hi - lo, &fl) < 0 ||
	    fl.l_type == F_UNLCK)
		return 0;
	n = 1;
	end = fl.l_len > 0 ? fl.l_start + fl.l_len : hi;
	if (fl.l_start > lo)
		n += count_in(fd, lo, fl.l_start, enough - n);
	if (n < enough && end < hi)
		n += count_in(fd, end, hi, enough - n);
	return n;
}

unsigned jail_crowd_others(int fd, unsigned enough)
{
	return fd < 0 ? 0 : count_in(fd, 0, SLOTS, enough);
}

unsigned jail_crowd_cpus(void)
{
	cpu_set_t cpus;

	return sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? (unsigned)CPU_COUNT(&cpus) : 0;
}

bool jail_crowd_full(int fd, unsigned cpus, bool counted)
{
	/* The others that fill every CPU: with us among them, one fewer (but at least one). */
	unsigned busy = !counted ? cpus : cpus > 1 ? cpus - 1 : 1;

	return cpus > 0 && jail_crowd_others(fd, busy) >= busy;
}
