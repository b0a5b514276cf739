/* SPDX-License-Identifier: MIT */
/* Recycled network namespaces of deny-all one-shots (see recycle.h for the rules and the
 * layout). */
#include "jail/ahead/recycle.h"
#include "jail/ahead/pool.h"
#include "host/gw_client.h"
#include "jail/jail.h"
#include "common/cleanup.h"
#include "net/contract.h"
#include "gw_nft_batch.h"

#include "common/syscalls.h"

#include <dirent.h>
#include <poll.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
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

/* Entry names are at most 64 characters. */
static const char *next_entry(DIR *d)
{
	return jail_next_entry(d, 64);
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

/* A waiting gateway's socket in a pair: gw-ID.sock. */
static bool is_gateway_sock(const char *name)
{
	size_t n = strlen(name);

	return strncmp(name, "gw-", 3) == 0 && n > 8 && strcmp(name + n - 5, ".sock") == 0;
}

/* Send away every gateway waiting in entry (whichever build started it). */
static void stop_gateways(const char *entry)
{
	DIR *d = opendir(entry);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (is_gateway_sock(e->d_name))
			jail_pool_stop_gateway(entry, e->d_name);
	if (d)
		closedir(d);
}

/* Unpin an entry's namespace and remove its directory: the kernel tears it down once the
 * last reference (a run's fd) goes. */
static void destroy(const char *entry)
{
	char path[512];

	stop_gateways(entry); /* a ready pair's, if one waits there */
	snprintf(path, sizeof(path), "%s/ns", entry);
	jail_unpin(path);
	snprintf(path, sizeof(path), "%s/gw", entry);
	jail_unpin(path);
	rmdir(entry);
}

/* How long ago (ms) a pair was put back: its entry directory's mtime (stamp). false if it
 * cannot be read. Negative after the clock was set back. */
static bool age_ms(int dfd, const char *name, long long *ms)
{
	struct timespec now;
	struct stat st;

	/* Relative to the open ready/ directory: a lookup of one name, not of the whole path
	 * (a claim looks at every resting pair until one has rested). */
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	clock_gettime(CLOCK_REALTIME, &now);
	*ms = (long long)(now.tv_sec - st.st_mtim.tv_sec) * 1000 +
	      (now.tv_nsec - st.st_mtim.tv_nsec) / 1000000;
	return true;
}

/* A pair has rested long enough (the ruleset's log limit refilled); a clock set back
 * counts as rested. */
static bool rested(int dfd, const char *name)
{
	long long ms;

	return age_ms(dfd, name, &ms) && (ms >= JAIL_RECYCLE_REST_MS || ms < 0);
}

/* Take ready entry `name` of ROOT as a run would (rename(2) into claimed/) and destroy it:
 * true if this caller took it. */
static bool take_and_destroy(const char *root, const char *name)
{
	char from[400], to[400];

	snprintf(from, sizeof(from), "%s/ready/%s", root, name);
	snprintf(to, sizeof(to), "%s/claimed/%d-%s", root, (int)getpid(), name);
	if (rename(from, to) < 0)
		return false;
	destroy(to);
	return true;
}

/* Its rest starts now. */
static void stamp(const char *entry)
{
	utimensat(AT_FDCWD, entry, NULL, 0);
}

/* What a pair was made by: the ruleset's bytes, the link's names and addresses, and what
 * an entry may hold (LAYOUT: a build that would start its own gateway beside a waiting
 * one must never take a pair of ours). */
static unsigned link_version(void)
{
	static const char link[] =
	    NET_GW_ADDR " " NET_SBX_ADDR " " NET_SBX_LINK " " NET_GW_LINK " layout 2: gw-ID.sock";

	return jail_fnv(jail_fnv(2166136261u, gw_nft_batch, sizeof(gw_nft_batch)), link,
			sizeof(link));
}

static unsigned long long ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* Loopback-only: 2 per CPU. Pairs rest after a run, so a run finds one only if the pool
 * holds what the host launches in that time: 16 per CPU (at most JAIL_RECYCLE_MAX; a
 * lone run takes ~4 ms, 2 CPUs launch ~500/s). */
static unsigned pool_size(bool link)
{
	unsigned n = (link ? 16 : 2) * jail_crowd_cpus();

	return n < 4 ? 4 : n > JAIL_RECYCLE_MAX ? JAIL_RECYCLE_MAX : n;
}

/* The name of the socket on which a gateway this build starts waits in a pair:
 * gw-ID.sock, ID naming the lite gateway binary next to us (its inode, size and mtime), so
 * that a run only ever hands its policy to the gateway binary it would have started
 * itself. "" when there is none. */
static void own_gateway_sock(char *buf, size_t len)
{
	_cleanup_free_ char *path = gw_sibling("airlock-gateway-lite");
	struct stat st;
	unsigned long long id[4];

	buf[0] = '\0';
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	id[0] = st.st_dev, id[1] = st.st_ino, id[2] = (unsigned long long)st.st_size;
	id[3] = (unsigned long long)st.st_mtim.tv_sec * 1000000000ULL +
		(unsigned long long)st.st_mtim.tv_nsec;
	snprintf(buf, len, "gw-%08x.sock", jail_fnv(2166136261u, id, sizeof(id)));
}

/* Who waits in pair `entry`: nobody, a gateway of ours (on c->gw_name), or another's. */
enum waiting { WAIT_NONE, WAIT_OURS, WAIT_OTHER };

static enum waiting gateway_in(const struct jail_recycle *c, const char *entry)
{
	enum waiting w = WAIT_NONE;
	DIR *d = opendir(entry);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (is_gateway_sock(e->d_name))
			w = c->gw_name[0] && strcmp(e->d_name, c->gw_name) == 0 && w == WAIT_NONE
				? WAIT_OURS
				: WAIT_OTHER;
	if (d)
		closedir(d);
	return w;
}

/* Open a claimed entry's namespaces into c: 0, or -1 (then it is not sound). */
static int open_claimed(struct jail_recycle *c)
{
	char ns[420];

	snprintf(ns, sizeof(ns), "%s/ns", c->entry);
	c->fd = jail_pin_open(ns, CLONE_NEWNET);
	if (c->fd < 0 || !c->link)
		return c->fd < 0 ? -1 : 0;
	snprintf(c->gw_path, sizeof(c->gw_path), "%s/gw", c->entry);
	c->gw_fd = jail_pin_open(c->gw_path, CLONE_NEWNET);
	if (c->gw_fd >= 0) {
		if (gateway_in(c, c->entry) == WAIT_OURS)
			snprintf(c->gw_sock, sizeof(c->gw_sock), "%s/%s", c->entry, c->gw_name);
		return 0;
	}
	al_closep(&c->fd);
	return -1;
}

void jail_recycle_claim(const char *root, bool link, bool waiting_ok, struct jail_recycle *c)
{
	char from[400];
	const char *name;
	enum waiting w;
	DIR *d;

	memset(c, 0, sizeof(*c));
	c->state = JAIL_RECYCLE_FRESH;
	c->link = link;
	c->fd = c->gw_fd = -1;
	if (link)
		own_gateway_sock(c->gw_name, sizeof(c->gw_name));
	snprintf(c->log, sizeof(c->log), "%s", root);
	if (link)
		snprintf(c->root, sizeof(c->root), "%s/link-%08x", root, link_version());
	else
		snprintf(c->root, sizeof(c->root), "%s", root);
	d = open_sub(c->root, "ready");
	while (d && (name = next_entry(d))) {
		snprintf(from, sizeof(from), "%s/ready/%s", c->root, name);
		if (link && !rested(dirfd(d), name))
			continue;
		/* Never a second gateway beside a waiting one: only ours, if we may use it. */
		if (link && (w = gateway_in(c, from)) != WAIT_NONE &&
		    (w != WAIT_OURS || !waiting_ok))
			continue;
		snprintf(c->entry, sizeof(c->entry), "%s/claimed/%d-%s", c->root, (int)getpid(),
			 name);
		if (rename(from, c->entry) < 0)
			continue; /* another run took it first */
		if (open_claimed(c) == 0) {
			c->state = JAIL_RECYCLE_CLAIMED;
			break;
		}
		log_event(c->log, 0, "destroyed", "its pin is not a network namespace");
		destroy(c->entry);
	}
	if (d)
		closedir(d);
	if (c->state == JAIL_RECYCLE_FRESH)
		jail_recycle_sweep(root); /* none ready: claims of runs that were killed? */
}

void jail_recycle_give_up(struct jail_recycle *c, const char *why)
{
	if (c->state != JAIL_RECYCLE_CLAIMED)
		return;
	log_event(c->log, ino_of(c->fd), "destroyed", why);
	destroy(c->entry);
	al_closep(&c->fd);
	al_closep(&c->gw_fd);
	c->gw_sock[0] = c->gw_path[0] = '\0';
	c->state = JAIL_RECYCLE_FRESH;
}

void jail_recycle_adopt_fd(struct jail_recycle *c, int fd)
{
	if (c->state == JAIL_RECYCLE_FRESH && c->fd < 0 && fd >= 0)
		c->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

void jail_recycle_adopt_gw_fd(struct jail_recycle *c, int fd)
{
	struct stat mine, its;

	/* The gateway not yet in a namespace of its own would hand in ours: never. */
	if (c->state != JAIL_RECYCLE_FRESH || !c->link || c->gw_fd >= 0 || fd < 0 ||
	    stat("/proc/thread-self/ns/net", &mine) < 0 || fstat(fd, &its) < 0 ||
	    (mine.st_dev == its.st_dev && mine.st_ino == its.st_ino))
		return;
	c->gw_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

static int mkdirs(const char *root)
{
	static const char *const subs[] = {"ready", "claimed", "new"};
	char path[300], *slash;

	if (!root[0])
		return -1;

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

static unsigned count_ready(const char *root)
{
	unsigned n = 0;
	DIR *d = open_sub(root, "ready");

	while (d && next_entry(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/* A gateway to wait in pair `entry` for the next run (best effort: without one a run
 * starts its own), at the caller's priority, not the check's. */
static void start_gateway(const struct jail_recycle *c, const char *entry)
{
	int was = getpriority(PRIO_PROCESS, 0);

	if (!c->gw_name[0])
		return;
	setpriority(PRIO_PROCESS, 0, c->gateway_nice);
	jail_pool_start_gateway(entry, c->gw_name, JAIL_RECYCLE_IDLE_S);
	setpriority(PRIO_PROCESS, 0, was);
}

/* A clean namespace (or pair) this run made: prepared, pinned in new/, published in ready/. */
static int adopt(struct jail_recycle *c)
{
	char tmp[300], dst[300], name[64], pin[320];
	unsigned long long ino = ino_of(c->fd);
	struct al_error *err = NULL;
	int r;

	if (count_ready(c->root) >= pool_size(c->link) || mkdirs(c->root) < 0)
		return 1;
	r = jail_netns_prepare(c->fd); /* a pair's ends were made so (net_link_make) */
	if (r != 0)
		return r == JAIL_NS_STRANDED ? r : 1;
	snprintf(name, sizeof(name), "n%llu", ino);
	snprintf(tmp, sizeof(tmp), "%s/new/%d-%s", c->root, (int)getpid(), name);
	snprintf(dst, sizeof(dst), "%s/ready/%s", c->root, name);
	if (mkdir(tmp, 0700) < 0)
		return 1;
	snprintf(pin, sizeof(pin), "%s/ns", tmp);
	r = jail_pin(c->fd, pin, &err);
	snprintf(pin, sizeof(pin), "%s/gw", tmp);
	if (r == 0 && c->link)
		r = jail_pin(c->gw_fd, pin, &err);
	if (r == 0 && c->link && c->gateway)
		start_gateway(c, tmp);
	if (c->link)
		stamp(tmp);
	if (r < 0 || rename(tmp, dst) < 0) {
		al_error_free(err);
		destroy(tmp);
		return 1;
	}
	return 0;
}

/* Pairs idle for JAIL_RECYCLE_IDLE_S are destroyed, down to 4 ready: after a burst of
 * allowlisted runs, the pool does not keep ~320 KiB of kernel memory per pair for good.
 * Taken by rename(2) first, as a run would. */
static void expire(const char *root)
{
	const char *name;
	long long ms;
	unsigned n = count_ready(root);
	DIR *d = n > 4 ? open_sub(root, "ready") : NULL;

	while (d && n > 4 && (name = next_entry(d))) {
		if (age_ms(dirfd(d), name, &ms) && ms >= JAIL_RECYCLE_IDLE_S * 1000LL &&
		    take_and_destroy(root, name))
			n--;
	}
	if (d)
		closedir(d);
}

/* Is everything of the run gone from its namespace (or pair)? As jail_netns_clean. */
static int check(struct jail_recycle *c, char *why, size_t len)
{
	if (!c->link)
		return jail_netns_clean(c->fd, c->state == JAIL_RECYCLE_CLAIMED, why, len);
	if (c->gw_fd < 0) {
		snprintf(why, len, "its gateway's namespace is not known");
		return 1;
	}
	return jail_netns_clean_link(c->fd, c->gw_fd, why, len);
}

static int sweep_sub(const char *log, const char *root, const char *sub, bool all);

int jail_recycle_release(struct jail_recycle *c)
{
	char why[200] = "", dst[300];
	unsigned long long ino;
	int r = 1;

	if (c->state == JAIL_RECYCLE_OFF || c->fd < 0) {
		al_closep(&c->fd);
		al_closep(&c->gw_fd);
		c->state = JAIL_RECYCLE_OFF;
		return 1;
	}
	ino = ino_of(c->fd);
	r = check(c, why, sizeof(why));
	if (r == JAIL_NS_STRANDED)
		return r;
	if (c->state == JAIL_RECYCLE_CLAIMED) {
		snprintf(dst, sizeof(dst), "%s/ready/%s", c->root,
			 strchr(strrchr(c->entry, '/'), '-') + 1);
		if (r == 0 && c->link && c->gateway)
			start_gateway(c, c->entry);
		if (r == 0 && c->link)
			stamp(c->entry);
		if (r == 0 && rename(c->entry, dst) < 0) {
			r = 1;
			snprintf(why, sizeof(why), "cannot put it back: %s", strerror(errno));
		}
		if (r != 0) {
			log_event(c->log, ino, "destroyed", why);
			destroy(c->entry);
		}
		if (c->link) {
			expire(c->root);
			/* pairs whose waiting gateway left idle (claimed/idle-NAME), and claims of
			 * runs that died */
			sweep_sub(c->log, c->root, "claimed", false);
		}
	} else if (r == 0) {
		r = adopt(c);
	} else if (mkdirs(c->log) == 0) {
		log_event(c->log, ino, "not kept", why);
	}
	al_closep(&c->fd);
	al_closep(&c->gw_fd);
	c->state = JAIL_RECYCLE_OFF;
	return r == JAIL_NS_STRANDED ? r : r == 0 ? 0 : 1;
}

/* Close every fd but 0..2 and those of keep (each may be -1); 0..2 onto /dev/null. */
static void close_all_but(const int *fds, int n)
{
	int keep[8], null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	unsigned next = 3;

	n = n < 8 ? n : 8;
	for (int i = 0; i < n; i++)
		keep[i] = fds[i];
	for (int i = 0; i < n; i++) /* sorted */
		for (int j = i + 1; j < n; j++)
			if (keep[j] < keep[i]) {
				int t = keep[i];
				keep[i] = keep[j], keep[j] = t;
			}
	for (int fd = 0; fd < 3 && null_fd >= 0; fd++)
		if (fd != null_fd)
			dup2(null_fd, fd);
	if (null_fd > 2)
		close(null_fd);
	for (int i = 0; i < n; i++) {
		if (keep[i] < (int)next)
			continue;
		if (keep[i] > (int)next)
			sys_close_range(next, (unsigned)keep[i] - 1, 0);
		next = (unsigned)keep[i] + 1;
	}
	sys_close_range(next, ~0U, 0);
}

/* ROOT/lock, held shared by each check under way (jail_recycle_settle waits for them). */
static int lock_shared(const char *root)
{
	char path[300];
	int fd;

	/* The tree is made once (by the first run): its six mkdirs only when the lock is
	 * missing, not on every run's way out. */
	snprintf(path, sizeof(path), "%s/lock", root);
	fd = jail_dir_is_ours(root) ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
	if (fd < 0) {
		if (mkdirs(root) < 0)
			return -1;
		fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd >= 0 && flock(fd, LOCK_SH) < 0)
		al_closep(&fd);
	return fd;
}

void jail_recycle_settle(const char *root)
{
	char path[300];
	_cleanup_close_ int fd = -1;

	snprintf(path, sizeof(path), "%s/lock", root);
	if (!jail_dir_is_ours(root))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0)
		flock(fd, LOCK_EX); /* released with the fd */
}

void jail_recycle_end_gateway(int pidfd)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};

	if (pidfd < 0)
		return;
	sys_pidfd_send_signal(pidfd, SIGKILL);
	poll(&p, 1, 5000);
}

int jail_recycle_release_detached(struct jail_recycle *c, int wait_fd, int *last_fd,
				  const struct jail_recycle_also *also, bool *taken)
{
	struct pollfd p = {.fd = wait_fd, .events = POLLIN};
	/* Taken before the fork, and so held until the child is done: a settle after the
	 * caller's exit waits for the check. */
	_cleanup_close_ int lock = -1;
	pid_t pid;
	int go[2];
	char moved[300];
	bool killed = false;

	*taken = false;
	if (c->state == JAIL_RECYCLE_OFF || c->fd < 0 || pipe2(go, O_CLOEXEC) < 0) {
		jail_recycle_end_gateway(wait_fd);
		al_closep(last_fd);
		return jail_recycle_release(c);
	}
	lock = lock_shared(c->log);
	pid = fork();
	if (pid == 0) { /* its own session, nothing of the caller's, niced */
		const int keep[] = {c->fd, c->gw_fd, wait_fd, lock, go[0], *last_fd};
		char byte;

		setsid();
		/* Before its channel closes with the caller's fds: no last lines to write. */
		if (wait_fd >= 0)
			sys_pidfd_send_signal(wait_fd, SIGKILL);
		close_all_but(keep, 6);
		clearenv(); /* the gateway it starts serves the next caller, not this one */
		/* A claim carries its holder's pid: ours once the caller has renamed it (a
		 * sweep destroys a claim whose holder is gone, and the caller is about to go). */
		if (read(go[0], &byte, 1) != 1)
			_exit(1);
		if (also && also->fn)
			also->fn(also->arg);
		al_closep(last_fd); /* the last copy: the caller closed its own before "g" */
		if (c->state == JAIL_RECYCLE_CLAIMED) { /* not snprintf into what it reads */
			snprintf(moved, sizeof(moved), "%s/claimed/%d-%s", c->root, (int)getpid(),
				 strchr(strrchr(c->entry, '/'), '-') + 1);
			snprintf(c->entry, sizeof(c->entry), "%s", moved);
		}
		c->gateway = true; /* the next run's, started here rather than on its path */
		c->gateway_nice = getpriority(PRIO_PROCESS, 0);
		(void)!nice(5);
		if (wait_fd >= 0)
			poll(&p, 1, 5000);
		_exit(jail_recycle_release(c) == JAIL_NS_STRANDED ? 2 : 0);
	}
	close(go[0]);
	if (pid > 0) {
		if (c->state == JAIL_RECYCLE_CLAIMED) {
			snprintf(moved, sizeof(moved), "%s/claimed/%d-%s", c->root, (int)pid,
				 strchr(strrchr(c->entry, '/'), '-') + 1);
			/* left for the sweep, which destroys it; `also` is the caller's */
			if (rename(c->entry, moved) < 0 && kill(pid, SIGKILL) == 0)
				killed = true;
		}
		al_closep(last_fd);
		(void)!write(go[1], "g", 1);
		close(go[1]);
		*taken = !killed;
		al_closep(&c->fd);
		al_closep(&c->gw_fd);
		c->state = JAIL_RECYCLE_OFF;
		return 1;
	}
	close(go[1]);
	jail_recycle_end_gateway(wait_fd); /* no process: the same, here and now */
	al_closep(last_fd);
	return jail_recycle_release(c);
}

/* Destroy the entries of SUB whose run (the pid that leads the name) is gone, or all; log in
 * log. */
static int sweep_sub(const char *log, const char *root, const char *sub, bool all)
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
			    log,
			    strtoull(strchr(name, 'n') ? strchr(name, 'n') + 1 : "0", NULL, 10),
			    "destroyed",
			    strncmp(name, "idle-", 5) == 0
				? "idle: nobody claimed its waiting gateway, which took it and left"
				: "its run ended without giving it back");
		destroy(entry);
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* Call fn(log, dir) for ROOT and for each ROOT/link-* (pairs of every build); the sum. */
static int each_dir(const char *root, int (*fn)(const char *log, const char *dir))
{
	char dir[300];
	struct dirent *e;
	int n = fn(root, root);
	DIR *d = jail_dir_is_ours(root) ? opendir(root) : NULL;

	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "link-", 5) != 0 || strlen(e->d_name) > 40)
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", root, e->d_name);
		n += fn(root, dir);
	}
	if (d)
		closedir(d);
	return n;
}

static int sweep_dir(const char *log, const char *dir)
{
	return sweep_sub(log, dir, "claimed", false) + sweep_sub(log, dir, "new", false);
}

int jail_recycle_sweep(const char *root)
{
	return each_dir(root, sweep_dir);
}

static int drain_dir(const char *log, const char *dir)
{
	const char *name;
	int n = sweep_dir(log, dir);
	DIR *d = jail_dir_is_ours(dir) && mkdirs(dir) == 0 ? open_sub(dir, "ready") : NULL;

	while (d && (name = next_entry(d)))
		n += take_and_destroy(dir, name);
	if (d)
		closedir(d);
	return n;
}

int jail_recycle_drain(const char *root)
{
	return each_dir(root, drain_dir);
}

unsigned jail_recycle_count(const char *root, unsigned *link)
{
	char dir[300];

	if (link) {
		snprintf(dir, sizeof(dir), "%s/link-%08x", root, link_version());
		*link = count_ready(dir);
	}
	return count_ready(root);
}
