/* SPDX-License-Identifier: MIT */
/*
 * Fork by copy-on-write (docs/snapshots.md, "Fork").
 *
 * Each writable area of the source (/workspace, /tmp, /home/user, /dev/shm, the workdir)
 * becomes the lower layer of two overlayfs mounts: one stacked on the area in the source,
 * one stacked on it in the fork, each with an upper layer of its own (a fresh tmpfs per
 * sandbox, the sandbox's disk as its size). Neither ever writes the shared layer again: a
 * write copies the file up, a delete leaves a whiteout in the upper layer. A fork of a
 * sandbox that is already on overlays takes its upper layer as one more lower one (at
 * most DM_COW_DEPTH).
 *
 * The layers are detached mounts (open_tree clones, fsmount): no host path names them.
 * airlockd keeps an O_PATH fd of each (per sandbox and area, for the next fork); the
 * overlays hold their own private clones, so a layer lives as long as something uses it.
 *
 * Safety of the switch: the source is frozen; a process of it that holds anything below
 * an area (a cwd, an open file, a mapping) would keep reaching the shared layer under the
 * new mount, so then nothing is switched and the caller copies. So does a mount below an
 * area (a drive: the overlay would hide it). Host-side file operations (fs.c) take the
 * read side of cows->fs; the switch takes the write side.
 *
 * Namespaces: the source's areas are cloned, and the overlays moved onto them, from a
 * child (vfork-style, sharing our fd table) that joined the sandbox's mount namespace
 * (airlockd has threads: it cannot setns(CLONE_NEWNS) itself). A clone made there can be
 * cloned again (an idmapped one for a fork) only from there: airlockd keeps that
 * namespace's fd with the layer. The overlays are made in airlockd, where /proc/self/fd/N
 * names its layers.
 */
#include "daemon/cowfork.h"
#include "daemon/freeze.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

#define COW_AREAS_MAX 8

/* A layer: a directory of a detached mount. fd is the mount's own (an open_tree clone or
 * an fsmount: while one of its dups is open the mount stays usable as a layer; an fd of a
 * directory in it would not keep it so). */
struct layer {
	int fd;
	char sub[32]; /* "" or "<area>/u" */
	uid_t base;   /* the host uid range its files were written in (a sandbox's) */
	int ns;	      /* the mount namespace fd was cloned in, where alone it can be cloned
		       * again (open_tree), or -1: airlockd's own (an fsmount) */
};

struct cow_area {
	char path[256];
	struct layer lower[DM_COW_DEPTH]; /* the top one first */
	size_t n_lower;
	struct layer upper; /* fd -1 while not on an overlay */
};

struct cow_sbx {
	char id[DM_ID_LEN + 1];
	struct cow_area areas[COW_AREAS_MAX];
	size_t n_areas;
};

#define COW_USERNS_KEPT 64

struct dm_cows {
	pthread_mutex_t mu; /* the list, the kept user namespaces */
	pthread_rwlock_t fs;
	struct cow_sbx **v;
	size_t n;
	/* User namespaces made for idmaps (userns_for), kept for the next forks between the
	 * same uid ranges: making one costs a process. Replaced oldest first. */
	struct {
		uid_t from, to;
		int fd;
	} userns[COW_USERNS_KEPT];
	size_t n_userns, next_userns;
};

static void layer_close(struct layer *l)
{
	al_closep(&l->fd);
	al_closep(&l->ns);
}

static void area_close(struct cow_area *a)
{
	for (size_t i = 0; i < a->n_lower; i++)
		layer_close(&a->lower[i]);
	layer_close(&a->upper);
	a->n_lower = 0;
}

static void sbx_free(struct cow_sbx *s)
{
	for (size_t i = 0; s && i < s->n_areas; i++)
		area_close(&s->areas[i]);
	free(s);
}

struct dm_cows *dm_cows_new(void)
{
	struct dm_cows *c = xzalloc(sizeof(*c));

	pthread_mutex_init(&c->mu, NULL);
	pthread_rwlock_init(&c->fs, NULL);
	return c;
}

void dm_cows_free(struct dm_cows *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		sbx_free(c->v[i]);
	free(c->v);
	for (size_t u = 0; u < c->n_userns; u++)
		close(c->userns[u].fd);
	pthread_rwlock_destroy(&c->fs);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* c->mu held. */
static struct cow_sbx *find(struct dm_cows *c, const char *id)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->v[i]->id, id) == 0)
			return c->v[i];
	return NULL;
}

/* c->mu held: s's area path, made when missing. */
static struct cow_area *area_of(struct dm_cows *c, const char *id, const char *path)
{
	struct cow_sbx *s = find(c, id);

	if (!s) {
		s = xzalloc(sizeof(*s));
		snprintf(s->id, sizeof(s->id), "%s", id);
		c->v = xrealloc(c->v, (c->n + 1) * sizeof(*c->v));
		c->v[c->n++] = s;
	}
	for (size_t i = 0; i < s->n_areas; i++)
		if (strcmp(s->areas[i].path, path) == 0)
			return &s->areas[i];
	if (s->n_areas == COW_AREAS_MAX)
		return NULL;
	snprintf(s->areas[s->n_areas].path, sizeof(s->areas->path), "%s", path);
	s->areas[s->n_areas].upper.fd = s->areas[s->n_areas].upper.ns = -1;
	return &s->areas[s->n_areas++];
}

void dm_cow_forget(struct daemon *d, const char *id)
{
	struct dm_cows *c = d->cows;
	struct cow_sbx *gone = NULL;

	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->v[i]->id, id) == 0) {
			gone = c->v[i];
			c->v[i] = c->v[--c->n];
			break;
		}
	pthread_mutex_unlock(&c->mu);
	sbx_free(gone);
}

struct dm_cows *dm_cow_fs_begin(struct daemon *d)
{
	pthread_rwlock_rdlock(&d->cows->fs);
	return d->cows;
}

void dm_cow_fs_endp(struct dm_cows **c)
{
	if (*c)
		pthread_rwlock_unlock(&(*c)->fs);
}

/* --- what may not be switched ------------------------------------------------------- */

/* Whether path (as /proc shows it, maybe with " (deleted)") lies at or below an area. */
static const char *below_area(const struct dm_cow_src *src, const char *path)
{
	for (size_t i = 0; i < src->n_areas; i++) {
		size_t n = strlen(src->areas[i]);

		if (strncmp(path, src->areas[i], n) == 0 &&
		    (path[n] == '\0' || path[n] == '/' || path[n] == ' '))
			return src->areas[i];
	}
	return NULL;
}

static int refused(struct al_error **err, const char *what, int pid, const char *path,
		   const char *area)
{
	return al_error_msg(err, EBUSY, "process %d of the source has %s '%.200s' in %s", pid, what,
			    path, area);
}

/* The cwd, root and open files of every task of pid, and its mappings but those of the
 * program `exe` (the agent's, from outside the sandbox's root: its path says nothing). */
static int pid_refs(const struct dm_cow_src *src, int pid, const char *exe, struct al_error **err)
{
	char p[640], link[4096];
	_cleanup_free_ char *maps = xasprintf("/proc/%d/maps", pid);
	_cleanup_free_ char *tasks = xasprintf("/proc/%d/task", pid);
	_cleanup_closedir_ DIR *td = opendir(tasks);
	struct dirent *t;
	const char *area;
	FILE *f;
	ssize_t n;

	while (td && (t = readdir(td))) {
		_cleanup_closedir_ DIR *fds = NULL;
		struct dirent *e;

		if (t->d_name[0] == '.')
			continue;
		for (int k = 0; k < 2; k++) {
			snprintf(p, sizeof(p), "/proc/%d/task/%s/%s", pid, t->d_name,
				 k ? "root" : "cwd");
			n = readlink(p, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = '\0';
			if ((area = below_area(src, link)))
				return refused(err, k ? "its root" : "its working directory", pid,
					       link, area);
		}
		snprintf(p, sizeof(p), "/proc/%d/task/%s/fd", pid, t->d_name);
		fds = opendir(p);
		while (fds && (e = readdir(fds))) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "/proc/%d/task/%s/fd/%s", pid, t->d_name, e->d_name);
			n = readlink(p, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = '\0';
			if ((area = below_area(src, link)))
				return refused(err, "an open file", pid, link, area);
		}
	}
	f = fopen(maps, "re");
	while (f && fgets(link, sizeof(link), f)) {
		char *path = strchr(link, '/');

		if (!path)
			continue;
		path[strcspn(path, "\n")] = '\0';
		if (strcmp(path, exe) != 0 && (area = below_area(src, path))) {
			fclose(f);
			return refused(err, "a mapping of", pid, path, area);
		}
	}
	if (f)
		fclose(f);
	return 0;
}

static ssize_t read_link(pid_t pid, const char *what, char *buf, size_t cap)
{
	char p[64];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, what);
	n = readlink(p, buf, cap - 1);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* Whether pid is an idle shim of the agent: the agent's program, no child. Commands start
 * from the agent's ruleset (Landlock), made for the areas as they were: after the switch
 * the agent makes it again and lets its idle shims go (agent_landlock_fresh); any other
 * process would keep the old one, and could not write the areas any more. */
static bool idle_shim(pid_t agent, pid_t pid)
{
	char a[512], b[512], kids[64];
	_cleanup_free_ char *path = xasprintf("/proc/%d/task/%d/children", (int)pid, (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (read_link(agent, "exe", a, sizeof(a)) <= 0 ||
	    read_link(pid, "exe", b, sizeof(b)) <= 0 || strcmp(a, b) != 0 || fd < 0)
		return false;
	n = read(fd, kids, sizeof(kids));
	return n == 0;
}

static int procs_refs(const struct dm_cow_src *src, struct al_error **err)
{
	_cleanup_free_ pid_t *pids = NULL;
	char exe[512];
	size_t n = 0;

	if (read_link(src->pid, "exe", exe, sizeof(exe)) <= 0)
		return al_error_set(err, errno, "the program of the source's agent");
	if (dm_freeze_pids(src->id, &pids, &n, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (pids[i] != src->pid && !idle_shim(src->pid, pids[i]))
			return al_error_msg(err, EBUSY,
					    "process %d of the source is running (its Landlock "
					    "rules name the areas as they are)",
					    (int)pids[i]);
		if (pid_refs(src, pids[i], exe, err) < 0)
			return -1;
	}
	return 0;
}

/* A mount point of mountinfo, its \ooo escapes undone, in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++, o++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] && s[3]) {
			*o = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o = *s;
		}
	}
	*o = '\0';
}

/* Sandbox pid's mounts at or below its areas: none below; at an area, only its tmpfs (a
 * root made from a template binds one there) and overlays, these only if we made them
 * (`ours`, n areas with a known overlay). */
static int mounts_ok(const struct dm_cow_src *src, pid_t pid, const bool *ours,
		     struct al_error **err)
{
	_cleanup_free_ char *path = xasprintf("/proc/%d/mountinfo", (int)pid);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char line[8192];

	if (!f)
		return al_error_set(err, errno, "open '%s'", path);
	while (fgets(line, sizeof(line), f)) {
		char mp[4096], *dash = strstr(line, " - ");
		char fstype[64] = "";
		const char *area;
		size_t i;

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
		    sscanf(dash + 3, "%63s", fstype) != 1)
			continue;
		unescape(mp);
		if (!(area = below_area(src, mp)))
			continue;
		if (strcmp(mp, area) != 0)
			return al_error_msg(err, EBUSY, "'%.200s' is mounted below %s (a drive)",
					    mp, area);
		for (i = 0; i < src->n_areas && strcmp(src->areas[i], area) != 0; i++)
			;
		if (strcmp(fstype, "tmpfs") == 0 || (strcmp(fstype, "overlay") == 0 && ours[i]))
			continue;
		return al_error_msg(err, EBUSY,
				    "%s is on a mount of type %s that airlockd did not make", area,
				    fstype);
	}
	return 0;
}

/* --- children in a sandbox's mount namespace ------------------------------------------ */

static int open_area(const char *path)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};

	return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
}

/* One clone a child makes: of an area (path) or of a detached mount made in that
 * namespace (fd), idmapped through userns unless it is -1. */
struct clone_item {
	const char *path;
	int fd, userns;
};

/*
 * The children below share airlockd's memory and file table (CLONE_VM | CLONE_VFORK |
 * CLONE_FILES: no address space to copy, the caller's thread waits meanwhile): what they
 * make is an fd in our table, what they say is written in their job. They only make
 * system calls; setns(CLONE_NEWNS) changes their own root and namespace only (their
 * fs_struct is their own). airlockd's reaper may reap them: their exit status is not used.
 */
static pid_t vfork_files(int (*fn)(void *), void *arg)
{
	char stack[64 * 1024] __attribute__((aligned(16)));
	pid_t pid =
	    clone(fn, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD, arg);

#ifdef __SANITIZE_ADDRESS__
	__asan_unpoison_memory_region(stack, sizeof(stack)); /* as al_clone_vfork */
#endif
	if (pid > 0)
		(void)waitpid(pid, NULL, __WALL); /* unless the reaper was first */
	return pid;
}

/* What in_mntns's child runs, and where it failed. */
struct in_mntns_job {
	int mntns;
	int (*fn)(void *);
	void *arg;
	int step; /* where it failed, 0 if it did not */
};

static int in_mntns_child(void *arg)
{
	struct in_mntns_job *j = arg;

	if (setns(j->mntns, CLONE_NEWNS) < 0)
		return j->step = 2;
	return j->step = j->fn(j->arg);
}

/*
 * Runs fn(arg) in a child (vfork_files: it shares our memory and fd table, and we wait for
 * it) that first joins mount namespace mntns, a sandbox's. fn notes in arg how far it got
 * and returns where it failed (3 and up), 0 if it did not. Returns the child's step: 0 all
 * done, 1 it never got to setns, 2 setns failed, else fn's; -1 with err set when no child
 * could be made.
 */
static int in_mntns(int mntns, int (*fn)(void *), void *arg, struct al_error **err)
{
	struct in_mntns_job j = {mntns, fn, arg, 1};

	if (vfork_files(in_mntns_child, &j) < 0)
		return al_error_set(err, errno, "clone()");
	return j.step;
}

struct clone_job {
	const struct clone_item *items;
	size_t n;
	int *out;
	size_t done;
};

/* In the child, in the namespace: each clone, into out. */
static int clone_child(void *arg)
{
	struct clone_job *j = arg;

	for (; j->done < j->n; j->done++) {
		const struct clone_item *it = &j->items[j->done];
		struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP,
					  .userns_fd = (uint64_t)it->userns};
		int at = it->path ? open_area(it->path) : it->fd, fd;

		if (at < 0)
			return 3;
		fd = (int)syscall(SYS_open_tree, at, "",
				  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (it->path)
			close(at);
		if (fd < 0)
			return 4;
		j->out[j->done] = fd;
		if (it->userns >= 0 &&
		    syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
			j->done++; /* out[done] is ours to close */
			return 5;
		}
	}
	return 0;
}

/* The clones of items (n), made in mount namespace mntns, into out (n fds). */
static int clone_in(int mntns, const struct clone_item *items, size_t n, int *out,
		    struct al_error **err)
{
	struct clone_job j = {items, n, out, 0};
	int step = in_mntns(mntns, clone_child, &j, err);

	if (step < 0)
		return -1;
	if (step == 0 && j.done == n)
		return 0;
	while (j.done > 0)
		close(out[--j.done]);
	return al_error_msg(err, EIO, "cloning a layer in a sandbox's namespace failed (step %d)",
			    step);
}

struct move_job {
	const int *mnts;	  /* an overlay for each area */
	const char *const *paths; /* the areas */
	size_t n;
	int done; /* areas moved */
};

/* In the child, in the sandbox's namespace: each overlay onto its area. */
static int move_child(void *arg)
{
	struct move_job *j = arg;

	for (; j->done < (int)j->n; j->done++) {
		int at, r;

		if (j->mnts[j->done] < 0) /* this area stays as it is */
			continue;
		at = open_area(j->paths[j->done]);
		if (at < 0)
			return 3;
		r = (int)syscall(SYS_move_mount, j->mnts[j->done], "", at, "",
				 MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
		close(at);
		if (r < 0)
			return 4;
	}
	return 0;
}

/* The overlays of j moved onto their areas in mount namespace mntns. */
static int move_areas(int mntns, struct move_job *j, struct al_error **err)
{
	int step = in_mntns(mntns, move_child, j, err);

	if (step < 0)
		return -1;
	if (step != 0)
		return al_error_msg(err, EIO, "mounting the overlays failed (step %d, %d areas)",
				    step, j->done);
	return 0;
}

/* --- layers ----------------------------------------------------------------------------- */

static int fscfg(int fs, const char *key, const char *val)
{
	return (int)syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, val, 0);
}

/* A fresh tmpfs of disk bytes, detached: the upper layers of one sandbox. */
static int upper_fs(uint64_t disk, struct al_error **err)
{
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	uint64_t inodes = disk / 4096 < 16384 ? 16384 : disk / 4096;
	char size[32], nr[32];
	int mnt;

	snprintf(size, sizeof(size), "%llu", (unsigned long long)disk);
	snprintf(nr, sizeof(nr), "%llu", (unsigned long long)inodes);
	if (fs < 0 || fscfg(fs, "size", size) < 0 || fscfg(fs, "nr_inodes", nr) < 0 ||
	    fscfg(fs, "mode", "0700") < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return al_error_set(err, errno, "a tmpfs for the upper layers");
	mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0)
		return al_error_set(err, errno, "fsmount the upper layers' tmpfs");
	return mnt;
}

static int layer_path(const struct layer *l, char *buf, size_t len)
{
	return snprintf(buf, len, "/proc/self/fd/%d%s%s", l->fd, l->sub[0] ? "/" : "", l->sub);
}

static int layer_stat(const struct layer *l, struct stat *st)
{
	return fstatat(l->fd, l->sub, st, l->sub[0] ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH);
}

/* Area i's upper and work directories in upper tmpfs mnt, the upper one with the owner and
 * mode of the area's top layer (an overlay's root is its upper directory). */
static int upper_dirs(int mnt, size_t i, const struct stat *top, struct al_error **err)
{
	char d[32], u[40], w[40];

	snprintf(d, sizeof(d), "%zu", i);
	snprintf(u, sizeof(u), "%zu/u", i);
	snprintf(w, sizeof(w), "%zu/w", i);
	if (mkdirat(mnt, d, 0700) < 0 || mkdirat(mnt, u, 0700) < 0 || mkdirat(mnt, w, 0700) < 0 ||
	    fchownat(mnt, u, top->st_uid, top->st_gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchmodat(mnt, u, top->st_mode & 07777, 0) < 0)
		return al_error_set(err, errno, "the upper layer of an area");
	return 0;
}

/* An overlay of lowers (n, the top one first) under upper tmpfs mnt's area i: detached,
 * nosuid, nodev. */
static int overlay(const struct layer *lowers, size_t n, int mnt, size_t i, struct al_error **err)
{
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	char p[64];
	int m;

	if (fs < 0)
		return al_error_set(err, errno, "fsopen overlay");
	for (size_t k = 0; k < n; k++) {
		layer_path(&lowers[k], p, sizeof(p));
		if (fscfg(fs, "lowerdir+", p) < 0)
			return al_error_set(err, errno, "overlay: a lower layer");
	}
	snprintf(p, sizeof(p), "/proc/self/fd/%d/%zu/u", mnt, i);
	if (fscfg(fs, "upperdir", p) < 0)
		return al_error_set(err, errno, "overlay: the upper layer");
	snprintf(p, sizeof(p), "/proc/self/fd/%d/%zu/w", mnt, i);
	if (fscfg(fs, "workdir", p) < 0 || fscfg(fs, "index", "off") < 0 ||
	    fscfg(fs, "metacopy", "off") < 0 || fscfg(fs, "redirect_dir", "on") < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return al_error_set(err, errno, "overlay: create");
	m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (m < 0)
		return al_error_set(err, errno, "fsmount the overlay");
	return m;
}

/* --- the fork ---------------------------------------------------------------------------- */

/* Everything one fork makes; closed at the end (what is kept was dup'ed into the state). */
struct cow_plan {
	size_t n;
	uid_t base[2]; /* the sandboxes' host uid ranges: [0] the source's, [1] the fork's */
	struct layer lower[COW_AREAS_MAX][DM_COW_DEPTH];
	size_t n_lower[COW_AREAS_MAX];
	/* The lower layers as each sandbox's overlay takes them: idmapped from the range
	 * they were written in to the sandbox's. */
	struct layer view[2][COW_AREAS_MAX][DM_COW_DEPTH];
	int mnt[2][COW_AREAS_MAX]; /* the overlays */
	int upfs[2];		   /* their upper tmpfs */
	/* Areas whose source's upper layer is still empty: the source keeps its overlay,
	 * the fork takes the same lower layers (no layer is added). */
	bool same[COW_AREAS_MAX];
	int ns[2];
	struct dm_cows *c;
	struct {
		uid_t from, to;
		int fd;
	} userns[2 * DM_COW_DEPTH];
	size_t n_userns;
};

static void plan_init(struct cow_plan *p, size_t n)
{
	memset(p, 0, sizeof(*p));
	p->n = n;
	for (int s = 0; s < 2; s++) {
		p->upfs[s] = p->ns[s] = -1;
		for (size_t i = 0; i < COW_AREAS_MAX; i++) {
			p->mnt[s][i] = -1;
			for (size_t k = 0; k < DM_COW_DEPTH; k++)
				p->view[s][i][k].fd = p->view[s][i][k].ns = -1;
		}
	}
	for (size_t i = 0; i < COW_AREAS_MAX; i++)
		for (size_t k = 0; k < DM_COW_DEPTH; k++)
			p->lower[i][k].fd = p->lower[i][k].ns = -1;
}

static void plan_close(struct cow_plan *p)
{
	for (size_t i = 0; i < COW_AREAS_MAX; i++) {
		for (size_t k = 0; k < DM_COW_DEPTH; k++) {
			layer_close(&p->lower[i][k]);
			layer_close(&p->view[0][i][k]);
			layer_close(&p->view[1][i][k]);
		}
		for (int s = 0; s < 2; s++)
			al_closep(&p->mnt[s][i]);
	}
	for (int s = 0; s < 2; s++) {
		al_closep(&p->upfs[s]);
		al_closep(&p->ns[s]);
	}
	for (size_t u = 0; u < p->n_userns; u++)
		close(p->userns[u].fd);
}

/* A dup of fd, -1 for -1 or when out of descriptors. */
static int dup_fd(int fd)
{
	return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

#define COW_RANGE 65536u /* a sandbox's host uid range (and gid) */

/* id, written in range from, as range to has it (host root and others unchanged). */
static uid_t rebase(uid_t id, uid_t from, uid_t to)
{
	return id >= from && id - from < COW_RANGE ? id - from + to : id;
}

/* A copy of l with descriptors of its own; false (and nothing held) when out of them. */
static bool layer_dup(const struct layer *l, struct layer *d)
{
	*d = *l;
	d->fd = dup_fd(l->fd);
	d->ns = dup_fd(l->ns);
	if (d->fd >= 0 && (d->ns >= 0 || l->ns < 0))
		return true;
	layer_close(d);
	return false;
}

/* Whether the extended attributes of fd are all overlayfs's own (its uuid on an upper
 * layer's root). */
static bool own_xattrs(int fd)
{
	char names[4096];
	ssize_t n = flistxattr(fd, names, sizeof(names));

	if (n < 0)
		return false;
	for (ssize_t at = 0; at < n; at += (ssize_t)strlen(names + at) + 1)
		if (strncmp(names + at, "trusted.overlay.", 16) != 0)
			return false;
	return true;
}

/* Whether nothing was written to area a's upper layer since it was made: no entry, no
 * extended attribute, its owner and mode still the top lower layer's (the source frozen). */
static bool upper_unchanged(const struct cow_area *a)
{
	_cleanup_close_ int fd =
	    openat(a->upper.fd, a->upper.sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_closedir_ DIR *dir = NULL;
	struct stat up, top;
	struct dirent *e;

	if (fd < 0 || a->n_lower == 0 || fstat(fd, &up) < 0 || layer_stat(&a->lower[0], &top) < 0 ||
	    (up.st_mode & 07777) != (top.st_mode & 07777) ||
	    up.st_uid != rebase(top.st_uid, a->lower[0].base, a->upper.base) ||
	    up.st_gid != rebase(top.st_gid, a->lower[0].base, a->upper.base) || !own_xattrs(fd))
		return false;
	dir = fdopendir(TAKE_FD(fd));
	while (dir && (e = readdir(dir)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			return false;
	return dir != NULL;
}

/*
 * The new lower layers of each area (the source frozen): its upper and lowers when it is
 * on an overlay of ours, else a clone of the area itself.
 */
static int plan_lowers(struct dm_cows *c, const struct dm_cow_src *src, struct cow_plan *p,
		       struct al_error **err)
{
	struct clone_item fresh[COW_AREAS_MAX];
	size_t idx[COW_AREAS_MAX], n_fresh = 0;
	int clones[COW_AREAS_MAX];
	bool ours[COW_AREAS_MAX] = {0};
	int r = 0;

	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; r == 0 && i < src->n_areas; i++) {
		struct cow_area *a = area_of(c, src->id, src->areas[i]);

		if (!a) {
			r = al_error_msg(err, E2BIG, "too many areas");
			break;
		}
		ours[i] = a->upper.fd >= 0;
		if (!ours[i]) {
			idx[n_fresh] = i;
			fresh[n_fresh++] = (struct clone_item){src->areas[i], -1, -1};
		} else if (upper_unchanged(a)) { /* the fork takes what the source stands on */
			p->same[i] = true;
			for (size_t k = 0; r == 0 && k < a->n_lower; k++)
				if (!layer_dup(&a->lower[k], &p->lower[i][p->n_lower[i]++]))
					r = al_error_set(err, EMFILE, "a layer's descriptor");
		} else if (a->n_lower + 1 > DM_COW_DEPTH) {
			r = al_error_msg(err, ELOOP, "%s already stacks %zu layers (at most %d)",
					 a->path, a->n_lower, DM_COW_DEPTH);
		} else {
			if (!layer_dup(&a->upper, &p->lower[i][p->n_lower[i]++]))
				r = al_error_set(err, EMFILE, "a layer's descriptor");
			for (size_t k = 0; r == 0 && k < a->n_lower; k++)
				if (!layer_dup(&a->lower[k], &p->lower[i][p->n_lower[i]++]))
					r = al_error_set(err, EMFILE, "a layer's descriptor");
		}
	}
	pthread_mutex_unlock(&c->mu);
	if (r < 0 || mounts_ok(src, src->pid, ours, err) < 0)
		return -1;
	if (n_fresh && clone_in(p->ns[0], fresh, n_fresh, clones, err) < 0)
		return -1;
	for (size_t k = 0; k < n_fresh; k++)
		p->lower[idx[k]][p->n_lower[idx[k]]++] =
		    (struct layer){.fd = clones[k], .base = p->base[0], .ns = dup_fd(p->ns[0])};
	return 0;
}

/* In the child: a user namespace of its own, then waits for the parent to close `hold`. */
struct userns_job {
	int ready, hold;
};

static int userns_child(void *arg)
{
	struct userns_job *j = arg;
	char c;

	if (unshare(CLONE_NEWUSER) < 0)
		return 2;
	if (write(j->ready, "1", 1) != 1)
		return 3;
	(void)!read(j->hold, &c, 1);
	return 0;
}

static int put_map(pid_t pid, const char *file, const char *map)
{
	char p[64];
	_cleanup_close_ int fd = -1;

	snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	return fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map) ? -1 : 0;
}

/* A user namespace whose ids map range `from` onto range `to` (and host root onto itself):
 * the idmap of a layer written by one sandbox, seen by another. */
static int userns_for(struct cow_plan *p, uid_t from, uid_t to, struct al_error **err)
{
	int ready[2], hold[2], fd = -1;
	struct userns_job j;
	char map[96], c, path[64];
	pid_t pid;

	for (size_t u = 0; u < p->n_userns; u++)
		if (p->userns[u].from == from && p->userns[u].to == to)
			return p->userns[u].fd;
	if (p->n_userns == ARRAY_SIZE(p->userns))
		return al_error_msg(err, E2BIG, "too many uid ranges");
	pthread_mutex_lock(&p->c->mu);
	for (size_t u = 0; fd < 0 && u < p->c->n_userns; u++)
		if (p->c->userns[u].from == from && p->c->userns[u].to == to)
			fd = dup_fd(p->c->userns[u].fd);
	pthread_mutex_unlock(&p->c->mu);
	if (fd >= 0)
		goto keep;
	if (pipe2(ready, O_CLOEXEC) < 0)
		return al_error_set(err, errno, "pipe");
	if (pipe2(hold, O_CLOEXEC) < 0) {
		close(ready[0]);
		close(ready[1]);
		return al_error_set(err, errno, "pipe");
	}
	j = (struct userns_job){ready[1], hold[0]};
	pid = fork();
	if (pid == 0) {
		close(ready[0]);
		close(hold[1]);
		_exit(userns_child(&j));
	}
	close(ready[1]);
	close(hold[0]);
	snprintf(map, sizeof(map), "0 0 1\n%u %u %u\n", (unsigned)from, (unsigned)to, COW_RANGE);
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	if (pid > 0 && read(ready[0], &c, 1) == 1 && put_map(pid, "uid_map", map) == 0 &&
	    put_map(pid, "gid_map", map) == 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		al_error_set(err, errno ? errno : EIO, "a user namespace for an idmap");
	close(ready[0]);
	close(hold[1]);
	if (pid > 0)
		(void)waitpid(pid, NULL, __WALL);
	if (fd < 0)
		return -1;
	pthread_mutex_lock(&p->c->mu);
	{
		size_t slot;

		if (p->c->n_userns < COW_USERNS_KEPT) {
			slot = p->c->n_userns++;
		} else {
			slot = p->c->next_userns++ % COW_USERNS_KEPT;
			close(p->c->userns[slot].fd);
		}
		p->c->userns[slot].from = from;
		p->c->userns[slot].to = to;
		p->c->userns[slot].fd = dup_fd(fd);
		if (p->c->userns[slot].fd < 0) /* not kept */
			p->c->userns[slot] = p->c->userns[--p->c->n_userns];
	}
	pthread_mutex_unlock(&p->c->mu);
keep:
	p->userns[p->n_userns].from = from;
	p->userns[p->n_userns].to = to;
	p->userns[p->n_userns++].fd = fd;
	return fd;
}
/* What side s's overlays take as lower layers: each layer itself where it was written in
 * the sandbox's own uid range, else an idmapped clone of it. Clones of a layer made in a
 * sandbox's namespace are made there (a child per namespace). */
static int plan_views(struct cow_plan *p, int s, struct al_error **err)
{
	struct clone_item items[COW_AREAS_MAX * DM_COW_DEPTH];
	struct layer *dst[ARRAY_SIZE(items)];
	int nsfd[ARRAY_SIZE(items)], out[ARRAY_SIZE(items)];
	size_t n = 0;

	for (size_t i = 0; i < p->n; i++)
		for (size_t k = 0; k < p->n_lower[i]; k++) {
			const struct layer *l = &p->lower[i][k];
			struct layer *v = &p->view[s][i][k];
			struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP};
			int u;

			if (l->base == p->base[s]) {
				if (!layer_dup(l, v))
					return al_error_set(err, EMFILE, "a layer's descriptor");
				continue;
			}
			if ((u = userns_for(p, l->base, p->base[s], err)) < 0)
				return -1;
			*v = (struct layer){.fd = -1, .base = p->base[s], .ns = -1};
			if (l->ns >= 0) { /* made in a sandbox's namespace: cloned there */
				items[n] = (struct clone_item){NULL, l->fd, u};
				nsfd[n] = l->ns;
				dst[n++] = v;
				continue;
			}
			attr.userns_fd = (uint64_t)u;
			v->fd = (int)syscall(SYS_open_tree, l->fd, l->sub[0] ? l->sub : "",
					     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
						 (l->sub[0] ? 0 : AT_EMPTY_PATH));
			if (v->fd < 0 || syscall(SYS_mount_setattr, v->fd, "", AT_EMPTY_PATH, &attr,
						 sizeof(attr)) < 0)
				return al_error_set(err, errno, "an idmapped layer");
		}
	/* One child per namespace: the items of the first left, and all of its own. */
	for (size_t a = 0; a < n; a++) {
		struct clone_item batch[ARRAY_SIZE(items)];
		size_t which[ARRAY_SIZE(items)], m = 0;
		struct stat first, st;

		if (dst[a]->fd >= 0 || fstat(nsfd[a], &first) < 0)
			continue;
		for (size_t b = a; b < n; b++)
			if (dst[b]->fd < 0 && fstat(nsfd[b], &st) == 0 &&
			    st.st_ino == first.st_ino) {
				which[m] = b;
				batch[m++] = items[b];
			}
		if (clone_in(nsfd[a], batch, m, out, err) < 0)
			return -1;
		for (size_t b = 0; b < m; b++)
			dst[which[b]]->fd = out[b];
	}
	return 0;
}

/* Side s's upper layers (a tmpfs of disk bytes) and overlays (0 the source, 1 the fork). */
static int plan_overlays(struct cow_plan *p, int s, uint64_t disk, struct al_error **err)
{
	size_t todo = 0;

	for (size_t i = 0; i < p->n; i++)
		todo += s == 1 || !p->same[i];
	if (!todo)
		return 0;
	if (plan_views(p, s, err) < 0)
		return -1;
	if ((p->upfs[s] = upper_fs(disk, err)) < 0)
		return -1;
	for (size_t i = 0; i < p->n; i++) {
		const struct layer *l = &p->lower[i][0];
		struct stat top;

		if (s == 0 && p->same[i])
			continue;
		if (layer_stat(l, &top) < 0)
			return al_error_set(err, errno, "stat an area");
		top.st_uid = rebase(top.st_uid, l->base, p->base[s]);
		top.st_gid = rebase(top.st_gid, l->base, p->base[s]);
		if (upper_dirs(p->upfs[s], i, &top, err) < 0)
			return -1;
		p->mnt[s][i] = overlay(p->view[s][i], p->n_lower[i], p->upfs[s], i, err);
		if (p->mnt[s][i] < 0)
			return -1;
	}
	return 0;
}

/* What sandbox id's first `done` areas now stand on (side s of the plan). */
static void plan_keep(struct dm_cows *c, const struct cow_plan *p, const struct dm_cow_src *src,
		      const char *id, int s, int done)
{
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < p->n && (int)i < done; i++) {
		struct cow_area *a = area_of(c, id, src->areas[i]);
		struct layer up = {.fd = p->upfs[s], .base = p->base[s], .ns = -1};
		bool ok = true;

		if (!a || p->mnt[s][i] < 0) /* not remounted: stands where it stood */
			continue;
		area_close(a);
		snprintf(up.sub, sizeof(up.sub), "%u/u", (unsigned)i);
		for (size_t k = 0; ok && k < p->n_lower[i]; k++)
			ok = layer_dup(&p->lower[i][k], &a->lower[a->n_lower++]);
		if (!ok || !layer_dup(&up, &a->upper)) {
			/* Out of descriptors: forgotten, so the next fork of it copies (its
			 * overlay is then one airlockd did not make, as after a restart). */
			a->n_lower -= !ok;
			area_close(a);
		}
	}
	pthread_mutex_unlock(&c->mu);
}

/* Side s's overlays onto its areas (a child in its namespace); what they stand on is kept
 * for the next fork, also when only some areas were done. */
static int plan_move(struct dm_cows *c, struct cow_plan *p, const struct dm_cow_src *src,
		     const char *id, int s, struct al_error **err)
{
	struct move_job mj = {.mnts = p->mnt[s], .paths = src->areas, .n = p->n};
	size_t todo = 0;
	int r;

	for (size_t i = 0; i < p->n; i++)
		todo += p->mnt[s][i] >= 0;
	if (!todo) /* the source, unchanged since its last fork: nothing to move */
		return 0;
	r = move_areas(p->ns[s], &mj, err);

	plan_keep(c, p, src, id, s, mj.done);
	return r;
}

static int open_ns(pid_t pid, struct al_error **err)
{
	char p[64];
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return al_error_set(err, errno, "open '%s'", p);
	return fd;
}

/* The fork's pid, disk and uid range (d->mu taken here). */
static int fork_info(struct daemon *d, const char *team, const char *id, pid_t *pid, uint64_t *disk,
		     uid_t *base, struct al_error **err)
{
	_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);
	struct dm_sbx *s = dm_find_sbx(d, team, id, err);

	if (!s)
		return -1;
	*pid = s->pid;
	*disk = s->spec.disk_bytes;
	*base = s->host_base;
	return 0;
}

/* The source's side, frozen: checks, layers, its overlays. */
static int source_frozen(struct daemon *d, const struct dm_cow_src *src, struct cow_plan *p,
			 struct al_error **err)
{
	if ((p->ns[0] = open_ns(src->pid, err)) < 0 || procs_refs(src, err) < 0 ||
	    plan_lowers(d->cows, src, p, err) < 0 || plan_overlays(p, 0, src->disk_bytes, err) < 0)
		return -1;
	return plan_move(d->cows, p, src, src->id, 0, err);
}

/* The source's side: from now on it writes its own upper layers only. */
static int source_side(struct daemon *d, const struct dm_cow_src *src, struct cow_plan *p,
		       struct al_error **err)
{
	struct al_error *why = NULL;
	int r;

	pthread_rwlock_wrlock(&d->cows->fs);
	if (dm_freeze(src->id, true, err) < 0) {
		if (dm_freeze(src->id, false, &why) < 0)
			dm_log_err(d, &why, "sandbox %s: thaw after a failed freeze", src->id);
		pthread_rwlock_unlock(&d->cows->fs);
		return al_error_wrap(err, "freezing sandbox %s", src->id);
	}
	r = source_frozen(d, src, p, err);
	if (dm_freeze(src->id, false, &why) < 0)
		dm_log_err(d, &why, "sandbox %s: THAW FAILED after a fork", src->id);
	pthread_rwlock_unlock(&d->cows->fs);
	return r;
}

/* The fork's side: the same lower layers (as its uid range sees them), its own upper. */
static int fork_side(struct daemon *d, const struct dm_cow_src *src, struct cow_plan *p,
		     const char *fork_id, struct al_error **err)
{
	bool none[COW_AREAS_MAX] = {0};
	struct dm_cow_src f = *src;
	uint64_t disk;

	if (fork_info(d, src->team, fork_id, &f.pid, &disk, &p->base[1], err) < 0 ||
	    (p->ns[1] = open_ns(f.pid, err)) < 0 || mounts_ok(&f, f.pid, none, err) < 0 ||
	    plan_overlays(p, 1, disk, err) < 0)
		return -1;
	return plan_move(d->cows, p, src, fork_id, 1, err);
}

int dm_cow_fork(struct daemon *d, const struct dm_cow_src *src, dm_cow_wait_fn wait, void *ctx,
		struct al_error **err)
{
	_cleanup_close_ int probe = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	_cleanup_free_ struct cow_plan *p = xzalloc(sizeof(*p));
	const char *fork_id;
	int r;

	if (probe < 0)
		return al_error_set(err, errno, "overlayfs is not available");
	if (src->n_areas > COW_AREAS_MAX)
		return al_error_msg(err, E2BIG, "too many areas");
	plan_init(p, src->n_areas);
	p->c = d->cows;
	p->base[0] = src->host_base;
	r = source_side(d, src, p, err);
	if (r == 0 && !(fork_id = wait(ctx)))
		r = al_error_msg(err, ECANCELED, "the fork was not made");
	if (r == 0)
		r = fork_side(d, src, p, fork_id, err);
	plan_close(p);
	return r;
}
