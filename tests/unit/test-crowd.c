/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the count of one-shot launches under way (src/jail/ahead/crowd.c): each
 * process that joins holds a slot until it ends, however it ends; a process never
 * counts itself; the count stops at `enough`; a file that cannot be made means
 * "no others", never a failure. Other launches are forked children that join the
 * same file and wait on a pipe.
 */
#include "jail/jail.h"
#include "tap.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256], file[300];

struct other {
	pid_t pid;
	int hold; /* closing it lets the child exit */
};

/* The two ways to take slots: a launch's (one byte), or every slot at once. */
static bool join_one(void)
{
	return jail_crowd_join(file) >= 0;
}

static bool hog_all(void)
{
	int fd = open(file, O_RDWR | O_CLOEXEC);
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 << 20};

	return fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0;
}

/* A child that takes slots with `take`, says so, and holds them until `hold` is closed. */
static struct other start_child(bool (*take)(void))
{
	int ready[2], hold[2];
	struct other o = {-1, -1};
	char c;

	if (pipe(ready) < 0 || pipe(hold) < 0)
		return o;
	o.pid = fork();
	if (o.pid == 0) {
		/* Not the other children's pipes: each must see EOF when its own hold closes. */
		for (int i = 3; i < 256; i++)
			if (i != ready[1] && i != hold[0])
				close(i);
		c = take() ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(2);
		while (read(hold[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	o.hold = hold[1];
	if (read(ready[0], &c, 1) != 1 || c != 'y')
		o.pid = -1;
	close(ready[0]);
	return o;
}

static struct other start_other(void)
{
	return start_child(join_one);
}

static void end_other(struct other *o, bool kill9)
{
	if (kill9)
		kill(o->pid, SIGKILL);
	close(o->hold);
	waitpid(o->pid, NULL, 0);
}

static void test_alone_then_with_others(void)
{
	int me = jail_crowd_join(file);
	struct other a, b;

	CHECK(me >= 0, "join makes the directory and the file, and holds a slot");
	CHECK(jail_crowd_others(me, 8) == 0, "alone: no others (our own slot is not counted)");
	CHECK(!jail_crowd_full(me, 2, true) && !jail_crowd_full(me, 1, true), "alone: never full");
	a = start_other();
	CHECK(a.pid > 0, "a second launch joins");
	CHECK(jail_crowd_others(me, 8) == 1, "one other");
	CHECK(jail_crowd_full(me, 1, true), "1 CPU, 2 launches: full");
	b = start_other();
	CHECK(b.pid > 0, "a third launch joins");
	CHECK(jail_crowd_others(me, 8) == 2, "two others");
	CHECK(jail_crowd_others(me, 1) == 1, "counting stops at `enough`");
	CHECK(jail_crowd_others(me, 0) == 0, "enough 0: nothing counted");
	CHECK(jail_crowd_full(me, 2, true), "2 CPUs, 3 launches: full");
	CHECK(jail_crowd_full(me, 3, true), "3 CPUs, 3 launches: full");
	CHECK(!jail_crowd_full(me, 4, true), "4 CPUs, 3 launches: not full");
	end_other(&a, true);
	CHECK(jail_crowd_others(me, 8) == 1, "a SIGKILLed launch's slot is free at once");
	end_other(&b, false);
	CHECK(jail_crowd_others(me, 8) == 0, "an ended launch's slot is free");
	close(me);
}

static void test_many_others_all_counted(void)
{
	enum { N = 12 };
	struct other o[N];
	int me = jail_crowd_join(file), started = 0;

	for (int i = 0; i < N; i++)
		if ((o[i] = start_other()).pid > 0)
			started++;
	CHECK(started == N, "%d launches joined", started);
	/* F_GETLK reports one lock of a range, not always the lowest: every one counts. */
	CHECK(jail_crowd_others(me, 64) == (unsigned)N, "all %d others counted (got %u)", N,
	      jail_crowd_others(me, 64));
	for (int i = 0; i < N; i++)
		if (o[i].pid > 0)
			end_other(&o[i], false);
	CHECK(jail_crowd_others(me, 64) == 0, "none left");
	close(me);
}

static void test_no_free_slot_still_counts(void)
{
	struct other hog = start_child(hog_all); /* one lock over every slot */
	int me;

	CHECK(hog.pid > 0, "a process holds every slot");
	me = jail_crowd_join(file);
	CHECK(me >= 0, "joining without a free slot still gives the fd (a few tries, no more)");
	CHECK(jail_crowd_others(me, 8) == 1, "and the others are counted");
	if (me >= 0)
		close(me);
	end_other(&hog, false);
}

static void test_unusable_file_counts_none(void)
{
	CHECK(jail_crowd_join("/proc/airlock-no-such-dir/launches") < 0,
	      "a file that cannot be made: -1");
	CHECK(jail_crowd_others(-1, 8) == 0, "and no others are counted");
}

static void test_a_symlink_is_not_followed(void)
{
	char link[320];
	int fd;

	snprintf(link, sizeof(link), "%s/link", dir);
	CHECK(symlink("/etc/hostname", link) == 0, "symlink made");
	fd = jail_crowd_join(link);
	CHECK(fd < 0, "a symlinked file is refused (O_NOFOLLOW)");
	if (fd >= 0)
		close(fd);
	unlink(link);
}

int main(void)
{
	char tmpl[] = "/tmp/airlock-test-crowd-XXXXXX";

	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/run", tmpl);
	snprintf(file, sizeof(file), "%s/launches", dir);
	test_alone_then_with_others();
	test_many_others_all_counted();
	test_no_free_slot_still_counts();
	test_unusable_file_counts_none();
	test_a_symlink_is_not_followed();
	unlink(file);
	rmdir(dir);
	rmdir(tmpl);
	return tap_done();
}
