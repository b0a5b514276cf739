/* SPDX-License-Identifier: MIT */
/* The sandbox's network namespace: loopback only (the deny-all policy). And its IPC
 * namespace, when made ahead. */
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int jail_loopback_up(struct al_error **err)
{
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;

	if (fd < 0)
		return al_error_set(err, errno, "socket(AF_INET) for loopback");
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return al_error_set(err, errno, "SIOCGIFFLAGS lo");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		return al_error_set(err, errno, "SIOCSIFFLAGS lo up");
	return 0;
}

int jail_netns_make(int *out, struct al_error **err)
{
	_cleanup_close_ int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int fd, r = 0;

	*out = -1;
	if (home < 0)
		return al_error_set(err, errno, "open this thread's network namespace");
	if (unshare(CLONE_NEWNET) < 0)
		return al_error_set(err, errno, "unshare(CLONE_NEWNET)");
	fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		r = al_error_set(err, errno, "open the new network namespace");
	else
		r = jail_loopback_up(err);
	if (setns(home, CLONE_NEWNET) < 0) {
		if (fd >= 0)
			close(fd);
		al_error_set(err, errno, "setns back from a new network namespace");
		return JAIL_NS_STRANDED;
	}
	if (r < 0) {
		close(fd);
		return -1;
	}
	*out = fd;
	return 0;
}

int jail_ipcns_make(int *out, struct al_error **err)
{
	_cleanup_close_ int home = open("/proc/thread-self/ns/ipc", O_RDONLY | O_CLOEXEC);
	int fd;

	*out = -1;
	if (home < 0)
		return al_error_set(err, errno, "open this thread's IPC namespace");
	if (unshare(CLONE_NEWIPC) < 0)
		return al_error_set(err, errno, "unshare(CLONE_NEWIPC)");
	fd = open("/proc/thread-self/ns/ipc", O_RDONLY | O_CLOEXEC);
	if (setns(home, CLONE_NEWIPC) < 0) {
		if (fd >= 0)
			close(fd);
		al_error_set(err, errno, "setns back from a new IPC namespace");
		return JAIL_NS_STRANDED;
	}
	if (fd < 0)
		return al_error_set(err, errno, "open the new IPC namespace");
	*out = fd;
	return 0;
}
