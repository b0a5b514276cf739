/* SPDX-License-Identifier: MIT */
/*
 * An in-memory implementation of src/daemon/daemon.h for testing the HTTP layer
 * alone. Commands are simulated by a thread each:
 *   sleep MS      no output, exits 0 after MS ms (or when killed: signaled)
 *   cat           copies stdin to stdout until stdin is closed
 *   stderr ARGS   writes ARGS to stderr
 *   binary        writes "caf\xc3" "\xa9\n" "\xff\xfe\n" (a split character, invalid bytes)
 *   anything else writes ARGS joined by spaces and "\n" to stdout, in 3 chunks
 * and exit with the code in env EXIT=N (default 0). Files live in a list per sandbox.
 * Test code: prints "fake: logs_close" on stderr when a log cursor is closed.
 */
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

struct fk_chunk {
	int stream;
	char *data;
	size_t len;
};

struct fk_cmd {
	char *id, *name;
	json_t *args;
	char *cwd;
	bool sudo, done, stdin_open;
	int64_t started, finished;
	int exit_code, signal, want_exit;
	const char *reason;
	uint64_t timeout_ms;
	struct fk_chunk *chunks;
	size_t n_chunks;
	char *stdin_buf;
	size_t stdin_len;
	struct fk_sbx *sbx;
	struct fk_cmd *next;
};

struct fk_file {
	char *path;
	char *data;
	size_t len;
	bool dir;
	struct fk_file *next;
};

struct fk_sbx {
	char *id, *team, *image, *workdir, *status;
	int64_t created, expires, stopped;
	uint64_t timeout_ms, memory, disk;
	double vcpus;
	json_t *policy;
	int generation;
	struct fk_cmd *cmds;
	struct fk_file *files;
	struct fk_sbx *next;
	struct daemon *d;
};

struct daemon {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct fk_sbx *sbxs;
	unsigned counter;
	int running;
	uint64_t default_timeout_ms;
};

struct dm_logs {
	struct daemon *d;
	struct fk_cmd *c;
	size_t idx, off;
};

static int64_t fk_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fk_deadline(struct timespec *ts, uint64_t ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

int daemon_open(const struct daemon_opts *o, struct daemon **out, struct al_error **err)
{
	struct daemon *d = xzalloc(sizeof(*d));

	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->default_timeout_ms = o && o->default_timeout_ms ? o->default_timeout_ms : 300000;
	*out = d;
	return 0;
}

static void fk_sbx_free(struct fk_sbx *s)
{
	struct fk_cmd *c, *cn;
	struct fk_file *f, *fn;
	size_t i;

	for (c = s->cmds; c; c = cn) {
		cn = c->next;
		for (i = 0; i < c->n_chunks; i++)
			free(c->chunks[i].data);
		free(c->chunks);
		free(c->id);
		free(c->name);
		free(c->cwd);
		free(c->stdin_buf);
		json_decref(c->args);
		free(c);
	}
	for (f = s->files; f; f = fn) {
		fn = f->next;
		free(f->path);
		free(f->data);
		free(f);
	}
	free(s->id);
	free(s->team);
	free(s->image);
	free(s->workdir);
	json_decref(s->policy);
	free(s);
}

void daemon_close(struct daemon *d)
{
	struct fk_sbx *s;
	struct fk_cmd *c;

	pthread_mutex_lock(&d->mu);
	for (s = d->sbxs; s; s = s->next)
		for (c = s->cmds; c; c = c->next)
			if (!c->done)
				c->signal = 9;
	pthread_cond_broadcast(&d->cv);
	while (d->running > 0)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
	while (d->sbxs) {
		s = d->sbxs;
		d->sbxs = s->next;
		fk_sbx_free(s);
	}
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	free(d);
}

/* Under the lock. */
static struct fk_sbx *fk_sbx_find(struct daemon *d, const char *team, const char *id,
				  struct al_error **err)
{
	struct fk_sbx *s;

	for (s = d->sbxs; s; s = s->next)
		if (strcmp(s->id, id) == 0 && strcmp(s->team, team) == 0)
			return s;
	al_error_set(err, ENOENT, "sandbox '%s'", id);
	return NULL;
}

static struct fk_cmd *fk_cmd_find(struct daemon *d, const char *team, const char *sbx,
				  const char *id, struct al_error **err)
{
	struct fk_sbx *s = fk_sbx_find(d, team, sbx, err);
	struct fk_cmd *c;

	if (!s)
		return NULL;
	for (c = s->cmds; c; c = c->next)
		if (strcmp(c->id, id) == 0)
			return c;
	al_error_set(err, ENOENT, "command '%s'", id);
	return NULL;
}

static json_t *fk_ms_or_null(int64_t ms)
{
	return ms ? json_integer(ms) : json_null();
}

static json_t *fk_sbx_view(struct fk_sbx *s)
{
	return json_pack(
	    "{s:s,s:s,s:I,s:I,s:o,s:I,s:{s:f,s:I,s:I},s:o,s:s,s:O,s:i}", "id", s->id, "status",
	    s->status, "created_at", (json_int_t)s->created, "expires_at", (json_int_t)s->expires,
	    "stopped_at", fk_ms_or_null(s->stopped), "timeout_ms", (json_int_t)s->timeout_ms,
	    "resources", "vcpus", s->vcpus, "memory_bytes", (json_int_t)s->memory, "disk_bytes",
	    (json_int_t)s->disk, "image", s->image ? json_string(s->image) : json_null(), "workdir",
	    s->workdir, "network_policy", s->policy, "policy_generation", s->generation);
}

static json_t *fk_cmd_view(struct fk_cmd *c)
{
	return json_pack("{s:s,s:s,s:s,s:O,s:s,s:b,s:I,s:o,s:s,s:o,s:o,s:o}", "id", c->id,
			 "sandbox_id", c->sbx->id, "cmd", c->name, "args", c->args, "cwd", c->cwd,
			 "sudo", c->sudo, "started_at", (json_int_t)c->started, "finished_at",
			 fk_ms_or_null(c->finished), "status", c->done ? "finished" : "running",
			 "exit_code",
			 c->done && !c->signal ? json_integer(c->exit_code) : json_null(), "signal",
			 c->done && c->signal ? json_integer(c->signal) : json_null(), "reason",
			 c->reason ? json_string(c->reason) : json_null());
}

int dm_sandbox_create(struct daemon *d, const char *team, const struct dm_create *c, char **out_id,
		      struct al_error **err)
{
	struct fk_sbx *s = xzalloc(sizeof(*s));

	if (strcmp(c->spec.image, "missing") == 0) {
		free(s);
		return al_error_set(err, ENOENT, "image '%s'", c->spec.image);
	}
	pthread_mutex_lock(&d->mu);
	s->id = xasprintf("sbx_%04u", ++d->counter);
	s->team = xstrdup(team);
	s->image = c->spec.image[0] ? xstrdup(c->spec.image) : NULL;
	s->workdir = xstrdup(c->spec.workdir[0] ? c->spec.workdir : "/workspace");
	s->status = "running";
	s->created = fk_now();
	s->timeout_ms = c->timeout_ms ? c->timeout_ms : d->default_timeout_ms;
	s->expires = s->created + (int64_t)s->timeout_ms;
	s->memory = c->spec.memory_bytes ? c->spec.memory_bytes : 1ull << 30;
	s->disk = c->spec.disk_bytes ? c->spec.disk_bytes : 1ull << 30;
	s->vcpus = c->spec.vcpus;
	s->policy = c->network_policy ? json_deep_copy(c->network_policy) : json_string("deny-all");
	s->d = d;
	s->next = d->sbxs;
	d->sbxs = s;
	*out_id = xstrdup(s->id);
	pthread_mutex_unlock(&d->mu);
	return 0;
}

int dm_sandbox_get(struct daemon *d, const char *team, const char *id, json_t **out,
		   struct al_error **err)
{
	struct fk_sbx *s;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, id, err);
	if (s)
		*out = fk_sbx_view(s);
	pthread_mutex_unlock(&d->mu);
	return s ? 0 : -ENOENT;
}

int dm_sandbox_list(struct daemon *d, const char *team, json_t **out_array, struct al_error **err)
{
	json_t *a = json_array();
	struct fk_sbx *s;

	pthread_mutex_lock(&d->mu);
	for (s = d->sbxs; s; s = s->next)
		if (strcmp(s->team, team) == 0)
			json_array_append_new(a, fk_sbx_view(s));
	pthread_mutex_unlock(&d->mu);
	*out_array = a;
	return 0;
}

int dm_sandbox_stop(struct daemon *d, const char *team, const char *id, struct al_error **err)
{
	struct fk_sbx *s;
	struct fk_cmd *c;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, id, err);
	if (s && !s->stopped) {
		s->status = "stopped";
		s->stopped = fk_now();
		for (c = s->cmds; c; c = c->next)
			if (!c->done)
				c->signal = 9;
		pthread_cond_broadcast(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
	return s ? 0 : -ENOENT;
}

int dm_sandbox_extend(struct daemon *d, const char *team, const char *id, uint64_t add_ms,
		      struct al_error **err)
{
	struct fk_sbx *s;
	int r = 0;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, id, err);
	if (!s)
		r = -ENOENT;
	else if (s->stopped)
		r = al_error_set(err, ESRCH, "sandbox '%s' is stopped", id);
	else if (add_ms > 24ull * 3600 * 1000)
		r = al_error_set(err, EINVAL, "extend beyond 24 h");
	else
		s->expires += (int64_t)add_ms, s->timeout_ms += add_ms;
	pthread_mutex_unlock(&d->mu);
	return r;
}

/* Ports: the fake has no sandbox network to reach (tests/sdk/test_ports.py covers them). */
int dm_sandbox_fetch_source(struct daemon *d, const char *team, const char *id,
			    const struct dm_source *src, struct al_error **err)
{
	return al_error_msg(err, EHOSTUNREACH, "the fake daemon fetches nothing");
}

int dm_sandbox_set_ports(struct daemon *d, const char *team, const char *id, const uint16_t *ports,
			 size_t n, struct al_error **err)
{
	return al_error_msg(err, ENOSYS, "the fake daemon has no ports");
}

int dm_sandbox_port_connect(struct daemon *d, const char *team, const char *id, unsigned port,
			    bool any_port, int *fd, struct al_error **err)
{
	return al_error_msg(err, ENOENT, "no sandbox '%.64s'", id);
}

void dm_sandbox_inbound_log(struct daemon *d, const char *id, unsigned port, const char *what,
			    int status, uint64_t bytes_in, uint64_t bytes_out)
{
}

int dm_sandbox_set_deadline(struct daemon *d, const char *team, const char *id, int64_t expires_ms,
			    struct al_error **err)
{
	struct fk_sbx *s;
	int r = 0;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, id, err);
	if (!s)
		r = -ENOENT;
	else if (s->stopped)
		r = al_error_set(err, ESRCH, "sandbox '%s' is stopped", id);
	else
		s->expires = expires_ms;
	pthread_mutex_unlock(&d->mu);
	return r;
}

int dm_sandbox_usage(struct daemon *d, const char *team, const char *id, json_t **out,
		     struct al_error **err)
{
	struct fk_sbx *s;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, id, err);
	pthread_mutex_unlock(&d->mu);
	if (!s)
		return -ENOENT;
	*out = json_pack("{s:i,s:i,s:i,s:i,s:i}", "cpu_usec", 0, "memory_bytes", 1 << 20,
			 "memory_max", 0, "disk_used", 0, "disk_total", 1 << 30);
	return 0;
}

int dm_sandbox_set_policy(struct daemon *d, const char *team, const char *id, json_t *policy,
			  struct al_error **err)
{
	struct fk_sbx *s;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, id, err);
	if (s) {
		json_decref(s->policy);
		s->policy = json_deep_copy(policy);
		s->generation++;
	}
	pthread_mutex_unlock(&d->mu);
	return s ? 0 : -ENOENT;
}

#include "fake_daemon_cmd.c"
#include "fake_daemon_fs.c"
#include "fake_daemon_snap.c"

int dm_sandbox_egress_read(struct daemon *d, const char *team, const char *id, uint64_t off,
			   char *buf, size_t max, size_t *got, struct al_error **err)
{
	json_t *view = NULL;

	(void)off, (void)buf, (void)max;
	*got = 0;
	if (dm_sandbox_get(d, team, id, &view, err) < 0)
		return -1;
	json_decref(view);
	return 0;
}

char *dm_metrics_text(struct daemon *d, size_t *len)
{
	static const char text[] = "# HELP airlock_build_info The daemon's version (always 1).\n"
				   "# TYPE airlock_build_info gauge\n"
				   "airlock_build_info{version=\"fake\"} 1\n";
	char *s = xstrdup(text);

	*len = sizeof(text) - 1;
	return s;
}
