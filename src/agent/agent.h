/* SPDX-License-Identifier: MIT */
/* airlock-agent: PID 1 of a daemon sandbox. Internal interface of its files. */
#ifndef AL_AGENT_AGENT_H
#define AL_AGENT_AGENT_H

#include "proto/proto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AGENT_LISTEN_FD 3
#define AGENT_MAX_CMDS 1024	  /* finished commands beyond this are forgotten, oldest first */
#define AGENT_FORGET_MS 100	  /* ... once a daemon has had this long to read its EXIT */
#define AGENT_BUF_CAP (16u << 20) /* output kept per stream for replays */
#define AGENT_KEEP_MS 2000	  /* ... after its command's end, once a daemon has had this long */
#define AGENT_CHUNK (256u << 10)  /* largest OUTPUT payload */
#define AGENT_STDIN_CAP (16u << 20)	/* stdin buffered per command */
#define AGENT_IDLE_SHIMS 2		/* shims kept waiting for a next command */
#define AGENT_SHIM_IDLE_MS 10000	/* ... for at most this long */
#define AGENT_SHIM_JOB_MAX (128u << 10) /* a larger EXEC frame gets a new shim */

/* A shim that takes a command from its control socket first answers one byte there
 * (AGENT_SHIM_ACK), before it starts anything: a shim that dies without it never took
 * the command (it was killed while idle, the command already in its socket), and the
 * agent starts the command on a new shim instead of reporting the shim's death. */
#define AGENT_SHIM_ACK 'k'

/*
 * What a shim's report pipe carries, each record in one write (atomic, under PIPE_BUF): at
 * most one struct jail_exec_report from the command's process if its exec failed (err !=
 * 0), then the shim's "done" record with the command's wait status as soon as it is reaped.
 * The agent answers EXIT on "done", without waiting for the shim's exit. again: the shim
 * waits on its control socket for a next command (nothing of the last one runs below it).
 */
struct shim_done {
	int32_t zero; /* 0: tells it from an exec report, whose err is never 0 */
	int32_t status;
	int32_t again;
};

enum watch_kind { W_LISTEN, W_CONN, W_SIGNAL, W_OUT, W_ERR, W_IN, W_REPORT };

struct watch {
	enum watch_kind kind;
	struct agent_cmd *cmd;
};

struct obuf {
	char *data;
	size_t len, cap; /* kept bytes: offsets [0, len) */
	uint64_t total;	 /* bytes produced (offset of the next byte) */
};

struct agent_cmd {
	char id[PROTO_ID_MAX + 1];
	pid_t pid;	   /* its shim's */
	int shim_ctl;	   /* the shim's control socket while it serves us (-1: none) */
	uint32_t shim_job; /* which of its shim's commands it is (1: the first) */
	uint8_t *job;	   /* the EXEC frame handed to an idle shim, until its "done": if the */
	size_t job_len;	   /* shim dies before it took it (no ack), it runs on a new shim */
	int fd[3];	   /* stdin (write end), stdout, stderr (read ends); -1 when closed */
	int pty;	   /* a TTY command's PTY master (fd[0] and fd[1] are its dups), or -1 */
	int report_fd;	   /* report pipe (read end): the exec error, then the shim's "done" */
	struct watch w_out, w_err, w_in, w_report;
	char *in_buf; /* stdin bytes accepted from the daemon, not yet in the pipe */
	size_t in_len, in_off;
	bool in_close;	 /* close stdin once in_buf is drained */
	bool in_watched; /* stdin's pipe is in the epoll set (waiting for room) */
	struct obuf buf[2];
	uint64_t start_ms, end_ms;
	/* Since when (CLOCK_MONOTONIC ms) a daemon has been connected to read its EXIT: from
	 * its end, or from the connection made after it; 0 while none has been since. */
	uint64_t seen_ms;
	bool exited;   /* the process has been reaped */
	bool finished; /* EXIT was decided (exited and output drained) */
	int status;
	int exec_err;
	char exec_msg[256];
};

struct agent {
	const char *workdir;
	int ep, conn_fd, sig_fd;
	/* Done once at start instead of in every command (jail_ctx.prepared). */
	bool prepared;	 /* no signal ignored, bounding set limited, Landlock built */
	int landlock_fd; /* the command's ruleset (-1: no Landlock) */
	/* The writable areas (and workdir) as the ruleset names them: a fork by copy-on-write
	 * mounts an overlay on each, whose root is another inode (agent_landlock_fresh). */
	struct {
		dev_t dev;
		ino_t ino;
	} ll_areas[5];
	bool seccomp_held; /* the agent runs under the workload's filter; commands inherit it */
	struct watch w_listen, w_conn, w_sig;
	struct agent_cmd *cmds[AGENT_MAX_CMDS];
	size_t n_cmds;
	/* When (CLOCK_MONOTONIC ms) the first kept output of a finished command is due to be
	 * freed, or earlier (0 at start); UINT64_MAX: none is due until a daemon connects. The
	 * table is only looked through once this time has come, not at every wake-up. */
	uint64_t kept_due;
	struct {
		pid_t pid;
		int ctl;
		uint32_t jobs; /* commands it has served */
		uint64_t since_ms;
	} idle[AGENT_IDLE_SHIMS]; /* shims waiting for a command, oldest first */
	size_t n_idle;
	uint8_t *rbuf; /* inbound bytes from the daemon */
	size_t rlen, rcap;
	/* Every frame to the daemon is built here (agent_frame): one allocation kept, where
	 * musl's malloc mapped and unmapped a page around each frame (a page fault and two
	 * system calls, twice a command). */
	struct proto_buf out;
	/* A command's four pipes (stdin, stdout, stderr, report: read end, write end each),
	 * made after a command has ended, while nothing waits on the agent, for the next
	 * command to take instead of making them while it starts (~25 us). The agent's ends
	 * are already non-blocking; all are close-on-exec. */
	int spare[8];
	bool have_spare;
};

/* agent.c */
/* Before a command starts: the ruleset again, and the idle shims (which hold the old one)
 * let go, when a writable area is now another inode (an overlay of a fork). */
void agent_landlock_fresh(struct agent *a);

/* cmd.c */
int agent_cmd_exec(struct agent *a, const struct proto_msg *m, const uint8_t *frame, size_t len);
struct agent_cmd *agent_cmd_find(struct agent *a, const char *id, size_t len);
void agent_cmd_pump(struct agent *a, struct agent_cmd *c, int stream);
/* Queue stdin (and/or a close); 0, or -errno. */
int agent_cmd_stdin(struct agent *a, struct agent_cmd *c, const void *data, size_t len,
		    bool close_after);
void agent_cmd_stdin_ready(struct agent *a, struct agent_cmd *c);
/* A TTY command's window size; -1 with errno (ENOTTY: it has no PTY, ESRCH: it ended). */
int agent_cmd_resize(struct agent_cmd *c, uint32_t rows, uint32_t cols);
void agent_cmd_reaped(struct agent *a, struct agent_cmd *c, int status);
/* The report pipe is readable: an exec error, or the shim's word that the command ended. */
void agent_cmd_report(struct agent *a, struct agent_cmd *c);
void agent_send_exit(struct agent *a, const struct agent_cmd *c);
void agent_send_output(struct agent *a, const struct agent_cmd *c, int stream, uint64_t off,
		       const char *data, size_t len);
void agent_replay(struct agent *a, struct agent_cmd *c, int stream, uint64_t off);

/* shim.c: the shim process (never returns), and handing an idle one its next command */
__attribute__((noreturn)) void agent_shim_main(struct agent *a, const struct proto_msg *m,
					       int stdio[3], int report_w, int ctl);
/* len at most AGENT_SHIM_JOB_MAX (the shim's buffer); 0, or -1 (it cannot take it now). */
int agent_shim_send(int ctl, const uint8_t *frame, size_t len, const int fds[4]);
/* A KILL for a shim's job-th command: SIGRTMIN's value carries both, so that a signal the
 * agent sent before it knew a command had ended never reaches the next one. */
#define AGENT_KILL_VALUE(job, sig)                                                                 \
	((int)((((uint32_t)(job)&0xffffffu) << 8) | ((uint32_t)(sig)&0xffu)))
/* cmd.c: forget an idle shim that was reaped (any other pid: nothing), and let go the idle
 * shims past their time */
void agent_shim_reaped(struct agent *a, pid_t pid);
/* Every idle shim let go (they hold a ruleset that is no longer the commands' one). */
void agent_shims_retire(struct agent *a);
int agent_shims_expire(struct agent *a); /* ms until the next expiry, -1: none */
int agent_cmds_expire(struct agent *a);	 /* frees kept output due; ms until the next, -1: none */
void agent_cmds_connection(struct agent *a, bool up); /* a daemon connected, or went away */

/* agent.c */
uint64_t agent_now_ms(void);
/* Starts the next frame to the daemon, in a->out. */
struct proto_buf *agent_frame(struct agent *a, enum proto_type type, uint32_t id);
/* Sends the frame (a->out); on failure drops the connection. */
void agent_send(struct agent *a, struct proto_buf *b);
void agent_send_error(struct agent *a, uint32_t id, int err, const char *msg);

#endif
