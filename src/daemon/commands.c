/* SPDX-License-Identifier: MIT */
/* airlockd: commands in a sandbox -- start, inspect, wait, stdin, kill, logs. */
#include "host/ca_bundle.h"
#include "daemon/internal.h"
#include "net/contract.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/path.h"
#include "common/xalloc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct dm_sbx *running_sbx(struct daemon *d, const char *team, const char *id,
				  struct al_error **err)
{
	struct dm_sbx *s = dm_find_sbx(d, team, id, err);

	if (s && s->state != DM_SBX_RUNNING) {
		al_error_msg(err, ESRCH, "sandbox '%s' is %s", s->id, dm_sbx_state_name(s->state));
		return NULL;
	}
	return s;
}

/* A sandbox whose agent predates protocol version 2 (made by an older airlockd that this
 * one found running): no PTY there. NULL with err. */
static struct dm_sbx *old_agent(struct dm_sbx *s, struct al_error **err)
{
	al_error_msg(err, ENOTTY,
		     "sandbox '%s' runs an agent of protocol version 1, without terminals "
		     "(a sandbox made by this airlockd has them)",
		     s->id);
	return NULL;
}

static int too_long(const char *s)
{
	return strlen(s) > PROTO_MAX_STR;
}

static int validate_exec(const struct dm_exec *e, struct al_error **err)
{
	size_t total = 0;

	if (!e->cmd || !e->cmd[0])
		return al_error_msg(err, EINVAL, "cmd must be a non-empty string");
	/* The agent protocol's limits: refuse here rather than send a frame it would reject. */
	if (too_long(e->cmd) || (e->cwd && too_long(e->cwd)))
		return al_error_msg(err, E2BIG, "cmd and cwd are limited to %u bytes",
				    PROTO_MAX_STR);
	for (size_t i = 0; i < e->n_args; i++) {
		if (too_long(e->args[i]))
			return al_error_msg(err, E2BIG, "args[%zu] is over %u bytes", i,
					    PROTO_MAX_STR);
		total += strlen(e->args[i]) + 8;
	}
	for (size_t i = 0; i < e->n_env; i++) {
		if (too_long(e->env[i]))
			return al_error_msg(err, E2BIG, "an env entry is over %u bytes",
					    PROTO_MAX_STR);
		total += strlen(e->env[i]) + 8;
	}
	if (total > PROTO_MAX_FRAME / 2)
		return al_error_msg(err, E2BIG, "args and env together are over %u bytes",
				    PROTO_MAX_FRAME / 2);
	if (e->cwd && e->cwd[0] != '/')
		return al_error_msg(err, EINVAL, "cwd must be an absolute path");
	if (e->tty && (e->rows > PROTO_MAX_WINSIZE || e->cols > PROTO_MAX_WINSIZE))
		return al_error_msg(err, EINVAL, "rows and cols must be 1..%u", PROTO_MAX_WINSIZE);
	if (e->n_args > 4000 || e->n_env > 4000)
		return al_error_msg(err, E2BIG, "too many args or env entries");
	for (size_t i = 0; i < e->n_env; i++) {
		const char *eq = strchr(e->env[i], '=');
		if (!eq || eq == e->env[i])
			return al_error_msg(err, EINVAL, "env entry '%.64s' is not KEY=VALUE",
					    e->env[i]);
	}
	return 0;
}

static char *argv_json(const struct dm_exec *e)
{
	json_t *a = json_array();
	char *s;

	json_array_append_new(a, json_string(e->cmd));
	for (size_t i = 0; i < e->n_args; i++)
		json_array_append_new(a, json_string(e->args[i]));
	s = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	return s;
}

/* Does a later entry of all[i+1..n) set the same variable as all[i]? */
static bool overridden(const char *const *all, size_t n, size_t i)
{
	size_t klen = strcspn(all[i], "=");

	for (size_t j = i + 1; j < n; j++)
		if (strncmp(all[j], all[i], klen) == 0 && all[j][klen] == '=')
			return true;
	return false;
}

/* Small stdin (the usual case: none) rides in the EXEC with its end: no STDIN/STDIN_CLOSE
 * exchange, which cost a command ~0.1 ms of agent and daemon wake-ups before it ran. */
#define DM_EXEC_STDIN_MAX (64u * 1024)

/* The EXEC frame. Environment: the base, then the sandbox's, then the command's -- a later
 * entry replaces an earlier one of the same name. True if it carries the command's stdin
 * (then nothing more is sent). */
static bool build_exec(struct proto_buf *b, uint32_t req, const struct dm_cmd *c,
		       const struct dm_sbx *s, const struct dm_exec *e, bool with_net, bool with_ca)
{
	static const char *const base[] = {
	    "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin", "HOME=/home/user",
	    "LANG=C.UTF-8"};
	static const char *const proxy[] = {
	    "HTTP_PROXY=http://100.96.0.1:3128", "HTTPS_PROXY=http://100.96.0.1:3128",
	    "http_proxy=http://100.96.0.1:3128", "https_proxy=http://100.96.0.1:3128",
	    "NO_PROXY=localhost,127.0.0.1",	 "no_proxy=localhost,127.0.0.1"};
	uint32_t uid = e->sudo ? 0 : 1000;
	size_t n_sbx = 0, n = 0;
	const char **all;

	while (s->env && s->env[n_sbx])
		n_sbx++;
	const char *const *ca = net_ca_env(s->image);

	all = xzalloc((3 + 6 + NET_CA_ENV_N + n_sbx + e->n_env) * sizeof(*all));
	for (size_t i = 0; i < 3; i++)
		all[n++] = base[i];
	for (size_t i = 0; with_net && i < 6; i++)
		all[n++] = proxy[i]; /* the sandbox has a gateway: explicit-proxy clients use it */
	for (size_t i = 0; with_ca && i < NET_CA_ENV_N; i++)
		all[n++] = ca[i]; /* it terminates TLS for some domains: trust its CA */
	for (size_t i = 0; i < n_sbx; i++)
		all[n++] = s->env[i];
	for (size_t i = 0; i < e->n_env; i++)
		all[n++] = e->env[i];

	proto_begin(b, PROTO_EXEC, req);
	proto_put_str(b, PT_CMD_ID, c->id, strlen(c->id));
	proto_put_str(b, PT_ARG, e->cmd, strlen(e->cmd));
	for (size_t i = 0; i < e->n_args; i++)
		proto_put_str(b, PT_ARG, e->args[i], strlen(e->args[i]));
	for (size_t i = 0; i < n; i++)
		if (!overridden(all, n, i))
			proto_put_str(b, PT_ENV, all[i], strlen(all[i]));
	proto_put_str(b, PT_CWD, c->cwd, strlen(c->cwd));
	proto_put_u32(b, PT_UID, uid);
	free(all);
	if (e->tty) {
		proto_put_u8(b, PT_TTY, 1);
		proto_put_u32(b, PT_ROWS, e->rows ? e->rows : 24);
		proto_put_u32(b, PT_COLS, e->cols ? e->cols : 80);
	}
	/* Only while the frame stays well inside its limit (a huge argv comes first). */
	if (e->stdin_len > DM_EXEC_STDIN_MAX || b->len + e->stdin_len + 64 > PROTO_MAX_FRAME / 2)
		return false;
	if (e->stdin_len)
		proto_put_bytes(b, PT_DATA, e->stdin_data, e->stdin_len);
	if (!e->keep_stdin)
		proto_put_u8(b, PT_STDIN_EOF, 1);
	return true;
}

static int send_stdin(struct daemon *d, struct dm_sbx *s, const char *id, const void *data,
		      size_t len, bool close_after, struct al_error **err)
{
	const char *p = data;

	while (len > 0) {
		struct proto_buf b = {0};
		size_t n = len < 256 * 1024 ? len : 256 * 1024;

		proto_begin(&b, PROTO_STDIN, dm_agent_next_id(s));
		proto_put_str(&b, PT_CMD_ID, id, strlen(id));
		proto_put_bytes(&b, PT_DATA, p, n);
		if (dm_agent_request(d, s, &b, NULL, err) < 0)
			return -1;
		p += n;
		len -= n;
	}
	if (close_after) {
		struct proto_buf b = {0};

		proto_begin(&b, PROTO_STDIN_CLOSE, dm_agent_next_id(s));
		proto_put_str(&b, PT_CMD_ID, id, strlen(id));
		return dm_agent_request(d, s, &b, NULL, err);
	}
	return 0;
}

/* A command whose row could not be written: never sent, it is forgotten. */
static void forget(struct daemon *d, struct dm_sbx *s, struct dm_cmd *c)
{
	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < s->n_cmds; i++)
		if (s->cmds[i] == c) {
			memmove(&s->cmds[i], &s->cmds[i + 1], (s->n_cmds - i - 1) * sizeof(c));
			s->n_cmds--;
			s->rec_total -= dm_cmd_rec_bytes(c);
			break;
		}
	pthread_mutex_unlock(&d->mu);
	free(c->argv_json), free(c->cwd), free(c);
}

void dm_cmd_end_copy(const struct dm_cmd *c, struct dm_cmd_end *out)
{
	snprintf(out->id, sizeof(out->id), "%s", c->id);
	out->finished_ms = c->finished_ms;
	out->exit_code = c->exit_code;
	out->signal = c->signal;
	out->reason = c->reason;
}

/* Best effort: the end is in memory already, and a restarted daemon learns it again from
 * the agent (or ends the command with its sandbox). */
void dm_cmd_end_store(struct daemon *d, const struct dm_cmd_end *e)
{
	struct al_error *err = NULL;

	if (store_command_finish(d->store, e->id, e->finished_ms, e->exit_code, e->signal,
				 al_reason_name(e->reason), &err) < 0)
		dm_log_err(d, &err, "command %s ended", e->id);
}

/*
 * Write the command's row, not under d->mu (the store costs ~40 us, which every other
 * request would wait for). If the command has already ended by then (its EXIT found no
 * row to update), its end is written here. -1 if the row could not be written.
 */
static int store_new_cmd(struct daemon *d, struct dm_sbx *s, struct dm_cmd *c,
			 struct al_error **err)
{
	struct store_command row = {
	    .id = c->id,
	    .sandbox_id = s->id,
	    .argv_json = c->argv_json,
	    .cwd = c->cwd,
	    .sudo = c->sudo,
	    .started_ms = c->started_ms,
	    .deadline_ms = (int64_t)c->deadline_ms,
	};
	struct dm_cmd_end end;
	bool ended;

	if (store_command_put(d->store, &row, err) < 0)
		return -1;
	pthread_mutex_lock(&d->mu);
	c->row_stored = true;
	ended = c->finished;
	if (ended)
		dm_cmd_end_copy(c, &end);
	pthread_mutex_unlock(&d->mu);
	if (ended)
		dm_cmd_end_store(d, &end);
	return 0;
}

/*
 * d->mu held: room for c's record (argv, cwd) in s's records budget, made by forgetting
 * its oldest finished commands (their ids go to *gone); s, or NULL when the running ones
 * leave none (EAGAIN: 429) or c alone is over the budget (E2BIG: 413).
 */
static struct dm_sbx *fit_record(struct daemon *d, struct dm_sbx *s, struct dm_cmd *c,
				 struct dm_ids *gone, struct al_error **err)
{
	uint64_t need = dm_cmd_rec_bytes(c);
	uint64_t budget =
	    d->opts.sbx_records_max ? d->opts.sbx_records_max : DM_SBX_RECORDS_DEFAULT;

	if (need > budget) {
		al_error_msg(err, E2BIG,
			     "the command's args and cwd (%llu bytes) are over the "
			     "sandbox's records budget (--sandbox-records-max %llu)",
			     (unsigned long long)need, (unsigned long long)budget);
		return NULL;
	}
	if (!dm_cmds_trim(d, s, need, gone)) {
		al_error_msg(err, EAGAIN,
			     "the sandbox's running commands' args fill its records "
			     "budget (--sandbox-records-max %llu): retry when one has ended",
			     (unsigned long long)budget);
		return NULL;
	}
	s->rec_total += need;
	return s;
}

/* dm_cmd_start; *held is the command it made and held with its sandbox (to put), if it
 * found the sandbox. */
static int start(struct daemon *d, const char *team, const char *sbx, const struct dm_exec *e,
		 char **out_cmd_id, struct dm_cmd **held, struct al_error **err)
{
	struct proto_buf b = {0};
	struct dm_sbx *s;
	struct dm_cmd *c;
	char id[DM_ID_LEN + 1];
	bool stdin_sent, with_net;
	_cleanup_free_ char *cwd = NULL;
	struct dm_ids gone = {0};
	struct al_error *late = NULL;

	if (validate_exec(e, err) < 0 ||
	    (e->cwd && al_path_normalize(e->cwd, "cwd", &cwd, err) < 0))
		return -1;
	/* What needs no sandbox is made before the lock every request takes. */
	c = xzalloc(sizeof(*c));
	dm_new_id("cmd_", c->id);
	c->argv_json = argv_json(e);
	pthread_mutex_lock(&d->mu);
	s = running_sbx(d, team, sbx, err);
	if (s && e->tty && s->agent_version == 1)
		s = old_agent(s, err);
	if (s) {
		c->cwd = cwd ? TAKE_PTR(cwd) : xstrdup(s->workdir);
		s = fit_record(d, s, c, &gone, err);
	}
	if (!s) {
		pthread_mutex_unlock(&d->mu);
		dm_ids_delete(d, &gone);
		free(c->argv_json), free(c->cwd), free(c);
		return -1;
	}
	dm_sbx_hold(s);
	dm_cmd_hold(c);
	*held = c;
	c->sbx = s;
	c->sudo = e->sudo;
	c->started_ms = dm_now_ms();
	/* A timeout past the end of time (the API takes up to INT64_MAX ms) is no deadline to
	 * meet, not one that wrapped into the past: saturated at INT64_MAX. */
	c->deadline_ms = !e->timeout_ms ? 0
			 : e->timeout_ms > (uint64_t)(INT64_MAX - c->started_ms)
			     ? (uint64_t)INT64_MAX
			     : (uint64_t)c->started_ms + e->timeout_ms;
	c->seq = ++s->cmd_seq;
	s->cmds = xrealloc(s->cmds, (s->n_cmds + 1) * sizeof(*s->cmds));
	s->cmds[s->n_cmds++] = c;
	/* A policy that allows something means a gateway (the watchdog keeps one running),
	 * and only then a CA to trust (no look in the file system, under d->mu, otherwise). */
	with_net = !dm_policy_is_deny_all(s->policy_json);
	stdin_sent = build_exec(&b, dm_agent_next_id(s), c, s, e, with_net,
				with_net && dm_sandbox_has_ca(d, s->id));
	strcpy(id, c->id);
	pthread_mutex_unlock(&d->mu);
	dm_ids_delete(d, &gone);

	if (store_new_cmd(d, s, c, err) < 0) {
		*held = NULL; /* freed here: the puts are ours */
		dm_cmd_put(c);
		dm_sbx_put(s);
		forget(d, s, c);
		proto_buf_free(&b);
		return -1;
	}
	if (dm_agent_request(d, s, &b, NULL, err) < 0) {
		pthread_mutex_lock(&d->mu);
		if (!c->finished) {
			c->finished = true;
			c->reason = AL_REASON_SETUP_FAILED;
			c->finished_ms = dm_now_ms();
			dm_metrics_cmd_end(d, c);
			/* The caller gets the agent's error; the store's is logged. */
			if (store_command_finish(d->store, c->id, c->finished_ms, -1, 0,
						 al_reason_name(c->reason), &late) < 0)
				dm_log_err(d, &late, "command %s ended", c->id);
		}
		s->gen++;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&d->mu);
		return al_error_wrap(err, "starting the command");
	}
	/* The command runs now: whatever happens to its stdin, never report a failure that
	 * would make a client start it again. If it ended or closed stdin before taking it
	 * all, the rest is dropped -- as with a pipe. */
	if (!stdin_sent) {
		struct al_error *ignored = NULL;

		send_stdin(d, s, id, e->stdin_data, e->stdin_len, !e->keep_stdin, &ignored);
		al_error_free(ignored);
	}
	*out_cmd_id = xstrdup(id);
	return 0;
}

int dm_cmd_start(struct daemon *d, const char *team, const char *sbx, const struct dm_exec *e,
		 char **out_cmd_id, struct al_error **err)
{
	struct dm_cmd *held = NULL;
	int r = start(d, team, sbx, e, out_cmd_id, &held, err);

	if (held) {
		struct dm_sbx *s = held->sbx;

		dm_cmd_put(held);
		dm_sbx_put(s);
	}
	return r;
}

/* With d->mu held: the team's sandbox and its command. */
static struct dm_cmd *find(struct daemon *d, const char *team, const char *sbx, const char *cmd,
			   struct al_error **err)
{
	struct dm_sbx *s = dm_find_sbx(d, team, sbx, err);
	struct dm_cmd *c = s ? dm_find_cmd(s, cmd) : NULL;

	if (s && !c)
		al_error_msg(err, ENOENT, "no command '%.64s' in sandbox '%s'", cmd, s->id);
	return c;
}

int dm_cmd_get(struct daemon *d, const char *team, const char *sbx, const char *cmd, json_t **out,
	       struct al_error **err)
{
	return dm_cmd_wait(d, team, sbx, cmd, 0, out, err);
}

int dm_cmd_wait(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		uint64_t timeout_ms, json_t **out, struct al_error **err)
{
	struct timespec ts;
	struct dm_cmd *c;
	int r = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(timeout_ms / 1000);
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000)
		ts.tv_sec++, ts.tv_nsec -= 1000000000;
	pthread_mutex_lock(&d->mu);
	c = find(d, team, sbx, cmd, err);
	if (c) /* its sandbox's cv is waited on */
		dm_sbx_hold(c->sbx), dm_cmd_hold(c);
	while (c && timeout_ms && !c->finished && r == 0)
		r = pthread_cond_timedwait(&c->sbx->cv, &d->mu, &ts);
	if (c) /* d->mu is held: neither can be forgotten before we are done below */
		dm_sbx_put(c->sbx), dm_cmd_put(c);
	if (c && timeout_ms && !c->finished)
		r = al_error_msg(err, ETIMEDOUT, "command '%s' still running", c->id);
	else if (c)
		*out = dm_cmd_json(c), r = 0;
	else
		r = -ENOENT;
	pthread_mutex_unlock(&d->mu);
	return r;
}

int dm_cmd_list(struct daemon *d, const char *team, const char *sbx, uint64_t cursor, size_t limit,
		json_t **out, uint64_t *next, struct al_error **err)
{
	struct dm_sbx *s;
	size_t lo = 0, hi;

	*next = 0;
	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, sbx, err);
	if (s) {
		/* seq increases along cmds: the first one after the cursor, by bisection. */
		hi = s->n_cmds;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (s->cmds[mid]->seq <= cursor)
				lo = mid + 1;
			else
				hi = mid;
		}
		*out = json_array();
		for (size_t i = lo; i < s->n_cmds && i - lo < limit; i++)
			json_array_append_new(*out, dm_cmd_json(s->cmds[i]));
		if (s->n_cmds - lo > limit)
			*next = s->cmds[lo + limit - 1]->seq;
	}
	pthread_mutex_unlock(&d->mu);
	return s ? 0 : -ENOENT;
}

int dm_cmd_write_stdin(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		       const void *data, size_t len, bool close_after, struct al_error **err)
{
	struct dm_sbx *s = NULL;
	struct dm_cmd *c;
	char id[DM_ID_LEN + 1];
	int r;

	pthread_mutex_lock(&d->mu);
	c = find(d, team, sbx, cmd, err);
	if (c && c->finished)
		al_error_msg(err, ESRCH, "command '%s' has finished", c->id), c = NULL;
	else if (c)
		s = c->sbx, strcpy(id, c->id), dm_sbx_hold(s);
	pthread_mutex_unlock(&d->mu);
	if (!c)
		return -1;
	r = send_stdin(d, s, id, data, len, close_after, err);
	dm_sbx_put(s);
	return r;
}

int dm_cmd_kill(struct daemon *d, const char *team, const char *sbx, const char *cmd, int sig,
		struct al_error **err)
{
	struct proto_buf b = {0};
	struct dm_sbx *s;
	struct dm_cmd *c;
	char id[DM_ID_LEN + 1];
	uint32_t sg = (uint32_t)sig;
	int r;

	if (sig < 1 || sig > 64)
		return al_error_msg(err, EINVAL, "signal %d out of range 1..64", sig);
	pthread_mutex_lock(&d->mu);
	c = find(d, team, sbx, cmd, err);
	if (!c) {
		pthread_mutex_unlock(&d->mu);
		return -1;
	}
	if (c->finished) {
		pthread_mutex_unlock(&d->mu);
		return 0; /* already finished: killing it is a no-op */
	}
	s = c->sbx;
	strcpy(id, c->id);
	dm_sbx_hold(s);
	pthread_mutex_unlock(&d->mu);
	proto_begin(&b, PROTO_KILL, dm_agent_next_id(s));
	proto_put_str(&b, PT_CMD_ID, id, strlen(id));
	proto_put_u32(&b, PT_SIGNAL, sg);
	r = dm_agent_request(d, s, &b, NULL, err);
	dm_sbx_put(s);
	return r;
}

int dm_cmd_resize(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		  unsigned rows, unsigned cols, struct al_error **err)
{
	struct proto_buf b = {0};
	struct dm_sbx *s;
	struct dm_cmd *c;
	char id[DM_ID_LEN + 1];
	int r;

	if (rows < 1 || rows > PROTO_MAX_WINSIZE || cols < 1 || cols > PROTO_MAX_WINSIZE)
		return al_error_msg(err, EINVAL, "rows and cols must be 1..%u", PROTO_MAX_WINSIZE);
	pthread_mutex_lock(&d->mu);
	c = find(d, team, sbx, cmd, err);
	if (c && c->finished)
		al_error_msg(err, ESRCH, "command '%s' has finished", c->id), c = NULL;
	else if (c && c->sbx->agent_version == 1)
		c = old_agent(c->sbx, err) ? c : NULL;
	if (!c) {
		pthread_mutex_unlock(&d->mu);
		return -1;
	}
	s = c->sbx;
	strcpy(id, c->id);
	dm_sbx_hold(s);
	pthread_mutex_unlock(&d->mu);
	proto_begin(&b, PROTO_RESIZE, dm_agent_next_id(s));
	proto_put_str(&b, PT_CMD_ID, id, strlen(id));
	proto_put_u32(&b, PT_ROWS, rows);
	proto_put_u32(&b, PT_COLS, cols);
	r = dm_agent_request(d, s, &b, NULL, err);
	dm_sbx_put(s);
	return r;
}

/* --- logs ---------------------------------------------------------------- */

struct dm_logs {
	struct daemon *d;
	struct dm_cmd *c;
	char id[DM_ID_LEN + 1];
	int64_t seq;	  /* last chunk delivered */
	uint64_t out_gen; /* the command's out_gen when a look in the store found no more */
	char *pend;	  /* rest of a chunk bigger than the caller's buffer */
	size_t pend_len, pend_off;
	int pend_stream;
};

int dm_logs_open(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		 struct dm_logs **out, struct al_error **err)
{
	struct dm_cmd *c;

	pthread_mutex_lock(&d->mu);
	c = find(d, team, sbx, cmd, err);
	if (c) /* until dm_logs_close: a stream may last long */
		dm_sbx_hold(c->sbx), dm_cmd_hold(c);
	pthread_mutex_unlock(&d->mu);
	if (!c)
		return -1;
	*out = xzalloc(sizeof(**out));
	(*out)->d = d;
	(*out)->c = c;
	strcpy((*out)->id, c->id);
	return 0;
}

static int take_chunk(void *ctx, int64_t seq, int stream, uint64_t offset, const void *data,
		      size_t len)
{
	struct dm_logs *l = ctx;

	l->seq = seq;
	l->pend = xrealloc(NULL, len ? len : 1);
	memcpy(l->pend, data, len);
	l->pend_len = len;
	l->pend_off = 0;
	l->pend_stream = stream;
	return -1; /* one chunk at a time */
}

int dm_logs_next(struct dm_logs *l, char *buf, size_t cap, int *stream, size_t *len,
		 uint64_t timeout_ms)
{
	struct daemon *d = l->d;
	struct timespec ts;
	uint64_t gen, out_gen;
	bool done;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(timeout_ms / 1000);
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000)
		ts.tv_sec++, ts.tv_nsec -= 1000000000;
	for (;;) {
		if (l->pend) {
			size_t n =
			    l->pend_len - l->pend_off < cap ? l->pend_len - l->pend_off : cap;

			memcpy(buf, l->pend + l->pend_off, n);
			l->pend_off += n;
			*len = n;
			*stream = l->pend_stream;
			if (l->pend_off == l->pend_len) {
				free(l->pend);
				l->pend = NULL;
			}
			return 1;
		}
		/* Read whether it finished first: output stored before EXIT is then all visible.
		 * The store is only read when a chunk was stored since it last had nothing
		 * more for us (out_gen): most commands' streams never need a query at all. */
		pthread_mutex_lock(&d->mu);
		done = l->c->finished;
		gen = l->c->sbx->gen;
		out_gen = l->c->out_gen;
		pthread_mutex_unlock(&d->mu);
		if (out_gen != l->out_gen) {
			struct al_error *err = NULL;
			int r = store_output_each(d->store, l->id, 0, l->seq, take_chunk, l, &err);

			if (l->pend) { /* take_chunk stopped the walk at a chunk */
				al_error_free(err);
				continue;
			}
			/* Not the end of the output: the stream ends with an error. */
			if (r < 0) {
				dm_log_err(d, &err, "command %s: reading its output", l->id);
				return -EIO;
			}
			l->out_gen = out_gen; /* everything stored up to out_gen is delivered */
		}
		if (done)
			return 0;
		pthread_mutex_lock(&d->mu);
		while (l->c->sbx->gen == gen && !l->c->finished) {
			if (pthread_cond_timedwait(&l->c->sbx->cv, &d->mu, &ts) == ETIMEDOUT) {
				pthread_mutex_unlock(&d->mu);
				return -ETIMEDOUT;
			}
		}
		pthread_mutex_unlock(&d->mu);
	}
}

void dm_logs_close(struct dm_logs *l)
{
	struct dm_sbx *s;

	if (!l)
		return;
	s = l->c->sbx; /* read while c is held; s is held until after c's put */
	dm_cmd_put(l->c);
	dm_sbx_put(s);
	free(l->pend);
	free(l);
}
