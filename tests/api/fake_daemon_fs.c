/* SPDX-License-Identifier: MIT */
/* Included by fake_daemon.c: files in memory, tar (ustar, optionally gzip) extraction. */

/* An absolute, normalised path (no trailing '/', no "." segments). */
static char *fk_path(struct fk_sbx *s, const char *dir, const char *p)
{
	char *full, *o, *seg, *save = NULL, *copy;

	if (p[0] == '/')
		copy = xstrdup(p);
	else if (dir && dir[0] == '/')
		copy = xasprintf("%s/%s", dir, p);
	else if (dir)
		copy = xasprintf("%s/%s/%s", s->workdir, dir, p);
	else
		copy = xasprintf("%s/%s", s->workdir, p);
	full = xzalloc(strlen(copy) + 2);
	o = full;
	for (seg = strtok_r(copy, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		if (strcmp(seg, ".") == 0)
			continue;
		o += sprintf(o, "/%s", seg);
	}
	if (o == full)
		strcpy(full, "/");
	free(copy);
	return full;
}

static struct fk_file *fk_file_find(struct fk_sbx *s, const char *path)
{
	struct fk_file *f;

	for (f = s->files; f; f = f->next)
		if (strcmp(f->path, path) == 0)
			return f;
	return NULL;
}

static bool fk_is_dir(struct fk_sbx *s, const char *path)
{
	struct fk_file *f = fk_file_find(s, path);

	return strcmp(path, "/") == 0 || strcmp(path, s->workdir) == 0 || (f && f->dir);
}

static void fk_put(struct fk_sbx *s, const char *path, const char *data, size_t len, bool dir)
{
	struct fk_file *f = fk_file_find(s, path);

	if (!f) {
		f = xzalloc(sizeof(*f));
		f->path = xstrdup(path);
		f->next = s->files;
		s->files = f;
	}
	free(f->data);
	f->data = xzalloc(len + 1);
	memcpy(f->data, data, len);
	f->len = len;
	f->dir = dir;
}

static void fk_mkdirs(struct fk_sbx *s, const char *path)
{
	char *p = xstrdup(path), *q;

	for (q = strchr(p + 1, '/'); q; q = strchr(q + 1, '/')) {
		*q = '\0';
		if (!fk_is_dir(s, p))
			fk_put(s, p, "", 0, true);
		*q = '/';
	}
	if (!fk_is_dir(s, p))
		fk_put(s, p, "", 0, true);
	free(p);
}

static char *fk_gunzip(const void *data, size_t len, size_t *out_len)
{
	z_stream z = {0};
	size_t cap = len * 4 + 1024;
	char *out = xzalloc(cap);
	int r;

	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		abort();
	z.next_in = (Bytef *)data;
	z.avail_in = len;
	for (;;) {
		z.next_out = (Bytef *)out + z.total_out;
		z.avail_out = cap - z.total_out;
		r = inflate(&z, Z_NO_FLUSH);
		if (r == Z_STREAM_END)
			break;
		if (r != Z_OK && r != Z_BUF_ERROR) {
			inflateEnd(&z);
			free(out);
			return NULL;
		}
		if (z.avail_out == 0) {
			cap *= 2;
			out = xrealloc(out, cap);
		} else if (z.avail_in == 0) {
			inflateEnd(&z);
			free(out);
			return NULL;
		}
	}
	*out_len = z.total_out;
	inflateEnd(&z);
	return out;
}

/* Walks a ustar archive; with apply false only checks it. */
static int fk_tar_walk(struct fk_sbx *s, const char *dir, const unsigned char *t, size_t len,
		       bool apply, struct al_error **err)
{
	size_t off = 0;

	while (off + 512 <= len) {
		const unsigned char *h = t + off;
		char name[257] = "", sizebuf[13] = "";
		unsigned long size;
		char type = (char)h[156];

		if (h[0] == 0)
			return 0;
		if (h[345])
			snprintf(name, sizeof(name), "%.155s/%.100s", h + 345, h);
		else
			snprintf(name, sizeof(name), "%.100s", h);
		memcpy(sizebuf, h + 124, 12);
		size = strtoul(sizebuf, NULL, 8);
		if (name[0] == '/' || strstr(name, ".."))
			return al_error_set(err, EINVAL, "tar entry '%s'", name);
		if (type != '0' && type != '\0' && type != '5')
			return al_error_set(err, EINVAL, "tar entry '%s': unsupported type", name);
		if (off + 512 + size > len)
			return al_error_set(err, EINVAL, "tar entry '%s': truncated", name);
		if (apply) {
			char *p = fk_path(s, dir, name), *slash;

			slash = strrchr(p, '/');
			if (slash != p) {
				*slash = '\0';
				fk_mkdirs(s, p);
				*slash = '/';
			}
			if (type == '5')
				fk_mkdirs(s, p);
			else
				fk_put(s, p, (const char *)h + 512, size, false);
			free(p);
		}
		off += 512 + (size + 511) / 512 * 512;
	}
	return off == 0 ? al_error_set(err, EINVAL, "empty or invalid tar archive") : 0;
}

int dm_fs_write_tar(struct daemon *d, const char *team, const char *sbx, const char *dir,
		    const void *data, size_t len, struct al_error **err)
{
	const unsigned char *t = data;
	char *plain = NULL;
	struct fk_sbx *s;
	int r;

	if (len >= 2 && t[0] == 0x1f && t[1] == 0x8b) {
		plain = fk_gunzip(data, len, &len);
		if (!plain)
			return al_error_set(err, EINVAL, "bad gzip data");
		t = (const unsigned char *)plain;
	}
	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, sbx, err);
	r = s ? fk_tar_walk(s, dir, t, len, false, err) : -ENOENT;
	if (r == 0) {
		char *base = fk_path(s, NULL, dir);

		fk_mkdirs(s, base);
		r = fk_tar_walk(s, base, t, len, true, err);
		free(base);
	}
	pthread_mutex_unlock(&d->mu);
	free(plain);
	return r;
}

int dm_fs_read(struct daemon *d, const char *team, const char *sbx, const char *path, size_t max,
	       char **out, size_t *out_len, struct al_error **err)
{
	struct fk_sbx *s;
	struct fk_file *f = NULL;
	int r = 0;
	char *p = NULL;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, sbx, err);
	if (s) {
		p = fk_path(s, NULL, path);
		f = fk_file_find(s, p);
	}
	if (!s)
		r = -ENOENT;
	else if (fk_is_dir(s, p))
		r = al_error_set(err, EISDIR, "read '%s'", path);
	else if (!f)
		r = al_error_set(err, ENOENT, "read '%s'", path);
	else if (f->len > max)
		r = al_error_set(err, E2BIG, "read '%s'", path);
	else {
		*out = xzalloc(f->len + 1);
		memcpy(*out, f->data, f->len);
		*out_len = f->len;
	}
	pthread_mutex_unlock(&d->mu);
	free(p);
	return r;
}

int dm_fs_mkdir(struct daemon *d, const char *team, const char *sbx, const char *path, bool parents,
		struct al_error **err)
{
	struct fk_sbx *s;
	char *p = NULL, *slash;
	int r = 0;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, sbx, err);
	if (!s) {
		r = -ENOENT;
		goto out;
	}
	p = fk_path(s, NULL, path);
	if (fk_file_find(s, p) || fk_is_dir(s, p)) {
		if (!parents)
			r = al_error_set(err, EEXIST, "mkdir '%s'", path);
		goto out;
	}
	slash = strrchr(p, '/');
	*slash = '\0';
	if (!parents && slash != p && !fk_is_dir(s, p)) {
		r = al_error_set(err, ENOENT, "mkdir '%s'", path);
		goto out;
	}
	*slash = '/';
	fk_mkdirs(s, p);
out:
	pthread_mutex_unlock(&d->mu);
	free(p);
	return r;
}

int dm_fs_list(struct daemon *d, const char *team, const char *sbx, const char *path,
	       json_t **out_array, struct al_error **err)
{
	struct fk_sbx *s;
	struct fk_file *f;
	char *p = NULL;
	int r = 0;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, sbx, err);
	if (!s) {
		r = -ENOENT;
		goto out;
	}
	p = fk_path(s, NULL, path);
	if (!fk_is_dir(s, p)) {
		r = al_error_set(err, fk_file_find(s, p) ? ENOTDIR : ENOENT, "list '%s'", path);
		goto out;
	}
	*out_array = json_array();
	for (f = s->files; f; f = f->next) {
		size_t n = strlen(p);
		const char *rest = f->path + n;

		if (strcmp(p, "/") == 0)
			rest = f->path;
		if (strncmp(f->path, p, n) != 0 || rest[0] != '/' || strchr(rest + 1, '/'))
			continue;
		json_array_append_new(*out_array,
				      json_pack("{s:s,s:s,s:I,s:i,s:I}", "name", rest + 1, "type",
						f->dir ? "dir" : "file", "size", (json_int_t)f->len,
						"mode", f->dir ? 0755 : 0644, "mtime",
						(json_int_t)fk_now()));
	}
out:
	pthread_mutex_unlock(&d->mu);
	free(p);
	return r;
}

/* The fake keeps every path writable; only a missing sandbox is refused. */
int dm_fs_writable(struct daemon *d, const char *team, const char *sbx, const char *const *paths,
		   size_t n, struct al_error **err)
{
	struct fk_sbx *s;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, sbx, err);
	pthread_mutex_unlock(&d->mu);
	return s ? 0 : -ENOENT;
}
