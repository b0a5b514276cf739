/* SPDX-License-Identifier: MIT */
/*
 * airlockd internals. Locking: one registry mutex (d->mu) guards every
 * sandbox and command field; d->cv is broadcast on every change (new output,
 * an exit, an agent reply, a status change), and waiters re-check their own
 * condition. Frames to an agent are written under that sandbox's send_mu,
 * never under d->mu, so a slow agent cannot stall the registry. SQLite has
 * its own lock (store.c).
 */
#ifndef AL_DAEMON_INTERNAL_H
#define AL_DAEMON_INTERNAL_H

#include "daemon/daemon.h"
#include "daemon/metrics.h"
#include "proto/proto.h"
#include "store/store.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include "common/syscalls.h"

#define DM_ID_LEN 28 /* "sbx_" / "cmd_" + 24 */
#define DM_MAX_LIFETIME_MS (24ull * 3600 * 1000)
/* uid slots (<< 16 above 0x40000000); one-shot runs use 0..0x1fff */
#define DM_SLOT_FIRST 0x2000u
#define DM_SLOT_LAST 0x3fffu
/* The most of the store's time one sandbox's command output may take, in percent
 * (agent_conn.c: a sandbox's connection pauses after each append to keep to it). */
#define DM_OUTPUT_STORE_SHARE 10
/* The stack of each agent worker (agent_io.c), as the API's connection threads'. */
#define DM_WORKER_STACK (256u * 1024)
/* The threads that read every sandbox's agent connection (agent_io.c). */
#define DM_AGENT_WORKERS 4
/* How long an agent worker waits to send an agent its replay (agent_conn.c). */
#define DM_AGENT_REPLAY_MS 5000
#define DM_OUTPUT_PAUSE_MIN_NS 2000000 /* shorter debts are carried over, not slept */

struct dm_cmd {
	char id[DM_ID_LEN + 1];
	struct dm_sbx *sbx;
	uint64_t seq; /* its place in the sandbox's commands (1, 2, ...: the
		       * listing's cursor; numbered again at a daemon's start) */
	char *argv_json;
	char *cwd;
	bool sudo;
	int64_t started_ms, finished_ms;
	int32_t exit_code, signal;
	bool finished;
	enum al_reason reason; /* why it finished (al_reason_name: the store's and the
				* API's spelling); nothing while running */
	uint64_t stored[2];    /* bytes persisted of stdout, stderr */
	uint64_t out_gen;      /* bumped (d->mu held) once each output chunk is in the store;
				* 1 for a command loaded at start, whose output may be there */
	uint64_t deadline_ms;  /* command timeout (epoch ms), 0 none */
	bool timed_out;	       /* we killed it for its timeout */
	bool truncated;	       /* output beyond a cap was dropped */
	bool row_stored;       /* its store row exists (the start path writes it while the
				* agent starts the command; whoever comes second of that
				* write and the command's end writes the end) */
	unsigned refs;	       /* callers using it outside d->mu or waiting for it
				* (dm_cmd_hold): a finished command is forgotten (freed)
				* beyond --keep-commands only when none is */
};

/* A command's end, copied under d->mu so that it can be written to the store without
 * holding it (the agent's reader after a batch of frames; the start path). */
struct dm_cmd_end {
	char id[DM_ID_LEN + 1];
	int64_t finished_ms;
	int32_t exit_code, signal;
	enum al_reason reason;
};

/* A request to the agent waiting for its OK or ERROR (d->mu): 16 a sandbox, so small. */
#define DM_AGENT_MSG_MAX 255 /* bytes of an ERROR's message kept */
struct dm_pending {
	uint32_t id;
	bool done;
	int err; /* 0 = OK */
	uint32_t pid;
	char *msg; /* an ERROR's message (heap), freed by the request */
};

/* A sandbox's lifecycle. The store and the API's JSON spell it dm_sbx_state_name(). */
enum dm_sbx_state {
	DM_SBX_RUNNING,
	DM_SBX_STOPPING, /* its processes are being killed (stored by older versions only) */
	DM_SBX_STOPPED,
	DM_SBX_FAILED,
};

/* Bytes of an agent's frame read before the rest has come (agent_io.c); empty, no buffer. */
struct dm_agent_rx {
	uint8_t *buf;
	size_t len, cap;
};

struct dm_sbx {
	char id[DM_ID_LEN + 1];
	char *team;
	enum dm_sbx_state state;
	int64_t created_ms, expires_ms, stopped_ms;
	pid_t pid;
	uint64_t start_time;
	uid_t host_base;
	char *config_json;     /* the creation parameters */
	struct jail_spec spec; /* its settings, defaults applied (config_json holds them too) */
	char *policy_json;
	int64_t policy_gen;
	unsigned gw_conns;	/* connections its gateway serves at once (net_gateway_conn_budget
				 * of its memory and pids) */
	int64_t gw_quiet_until; /* the watchdog leaves the gateway alone until then (a start or
				 * an update is in progress) */
	char *workdir;
	bool image; /* an --image root: its CA lives in /run/airlock, not /etc */
	char **env; /* KEY=VALUE for every command */
	uint64_t timeout_ms;

	int agent_fd;		/* -1 when not connected */
	uint32_t agent_version; /* its HELLO's VERSION (0: none yet); 1 has no PTY */
	pthread_mutex_t send_mu;
	bool agent_served;     /* its connection is served by the agent workers: s stays */
	bool hello_seen;       /* its agent said HELLO on this connection (the worker's) */
	struct dm_agent_rx rx; /* the start of a frame not read whole (the worker's) */
	bool cgroup_left;      /* ended, but its cgroup is not removed yet (timer retries) */
	int root_held;	       /* a stopped sandbox's mount namespace, until the timer closes
				* it (jail_sandbox_end_held), or -1 */
	uint32_t next_req;
	struct dm_pending pending[16];
	int64_t out_debt_ns; /* the worker's: store time its output still owes as a pause */
	uint64_t out_total;  /* output bytes its kept commands have in the store (d->mu;
			      * at start, what the store has of them) */
	uint64_t rec_total;  /* bytes of its kept commands' records (argv, cwd: what the
			      * tenant chose, in memory and the store), against
			      * --sandbox-records-max (d->mu) */

	struct dm_cmd **cmds; /* in start order, seq increasing */
	size_t n_cmds;
	uint64_t cmd_seq;    /* the last seq given */
	pthread_cond_t cv;   /* this sandbox's events (under d->mu): replies, output, exits */
	uint64_t gen;	     /* bumped with every change cv's waiters look for (each frame
			      * from the agent, ...), before cv is broadcast: waiters compare
			      * it, so no wake-up is lost */
	uint64_t woken_gen;  /* gen when the reader last woke cv's waiters (d->mu held) */
	bool warm;	     /* taken from the warm pool (started before its create) */
	bool expiry_snapped; /* the timer took its persistent name's snapshot at expiry */
	unsigned refs;	     /* callers using it outside d->mu (dm_hold_sbx): an ended
			      * sandbox is forgotten (freed) only when none is */

	/* Bytes of its egress log the metrics have counted (d->mu; a scrape moves it, under
	 * m.scrape_mu: metrics_read.c). */
	uint64_t egress_off;
};

struct daemon {
	struct daemon_opts opts;
	char *state_dir, *agent_path, *sock_dir;
	struct store *store;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct dm_sbx **sbxs;
	size_t n_sbxs;
	bool closing;
	uid_t reserved[64]; /* uid ranges of creates in flight (not yet in sbxs) */
	size_t n_reserved;
	char **creating; /* the team of each create in flight (--team-max-sandboxes) */
	size_t n_creating;
	pthread_t timer, reaper;
	pthread_mutex_t spawn_mu; /* one create at a time through the spawner (spawner.c) */
	pthread_cond_t pool_cv;	  /* a pooled sandbox was taken (pool.c refills) */
	pthread_t pool_thread;	  /* joined at close: a create it has in flight must land */
	bool pool_running;
	uint64_t pool_taken, pool_missed; /* creates served warm / cold while a pool is kept */
	int spawner_fd; /* its end of the channel, -1 when it must be forked again */
	pid_t spawner_pid;
	char *spawner_exe; /* the static airlock binary next to airlockd, or NULL */
	int lock_fd;	   /* holds the state directory's flock (statelock.c), or -1 */

	/* GET /metrics: its counters (metrics.c). */
	struct dm_metrics m;
	struct dm_snaps *snaps;	  /* snapshots.c */
	struct dm_drives *drives; /* drives.c */
	struct dm_names *names;	  /* names.c */
	struct dm_cows *cows;	  /* cowfork.c */
	struct dm_agent_io *aio;  /* agent_io.c: the workers reading every agent */
};

/* d->mu held for a scope: `_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);` (as
 * the store's _cleanup_unlock_): every exit of the scope lets go of it. */
static inline struct daemon *dm_lock(struct daemon *d)
{
	pthread_mutex_lock(&d->mu);
	return d;
}
static inline void dm_unlockp(struct daemon **locked)
{
	if (*locked)
		pthread_mutex_unlock(&(*locked)->mu);
}
#define _cleanup_dm_unlock_ __attribute__((cleanup(dm_unlockp), unused))

/* registry.c */
/* The daemon's one log sink: a line "airlockd: ..." on stderr. For what fails with no
 * caller to tell (a timer, the reaper, a best-effort store write): logged, not dropped. */
void dm_log(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* dm_log of "<fmt>: <the error's message>"; frees *err (and sets it NULL). */
void dm_log_err(struct daemon *d, struct al_error **err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int64_t dm_now_ms(void);
const char *dm_sbx_state_name(enum dm_sbx_state st);
/* A state as the store spells it; -EINVAL for anything else. */
int dm_sbx_state_parse(const char *name, enum dm_sbx_state *out);
void dm_new_id(const char *prefix, char out[DM_ID_LEN + 1]);
/* With d->mu held: the team's sandbox, or NULL (sets err ENOENT). */
struct dm_sbx *dm_find_sbx(struct daemon *d, const char *team, const char *id,
			   struct al_error **err);
/* A caller that uses a sandbox (or one of its commands) after it lets go of d->mu, or
 * waits on its cv, holds it (dm_sbx_hold, d->mu held) until done (dm_sbx_put, with or
 * without d->mu): a held sandbox is never forgotten (freed) by the retention
 * (retention.c: forget_ended). */
void dm_sbx_hold(struct dm_sbx *s);
void dm_sbx_put(struct dm_sbx *s);
/* The same for one command (retention.c: forget_old_cmds); its sandbox is held apart. */
void dm_cmd_hold(struct dm_cmd *c);
void dm_cmd_put(struct dm_cmd *c);
struct dm_cmd *dm_find_cmd(struct dm_sbx *s, const char *id);
/* The sandbox ended (agent gone): finish its running commands, persist, wake waiters.
 * Called with d->mu held. */
void dm_sbx_ended(struct daemon *d, struct dm_sbx *s, enum dm_sbx_state final);
json_t *dm_cmd_json(const struct dm_cmd *c);
void dm_cmd_free(struct dm_cmd *c);
void dm_sbx_free(struct dm_sbx *s);
/* Stopped or failed: nothing of it runs any more, nothing will. */
bool dm_sbx_has_ended(const struct dm_sbx *s);
/* d->mu held: stop s (kill its sandbox) and record `final`. */
int dm_sbx_stop_locked(struct daemon *d, struct dm_sbx *s, enum dm_sbx_state final);
/* d->mu held: s joins the registry. */
void dm_sbx_add(struct daemon *d, struct dm_sbx *s);
/* *v -= x, never below 0. */
void dm_sub_floor0(uint64_t *v, uint64_t x);
/* A command's end reason as the store spells it; -EINVAL for anything else. */
int dm_reason_parse(const char *name, enum al_reason *out);

/* retention.c: the timer and reaper threads, and what they forget. */
void *dm_timer_main(void *arg);
void *dm_reaper_main(void *arg);
/* d->mu held (dropped around the attempts): one try at the cgroups and held roots of
 * ended sandboxes not removed yet; how many are still left. */
size_t dm_reclaim_cgroups(struct daemon *d);
/* ports.c: a create's or an update's ports (EINVAL naming the offence), and their JSON */
int dm_ports_check(const uint16_t *ports, size_t n, struct al_error **err);
json_t *dm_ports_json(const uint16_t *ports, size_t n);
/* Appends o (taken; NULL: nothing) as one line of sandbox id's egress log, as long as the log
 * is under 64 MiB. Lines of airlockd's own carry a "direction" (the metrics skip them). */
void dm_sandbox_log_line(struct daemon *d, const char *id, json_t *o);

/* Remove STATE/egress/<id>.jsonl of sandboxes the store no longer has (at start). */
void dm_prune_egress_logs(struct daemon *d);
/* The bytes of a command's record that count against its sandbox's records budget. */
uint64_t dm_cmd_rec_bytes(const struct dm_cmd *c);
/* Command ids taken out of memory, to delete from the store once d->mu is dropped. */
struct dm_ids {
	char (*id)[DM_ID_LEN + 1];
	size_t n, cap;
};
/* d->mu held: forgets s's oldest finished commands (nobody holds, stored) until at most
 * --keep-commands finished ones are left and its records with `extra` more bytes fit in
 * --sandbox-records-max; their ids go to *ids. True if the budget then has room for
 * extra. */
bool dm_cmds_trim(struct daemon *d, struct dm_sbx *s, uint64_t extra, struct dm_ids *ids);
/* Deletes those commands' rows and output from the store (d->mu NOT held); frees ids. */
void dm_ids_delete(struct daemon *d, struct dm_ids *ids);

/* statelock.c: one daemon per state directory; EBUSY (naming the other's pid) if taken */
int dm_state_lock(struct daemon *d, struct al_error **err);
void dm_state_unlock(struct daemon *d);

/* agent_conn.c */
/* Connects to s's agent and has the agent workers read it (agent_served until it ends). */
int dm_agent_connect(struct daemon *d, struct dm_sbx *s, struct al_error **err);
/* For the workers (d->mu NOT held): handles the whole frames at the start of buf[0..len),
 * returns the bytes they took, or -1 if the agent broke the protocol. */
long dm_agent_frames(struct daemon *d, struct dm_sbx *s, const uint8_t *buf, size_t len);
/* Its connection ended (EOF, error, or a broken protocol): closes it; a running sandbox
 * is killed and ends as failed; agent_served false last. */
void dm_agent_gone(struct daemon *d, struct dm_sbx *s);
/* The pause (ns) s's output owes the store now, or 0 while it is under the minimum. */
int64_t dm_agent_take_pause(struct dm_sbx *s);
/* Send a request and wait for its OK/ERROR (d->mu NOT held). Returns 0, or -errno with
 * the agent's message in err. */
int dm_agent_request(struct daemon *d, struct dm_sbx *s, struct proto_buf *b, uint32_t *pid,
		     struct al_error **err);
uint32_t dm_agent_next_id(struct dm_sbx *s);
/* Fire-and-forget frame (d->mu NOT held). */
int dm_agent_send(struct dm_sbx *s, struct proto_buf *b);

/* agent_io.c: DM_AGENT_WORKERS threads on one epoll set read every agent. open before any
 * connect (a daemon's recovery connects), start once the daemon is ready. */
int dm_agent_io_open(struct daemon *d, struct al_error **err);
int dm_agent_io_start(struct daemon *d, struct al_error **err);
/* s->agent_fd joins the set, armed (dm_agent_connect). */
int dm_agent_io_watch(struct daemon *d, struct dm_sbx *s, struct al_error **err);

/* commands.c: dm_cmd_end_copy with d->mu held; dm_cmd_end_store without it. */
void dm_cmd_end_copy(const struct dm_cmd *c, struct dm_cmd_end *out);
void dm_cmd_end_store(struct daemon *d, const struct dm_cmd_end *e);

/* netgw.c: the sandbox's network gateway */
bool dm_policy_is_deny_all(const char *json);
bool dm_gateway_running(struct daemon *d, const char *id);
/* A create with a policy starts the sandbox's gateway before the sandbox (it gets its
 * namespace, ruleset and listeners ready meanwhile), then attaches it to the new PID 1. */
struct dm_gw_launch {
	pid_t child;
	int fd;
};
int dm_gateway_launch(struct daemon *d, const char *id, const char *policy, int64_t gen,
		      unsigned conns, struct dm_gw_launch *gl, struct al_error **err);
int dm_gateway_attach(struct dm_gw_launch *gl, pid_t pid, struct al_error **err);
void dm_gateway_abort(struct dm_gw_launch *gl);
void *dm_netwatch_main(void *arg); /* restarts dead gateways (a detached thread) */
char *dm_egress_log_path(struct daemon *d, const char *id);
/* The sandbox CA's directory on the host, STATE/ca/<id> (the gateway makes the CA there). */
char *dm_ca_dir(struct daemon *d, const char *id);
/* Forget a sandbox's CA (it ended). */
void dm_ca_remove(struct daemon *d, const char *id);
/* Has the sandbox a CA (a policy with per-request rules was applied)? */
bool dm_sandbox_has_ca(struct daemon *d, const char *id);
/* Put policy (compact JSON) in force for sandbox id (PID 1 pid): starts its gateway (serving
 * conns connections at once) the first time it is not deny-all, else pushes it; returns
 * once in force. */
int dm_apply_policy(struct daemon *d, const char *id, pid_t pid, const char *policy, int64_t gen,
		    unsigned conns, struct al_error **err);

/*
 * pool.c. The warm pool: with opts.pool > 0, that many fresh sandboxes are kept
 * running under the team "" (no token has it: the API cannot see them), for each of
 * the native and the Vercel workdir. A create that fits them (host runtime,
 * default disk, one of those workdirs) takes one: its team,
 * times, limits, env and policy are set then; nothing ran in it before.
 */
#define DM_POOL_MAX DM_POOL_LIMIT
#define DM_POOL_TEAM ""
void *dm_pool_main(void *arg);
/* A running sandbox of the pool, not yet handed out (under d->mu). */
static inline bool dm_sbx_pooled(const struct dm_sbx *s)
{
	return s->team[0] == '\0' && s->state == DM_SBX_RUNNING;
}
bool dm_pool_fits(const struct dm_create *c);
/* The pooled sandboxes ready now (under d->mu). */
size_t dm_pool_ready(struct daemon *d, const char *workdir);

/* metrics.c: the counters of GET /metrics, bumped with relaxed atomics (no lock needed) */
void dm_metrics_init(struct daemon *d);
uint64_t dm_mono_us(void);
/* CLOCK_MONOTONIC in ns (the agent workers' pauses and timerfd, agent_io.c). */
int64_t dm_mono_ns(void);
/* A create or a stop that began at t0_us (dm_mono_us) returned r, with *err on failure. */
void dm_metrics_create(struct daemon *d, int r, const struct al_error *err, uint64_t t0_us);
void dm_metrics_stop(struct daemon *d, int r, const struct al_error *err, uint64_t t0_us);
/* c has just finished (its reason, started_ms and finished_ms are set). */
void dm_metrics_cmd_end(struct daemon *d, const struct dm_cmd *c);
void dm_metrics_gw_restart(struct daemon *d, bool ok);

/* metrics_read.c: what a scrape reads besides the counters (m.scrape_mu held, d->mu not) */
/* The size of a sandbox's egress log (0 if none): where the metrics of a sandbox loaded
 * at start begin, so that a restart does not count its decisions twice. */
uint64_t dm_egress_log_size(struct daemon *d, const char *id);
/* Counts the decisions and bytes of id's egress log from byte off, reading at most max
 * bytes of it; returns the offset after the last whole line counted. */
uint64_t dm_metrics_egress_tail(struct daemon *d, const char *id, uint64_t off, uint64_t max);
/* The ids of the sandboxes that have an egress log now, sorted. */
struct dm_egress_logs {
	char (*id)[DM_ID_LEN + 1];
	size_t n;
};
void dm_egress_logs_list(struct daemon *d, struct dm_egress_logs *out);
bool dm_egress_logs_has(const struct dm_egress_logs *l, const char *id);
void dm_egress_logs_free(struct dm_egress_logs *l);

/* snapshots.c: the snapshot store (STATE/snapshots), loaded at open; the timer expires */
int dm_snaps_open(struct daemon *d, struct al_error **err);
void dm_snaps_close(struct daemon *d);
void dm_snaps_expire(struct daemon *d);
/* drives.c: the drives' records (STATE/drives), loaded at open */
int dm_drives_open(struct daemon *d, struct al_error **err);
void dm_drives_close(struct daemon *d);
/* names.c: the names' records (STATE/names), loaded at open */
int dm_names_open(struct daemon *d, struct al_error **err);
void dm_names_close(struct daemon *d);

/* spawner.c: the spawner process, forked while the daemon is small. */
int dm_spawner_start(struct daemon *d, struct al_error **err);
void dm_spawner_stop(struct daemon *d);
int dm_spawn(struct daemon *d, struct dm_sbx *s, struct al_error **err);

#endif
