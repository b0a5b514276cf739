/* SPDX-License-Identifier: MIT */
/* Namespaces kept without a process: an nsfs file bind-mounted on an empty file (the
 * one-shot pool's entries, the root templates). */
#include "jail/jail.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

int jail_pin(int ns_fd, const char *path, struct al_error **err)
{
	char src[64];
	int f = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (f < 0)
		return al_error_set(err, errno, "create '%s'", path);
	close(f);
	snprintf(src, sizeof(src), "/proc/self/fd/%d", ns_fd);
	if (mount(src, path, NULL, MS_BIND, NULL) < 0) {
		int e = errno;

		unlink(path);
		return al_error_set(err, e, "bind-mount a namespace on '%s'", path);
	}
	return 0;
}

void jail_unpin(const char *path)
{
	while (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		; /* a pin made twice: take every layer */
	unlink(path);
}

const char *jail_next_entry(DIR *d, size_t max)
{
	struct dirent *e;

	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && strlen(e->d_name) <= max)
			return e->d_name;
	return NULL;
}

bool jail_dir_is_ours(const char *dir)
{
	struct stat st;

	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

int jail_pin_open(const char *path, int type)
{
	/* An unmounted pin is an empty file: never join that; and whatever else is there,
	 * opening it never blocks. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);

	if (fd >= 0 && ioctl(fd, NS_GET_NSTYPE) != type) {
		close(fd);
		fd = -1;
	}
	return fd;
}
