/* SPDX-License-Identifier: MIT */
/*
 * airlockd's snapshots (docs/snapshots.md): the store of captured sandbox filesystems.
 *
 * A snapshot is two files under STATE/snapshots/: <id>.tar, one tar per writable area of
 * the sandbox (/workspace, /tmp, /home/user, /dev/shm, its workdir), back to back, and
 * <id>.json, its record: team, source sandbox, parent snapshot, times, size, the SHA-256
 * of the .tar and where each area's tar lies in it. The record is written (and renamed
 * into place) after the .tar is complete and synced: a crash leaves either a whole
 * snapshot or a .tar without a record, removed at the next start. Restoring reads the
 * whole .tar and checks its digest before the first byte goes into a sandbox.
 *
 * Locking: snaps->mu guards the list; it is taken with d->mu held (the timer's expiry)
 * or alone, never the other way round. Captures run without either held.
 */
#include "daemon/snap_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void dm_snap_free(struct dm_snap *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_areas; i++)
		free(s->areas[i].path);
	free(s->areas);
	free(s->team);
	free(s->workdir);
	free(s);
}

char *dm_snap_path(struct daemon *d, const char *id, const char *ext)
{
	return xasprintf("%s/%s%s", d->snaps->dir, id, ext);
}

/* --- records ---------------------------------------------------------------- */

static json_t *record_json(const struct dm_snap *s)
{
	json_t *areas = json_array();

	for (size_t i = 0; i < s->n_areas; i++)
		json_array_append_new(areas,
				      json_pack("{s:s,s:I,s:I,s:I}", "path", s->areas[i].path,
						"offset", (json_int_t)s->areas[i].off, "length",
						(json_int_t)s->areas[i].len, "entries",
						(json_int_t)s->areas[i].entries));
	return json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:s,s:s,s:I,s:o}", "id", s->id, "team",
			 s->team, "sandbox_id", s->src, "parent_id", s->parent, "created_ms",
			 (json_int_t)s->created_ms, "expires_ms", (json_int_t)s->expires_ms, "size",
			 (json_int_t)s->size, "sha256", s->sha, "workdir", s->workdir, "disk_bytes",
			 (json_int_t)s->disk_bytes, "areas", areas);
}

static int copy_id(char *dst, json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	if (!v || strlen(v) > DM_ID_LEN)
		return -1;
	strcpy(dst, v);
	return 0;
}

static struct dm_snap *record_parse(json_t *o)
{
	struct dm_snap *s = xzalloc(sizeof(*s));
	json_t *areas = json_object_get(o, "areas"), *a;
	const char *sha = json_string_value(json_object_get(o, "sha256"));
	size_t i;

	if (copy_id(s->id, o, "id") < 0 || copy_id(s->src, o, "sandbox_id") < 0 ||
	    copy_id(s->parent, o, "parent_id") < 0 || !sha || strlen(sha) != 64 ||
	    !json_is_array(areas) || !json_string_value(json_object_get(o, "team"))) {
		dm_snap_free(s);
		return NULL;
	}
	strcpy(s->sha, sha);
	s->team = xstrdup(json_string_value(json_object_get(o, "team")));
	s->workdir = xstrdup(json_string_value(json_object_get(o, "workdir")) ?: "/workspace");
	s->created_ms = json_integer_value(json_object_get(o, "created_ms"));
	s->expires_ms = json_integer_value(json_object_get(o, "expires_ms"));
	s->size = (uint64_t)json_integer_value(json_object_get(o, "size"));
	s->disk_bytes = (uint64_t)json_integer_value(json_object_get(o, "disk_bytes"));
	s->areas = xzalloc((json_array_size(areas) + 1) * sizeof(*s->areas));
	json_array_foreach(areas, i, a)
	{
		const char *p = json_string_value(json_object_get(a, "path"));

		if (!p || p[0] != '/')
			continue;
		s->areas[s->n_areas].path = xstrdup(p);
		s->areas[s->n_areas].off =
		    (uint64_t)json_integer_value(json_object_get(a, "offset"));
		s->areas[s->n_areas].len =
		    (uint64_t)json_integer_value(json_object_get(a, "length"));
		s->areas[s->n_areas++].entries =
		    (uint64_t)json_integer_value(json_object_get(a, "entries"));
	}
	return s;
}

int dm_snap_record_write(struct daemon *d, const struct dm_snap *s, struct al_error **err)
{
	_cleanup_dm_json_ json_t *o = record_json(s);
	_cleanup_free_ char *tmp = dm_snap_path(d, s->id, ".json.tmp");
	_cleanup_free_ char *path = dm_snap_path(d, s->id, ".json");
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return al_error_set(err, errno, "create '%s'", tmp);
	if (json_dumpfd(o, fd, JSON_COMPACT) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
		int e = errno ? errno : EIO;

		unlink(tmp);
		return al_error_set(err, e, "write '%s'", path);
	}
	return 0;
}

/* --- the list --------------------------------------------------------------- */

/* snaps->mu held. */
void dm_snap_add(struct dm_snaps *ss, struct dm_snap *s)
{
	ss->v = xrealloc(ss->v, (ss->n + 1) * sizeof(*ss->v));
	ss->v[ss->n++] = s;
	ss->total += s->size;
}

static void load_one(struct daemon *d, const char *name)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", d->snaps->dir, name);
	_cleanup_dm_json_ json_t *o = json_load_file(path, 0, NULL);
	struct dm_snap *s = o ? record_parse(o) : NULL;
	_cleanup_free_ char *tar = s ? dm_snap_path(d, s->id, ".tar") : NULL;

	if (!s || access(tar, F_OK) < 0) {
		dm_log(d, "snapshot record '%s' unreadable or without its data: removed", path);
		unlink(path);
		dm_snap_free(s);
		return;
	}
	dm_snap_add(d->snaps, s);
}

/* A .tar (or .tmp) with no record: a capture that did not finish. */
static void drop_orphan(struct daemon *d, const char *name)
{
	size_t n = strlen(name);
	_cleanup_free_ char *path = xasprintf("%s/%s", d->snaps->dir, name);
	_cleanup_free_ char *rec = NULL;

	if (n > 4 && strcmp(name + n - 4, ".tar") == 0) {
		rec = xasprintf("%s/%.*s.json", d->snaps->dir, (int)(n - 4), name);
		if (access(rec, F_OK) == 0)
			return;
	} else if (n <= 4 || strcmp(name + n - 4, ".tmp") != 0) {
		return;
	}
	unlink(path);
}

int dm_snaps_open(struct daemon *d, struct al_error **err)
{
	struct dm_snaps *ss = xzalloc(sizeof(*ss));
	DIR *dir;
	struct dirent *de;

	pthread_mutex_init(&ss->mu, NULL);
	ss->dir = xasprintf("%s/snapshots", d->state_dir);
	ss->cap = d->opts.snap_max_bytes ? d->opts.snap_max_bytes : DM_SNAP_MAX_DEFAULT;
	d->snaps = ss;
	if (mkdir(ss->dir, 0700) < 0 && errno != EEXIST)
		return al_error_set(err, errno, "mkdir '%s'", ss->dir);
	dir = opendir(ss->dir);
	if (!dir)
		return al_error_set(err, errno, "open '%s'", ss->dir);
	while ((de = readdir(dir))) {
		size_t n = strlen(de->d_name);

		if (n > 5 && strcmp(de->d_name + n - 5, ".json") == 0)
			load_one(d, de->d_name);
	}
	rewinddir(dir);
	while ((de = readdir(dir)))
		drop_orphan(d, de->d_name);
	closedir(dir);
	return 0;
}

void dm_snaps_close(struct daemon *d)
{
	struct dm_snaps *ss = d->snaps;

	if (!ss)
		return;
	for (size_t i = 0; i < ss->n; i++)
		dm_snap_free(ss->v[i]);
	free(ss->v);
	free(ss->origin);
	free(ss->dir);
	pthread_mutex_destroy(&ss->mu);
	free(ss);
	d->snaps = NULL;
}

/* snaps->mu held: the team's snapshot, or NULL with ENOENT. */
struct dm_snap *dm_snap_find(struct dm_snaps *ss, const char *team, const char *id,
			     struct al_error **err)
{
	for (size_t i = 0; i < ss->n; i++)
		if (strcmp(ss->v[i]->id, id) == 0 && strcmp(ss->v[i]->team, team) == 0)
			return ss->v[i];
	al_error_msg(err, ENOENT, "no snapshot '%.64s'", id);
	return NULL;
}

/* snaps->mu held: takes s out of the list and deletes its files. */
static void snaps_remove(struct daemon *d, struct dm_snap *s)
{
	struct dm_snaps *ss = d->snaps;
	_cleanup_free_ char *tar = dm_snap_path(d, s->id, ".tar");
	_cleanup_free_ char *rec = dm_snap_path(d, s->id, ".json");

	for (size_t i = 0; i < ss->n; i++)
		if (ss->v[i] == s) {
			ss->v[i] = ss->v[--ss->n];
			break;
		}
	dm_sub_floor0(&ss->total, s->size);
	/* The record first: a crash between the two leaves an orphan .tar, removed at start.
	 * A restore that already opened the .tar keeps reading it (unlinked, not gone). */
	unlink(rec);
	unlink(tar);
	dm_snap_free(s);
}

void dm_snaps_expire(struct daemon *d)
{
	struct dm_snaps *ss = d->snaps;
	int64_t now = dm_now_ms();

	if (!ss)
		return;
	pthread_mutex_lock(&ss->mu);
	for (size_t i = 0; i < ss->n;) {
		struct dm_snap *s = ss->v[i];

		if (s->expires_ms && s->expires_ms <= now) {
			dm_log(d, "snapshot %s expired: deleted", s->id);
			snaps_remove(d, s);
			continue; /* the last one moved into slot i */
		}
		i++;
	}
	pthread_mutex_unlock(&ss->mu);
}

/* --- what a sandbox came from ---------------------------------------------------- */

void dm_snap_origin_set(struct daemon *d, const char *sbx, const char *snap)
{
	struct dm_snaps *ss = d->snaps;

	pthread_mutex_lock(&ss->mu);
	if (ss->n_origin == DM_SNAP_ORIGINS_MAX) /* the oldest goes */
		memmove(ss->origin, ss->origin + 1, --ss->n_origin * sizeof(*ss->origin));
	ss->origin = xrealloc(ss->origin, (ss->n_origin + 1) * sizeof(*ss->origin));
	snprintf(ss->origin[ss->n_origin].sbx, sizeof(ss->origin->sbx), "%s", sbx);
	snprintf(ss->origin[ss->n_origin++].snap, sizeof(ss->origin->snap), "%s", snap);
	pthread_mutex_unlock(&ss->mu);
}

/* snaps->mu held: the snapshot sandbox sbx was made from, or "". */
const char *dm_snap_origin(struct dm_snaps *ss, const char *sbx)
{
	for (size_t i = ss->n_origin; i-- > 0;)
		if (strcmp(ss->origin[i].sbx, sbx) == 0)
			return ss->origin[i].snap;
	return "";
}

/* --- the API's views ----------------------------------------------------------- */

json_t *dm_snap_json(const struct dm_snap *s)
{
	json_t *o =
	    json_pack("{s:s,s:s,s:I,s:I,s:s,s:s,s:s}", "id", s->id, "sandbox_id", s->src,
		      "created_at", (json_int_t)s->created_ms, "size_bytes", (json_int_t)s->size,
		      "sha256", s->sha, "status", "created", "workdir", s->workdir);

	json_object_set_new(o, "parent_id", s->parent[0] ? json_string(s->parent) : json_null());
	json_object_set_new(o, "expires_at",
			    s->expires_ms ? json_integer(s->expires_ms) : json_null());
	return o;
}

int dm_snapshot_get(struct daemon *d, const char *team, const char *id, json_t **out,
		    struct al_error **err)
{
	struct dm_snaps *ss = d->snaps;
	struct dm_snap *s;

	pthread_mutex_lock(&ss->mu);
	s = dm_snap_find(ss, team, id, err);
	if (s)
		*out = dm_snap_json(s);
	pthread_mutex_unlock(&ss->mu);
	return s ? 0 : -ENOENT;
}

static int by_created_desc(const void *a, const void *b)
{
	const struct dm_snap *x = *(struct dm_snap *const *)a, *y = *(struct dm_snap *const *)b;

	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? 1 : -1;
	return strcmp(x->id, y->id);
}

int dm_snapshot_list(struct daemon *d, const char *team, const char *sbx, json_t **out,
		     struct al_error **err)
{
	struct dm_snaps *ss = d->snaps;
	_cleanup_free_ struct dm_snap **v = NULL;
	size_t n = 0;

	(void)err;
	pthread_mutex_lock(&ss->mu);
	v = xzalloc((ss->n + 1) * sizeof(*v));
	for (size_t i = 0; i < ss->n; i++)
		if (strcmp(ss->v[i]->team, team) == 0 && (!sbx || strcmp(ss->v[i]->src, sbx) == 0))
			v[n++] = ss->v[i];
	qsort(v, n, sizeof(*v), by_created_desc);
	*out = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(*out, dm_snap_json(v[i]));
	pthread_mutex_unlock(&ss->mu);
	return 0;
}

int dm_snapshot_delete(struct daemon *d, const char *team, const char *id, json_t **out,
		       struct al_error **err)
{
	struct dm_snaps *ss = d->snaps;
	struct dm_snap *s;

	pthread_mutex_lock(&ss->mu);
	s = dm_snap_find(ss, team, id, err);
	if (s) {
		if (out) {
			*out = dm_snap_json(s);
			json_object_set_new(*out, "status", json_string("deleted"));
		}
		snaps_remove(d, s);
	}
	pthread_mutex_unlock(&ss->mu);
	return s ? 0 : -ENOENT;
}
