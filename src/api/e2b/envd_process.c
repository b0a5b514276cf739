/* SPDX-License-Identifier: MIT */
/*
 * envd's process service on the daemon's commands: a command E2B starts gets a pid of
 * ours (a number per sandbox, from 1000) that names the daemon's command; Start and
 * Connect stream its output as start / data / end events (Connect replays it from the
 * start); SendInput, CloseStdin and SendSignal act on it. A command whose sandbox ends
 * ends its stream with an "unavailable" error, never a hang; one that ran past its
 * Connect-Timeout-Ms with "deadline_exceeded". PTYs are made in envd_pty.c.
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define E2B_OUT_CHUNK (32 * 1024)

/* --- the pid table -------------------------------------------------------------------- */

static uint32_t e2b_proc_add(struct api_req *r, const char *cmd_id, const char *tag, json_t *config,
			     const char *pty_file, bool root)
{
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	uint32_t pid = 0;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, e2b_envd_sbx(r));
	if (s) {
		if (s->n_procs >= E2B_MAX_PROCS) { /* the oldest goes */
			free(s->procs[0].cmd_id);
			free(s->procs[0].tag);
			free(s->procs[0].pty_file);
			json_decref(s->procs[0].config);
			memmove(s->procs, s->procs + 1, --s->n_procs * sizeof(*s->procs));
		}
		s->procs = xrealloc(s->procs, (s->n_procs + 1) * sizeof(*s->procs));
		pid = s->next_pid++;
		s->procs[s->n_procs++] = (struct e2b_proc){pid,
							   xstrdup(cmd_id),
							   tag ? xstrdup(tag) : NULL,
							   json_incref(config),
							   pty_file ? xstrdup(pty_file) : NULL,
							   root};
	}
	pthread_mutex_unlock(&e->mu);
	return pid;
}

static bool e2b_proc_is_pty(struct api_req *r, uint32_t pid)
{
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	bool pty = false;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, e2b_envd_sbx(r));
	for (size_t i = 0; s && i < s->n_procs; i++)
		if (s->procs[i].pid == pid)
			pty = s->procs[i].pty_file != NULL;
	pthread_mutex_unlock(&e->mu);
	return pty;
}

/* The daemon's command of a ProcessSelector {pid} or {tag} (heap), or NULL with an
 * answer built. */
static char *e2b_proc_find(struct api_req *r, json_t *msg, uint32_t *pid_out)
{
	json_t *sel = json_object_get(msg, "process");
	json_t *pid = json_object_get(sel, "pid");
	const char *tag = json_string_value(json_object_get(sel, "tag"));
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	char *cmd = NULL;

	if (!json_is_object(sel) || (!json_is_integer(pid) && !tag)) {
		e2b_unary_error(r, "invalid_argument", "process: a pid or a tag is required");
		return NULL;
	}
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, e2b_envd_sbx(r));
	for (size_t i = 0; s && i < s->n_procs && !cmd; i++) {
		struct e2b_proc *p = &s->procs[i];

		if (json_is_integer(pid) ? p->pid == json_integer_value(pid)
					 : (p->tag && strcmp(p->tag, tag) == 0)) {
			cmd = xstrdup(p->cmd_id);
			if (pid_out)
				*pid_out = p->pid;
		}
	}
	pthread_mutex_unlock(&e->mu);
	if (!cmd)
		e2b_unary_error(r, "not_found", "no such process");
	return cmd;
}

/* --- streaming a command -------------------------------------------------------------- */

struct e2b_run {
	struct api *api;
	char *team, *sbx, *cmd;
	struct dm_logs *logs;
	uint32_t pid;
	bool started;
	bool pty; /* its output is a terminal's: data.pty */
	char buf[E2B_OUT_CHUNK];
};

static void e2b_run_free(void *p)
{
	struct e2b_run *x = p;

	dm_logs_close(x->logs);
	free(x->team);
	free(x->sbx);
	free(x->cmd);
	free(x);
}

static json_t *e2b_event(const char *kind, json_t *body)
{
	json_t *o = json_pack("{s:{s:o}}", "event", kind, body);

	if (!o)
		al_oom();
	return o;
}

/* The end of a command: an end event, or an error when it did not end by itself. */
static void e2b_run_finish(struct e2b_stream *s, struct e2b_run *x)
{
	_cleanup_json_ json_t *view = NULL, *sv = NULL;
	struct al_error *err = NULL;
	const char *reason, *st;
	json_int_t code, sig;

	if (dm_cmd_get(x->api->d, x->team, x->sbx, x->cmd, &view, &err) < 0) {
		e2b_stream_end(s, "unavailable", err->msg);
		al_error_free(err);
		return;
	}
	reason = json_string_value(json_object_get(view, "reason"));
	code = json_integer_value(json_object_get(view, "exit_code"));
	sig = json_integer_value(json_object_get(view, "signal"));
	if (reason && strcmp(reason, "timeout") == 0)
		return e2b_stream_end(s, "deadline_exceeded", "the command ran past its timeout");
	if (dm_sandbox_get(x->api->d, x->team, x->sbx, &sv, NULL) < 0 ||
	    !(st = json_string_value(json_object_get(sv, "status"))) || strcmp(st, "running") != 0)
		return e2b_stream_end(s, "unavailable", "the sandbox ended while the command ran");
	if (reason && strcmp(reason, "exited") == 0) {
		_cleanup_free_ char *status = xasprintf("exit status %d", (int)code);

		e2b_stream_msg(s, e2b_event("end", json_pack("{s:I,s:b,s:s}", "exitCode", code,
							     "exited", 1, "status", status)));
	} else {
		_cleanup_free_ char *status = sig == SIGKILL   ? xstrdup("signal: killed")
					      : sig == SIGTERM ? xstrdup("signal: terminated")
							       : xasprintf("signal: %d", (int)sig);

		e2b_stream_msg(s, e2b_event("end", json_pack("{s:i,s:b,s:s,s:s}", "exitCode", -1,
							     "exited", 0, "status", status, "error",
							     reason ? reason : "killed")));
	}
	e2b_stream_end(s, NULL, NULL);
}

static int e2b_run_step(struct e2b_stream *s, void *ctx, uint64_t timeout_ms)
{
	struct e2b_run *x = ctx;
	int stream = 0, r;
	size_t len = 0;

	if (!x->started) {
		x->started = true;
		e2b_stream_msg(s,
			       e2b_event("start", json_pack("{s:I}", "pid", (json_int_t)x->pid)));
		return 0;
	}
	r = dm_logs_next(x->logs, x->buf, sizeof(x->buf), &stream, &len, timeout_ms);
	if (r == -ETIMEDOUT)
		return r;
	if (r == 1) {
		_cleanup_free_ char *b64 = e2b_b64((unsigned char *)x->buf, len);

		e2b_stream_msg(s, e2b_event("data", json_pack("{s:s}",
							      stream == 2 ? "stderr"
							      : x->pty	  ? "pty"
									  : "stdout",
							      b64)));
	} else if (r == 0) {
		e2b_run_finish(s, x);
	} else {
		e2b_stream_end(s, "unavailable", "reading the command's output failed");
	}
	return 0;
}

static void e2b_run_stream(struct api_req *r, const char *cmd, uint32_t pid, bool pty)
{
	struct al_error *err = NULL;
	struct e2b_run *x = xzalloc(sizeof(*x));
	struct e2b_stream *s;

	x->api = r->api;
	x->team = xstrdup(r->team);
	x->sbx = xstrdup(e2b_envd_sbx(r));
	x->cmd = xstrdup(cmd);
	x->pid = pid;
	x->pty = pty;
	s = e2b_stream_new(r, x, e2b_run_step, e2b_run_free);
	e2b_stream_keepalive(s, json_pack("{s:{s:{}}}", "event", "keepalive"));
	if (dm_logs_open(r->api->d, r->team, x->sbx, cmd, &x->logs, &err) < 0) {
		e2b_stream_end(s, e2b_code_of_errno(err->code), err->msg);
		al_error_free(err);
	}
	e2b_stream_reply(r, s);
}

/* --- the calls ------------------------------------------------------------------------ */

static void e2b_stream_fail(struct api_req *r, const char *code, const char *msg)
{
	struct e2b_stream *s = e2b_stream_new(r, NULL, NULL, NULL);

	e2b_stream_end(s, code, msg);
	e2b_stream_reply(r, s);
}

/* ProcessConfig's envs {K: V} as KEY=VALUE strings. */
static int e2b_envs(json_t *envs, char ***out, size_t *n, struct al_error **err)
{
	json_t *wrap = json_pack("{s:O}", "envs", envs ? envs : json_null());
	int rc;

	if (!envs || json_is_null(envs)) {
		json_decref(wrap);
		return 0;
	}
	rc = api_json_env(wrap, "envs", out, n, err);
	json_decref(wrap);
	return rc;
}

static uint64_t e2b_deadline_ms(struct api_req *r)
{
	const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Connect-Timeout-Ms");
	char *end;
	unsigned long long v;

	if (!h)
		return 0;
	v = strtoull(h, &end, 10);
	return *end ? 0 : (uint64_t)v;
}

static int e2b_start_parse(struct api_req *r, json_t *msg, struct dm_exec *e, char ***env,
			   size_t *n_env, const char ***args, struct al_error **err)
{
	json_t *proc = json_object_get(msg, "process"), *in = json_object_get(msg, "stdin");
	const char *cwd = NULL;
	bool root = false;
	size_t n_args = 0;

	if (!json_is_object(proc))
		return api_bad(err, "process is required");
	if (e2b_user(r, NULL, &root) < 0)
		return api_bad(err, "unknown user: 'user' and 'root' are the sandbox's users");
	if (api_json_string(proc, "cmd", true, &e->cmd, err) < 0 ||
	    api_json_strings(proc, "args", args, &n_args, err) < 0 ||
	    api_json_string(proc, "cwd", false, &cwd, err) < 0 ||
	    e2b_envs(json_object_get(proc, "envs"), env, n_env, err) < 0)
		return -EINVAL;
	if (!e->cmd[0])
		return api_bad(err, "process.cmd must not be empty");
	e->args = *args;
	e->n_args = n_args;
	e->env = (const char *const *)*env;
	e->n_env = *n_env;
	e->cwd = cwd && cwd[0] ? cwd : NULL;
	e->sudo = root;
	e->timeout_ms = e2b_deadline_ms(r);
	e->keep_stdin = !json_is_false(in); /* absent: open, as envd */
	return 0;
}

void e2b_proc_start(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, true), *config = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ const char **args = NULL;
	struct e2b_pty_cmd pc = {0};
	struct al_error *err = NULL;
	struct dm_exec e = {0};
	char **env = NULL;
	size_t n_env = 0;
	json_t *proc, *pty, *a, *v;
	uint32_t pid;

	if (!msg)
		return;
	if (e2b_start_parse(r, msg, &e, &env, &n_env, &args, &err) < 0)
		goto fail;
	proc = json_object_get(msg, "process");
	a = json_object_get(proc, "args");
	v = json_object_get(proc, "envs");
	config = json_pack("{s:s,s:o,s:o}", "cmd", e.cmd, "args", a ? json_incref(a) : json_array(),
			   "envs", v ? json_incref(v) : json_object());
	if (e.cwd)
		json_object_set_new(config, "cwd", json_string(e.cwd));
	pty = json_object_get(msg, "pty");
	if ((pty && !json_is_null(pty) && e2b_pty_wrap(pty, &e, &pc, &err) < 0) ||
	    dm_cmd_start(r->api->d, r->team, e2b_envd_sbx(r), &e, &id, &err) < 0)
		goto fail;
	pid = e2b_proc_add(r, id, json_string_value(json_object_get(msg, "tag")), config, pc.file,
			   e.sudo);
	e2b_run_stream(r, id, pid, pc.file != NULL);
	goto out;
fail:
	e2b_stream_fail(r, e2b_code_of_errno(err->code), err->msg);
out:
	e2b_pty_cmd_free(&pc);
	api_strv_free(env, n_env);
	al_error_free(err);
}

void e2b_proc_connect(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, true);
	_cleanup_free_ char *cmd = NULL;
	uint32_t pid = 0;

	if (!msg)
		return;
	cmd = e2b_proc_find(r, msg, &pid);
	if (!cmd) { /* the answer is a unary error: make it the stream's end */
		MHD_destroy_response(r->resp);
		r->resp = NULL;
		return e2b_stream_fail(r, "not_found", "no such process");
	}
	e2b_run_stream(r, cmd, pid, e2b_proc_is_pty(r, pid));
}

void e2b_proc_list(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	json_t *list;

	if (!msg)
		return;
	list = json_array();
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, e2b_envd_sbx(r));
	for (size_t i = 0; s && i < s->n_procs; i++) {
		struct e2b_proc *p = &s->procs[i];
		_cleanup_json_ json_t *view = NULL;
		const char *st;
		json_t *info;

		if (dm_cmd_get(r->api->d, r->team, s->id, p->cmd_id, &view, NULL) < 0 ||
		    !(st = json_string_value(json_object_get(view, "status"))) ||
		    strcmp(st, "running") != 0)
			continue;
		info = json_pack("{s:O,s:I}", "config", p->config, "pid", (json_int_t)p->pid);
		if (p->tag)
			json_object_set_new(info, "tag", json_string(p->tag));
		json_array_append_new(list, info);
	}
	pthread_mutex_unlock(&e->mu);
	e2b_unary_ok(r, json_pack("{s:o}", "processes", list));
}

void e2b_proc_input(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	_cleanup_free_ char *cmd = NULL;
	_cleanup_free_ unsigned char *data = NULL;
	struct al_error *err = NULL;
	json_t *in;
	const char *b64;
	size_t n = 0;

	if (!msg || !(cmd = e2b_proc_find(r, msg, NULL)))
		return;
	in = json_object_get(msg, "input");
	b64 = json_string_value(json_object_get(in, json_object_get(in, "pty") ? "pty" : "stdin"));
	if (!b64 || e2b_unb64(b64, &data, &n) < 0)
		return e2b_unary_error(r, "invalid_argument",
				       "input.stdin or input.pty must be base64 bytes");
	if (dm_cmd_write_stdin(r->api->d, r->team, e2b_envd_sbx(r), cmd, data, n, false, &err) <
	    0) {
		e2b_unary_al_error(r, err);
		al_error_free(err);
		return;
	}
	e2b_unary_ok(r, json_object());
}

void e2b_proc_close_stdin(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	_cleanup_free_ char *cmd = NULL;
	struct al_error *err = NULL;

	if (!msg || !(cmd = e2b_proc_find(r, msg, NULL)))
		return;
	if (dm_cmd_write_stdin(r->api->d, r->team, e2b_envd_sbx(r), cmd, "", 0, true, &err) < 0) {
		e2b_unary_al_error(r, err);
		al_error_free(err);
		return;
	}
	e2b_unary_ok(r, json_object());
}

void e2b_proc_signal(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	_cleanup_free_ char *cmd = NULL;
	struct al_error *err = NULL;
	json_t *sig;
	const char *name;
	int signo = 0;

	if (!msg || !(cmd = e2b_proc_find(r, msg, NULL)))
		return;
	sig = json_object_get(msg, "signal");
	name = json_string_value(sig);
	if ((name && strcmp(name, "SIGNAL_SIGKILL") == 0) || json_integer_value(sig) == SIGKILL)
		signo = SIGKILL;
	else if ((name && strcmp(name, "SIGNAL_SIGTERM") == 0) ||
		 json_integer_value(sig) == SIGTERM)
		signo = SIGTERM;
	if (!signo)
		return e2b_unary_error(r, "invalid_argument",
				       "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
	if (dm_cmd_kill(r->api->d, r->team, e2b_envd_sbx(r), cmd, signo, &err) < 0) {
		e2b_unary_al_error(r, err);
		al_error_free(err);
		return;
	}
	e2b_unary_ok(r, json_object());
}

/* --- a helper command, run to its end ---------------------------------------------------- */

#define E2B_HELPER_MS 30000
#define E2B_HELPER_OUT 65536

static void e2b_collect(struct dm_logs *l, char **out, char **errout)
{
	size_t lens[3] = {0, 0, 0};
	char buf[4096];
	int stream, rc, idle = 0;
	size_t n;

	*out = xzalloc(E2B_HELPER_OUT + 1);
	*errout = xzalloc(E2B_HELPER_OUT + 1);
	while ((rc = dm_logs_next(l, buf, sizeof(buf), &stream, &n, 1000)) == 1 ||
	       (rc == -ETIMEDOUT && ++idle < E2B_HELPER_MS / 1000)) {
		if (rc != 1)
			continue;
		char *dst = stream == 2 ? *errout : *out;
		size_t *len = &lens[stream == 2 ? 2 : 1];
		size_t k = n > E2B_HELPER_OUT - *len ? E2B_HELPER_OUT - *len : n;

		memcpy(dst + *len, buf, k);
		*len += k;
	}
}

int e2b_run_wait(struct api_req *r, const char *sbx, bool root, const char *const *argv, size_t n,
		 int *status, char **out, char **errout, struct al_error **err)
{
	struct dm_exec e = {.cmd = argv[0],
			    .args = argv + 1,
			    .n_args = n - 1,
			    .sudo = root,
			    .timeout_ms = E2B_HELPER_MS};
	_cleanup_free_ char *id = NULL;
	_cleanup_json_ json_t *view = NULL;
	struct dm_logs *l = NULL;
	json_t *code;

	if (dm_cmd_start(r->api->d, r->team, sbx, &e, &id, err) < 0 ||
	    dm_logs_open(r->api->d, r->team, sbx, id, &l, err) < 0)
		return -EIO;
	e2b_collect(l, out, errout);
	dm_logs_close(l);
	if (dm_cmd_wait(r->api->d, r->team, sbx, id, E2B_HELPER_MS, &view, err) < 0)
		return -EIO;
	code = json_object_get(view, "exit_code");
	*status = json_is_integer(code)
		      ? (int)json_integer_value(code)
		      : 128 + (int)json_integer_value(json_object_get(view, "signal"));
	return 0;
}
