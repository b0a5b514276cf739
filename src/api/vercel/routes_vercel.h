/* SPDX-License-Identifier: MIT */
/*
 * The Vercel-compatible API (what the @vercel/sandbox 3.5.0 SDK expects; the
 * contract: tests/sdk/ drives these routes with the real SDK), shared between routes_vercel*.c.
 *
 * Mapping (ephemeral): one airlock sandbox = one Vercel sandbox with exactly
 * one session. The sandbox's name, its session id and currentSessionId are all
 * the airlock sandbox id; persistent is false, region "iad1", times are epoch
 * ms and durations ms. Sandboxes made here have the workdir /vercel/sandbox.
 */
#ifndef AL_API_ROUTES_VERCEL_H
#define AL_API_ROUTES_VERCEL_H

#include "api/api_internal.h"
#include "daemon/daemon.h"

#define VC_WORKDIR "/vercel/sandbox"
#define VC_REGION "iad1"

extern const struct api_route api_vercel_routes[];
extern const size_t api_vercel_routes_n;

/* routes_vercel.c: errors and views */

/*
 * Replies {"error": {code, message}} for err. ESRCH (the sandbox is stopped)
 * is 410 "sandbox_stopped". A POST never gets a 5xx (the SDK retries those,
 * and a POST may already have done something): 422 instead.
 */
void vc_reply_error(struct api_req *r, const struct al_error *err);
void vc_reply_error_code(struct api_req *r, unsigned status, const char *code, const char *msg);
/* The daemon's sandbox view (dm_sandbox_get) -> Vercel Session / Sandbox (new references). */
json_t *vc_session_of(json_t *view);
json_t *vc_sandbox_of(json_t *view);
/* The daemon's command view (dm_cmd_get) -> Vercel Command; exitCode null while running. */
json_t *vc_command_of(json_t *view);
/* path joined to base when path is relative (heap); a copy of path when absolute. */
char *vc_join(const char *base, const char *path);
/* The workdir of a sandbox of the caller's team (heap), or NULL with err. */
char *vc_workdir(struct api_req *r, const char *id, struct al_error **err);

/* A create's body (a fork's too) into c, its env and policy; its declared ports go into
 * ports (c->ports points there). */
int vc_parse_create(json_t *body, struct dm_create *c, char ***env, json_t **policy,
		    uint16_t ports[DM_PORTS_MAX], struct al_error **err);
/* The snapshot id of a create's source {type: "snapshot", snapshotId}, or NULL. */
const char *vc_source_snapshot(json_t *body);
/* Replies with the sandbox's views: keys "sandbox", "session", "routes" as asked; extra
 * (taken, may be NULL) is merged in. */
void vc_reply_view(struct api_req *r, const char *id, bool sandbox, bool session, bool routes,
		   json_t *extra);

/* routes_vercel_named.c: named and persistent sandboxes */
int vc_named_check(json_t *body, struct al_error **err);
/* The session a sandbox name stands for (heap): its record's current one, or the name
 * itself (an unnamed sandbox's name is its id); *rec (unless NULL) the record or NULL. */
char *vc_session_for(struct api_req *r, const char *name, json_t **rec);
/* Adds the name's settings (name, persistent, currentSnapshotId, ...) to a Sandbox view. */
void vc_named_view(struct api_req *r, const char *sid, json_t *sandbox);
/* An earlier session of a named sandbox (not listed as a sandbox); else *shown is the
 * name to list it under (heap) or NULL (its id). */
bool vc_named_hidden(struct api_req *r, const char *sid, char **shown);
/* Is sid a session (current or earlier) of name? */
bool vc_named_has_session(struct api_req *r, const char *name, const char *sid);
/* A create with a name: the record first (EEXIST), then vc_named_bind the session (ok)
 * or drop the record (!ok). */
int vc_named_reserve(struct api_req *r, json_t *body, struct al_error **err);
int vc_named_bind(struct api_req *r, json_t *body, const char *sid, bool ok, struct al_error **err);
/* A snapshot's expiration for session sid (0: its name sets none) and what it records. */
uint64_t vc_named_expiration(struct api_req *r, const char *sid);
int vc_named_snapshotted(struct api_req *r, const char *sid, const char *snap,
			 struct al_error **err);
/* A persistent name's running current session is snapshotted before its stop (*snap: the
 * snapshot's view, or NULL when none was taken). */
int vc_named_before_stop(struct api_req *r, const char *sid, json_t **snap, struct al_error **err);
int vc_named_resume(struct api_req *r, const char *name, json_t *rec, char **sid,
		    struct al_error **err);
/* PATCH: persistent, snapshotExpiration, keepLastSnapshots, currentSnapshotId. */
int vc_named_update(struct api_req *r, const char *name, const char *sid, json_t *body,
		    struct al_error **err);
/* DELETE: the name's earlier sessions stopped, its record gone (and its snapshots). */
void vc_named_forget(struct api_req *r, const char *name, bool delete_snapshots);

/* routes_vercel_policy.c */

/* A request policy (mode form, allow/subnets form) -> the native policy (new reference). */
int vc_policy_in(json_t *p, json_t **out, struct al_error **err);
/* A native policy -> the response form {mode: ...} (new reference). */
json_t *vc_policy_out(json_t *native);

/* routes_vercel_cmd.c */
void vc_cmd_run(struct api_req *r);
void vc_cmd_get(struct api_req *r);
void vc_cmd_logs(struct api_req *r);
void vc_cmd_kill(struct api_req *r);

/* routes_vercel_files.c */
void vc_fs_write(struct api_req *r);
void vc_fs_read(struct api_req *r);
void vc_fs_mkdir(struct api_req *r);

/* routes_vercel_snap.c: snapshots and fork */
void vc_snap_create(struct api_req *r);
void vc_snap_list(struct api_req *r);
void vc_snap_tree(struct api_req *r);
void vc_snap_get(struct api_req *r);
void vc_snap_delete(struct api_req *r);
void vc_fork(struct api_req *r);
/* The daemon's snapshot view -> Vercel's Snapshot (a new reference). */
json_t *vc_snap_of(json_t *view);

/* routes_vercel_drive.c: drives and a create's mounts */
void vc_drive_list(struct api_req *r);
void vc_drive_put(struct api_req *r);
void vc_drive_delete(struct api_req *r);
/* {"/path": {drive, mode?}}: absolute, not overlapping, known modes (NULL passes). */
int vc_mounts_check(json_t *mounts, struct al_error **err);
/* Mounts each into sandbox id (after its create). */
int vc_mounts_apply(struct api_req *r, const char *id, json_t *mounts, struct al_error **err);

#endif
