/* SPDX-License-Identifier: MIT */
/*
 * libairlock: run untrusted code in a fresh, isolated, bounded sandbox.
 *
 * Lifecycle of a one-shot run:
 *
 *	struct al_config cfg;
 *	struct al_io io = {.out_fd = 1, .err_fd = 2, .stdin_fd = -1, .signal_fd = -1,
 *			   .tty_fd = -1, .egress_log_fd = -1};
 *	struct al_result res;
 *	struct al_error *err = NULL;
 *	al_config_init(&cfg);               // safe defaults (deny-all network, 1 GiB memory, ...)
 *	cfg.argv = argv;                    // what to run inside
 *	if (al_run(&cfg, &io, &res, &err) < 0) {
 *		fprintf(stderr, "%s\n", err->msg);  // the caller's mistake (a bad config)
 *		al_error_free(err);
 *		return 125;
 *	}
 *	int code = al_result_exit_code(&res); // res.reason says why it ended
 *	al_result_release(&res);
 *	return code;
 *
 * Every fallible function returns <0 (or NULL) and fills *err; the library
 * never prints and never exits.
 */
#ifndef AIRLOCK_AIRLOCK_H
#define AIRLOCK_AIRLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AL_PUBLIC __attribute__((visibility("default")))

/* An error: an errno-style code and a message naming the syscall and object. */
struct al_error {
	int code;
	char *msg;
};
AL_PUBLIC void al_error_free(struct al_error *e);

/* Why a run ended. Names (al_reason_name) are part of the JSON/API contract. */
enum al_reason {
	AL_REASON_EXITED = 0,	/* the workload exited by itself */
	AL_REASON_SIGNALED,	/* the workload was killed by a signal it did not get from us */
	AL_REASON_TIMEOUT,	/* the wall-clock timeout passed; the whole tree was killed */
	AL_REASON_OOM,		/* the memory limit was hit and the kernel killed the workload */
	AL_REASON_SECCOMP,	/* the workload was killed by the seccomp filter (SIGSYS) */
	AL_REASON_SETUP_FAILED, /* the sandbox could not be built; the workload never ran */
	AL_REASON_EXEC_FAILED,	/* the command was not found or not executable */
	AL_REASON_INTERRUPTED,	/* the caller asked to stop (SIGINT/SIGTERM to airlock) */
};
AL_PUBLIC const char *al_reason_name(enum al_reason r);

/* Exit codes of `airlock run` (the documented contract; see README). */
enum {
	AL_EXIT_USAGE = 64,
	AL_EXIT_OOM = 122,
	AL_EXIT_TIMEOUT = 124,
	AL_EXIT_SETUP = 125,
	AL_EXIT_NOEXEC = 126,
	AL_EXIT_NOTFOUND = 127,
	AL_EXIT_SIGNAL_BASE = 128,
};

/* Limits of a run's inputs (larger ones are refused before anything is made). */
#define AL_FILES_MAX 64		/* --file copies */
#define AL_FILE_DST_MAX 4096	/* bytes of a copy's destination path, with its NUL */
#define AL_PIDS_MAX 4194304u	/* the kernel's highest pids.max (PID_MAX_LIMIT) */
#define AL_POLICY_MAX (1 << 20) /* bytes of a network policy document */

/* A host file or directory copied into the sandbox before the command runs. */
struct al_file_copy {
	const char *src; /* host path */
	const char *dst; /* sandbox path; relative to the working directory if not absolute */
};

struct al_config {
	char *const *argv;	/* command and arguments; argv[0] is searched in PATH inside */
	const char *const *env; /* extra KEY=VALUE entries added to the minimal environment */
	size_t n_env;
	const char *workdir; /* default "/workspace" */
	const char *image;   /* root filesystem directory; NULL = host runtime, read-only */
	const struct al_file_copy *files;
	size_t n_files;

	uint64_t timeout_ms;   /* wall clock; 0 = none. Default 5 minutes */
	uint64_t memory_bytes; /* 0 = no limit. Default 1 GiB */
	uint64_t disk_bytes;   /* size of the writable tmpfs. Default 1 GiB */
	uint64_t output_limit; /* per stream; output beyond it is dropped. Default 64 MiB */
	uint32_t pids;	       /* 0 = no limit. Default 512 */
	double cpus;	       /* CPU quota in CPUs; 0 = no limit */

	bool root;	      /* run as uid 0 inside the user namespace */
	bool tty;	      /* give the command a PTY (stdout and stderr merged) */
	const char *term;     /* TERM inside, with tty */
	const char *hostname; /* default "sandbox" */

	/*
	 * Network. NULL (or "deny-all") = loopback only. Otherwise a policy in the
	 * Vercel shape ("allow-all", or {"allow": [...], "subnets": {...}}): the sandbox
	 * gets one link to its own egress gateway (docs/network.md).
	 */
	const char *net_policy_json;
	const char *upstream_netns; /* where the gateway's upstream sockets live (NULL: host) */
	const char *upstream_dns;   /* "IP[:PORT]" the gateway asks (NULL: host resolv.conf) */
	const char *upstream_ca;    /* CA file for terminated upstreams (NULL: the system's) */
	const char *sandbox_id;	    /* names the sandbox in the egress log */
};

AL_PUBLIC void al_config_init(struct al_config *cfg);

/* Where the run's I/O goes. */
enum al_stream { AL_STDOUT = 1, AL_STDERR = 2 };
struct al_io {
	/*
	 * Where output goes (within the output limit), either:
	 *  - out_fd / err_fd >= 0: written there by the run loop, buffered and only when the
	 *    fd is writable, so a caller that stops reading never stalls the timeout; or
	 *  - on_output: called with each chunk (must not block).
	 * Zero-initialise and set out_fd/err_fd to -1 to use the callback.
	 */
	int out_fd, err_fd;
	void (*on_output)(void *ctx, enum al_stream stream, const char *buf, size_t len);
	void *ctx;
	int stdin_fd; /* relayed into the sandbox until EOF; -1 = the sandbox gets /dev/null */
	/*
	 * Optional signalfd the run loop watches: SIGINT/SIGTERM/SIGHUP end the
	 * run as "interrupted"; SIGWINCH resizes the PTY from tty_fd. -1 = none.
	 */
	int signal_fd;
	int tty_fd;	   /* the caller's terminal (for window size), or -1 */
	int egress_log_fd; /* the gateway's decisions as JSON lines; -1 for none */
};

struct al_result {
	enum al_reason reason;
	int exit_code;	      /* valid when reason == EXITED */
	int signal;	      /* the killing signal when SIGNALED/SECCOMP/OOM/TIMEOUT, else 0 */
	int interrupt_signal; /* INTERRUPTED: which signal airlock received */
	double duration_ms;
	uint64_t peak_memory_bytes;
	uint64_t stdout_bytes, stderr_bytes; /* total produced, including dropped bytes */
	bool stdout_truncated, stderr_truncated;
	char *error; /* SETUP_FAILED / EXEC_FAILED: what went wrong */
};

/*
 * Build a sandbox, run cfg->argv in it, relay I/O, wait, tear everything down.
 * Returns 0 when the workload ran (whatever its outcome) or when set-up failed
 * (res->reason == AL_REASON_SETUP_FAILED, res->error says why); returns <0
 * with *err only for failures of the caller's own side (bad config).
 */
AL_PUBLIC int al_run(const struct al_config *cfg, const struct al_io *io, struct al_result *res,
		     struct al_error **err);
AL_PUBLIC void al_result_release(struct al_result *res);
/* The process exit code `airlock run` uses for this result (see enum above). */
AL_PUBLIC int al_result_exit_code(const struct al_result *res);

#ifdef __cplusplus
}
#endif
#endif
