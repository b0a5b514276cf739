/* SPDX-License-Identifier: MIT */
/*
 * airlockd's core: the registry of sandboxes and their commands. The HTTP
 * layer (src/api/) calls only these functions; they are thread-safe (the API
 * serves each connection on its own thread).
 *
 * Errors follow the error rule; err->code is an errno that the API maps to a
 * status: ENOENT 404, EINVAL 400, E2BIG 413, EEXIST/EBUSY 409, ESRCH 410
 * (sandbox stopped), ETIMEDOUT 504, anything else 500. A sandbox or command
 * of another team is ENOENT (never "forbidden": ids of other teams do not exist).
 */
#ifndef AL_DAEMON_DAEMON_H
#define AL_DAEMON_DAEMON_H

#include "jail/spec.h"

#include <airlock/airlock.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct daemon;

struct daemon_opts {
	const char *state_dir;	/* SQLite db, agent sockets, the token file */
	const char *agent_path; /* the airlock-agent binary */
	uint64_t default_timeout_ms;
	const char *upstream_netns; /* where sandbox gateways dial out from (NULL: the host) */
	const char *upstream_dns;   /* the resolver they ask (NULL: the host's) */
	unsigned pool;		    /* fresh sandboxes kept ready for creates (0: none) */
#define DM_POOL_LIMIT 64
	const char *upstream_ca; /* CA file for terminated upstreams (NULL: the system's) */
	const char *images_dir;	 /* where a create's "image" may come from (NULL: nowhere) */
	/* An ended sandbox (stopped or failed) is forgotten, with its commands and their
	 * output, once it ended this long ago (0: DM_RETAIN_DEFAULT_MS), or when more than
	 * max_ended ended ones are held (oldest first; 0: DM_MAX_ENDED_DEFAULT). */
	uint64_t retain_ms;
#define DM_RETAIN_DEFAULT_MS (3600ull * 1000)
	unsigned max_ended;
#define DM_MAX_ENDED_DEFAULT 1000
	uint64_t ended_output_max; /* ... or when their output in the store is over this */
#define DM_ENDED_OUTPUT_DEFAULT (4ull << 30)
	/* Command output one sandbox may have stored, all its commands together (0:
	 * DM_SBX_OUTPUT_DEFAULT); beyond it output is dropped ("output_truncated"). */
	uint64_t sbx_output_max;
#define DM_SBX_OUTPUT_DEFAULT (1ull << 30)
	/* Bytes of one stream of one command kept in the store (0: DM_CMD_OUTPUT_DEFAULT);
	 * beyond it that stream's output is dropped ("output_truncated"). */
	uint64_t cmd_output_max;
#define DM_CMD_OUTPUT_DEFAULT (64ull << 20)
	/* Finished commands a sandbox keeps (GET, logs), the newest; older ones are
	 * forgotten with their output (0: DM_MAX_CMDS_DEFAULT). */
	unsigned max_cmds;
#define DM_MAX_CMDS_DEFAULT 10000
	/* Bytes of the records of the commands a sandbox keeps (their argv and cwd, all
	 * together; 0: DM_SBX_RECORDS_DEFAULT): beyond it the oldest finished are forgotten,
	 * and a command that would not fit beside the running ones is refused (429). */
	uint64_t sbx_records_max;
#define DM_SBX_RECORDS_DEFAULT (16ull << 20)
	unsigned team_max_sbxs; /* live sandboxes one team may have at once (0: no limit) */
	/* Bytes all snapshots together may take under STATE/snapshots (0: the default);
	 * a capture that would go over is refused (ENOSPC), nothing is evicted. */
	uint64_t snap_max_bytes;
#define DM_SNAP_MAX_DEFAULT (16ull << 30)
};

int daemon_open(const struct daemon_opts *o, struct daemon **out, struct al_error **err);
/* Stops the timers and closes the store; running sandboxes are left running. */
void daemon_close(struct daemon *d);

/* --- sandboxes ------------------------------------------------------------ */

struct dm_create {
	/* The sandbox's settings (jail/spec.h): limits, image (a name under the daemon's
	 * --images, "": the host runtime), workdir, hostname; 0 or "": the default. */
	struct jail_spec spec;
	uint64_t timeout_ms;	/* 0: the daemon's default */
	const char *const *env; /* KEY=VALUE for every command */
	size_t n_env;
	json_t *network_policy; /* NULL: "deny-all"; stored, enforced by the network gateway */
	const uint16_t *ports;	/* served through airlockd's preview URLs (docs/ports.md) */
	size_t n_ports;		/* at most DM_PORTS_MAX, each 1..65535, no repeats */
};
#define DM_PORTS_MAX 15

/* Creates and starts a sandbox; *out_id is a heap string "sbx_...". */
int dm_sandbox_create(struct daemon *d, const char *team, const struct dm_create *c, char **out_id,
		      struct al_error **err);
/*
 * JSON views (new references):
 * {id, status: running|stopping|stopped|failed, created_at, expires_at, stopped_at|null
 *  (epoch ms), timeout_ms, resources: {vcpus, memory_bytes, disk_bytes}, image|null,
 *  workdir, network_policy, policy_generation}
 */
int dm_sandbox_get(struct daemon *d, const char *team, const char *id, json_t **out,
		   struct al_error **err);
int dm_sandbox_list(struct daemon *d, const char *team, json_t **out_array, struct al_error **err);
int dm_sandbox_stop(struct daemon *d, const char *team, const char *id, struct al_error **err);
/* Pushes the expiry by add_ms (bounded by a maximum lifetime of 24 h). */
int dm_sandbox_extend(struct daemon *d, const char *team, const char *id, uint64_t add_ms,
		      struct al_error **err);
/* Sets the expiry to expires_ms (epoch ms; earlier or later, within the 24 h lifetime from
 * creation): the E2B front end's setTimeout, which may shorten a sandbox's life. */
int dm_sandbox_set_deadline(struct daemon *d, const char *team, const char *id, int64_t expires_ms,
			    struct al_error **err);
/* Stores a validated network policy (the JSON object or the strings allow-all/deny-all)
 * and bumps the generation. */
int dm_sandbox_set_policy(struct daemon *d, const char *team, const char *id, json_t *policy,
			  struct al_error **err);

/* --- ports (ports.c, docs/ports.md) ----------------------------------------------------- */

/* The ports a sandbox declares: replaced (0..DM_PORTS_MAX, each 1..65535, no repeats). */
int dm_sandbox_set_ports(struct daemon *d, const char *team, const char *id, const uint16_t *ports,
			 size_t n, struct al_error **err);
/*
 * A TCP connection to 127.0.0.1:port inside the sandbox's network namespace (a short-lived
 * thread enters it with setns on a pidfd of the sandbox's PID 1; the socket keeps the
 * namespace). Only a declared port unless any_port (E2B's getHost reaches every port, as
 * E2B's does): EACCES otherwise; ECONNREFUSED when nothing listens there, ETIMEDOUT when the
 * connect does not finish in 5 s, ESRCH for a stopped sandbox. Any front end may use it
 * (the Vercel preview URLs, E2B's getHost). team NULL: a sandbox of any team (the preview
 * URLs are public, as Vercel's and E2B's).
 */
int dm_sandbox_port_connect(struct daemon *d, const char *team, const char *id, unsigned port,
			    bool any_port, int *fd, struct al_error **err);
/* One inbound line in the sandbox's egress log: {"direction":"in", "port", "what",
 * "status", "bytes_in" (into the sandbox), "bytes_out"}. Best effort, never over 64 MiB. */
void dm_sandbox_inbound_log(struct daemon *d, const char *id, unsigned port, const char *what,
			    int status, uint64_t bytes_in, uint64_t bytes_out);

/* --- a create's source (source.c, docs/sources.md) -------------------------------------- */

struct dm_source {
	const char *type;     /* "tarball" or "git" */
	const char *url;      /* http:// or https:// */
	unsigned depth;	      /* git: a shallow clone of this many commits (0: all) */
	const char *revision; /* git: a ref or commit to check out (NULL: the default branch) */
};
/* Fetches src into the sandbox's workdir from inside the sandbox (curl or git, as its user,
 * through its gateway: its network policy decides). EHOSTUNREACH with the tool's message
 * when the fetch failed, E2BIG over 256 MiB, ETIMEDOUT after 5 min, EINVAL for a bad src. */
int dm_sandbox_fetch_source(struct daemon *d, const char *team, const char *id,
			    const struct dm_source *src, struct al_error **err);

/* Up to max bytes of the sandbox's egress decisions (JSON lines) from byte off of their
 * log into buf (*got: 0 at its end, or when none yet): a reader keeps its offset and reads
 * only what is new. */
int dm_sandbox_egress_read(struct daemon *d, const char *team, const char *id, uint64_t off,
			   char *buf, size_t max, size_t *got, struct al_error **err);

/* A running sandbox's usage from its cgroup, its spec and its /tmp: {cpu_usec,
 * memory_bytes, memory_max (its limit; 0: none), disk_used, disk_total} (usage.c). */
int dm_sandbox_usage(struct daemon *d, const char *team, const char *id, json_t **out,
		     struct al_error **err);

/* --- commands ------------------------------------------------------------- */

struct dm_exec {
	const char *cmd;
	const char *const *args;
	size_t n_args;
	const char *const *env; /* KEY=VALUE, added to the sandbox's env */
	size_t n_env;
	const char *cwd;	/* NULL: the sandbox workdir */
	bool sudo;		/* uid 0 inside */
	uint64_t timeout_ms;	/* 0: none (the sandbox's own timeout still applies) */
	const void *stdin_data; /* written to stdin, then closed unless keep_stdin */
	size_t stdin_len;
	bool keep_stdin; /* leave stdin open for dm_cmd_write_stdin */
	/* A pseudo-terminal in the sandbox instead of pipes: stdout and stderr are one stream
	 * (stdout), stdin is typed input; rows and cols its first size (0: 24 x 80). */
	bool tty;
	unsigned rows, cols;
};

int dm_cmd_start(struct daemon *d, const char *team, const char *sbx, const struct dm_exec *e,
		 char **out_cmd_id, struct al_error **err);
/*
 * {id, sandbox_id, cmd, args, cwd, sudo, started_at, finished_at|null, status:
 *  running|finished, exit_code|null, signal|null, reason|null}
 * reason uses the al_reason_name() vocabulary (exited, signaled, timeout, oom, ...).
 */
int dm_cmd_get(struct daemon *d, const char *team, const char *sbx, const char *cmd, json_t **out,
	       struct al_error **err);
/* Blocks until the command finishes or timeout_ms passes (-ETIMEDOUT); then like dm_cmd_get. */
int dm_cmd_wait(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		uint64_t timeout_ms, json_t **out, struct al_error **err);
/* One page of the sandbox's commands, oldest first: up to limit of those after cursor (0:
 * from the first); *next is the cursor of the page after it, 0 when this is the last. */
int dm_cmd_list(struct daemon *d, const char *team, const char *sbx, uint64_t cursor, size_t limit,
		json_t **out_array, uint64_t *next, struct al_error **err);
int dm_cmd_write_stdin(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		       const void *data, size_t len, bool close_after, struct al_error **err);
/* A TTY command's window size (1..65535 each): its foreground process group gets SIGWINCH.
 * EINVAL out of range, ENOTTY for a command without a PTY, ESRCH once it has finished. */
int dm_cmd_resize(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		  unsigned rows, unsigned cols, struct al_error **err);
int dm_cmd_kill(struct daemon *d, const char *team, const char *sbx, const char *cmd, int sig,
		struct al_error **err);

/*
 * Log streaming: a cursor replays a command's output from the start, then
 * follows it until the command ends. dm_logs_next blocks up to timeout_ms:
 *   returns 1 with a chunk (*stream 1 stdout / 2 stderr, data copied into buf, *len),
 *   returns 0 at the end (the command finished and everything was delivered),
 *   returns -ETIMEDOUT when nothing arrived (call again: lets the HTTP layer notice
 *   a client that went away), <0 on error.
 */
struct dm_logs;
int dm_logs_open(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		 struct dm_logs **out, struct al_error **err);
int dm_logs_next(struct dm_logs *l, char *buf, size_t cap, int *stream, size_t *len,
		 uint64_t timeout_ms);
void dm_logs_close(struct dm_logs *l);

/* --- files (paths are inside the sandbox; relative ones are relative to its workdir) -- */

/* Extracts a tar or tar.gz (detected) into dir. Entries that are absolute, contain "..",
 * or are links leading outside the sandbox's writable area are refused (EINVAL), and then
 * nothing is left half-written... best effort: the archive is checked before extraction. */
int dm_fs_write_tar(struct daemon *d, const char *team, const char *sbx, const char *dir,
		    const void *data, size_t len, struct al_error **err);
/* Reads a regular file (ENOENT if missing, EISDIR for a directory, E2BIG over max). */
int dm_fs_read(struct daemon *d, const char *team, const char *sbx, const char *path, size_t max,
	       char **out, size_t *out_len, struct al_error **err);
int dm_fs_mkdir(struct daemon *d, const char *team, const char *sbx, const char *path, bool parents,
		struct al_error **err);
/* Would writes to every one of paths[0..n) pass the path rules (files_writable)? Checked
 * before a request that writes in several places writes anything. */
int dm_fs_writable(struct daemon *d, const char *team, const char *sbx, const char *const *paths,
		   size_t n, struct al_error **err);
/* [{name, type: file|dir|symlink|other, size, mode, mtime}] */
int dm_fs_list(struct daemon *d, const char *team, const char *sbx, const char *path,
	       json_t **out_array, struct al_error **err);

/* --- snapshots (docs/snapshots.md) ----------------------------------------- */

/*
 * A snapshot of a running sandbox's writable areas (/workspace, /tmp, /home/user,
 * /dev/shm, its workdir), captured with its processes frozen for the moment of the copy;
 * the sandbox keeps running. expire_ms: it is deleted that long after (0: never).
 * View: {id, sandbox_id, parent_id|null, created_at, expires_at|null, size_bytes, sha256,
 * status: "created", workdir}. Another team's snapshot is ENOENT; a stopped sandbox ESRCH;
 * the store's cap ENOSPC.
 */
int dm_snapshot_create(struct daemon *d, const char *team, const char *sbx, uint64_t expire_ms,
		       json_t **out, struct al_error **err);
int dm_snapshot_get(struct daemon *d, const char *team, const char *id, json_t **out,
		    struct al_error **err);
/* The team's snapshots, newest first; only those of sandbox sbx unless it is NULL. */
int dm_snapshot_list(struct daemon *d, const char *team, const char *sbx, json_t **out_array,
		     struct al_error **err);
/* Deletes it; *out (unless out is NULL): its view, status "deleted". Sandboxes made from it
 * keep their files (a restore copies). */
int dm_snapshot_delete(struct daemon *d, const char *team, const char *id, json_t **out,
		       struct al_error **err);
/* A create whose writable areas start as snapshot snap has them (its digest checked
 * first: EBADMSG when the stored data is not what was captured). What c leaves unset of
 * the workdir and disk is the snapshot's source's. */
int dm_sandbox_create_from(struct daemon *d, const char *team, const struct dm_create *c,
			   const char *snap, char **out_id, struct al_error **err);
/* A new sandbox with the current files of running sandbox `from` (captured as a snapshot
 * is, kept nowhere); settings c leaves unset are the source's. */
int dm_sandbox_fork(struct daemon *d, const char *team, const char *from, const struct dm_create *c,
		    char **out_id, struct al_error **err);

/* --- drives (docs/snapshots.md, "Drives") ------------------------------------ */

/* A team's persistent volume by name: an ext4 image of max bytes (0: DM_DRIVE_DEFAULT).
 * View: {id, name, project, max_size_bytes, created_at, updated_at, in_use,
 * sandbox_id|null (the running sandbox that has it read-write)}. */
#define DM_DRIVE_MIN (16ull << 20)
#define DM_DRIVE_DEFAULT (1ull << 30)
#define DM_DRIVE_MAX (256ull << 30)
int dm_drive_get_or_create(struct daemon *d, const char *team, const char *name,
			   const char *project, uint64_t max, json_t **out, struct al_error **err);
int dm_drive_list(struct daemon *d, const char *team, json_t **out_array, struct al_error **err);
/* EBUSY while a running sandbox has it mounted. */
int dm_drive_delete(struct daemon *d, const char *team, const char *name, json_t **out,
		    struct al_error **err);
/* Mounts drive `name` on path (in a writable area) in sandbox sbx, read-only if ro. One
 * running sandbox at a time has a drive read-write (EBUSY). */
int dm_drive_attach(struct daemon *d, const char *team, const char *sbx, const char *name,
		    const char *path, bool ro, struct al_error **err);

/* --- names (sandboxes that outlive a session: the Vercel API's named ones) -------- */

#define DM_NAME_MAX 64
/* 1 to DM_NAME_MAX of [A-Za-z0-9._-], not starting with '.' or '-'. */
bool dm_name_ok(const char *name);
/* A record (a JSON object the API defines; "session" its current session, "sessions" the
 * earlier ones) per team and name, kept across restarts. EEXIST, ENOENT as expected. */
int dm_name_create(struct daemon *d, const char *team, const char *name, json_t *rec,
		   struct al_error **err);
int dm_name_get(struct daemon *d, const char *team, const char *name, json_t **out,
		struct al_error **err);
int dm_name_set(struct daemon *d, const char *team, const char *name, json_t *rec,
		struct al_error **err);
int dm_name_delete(struct daemon *d, const char *team, const char *name, struct al_error **err);
/* Whether sbx is the current session of a persistent name (its record's "persistent");
 * *exp: the expiration its snapshots get (keepLastSnapshots.expiration, else
 * snapshotExpiration; 0 none). The timer snapshots such a sandbox before its expiry stop. */
bool dm_name_persistent(struct daemon *d, const char *team, const char *sbx, uint64_t *exp);
/* A snapshot snap of sbx was taken: the name whose current session it is records it as
 * its "snapshot", appends it to "snapshots" and evicts beyond keepLastSnapshots.count. */
int dm_name_snapshotted(struct daemon *d, const char *team, const char *sbx, const char *snap,
			struct al_error **err);
/* The name whose record has session sbx (heap; *current: as its "session"), or NULL. */
char *dm_name_of_session(struct daemon *d, const char *team, const char *sbx, bool *current);

/* --- metrics ---------------------------------------------------------------- */

/* The daemon's metrics in the Prometheus text format 0.0.4 (docs/metrics.md): a heap
 * string of *len bytes. It names every team's sandboxes: only the operator may read it. */
char *dm_metrics_text(struct daemon *d, size_t *len);

#endif
