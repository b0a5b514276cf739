/* SPDX-License-Identifier: MIT */
/*
 * airlock-mcp's main: the command line, then one loop that reads stdin (newline-delimited
 * JSON-RPC, jsonrpc.c) and signals, answers the protocol's requests itself and gives every
 * tools/call to a thread of its own, so that cancellations and pings are read while
 * commands run. stdout carries protocol messages only; logs go to stderr.
 */
#include "mcp/mcp.h"
#include "mcp/jsonrpc.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#include <airlock/airlock.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

void mcp_send(struct mcp_server *s, json_t *msg)
{
	char *text = msg ? json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	size_t len = text ? strlen(text) : 0, done = 0;

	json_decref(msg);
	if (!text)
		return;
	text = xrealloc(text, len + 1);
	text[len++] = '\n';
	pthread_mutex_lock(&s->out_lock);
	while (done < len) {
		ssize_t n = write(STDOUT_FILENO, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the client is gone: stdin's EOF ends the session */
		done += (size_t)n;
	}
	pthread_mutex_unlock(&s->out_lock);
	free(text);
}

void mcp_progress(struct mcp_job *job, double elapsed, double total, const char *message)
{
	json_t *p;

	if (!job->progress || atomic_load(&job->cancelled) || elapsed <= job->progress_sent)
		return;
	job->progress_sent = elapsed;
	p = json_pack("{s:O, s:f, s:s}", "progressToken", job->progress, "progress", elapsed,
		      "message", message);
	if (total > elapsed)
		json_object_set_new(p, "total", json_real(total));
	mcp_send(job->srv, mcp_notification("notifications/progress", p));
}

static void *job_main(void *arg)
{
	struct mcp_job *job = arg;
	struct mcp_server *s = job->srv;
	int code = 0;
	char *msg = NULL;
	json_t *r = mcp_tools_call(job, &code, &msg);
	bool cancelled = atomic_load(&job->cancelled);

	/* A cancelled request gets no answer (the client has forgotten it). */
	if (!cancelled)
		mcp_send(s, r ? mcp_result(job->id, r) : mcp_error(job->id, code, msg));
	else
		json_decref(r);
	free(msg);
	pthread_mutex_lock(&s->lock);
	for (struct mcp_job **p = &s->jobs; *p; p = &(*p)->next)
		if (*p == job) {
			*p = job->next;
			break;
		}
	s->n_jobs--;
	pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->lock);
	json_decref(job->id);
	json_decref(job->progress);
	json_decref(job->params);
	free(job);
	return NULL;
}

/* tools/call: a thread for it (the answer comes from there). */
static void start_call(struct mcp_server *s, json_t *id, json_t *params)
{
	struct mcp_job *job;
	pthread_t t;
	pthread_attr_t attr;

	pthread_mutex_lock(&s->lock);
	if (s->n_jobs >= MCP_JOBS_MAX) {
		pthread_mutex_unlock(&s->lock);
		mcp_send(s, mcp_error(id, MCP_INTERNAL_ERROR,
				      "too many tool calls at once (16): wait for one to end"));
		return;
	}
	job = xzalloc(sizeof(*job));
	job->srv = s;
	job->id = json_incref(id);
	job->params = params ? json_incref(params) : json_object();
	job->progress =
	    json_incref(json_object_get(json_object_get(params, "_meta"), "progressToken"));
	job->next = s->jobs;
	s->jobs = job;
	s->n_jobs++;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, job_main, job) != 0) {
		s->jobs = job->next;
		s->n_jobs--;
		pthread_mutex_unlock(&s->lock);
		mcp_send(s, mcp_error(id, MCP_INTERNAL_ERROR, "cannot start a thread"));
		json_decref(job->id);
		json_decref(job->params);
		json_decref(job->progress);
		free(job);
	} else {
		pthread_mutex_unlock(&s->lock);
	}
	pthread_attr_destroy(&attr);
}

/* Cancel the calls whose id equals `id` (NULL: all of them): no answer, command killed. */
static void cancel(struct mcp_server *s, json_t *id)
{
	pthread_mutex_lock(&s->lock);
	for (struct mcp_job *j = s->jobs; j; j = j->next)
		if (!id || json_equal(j->id, id)) {
			atomic_store(&j->cancelled, true);
			if (j->pid > 0)
				kill(j->pid, SIGTERM); /* airlock run kills its sandbox */
		}
	pthread_mutex_unlock(&s->lock);
}

static json_t *initialize(struct mcp_server *s, json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));

	s->initialized = true;
	return json_pack(
	    "{s:s, s:{s:{s:b}, s:{s:b, s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
	    mcp_negotiate_version(asked), "capabilities", "tools", "listChanged", 0, "resources",
	    "subscribe", 0, "listChanged", 0, "serverInfo", "name", "airlock", "title",
	    "airlock sandbox", "version", AIRLOCK_VERSION, "instructions",
	    s->opts->remote
		? "Tools run code in one airlock sandbox kept for this session (files persist; "
		  "reset starts over). Limits and network policy are fixed by the server."
		: "Tools run code in airlock sandboxes, a fresh one per call: write_file's files "
		  "are copied into each run's /workspace; nothing else persists. Limits and "
		  "network policy are fixed by the server.");
}

static json_t *resources_list(void)
{
	return json_pack("{s:[{s:s, s:s, s:s, s:s, s:s}]}", "resources", "uri", MCP_EGRESS_URI,
			 "name", "egress-log", "title", "Egress log", "description",
			 "The network gateway's decisions for this session's sandboxes, one JSON "
			 "object a line (time, verdict, reason, name, address, port, ...)",
			 "mimeType", "application/x-ndjson");
}

/* resources/read: the result, or NULL with *code and *msg. */
static json_t *resources_read(struct mcp_server *s, json_t *params, int *code, char **msg)
{
	_cleanup_error_ struct al_error *err = NULL;
	const char *uri = json_string_value(json_object_get(params, "uri"));
	size_t len = 0, skip = 0;
	_cleanup_free_ char *text = NULL;
	json_t *r;

	if (!uri || strcmp(uri, MCP_EGRESS_URI) != 0) {
		*code = uri ? MCP_RESOURCE_NOT_FOUND : MCP_INVALID_PARAMS;
		*msg = uri ? xasprintf("resource not found: '%s'", uri)
			   : xstrdup("resources/read: params.uri must be a string");
		return NULL;
	}
	text = s->be->egress_log(s, &len, &err);
	if (!text) {
		*code = MCP_INTERNAL_ERROR;
		*msg = xasprintf("the egress log: %s", err ? err->msg : "unreadable");
		return NULL;
	}
	if (len > MCP_EGRESS_MAX) { /* the newest lines, whole */
		skip = len - MCP_EGRESS_MAX;
		while (skip < len && text[skip - 1] != '\n')
			skip++;
	}
	r = json_pack("{s:[{s:s, s:s, s:s%}]}", "contents", "uri", MCP_EGRESS_URI, "mimeType",
		      "application/x-ndjson", "text", text + skip, len - skip);
	return r ? r
		 : json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", MCP_EGRESS_URI, "mimeType",
			     "application/x-ndjson", "text", "");
}

static void request(struct mcp_server *s, struct mcp_msg *m)
{
	const char *me = m->method;
	json_t *r = NULL;
	int code = MCP_METHOD_NOT_FOUND;
	_cleanup_free_ char *msg = NULL;

	if (strcmp(me, "initialize") == 0 && !s->initialized)
		r = initialize(s, m->params);
	else if (strcmp(me, "initialize") == 0)
		code = MCP_INVALID_REQUEST, msg = xstrdup("initialize: already initialized");
	else if (strcmp(me, "ping") == 0)
		r = json_object();
	else if (!s->initialized)
		code = MCP_INVALID_REQUEST,
		msg = xasprintf("%s: not initialized (send initialize first)", me);
	else if (strcmp(me, "tools/call") == 0) {
		start_call(s, m->id, m->params); /* answered by its thread */
		return;
	} else if (strcmp(me, "tools/list") == 0)
		r = json_pack("{s:O}", "tools", s->tools);
	else if (strcmp(me, "resources/list") == 0)
		r = resources_list();
	else if (strcmp(me, "resources/templates/list") == 0)
		r = json_pack("{s:[]}", "resourceTemplates");
	else if (strcmp(me, "resources/read") == 0)
		r = resources_read(s, m->params, &code, &msg);
	if (!r && !msg)
		msg = xasprintf("method not found: '%s'", me);
	mcp_send(s, r ? mcp_result(m->id, r) : mcp_error(m->id, code, msg));
}

static void notification(struct mcp_server *s, struct mcp_msg *m)
{
	json_t *id = json_object_get(m->params, "requestId");

	if (strcmp(m->method, "notifications/cancelled") == 0 && id)
		cancel(s, id);
	/* notifications/initialized and the rest need nothing from us; never answered */
}

/* One line of stdin (without its newline). */
static void line(struct mcp_server *s, char *buf, size_t len)
{
	struct mcp_msg m;

	if (len && buf[len - 1] == '\r')
		len--;
	if (len == strspn(buf, " \t"))
		return; /* a blank line is no message */
	switch (mcp_msg_parse(buf, len, &m)) {
	case MCP_INVALID:
		mcp_send(s, mcp_error(m.id, m.error_code, m.why));
		break;
	case MCP_REQUEST:
		request(s, &m);
		break;
	case MCP_NOTIFICATION:
		notification(s, &m);
		break;
	case MCP_RESPONSE:
		break; /* we send no requests */
	}
	mcp_msg_clear(&m);
}

/* stdin's bytes so far: whole lines are handled, a line over MCP_MSG_MAX is refused once
 * and skipped up to its newline. */
struct reader {
	char *buf;
	size_t len, cap;
	bool skipping;
};

static void feed(struct mcp_server *s, struct reader *r)
{
	char *start = r->buf, *nl;
	size_t left = r->len;

	while ((nl = memchr(start, '\n', left))) {
		*nl = '\0';
		if (!r->skipping)
			line(s, start, (size_t)(nl - start));
		r->skipping = false;
		left -= (size_t)(nl + 1 - start);
		start = nl + 1;
	}
	if (left > MCP_MSG_MAX && !r->skipping) {
		mcp_send(s, mcp_error(NULL, MCP_INVALID_REQUEST, "message larger than 8 MiB"));
		r->skipping = true;
	}
	if (r->skipping)
		left = 0;
	memmove(r->buf, start, left);
	r->len = left;
}

/* Read until stdin ends or a signal asks us to stop. */
static void serve(struct mcp_server *s, int sfd)
{
	struct reader r = {.cap = 1 << 16};
	struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
			      {.fd = sfd, .events = POLLIN}};

	r.buf = xzalloc(r.cap + 1);
	for (;;) {
		ssize_t n;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break; /* SIGTERM, SIGINT, SIGHUP */
		if (!p[0].revents)
			continue;
		if (r.cap - r.len < 65536) {
			r.cap *= 2;
			r.buf = xrealloc(r.buf, r.cap + 1);
		}
		n = read(STDIN_FILENO, r.buf + r.len, r.cap - r.len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break; /* EOF: the client is gone (a last line without newline is dropped)
				*/
		r.len += (size_t)n;
		feed(s, &r);
	}
	free(r.buf);
}

/* Cancel what runs, wait for the threads (they kill their commands), close the backend. */
static void shut_down(struct mcp_server *s)
{
	struct timespec until;

	cancel(s, NULL);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	pthread_mutex_lock(&s->lock);
	while (s->n_jobs && pthread_cond_timedwait(&s->idle, &s->lock, &until) == 0)
		;
	if (s->n_jobs)
		fprintf(stderr, "airlock mcp: %zu tool calls did not end in 30 s\n", s->n_jobs);
	pthread_mutex_unlock(&s->lock);
	s->be->close(s);
}

/* --url/--socket anywhere before "--": the daemon mode. */
static bool wants_daemon(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--url") == 0 || strcmp(argv[i], "--socket") == 0)
			return true;
	return false;
}

static int open_backend(struct mcp_server *s, struct client *c)
{
	_cleanup_error_ struct al_error *err = NULL;
	int r = s->opts->remote ? mcp_remote_open(s, c, &err) : mcp_embedded_open(s, &err);

	if (r < 0)
		fprintf(stderr, "airlock mcp: %s\n", err ? err->msg : "cannot start");
	return r < 0 ? (err && err->code == EINVAL ? AL_EXIT_USAGE : AL_EXIT_SETUP) : 0;
}

int main(int argc, char **argv)
{
	struct mcp_opts o = {0};
	struct mcp_server s = {.opts = &o};
	struct client c = {0};
	sigset_t mask;
	int code, sfd;

	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			mcp_usage(stdout);
			return 0;
		}
	o.remote = wants_daemon(argc, argv);
	if (o.remote && (argc = client_init(&c, argc, argv)) < 0)
		return AL_EXIT_USAGE;
	code = mcp_flags_parse(&o, argc, argv);
	if (code == 0) {
		sigemptyset(&mask);
		sigaddset(&mask, SIGINT);
		sigaddset(&mask, SIGTERM);
		sigaddset(&mask, SIGHUP);
		sigprocmask(SIG_BLOCK, &mask, NULL); /* every thread inherits it */
		signal(SIGPIPE, SIG_IGN);
		sfd = signalfd(-1, &mask, SFD_CLOEXEC);
		pthread_mutex_init(&s.lock, NULL);
		pthread_mutex_init(&s.out_lock, NULL);
		pthread_cond_init(&s.idle, NULL);
		s.tools = mcp_tools_list(o.remote);
		code = open_backend(&s, &c);
		if (code == 0) {
			fprintf(stderr, "airlock mcp: ready (%s)\n",
				o.remote ? "against airlockd" : "embedded");
			serve(&s, sfd);
			shut_down(&s);
		}
		json_decref(s.tools);
	}
	mcp_flags_free(&o);
	if (o.remote)
		client_free(&c);
	return code;
}
