/* SPDX-License-Identifier: MIT */
/*
 * envd's directory watches: a real inotify watch inside the sandbox, made by a small
 * Python program (below, run with python3 -c as the caller's user, so it sees what that
 * user may see) that prints one JSON line per event; its output reaches us through the
 * daemon's command stream. WatchDir streams the events; CreateWatcher /
 * GetWatcherEvents / RemoveWatcher keep the command and hand out what is new since the
 * last call. The image needs python3 (the host runtime has it); without it a watch fails
 * with a clear error. A recursive watch adds directories created later.
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

#define E2B_WATCH_LINE 8192
#define E2B_WATCHERS 64 /* per sandbox */

/* argv[1] the directory, argv[2] "1" for recursive. Events: CREATE 1, WRITE 2, REMOVE 3,
 * RENAME 4, CHMOD 5 (moved away is RENAME, moved in is CREATE, as envd). */
static const char e2b_watcher_py[] =
    "import ctypes,json,os,struct,sys\n"
    "libc=ctypes.CDLL(None,use_errno=True)\n"
    "root=os.path.abspath(sys.argv[1]);rec=sys.argv[2]=='1'\n"
    "fd=libc.inotify_init1(0)\n"
    "M=0x2|0x4|0x8|0x40|0x80|0x100|0x200\n"
    "wd={}\n"
    "def add(p):\n"
    " w=libc.inotify_add_watch(fd,p.encode(),M)\n"
    " if w<0:\n"
    "  e=ctypes.get_errno();sys.stderr.write('%s: %s\\n'%(p,os.strerror(e)));sys.exit(2)\n"
    " wd[w]=p\n"
    " if rec:\n"
    "  for d in os.scandir(p):\n"
    "   if d.is_dir(follow_symlinks=False):add(d.path)\n"
    "if not os.path.isdir(root):\n"
    " sys.stderr.write('%s: not a directory\\n'%root);sys.exit(2)\n"
    "add(root)\n"
    "print('{\"ready\":1}',flush=True)\n"
    "while True:\n"
    " b=os.read(fd,65536);i=0\n"
    " while i<len(b):\n"
    "  w,m,c,l=struct.unpack_from('iIII',b,i);n=b[i+16:i+16+l].rstrip(b'\\0');i+=16+l\n"
    "  if w not in wd or not n:continue\n"
    "  full=os.path.join(wd[w],n.decode('utf-8','replace'))\n"
    "  t=1 if m&0x180 else 3 if m&0x200 else 4 if m&0x40 else 5 if m&0x4 else 2\n"
    "  if rec and m&0x40000000 and m&0x180:\n"
    "   try:add(full)\n"
    "   except (OSError,SystemExit):pass\n"
    "  print(json.dumps({'name':os.path.relpath(full,root),'type':t}),flush=True)\n";

static const char *const e2b_event_names[] = {"EVENT_TYPE_UNSPECIFIED", "EVENT_TYPE_CREATE",
					      "EVENT_TYPE_WRITE",	"EVENT_TYPE_REMOVE",
					      "EVENT_TYPE_RENAME",	"EVENT_TYPE_CHMOD"};

/* A watcher's output, read line by line. */
struct e2b_watch {
	struct api *api;
	char *team, *sbx, *cmd;
	struct dm_logs *logs;
	bool ready;
	char line[E2B_WATCH_LINE];
	size_t line_len;
	char errbuf[512];
	size_t err_len;
	char buf[4096];
};

static void e2b_watch_free(void *p)
{
	struct e2b_watch *w = p;

	if (!w)
		return;
	if (w->cmd)
		dm_cmd_kill(w->api->d, w->team, w->sbx, w->cmd, SIGKILL, NULL);
	dm_logs_close(w->logs);
	free(w->team);
	free(w->sbx);
	free(w->cmd);
	free(w);
}

/* A FilesystemEvent of one line of the watcher's output, or NULL (the ready line). */
static json_t *e2b_watch_event(struct e2b_watch *w, const char *line)
{
	_cleanup_json_ json_t *j = json_loads(line, 0, NULL);
	json_int_t t = json_integer_value(json_object_get(j, "type"));
	const char *name = json_string_value(json_object_get(j, "name"));

	if (json_object_get(j, "ready")) {
		w->ready = true;
		return NULL;
	}
	if (!name || t < 1 || t > 5)
		return NULL;
	return json_pack("{s:s,s:s}", "name", name, "type", e2b_event_names[t]);
}

/* Reads what the watcher printed; each event goes to emit. 1 data, 0 ended, -ETIMEDOUT. */
static int e2b_watch_read(struct e2b_watch *w, uint64_t timeout_ms, void (*emit)(void *, json_t *),
			  void *cls)
{
	int stream = 0, r;
	size_t len = 0;

	r = dm_logs_next(w->logs, w->buf, sizeof(w->buf), &stream, &len, timeout_ms);
	if (r != 1)
		return r == -ETIMEDOUT ? r : 0;
	if (stream == 2) {
		size_t k = len < sizeof(w->errbuf) - 1 - w->err_len
			       ? len
			       : sizeof(w->errbuf) - 1 - w->err_len;

		memcpy(w->errbuf + w->err_len, w->buf, k);
		w->err_len += k;
		w->errbuf[w->err_len] = '\0';
		return 1;
	}
	for (size_t i = 0; i < len; i++) {
		json_t *ev;

		if (w->buf[i] != '\n') {
			if (w->line_len < sizeof(w->line) - 1)
				w->line[w->line_len++] = w->buf[i];
			continue;
		}
		w->line[w->line_len] = '\0';
		w->line_len = 0;
		bool was = w->ready;

		ev = e2b_watch_event(w, w->line);
		if (ev || (!was && w->ready))
			emit(cls, ev); /* NULL: the watch is in place */
	}
	return 1;
}

/* Starts the watcher of msg's path and waits for it to be ready; NULL with *code, *msg. */
static struct e2b_watch *e2b_watch_start(struct api_req *r, json_t *msg, const char **code,
					 char **why)
{
	const char *p = json_string_value(json_object_get(msg, "path"));
	_cleanup_free_ char *path = p && p[0] ? e2b_path(p) : NULL;
	bool rec = json_is_true(json_object_get(msg, "recursive")), root = false;
	const char *args[] = {"-c", e2b_watcher_py, path, rec ? "1" : "0"};
	struct dm_exec e = {.cmd = "python3", .args = args, .n_args = 4};
	struct e2b_watch *w = xzalloc(sizeof(*w));
	struct al_error *err = NULL;

	w->api = r->api;
	w->team = xstrdup(r->team);
	w->sbx = xstrdup(e2b_envd_sbx(r));
	*code = "invalid_argument";
	if (!path || json_is_true(json_object_get(msg, "includeEntry")) ||
	    json_is_true(json_object_get(msg, "allowNetworkMounts")) ||
	    e2b_user(r, NULL, &root) < 0) {
		*why = xstrdup(!path ? "a path is required" : "unsupported watch option or user");
		e2b_watch_free(w);
		return NULL;
	}
	e.sudo = root;
	if (dm_cmd_start(r->api->d, r->team, w->sbx, &e, &w->cmd, &err) < 0 ||
	    dm_logs_open(r->api->d, r->team, w->sbx, w->cmd, &w->logs, &err) < 0) {
		*code = e2b_code_of_errno(err->code);
		*why = xasprintf("starting the watcher (python3 in the sandbox): %s", err->msg);
		al_error_free(err);
		e2b_watch_free(w);
		return NULL;
	}
	return w;
}

/* --- WatchDir ------------------------------------------------------------------------- */

static void e2b_watch_emit_stream(void *cls, json_t *ev)
{
	struct e2b_stream *s = cls;

	e2b_stream_msg(s, ev ? json_pack("{s:o}", "filesystem", ev) : json_pack("{s:{}}", "start"));
}

static void e2b_watch_ended(struct e2b_stream *s, struct e2b_watch *w)
{
	if (w->ready)
		return e2b_stream_end(s, "unavailable", "the watch ended (the sandbox ended?)");
	e2b_stream_end(s, strstr(w->errbuf, "No such file") ? "not_found" : "invalid_argument",
		       w->err_len ? w->errbuf : "the watcher could not start");
}

static int e2b_watch_step(struct e2b_stream *s, void *ctx, uint64_t timeout_ms)
{
	struct e2b_watch *w = ctx;
	int r = e2b_watch_read(w, timeout_ms, e2b_watch_emit_stream, s);

	if (r == 0)
		e2b_watch_ended(s, w);
	return r == -ETIMEDOUT ? r : 0;
}

void e2b_fs_watch(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, true);
	_cleanup_free_ char *why = NULL;
	const char *code;
	struct e2b_watch *w;
	struct e2b_stream *s;

	if (!msg)
		return;
	w = e2b_watch_start(r, msg, &code, &why);
	s = e2b_stream_new(r, w, e2b_watch_step, e2b_watch_free);
	if (!w)
		e2b_stream_end(s, code, why);
	e2b_stream_keepalive(s, json_pack("{s:{}}", "keepalive"));
	e2b_stream_reply(r, s);
}

/* --- watchers kept between calls -------------------------------------------------------- */

struct e2b_watcher {
	char *id, *sbx, *team;
	struct e2b_watch *w;
	json_t *pending; /* events not handed out yet */
};

static void e2b_watcher_free(struct e2b_watcher *x)
{
	e2b_watch_free(x->w);
	json_decref(x->pending);
	free(x->id);
	free(x->sbx);
	free(x->team);
	free(x);
}

void e2b_watchers_close(struct e2b *e)
{
	for (size_t i = 0; i < e->n_watchers; i++)
		e2b_watcher_free(e->watchers[i]);
	free(e->watchers);
}

static void e2b_watch_emit_list(void *cls, json_t *ev)
{
	if (ev)
		json_array_append_new(cls, ev);
}

void e2b_fs_watcher_create(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	_cleanup_free_ char *why = NULL;
	struct e2b *e = r->api->e2b;
	struct e2b_watcher *x;
	const char *code;
	int rc = 1;

	if (!msg)
		return;
	x = xzalloc(sizeof(*x));
	x->pending = json_array();
	x->w = e2b_watch_start(r, msg, &code, &why);
	for (int t = 0; x->w && !x->w->ready && rc != 0 && t < 20; t++)
		rc = e2b_watch_read(x->w, 500, e2b_watch_emit_list, x->pending);
	if (!x->w || !x->w->ready) {
		if (x->w && !why) {
			code =
			    strstr(x->w->errbuf, "No such file") ? "not_found" : "invalid_argument";
			why = xstrdup(x->w->err_len ? x->w->errbuf : "the watcher could not start");
		}
		e2b_watcher_free(x);
		return e2b_unary_error(r, code, why);
	}
	x->sbx = xstrdup(e2b_envd_sbx(r));
	x->team = xstrdup(r->team);
	pthread_mutex_lock(&e->mu);
	x->id = xasprintf("w%llu", (unsigned long long)++e->next_watcher);
	if (e->n_watchers >= E2B_WATCHERS * 16) {
		pthread_mutex_unlock(&e->mu);
		e2b_watcher_free(x);
		return e2b_unary_error(r, "resource_exhausted", "too many watchers");
	}
	e->watchers = xrealloc(e->watchers, (e->n_watchers + 1) * sizeof(*e->watchers));
	e->watchers[e->n_watchers++] = x;
	e2b_unary_ok(r, json_pack("{s:s}", "watcherId", x->id));
	pthread_mutex_unlock(&e->mu);
}

/* e->mu held: the watcher of the request's sandbox named in msg, or NULL. */
static size_t e2b_watcher_find(struct api_req *r, json_t *msg)
{
	const char *id = json_string_value(json_object_get(msg, "watcherId"));
	struct e2b *e = r->api->e2b;

	for (size_t i = 0; id && i < e->n_watchers; i++)
		if (strcmp(e->watchers[i]->id, id) == 0 &&
		    strcmp(e->watchers[i]->sbx, e2b_envd_sbx(r)) == 0 &&
		    strcmp(e->watchers[i]->team, r->team) == 0)
			return i;
	return (size_t)-1;
}

void e2b_fs_watcher_events(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	struct e2b *e = r->api->e2b;
	struct e2b_watcher *x;
	size_t i;

	if (!msg)
		return;
	pthread_mutex_lock(&e->mu);
	i = e2b_watcher_find(r, msg);
	if (i == (size_t)-1) {
		pthread_mutex_unlock(&e->mu);
		return e2b_unary_error(r, "not_found", "no such watcher");
	}
	x = e->watchers[i];
	while (e2b_watch_read(x->w, 0, e2b_watch_emit_list, x->pending) == 1)
		;
	e2b_unary_ok(r, json_pack("{s:o}", "events", x->pending)); /* handed out */
	x->pending = json_array();
	pthread_mutex_unlock(&e->mu);
}

void e2b_fs_watcher_remove(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	struct e2b *e = r->api->e2b;
	struct e2b_watcher *x = NULL;
	size_t i;

	if (!msg)
		return;
	pthread_mutex_lock(&e->mu);
	i = e2b_watcher_find(r, msg);
	if (i != (size_t)-1) {
		x = e->watchers[i];
		e->watchers[i] = e->watchers[--e->n_watchers];
	}
	pthread_mutex_unlock(&e->mu);
	if (!x)
		return e2b_unary_error(r, "not_found", "no such watcher");
	e2b_watcher_free(x);
	e2b_unary_ok(r, json_object());
}
