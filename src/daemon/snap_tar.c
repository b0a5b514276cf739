/* SPDX-License-Identifier: MIT */
/*
 * A snapshot's capture: one writable area of a frozen sandbox (a directory of its tmpfs,
 * reached from its root fd) written as a tar to a sink that counts, hashes (SHA-256) and
 * caps what it writes. docs/snapshots.md has the rules; in short, as host root but
 * never following anything the sandbox made:
 *   - every component is opened with O_NOFOLLOW relative to its parent's fd, and checked
 *     to be the inode fstatat saw (the sandbox is frozen: nothing changes meanwhile);
 *   - symlinks are recorded as symlinks (their text), never followed;
 *   - a directory or file on another mount than its area is skipped (a drive); the mount,
 *     not the st_dev: an area on an overlay (a fork's, cowfork.c) shows its lower
 *     layers' files with their layer's st_dev;
 *   - FIFOs, sockets and device nodes are skipped (never opened), and each skip is
 *     reported to the caller's log;
 *   - hard links are recorded as separate copies of their (same-tmpfs) file;
 *   - modes keep their permission bits only (no setuid, setgid or sticky bit for files),
 *     directories get u+rwx so that the restore (as the sandbox user) can fill them.
 */
#include "daemon/snap_tar.h"
#include "daemon/files_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAP_DEPTH_MAX 256

struct snap_walk {
	struct archive *a;
	struct snap_sink *sink;
	dev_t dev;
	const char *area;
	uint64_t mnt; /* the area's mount id (0: unknown, dev is compared) */
	snap_skip_fn skip;
	void *skip_ctx;
	uint64_t entries, max_entries;
	char rel[FILES_PATH_MAX];
	char buf[FILES_CHUNK];
};

static void archive_freep(struct archive **a)
{
	if (*a)
		archive_write_free(*a);
}

static int sink_put(struct snap_sink *s, const void *p, size_t n)
{
	const char *c = p;

	if (s->bytes + n > s->cap) {
		s->err = ENOSPC;
		return -1;
	}
	for (size_t done = 0; done < n;) {
		ssize_t w = write(s->fd, c + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			s->err = w < 0 ? errno : EIO;
			return -1;
		}
		done += (size_t)w;
	}
	if (s->sha) /* a fork's private capture is not hashed */
		EVP_DigestUpdate(s->sha, p, n);
	s->bytes += n;
	return 0;
}

static la_ssize_t sink_write(struct archive *a, void *cd, const void *buf, size_t n)
{
	(void)a;
	return sink_put(cd, buf, n) < 0 ? -1 : (la_ssize_t)n;
}

static void report(struct snap_walk *w, const char *why)
{
	struct files_show sh;
	_cleanup_free_ char *p = xasprintf("%s/%s", w->area, w->rel);

	if (w->skip)
		w->skip(w->skip_ctx, files_show(&sh, p), why);
}

static int arch_err(struct snap_walk *w, struct al_error **err)
{
	if (w->sink->err == ENOSPC)
		return al_error_msg(err, ENOSPC,
				    "the snapshot store is full: %llu more bytes would not fit "
				    "(airlock serve --snapshot-max)",
				    (unsigned long long)w->sink->cap);
	if (w->sink->err)
		return al_error_set(err, w->sink->err, "writing the snapshot");
	return al_error_msg(err, EIO, "writing the snapshot: %s",
			    archive_error_string(w->a) ?: "libarchive failed");
}

static int put_header(struct snap_walk *w, mode_t type, mode_t perm, int64_t size,
		      const struct stat *st, const char *target, struct al_error **err)
{
	struct archive_entry *e = archive_entry_new();
	int r;

	archive_entry_set_pathname(e, w->rel);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, perm);
	archive_entry_set_size(e, size);
	archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	if (target)
		archive_entry_set_symlink(e, target);
	r = archive_write_header(w->a, e);
	archive_entry_free(e);
	return r == ARCHIVE_OK ? 0 : arch_err(w, err);
}

/* The file's st_size bytes: the sandbox is frozen, so a short read is an error. */
static int put_file(struct snap_walk *w, int dir, const char *name, const struct stat *st,
		    struct al_error **err)
{
	_cleanup_close_ int fd =
	    openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat now;
	off_t left = st->st_size;

	if (fd < 0 || fstat(fd, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st->st_ino ||
	    now.st_dev != st->st_dev) {
		report(w, "changed while frozen, or not openable: skipped");
		return 0;
	}
	if (put_header(w, AE_IFREG, st->st_mode & 0777, st->st_size, st, NULL, err) < 0)
		return -1;
	while (left > 0) {
		ssize_t n = read(fd, w->buf, sizeof(w->buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return al_error_msg(err, EIO, "'%s/%s' shrank while frozen", w->area,
					    w->rel);
		if (n > left)
			n = (ssize_t)left;
		if (archive_write_data(w->a, w->buf, (size_t)n) != n)
			return arch_err(w, err);
		left -= n;
	}
	return 0;
}

static int walk_dir(struct snap_walk *w, int dfd, size_t len, int depth, struct al_error **err);

/* The mount id of name in dfd ("": dfd itself), not following a symlink; 0 if unknown. */
static uint64_t mount_id(int dfd, const char *name)
{
	struct statx sx;

	if (statx(dfd, name, AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH), STATX_MNT_ID,
		  &sx) < 0 ||
	    !(sx.stx_mask & STATX_MNT_ID))
		return 0;
	return sx.stx_mnt_id;
}

static int put_dir(struct snap_walk *w, int dir, const char *name, const struct stat *st,
		   size_t len, int depth, struct al_error **err)
{
	_cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat now;

	if (fd < 0 || fstat(fd, &now) < 0 || now.st_ino != st->st_ino || now.st_dev != st->st_dev) {
		report(w, "changed while frozen, or not openable: skipped");
		return 0;
	}
	if (depth >= SNAP_DEPTH_MAX) {
		report(w, "nested too deep: skipped");
		return 0;
	}
	if (put_header(w, AE_IFDIR, (st->st_mode & 0777) | 0700, 0, st, NULL, err) < 0)
		return -1;
	return walk_dir(w, fd, len, depth + 1, err);
}

static int put_entry(struct snap_walk *w, int dfd, const char *name, size_t len, int depth,
		     struct al_error **err)
{
	char target[FILES_PATH_MAX];
	struct stat st;
	ssize_t n;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return report(w, "vanished: skipped"), 0;
	if (w->mnt ? mount_id(dfd, name) != w->mnt : st.st_dev != w->dev)
		return report(w, "on another file system (a mount): skipped"), 0;
	if (++w->entries > w->max_entries)
		return al_error_msg(err, E2BIG, "more than %llu entries",
				    (unsigned long long)w->max_entries);
	if (S_ISDIR(st.st_mode))
		return put_dir(w, dfd, name, &st, len, depth, err);
	if (S_ISREG(st.st_mode))
		return put_file(w, dfd, name, &st, err);
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return report(w, "unreadable symlink: skipped"), 0;
		target[n] = '\0';
		return put_header(w, AE_IFLNK, 0777, 0, &st, target, err);
	}
	report(w, S_ISFIFO(st.st_mode)	 ? "a FIFO: not captured"
		  : S_ISSOCK(st.st_mode) ? "a socket: not captured"
					 : "a device node: not captured");
	return 0;
}

static int walk_dir(struct snap_walk *w, int dfd, size_t len, int depth, struct al_error **err)
{
	int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	DIR *dir = dup_fd < 0 ? NULL : fdopendir(dup_fd);
	struct dirent *de;
	int r = 0;

	if (!dir) {
		if (dup_fd >= 0)
			close(dup_fd);
		return al_error_set(err, errno, "open directory '%s/%s'", w->area, w->rel);
	}
	while (r == 0 && (de = readdir(dir))) {
		size_t n = strlen(de->d_name);

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (len + 1 + n + 1 > sizeof(w->rel)) {
			report(w, "a name too long: skipped");
			continue;
		}
		snprintf(w->rel + len, sizeof(w->rel) - len, "%s%s", len ? "/" : "", de->d_name);
		r = put_entry(w, dfd, de->d_name, len + (len ? 1 : 0) + n, depth, err);
		w->rel[len] = '\0';
	}
	closedir(dir);
	return r;
}

int snap_capture_area(int area_fd, const char *area, struct snap_sink *sink, uint64_t max_entries,
		      snap_skip_fn skip, void *skip_ctx, struct al_error **err)
{
	__attribute__((cleanup(archive_freep))) struct archive *a = archive_write_new();
	_cleanup_free_ struct snap_walk *w = xzalloc(sizeof(*w));
	struct stat st;

	if (fstat(area_fd, &st) < 0)
		return al_error_set(err, errno, "stat '%s'", area);
	*w = (struct snap_walk){.a = a,
				.sink = sink,
				.dev = st.st_dev,
				.mnt = mount_id(area_fd, ""),
				.area = area,
				.skip = skip,
				.skip_ctx = skip_ctx,
				.max_entries = max_entries};
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
	    archive_write_open(a, sink, NULL, sink_write, NULL) != ARCHIVE_OK)
		return arch_err(w, err);
	if (walk_dir(w, area_fd, 0, 0, err) < 0)
		return -1;
	if (archive_write_close(a) != ARCHIVE_OK)
		return arch_err(w, err);
	return 0;
}
