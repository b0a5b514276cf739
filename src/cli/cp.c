/* SPDX-License-Identifier: MIT */
/*
 * airlock cp HOST_PATH SANDBOX:DIR   copy a host file or directory into DIR of the sandbox
 * airlock cp SANDBOX:FILE HOST_PATH  copy a file out ('-' for stdout)
 */
#include "cli/client.h"
#include "common/xalloc.h"

#include <airlock/airlock.h>
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct membuf {
	char *data;
	size_t len;
};

static la_ssize_t mem_write(struct archive *a, void *ctx, const void *p, size_t n)
{
	struct membuf *m = ctx;

	m->data = xrealloc(m->data, m->len + n);
	memcpy(m->data + m->len, p, n);
	m->len += n;
	return (la_ssize_t)n;
}

/* The whole of src (file or tree, symlinks kept as links) as a gzip'd tar in memory. */
static int pack(const char *src, struct membuf *out)
{
	struct archive *disk = archive_read_disk_new(), *w = archive_write_new();
	char *copy = xstrdup(src), *base = basename(copy);
	char *parent_copy = xstrdup(src), *parent = dirname(parent_copy);
	int r = ARCHIVE_OK, cwd = open(".", O_RDONLY | O_CLOEXEC);

	archive_write_set_format_pax_restricted(w);
	archive_write_add_filter_gzip(w);
	archive_write_open(w, out, NULL, mem_write, NULL);
	archive_read_disk_set_symlink_physical(disk);
	archive_read_disk_set_standard_lookup(disk);
	if (chdir(parent) < 0 || archive_read_disk_open(disk, base) != ARCHIVE_OK) {
		fprintf(stderr, "airlock: cp: cannot read '%s': %s\n", src,
			errno ? strerror(errno) : archive_error_string(disk));
		r = ARCHIVE_FATAL;
	}
	while (r == ARCHIVE_OK) {
		struct archive_entry *e = archive_entry_new();
		int rr = archive_read_next_header2(disk, e);

		if (rr == ARCHIVE_EOF) {
			archive_entry_free(e);
			break;
		}
		if (rr != ARCHIVE_OK || archive_write_header(w, e) != ARCHIVE_OK) {
			fprintf(stderr, "airlock: cp: %s\n",
				archive_error_string(rr != ARCHIVE_OK ? disk : w));
			archive_entry_free(e);
			r = ARCHIVE_FATAL;
			break;
		}
		archive_read_disk_descend(disk);
		if (archive_entry_filetype(e) == AE_IFREG && archive_entry_size(e) > 0) {
			int fd = open(archive_entry_sourcepath(e), O_RDONLY | O_CLOEXEC);
			char buf[65536];
			ssize_t n;

			while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
				archive_write_data(w, buf, (size_t)n);
			if (fd >= 0)
				close(fd);
		}
		archive_entry_free(e);
	}
	archive_read_free(disk);
	archive_write_close(w);
	archive_write_free(w);
	if (cwd >= 0) {
		(void)!fchdir(cwd);
		close(cwd);
	}
	free(copy);
	free(parent_copy);
	return r == ARCHIVE_OK ? 0 : -1;
}

static int copy_in(struct client *c, const char *src, const char *sbx, const char *dir)
{
	struct membuf m = {0};
	struct client_resp r;
	char *q, *path;
	int code = 0;

	if (pack(src, &m) < 0)
		return 1;
	q = client_escape(dir && *dir ? dir : "/workspace");
	path = xasprintf("/v1/sandboxes/%s/files?dir=%s", sbx, q);
	if (client_call(c, "PUT", path, m.data, m.len, "application/gzip", &r) < 0)
		code = AL_EXIT_SETUP;
	else if (r.status >= 300)
		code = client_fail(&r, "cp");
	client_resp_free(&r);
	free(path);
	free(q);
	free(m.data);
	return code;
}

static int copy_out(struct client *c, const char *sbx, const char *file, const char *dst)
{
	struct client_resp r;
	char *q = client_escape(file),
	     *path = xasprintf("/v1/sandboxes/%s/files/content?path=%s", sbx, q);
	int code = 0, fd;

	if (client_call(c, "GET", path, NULL, 0, NULL, &r) < 0) {
		code = AL_EXIT_SETUP;
	} else if (r.status != 200) {
		code = client_fail(&r, "cp");
	} else {
		fd = strcmp(dst, "-") == 0
			 ? STDOUT_FILENO
			 : open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, r.body ? r.body : "", r.len) != (ssize_t)r.len) {
			fprintf(stderr, "airlock: cp: write '%s': %s\n", dst, strerror(errno));
			code = 1;
		}
		if (fd > STDOUT_FILENO)
			close(fd);
	}
	client_resp_free(&r);
	free(path);
	free(q);
	return code;
}

int cli_cp(int argc, char **argv)
{
	struct client c;
	char *colon;
	int code;

	argc = client_init(&c, argc, argv);
	if (argc != 3) {
		fputs("usage: airlock cp HOST_PATH SANDBOX:DIR    copy a file or directory in\n"
		      "       airlock cp SANDBOX:FILE HOST_PATH   copy a file out ('-' = stdout)\n",
		      stderr);
		return AL_EXIT_USAGE;
	}
	if ((colon = strchr(argv[2], ':')) && strncmp(argv[2], "sbx_", 4) == 0) {
		*colon = '\0';
		code = copy_in(&c, argv[1], argv[2], colon + 1);
	} else if ((colon = strchr(argv[1], ':')) && strncmp(argv[1], "sbx_", 4) == 0) {
		*colon = '\0';
		code = copy_out(&c, argv[1], colon + 1, argv[2]);
	} else {
		fputs("airlock: cp: one side must be SANDBOX:PATH (sandbox ids start with sbx_)\n",
		      stderr);
		code = AL_EXIT_USAGE;
	}
	client_free(&c);
	return code;
}
