/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for files_write_tar (src/daemon/files.c).
 *
 * One fake sandbox root on tmpfs, reused: BASE/root/{workspace,etc/secret} and
 * BASE/outside/sentinel next to it. Each input is extracted into
 * /workspace/x with small limits; afterwards nothing may exist or have
 * changed outside BASE/root/workspace (abort otherwise), and /workspace/x is
 * wiped without following symlinks.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE \
 *     -Iinclude -Isrc tests/fuzz/fuzz_tar.c src/daemon/files.c src/common/error.c \
 *     src/common/xalloc.c src/common/utf8.c $(pkg-config --cflags --libs libarchive jansson) \
 *     -o fuzz_tar
 *   ./fuzz_tar -max_total_time=180 tests/fuzz/corpus/tar
 */
#include "daemon/files.h"
#include "common/error.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fz {
	char base[64], root[96], x[128];
	int root_fd;
	ino_t secret_ino, sentinel_ino;
};

static void die(const char *what, const char *path)
{
	fprintf(stderr, "fuzz_tar: %s: %s\n", what, path);
	abort();
}

static void put(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);

	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		die("create", path);
	close(fd);
}

/* dir must hold exactly the names in `want` (NULL-terminated). */
static void expect_dir(const char *dir, const char *const *want)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0, nw = 0;

	if (!d)
		die("opendir", dir);
	while (want[nw])
		nw++;
	while ((de = readdir(d))) {
		size_t i;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		for (i = 0; want[i] && strcmp(want[i], de->d_name) != 0; i++)
			;
		if (!want[i])
			die("unexpected entry outside the workspace", de->d_name);
		n++;
	}
	closedir(d);
	if (n != nw)
		die("an entry disappeared from", dir);
}

static void expect_file(const char *path, const char *content, ino_t ino)
{
	char buf[64];
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (fd < 0 || n < 0 || fstat(fd, &st) < 0)
		die("open", path);
	close(fd);
	buf[n] = '\0';
	/* A hard link to it, made anywhere, would raise st_nlink. */
	if (strcmp(buf, content) != 0 || st.st_nlink != 1 || st.st_ino != ino ||
	    (st.st_mode & 07777) != 0644)
		die("changed", path);
}

static void setup(struct fz *f)
{
	char p[256];
	struct stat st;

	strcpy(f->base, "/dev/shm/fuzz_tar.XXXXXX");
	if (!mkdtemp(f->base))
		die("mkdtemp", f->base);
	snprintf(f->root, sizeof(f->root), "%s/root", f->base);
	snprintf(f->x, sizeof(f->x), "%s/workspace/x", f->root);
	mkdir(f->root, 0755);
	snprintf(p, sizeof(p), "%s/workspace", f->root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/etc", f->root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/etc/secret", f->root);
	put(p, "secret\n");
	stat(p, &st);
	f->secret_ino = st.st_ino;
	snprintf(p, sizeof(p), "%s/outside", f->base);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/outside/sentinel", f->base);
	put(p, "sentinel\n");
	stat(p, &st);
	f->sentinel_ino = st.st_ino;
	f->root_fd = open(f->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (f->root_fd < 0)
		die("open", f->root);
}

static void check(const struct fz *f)
{
	static const char *const base[] = {"root", "outside", NULL};
	static const char *const root[] = {"workspace", "etc", NULL};
	static const char *const etc[] = {"secret", NULL};
	static const char *const outside[] = {"sentinel", NULL};
	static const char *const ws_x[] = {"x", NULL};
	static const char *const ws[] = {NULL};
	char p[256];
	struct stat st;

	expect_dir(f->base, base);
	expect_dir(f->root, root);
	snprintf(p, sizeof(p), "%s/etc", f->root);
	expect_dir(p, etc);
	snprintf(p, sizeof(p), "%s/outside", f->base);
	expect_dir(p, outside);
	snprintf(p, sizeof(p), "%s/workspace", f->root);
	/* workspace/x is the target: a real directory or nothing at all. */
	expect_dir(p, lstat(f->x, &st) == 0 ? ws_x : ws);
	if (lstat(f->x, &st) == 0 && !S_ISDIR(st.st_mode))
		die("the target is not a directory", f->x);
	snprintf(p, sizeof(p), "%s/etc/secret", f->root);
	expect_file(p, "secret\n", f->secret_ino);
	snprintf(p, sizeof(p), "%s/outside/sentinel", f->base);
	expect_file(p, "sentinel\n", f->sentinel_ino);
	if (access("/airlock-pwned", F_OK) == 0 || access("/x", F_OK) == 0)
		die("written on the host", "/");
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *w)
{
	if (remove(p) < 0)
		die("remove", p);
	return 0;
}

/* The scratch tree of this process, removed when libFuzzer exits (-max_total_time, -runs);
 * a crash leaves it for inspection. */
static char scratch[64];

static void remove_scratch(void)
{
	if (scratch[0])
		nftw(scratch, rm_one, 16, FTW_PHYS | FTW_DEPTH);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz f = {.root_fd = -1};
	const struct files_limits lim = {.max_bytes = 1 << 20, .max_entries = 64};
	struct al_error *err = NULL;
	int r;

	if (f.root_fd < 0) {
		setup(&f);
		snprintf(scratch, sizeof(scratch), "%s", f.base);
		atexit(remove_scratch);
	}
	r = files_write_tar(f.root_fd, "/workspace", "/workspace/x", getuid(), data, size, &lim,
			    &err);
	if ((r < 0) != (err != NULL) || (err && (err->code <= 0 || !err->msg)))
		die("error rule broken", err ? err->msg : "(no error)");
	al_error_free(err);
	check(&f);
	/* Wipe the target without following anything (FTW_PHYS, depth first). */
	nftw(f.x, rm_one, 16, FTW_PHYS | FTW_DEPTH);
	return 0;
}
