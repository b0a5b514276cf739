/* SPDX-License-Identifier: MIT */
/*
 * airlockd's durable state in SQLite (WAL): sandboxes, commands, their output.
 * One connection, serialized by a mutex inside struct store: every function
 * is safe to call from any thread. Strings returned in structs are heap
 * copies owned by the struct (free with the matching *_release()).
 */
#ifndef AL_STORE_STORE_H
#define AL_STORE_STORE_H

#include <airlock/airlock.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

/* Opens (creating if needed) the database at path; WAL, synchronous=NORMAL, foreign keys on,
 * busy timeout 5 s; creates or migrates the schema (a `schema_version` in PRAGMA user_version). */
int store_open(const char *path, struct store **out, struct al_error **err);
void store_close(struct store *st);
/* How many SQLite operations failed since store_open (any thread, no lock). */
uint64_t store_errors(const struct store *st);

struct store_sandbox {
	char *id; /* "sbx_" + 24 [a-z0-9] */
	char *team;
	char *status;	    /* "running", "stopping", "stopped", "failed" */
	int64_t created_ms; /* epoch ms */
	int64_t expires_ms; /* when the timeout stops it */
	int64_t stopped_ms; /* 0 while running */
	int32_t init_pid;   /* host pid of the sandbox's PID 1 (the agent) */
	int64_t
	    init_start; /* its start time (field 22 of /proc/PID/stat): guards against pid reuse */
	uint32_t host_base; /* first host uid of its user namespace range */
	char *config_json;  /* creation parameters as JSON (image, resources, env, workdir, ...) */
	char *policy_json;  /* network policy as JSON */
	int64_t policy_gen; /* network policy generation */
};
void store_sandbox_release(struct store_sandbox *s);

/* Insert or replace the whole row. */
int store_sandbox_put(struct store *st, const struct store_sandbox *s, struct al_error **err);
/* Returns 1 and fills *out if found, 0 if not, <0 on error. */
int store_sandbox_get(struct store *st, const char *id, struct store_sandbox *out,
		      struct al_error **err);
/* Calls fn for each sandbox (team NULL = all teams; only_live = status running/stopping),
 * ordered by created_ms; fn's struct is released after it returns. Stops if fn returns <0,
 * and then returns that value (with *err set). fn runs without the store's lock held. */
int store_sandbox_each(struct store *st, const char *team, bool only_live,
		       int (*fn)(void *ctx, const struct store_sandbox *s), void *ctx,
		       struct al_error **err);
/* The setters (and store_command_finish) return 1 if the row exists, 0 if not, <0 on error. */
int store_sandbox_set_status(struct store *st, const char *id, const char *status,
			     int64_t stopped_ms, struct al_error **err);
int store_sandbox_set_expiry(struct store *st, const char *id, int64_t expires_ms,
			     struct al_error **err);
int store_sandbox_set_policy(struct store *st, const char *id, const char *policy_json, int64_t gen,
			     struct al_error **err);

struct store_command {
	char *id; /* "cmd_" + 24 [a-z0-9] */
	char *sandbox_id;
	char *argv_json; /* JSON array of strings: [cmd, args...] */
	char *cwd;
	bool sudo;
	int64_t started_ms;
	int64_t finished_ms; /* 0 while running */
	int32_t exit_code;   /* valid when finished and reason is exited/exec_failed */
	int32_t signal;	     /* 0 if none */
	char *reason;	     /* NULL while running; else the al_reason_name() vocabulary */
	int64_t deadline_ms; /* the command's own timeout as an epoch-ms deadline, 0 none */
};
void store_command_release(struct store_command *c);

int store_command_put(struct store *st, const struct store_command *c, struct al_error **err);
int store_command_get(struct store *st, const char *id, struct store_command *out,
		      struct al_error **err); /* 1 found, 0 not, <0 error */
int store_command_finish(struct store *st, const char *id, int64_t finished_ms, int32_t exit_code,
			 int32_t signal, const char *reason, struct al_error **err);
/* Commands of a sandbox, oldest first (same callback rules as store_sandbox_each). */
int store_command_each(struct store *st, const char *sandbox_id,
		       int (*fn)(void *ctx, const struct store_command *c), void *ctx,
		       struct al_error **err);

/*
 * Output: stored as chunks keyed (command, stream, offset). Appending a chunk
 * whose offset is below what is stored already trims the overlap (replays
 * after a reconnect are idempotent); a gap (offset above the stored size) is
 * refused with -EINVAL.
 */
int store_output_append(struct store *st, const char *cmd_id, int stream, uint64_t offset,
			const void *data, size_t len, struct al_error **err);
/* Bytes stored for (command, stream). */
int store_output_size(struct store *st, const char *cmd_id, int stream, uint64_t *out,
		      struct al_error **err);
/* Calls fn with chunks of both streams (stream 0) or one stream, in the order they were
 * appended, starting with the first chunk appended after `after_seq` (0 = from the start);
 * fn gets each chunk's seq so a follower can resume. Stops if fn returns <0. */
int store_output_each(struct store *st, const char *cmd_id, int stream, int64_t after_seq,
		      int (*fn)(void *ctx, int64_t seq, int stream, uint64_t offset,
				const void *data, size_t len),
		      void *ctx, struct al_error **err);

/* Retention: deletes the sandboxes that ended (status stopped or failed) before cutoff_ms
 * (0 < stopped_ms < cutoff_ms), with their commands and output. Returns how many. */
int store_prune(struct store *st, int64_t cutoff_ms, struct al_error **err);
/* Deletes one ended sandbox (stopped or failed) with its commands and output: 1 if it
 * was there, 0 if not (or it has not ended), <0 on error. */
int store_sandbox_delete(struct store *st, const char *id, struct al_error **err);
/* Deletes one command with its output (the caller knows it has finished): 1 if it was
 * there, 0 if not, <0 on error. */
int store_command_delete(struct store *st, const char *id, struct al_error **err);

#endif
