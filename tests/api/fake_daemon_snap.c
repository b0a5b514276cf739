/* SPDX-License-Identifier: MIT */
/* Included by fake_daemon.c: snapshots and fork are not modelled (the real daemon's are
 * tested in tests/integration/daemon and tests/sdk): no snapshot exists for anyone. */

static int fk_no_snapshot(const char *id, struct al_error **err)
{
	return al_error_msg(err, ENOENT, "no snapshot '%s' (the fake daemon keeps none)", id);
}

int dm_snapshot_create(struct daemon *d, const char *team, const char *sbx, uint64_t expire_ms,
		       json_t **out, struct al_error **err)
{
	return al_error_msg(err, ENOENT, "sandbox '%s': the fake daemon takes no snapshots", sbx);
}

int dm_snapshot_get(struct daemon *d, const char *team, const char *id, json_t **out,
		    struct al_error **err)
{
	return fk_no_snapshot(id, err);
}

int dm_snapshot_list(struct daemon *d, const char *team, const char *sbx, json_t **out_array,
		     struct al_error **err)
{
	*out_array = json_array();
	return 0;
}

int dm_snapshot_delete(struct daemon *d, const char *team, const char *id, json_t **out,
		       struct al_error **err)
{
	return fk_no_snapshot(id, err);
}

int dm_sandbox_create_from(struct daemon *d, const char *team, const struct dm_create *c,
			   const char *snap, char **out_id, struct al_error **err)
{
	return fk_no_snapshot(snap, err);
}

int dm_sandbox_fork(struct daemon *d, const char *team, const char *from, const struct dm_create *c,
		    char **out_id, struct al_error **err)
{
	return al_error_msg(err, ENOENT, "sandbox '%s': the fake daemon does not fork", from);
}

int dm_drive_get_or_create(struct daemon *d, const char *team, const char *name,
			   const char *project, uint64_t max, json_t **out, struct al_error **err)
{
	return al_error_msg(err, ENOENT, "drive '%s': the fake daemon keeps no drives", name);
}

int dm_drive_list(struct daemon *d, const char *team, json_t **out_array, struct al_error **err)
{
	*out_array = json_array();
	return 0;
}

int dm_drive_delete(struct daemon *d, const char *team, const char *name, json_t **out,
		    struct al_error **err)
{
	return al_error_msg(err, ENOENT, "no drive '%s'", name);
}

int dm_drive_attach(struct daemon *d, const char *team, const char *sbx, const char *name,
		    const char *path, bool ro, struct al_error **err)
{
	return al_error_msg(err, ENOENT, "no drive '%s'", name);
}

bool dm_name_ok(const char *name)
{
	return name[0] != '\0';
}

int dm_name_create(struct daemon *d, const char *team, const char *name, json_t *rec,
		   struct al_error **err)
{
	return al_error_msg(err, EINVAL, "the fake daemon keeps no names");
}

int dm_name_get(struct daemon *d, const char *team, const char *name, json_t **out,
		struct al_error **err)
{
	return al_error_msg(err, ENOENT, "no sandbox named '%s'", name);
}

int dm_name_set(struct daemon *d, const char *team, const char *name, json_t *rec,
		struct al_error **err)
{
	return al_error_msg(err, ENOENT, "no sandbox named '%s'", name);
}

int dm_name_delete(struct daemon *d, const char *team, const char *name, struct al_error **err)
{
	return al_error_msg(err, ENOENT, "no sandbox named '%s'", name);
}

char *dm_name_of_session(struct daemon *d, const char *team, const char *sbx, bool *current)
{
	return NULL;
}

bool dm_name_persistent(struct daemon *d, const char *team, const char *sbx, uint64_t *exp)
{
	if (exp)
		*exp = 0;
	return false;
}

int dm_name_snapshotted(struct daemon *d, const char *team, const char *sbx, const char *snap,
			struct al_error **err)
{
	return 0;
}
