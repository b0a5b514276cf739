/* SPDX-License-Identifier: MIT */
/*
 * An OCI container's writable root (config.json `root.readonly: false`), made in the child
 * as host root while rootfs.c builds the new root, before /tmp is left:
 *
 *   STAGE/.airlock-root         a tmpfs of root_size bytes, private to this container
 *     lower/0                   the image (the bundle's rootfs), an idmapped read-only
 *                               clone of its mount: host uid/gid 0..65535 shown as the
 *                               container's own range, so its root owns the image's files
 *     lower/0..n-1              or, where the image is an engine's overlay (which cannot
 *                               be idmapped), each of its layers so, upper first
 *     upper/ work/              overlayfs's upper and work directories
 *     merged/                   the overlay (nosuid, nodev)
 *
 * rootfs.c binds merged's top-level entries into the new root (as it binds the image's
 * read-only otherwise), then jail_oci_root_hide detaches all of .airlock-root: the overlay
 * keeps private clones of its layers and lives on through those binds only. Every write
 * lands in upper (copy-up): the image, shared by every container of the engine, is never
 * written, and what one container writes no other sees. The tmpfs's size caps it (ENOSPC).
 */
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define AL_OPEN_TREE_CLONE 1u
#define AL_MOVE_MOUNT_F_EMPTY_PATH 0x04u
#define AL_MOUNT_ATTR_RDONLY 0x1ull
#define AL_MOUNT_ATTR_NOSUID 0x2ull
#define AL_MOUNT_ATTR_NODEV 0x4ull
#define AL_MOUNT_ATTR_IDMAP 0x00100000ull
struct al_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

#define DIR_NAME ".airlock-root"
#define OPTS_MAX 8192

/* A user namespace whose maps are the container's (0..65535 -> base): the idmapping of the
 * image's mount. A child unshares one and waits; we write its maps (we are host root) and
 * keep an fd on it. Its pid is read from the host's /proc (we are PID 1 of a new pid
 * namespace, but /proc is still the host's). */
static int idmap_userns(uid_t base, struct al_error **err)
{
	int up[2], down[2], fd = -1;
	char path[64], buf[16] = {0};
	pid_t pid, host_pid;

	if (pipe2(up, O_CLOEXEC) < 0)
		return al_error_set(err, errno, "pipe");
	if (pipe2(down, O_CLOEXEC) < 0) {
		close(up[0]);
		close(up[1]);
		return al_error_set(err, errno, "pipe");
	}
	pid = fork();
	if (pid == 0) {
		ssize_t n = -1;

		close(up[0]);
		close(down[1]);
		if (unshare(CLONE_NEWUSER) == 0)
			n = readlink("/proc/self", buf, sizeof(buf) - 1);
		(void)!write(up[1], buf, n > 0 ? (size_t)n : 1);
		(void)!read(down[0], buf, 1); /* until our parent is done */
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	if (pid > 0 && read(up[0], buf, sizeof(buf) - 1) > 0 && (host_pid = atoi(buf)) > 0 &&
	    jail_write_idmaps(host_pid, base, err) == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)host_pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			al_error_set(err, errno, "open '%s'", path);
	} else if (!*err) {
		al_error_set(err, pid < 0 ? errno : EPROTO, "a user namespace for the idmapping");
	}
	close(up[0]);
	close(down[1]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return fd;
}

/* A detached clone of src's mount, idmapped (userns) and read-only: its fd, or -1 (errno
 * set) where src's filesystem cannot be idmapped, or -2 with err set. */
static int idmap_tree(int src, int userns, struct al_error **err)
{
	struct al_mount_attr attr = {.attr_set = AL_MOUNT_ATTR_IDMAP | AL_MOUNT_ATTR_RDONLY |
						 AL_MOUNT_ATTR_NOSUID | AL_MOUNT_ATTR_NODEV,
				     .userns_fd = (uint64_t)userns};
	_cleanup_close_ int tree = -1;

	tree = (int)syscall(SYS_open_tree, src, "", AL_OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0) {
		al_error_set(err, errno, "open_tree of an image layer");
		return -2;
	}
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return -1; /* the caller says what */
	return TAKE_FD(tree);
}

/* mountinfo's octal escapes (\040 a space, \054 a comma, \134 a backslash), in place. */
static void unescape_octal(char *s)
{
	char *o = s;

	for (; *s; s++, o++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o = *s;
		}
	}
	*o = '\0';
}

/* Ends s at the first `sep` (none escaped: mountinfo escapes commas) and returns what
 * follows, or NULL. */
static char *split_at(char *s, char sep)
{
	char *end = strchr(s, sep);

	if (!end)
		return NULL;
	*end = '\0';
	return end + 1;
}

/* overlayfs's lowerdir list (octal escapes already undone): ends s at the first ':' that
 * no backslash escapes, undoing those escapes, and returns what follows, or NULL. */
static char *split_layer(char *s)
{
	char *o = s;

	for (; *s && *s != ':'; s++, o++) {
		if (s[0] == '\\' && s[1])
			s++;
		*o = *s;
	}
	if (!*s) {
		*o = '\0';
		return NULL;
	}
	*o = '\0';
	return s + 1;
}

/* One layer of the engine's overlay: its host path, idmapped, as root->trees[n]. */
static int engine_layer(const char *path, int userns, struct jail_oci_root *root,
			struct al_error **err)
{
	_cleanup_close_ int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int t;

	if (path[0] != '/' || fd < 0)
		return al_error_msg(err, EINVAL, "the image's overlay layer '%s' cannot be opened",
				    path);
	if (root->n >= JAIL_OCI_LAYERS_MAX)
		return al_error_msg(err, E2BIG, "the image's overlay has over %d layers",
				    JAIL_OCI_LAYERS_MAX);
	t = idmap_tree(fd, userns, err);
	if (t == -1)
		return al_error_set(err, errno, "an idmapped mount of '%s'", path);
	if (t < 0)
		return -1;
	root->trees[root->n++] = t;
	return 0;
}

/* The image is an engine's overlay (podman's overlay driver, containerd's snapshotter),
 * which cannot be idmapped itself: its layers can. Its upper first, then its lowers, as
 * its mount options (this namespace's mountinfo) list them. */
static int engine_layers(int image_fd, int userns, struct jail_oci_root *root,
			 struct al_error **err)
{
	char self[64], top[PATH_MAX], *line = NULL, *opts = NULL, *upper = NULL, *lowers = NULL;
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	size_t cap = 0;
	ssize_t len;
	int r = 0;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", image_fd);
	len = readlink(self, top, sizeof(top) - 1);
	if (len <= 0 || !f)
		return al_error_set(err, errno, "the image's overlay layers");
	top[len] = '\0';
	while (getline(&line, &cap, f) > 0) { /* the last mount on top is the one seen */
		char at[PATH_MAX], *sep = strstr(line, " - overlay ");

		if (sep && sscanf(line, "%*s %*s %*s %*s %4095s", at) == 1 &&
		    (unescape_octal(at), strcmp(at, top) == 0)) {
			free(opts);
			opts = strdup(strchr(sep + 11, ' ') ? strchr(sep + 11, ' ') + 1 : "");
			if (opts)
				opts[strcspn(opts, "\n")] = '\0';
		}
	}
	free(line);
	for (char *o = opts, *next; o && *o; o = next) {
		next = split_at(o, ',');
		unescape_octal(o);
		if (strncmp(o, "upperdir=", 9) == 0)
			upper = o + 9;
		else if (strncmp(o, "lowerdir=", 9) == 0)
			lowers = o + 9;
		else if (strncmp(o, "lowerdir+=", 10) == 0 || strncmp(o, "datadir+=", 9) == 0)
			r = al_error_msg(err, EINVAL,
					 "the image's overlay option '%.20s' is not "
					 "served",
					 o);
	}
	if (r == 0 && !lowers)
		r = al_error_msg(err, EINVAL, "the image's overlay layers are not listed");
	if (r == 0 && upper)
		r = engine_layer(upper, userns, root, err);
	for (char *l = lowers, *next; r == 0 && l && *l; l = next) {
		next = split_layer(l);
		r = engine_layer(l, userns, root, err);
	}
	free(opts);
	return r;
}

int jail_oci_root_open(const struct jail_ctx *ctx, int image_fd, struct jail_oci_root *root,
		       struct al_error **err)
{
	_cleanup_close_ int userns = -1;
	struct statfs sf;
	int t, e;

	root->n = 0;
	if (!ctx->oci || !ctx->oci->writable_root || image_fd < 0)
		return 0;
	userns = idmap_userns(ctx->host_base, err);
	if (userns < 0)
		return -1;
	t = idmap_tree(image_fd, userns, err);
	if (t >= 0)
		root->trees[root->n++] = t;
	if (t >= 0 || t == -2)
		return t >= 0 ? 0 : al_error_wrap(err, "the writable root");
	e = errno;
	if (fstatfs(image_fd, &sf) == 0 && sf.f_type == 0x794c7630 /* overlayfs */)
		return engine_layers(image_fd, userns, root, err) < 0
			   ? al_error_wrap(err, "the writable root")
			   : 0;
	return al_error_set(err, e,
			    "the writable root: an idmapped mount of the image (its filesystem "
			    "must support idmapped mounts)");
}

void jail_oci_root_close(struct jail_oci_root *root)
{
	for (size_t i = 0; i < root->n; i++)
		al_closep(&root->trees[i]);
	root->n = 0;
}

/* The layers (root->trees) at lower/0..n-1. */
static int place_layers(const struct jail_oci_root *root, int lower, struct al_error **err)
{
	for (size_t i = 0; i < root->n; i++) {
		_cleanup_close_ int at = -1;
		char name[24];

		snprintf(name, sizeof(name), "%zu", i);
		if (mkdirat(lower, name, 0755) < 0 ||
		    (at = openat(lower, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			return al_error_set(err, errno, "mkdir a lower layer's place");
		if (syscall(SYS_move_mount, root->trees[i], "", at, "",
			    AL_MOVE_MOUNT_F_EMPTY_PATH | 0x40u /* MOVE_MOUNT_T_EMPTY_PATH */) < 0)
			return al_error_set(err, errno, "move_mount of an image layer");
	}
	return 0;
}

/* "lowerdir=AT/lower/0:AT/lower/1...,upperdir=AT/upper,workdir=AT/work" */
static int overlay_opts(const char *at, size_t n, char *buf, size_t len, struct al_error **err)
{
	size_t used = (size_t)snprintf(buf, len, "lowerdir=");

	for (size_t i = 0; i < n && used < len; i++)
		used +=
		    (size_t)snprintf(buf + used, len - used, "%s%s/lower/%zu", i ? ":" : "", at, i);
	if (used < len)
		used += (size_t)snprintf(buf + used, len - used,
					 ",upperdir=%s/upper,workdir=%s/work", at, at);
	if (used >= len)
		return al_error_msg(err, E2BIG, "the writable root's overlay options are too long");
	return 0;
}

int jail_oci_root_overlay(const struct jail_ctx *ctx, const char *stage, int stage_fd,
			  const struct jail_oci_root *root, int *merged, struct al_error **err)
{
	static const char *const dirs[] = {"lower", "upper", "work", "merged"};
	uint64_t size = ctx->oci->root_size ? ctx->oci->root_size : JAIL_DISK_DEFAULT;
	_cleanup_close_ int dir = -1, lower = -1;
	_cleanup_free_ char *opts = malloc(OPTS_MAX);
	char at[PATH_MAX];

	*merged = -1;
	if (!opts)
		return al_error_set(err, ENOMEM, "the writable root");
	snprintf(at, sizeof(at), "%s/" DIR_NAME, stage);
	if (mkdirat(stage_fd, DIR_NAME, 0700) < 0)
		return al_error_set(err, errno, "mkdir '%s'", at);
	snprintf(opts, OPTS_MAX, "size=%llu,mode=0700", (unsigned long long)size);
	if (mount("airlock-root", at, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return al_error_set(err, errno, "mount tmpfs on '%s'", at);
	dir = openat(stage_fd, DIR_NAME, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return al_error_set(err, errno, "open '%s'", at);
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
		if (mkdirat(dir, dirs[i], 0755) < 0)
			return al_error_set(err, errno, "mkdir '%s/%s'", at, dirs[i]);
	lower = openat(dir, "lower", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (lower < 0)
		return al_error_set(err, errno, "open '%s/lower'", at);
	if (place_layers(root, lower, err) < 0 ||
	    overlay_opts(at, root->n, opts, OPTS_MAX, err) < 0)
		return al_error_wrap(err, "the writable root");
	snprintf(at + strlen(at), sizeof(at) - strlen(at), "/merged");
	if (mount("overlay", at, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
		return al_error_set(err, errno, "mount the writable root's overlay on '%s'", at);
	*merged = openat(dir, "merged", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*merged < 0)
		return al_error_set(err, errno, "open '%s'", at);
	return 0;
}

int jail_oci_root_hide(const char *stage, int stage_fd, struct al_error **err)
{
	char at[PATH_MAX];

	/* Detached with what is mounted below it (the image's clone, the overlay): only the
	 * binds made from the overlay keep it, and them, alive. */
	snprintf(at, sizeof(at), "%s/" DIR_NAME, stage);
	if (umount2(at, MNT_DETACH) < 0)
		return al_error_set(err, errno, "detach '%s'", at);
	if (unlinkat(stage_fd, DIR_NAME, AT_REMOVEDIR) < 0)
		return al_error_set(err, errno, "rmdir '%s'", at);
	return 0;
}
