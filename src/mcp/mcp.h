/* SPDX-License-Identifier: MIT */
/*
 * airlock-mcp: `airlock mcp`, an MCP server over stdio (docs/mcp.md). Files:
 *   jsonrpc.c  framing and classification (pure)     wspath.c  tool paths (pure)
 *   flags.c    the command line (limits, policy)     server.c  the loop, dispatch, jobs
 *   tools.c    tool schemas, arguments, results      embedded.c / staging.c  one-shot runs
 *   remote.c   a session sandbox of airlockd (client.c)
 */
#ifndef AL_MCP_MCP_H
#define AL_MCP_MCP_H

#include "cli/client.h"
#include "common/error.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define MCP_OUTPUT_DEFAULT (1u << 20) /* per stream returned, unless --output-limit */
#define MCP_FILE_MAX (4u << 20)	      /* read_file returns at most this much */
#define MCP_CODE_MAX (128u << 10)     /* run_code's code: one argv string (MAX_ARG_STRLEN) */
#define MCP_JOBS_MAX 16		      /* tool calls running at once */
#define MCP_EGRESS_MAX (4u << 20)     /* the egress-log resource returns its last bytes */
#define MCP_EGRESS_URI "airlock://egress-log"

/* What the command line says (flags.c). Every limit and the policy come from here only. */
struct mcp_opts {
	bool remote;	 /* --url or --socket: a session sandbox of airlockd */
	char **run_args; /* embedded: flags given to every `airlock run`, as written */
	size_t n_run_args;
	uint64_t timeout_ms;   /* a command's wall-clock limit (0 = none); a tool may shorten it */
	uint64_t output_limit; /* bytes per stream a result carries */
	uint64_t memory, disk;
	double cpus;
	bool memory_set, disk_set;
	json_t *env; /* object: --env K=V */
	const char *image, *hostname;
	const char *egress_log; /* --egress-log (embedded) */
	char *policy_json;	/* the network policy document; NULL = deny-all */
};

/* 0 to go on; else the exit code (64 after a usage message on stderr, 0 after --help). */
int mcp_flags_parse(struct mcp_opts *o, int argc, char **argv);
void mcp_flags_free(struct mcp_opts *o);
void mcp_usage(FILE *out);

struct mcp_server;

/* One tools/call under way (server.c owns it; a worker thread runs it). */
struct mcp_job {
	struct mcp_server *srv;
	json_t *id;	       /* the request's id */
	json_t *progress;      /* _meta.progressToken, or NULL */
	json_t *params;	       /* name, arguments */
	atomic_bool cancelled; /* notifications/cancelled came: kill, and send no answer */
	pid_t pid;	       /* embedded: the `airlock run` child (under srv->lock) */
	double progress_sent;
	struct mcp_job *next;
};

/* A command to run (tools.c fills it from run_code/exec). */
struct mcp_cmd {
	char **argv; /* NULL-terminated */
	const char *stdin_data;
	size_t stdin_len;
	uint64_t timeout_ms; /* already clamped to the command line's */
	const char *cwd;     /* normalized, or NULL (/workspace) */
};

/* A backend: embedded (one `airlock run` a command) or remote (airlockd). Each returns a
 * tool result's structured content, or NULL with *err (a tool error for the model). */
struct mcp_backend {
	json_t *(*exec)(struct mcp_job *job, const struct mcp_cmd *cmd, struct al_error **err);
	json_t *(*write_file)(struct mcp_server *s, const char *rel, const char *data, size_t len,
			      struct al_error **err);
	json_t *(*read_file)(struct mcp_server *s, const char *rel, struct al_error **err);
	json_t *(*list_files)(struct mcp_server *s, const char *rel, struct al_error **err);
	json_t *(*reset)(struct mcp_server *s, struct al_error **err); /* remote only */
	/* the egress log's NDJSON text (heap, *len), or NULL with *err */
	char *(*egress_log)(struct mcp_server *s, size_t *len, struct al_error **err);
	void (*close)(struct mcp_server *s); /* at exit: stop the sandbox, remove staging */
};

struct mcp_server {
	struct mcp_opts *opts;
	const struct mcp_backend *be;
	void *be_state;
	pthread_mutex_t lock; /* jobs, job->pid */
	pthread_mutex_t out_lock;
	pthread_cond_t idle; /* signalled when a job ends */
	struct mcp_job *jobs;
	size_t n_jobs;
	bool initialized;
	json_t *tools; /* tools/list's array */
};

/* server.c: one protocol message on stdout (the reference is taken). */
void mcp_send(struct mcp_server *s, json_t *msg);
/* A progress notification for job (when it asked for them): `elapsed` seconds so far. */
void mcp_progress(struct mcp_job *job, double elapsed, double total, const char *message);

/* tools.c */
json_t *mcp_tools_list(bool remote);
/* Runs tools/call for job: the result object, or NULL with *rpc_code and *rpc_msg (heap) for a
 * protocol error (unknown tool, params of the wrong shape). */
json_t *mcp_tools_call(struct mcp_job *job, int *rpc_code, char **rpc_msg);
/* Output beyond limit is cut (at a UTF-8 boundary) and flagged. */
json_t *mcp_text_capped(const char *buf, size_t len, uint64_t limit, bool *truncated);

/* embedded.c and remote.c */
extern const struct mcp_backend mcp_embedded, mcp_remote;
int mcp_embedded_open(struct mcp_server *s, struct al_error **err);
int mcp_remote_open(struct mcp_server *s, struct client *c, struct al_error **err);

/* staging.c: the embedded session's private directory (0700, removed at exit). */
struct mcp_staging;
struct mcp_staging *mcp_staging_new(struct al_error **err);
const char *mcp_staging_workspace(const struct mcp_staging *st); /* host path */
const char *mcp_staging_egress(const struct mcp_staging *st);	 /* host path */
bool mcp_staging_empty(struct mcp_staging *st);
int mcp_staging_write(struct mcp_staging *st, const char *rel, const char *data, size_t len,
		      uint64_t cap, struct al_error **err);
char *mcp_staging_read(struct mcp_staging *st, const char *rel, size_t max, size_t *len,
		       bool *truncated, struct al_error **err);
json_t *mcp_staging_list(struct mcp_staging *st, const char *rel, struct al_error **err);
void mcp_staging_free(struct mcp_staging *st);

/* file results, shared by both backends (tools.c) */
json_t *mcp_file_result(const char *rel, const char *data, size_t len, bool truncated);

#endif
