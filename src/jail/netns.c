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
#include <stdio.h>
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

/*
 * A new namespace of one type (CLONE_NEWNET or CLONE_NEWIPC; its /proc name proc, its
 * name in messages what) for a sandbox to join later, set up by inside (NULL: nothing)
 * while this thread is in it. Back in the thread's own namespace on return (or
 * JAIL_NS_STRANDED: see jail.h).
 */
static int ns_make(int type, const char *proc, const char *what,
		   int (*inside)(struct al_error **err), int *out, struct al_error **err)
{
	char path[64];
	_cleanup_close_ int home = -1;
	int fd, r = 0;

	snprintf(path, sizeof(path), "/proc/thread-self/ns/%s", proc);
	home = open(path, O_RDONLY | O_CLOEXEC);
	*out = -1;
	if (home < 0)
		return al_error_set(err, errno, "open this thread's %s namespace", what);
	if (unshare(type) < 0)
		return al_error_set(err, errno, "unshare a new %s namespace", what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		r = al_error_set(err, errno, "open the new %s namespace", what);
	else if (inside)
		r = inside(err);
	if (setns(home, type) < 0) {
		if (fd >= 0)
			close(fd);
		al_error_set(err, errno, "setns back from a new %s namespace", what);
		return JAIL_NS_STRANDED;
	}
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*out = fd;
	return 0;
}

int jail_netns_make(int *out, struct al_error **err)
{
	return ns_make(CLONE_NEWNET, "net", "network", jail_loopback_up, out, err);
}

int jail_ipcns_make(int *out, struct al_error **err)
{
	return ns_make(CLONE_NEWIPC, "ipc", "IPC", NULL, out, err);
}
