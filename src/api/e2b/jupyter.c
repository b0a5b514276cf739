/* SPDX-License-Identifier: MIT */
/*
 * The code interpreter's server (port 49999 of @e2b/code-interpreter): contexts, each a
 * kernel of our own inside the sandbox (kernels.c) that keeps its globals, and POST
 * /execute, whose JSON lines are the kernel's output up to its end marker. One execution
 * at a time per context (a second gets 409). An execution cut short (the client went
 * away, the kernel died) ends its kernel: the context's next execution starts a fresh one.
 *
 * The SDK sends X-Access-Token on /execute only: the context calls (which run no code)
 * are served on the sandbox id alone, and with the token checked when one is sent.
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define E2B_CI_LINE (1u << 20) /* one line of a kernel's output */
#define E2B_CI_HOME "/home/user"

void e2b_ctx_clear(struct e2b_ctx *c)
{
	free(c->id);
	free(c->language);
	free(c->cwd);
	free(c->cmd_id);
	memset(c, 0, sizeof(*c));
}

static void ci_error(struct api_req *r, unsigned status, const char *msg)
{
	api_reply_json(r, status, json_pack("{s:i,s:s}", "code", (int)status, "message", msg));
}

static json_t *ci_ctx_json(const struct e2b_ctx *c)
{
	return json_pack("{s:s,s:s,s:s}", "id", c->id, "language", c->language, "cwd", c->cwd);
}

/* e->mu held: the context id of the request's sandbox, or NULL. */
static struct e2b_ctx *ci_find(struct e2b_sbx *s, const char *id)
{
	for (size_t i = 0; s && id && i < s->n_ctxs; i++)
		if (strcmp(s->ctxs[i].id, id) == 0)
			return &s->ctxs[i];
	return NULL;
}

/* e->mu held: a new context (its id random, or given). */
static struct e2b_ctx *ci_add(struct e2b_sbx *s, const char *id, const char *lang, const char *cwd)
{
	struct e2b_ctx *c;
	unsigned char raw[8];
	char hex[17];

	if (s->n_ctxs >= E2B_MAX_CTXS)
		return NULL;
	if (!id) {
		if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
			abort();
		for (size_t i = 0; i < sizeof(raw); i++)
			snprintf(hex + 2 * i, 3, "%02x", raw[i]);
		id = hex;
	}
	s->ctxs = xrealloc(s->ctxs, (s->n_ctxs + 1) * sizeof(*s->ctxs));
	c = &s->ctxs[s->n_ctxs++];
	memset(c, 0, sizeof(*c));
	c->id = xstrdup(id);
	c->language = xstrdup(lang);
	c->cwd = xstrdup(cwd ? cwd : E2B_CI_HOME);
	return c;
}

static const char *ci_lang(const char *l)
{
	return !l || !l[0] || strcmp(l, "python") == 0		      ? "python"
	       : strcmp(l, "js") == 0 || strcmp(l, "javascript") == 0 ? "javascript"
								      : NULL;
}

void e2b_ci_ctx_create(struct api_req *r)
{
	_cleanup_json_ json_t *body = NULL;
	struct e2b *e = r->api->e2b;
	struct al_error *err = NULL;
	const char *lang = NULL, *cwd = NULL;
	struct e2b_sbx *s;
	struct e2b_ctx *c;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_string(body, "language", false, &lang, &err) < 0 ||
	    api_json_string(body, "cwd", false, &cwd, &err) < 0) {
		ci_error(r, 400, err->msg);
		al_error_free(err);
		return;
	}
	if (!ci_lang(lang))
		return ci_error(r, 400, "language: python and javascript are served");
	if (cwd && cwd[0] != '/')
		return ci_error(r, 400, "cwd must be an absolute path");
	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, e2b_envd_sbx(r));
	c = s ? ci_add(s, NULL, ci_lang(lang), cwd) : NULL;
	if (c)
		api_reply_json(r, 200, ci_ctx_json(c));
	else
		ci_error(r, s ? 429 : 404, s ? "too many contexts" : "no such sandbox");
	pthread_mutex_unlock(&e->mu);
}

void e2b_ci_ctx_list(struct api_req *r)
{
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	json_t *out = json_array();

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, e2b_envd_sbx(r));
	for (size_t i = 0; s && i < s->n_ctxs; i++)
		json_array_append_new(out, ci_ctx_json(&s->ctxs[i]));
	pthread_mutex_unlock(&e->mu);
	api_reply_json(r, 200, out);
}

/* Ends a context's kernel (its next execution starts a fresh one); removes it if drop. */
static void ci_end(struct api_req *r, bool drop)
{
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	struct e2b_ctx *c;
	char *cmd = NULL;
	bool found = false;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, e2b_envd_sbx(r));
	c = ci_find(s, api_param(r, "cid"));
	if (c) {
		found = true;
		cmd = c->cmd_id;
		c->cmd_id = NULL;
		c->consumed = 0;
		if (drop) {
			e2b_ctx_clear(c);
			*c = s->ctxs[--s->n_ctxs];
		}
	}
	pthread_mutex_unlock(&e->mu);
	if (!found)
		return ci_error(r, 404, "no such context");
	if (cmd)
		dm_cmd_kill(r->api->d, r->team, e2b_envd_sbx(r), cmd, SIGKILL, NULL);
	free(cmd);
	api_reply_raw(r, drop ? 204 : 200, "application/json", NULL, 0);
}

void e2b_ci_ctx_delete(struct api_req *r)
{
	ci_end(r, true);
}

void e2b_ci_ctx_restart(struct api_req *r)
{
	ci_end(r, false);
}

/* --- execute -------------------------------------------------------------------------- */

struct ci_run {
	struct api *api;
	char *team, *sbx, *ctx_id;
	struct dm_logs *logs;
	uint64_t skip; /* stdout bytes of earlier executions */
	uint64_t seen; /* stdout bytes read */
	bool done, released;
	char *line;
	size_t line_len;
	char err[512];
	size_t err_len;
	char buf[16384];
};

/* Lets go of the context (once): what this execution consumed or, cut short, its kernel.
 * Done as soon as the end marker is read, before the answer's last bytes go out: the
 * client may send the context's next execution the moment it has them. */
static void ci_release(struct ci_run *x)
{
	struct e2b *e = x->api->e2b;
	struct e2b_ctx *c;
	char *kill_cmd = NULL;

	if (x->released)
		return;
	x->released = true;
	pthread_mutex_lock(&e->mu);
	c = ci_find(e2b_find(e, x->team, x->sbx), x->ctx_id);
	if (c) {
		c->busy = false;
		if (x->done) {
			c->consumed = x->seen;
		} else {
			kill_cmd = c->cmd_id;
			c->cmd_id = NULL;
			c->consumed = 0;
		}
	}
	pthread_mutex_unlock(&e->mu);
	if (kill_cmd)
		dm_cmd_kill(x->api->d, x->team, x->sbx, kill_cmd, SIGKILL, NULL);
	free(kill_cmd);
}

static void ci_run_free(void *p)
{
	struct ci_run *x = p;

	ci_release(x);
	dm_logs_close(x->logs);
	free(x->line);
	free(x->team);
	free(x->sbx);
	free(x->ctx_id);
	free(x);
}

static void ci_line(struct e2b_stream *s, struct ci_run *x)
{
	json_t *j = json_loadb(x->line, x->line_len, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));

	x->line_len = 0;
	if (!type) {
		json_decref(j);
		return;
	}
	if (strcmp(type, "__done__") == 0) {
		json_decref(j);
		x->done = true;
		ci_release(x);
		return e2b_stream_end(s, NULL, NULL);
	}
	e2b_stream_msg(s, j);
}

static void ci_stdout(struct e2b_stream *s, struct ci_run *x, const char *p, size_t n)
{
	for (size_t i = 0; i < n && !e2b_stream_ended(s); i++) {
		if (x->seen++ < x->skip)
			continue;
		if (p[i] == '\n') {
			ci_line(s, x);
			continue;
		}
		if (x->line_len >= E2B_CI_LINE * 16)
			return e2b_stream_end(s, "OutputTooLarge", "a line of output over 16 MiB");
		if (x->line_len % E2B_CI_LINE == 0)
			x->line = xrealloc(x->line, x->line_len + E2B_CI_LINE);
		x->line[x->line_len++] = p[i];
	}
}

static int ci_step(struct e2b_stream *s, void *ctx, uint64_t timeout_ms)
{
	struct ci_run *x = ctx;
	int stream = 0, r;
	size_t len = 0;

	r = dm_logs_next(x->logs, x->buf, sizeof(x->buf), &stream, &len, timeout_ms);
	if (r == -ETIMEDOUT)
		return r;
	if (r == 1 && stream == 1) {
		ci_stdout(s, x, x->buf, len);
	} else if (r == 1) {
		size_t k =
		    len < sizeof(x->err) - 1 - x->err_len ? len : sizeof(x->err) - 1 - x->err_len;

		memcpy(x->err + x->err_len, x->buf, k);
		x->err_len += k;
		x->err[x->err_len] = '\0';
	} else {
		e2b_stream_end(s, "KernelError",
			       x->err_len ? x->err : "the kernel ended (was the sandbox killed?)");
	}
	return 0;
}

/* e->mu held: the execution's context (given, or the language's default, made on first
 * use), marked busy; NULL with *status and *why. */
static struct e2b_ctx *ci_claim(struct e2b_sbx *s, const char *ctx_id, const char *lang,
				unsigned *status, const char **why)
{
	struct e2b_ctx *c;
	char def[32];

	*status = 404, *why = "no such sandbox";
	if (!s)
		return NULL;
	if (!ctx_id) {
		snprintf(def, sizeof(def), "default-%s", lang);
		c = ci_find(s, def);
		if (!c && !(c = ci_add(s, def, lang, NULL)))
			return *status = 429, *why = "too many contexts", NULL;
	} else if (!(c = ci_find(s, ctx_id))) {
		return *why = "no such context", NULL;
	}
	if (c->busy)
		return *status = 409, *why = "the context runs another execution", NULL;
	c->busy = true;
	return c;
}

/* The kernel of the claimed context x->ctx_id, started if it has none: its command (heap),
 * and in x->skip what earlier executions consumed of its output. */
static char *ci_kernel(struct api_req *r, struct ci_run *x, struct al_error **err)
{
	struct e2b *e = r->api->e2b;
	struct e2b_ctx *c;
	const char *cmd, *flag, *prog;
	_cleanup_free_ char *lang = NULL, *cwd = NULL;
	char *id = NULL;

	pthread_mutex_lock(&e->mu);
	c = ci_find(e2b_find(e, r->team, x->sbx), x->ctx_id);
	if (c && c->cmd_id) {
		x->skip = c->consumed;
		id = xstrdup(c->cmd_id);
	} else if (c) {
		lang = xstrdup(c->language), cwd = xstrdup(c->cwd);
	}
	pthread_mutex_unlock(&e->mu);
	if (id || !lang)
		return id ? id : (al_error_msg(err, ENOENT, "the context is gone"), NULL);
	if (e2b_kernel(lang, &cmd, &flag, &prog) < 0) {
		al_error_msg(err, EINVAL, "no kernel for %s", lang);
		return NULL;
	}
	const char *args[] = {flag, prog};
	struct dm_exec ex = {.cmd = cmd, .args = args, .n_args = 2, .cwd = cwd, .keep_stdin = true};

	if (dm_cmd_start(r->api->d, r->team, x->sbx, &ex, &id, err) < 0)
		return NULL;
	pthread_mutex_lock(&e->mu);
	c = ci_find(e2b_find(e, r->team, x->sbx), x->ctx_id);
	if (c) {
		c->cmd_id = xstrdup(id);
		c->consumed = 0;
	}
	pthread_mutex_unlock(&e->mu);
	x->skip = 0;
	return id;
}

/* {"code", "env"} on the kernel's stdin, then its output opened. */
static int ci_send(struct api_req *r, struct ci_run *x, const char *cmd, json_t *body,
		   struct al_error **err)
{
	json_t *env = json_object_get(body, "env_vars");
	json_t *req = json_pack("{s:O,s:O}", "code", json_object_get(body, "code"), "env",
				json_is_object(env) ? env : json_null());
	size_t len;
	_cleanup_free_ char *line = api_json_dump(req, true, &len);

	json_decref(req);
	if (dm_cmd_write_stdin(r->api->d, r->team, x->sbx, cmd, line, len, false, err) < 0)
		return -EIO;
	return dm_logs_open(r->api->d, r->team, x->sbx, cmd, &x->logs, err);
}

void e2b_ci_execute(struct api_req *r)
{
	static const char *const fields[] = {"code", "context_id", "language", "env_vars", NULL};
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *cmd = NULL;
	struct e2b *e = r->api->e2b;
	struct al_error *err = NULL;
	const char *code = NULL, *ctx_id = NULL, *lang = NULL, *why;
	struct e2b_ctx *c;
	struct ci_run *x;
	struct e2b_stream *s;
	unsigned status;

	if (api_body_object(r, &body, &err) < 0 ||
	    api_json_fields(body, "the body", fields, &err) < 0 ||
	    api_json_string(body, "code", true, &code, &err) < 0 ||
	    api_json_string(body, "context_id", false, &ctx_id, &err) < 0 ||
	    api_json_string(body, "language", false, &lang, &err) < 0) {
		ci_error(r, 400, err->msg);
		al_error_free(err);
		return;
	}
	if (!ci_lang(lang))
		return ci_error(r, 400, "language: python and javascript are served");
	x = xzalloc(sizeof(*x));
	x->api = r->api;
	x->team = xstrdup(r->team);
	x->sbx = xstrdup(e2b_envd_sbx(r));
	pthread_mutex_lock(&e->mu);
	c = ci_claim(e2b_find(e, r->team, x->sbx), ctx_id, ci_lang(lang), &status, &why);
	if (c)
		x->ctx_id = xstrdup(c->id);
	pthread_mutex_unlock(&e->mu);
	if (!c) {
		free(x->team), free(x->sbx), free(x);
		return ci_error(r, status, why);
	}
	s = e2b_stream_new(r, x, ci_step, ci_run_free);
	e2b_stream_ndjson(s);
	if (!(cmd = ci_kernel(r, x, &err)) || ci_send(r, x, cmd, body, &err) < 0) {
		e2b_stream_end(s, "KernelError", err->msg);
		al_error_free(err);
	}
	e2b_stream_reply(r, s);
}

const struct api_route api_e2b_jupyter_routes[] = {
    {"POST", "/execute", e2b_ci_execute, 0},
    {"POST", "/contexts", e2b_ci_ctx_create, API_ROUTE_SIGNED},
    {"GET", "/contexts", e2b_ci_ctx_list, API_ROUTE_SIGNED},
    {"DELETE", "/contexts/{cid}", e2b_ci_ctx_delete, API_ROUTE_SIGNED},
    {"POST", "/contexts/{cid}/restart", e2b_ci_ctx_restart, API_ROUTE_SIGNED},
};
const size_t api_e2b_jupyter_routes_n =
    sizeof(api_e2b_jupyter_routes) / sizeof(api_e2b_jupyter_routes[0]);
