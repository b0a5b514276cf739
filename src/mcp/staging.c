/* SPDX-License-Identifier: MIT */
/*
 * The embedded session's private directory: $TMPDIR/airlock-mcp-XXXXXX (0700, ours alone),
 * with workspace/ (what write_file wrote; copied into every run's /workspace) and
 * egress.jsonl (the runs' egress log when the user gave none). Tool paths come from
 * mcp_ws_path (no "..", no NUL) and are still walked one component at a time with
 * O_NOFOLLOW, so nothing here ever leaves workspace/. Removed at exit.
 */
#include "mcp/mcp.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct mcp_staging {
	char *dir, *ws, *egress;
	int ws_fd;
	uint64_t bytes; /* the sizes of the files written (what write_file's cap counts) */
	pthread_mutex_t lock;
};

struct mcp_staging *mcp_staging_new(struct al_error **err)
{
	const char *tmp = getenv("TMPDIR");
	struct mcp_staging *st = xzalloc(sizeof(*st));

	st->ws_fd = -1;
	st->dir = xasprintf("%s/airlock-mcp-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
	pthread_mutex_init(&st->lock, NULL);
	if (!mkdtemp(st->dir)) { /* 0700 */
		al_error_set(err, errno, "mkdtemp '%s'", st->dir);
		free(st->dir);
		st->dir = NULL;
		mcp_staging_free(st);
		return NULL;
	}
	st->ws = xasprintf("%s/workspace", st->dir);
	st->egress = xasprintf("%s/egress.jsonl", st->dir);
	if (mkdir(st->ws, 0755) < 0 ||
	    (st->ws_fd = open(st->ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		al_error_set(err, errno, "mkdir '%s'", st->ws);
		mcp_staging_free(st);
		return NULL;
	}
	return st;
}

const char *mcp_staging_workspace(const struct mcp_staging *st)
{
	return st->ws;
}

const char *mcp_staging_egress(const struct mcp_staging *st)
{
	return st->egress;
}

bool mcp_staging_empty(struct mcp_staging *st)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd = openat(st->ws_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return true;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			return false;
	return true;
}

/*
 * The directory that holds rel's last component (an fd), made on the way with `create`;
 * *base points into rel at that component. rel = "" is workspace/ itself (*base "").
 */
static int walk(struct mcp_staging *st, char *rel, bool create, char **base, struct al_error **err)
{
	int dir = fcntl(st->ws_fd, F_DUPFD_CLOEXEC, 3);
	char *slash, *comp = rel;

	if (dir < 0)
		return al_error_set(err, errno, "dup");
	while ((slash = strchr(comp, '/'))) {
		int next;

		*slash = '\0';
		if (create && mkdirat(dir, comp, 0755) < 0 && errno != EEXIST) {
			close(dir);
			return al_error_set(err, errno, "mkdir '%s'", rel);
		}
		next = openat(dir, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			bool missing = errno == ENOENT;

			close(dir);
			return al_error_msg(err, missing ? ENOENT : ENOTDIR, "'/workspace/%s': %s",
					    rel, missing ? "no such directory" : "not a directory");
		}
		close(dir);
		*slash = '/';
		dir = next;
		comp = slash + 1;
	}
	*base = comp;
	return dir;
}

int mcp_staging_write(struct mcp_staging *st, const char *rel, const char *data, size_t len,
		      uint64_t cap, struct al_error **err)
{
	_cleanup_free_ char *path = xstrdup(rel);
	_cleanup_close_ int dir = -1, fd = -1;
	char *base;
	struct stat old = {0};
	size_t done = 0;

	pthread_mutex_lock(&st->lock);
	dir = walk(st, path, true, &base, err);
	if (dir < 0)
		goto fail;
	if (fstatat(dir, base, &old, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(old.st_mode)) {
		al_error_msg(err, EISDIR, "'/workspace/%s': exists and is not a regular file", rel);
		goto fail;
	}
	if (st->bytes - (uint64_t)old.st_size + len > cap) {
		al_error_msg(err, ENOSPC,
			     "the files written would pass %llu bytes (the sandbox's --disk)",
			     (unsigned long long)cap);
		goto fail;
	}
	fd = openat(dir, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		al_error_set(err, errno, "open '/workspace/%s'", rel);
		goto fail;
	}
	st->bytes -= (uint64_t)old.st_size;
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			al_error_set(err, errno, "write '/workspace/%s'", rel);
			goto fail;
		}
		done += (size_t)n;
	}
	st->bytes += len;
	pthread_mutex_unlock(&st->lock);
	return 0;
fail:
	pthread_mutex_unlock(&st->lock);
	return -1;
}

char *mcp_staging_read(struct mcp_staging *st, const char *rel, size_t max, size_t *len,
		       bool *truncated, struct al_error **err)
{
	_cleanup_free_ char *path = xstrdup(rel);
	_cleanup_close_ int dir = -1, fd = -1;
	char *base, *buf = NULL;
	struct stat sb;
	ssize_t n;

	pthread_mutex_lock(&st->lock);
	dir = walk(st, path, false, &base, err);
	if (dir >= 0)
		fd = openat(dir, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (dir >= 0 && (fd < 0 || fstat(fd, &sb) < 0))
		al_error_msg(err, ENOENT,
			     "'/workspace/%s': no such file (read_file sees what "
			     "write_file wrote)",
			     rel);
	else if (fd >= 0 && !S_ISREG(sb.st_mode))
		al_error_msg(err, EISDIR, "'/workspace/%s': not a regular file", rel);
	else if (fd >= 0) {
		*len = 0;
		buf = xzalloc(max + 1);
		while (*len < max && (n = read(fd, buf + *len, max - *len)) > 0)
			*len += (size_t)n;
		*truncated = (uint64_t)sb.st_size > max;
	}
	pthread_mutex_unlock(&st->lock);
	return buf;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of dir (an fd we own), sorted by name. */
static json_t *list_dir(int dir)
{
	DIR *d = fdopendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;
	json_t *arr = json_array();

	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			names = xrealloc(names, (n + 1) * sizeof(*names));
			names[n++] = xstrdup(de->d_name);
		}
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		struct stat sb;
		const char *type = "other";

		if (fstatat(dirfd(d), names[i], &sb, AT_SYMLINK_NOFOLLOW) == 0)
			type = S_ISREG(sb.st_mode)   ? "file"
			       : S_ISDIR(sb.st_mode) ? "dir"
			       : S_ISLNK(sb.st_mode) ? "symlink"
						     : "other";
		json_array_append_new(arr, json_pack("{s:s, s:s, s:I}", "name", names[i], "type",
						     type, "size", (json_int_t)sb.st_size));
		free(names[i]);
	}
	free(names);
	if (d)
		closedir(d);
	else
		close(dir);
	return arr;
}

json_t *mcp_staging_list(struct mcp_staging *st, const char *rel, struct al_error **err)
{
	_cleanup_free_ char *path = xstrdup(rel);
	_cleanup_close_ int dir = -1;
	int fd = -1;
	char *base;
	json_t *out = NULL;

	pthread_mutex_lock(&st->lock);
	dir = walk(st, path, false, &base, err);
	if (dir >= 0)
		fd = openat(dir, base[0] ? base : ".",
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir >= 0 && fd < 0)
		al_error_msg(err, ENOENT, "'/workspace/%s': no such directory", rel);
	else if (fd >= 0)
		out = list_dir(fd);
	pthread_mutex_unlock(&st->lock);
	return out;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)remove(path); /* best effort: keep going */
	return 0;
}

void mcp_staging_free(struct mcp_staging *st)
{
	if (!st)
		return;
	if (st->ws_fd >= 0)
		close(st->ws_fd);
	if (st->dir)
		nftw(st->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	pthread_mutex_destroy(&st->lock);
	free(st->dir);
	free(st->ws);
	free(st->egress);
	free(st);
}
