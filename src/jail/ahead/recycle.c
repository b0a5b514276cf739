/* SPDX-License-Identifier: MIT */
/* Recycled network namespaces of deny-all one-shots (see recycle.h for the rules and the
 * layout). */
#include "jail/ahead/recycle.h"
#include "jail/jail.h"
#include "common/cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { LOG_MAX = 1 << 20 };

const char *jail_recycle_root(const char *root, char *buf, size_t len)
{
	int n;

	if (access(JAIL_RECYCLE_OFF_FILE, F_OK) == 0)
		return NULL; /* the host's setting: every run makes its own */
	if (!root)
		root = getenv("AIRLOCK_NETNS_POOL");
	if (!root || root[0] != '/')
		root = JAIL_RECYCLE_ROOT;
	n = snprintf(buf, len, "%s", root);
	return n > 0 && (size_t)n < len && (size_t)n < sizeof(((struct jail_recycle *)0)->root)
		   ? buf
		   : NULL;
}

/* The next entry's name in d ("." and ".." and long names skipped), or NULL. */
static const char *next_entry(DIR *d)
{
	struct dirent *e;

	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && strlen(e->d_name) <= 64)
			return e->d_name;
	return NULL;
}

/* ROOT/SUB, opened only if ROOT and it are root's alone (no one else could have put a
 * namespace of theirs there). */
static DIR *open_sub(const char *root, const char *sub)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/%s", root, sub);
	if (!jail_dir_is_ours(root) || !jail_dir_is_ours(path))
		return NULL;
	return opendir(path);
}

/* One line in ROOT/log: when, which namespace, what became of it and why. Best effort. */
static void log_event(const char *root, unsigned long long ino, const char *what, const char *why)
{
	char path[300], line[600], stamp[32];
	struct timespec ts;
	struct tm tm;
	struct stat st;
	int fd, n;

	snprintf(path, sizeof(path), "%s/log", root);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	n = snprintf(line, sizeof(line), "%s pid=%d net:[%llu] %s: %s\n", stamp, (int)getpid(), ino,
		     what, why);
	if (n <= 0)
		return;
	if (stat(path, &st) == 0 && st.st_size > LOG_MAX) {
		char old[310];

		snprintf(old, sizeof(old), "%s.1", path);
		rename(path, old);
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0) {
		(void)!write(fd, line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1));
		close(fd);
	}
}

/* Unpin an entry's namespace and remove its directory: the kernel tears it down once the
 * last reference (a run's fd) goes. */
static void destroy(const char *entry)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/ns", entry);
	jail_unpin(path);
	rmdir(entry);
}

static unsigned long long ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

static unsigned pool_size(void)
{
	unsigned n = 2 * jail_crowd_cpus();

	return n < 4 ? 4 : n > JAIL_RECYCLE_MAX ? JAIL_RECYCLE_MAX : n;
}

void jail_recycle_claim(const char *root, struct jail_recycle *c)
{
	char from[400], ns[420];
	const char *name;
	DIR *d;

	memset(c, 0, sizeof(*c));
	c->state = JAIL_RECYCLE_FRESH;
	c->fd = -1;
	snprintf(c->root, sizeof(c->root), "%s", root);
	d = open_sub(root, "ready");
	while (d && (name = next_entry(d))) {
		snprintf(from, sizeof(from), "%s/ready/%s", root, name);
		snprintf(c->entry, sizeof(c->entry), "%s/claimed/%d-%s", root, (int)getpid(), name);
		if (rename(from, c->entry) < 0)
			continue; /* another run took it first */
		snprintf(ns, sizeof(ns), "%s/ns", c->entry);
		c->fd = jail_pin_open(ns, CLONE_NEWNET);
		if (c->fd >= 0) {
			c->state = JAIL_RECYCLE_CLAIMED;
			break;
		}
		log_event(root, 0, "destroyed", "its pin is not a network namespace");
		destroy(c->entry);
	}
	if (d)
		closedir(d);
	if (c->state == JAIL_RECYCLE_FRESH)
		jail_recycle_sweep(root); /* none ready: claims of runs that were killed? */
}

void jail_recycle_adopt_fd(struct jail_recycle *c, int fd)
{
	if (c->state == JAIL_RECYCLE_FRESH && c->fd < 0 && fd >= 0)
		c->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

static int mkdirs(const char *root)
{
	static const char *const subs[] = {"ready", "claimed", "new"};
	char path[300], *slash;

	snprintf(path, sizeof(path), "%s", root);
	for (slash = strchr(path + 1, '/');; slash = strchr(slash + 1, '/')) {
		if (slash)
			*slash = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return -1;
		if (!slash)
			break;
		*slash = '/';
	}
	for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
		snprintf(path, sizeof(path), "%s/%s", root, subs[i]);
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return -1;
	}
	return jail_dir_is_ours(root) ? 0 : -1;
}

/* A clean namespace this run made: prepared, pinned in new/, published in ready/. */
static int adopt(struct jail_recycle *c)
{
	char tmp[260], dst[300];
	unsigned long long ino = ino_of(c->fd);
	struct al_error *err = NULL;
	int r;

	if (jail_recycle_count(c->root) >= pool_size() || mkdirs(c->root) < 0)
		return 1;
	r = jail_netns_prepare(c->fd);
	if (r != 0)
		return r == JAIL_NS_STRANDED ? r : 1;
	snprintf(tmp, sizeof(tmp), "%s/new/%d-n%llu", c->root, (int)getpid(), ino);
	snprintf(dst, sizeof(dst), "%s/ready/n%llu", c->root, ino);
	if (mkdir(tmp, 0700) < 0)
		return 1;
	snprintf(c->entry, sizeof(c->entry), "%s/ns", tmp);
	if (jail_pin(c->fd, c->entry, &err) < 0 || rename(tmp, dst) < 0) {
		al_error_free(err);
		destroy(tmp);
		return 1;
	}
	return 0;
}

int jail_recycle_release(struct jail_recycle *c)
{
	char why[200] = "", dst[300];
	unsigned long long ino;
	int r = 1;

	if (c->state == JAIL_RECYCLE_OFF || c->fd < 0) {
		al_closep(&c->fd);
		c->state = JAIL_RECYCLE_OFF;
		return 1;
	}
	ino = ino_of(c->fd);
	r = jail_netns_clean(c->fd, c->state == JAIL_RECYCLE_CLAIMED, why, sizeof(why));
	if (r == JAIL_NS_STRANDED)
		return r;
	if (c->state == JAIL_RECYCLE_CLAIMED) {
		snprintf(dst, sizeof(dst), "%s/ready/%s", c->root,
			 strchr(strrchr(c->entry, '/'), '-') + 1);
		if (r == 0 && rename(c->entry, dst) < 0) {
			r = 1;
			snprintf(why, sizeof(why), "cannot put it back: %s", strerror(errno));
		}
		if (r != 0) {
			log_event(c->root, ino, "destroyed", why);
			destroy(c->entry);
		}
	} else if (r == 0) {
		r = adopt(c);
	} else if (mkdirs(c->root) == 0) {
		log_event(c->root, ino, "not kept", why);
	}
	al_closep(&c->fd);
	c->state = JAIL_RECYCLE_OFF;
	return r == JAIL_NS_STRANDED ? r : r == 0 ? 0 : 1;
}

/* Destroy the entries of SUB whose run (the pid that leads the name) is gone, or all. */
static int sweep_sub(const char *root, const char *sub, bool all)
{
	char entry[400];
	const char *name;
	int n = 0;
	DIR *d = open_sub(root, sub);

	while (d && (name = next_entry(d))) {
		int pid = atoi(name);

		if (!all && pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH))
			continue;
		snprintf(entry, sizeof(entry), "%s/%s/%s", root, sub, name);
		if (strcmp(sub, "claimed") == 0)
			log_event(
			    root,
			    strtoull(strchr(name, 'n') ? strchr(name, 'n') + 1 : "0", NULL, 10),
			    "destroyed", "its run ended without giving it back");
		destroy(entry);
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

int jail_recycle_sweep(const char *root)
{
	return sweep_sub(root, "claimed", false) + sweep_sub(root, "new", false);
}

int jail_recycle_drain(const char *root)
{
	char from[400], to[400];
	const char *name;
	int n = jail_recycle_sweep(root);
	DIR *d = jail_dir_is_ours(root) && mkdirs(root) == 0 ? open_sub(root, "ready") : NULL;

	while (d && (name = next_entry(d))) {
		snprintf(from, sizeof(from), "%s/ready/%s", root, name);
		snprintf(to, sizeof(to), "%s/claimed/%d-%s", root, (int)getpid(), name);
		if (rename(from, to) == 0) {
			destroy(to);
			n++;
		}
	}
	if (d)
		closedir(d);
	return n;
}

unsigned jail_recycle_count(const char *root)
{
	unsigned n = 0;
	DIR *d = open_sub(root, "ready");

	while (d && next_entry(d))
		n++;
	if (d)
		closedir(d);
	return n;
}
