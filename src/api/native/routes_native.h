/* SPDX-License-Identifier: MIT */
/* Handlers of the native API (/v1), shared between routes_native*.c. */
#ifndef AL_API_ROUTES_NATIVE_H
#define AL_API_ROUTES_NATIVE_H

#include "api/api_internal.h"
#include "daemon/daemon.h"

/* routes_native_cmd.c */
void api_cmd_run(struct api_req *r);
void api_cmd_list(struct api_req *r);
void api_cmd_get(struct api_req *r);
void api_cmd_wait(struct api_req *r);
void api_cmd_logs(struct api_req *r);
void api_cmd_stdin(struct api_req *r);
void api_cmd_kill(struct api_req *r);
void api_cmd_resize(struct api_req *r);
void api_sbx_pty(struct api_req *r);

/* routes_native_files.c */
void api_fs_write(struct api_req *r);
void api_fs_read(struct api_req *r);
void api_fs_mkdir(struct api_req *r);
void api_fs_list(struct api_req *r);

/* routes_native.c: a create's body (also a fork's) into c and its env; {sandbox} reply */
int api_parse_create(json_t *body, struct dm_create *c, char ***env, struct al_error **err);
void api_reply_sandbox(struct api_req *r, unsigned status, const char *id);

/* routes_native_snap.c: snapshots and fork */
void api_snap_create(struct api_req *r);
void api_snap_list(struct api_req *r);
void api_snap_get(struct api_req *r);
void api_snap_delete(struct api_req *r);
void api_sbx_fork(struct api_req *r);

/* A query argument that must be a path: valid UTF-8, not empty (def when absent). */
int api_query_path(struct api_req *r, const char *name, const char *def, const char **out,
		   struct al_error **err);

#endif
