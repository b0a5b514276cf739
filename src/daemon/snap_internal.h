/* SPDX-License-Identifier: MIT */
/* What snapshots.c (the store) shares with snap_capture.c (capture, restore, fork). */
#ifndef AL_DAEMON_SNAP_INTERNAL_H
#define AL_DAEMON_SNAP_INTERNAL_H

#include "daemon/internal.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

static inline void dm_json_decrefp(json_t **j)
{
	json_decref(*j);
}
#define _cleanup_dm_json_ __attribute__((cleanup(dm_json_decrefp)))
#define _snap_cleanup_(f) __attribute__((cleanup(f)))

#define DM_SNAP_ORIGINS_MAX 4096 /* sandboxes whose source snapshot is remembered */

struct dm_snap_area {
	char *path; /* the sandbox path of the area: /workspace, /tmp, ... */
	uint64_t off, len, entries;
};

struct dm_snap {
	char id[DM_ID_LEN + 1];
	char *team;
	char src[DM_ID_LEN + 1];	/* the sandbox it was taken of */
	char parent[DM_ID_LEN + 1];	/* the snapshot that sandbox was made from, or "" */
	int64_t created_ms, expires_ms; /* expires_ms 0: never */
	uint64_t size;
	char sha[65]; /* SHA-256 of the .tar, hex */
	char *workdir;
	uint64_t disk_bytes; /* the source sandbox's disk: what a restore needs at least */
	struct dm_snap_area *areas;
	size_t n_areas;
};

struct dm_snaps {
	pthread_mutex_t mu;
	char *dir; /* STATE/snapshots */
	struct dm_snap **v;
	size_t n;
	uint64_t total, cap; /* bytes of all snapshots; the most they may hold */
	uint64_t reserved;   /* bytes of captures under way (counted against cap) */
	struct {
		char sbx[DM_ID_LEN + 1], snap[DM_ID_LEN + 1];
	} * origin; /* what sandboxes were made from, oldest first */
	size_t n_origin;
};

void dm_snap_free(struct dm_snap *s);
/* snaps->mu held: s joins the list (its size counts against the cap). */
void dm_snap_add(struct dm_snaps *ss, struct dm_snap *s);
char *dm_snap_path(struct daemon *d, const char *id, const char *ext);
int dm_snap_record_write(struct daemon *d, const struct dm_snap *s, struct al_error **err);
struct dm_snap *dm_snap_find(struct dm_snaps *ss, const char *team, const char *id,
			     struct al_error **err);
void dm_snap_origin_set(struct daemon *d, const char *sbx, const char *snap);
const char *dm_snap_origin(struct dm_snaps *ss, const char *sbx);
json_t *dm_snap_json(const struct dm_snap *s);

#endif
