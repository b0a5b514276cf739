/* SPDX-License-Identifier: MIT */
/*
 * The E2B-compatible front end (docs/e2b.md): the control plane (routes_e2b.c), envd over
 * Connect-RPC (envd.c: routing, auth, unary and streamed answers; envd_process.c,
 * envd_fs.c, envd_files.c) on the one port of the API. Shared by the files of
 * src/api/e2b/ only; the server sees e2b_open/e2b_close/e2b_envd_begin (api_internal.h).
 *
 * What E2B keeps about a sandbox that the daemon does not (its template name, metadata,
 * envd access token, the pids it handed out for commands) lives here, in memory, for the
 * life of the daemon process: a sandbox made by another front end, or before a restart,
 * answers envd calls with unauthenticated.
 */
#ifndef AL_API_E2B_H
#define AL_API_E2B_H

#include "api/api_internal.h"
#include "api/e2b/connect.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

/*
 * The envd version we report. The SDK turns features on by comparing it with its gates:
 * 0.1.4 recursive watch, 0.1.5 metrics, 0.3.0 stdin:false, 0.4.0 default user, 0.5.2
 * closeStdin, 0.5.7 octet-stream upload, 0.6.2 file metadata, 0.6.3/0.6.4 watch options.
 * It is the highest version all of whose gated features below it are served in full
 * (docs/e2b.md, "envdVersion"): see there for why it is not higher.
 */
#define E2B_ENVD_VERSION "0.5.7"
#define E2B_ENVD_PORT 49983
#define E2B_JUPYTER_PORT 49999
#define E2B_DEFAULT_TIMEOUT_S 300
#define E2B_MAX_TIMEOUT_S (24 * 3600)
#define E2B_TOKEN_HEX 64
#define E2B_MAX_PROCS 4096 /* pids one sandbox's table keeps (finished ones go first) */

struct e2b_proc {
	uint32_t pid;
	char *cmd_id;	/* the daemon's command */
	char *tag;	/* or NULL */
	json_t *config; /* ProcessConfig as started {cmd, args, envs, cwd} */
	char *pty_file; /* a PTY's: the file naming its terminal (envd_pty.c), or NULL */
	bool root;
};

/* A code interpreter context: a kernel (started at its first execution) and how many
 * bytes of its output earlier executions consumed. */
struct e2b_ctx {
	char *id, *language, *cwd;
	char *cmd_id; /* the kernel's command, or NULL */
	uint64_t consumed;
	bool busy; /* an execution runs */
};
#define E2B_MAX_CTXS 16

/* An E2B sandbox's life: a pause snapshots its files and stops its daemon sandbox; a
 * connect (resume) makes a new daemon sandbox of them under the same E2B id. */
enum e2b_state { E2B_RUNNING, E2B_PAUSING, E2B_PAUSED, E2B_RESUMING };

struct e2b_sbx {
	char *id, *team, *template_id; /* id: the E2B id (its first daemon sandbox's) */
	char *dm_id;		       /* the daemon's sandbox now, when a resume made another */
	enum e2b_state state;
	char *pause_snap;   /* paused: the snapshot it resumes from */
	json_t *pause_view; /* paused: the daemon's last view of it */
	json_t *env_vars;   /* the create's envVars, for a resume */
	char token[E2B_TOKEN_HEX + 1];
	json_t *metadata; /* {string: string} */
	json_t *network;  /* what the create or the last update asked for, as E2B spells it */
	int internet;	  /* allow_internet_access: -1 unset, 0, 1 */
	int64_t started_ms;
	uint32_t next_pid;
	struct e2b_proc *procs;
	size_t n_procs;
	uint64_t next_ctx;
	struct e2b_ctx *ctxs;
	size_t n_ctxs;
};

struct e2b {
	pthread_mutex_t mu;
	struct e2b_sbx **v;
	size_t n;
	char *domain;		       /* the base domain of <port>-<id>.<domain> hosts, or NULL */
	struct e2b_watcher **watchers; /* CreateWatcher's (envd_watch.c) */
	size_t n_watchers;
	uint64_t next_watcher;
};

void e2b_watchers_close(struct e2b *e);

/* network.allowPublicTraffic: false: the sandbox's ports (getHost) need its
 * trafficAccessToken (the envd token) in e2b-traffic-access-token. */
static inline bool e2b_traffic_private(const struct e2b_sbx *s)
{
	return json_is_false(json_object_get(s->network, "allowPublicTraffic"));
}

/* --- the table (routes_e2b.c) -------------------------------------------------------- */

/* The daemon's id of the sandbox s is now. */
static inline const char *e2b_dm(const struct e2b_sbx *s)
{
	return s->dm_id ? s->dm_id : s->id;
}

/* e->mu held: the entry of a sandbox of team (NULL team: any), or NULL; id is its E2B id
 * or the daemon's id of it now. */
struct e2b_sbx *e2b_find(struct e2b *e, const char *team, const char *id);
/* e->mu held: adds s (taken), after dropping the entries of ended sandboxes. */
struct daemon;
void e2b_add(struct e2b *e, struct daemon *d, struct e2b_sbx *s);
void e2b_sbx_free(struct e2b_sbx *s);
/* Drops s's command pids and interpreter contexts (its processes ended). */
void e2b_sbx_clear(struct e2b_sbx *s);
/* The daemon's id of the team's E2B sandbox id (heap): id itself when the table does not
 * know it (the daemon answers then); NULL after a 409 while it is paused. */
char *e2b_dm_id(struct api_req *r, const char *id);
/* A create's body parsed into c (env in *env, the policy in c->network_policy) and s. */
struct dm_create;
int e2b_create_parse(json_t *body, struct dm_create *c, char ***env, size_t *n_env,
		     struct e2b_sbx *s, struct al_error **err);
/* A fresh envd access token. */
void e2b_token(char out[E2B_TOKEN_HEX + 1]);
/* The create / connect answer of s (e->mu held). */
json_t *e2b_created(struct api *a, const struct e2b_sbx *s);
/* {code: status, message}. */
void e2b_reply_code(struct api_req *r, unsigned status, const char *msg);
/* A templateID that is a snapshot's id (the daemon's "snp_" ids). */
static inline bool e2b_is_snapshot(const char *tmpl)
{
	return tmpl && strncmp(tmpl, "snp_", 4) == 0;
}

/* --- fork and snapshots (routes_e2b_snap.c) ------------------------------------------ */

void e2b_fork(struct api_req *r);
void e2b_snap_create(struct api_req *r);
void e2b_snap_list(struct api_req *r);
void e2b_snap_delete(struct api_req *r);

/* --- pause and resume (routes_e2b_pause.c) ---------------------------------------------- */

void e2b_pause(struct api_req *r);
/* POST /sandboxes/{id}/resume {timeout?, autoPause?}. */
void e2b_resume_route(struct api_req *r);
/* A connect of a paused sandbox: resumed with a timeout_s (0: the default) deadline. */
void e2b_resume(struct api_req *r, const char *id, uint64_t timeout_s);
/* e->mu held: is snapshot snap a paused sandbox's (not the user's to list or delete)? */
bool e2b_snap_internal(struct e2b *e, const char *snap);

/* --- network and metrics (routes_e2b_net.c) ------------------------------------------ */

/* E2B's network options (and allow_internet_access) as an airlock policy (a new
 * reference). */
int e2b_policy_of(json_t *net, bool internet, json_t **out, struct al_error **err);
/* PUT /sandboxes/{id}/network, GET /sandboxes/{id}/metrics. */
void e2b_network(struct api_req *r);
void e2b_metrics(struct api_req *r);
/* A control-plane error {code, message} of err's errno (ended sandboxes are 404). */
void e2b_reply_err(struct api_req *r, const struct al_error *err);
/* The control plane's routes. */
extern const struct api_route api_e2b_routes[];
extern const size_t api_e2b_routes_n;
extern const struct api_route api_e2b_envd_routes[];
extern const size_t api_e2b_envd_routes_n;

/* --- envd plumbing (envd.c) ------------------------------------------------------------ */

/* An envd call's sandbox id (the request's target, checked), its team in r->team. */
const char *e2b_envd_sbx(struct api_req *r);
/* The user a call acts as (Authorization: Basic base64(user:) or ?username=): 0 user
 * (uid 1000), 1 root; -1 unknown (and *name points at it). */
int e2b_user(struct api_req *r, const char *param, bool *root);
/* A unary Connect answer: the message (taken), or an error {code, message} with its
 * status. */
void e2b_unary_ok(struct api_req *r, json_t *msg);
void e2b_unary_error(struct api_req *r, const char *code, const char *msg);
void e2b_unary_al_error(struct api_req *r, const struct al_error *err);
/* The Connect code for an errno. */
const char *e2b_code_of_errno(int e);
/* The request's message: a unary body (application/json) or a stream's one envelope
 * (application/connect+json). NULL after an error answer was built. */
json_t *e2b_request_msg(struct api_req *r, bool stream);
/* Base64 (standard, padded) both ways; decode returns -1 on a bad string. */
char *e2b_b64(const unsigned char *s, size_t n);
int e2b_unb64(const char *s, unsigned char **out, size_t *n);

/* A server stream: a producer fills envelopes; e2b_stream_reply() answers with them. */
struct e2b_stream;
typedef int (*e2b_step_fn)(struct e2b_stream *s, void *ctx, uint64_t timeout_ms);
struct e2b_stream *e2b_stream_new(struct api_req *r, void *ctx, e2b_step_fn step,
				  void (*ctx_free)(void *));
/* JSON lines (application/x-ndjson) instead of envelopes; an error is an error line. */
void e2b_stream_ndjson(struct e2b_stream *s);
/* The message sent after a silence (taken). */
void e2b_stream_keepalive(struct e2b_stream *s, json_t *msg);
/* Appends one message (taken). */
void e2b_stream_msg(struct e2b_stream *s, json_t *msg);
/* Ends the stream: {} or {"error":{code,message}}. */
void e2b_stream_end(struct e2b_stream *s, const char *code, const char *msg);
void e2b_stream_reply(struct api_req *r, struct e2b_stream *s);
bool e2b_stream_ended(const struct e2b_stream *s);

/* --- services ------------------------------------------------------------------------- */

void e2b_proc_start(struct api_req *r);
void e2b_proc_connect(struct api_req *r);
void e2b_proc_list(struct api_req *r);
void e2b_proc_input(struct api_req *r);
void e2b_proc_signal(struct api_req *r);
void e2b_proc_close_stdin(struct api_req *r);
void e2b_proc_update(struct api_req *r);
void e2b_fs_stat(struct api_req *r);
void e2b_fs_mkdir(struct api_req *r);
void e2b_fs_move(struct api_req *r);
void e2b_fs_list(struct api_req *r);
void e2b_fs_remove(struct api_req *r);
void e2b_fs_watch(struct api_req *r);
void e2b_fs_watcher_create(struct api_req *r);
void e2b_fs_watcher_events(struct api_req *r);
void e2b_fs_watcher_remove(struct api_req *r);
void e2b_files_get(struct api_req *r);
void e2b_ci_execute(struct api_req *r);
void e2b_ci_ctx_create(struct api_req *r);
void e2b_ci_ctx_list(struct api_req *r);
void e2b_ci_ctx_delete(struct api_req *r);
void e2b_ci_ctx_restart(struct api_req *r);
void e2b_ctx_clear(struct e2b_ctx *c);
/* The kernel of a language: its interpreter, the flag that takes a program, the program
 * (kernels.c); -1 for a language not served. */
int e2b_kernel(const char *language, const char **cmd, const char **flag, const char **program);
extern const struct api_route api_e2b_jupyter_routes[];
extern const size_t api_e2b_jupyter_routes_n;
void e2b_files_post(struct api_req *r);

/* A path of the E2B API as a sandbox path: a relative one is under /home/user (heap). */
char *e2b_path(const char *p);
/* A PTY command (envd_pty.c): e (its cmd and args) becomes script(1) running them on a
 * terminal of pty.size; out holds what e now points into. */
struct dm_exec;
struct e2b_pty_cmd {
	char *file, *inner;
	const char *argv[3];
};
int e2b_pty_wrap(json_t *pty, struct dm_exec *e, struct e2b_pty_cmd *out, struct al_error **err);
void e2b_pty_cmd_free(struct e2b_pty_cmd *p);

/* Runs argv in the sandbox (as root or the user) to its end, with at most max bytes of
 * output kept: 0 and *status (the exit code, or 128+signal), its stdout and stderr. */
int e2b_run_wait(struct api_req *r, const char *sbx, bool root, const char *const *argv, size_t n,
		 int *status, char **out, char **errout, struct al_error **err);

#endif
