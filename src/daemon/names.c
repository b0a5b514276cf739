/* SPDX-License-Identifier: MIT */
/*
 * Names of sandboxes that outlive their sessions (the Vercel API's named and persistent
 * sandboxes, docs/snapshots.md "Persistent sandboxes"): a record per (team, name), a JSON
 * object that the API layer defines (its current session, its snapshots, its settings),
 * kept in memory and in STATE/names/<hex team>-<name>.json (written to a temporary file,
 * synced, renamed). The daemon only stores them; what they mean is the API's.
 */
#include "daemon/internal.h"
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

struct dm_name {
	char *team, *name;
	json_t *rec;
};

struct dm_names {
	pthread_mutex_t mu;
	char *dir;
	struct dm_name *v;
	size_t n;
};

bool dm_name_ok(const char *n)
{
	size_t len = strlen(n);

	return len >= 1 && len <= DM_NAME_MAX &&
	       strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
		   len &&
	       n[0] != '.' && n[0] != '-';
}

static char *file_of(struct dm_names *nm, const char *team, const char *name, const char *ext)
{
	size_t n = strlen(team);
	_cleanup_free_ char *hex = xzalloc(2 * n + 1);

	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)team[i]);
	return xasprintf("%s/%s-%s%s", nm->dir, hex, name, ext);
}

static int save(struct dm_names *nm, const struct dm_name *e, struct al_error **err)
{
	_cleanup_free_ char *path = file_of(nm, e->team, e->name, ".json");
	_cleanup_free_ char *tmp = file_of(nm, e->team, e->name, ".json.tmp");
	json_t *o = json_pack("{s:s,s:s,s:O}", "team", e->team, "name", e->name, "record", e->rec);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int r = fd < 0 ? -1 : json_dumpfd(o, fd, JSON_COMPACT);

	json_decref(o);
	if (r < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
		int e2 = errno ? errno : EIO;

		unlink(tmp);
		return al_error_set(err, e2, "write '%s'", path);
	}
	return 0;
}

int dm_names_open(struct daemon *d, struct al_error **err)
{
	struct dm_names *nm = xzalloc(sizeof(*nm));
	DIR *dir;
	struct dirent *de;

	pthread_mutex_init(&nm->mu, NULL);
	nm->dir = xasprintf("%s/names", d->state_dir);
	d->names = nm;
	if (mkdir(nm->dir, 0700) < 0 && errno != EEXIST)
		return al_error_set(err, errno, "mkdir '%s'", nm->dir);
	if (!(dir = opendir(nm->dir)))
		return al_error_set(err, errno, "open '%s'", nm->dir);
	while ((de = readdir(dir))) {
		size_t len = strlen(de->d_name);
		_cleanup_free_ char *p = NULL;
		json_t *o, *rec;
		const char *team, *name;

		if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		p = xasprintf("%s/%s", nm->dir, de->d_name);
		o = json_load_file(p, 0, NULL);
		team = json_string_value(json_object_get(o, "team"));
		name = json_string_value(json_object_get(o, "name"));
		rec = json_object_get(o, "record");
		if (!team || !name || !dm_name_ok(name) || !json_is_object(rec)) {
			dm_log(d, "name record '%s' unreadable: left as it is", p);
		} else {
			nm->v = xrealloc(nm->v, (nm->n + 1) * sizeof(*nm->v));
			nm->v[nm->n++] =
			    (struct dm_name){xstrdup(team), xstrdup(name), json_incref(rec)};
		}
		json_decref(o);
	}
	closedir(dir);
	return 0;
}

void dm_names_close(struct daemon *d)
{
	struct dm_names *nm = d->names;

	if (!nm)
		return;
	for (size_t i = 0; i < nm->n; i++) {
		free(nm->v[i].team);
		free(nm->v[i].name);
		json_decref(nm->v[i].rec);
	}
	free(nm->v);
	free(nm->dir);
	pthread_mutex_destroy(&nm->mu);
	free(nm);
	d->names = NULL;
}

static struct dm_name *find(struct dm_names *nm, const char *team, const char *name)
{
	for (size_t i = 0; i < nm->n; i++)
		if (strcmp(nm->v[i].name, name) == 0 && strcmp(nm->v[i].team, team) == 0)
			return &nm->v[i];
	return NULL;
}

int dm_name_create(struct daemon *d, const char *team, const char *name, json_t *rec,
		   struct al_error **err)
{
	struct dm_names *nm = d->names;
	int r = 0;

	if (!dm_name_ok(name))
		return al_error_msg(err, EINVAL,
				    "name '%.80s': 1 to %d letters, digits, '.', '_', '-', not "
				    "starting with '.' or '-'",
				    name, DM_NAME_MAX);
	pthread_mutex_lock(&nm->mu);
	if (find(nm, team, name)) {
		r = al_error_msg(err, EEXIST, "a sandbox named '%s' exists", name);
	} else {
		nm->v = xrealloc(nm->v, (nm->n + 1) * sizeof(*nm->v));
		nm->v[nm->n] = (struct dm_name){xstrdup(team), xstrdup(name), json_deep_copy(rec)};
		if ((r = save(nm, &nm->v[nm->n], err)) == 0)
			nm->n++;
		else {
			free(nm->v[nm->n].team);
			free(nm->v[nm->n].name);
			json_decref(nm->v[nm->n].rec);
		}
	}
	pthread_mutex_unlock(&nm->mu);
	return r;
}

int dm_name_get(struct daemon *d, const char *team, const char *name, json_t **out,
		struct al_error **err)
{
	struct dm_names *nm = d->names;
	struct dm_name *e;

	pthread_mutex_lock(&nm->mu);
	e = find(nm, team, name);
	if (e)
		*out = json_deep_copy(e->rec);
	pthread_mutex_unlock(&nm->mu);
	return e ? 0 : al_error_msg(err, ENOENT, "no sandbox named '%.64s'", name);
}

int dm_name_set(struct daemon *d, const char *team, const char *name, json_t *rec,
		struct al_error **err)
{
	struct dm_names *nm = d->names;
	struct dm_name *e;
	int r;

	pthread_mutex_lock(&nm->mu);
	e = find(nm, team, name);
	if (!e) {
		r = al_error_msg(err, ENOENT, "no sandbox named '%.64s'", name);
	} else {
		json_decref(e->rec);
		e->rec = json_deep_copy(rec);
		r = save(nm, e, err);
	}
	pthread_mutex_unlock(&nm->mu);
	return r;
}

int dm_name_delete(struct daemon *d, const char *team, const char *name, struct al_error **err)
{
	struct dm_names *nm = d->names;
	struct dm_name *e;
	_cleanup_free_ char *path = NULL;

	pthread_mutex_lock(&nm->mu);
	e = find(nm, team, name);
	if (e) {
		path = file_of(nm, team, name, ".json");
		unlink(path);
		free(e->team);
		free(e->name);
		json_decref(e->rec);
		*e = nm->v[--nm->n];
	}
	pthread_mutex_unlock(&nm->mu);
	return e ? 0 : al_error_msg(err, ENOENT, "no sandbox named '%.64s'", name);
}

char *dm_name_of_session(struct daemon *d, const char *team, const char *sbx, bool *current)
{
	struct dm_names *nm = d->names;
	char *out = NULL;

	pthread_mutex_lock(&nm->mu);
	for (size_t i = 0; i < nm->n && !out; i++) {
		json_t *rec = nm->v[i].rec, *s;
		const char *cur = json_string_value(json_object_get(rec, "session"));
		size_t k;

		if (strcmp(nm->v[i].team, team) != 0)
			continue;
		if (cur && strcmp(cur, sbx) == 0) {
			out = xstrdup(nm->v[i].name);
			*current = true;
			break;
		}
		json_array_foreach(json_object_get(rec, "sessions"), k, s)
		{
			if (json_is_string(s) && strcmp(json_string_value(s), sbx) == 0) {
				out = xstrdup(nm->v[i].name);
				*current = false;
				break;
			}
		}
	}
	pthread_mutex_unlock(&nm->mu);
	return out;
}

/* nm->mu held: the entry whose record has session sbx as its current one, or NULL. */
static struct dm_name *by_current(struct dm_names *nm, const char *team, const char *sbx)
{
	for (size_t i = 0; i < nm->n; i++) {
		const char *cur = json_string_value(json_object_get(nm->v[i].rec, "session"));

		if (cur && strcmp(cur, sbx) == 0 && strcmp(nm->v[i].team, team) == 0)
			return &nm->v[i];
	}
	return NULL;
}

static uint64_t expiration_of(json_t *rec)
{
	json_t *v = json_object_get(json_object_get(rec, "keepLastSnapshots"), "expiration");

	if (!json_is_integer(v))
		v = json_object_get(rec, "snapshotExpiration");
	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v)
							       : 0;
}

bool dm_name_persistent(struct daemon *d, const char *team, const char *sbx, uint64_t *exp)
{
	struct dm_names *nm = d->names;
	struct dm_name *e;
	bool yes;

	pthread_mutex_lock(&nm->mu);
	e = by_current(nm, team, sbx);
	yes = e && json_is_true(json_object_get(e->rec, "persistent"));
	if (exp)
		*exp = e ? expiration_of(e->rec) : 0;
	pthread_mutex_unlock(&nm->mu);
	return yes;
}

int dm_name_snapshotted(struct daemon *d, const char *team, const char *sbx, const char *snap,
			struct al_error **err)
{
	struct dm_names *nm = d->names;
	struct dm_name *e;
	json_t *snaps, *keep;
	json_int_t count;
	char **evict = NULL;
	size_t n_evict = 0;
	int r = 0;

	pthread_mutex_lock(&nm->mu);
	if ((e = by_current(nm, team, sbx))) {
		json_object_set_new(e->rec, "snapshot", json_string(snap));
		if (!json_is_array(snaps = json_object_get(e->rec, "snapshots")))
			json_object_set_new(e->rec, "snapshots", snaps = json_array());
		json_array_append_new(snaps, json_string(snap));
		/* keepLastSnapshots: the newest count stay; the others are deleted unless
		 * deleteEvicted is false (then they keep their own expiration) */
		keep = json_object_get(e->rec, "keepLastSnapshots");
		count = json_integer_value(json_object_get(keep, "count"));
		while (count > 0 && (json_int_t)json_array_size(snaps) > count) {
			if (!json_is_false(json_object_get(keep, "deleteEvicted"))) {
				evict = xrealloc(evict, (n_evict + 1) * sizeof(*evict));
				evict[n_evict++] =
				    xstrdup(json_string_value(json_array_get(snaps, 0)) ?: "");
			}
			json_array_remove(snaps, 0);
		}
		r = save(nm, e, err);
	}
	pthread_mutex_unlock(&nm->mu);
	for (size_t i = 0; i < n_evict; i++) {
		dm_snapshot_delete(d, team, evict[i], NULL, NULL);
		free(evict[i]);
	}
	free(evict);
	return r;
}
