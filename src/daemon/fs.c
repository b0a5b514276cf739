/* SPDX-License-Identifier: MIT */
/* airlockd: file operations on a live sandbox, through its root (files.c does the work). */
#include "daemon/internal.h"
#include "daemon/cowfork.h"
#include "daemon/files.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DM_UPLOAD_MAX_ENTRIES 1000000

/*
 * Every file operation runs with the sandbox user's credentials, never host root's: the
 * daemon must not read, list or write for a tenant what no user of the sandbox could (a
 * 0700 directory of the host runtime bound into every sandbox, a 0600 file of an image).
 * The root fd is opened first, as root (/proc/PID/root takes ptrace access to the
 * sandbox's PID 1); then this thread's fsuid and fsgid become the sandbox user's host ids
 * (host_base + 1000, the owner of what the API writes) and its supplementary groups are
 * dropped, so the kernel's own permission checks decide, with no capability over files
 * (an fsuid other than 0 clears them from the thread's effective set). Credentials are
 * per thread in the kernel: the raw setgroups syscall, not glibc's, which changes every
 * thread of the process.
 */
struct fs_creds {
	gid_t groups[64];
	int n_groups;
	uid_t fsuid;
	gid_t fsgid;
};

static int as_sandbox_user(uid_t id, struct fs_creds *saved, struct al_error **err)
{
	saved->n_groups = getgroups((int)ARRAY_SIZE(saved->groups), saved->groups);
	if (saved->n_groups < 0)
		return al_error_set(err, errno, "getgroups");
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		return al_error_set(err, errno, "setgroups (this thread)");
	saved->fsgid = (gid_t)setfsgid(id);
	saved->fsuid = (uid_t)setfsuid(id);
	/* setfsuid reports no error: read the ids back */
	if ((uid_t)setfsuid((uid_t)-1) != id || (gid_t)setfsgid((gid_t)-1) != id) {
		setfsuid(saved->fsuid);
		setfsgid(saved->fsgid);
		syscall(SYS_setgroups, (size_t)saved->n_groups, saved->groups);
		return al_error_msg(err, EPERM,
				    "could not take the sandbox user's file credentials");
	}
	return 0;
}

static void as_daemon(const struct fs_creds *saved)
{
	setfsuid(saved->fsuid);
	setfsgid(saved->fsgid);
	syscall(SYS_setgroups, (size_t)saved->n_groups, saved->groups);
}

/* An O_PATH fd of the sandbox's root, its workdir and the owner of new files. */
static int open_root(struct daemon *d, const char *team, const char *sbx, char *workdir,
		     size_t wlen, uid_t *owner, uint64_t *disk, struct al_error **err)
{
	struct dm_sbx *s;
	char path[64];
	int fd = -1;

	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, sbx, err);
	if (s && s->state != DM_SBX_RUNNING)
		al_error_msg(err, ESRCH, "sandbox '%s' is %s", s->id, dm_sbx_state_name(s->state)),
		    s = NULL;
	if (s) {
		snprintf(path, sizeof(path), "/proc/%d/root", (int)s->pid);
		snprintf(workdir, wlen, "%s", s->workdir);
		*owner = s->host_base + 1000;
		*disk = s->spec.disk_bytes; /* defaults applied */
		fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			al_error_set(err, errno, "open the sandbox root");
	}
	pthread_mutex_unlock(&d->mu);
	return fd;
}

int dm_fs_write_tar(struct daemon *d, const char *team, const char *sbx, const char *dir,
		    const void *data, size_t len, struct al_error **err)
{
	char wd[1100];
	uid_t owner;
	uint64_t disk = 0;
	struct fs_creds cr;
	int r;
	_cleanup_dm_cow_fs_ struct dm_cows *fs_held = dm_cow_fs_begin(d);
	_cleanup_close_ int root = open_root(d, team, sbx, wd, sizeof(wd), &owner, &disk, err);
	struct files_limits lim = {.max_bytes = disk, .max_entries = DM_UPLOAD_MAX_ENTRIES};

	if (root < 0)
		return -1;
	if (!dir || !dir[0] || strcmp(dir, ".") == 0)
		dir = wd; /* the API passes "." when no directory was given */
	if (as_sandbox_user(owner, &cr, err) < 0)
		return -1;
	r = files_write_tar(root, wd, dir, owner, data, len, &lim, err);
	as_daemon(&cr);
	return r;
}

int dm_fs_read(struct daemon *d, const char *team, const char *sbx, const char *path, size_t max,
	       char **out, size_t *out_len, struct al_error **err)
{
	char wd[1100];
	uid_t owner;
	uint64_t disk;
	struct fs_creds cr;
	int r;
	_cleanup_dm_cow_fs_ struct dm_cows *fs_held = dm_cow_fs_begin(d);
	_cleanup_close_ int root = open_root(d, team, sbx, wd, sizeof(wd), &owner, &disk, err);

	if (root < 0)
		return -1;
	if (as_sandbox_user(owner, &cr, err) < 0)
		return -1;
	r = files_read(root, wd, path, max, out, out_len, err);
	as_daemon(&cr);
	return r;
}

int dm_fs_mkdir(struct daemon *d, const char *team, const char *sbx, const char *path, bool parents,
		struct al_error **err)
{
	char wd[1100];
	uid_t owner;
	uint64_t disk;
	struct fs_creds cr;
	int r;
	_cleanup_dm_cow_fs_ struct dm_cows *fs_held = dm_cow_fs_begin(d);
	_cleanup_close_ int root = open_root(d, team, sbx, wd, sizeof(wd), &owner, &disk, err);

	if (root < 0)
		return -1;
	if (as_sandbox_user(owner, &cr, err) < 0)
		return -1;
	r = files_mkdir(root, wd, path, owner, parents, err);
	as_daemon(&cr);
	return r;
}

int dm_fs_writable(struct daemon *d, const char *team, const char *sbx, const char *const *paths,
		   size_t n, struct al_error **err)
{
	char wd[1100];
	uid_t owner;
	uint64_t disk;
	_cleanup_dm_cow_fs_ struct dm_cows *fs_held = dm_cow_fs_begin(d);
	_cleanup_close_ int root = open_root(d, team, sbx, wd, sizeof(wd), &owner, &disk, err);

	if (root < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (files_writable(wd, paths[i], err) < 0)
			return -1;
	return 0;
}

int dm_fs_list(struct daemon *d, const char *team, const char *sbx, const char *path, json_t **out,
	       struct al_error **err)
{
	char wd[1100];
	uid_t owner;
	uint64_t disk;
	struct fs_creds cr;
	int r;
	_cleanup_dm_cow_fs_ struct dm_cows *fs_held = dm_cow_fs_begin(d);
	_cleanup_close_ int root = open_root(d, team, sbx, wd, sizeof(wd), &owner, &disk, err);

	if (root < 0)
		return -1;
	if (!path || !path[0] || strcmp(path, ".") == 0)
		path = wd;
	if (as_sandbox_user(owner, &cr, err) < 0)
		return -1;
	r = files_list(root, wd, path, out, err);
	as_daemon(&cr);
	return r;
}
