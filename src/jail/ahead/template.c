/* SPDX-License-Identifier: MIT */
/* Root templates for one-shot runs: kept, found and made here (see template.h); what is in
 * one and how a run's child uses it is rootfs.c's. */
#include "jail/ahead/template.h"
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "template_layout.h" /* JAIL_TEMPLATE_LAYOUT: a hash of the code that makes one */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *variant_name(bool net_link)
{
	return net_link ? "link" : "deny";
}

/* What the template binds from the host, and the code that makes it (meson.build):
 * a dozen lstat(2)s per run. */
static uint32_t template_key(void)
{
	uint32_t h = jail_fnv(2166136261u, &(unsigned){JAIL_TEMPLATE_LAYOUT}, sizeof(unsigned));
	char path[64];
	struct stat st;

	for (size_t i = 0; jail_rootfs_host_path(i, path, sizeof(path)); i++) {
		uint64_t id[3] = {0, 0, 0};

		if (lstat(path, &st) == 0) {
			id[0] = st.st_dev;
			id[1] = st.st_ino;
			id[2] = st.st_mode;
		}
		h = jail_fnv(h, id, sizeof(id));
	}
	return h;
}

const char *jail_template_root(const char *dir)
{
	if (!dir)
		dir = getenv("AIRLOCK_TEMPLATE");
	return dir && dir[0] == '/' ? dir : JAIL_TEMPLATE_ROOT;
}

bool jail_template_fits(const struct al_config *cfg, const char *ca_pem)
{
	return jail_rootfs_is_default(cfg) && !ca_pem;
}

/* dir made if missing (and /run/airlock above the default one); only a directory of ours
 * that no one else may write in holds templates. */
static int own_dir(const char *dir, struct al_error **err)
{
	if (strcmp(dir, JAIL_TEMPLATE_ROOT) == 0)
		mkdir("/run/airlock", 0755);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return al_error_set(err, errno, "mkdir '%s'", dir);
	if (!jail_dir_is_ours(dir))
		return al_error_msg(err, EPERM, "'%s' is not a directory of ours alone", dir);
	return 0;
}

/* The variant's templates made for another key: no run joins them any more. */
static void remove_stale(const char *dir, bool net_link, const char *keep)
{
	const char *v = variant_name(net_link);
	_cleanup_closedir_ DIR *d = opendir(dir);
	char path[PATH_MAX];
	struct dirent *e;

	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, v, strlen(v)) != 0 || e->d_name[strlen(v)] != '-' ||
		    strcmp(e->d_name, keep) == 0)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
			jail_unpin(path);
	}
}

/* The builder: a child of ours that makes the template's namespace and stays in it until
 * we have pinned it (its end of sp closes). */
static void builder_main(int sock, bool net_link)
{
	struct al_error *e = NULL;
	char c;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (jail_rootfs_template_make(net_link, &e) < 0) {
		const char *msg = e && e->msg ? e->msg : "making a root template failed";

		(void)!write(sock, msg, strlen(msg));
		_exit(1);
	}
	(void)!write(sock, "", 1);
	(void)!read(sock, &c, 1);
	_exit(0);
}

/* Make the template at path (under the lock). */
static int make(const char *path, bool net_link, struct al_error **err)
{
	char buf[512], src[64];
	int sp[2], r = 0;
	_cleanup_close_ int ns = -1;
	ssize_t n;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return al_error_set(err, errno, "socketpair");
	pid = fork();
	if (pid < 0) {
		close(sp[0]);
		close(sp[1]);
		return al_error_set(err, errno, "fork");
	}
	if (pid == 0) {
		close(sp[0]);
		builder_main(sp[1], net_link);
	}
	close(sp[1]);
	n = read(sp[0], buf, sizeof(buf) - 1);
	if (n == 1 && buf[0] == '\0') {
		snprintf(src, sizeof(src), "/proc/%d/ns/mnt", (int)pid);
		ns = open(src, O_RDONLY | O_CLOEXEC);
		if (ns < 0)
			r = al_error_set(err, errno, "open '%s'", src);
	} else {
		buf[n > 0 ? n : 0] = '\0';
		r = al_error_msg(err, EIO, "%s", n > 0 ? buf : "the template's builder died");
	}
	if (r == 0) {
		jail_unpin(
		    path); /* a pin half made by a builder that died, or one of a wrong type */
		r = jail_pin(ns, path, err);
	}
	close(sp[0]); /* the builder leaves */
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return r;
}

int jail_template_open(const char *dir, bool net_link, struct al_error **err)
{
	char name[64], path[PATH_MAX];
	_cleanup_close_ int lock = -1;
	int fd, n;

	snprintf(name, sizeof(name), "%s-%08x", variant_name(net_link), template_key());
	n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return al_error_msg(err, ENAMETOOLONG, "template directory '%.64s...'", dir);
	if ((fd = jail_pin_open(path, CLONE_NEWNS)) >= 0)
		return fd; /* the usual case: made by an earlier run */
	if (own_dir(dir, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/lock", dir);
	lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0)
		return al_error_set(err, errno, "lock '%s'", path);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fd = jail_pin_open(path, CLONE_NEWNS)) >= 0)
		return fd; /* made by another run while we waited */
	if (make(path, net_link, err) < 0)
		return -1;
	remove_stale(dir, net_link, name);
	if ((fd = jail_pin_open(path, CLONE_NEWNS)) < 0)
		return al_error_set(err, errno ? errno : EIO, "open the new template '%s'", path);
	return fd;
}

int jail_template_drop(const char *dir, struct al_error **err)
{
	_cleanup_closedir_ DIR *d = opendir(dir);
	char path[PATH_MAX];
	struct dirent *e;
	int n = 0;

	if (!d)
		return errno == ENOENT ? 0 : al_error_set(err, errno, "opendir '%s'", dir);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' ||
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
			n++;
		jail_unpin(path);
	}
	if (rmdir(dir) < 0 && errno != ENOENT)
		return al_error_set(err, errno, "rmdir '%s'", dir);
	return n;
}

unsigned jail_template_count(const char *dir)
{
	_cleanup_closedir_ DIR *d = opendir(dir);
	char path[PATH_MAX];
	struct dirent *e;
	unsigned n = 0;

	while (d && (e = readdir(d))) {
		_cleanup_close_ int fd = -1;

		if (e->d_name[0] == '.' ||
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		fd = jail_pin_open(path, CLONE_NEWNS);
		n += fd >= 0;
	}
	return n;
}
