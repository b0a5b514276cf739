/* SPDX-License-Identifier: MIT */
/*
 * airlockd's drives: persistent volumes a create mounts into its sandbox
 * (docs/snapshots.md, "Drives"). Each is STATE/drives/<id>.img (an ext4 image,
 * drive_mount.c) and its record <id>.json: team, name, project, size cap, times, and the
 * sandboxes it was mounted into (so that a restarted daemon still refuses to delete a
 * drive a running sandbox has).
 *
 * Sharing, as the SDK has it: one running sandbox at a time mounts a drive read-write;
 * any number mount it read-only ("snapshot" mode) beside it. Deleting a drive a running
 * sandbox has mounted is EBUSY (409).
 *
 * Locking: drives->mu guards the list; d->mu is taken inside it (to see whether a
 * sandbox still runs), never the other way round.
 */
#include "daemon/drive_internal.h"
#include "daemon/files.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DRIVE_NAME_MAX 64
#define DRIVE_ATTACH_MAX 64 /* mounts remembered per drive (the oldest ended ones go) */

struct drive_use {
	char sbx[DM_ID_LEN + 1];
	bool ro;
};

struct dm_drive {
	char id[DM_ID_LEN + 1];
	char name[DRIVE_NAME_MAX + 1];
	char *team, *project;
	uint64_t max;
	int64_t created_ms, updated_ms;
	int base; /* the mounted file system's fd while the daemon holds it, or -1 */
	struct drive_use use[DRIVE_ATTACH_MAX];
	size_t n_use;
};

struct dm_drives {
	pthread_mutex_t mu;
	char *dir;
	struct dm_drive **v;
	size_t n;
};

static void drive_free(struct dm_drive *v)
{
	if (!v)
		return;
	if (v->base >= 0)
		close(v->base);
	free(v->team);
	free(v->project);
	free(v);
}

static char *drive_path(struct daemon *d, const char *id, const char *ext)
{
	return xasprintf("%s/%s%s", d->drives->dir, id, ext);
}

static int record_write(struct daemon *d, const struct dm_drive *v, struct al_error **err)
{
	json_t *use = json_array(), *o;
	_cleanup_free_ char *tmp = drive_path(d, v->id, ".json.tmp");
	_cleanup_free_ char *path = drive_path(d, v->id, ".json");
	int r;

	for (size_t i = 0; i < v->n_use; i++)
		json_array_append_new(
		    use, json_pack("{s:s,s:b}", "sbx", v->use[i].sbx, "ro", v->use[i].ro));
	o = json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:o}", "id", v->id, "name", v->name, "team",
		      v->team, "project", v->project, "max", (json_int_t)v->max, "created_ms",
		      (json_int_t)v->created_ms, "updated_ms", (json_int_t)v->updated_ms, "used",
		      use);
	r = json_dump_file(o, tmp, JSON_COMPACT);
	json_decref(o);
	if (r < 0 || rename(tmp, path) < 0) {
		unlink(tmp);
		return al_error_set(err, errno ? errno : EIO, "write '%s'", path);
	}
	return 0;
}

static void load_one(struct daemon *d, const char *file)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", d->drives->dir, file);
	json_t *o = json_load_file(path, 0, NULL), *use, *u;
	struct dm_drive *v = xzalloc(sizeof(*v));
	const char *id = json_string_value(json_object_get(o, "id"));
	const char *name = json_string_value(json_object_get(o, "name"));
	const char *team = json_string_value(json_object_get(o, "team"));
	size_t i;

	v->base = -1;
	if (!id || strlen(id) > DM_ID_LEN || !name || strlen(name) > DRIVE_NAME_MAX || !team) {
		dm_log(d, "drive record '%s' unreadable: left as it is", path);
		json_decref(o);
		drive_free(v);
		return;
	}
	strcpy(v->id, id);
	strcpy(v->name, name);
	v->team = xstrdup(team);
	v->project = xstrdup(json_string_value(json_object_get(o, "project")) ?: "");
	v->max = (uint64_t)json_integer_value(json_object_get(o, "max"));
	v->created_ms = json_integer_value(json_object_get(o, "created_ms"));
	v->updated_ms = json_integer_value(json_object_get(o, "updated_ms"));
	use = json_object_get(o, "used");
	json_array_foreach(use, i, u)
	{
		const char *s = json_string_value(json_object_get(u, "sbx"));

		if (s && strlen(s) <= DM_ID_LEN && v->n_use < DRIVE_ATTACH_MAX) {
			strcpy(v->use[v->n_use].sbx, s);
			v->use[v->n_use++].ro = json_is_true(json_object_get(u, "ro"));
		}
	}
	json_decref(o);
	d->drives->v = xrealloc(d->drives->v, (d->drives->n + 1) * sizeof(*d->drives->v));
	d->drives->v[d->drives->n++] = v;
}

int dm_drives_open(struct daemon *d, struct al_error **err)
{
	struct dm_drives *dv = xzalloc(sizeof(*dv));
	DIR *dir;
	struct dirent *de;

	pthread_mutex_init(&dv->mu, NULL);
	dv->dir = xasprintf("%s/drives", d->state_dir);
	d->drives = dv;
	if (mkdir(dv->dir, 0700) < 0 && errno != EEXIST)
		return al_error_set(err, errno, "mkdir '%s'", dv->dir);
	if (!(dir = opendir(dv->dir)))
		return al_error_set(err, errno, "open '%s'", dv->dir);
	while ((de = readdir(dir))) {
		size_t n = strlen(de->d_name);

		if (n > 5 && strcmp(de->d_name + n - 5, ".json") == 0)
			load_one(d, de->d_name);
	}
	closedir(dir);
	return 0;
}

void dm_drives_close(struct daemon *d)
{
	struct dm_drives *dv = d->drives;

	if (!dv)
		return;
	for (size_t i = 0; i < dv->n; i++)
		drive_free(dv->v[i]);
	free(dv->v);
	free(dv->dir);
	pthread_mutex_destroy(&dv->mu);
	free(dv);
	d->drives = NULL;
}

static bool name_ok(const char *n)
{
	size_t len = strlen(n);

	return len >= 1 && len <= DRIVE_NAME_MAX &&
	       strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
		   len &&
	       n[0] != '.';
}

/* drives->mu held. */
static struct dm_drive *find(struct dm_drives *dv, const char *team, const char *name,
			     struct al_error **err)
{
	for (size_t i = 0; i < dv->n; i++)
		if (strcmp(dv->v[i]->name, name) == 0 && strcmp(dv->v[i]->team, team) == 0)
			return dv->v[i];
	al_error_msg(err, ENOENT, "no drive '%.64s'", name);
	return NULL;
}

/* drives->mu held: forgets the uses by sandboxes that no longer run; the read-write one
 * still running (NULL if none) and whether any is. */
static const char *in_use(struct daemon *d, struct dm_drive *v, bool *any)
{
	static const char none[] = "";
	const char *rw = NULL;
	size_t k = 0;

	*any = false;
	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < v->n_use; i++) {
		struct dm_sbx *s = dm_find_sbx(d, v->team, v->use[i].sbx, NULL);

		if (!s || dm_sbx_has_ended(s))
			continue;
		v->use[k++] = v->use[i];
		*any = true;
		if (!v->use[k - 1].ro)
			rw = v->use[k - 1].sbx;
	}
	v->n_use = k;
	pthread_mutex_unlock(&d->mu);
	return rw ? rw : (*any ? none : NULL);
}

static json_t *drive_json(struct daemon *d, struct dm_drive *v)
{
	bool any;
	const char *rw = in_use(d, v, &any);
	json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:b}", "id", v->id, "name", v->name,
			      "project", v->project, "max_size_bytes", (json_int_t)v->max,
			      "created_at", (json_int_t)v->created_ms, "updated_at",
			      (json_int_t)v->updated_ms, "in_use", any);

	json_object_set_new(o, "sandbox_id", rw && rw[0] ? json_string(rw) : json_null());
	return o;
}

int dm_drive_get_or_create(struct daemon *d, const char *team, const char *name,
			   const char *project, uint64_t max, json_t **out, struct al_error **err)
{
	struct dm_drives *dv = d->drives;
	struct dm_drive *v;
	_cleanup_free_ char *img = NULL;

	if (!name_ok(name))
		return al_error_msg(err, EINVAL,
				    "drive name '%.80s': 1 to %d letters, digits, '.', '_', '-', "
				    "not starting with '.'",
				    name, DRIVE_NAME_MAX);
	if (max && (max < DM_DRIVE_MIN || max > DM_DRIVE_MAX))
		return al_error_msg(err, EINVAL, "maxSizeBytes: %llu to %llu",
				    (unsigned long long)DM_DRIVE_MIN,
				    (unsigned long long)DM_DRIVE_MAX);
	pthread_mutex_lock(&dv->mu);
	if ((v = find(dv, team, name, NULL))) {
		*out = drive_json(d, v);
		pthread_mutex_unlock(&dv->mu);
		return 0;
	}
	v = xzalloc(sizeof(*v));
	v->base = -1;
	dm_new_id("drv_", v->id);
	snprintf(v->name, sizeof(v->name), "%s", name);
	v->team = xstrdup(team);
	v->project = xstrdup(project ? project : "");
	v->max = max ? max : DM_DRIVE_DEFAULT;
	v->created_ms = v->updated_ms = dm_now_ms();
	img = drive_path(d, v->id, ".img");
	if (dm_drive_format(img, v->max, err) < 0 || record_write(d, v, err) < 0) {
		pthread_mutex_unlock(&dv->mu);
		unlink(img);
		drive_free(v);
		return al_error_wrap(err, "drive '%s'", name);
	}
	dv->v = xrealloc(dv->v, (dv->n + 1) * sizeof(*dv->v));
	dv->v[dv->n++] = v;
	*out = drive_json(d, v);
	pthread_mutex_unlock(&dv->mu);
	return 0;
}

int dm_drive_list(struct daemon *d, const char *team, json_t **out, struct al_error **err)
{
	struct dm_drives *dv = d->drives;

	(void)err;
	*out = json_array();
	pthread_mutex_lock(&dv->mu);
	for (size_t i = 0; i < dv->n; i++)
		if (strcmp(dv->v[i]->team, team) == 0)
			json_array_append_new(*out, drive_json(d, dv->v[i]));
	pthread_mutex_unlock(&dv->mu);
	return 0;
}

int dm_drive_delete(struct daemon *d, const char *team, const char *name, json_t **out,
		    struct al_error **err)
{
	struct dm_drives *dv = d->drives;
	struct dm_drive *v;
	bool any;
	const char *rw;
	_cleanup_free_ char *img = NULL, *rec = NULL;

	pthread_mutex_lock(&dv->mu);
	if (!(v = find(dv, team, name, err))) {
		pthread_mutex_unlock(&dv->mu);
		return -ENOENT;
	}
	rw = in_use(d, v, &any);
	if (any) {
		al_error_msg(err, EBUSY,
			     "drive '%s' is mounted by running sandbox %s: stop it first", name,
			     rw && rw[0] ? rw : v->use[0].sbx);
		pthread_mutex_unlock(&dv->mu);
		return -EBUSY;
	}
	if (out)
		*out = drive_json(d, v);
	for (size_t i = 0; i < dv->n; i++)
		if (dv->v[i] == v) {
			dv->v[i] = dv->v[--dv->n];
			break;
		}
	img = drive_path(d, v->id, ".img");
	rec = drive_path(d, v->id, ".json");
	unlink(rec);
	unlink(img);
	drive_free(v);
	pthread_mutex_unlock(&dv->mu);
	return 0;
}

/* drives->mu held: v's file system, mounted now if it was not. */
static int base_of(struct daemon *d, struct dm_drive *v, struct al_error **err)
{
	_cleanup_free_ char *img = NULL;

	if (v->base >= 0)
		return v->base;
	img = drive_path(d, v->id, ".img");
	v->base = dm_drive_base_mount(img, err);
	return v->base;
}

int dm_drive_attach(struct daemon *d, const char *team, const char *sbx, const char *name,
		    const char *path, bool ro, struct al_error **err)
{
	struct dm_drives *dv = d->drives;
	struct dm_drive *v;
	pid_t pid = 0;
	uid_t owner = 0;
	char wd[JAIL_SPEC_PATH_MAX] = "";
	bool any;
	const char *rw;
	int r = -1;

	{
		_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);
		struct dm_sbx *s = dm_find_sbx(d, team, sbx, err);

		if (!s)
			return -ENOENT;
		pid = s->pid;
		owner = s->host_base + 1000;
		snprintf(wd, sizeof(wd), "%s", s->workdir);
	}
	if (path[0] != '/' || files_writable(wd, path, err) < 0)
		return al_error_wrap(err, "mount path '%.200s' (it must lie in a writable area)",
				     path);
	pthread_mutex_lock(&dv->mu);
	if ((v = find(dv, team, name, err))) {
		rw = in_use(d, v, &any);
		if (!ro && rw && rw[0])
			al_error_msg(err, EBUSY,
				     "drive '%s' is mounted read-write by running sandbox %s (one "
				     "at a time; mode \"snapshot\" mounts it read-only)",
				     name, rw);
		else if (v->n_use >= DRIVE_ATTACH_MAX)
			al_error_msg(err, EBUSY, "drive '%s' is mounted by %d sandboxes", name,
				     DRIVE_ATTACH_MAX);
		else if (base_of(d, v, err) >= 0 &&
			 dm_drive_mount_into(v->base, pid, owner, path, ro, err) == 0) {
			snprintf(v->use[v->n_use].sbx, sizeof(v->use->sbx), "%s", sbx);
			v->use[v->n_use++].ro = ro;
			v->updated_ms = dm_now_ms();
			r = record_write(d, v, err);
		}
	}
	pthread_mutex_unlock(&dv->mu);
	return r < 0 ? al_error_wrap(err, "drive '%.64s'", name) : 0;
}
