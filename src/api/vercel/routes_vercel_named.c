/* SPDX-License-Identifier: MIT */
/*
 * Named and persistent sandboxes of the Vercel API (docs/snapshots.md, "Persistent
 * sandboxes"). A create with a `name` gets a record (the daemon keeps it, names.c):
 *   {session, sessions: [earlier], persistent, snapshot, snapshots: [kept],
 *    snapshotExpiration, keepLastSnapshots, create: {the body a new session is made of}}
 * The name then stands for its current session in /v2/sandboxes/{name} routes. A
 * persistent sandbox's stop (POST .../stop) snapshots it first; GET ?resume=true on a
 * stopped named sandbox starts a new session, from its current snapshot when persistent
 * (fresh otherwise), with the same create body (limits, env, policy, mounts).
 * An unnamed sandbox's name is its session id, as before; PATCH of persistent (or the
 * snapshot settings) gives it a record under that name.
 */
#include "api/vercel/routes_vercel.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define VC_KEEP_MAX 10

int vc_named_check(json_t *body, struct al_error **err)
{
	json_t *v = json_object_get(body, "name"), *k;

	if (v && !json_is_null(v) && (!json_is_string(v) || !dm_name_ok(json_string_value(v))))
		return api_bad(err,
			       "field 'name': 1 to %d letters, digits, '.', '_', '-', not "
			       "starting with '.' or '-'",
			       DM_NAME_MAX);
	v = json_object_get(body, "persistent");
	if (v && !json_is_boolean(v) && !json_is_null(v))
		return api_bad(err, "field 'persistent' must be a boolean");
	v = json_object_get(body, "snapshotExpiration");
	if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 0))
		return api_bad(err, "field 'snapshotExpiration' must be ms >= 0");
	k = json_object_get(body, "keepLastSnapshots");
	if (k && !json_is_null(k)) {
		json_t *c = json_object_get(k, "count");

		if (!json_is_object(k) || !json_is_integer(c) || json_integer_value(c) < 1 ||
		    json_integer_value(c) > VC_KEEP_MAX)
			return api_bad(err, "field 'keepLastSnapshots.count' must be 1 to %d",
				       VC_KEEP_MAX);
	}
	v = json_object_get(body, "currentSnapshotId");
	if (v && !json_is_null(v) && !json_is_string(v))
		return api_bad(err, "field 'currentSnapshotId' must be a snapshot id");
	return 0;
}

char *vc_session_for(struct api_req *r, const char *name, json_t **rec_out)
{
	json_t *rec = NULL;
	const char *s;
	char *sid;

	if (dm_name_get(r->api->d, r->team, name, &rec, NULL) < 0) {
		if (rec_out)
			*rec_out = NULL;
		return xstrdup(name);
	}
	s = json_string_value(json_object_get(rec, "session"));
	sid = xstrdup(s && s[0] ? s : name);
	if (rec_out)
		*rec_out = rec;
	else
		json_decref(rec);
	return sid;
}

void vc_named_view(struct api_req *r, const char *sid, json_t *sb)
{
	bool current = false;
	_cleanup_free_ char *name = dm_name_of_session(r->api->d, r->team, sid, &current);
	_cleanup_json_ json_t *rec = NULL;
	json_t *v;

	if (!name || dm_name_get(r->api->d, r->team, name, &rec, NULL) < 0)
		return;
	json_object_set_new(sb, "name", json_string(name));
	json_object_set(sb, "persistent", json_object_get(rec, "persistent") ?: json_false());
	v = json_object_get(rec, "snapshot");
	if (json_is_string(v) && json_string_length(v))
		json_object_set(sb, "currentSnapshotId", v);
	if (json_is_integer(v = json_object_get(rec, "snapshotExpiration")))
		json_object_set(sb, "snapshotExpiration", v);
	if (json_is_object(v = json_object_get(rec, "keepLastSnapshots")))
		json_object_set(sb, "keepLastSnapshots", v);
	v = json_object_get(json_object_get(rec, "create"), "mounts");
	if (json_is_object(v) && json_object_size(v))
		json_object_set(sb, "mounts", v);
}

bool vc_named_hidden(struct api_req *r, const char *sid, char **shown)
{
	bool current = false;
	char *name = dm_name_of_session(r->api->d, r->team, sid, &current);

	if (name && !current) {
		free(name);
		return true;
	}
	*shown = name;
	return false;
}

bool vc_named_has_session(struct api_req *r, const char *name, const char *sid)
{
	_cleanup_json_ json_t *rec = NULL;
	json_t *s;
	size_t i;

	if (strcmp(name, sid) == 0)
		return true;
	if (dm_name_get(r->api->d, r->team, name, &rec, NULL) < 0)
		return false;
	if (json_is_string(s = json_object_get(rec, "session")) &&
	    strcmp(json_string_value(s), sid) == 0)
		return true;
	json_array_foreach(json_object_get(rec, "sessions"), i,
			   s) if (strcmp(json_string_value(s) ?: "", sid) == 0) return true;
	return false;
}

/* The settings of the record that a body (create or PATCH) carries. */
static void settings_in(json_t *rec, json_t *body)
{
	static const char *const keys[] = {"persistent", "snapshotExpiration", "keepLastSnapshots"};

	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		json_t *v = json_object_get(body, keys[i]);

		if (v && !json_is_null(v))
			json_object_set(rec, keys[i], v);
	}
}

/* A new record for body's sandbox, its session sid ("" until bound). */
static json_t *record_new(json_t *body, const char *sid)
{
	json_t *rec, *create = json_deep_copy(body);

	json_object_del(create, "name");
	json_object_del(create, "source"); /* a later session restores its own snapshot */
	rec = json_pack("{s:s,s:[],s:b,s:s,s:[],s:o}", "session", sid, "sessions", "persistent", 0,
			"snapshot", "", "snapshots", "create", create);
	settings_in(rec, body);
	return rec;
}

int vc_named_reserve(struct api_req *r, json_t *body, struct al_error **err)
{
	const char *name = json_string_value(json_object_get(body, "name"));
	json_t *rec;
	int ret;

	if (!name)
		return 0;
	rec = record_new(body, "");
	ret = dm_name_create(r->api->d, r->team, name, rec, err);
	json_decref(rec);
	return ret;
}

int vc_named_bind(struct api_req *r, json_t *body, const char *sid, bool ok, struct al_error **err)
{
	const char *name = json_string_value(json_object_get(body, "name"));
	_cleanup_json_ json_t *rec = NULL;

	if (!name && ok &&
	    (json_is_true(json_object_get(body, "persistent")) ||
	     json_object_get(body, "keepLastSnapshots") ||
	     json_object_get(body, "snapshotExpiration"))) {
		/* persistent but unnamed: named by its first session's id */
		int ret;

		rec = record_new(body, sid);
		ret = dm_name_create(r->api->d, r->team, sid, rec, err);
		return ret;
	}
	if (!name)
		return 0;
	if (!ok)
		return dm_name_delete(r->api->d, r->team, name, NULL); /* the create failed */
	if (dm_name_get(r->api->d, r->team, name, &rec, err) < 0)
		return -1;
	json_object_set_new(rec, "session", json_string(sid));
	return dm_name_set(r->api->d, r->team, name, rec, err);
}

uint64_t vc_named_expiration(struct api_req *r, const char *sid)
{
	uint64_t exp = 0;

	dm_name_persistent(r->api->d, r->team, sid, &exp);
	return exp;
}

int vc_named_snapshotted(struct api_req *r, const char *sid, const char *snap,
			 struct al_error **err)
{
	return dm_name_snapshotted(r->api->d, r->team, sid, snap, err);
}

int vc_named_before_stop(struct api_req *r, const char *sid, json_t **snap, struct al_error **err)
{
	_cleanup_json_ json_t *view = NULL;

	*snap = NULL;
	if (!dm_name_persistent(r->api->d, r->team, sid, NULL))
		return 0;
	if (dm_sandbox_get(r->api->d, r->team, sid, &view, NULL) < 0 ||
	    strcmp(json_string_value(json_object_get(view, "status")) ?: "", "running") != 0)
		return 0; /* stopping a stopped sandbox: nothing to keep */
	if (dm_snapshot_create(r->api->d, r->team, sid, vc_named_expiration(r, sid), snap, err) < 0)
		return al_error_wrap(err, "the persistent sandbox's snapshot at stop");
	return vc_named_snapshotted(r, sid, json_string_value(json_object_get(*snap, "id")), err);
}

/* A new session for a named sandbox: from its current snapshot when persistent. */
int vc_named_resume(struct api_req *r, const char *name, json_t *rec, char **sid,
		    struct al_error **err)
{
	_cleanup_json_ json_t *policy = NULL;
	json_t *create = json_object_get(rec, "create");
	const char *snap = json_string_value(json_object_get(rec, "snapshot"));
	struct dm_create c = {0};
	uint16_t ports[DM_PORTS_MAX];
	char **env = NULL;
	int ret;

	ret = vc_parse_create(create, &c, &env, &policy, ports, err);
	if (ret == 0 && json_is_true(json_object_get(rec, "persistent")) && snap && snap[0])
		ret = dm_sandbox_create_from(r->api->d, r->team, &c, snap, sid, err);
	else if (ret == 0)
		ret = dm_sandbox_create(r->api->d, r->team, &c, sid, err);
	api_strv_free(env, c.n_env);
	if (ret == 0 && vc_mounts_apply(r, *sid, json_object_get(create, "mounts"), err) < 0)
		ret = -1;
	if (ret == 0) {
		json_t *old = json_object_get(rec, "session");

		if (json_is_string(old) && json_string_length(old))
			json_array_append(json_object_get(rec, "sessions"), old);
		json_object_set_new(rec, "session", json_string(*sid));
		ret = dm_name_set(r->api->d, r->team, name, rec, err);
	}
	if (ret < 0 && *sid) {
		dm_sandbox_stop(r->api->d, r->team, *sid, NULL);
		free(*sid);
		*sid = NULL;
	}
	return ret < 0 ? al_error_wrap(err, "resuming '%s'", name) : 0;
}

int vc_named_update(struct api_req *r, const char *name, const char *sid, json_t *body,
		    struct al_error **err)
{
	_cleanup_json_ json_t *rec = NULL, *snap = NULL;
	json_t *cur = json_object_get(body, "currentSnapshotId");

	if (!json_object_get(body, "persistent") && !json_object_get(body, "snapshotExpiration") &&
	    !json_object_get(body, "keepLastSnapshots") && !cur)
		return 0;
	if (json_is_string(cur) &&
	    dm_snapshot_get(r->api->d, r->team, json_string_value(cur), &snap, err) < 0)
		return -1;
	if (dm_name_get(r->api->d, r->team, name, &rec, NULL) < 0) {
		/* an unnamed sandbox: a record under its id, its create body a default one */
		rec = json_pack("{s:s,s:[],s:b,s:s,s:[],s:{}}", "session", sid, "sessions",
				"persistent", 0, "snapshot", "", "snapshots", "create");
		if (dm_name_create(r->api->d, r->team, name, rec, err) < 0)
			return -1;
	}
	settings_in(rec, body);
	if (json_is_string(cur))
		json_object_set(rec, "snapshot", cur);
	return dm_name_set(r->api->d, r->team, name, rec, err);
}

void vc_named_forget(struct api_req *r, const char *name, bool delete_snapshots)
{
	_cleanup_json_ json_t *rec = NULL;
	json_t *s;
	size_t i;

	if (dm_name_get(r->api->d, r->team, name, &rec, NULL) < 0)
		return;
	json_array_foreach(json_object_get(rec, "sessions"), i, s)
	    dm_sandbox_stop(r->api->d, r->team, json_string_value(s), NULL);
	if (delete_snapshots)
		json_array_foreach(json_object_get(rec, "snapshots"), i, s)
		    dm_snapshot_delete(r->api->d, r->team, json_string_value(s), NULL, NULL);
	dm_name_delete(r->api->d, r->team, name, NULL);
}
