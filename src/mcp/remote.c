/* SPDX-License-Identifier: MIT */
/*
 * The daemon backend: one sandbox of airlockd per MCP session (src/cli/client.c, the native
 * API of docs/api.yaml), made with the command line's limits and policy on first need, kept
 * between calls, stopped by reset and at exit. A sandbox that ended meanwhile (its lifetime,
 * an operator's stop) is replaced by a fresh one on the next call.
 */
#include "mcp/mcp.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#define HOUR_MS (60ull * 60 * 1000)

struct rem {
	struct client *c;
	char *sid; /* the session's sandbox, or NULL */
	pthread_mutex_t lock;
};

/* The daemon's {"error":{"message"}} as *err. */
static int daemon_error(const struct client_resp *r, const char *what, struct al_error **err)
{
	json_t *j = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
	const char *msg =
	    json_string_value(json_object_get(json_object_get(j, "error"), "message"));

	al_error_msg(err, r->status == 400 || r->status == 403 || r->status == 409 ? EINVAL : EIO,
		     "%s: %s (HTTP %ld)", what, msg ? msg : "failed", r->status);
	json_decref(j);
	return -1;
}

static int call(struct rem *r, const char *method, const char *path, const char *body, size_t len,
		const char *ctype, struct client_resp *resp, struct al_error **err)
{
	if (client_call(r->c, method, path, body, len, ctype, resp) < 0)
		return al_error_msg(err, EIO, "cannot reach airlockd at %s",
				    r->c->socket ? r->c->socket : r->c->url);
	return 0;
}

/* The session sandbox's lifetime: an hour, or a command's --timeout and a minute more (no
 * --timeout: the daemon's maximum, 24 h). One that ends is replaced on the next call. */
static uint64_t lifetime_ms(const struct mcp_opts *o)
{
	uint64_t want = o->timeout_ms ? o->timeout_ms + 60000 : 24 * HOUR_MS;

	return want < HOUR_MS ? HOUR_MS : want > 24 * HOUR_MS ? 24 * HOUR_MS : want;
}

static json_t *create_body(const struct mcp_opts *o)
{
	json_t *b = json_pack("{s:O, s:I}", "env", o->env, "timeout", (json_int_t)lifetime_ms(o)),
	       *res = json_object();

	if (o->memory_set)
		json_object_set_new(res, "memory", json_integer((json_int_t)o->memory));
	if (o->disk_set)
		json_object_set_new(res, "disk", json_integer((json_int_t)o->disk));
	if (o->cpus > 0)
		json_object_set_new(res, "vcpus", json_real(o->cpus));
	json_object_set_new(b, "resources", res);
	if (o->image)
		json_object_set_new(b, "image", json_string(o->image));
	if (o->hostname)
		json_object_set_new(b, "hostname", json_string(o->hostname));
	if (o->policy_json)
		json_object_set_new(b, "network_policy",
				    json_loads(o->policy_json, JSON_DECODE_ANY, NULL));
	return b;
}

/* The session's sandbox id (a heap copy), made now if there is none. */
static char *sandbox(struct mcp_server *s, struct al_error **err)
{
	struct rem *r = s->be_state;
	struct client_resp resp = {0};
	_cleanup_free_ char *body = NULL;
	json_t *b, *j;
	char *id = NULL;

	pthread_mutex_lock(&r->lock);
	if (r->sid) {
		id = xstrdup(r->sid);
		goto out;
	}
	b = create_body(s->opts);
	body = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	if (call(r, "POST", "/v1/sandboxes", body, strlen(body), "application/json", &resp, err) <
	    0)
		goto out;
	j = resp.status == 201 ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
	id = (char *)json_string_value(json_object_get(json_object_get(j, "sandbox"), "id"));
	if (id) {
		r->sid = xstrdup(id);
		id = xstrdup(id);
		fprintf(stderr, "airlock mcp: the session's sandbox is %s\n", id);
	} else {
		daemon_error(&resp, "creating the session's sandbox", err);
	}
	json_decref(j);
	client_resp_free(&resp);
out:
	pthread_mutex_unlock(&r->lock);
	return id;
}

/* The sandbox ended under us (404, 410): forget it, so the next call makes a fresh one. */
static void forget(struct rem *r, const char *id)
{
	pthread_mutex_lock(&r->lock);
	if (r->sid && strcmp(r->sid, id) == 0) {
		fprintf(stderr, "airlock mcp: sandbox %s has ended; the next call makes another\n",
			id);
		free(r->sid);
		r->sid = NULL;
	}
	pthread_mutex_unlock(&r->lock);
}

/* Is sandbox id still running? (A 404 may be about a file, not the sandbox.) */
static bool running(struct rem *r, const char *id)
{
	_cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s", id);
	struct client_resp resp = {0};
	json_t *j;
	bool yes;

	if (client_call(r->c, "GET", path, NULL, 0, NULL, &resp) < 0)
		return true; /* unreachable: not ours to judge */
	j = resp.status == 200 ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
	yes = json_is_string(json_object_get(json_object_get(j, "sandbox"), "status")) &&
	      strcmp(json_string_value(json_object_get(json_object_get(j, "sandbox"), "status")),
		     "running") == 0;
	json_decref(j);
	client_resp_free(&resp);
	return yes;
}

/*
 * METHOD /v1/sandboxes/{id}{suffix}, retried once in a fresh sandbox when the session's has
 * ended. 0 with *resp (any status), or -1.
 */
static int sbx_call(struct mcp_server *s, const char *method, const char *suffix, const char *body,
		    size_t len, const char *ctype, struct client_resp *resp, char **used,
		    struct al_error **err)
{
	struct rem *r = s->be_state;

	for (int attempt = 0; attempt < 2; attempt++) {
		_cleanup_free_ char *id = sandbox(s, err), *path = NULL;

		if (!id)
			return -1;
		path = xasprintf("/v1/sandboxes/%s%s", id, suffix);
		if (call(r, method, path, body, len, ctype, resp, err) < 0)
			return -1;
		if ((resp->status != 404 && resp->status != 410) || attempt || running(r, id)) {
			if (used)
				*used = TAKE_PTR(id);
			return 0;
		}
		client_resp_free(resp);
		forget(r, id);
	}
	return -1;
}

static char *escaped_path(const char *rel)
{
	_cleanup_free_ char *full = xasprintf("/workspace%s%s", rel[0] ? "/" : "", rel);

	return client_escape(full);
}

struct logs {
	char *buf[2];
	size_t len[2];
	bool cut[2];
	uint64_t limit;
};

static int on_log(void *ctx, json_t *line)
{
	struct logs *l = ctx;
	const char *type = json_string_value(json_object_get(line, "type"));
	json_t *data = json_object_get(line, "data");
	int i = type && strcmp(type, "stdout") == 0   ? 0
		: type && strcmp(type, "stderr") == 0 ? 1
						      : -1;
	size_t n;

	if (i < 0 || !json_is_string(data))
		return 0;
	n = json_string_length(data);
	if (l->len[i] + n > l->limit + 4) { /* a few bytes over: mcp_text_capped cuts exactly */
		l->cut[i] = true;
		n = l->len[i] < l->limit + 4 ? l->limit + 4 - l->len[i] : 0;
	}
	l->buf[i] = xrealloc(l->buf[i], l->len[i] + n + 1);
	memcpy(l->buf[i] + l->len[i], json_string_value(data), n);
	l->len[i] += n;
	return 0;
}

/* The finished command's result: its end (from /wait) and its output (/logs). */
static json_t *finished(struct mcp_server *s, const char *sid, const char *cid, json_t *cmd,
			struct al_error **err)
{
	struct rem *r = s->be_state;
	struct logs l = {.limit = s->opts->output_limit ? s->opts->output_limit : UINT64_MAX - 8};
	_cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s/commands/%s/logs", sid, cid);
	long status = 0;
	bool cut[2];
	json_t *out;
	json_t *fin = json_object_get(cmd, "finished_at"), *st = json_object_get(cmd, "started_at");

	if (client_stream(r->c, "GET", path, NULL, on_log, &l, &status) < 0 || status != 200) {
		free(l.buf[0]);
		free(l.buf[1]);
		return al_error_msg(err, EIO, "reading the command's output (HTTP %ld)", status),
		       NULL;
	}
	out = json_pack("{s:o, s:o, s:O, s:O, s:O}", "stdout",
			mcp_text_capped(l.buf[0], l.len[0], l.limit, &cut[0]), "stderr",
			mcp_text_capped(l.buf[1], l.len[1], l.limit, &cut[1]), "exit_code",
			json_object_get(cmd, "exit_code") ?: json_null(), "signal",
			json_object_get(cmd, "signal") ?: json_null(), "reason",
			json_object_get(cmd, "reason") ?: json_string("exited"));
	json_object_set_new(out, "stdout_truncated", json_boolean(cut[0] || l.cut[0]));
	json_object_set_new(out, "stderr_truncated",
			    json_boolean(cut[1] || l.cut[1] ||
					 json_is_true(json_object_get(cmd, "output_truncated"))));
	if (json_is_integer(fin) && json_is_integer(st))
		json_object_set_new(
		    out, "duration_ms",
		    json_real((double)(json_integer_value(fin) - json_integer_value(st))));
	free(l.buf[0]);
	free(l.buf[1]);
	return out;
}

/* Start the command detached; its id (heap) and the sandbox's. */
static char *start(struct mcp_server *s, const struct mcp_cmd *cmd, char **sid,
		   struct al_error **err)
{
	json_t *args = json_array(), *b, *j;
	struct client_resp resp = {0};
	_cleanup_free_ char *body = NULL;
	char *cid = NULL;

	for (char **p = cmd->argv + 1; *p; p++)
		json_array_append_new(args, json_string(*p));
	b = json_pack("{s:s, s:o, s:I}", "cmd", cmd->argv[0], "args", args, "timeout",
		      (json_int_t)cmd->timeout_ms);
	if (cmd->cwd)
		json_object_set_new(b, "cwd", json_string(cmd->cwd));
	if (cmd->stdin_data)
		json_object_set_new(b, "stdin", json_stringn(cmd->stdin_data, cmd->stdin_len));
	body = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	if (sbx_call(s, "POST", "/commands", body, strlen(body), "application/json", &resp, sid,
		     err) < 0)
		return NULL;
	j = resp.status == 201 ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
	cid = (char *)json_string_value(json_object_get(json_object_get(j, "command"), "id"));
	cid = cid ? xstrdup(cid) : NULL;
	if (!cid)
		daemon_error(&resp, "starting the command", err);
	json_decref(j);
	client_resp_free(&resp);
	return cid;
}

static json_t *rem_exec(struct mcp_job *job, const struct mcp_cmd *cmd, struct al_error **err)
{
	struct mcp_server *s = job->srv;
	struct rem *r = s->be_state;
	_cleanup_free_ char *sid = NULL, *cid = start(s, cmd, &sid, err), *wait = NULL;
	json_t *done = NULL, *out = NULL;

	if (!cid)
		return NULL;
	wait = xasprintf("/v1/sandboxes/%s/commands/%s/wait?timeout_ms=1000", sid, cid);
	for (int t = 1; !done; t++) {
		struct client_resp resp = {0};

		if (atomic_load(&job->cancelled)) {
			_cleanup_free_ char *kill =
			    xasprintf("/v1/sandboxes/%s/commands/%s/kill", sid, cid);
			if (call(r, "POST", kill, "{\"signal\":9}", 12, "application/json", &resp,
				 err) == 0)
				client_resp_free(&resp);
			return al_error_msg(err, ECANCELED, "cancelled"), NULL;
		}
		if (call(r, "GET", wait, NULL, 0, NULL, &resp, err) < 0)
			return NULL;
		if (resp.status == 200 && !(done = json_loadb(resp.body, resp.len, 0, NULL)))
			return al_error_msg(err, EIO, "the daemon's answer is not JSON"),
			       client_resp_free(&resp), NULL;
		else if (resp.status == 200)
			;
		else if (resp.status != 504)
			return daemon_error(&resp, "waiting for the command", err),
			       client_resp_free(&resp), NULL;
		else
			mcp_progress(job, (double)t, (double)cmd->timeout_ms / 1000, "running");
		client_resp_free(&resp);
	}
	out = finished(s, sid, cid, json_object_get(done, "command"), err);
	json_decref(done);
	return out;
}

struct membuf {
	char *data;
	size_t len;
};

static la_ssize_t mem_write(struct archive *a, void *ctx, const void *p, size_t n)
{
	struct membuf *m = ctx;

	m->data = xrealloc(m->data, m->len + n);
	memcpy(m->data + m->len, p, n);
	m->len += n;
	return (la_ssize_t)n;
}

static void tar_entry(struct archive *w, const char *name, bool dir, const char *data, size_t len)
{
	struct archive_entry *e = archive_entry_new();

	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, dir ? AE_IFDIR : AE_IFREG);
	archive_entry_set_perm(e, dir ? 0755 : 0644);
	archive_entry_set_size(e, dir ? 0 : (la_int64_t)len);
	archive_entry_set_mtime(e, time(NULL), 0);
	archive_write_header(w, e);
	if (!dir && len)
		archive_write_data(w, data, len);
	archive_entry_free(e);
}

/* A tar of rel (its parents as directories first) holding data. */
static struct membuf tar_of(const char *rel, const char *data, size_t len)
{
	struct membuf m = {0};
	struct archive *w = archive_write_new();
	_cleanup_free_ char *dirs = xstrdup(rel);

	archive_write_set_format_pax_restricted(w);
	archive_write_open(w, &m, NULL, mem_write, NULL);
	for (char *p = strchr(dirs, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		tar_entry(w, dirs, true, NULL, 0);
		*p = '/';
	}
	tar_entry(w, rel, false, data, len);
	archive_write_close(w);
	archive_write_free(w);
	return m;
}

static json_t *rem_write(struct mcp_server *s, const char *rel, const char *data, size_t len,
			 struct al_error **err)
{
	struct membuf tar = tar_of(rel, data, len);
	struct client_resp resp = {0};
	int r = sbx_call(s, "PUT", "/files?dir=%2Fworkspace", tar.data, tar.len,
			 "application/x-tar", &resp, NULL, err);
	json_t *out = NULL;

	free(tar.data);
	if (r == 0 && resp.status == 200)
		out = json_pack("{s:s+, s:I}", "path", "/workspace/", rel, "size", (json_int_t)len);
	else if (r == 0)
		daemon_error(&resp, "write_file", err);
	client_resp_free(&resp);
	return out;
}

static json_t *rem_read(struct mcp_server *s, const char *rel, struct al_error **err)
{
	_cleanup_free_ char *q = escaped_path(rel),
			    *suffix = xasprintf("/files/content?path=%s", q);
	struct client_resp resp = {0};
	json_t *out = NULL;

	if (sbx_call(s, "GET", suffix, NULL, 0, NULL, &resp, NULL, err) < 0)
		return NULL;
	if (resp.status == 200)
		out = mcp_file_result(rel, resp.body ? resp.body : "",
				      resp.len > MCP_FILE_MAX ? MCP_FILE_MAX : resp.len,
				      resp.len > MCP_FILE_MAX);
	else
		daemon_error(&resp, "read_file", err);
	client_resp_free(&resp);
	return out;
}

static json_t *rem_list(struct mcp_server *s, const char *rel, struct al_error **err)
{
	_cleanup_free_ char *q = escaped_path(rel), *suffix = xasprintf("/files?path=%s", q);
	struct client_resp resp = {0};
	json_t *j, *e, *entries = json_array(), *out = NULL;
	size_t i;

	if (sbx_call(s, "GET", suffix, NULL, 0, NULL, &resp, NULL, err) < 0) {
		json_decref(entries);
		return NULL;
	}
	j = resp.status == 200 ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
	json_array_foreach(json_object_get(j, "entries"), i, e) json_array_append_new(
	    entries, json_pack("{s:O, s:O, s:O}", "name", json_object_get(e, "name"), "type",
			       json_object_get(e, "type"), "size", json_object_get(e, "size")));
	if (j)
		out = json_pack("{s:s+, s:o}", "path", rel[0] ? "/workspace/" : "/workspace", rel,
				"entries", entries);
	else
		daemon_error(&resp, "list_files", err), json_decref(entries);
	json_decref(j);
	client_resp_free(&resp);
	return out;
}

static void stop(struct rem *r, const char *id)
{
	_cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s/stop", id);
	struct client_resp resp = {0};

	if (client_call(r->c, "POST", path, NULL, 0, NULL, &resp) == 0) {
		fprintf(stderr, "airlock mcp: stopped sandbox %s (HTTP %ld)\n", id, resp.status);
		client_resp_free(&resp);
	}
}

static json_t *rem_reset(struct mcp_server *s, struct al_error **err)
{
	struct rem *r = s->be_state;
	_cleanup_free_ char *id = NULL;
	json_t *out;

	pthread_mutex_lock(&r->lock);
	id = TAKE_PTR(r->sid);
	pthread_mutex_unlock(&r->lock);
	if (id)
		stop(r, id);
	out = json_pack("{s:b, s:s?}", "stopped", id != NULL, "sandbox", id);
	return out;
}

static char *rem_egress(struct mcp_server *s, size_t *len, struct al_error **err)
{
	struct rem *r = s->be_state;
	_cleanup_free_ char *id = NULL, *path = NULL;
	struct client_resp resp = {0};
	char *text;

	pthread_mutex_lock(&r->lock);
	id = r->sid ? xstrdup(r->sid) : NULL;
	pthread_mutex_unlock(&r->lock);
	*len = 0;
	if (!id)
		return xstrdup(""); /* no sandbox yet: nothing decided */
	path = xasprintf("/v1/sandboxes/%s/egress", id);
	if (call(r, "GET", path, NULL, 0, NULL, &resp, err) < 0)
		return NULL;
	if (resp.status != 200)
		return daemon_error(&resp, "the egress log", err), client_resp_free(&resp), NULL;
	text = resp.body ? resp.body : xstrdup("");
	*len = resp.body ? resp.len : 0;
	return text;
}

static void rem_close(struct mcp_server *s)
{
	struct rem *r = s->be_state;

	if (r->sid)
		stop(r, r->sid);
	free(r->sid);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

const struct mcp_backend mcp_remote = {
    .exec = rem_exec,
    .write_file = rem_write,
    .read_file = rem_read,
    .list_files = rem_list,
    .reset = rem_reset,
    .egress_log = rem_egress,
    .close = rem_close,
};

int mcp_remote_open(struct mcp_server *s, struct client *c, struct al_error **err)
{
	struct rem *r = xzalloc(sizeof(*r));
	struct client_resp resp = {0};

	r->c = c;
	pthread_mutex_init(&r->lock, NULL);
	s->be = &mcp_remote;
	s->be_state = r;
	/* Reachable now, or a clear error before any protocol. */
	if (client_call(c, "GET", "/v1/health", NULL, 0, NULL, &resp) < 0 || resp.status != 200) {
		client_resp_free(&resp);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return al_error_msg(err, EIO, "airlockd does not answer at %s",
				    c->socket ? c->socket : c->url);
	}
	client_resp_free(&resp);
	return 0;
}
