/* SPDX-License-Identifier: MIT */
/* airlockd: the registry of sandboxes -- ids and references, JSON views, create, stop,
 * extend, network policy (retention.c: timers and forgetting; recover.c: open, close). */
#include "daemon/internal.h"
#include "jail/sandbox.h"
#include "net/contract.h"
#include "net/policy.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/path.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

/* Formatted first, then one fprintf: stdio's lock keeps lines of threads apart. */
void dm_log(struct daemon *d, const char *fmt, ...)
{
	_cleanup_free_ char *line = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&line, fmt, ap) < 0)
		al_oom();
	va_end(ap);
	fprintf(stderr, "airlockd: %s\n", line);
}

void dm_log_err(struct daemon *d, struct al_error **err, const char *fmt, ...)
{
	_cleanup_free_ char *what = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&what, fmt, ap) < 0)
		al_oom();
	va_end(ap);
	dm_log(d, "%s: %s", what, *err && (*err)->msg ? (*err)->msg : "unknown error");
	al_error_free(*err);
	*err = NULL;
}

int64_t dm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The store's and the API's spelling: both keep these strings. */
const char *dm_sbx_state_name(enum dm_sbx_state st)
{
	switch (st) {
	case DM_SBX_RUNNING:
		return "running";
	case DM_SBX_STOPPING:
		return "stopping";
	case DM_SBX_STOPPED:
		return "stopped";
	case DM_SBX_FAILED:
		return "failed";
	}
	return "failed"; /* not a state: nothing runs in it */
}

int dm_sbx_state_parse(const char *name, enum dm_sbx_state *out)
{
	for (enum dm_sbx_state st = DM_SBX_RUNNING; name && st <= DM_SBX_FAILED; st++)
		if (strcmp(name, dm_sbx_state_name(st)) == 0) {
			*out = st;
			return 0;
		}
	return -EINVAL;
}

void dm_new_id(const char *prefix, char out[DM_ID_LEN + 1])
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char rnd[24];

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		abort();
	memcpy(out, prefix, 4);
	for (int i = 0; i < 24; i++)
		out[4 + i] = alphabet[rnd[i] % 36];
	out[DM_ID_LEN] = '\0';
}

struct dm_sbx *dm_find_sbx(struct daemon *d, const char *team, const char *id,
			   struct al_error **err)
{
	for (size_t i = 0; i < d->n_sbxs; i++)
		if (strcmp(d->sbxs[i]->id, id) == 0 && strcmp(d->sbxs[i]->team, team) == 0)
			return d->sbxs[i];
	al_error_msg(err, ENOENT, "no sandbox '%.64s'", id);
	return NULL;
}

/* Atomic: a put needs no lock (forget_ended reads refs under d->mu, and a hold is only
 * taken under it, so a sandbox seen unheld there cannot be taken meanwhile). */
void dm_sbx_hold(struct dm_sbx *s)
{
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
}

void dm_sbx_put(struct dm_sbx *s)
{
	__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
}

void dm_cmd_hold(struct dm_cmd *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
}

void dm_cmd_put(struct dm_cmd *c)
{
	__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
}

/* Newest first: the agent's frames and most calls are about the latest commands, and a
 * sandbox that ran 1,000 commands made a front-to-back search cost ~5% of the daemon's
 * CPU per round trip. */
struct dm_cmd *dm_find_cmd(struct dm_sbx *s, const char *id)
{
	for (size_t i = s->n_cmds; i-- > 0;)
		if (strcmp(s->cmds[i]->id, id) == 0)
			return s->cmds[i];
	return NULL;
}

static json_t *config_of(const struct dm_sbx *s)
{
	json_t *c = json_loads(s->config_json ? s->config_json : "{}", 0, NULL);

	return c ? c : json_object();
}

static json_t *sbx_json(const struct dm_sbx *s)
{
	json_t *c = config_of(s), *o, *pol;

	pol = json_loads(s->policy_json ? s->policy_json : "\"deny-all\"", JSON_DECODE_ANY, NULL);
	o = json_pack("{s:s, s:s, s:I, s:I, s:o, s:I}", "id", s->id, "status",
		      dm_sbx_state_name(s->state), "created_at", (json_int_t)s->created_ms,
		      "expires_at", (json_int_t)s->expires_ms, "stopped_at",
		      s->stopped_ms ? json_integer(s->stopped_ms) : json_null(), "timeout_ms",
		      (json_int_t)s->timeout_ms);
	json_object_set_new(o, "resources",
			    json_pack("{s:O?, s:O?, s:O?}", "vcpus", json_object_get(c, "vcpus"),
				      "memory_bytes", json_object_get(c, "memory_bytes"),
				      "disk_bytes", json_object_get(c, "disk_bytes")));
	json_object_set(o, "image",
			json_object_get(c, "image") ? json_object_get(c, "image") : json_null());
	json_object_set_new(o, "workdir", json_string(s->workdir));
	/* Secret header values (per-request rules) never leave the daemon. */
	json_object_set_new(o, "network_policy",
			    pol ? net_policy_redact_json(pol) : json_string("deny-all"));
	json_decref(pol);
	json_object_set_new(o, "policy_generation", json_integer(s->policy_gen));
	json_object_set_new(o, "warm", json_boolean(s->warm));
	json_object_set(o, "ports",
			json_is_array(json_object_get(c, "ports")) ? json_object_get(c, "ports")
								   : json_array());
	json_decref(c);
	return o;
}

static void to_store(const struct dm_sbx *s, struct store_sandbox *r)
{
	memset(r, 0, sizeof(*r));
	r->id = (char *)s->id;
	r->team = s->team;
	r->status = (char *)dm_sbx_state_name(s->state);
	r->created_ms = s->created_ms;
	r->expires_ms = s->expires_ms;
	r->stopped_ms = s->stopped_ms;
	r->init_pid = s->pid;
	r->init_start = (int64_t)s->start_time;
	r->host_base = s->host_base;
	r->config_json = s->config_json;
	r->policy_json = s->policy_json;
	r->policy_gen = s->policy_gen;
}

void dm_cmd_free(struct dm_cmd *c)
{
	free(c->argv_json);
	free(c->cwd);
	free(c);
}

void dm_sbx_free(struct dm_sbx *s)
{
	if (s->root_held >= 0)
		close(s->root_held);
	for (size_t i = 0; i < s->n_cmds; i++)
		dm_cmd_free(s->cmds[i]);
	free(s->cmds);
	for (char **e = s->env; e && *e; e++)
		free(*e);
	free(s->env);
	free(s->team);
	free(s->config_json);
	free(s->policy_json);
	free(s->workdir);
	pthread_mutex_destroy(&s->send_mu);
	free(s);
}

/* Does a command that ended so have an exit code to show? */
static bool reason_has_code(enum al_reason r)
{
	switch (r) {
	case AL_REASON_EXITED:
	case AL_REASON_EXEC_FAILED:
		return true;
	case AL_REASON_SIGNALED:
	case AL_REASON_TIMEOUT:
	case AL_REASON_OOM:
	case AL_REASON_SECCOMP:
	case AL_REASON_SETUP_FAILED:
	case AL_REASON_INTERRUPTED:
		return false;
	}
	return false;
}

/* A command's end as the store spells it (al_reason_name); -EINVAL for anything else. */
int dm_reason_parse(const char *name, enum al_reason *out)
{
	for (enum al_reason r = AL_REASON_EXITED; r <= AL_REASON_INTERRUPTED; r++)
		if (strcmp(name, al_reason_name(r)) == 0) {
			*out = r;
			return 0;
		}
	return -EINVAL;
}

json_t *dm_cmd_json(const struct dm_cmd *c)
{
	json_t *argv = json_loads(c->argv_json, 0, NULL), *o;
	bool done = c->finished;
	bool has_code = done && reason_has_code(c->reason);

	o = json_pack("{s:s, s:s, s:O?, s:s, s:b, s:I, s:o, s:s}", "id", c->id, "sandbox_id",
		      c->sbx->id, "cmd", argv ? json_array_get(argv, 0) : NULL, "cwd",
		      c->cwd ? c->cwd : "", "sudo", c->sudo, "started_at",
		      (json_int_t)c->started_ms, "finished_at",
		      done ? json_integer(c->finished_ms) : json_null(), "status",
		      done ? "finished" : "running");
	if (argv)
		json_array_remove(argv, 0);
	json_object_set_new(o, "args", argv ? argv : json_array());
	json_object_set_new(o, "exit_code", has_code ? json_integer(c->exit_code) : json_null());
	json_object_set_new(o, "signal", done && c->signal ? json_integer(c->signal) : json_null());
	json_object_set_new(o, "reason",
			    done ? json_string(al_reason_name(c->reason)) : json_null());
	json_object_set_new(o, "output_truncated", json_boolean(c->truncated));
	return o;
}

/* Stopped or failed: nothing of it runs any more, nothing will. */
bool dm_sbx_has_ended(const struct dm_sbx *s)
{
	switch (s->state) {
	case DM_SBX_RUNNING:
	case DM_SBX_STOPPING:
		return false;
	case DM_SBX_STOPPED:
	case DM_SBX_FAILED:
		return true;
	}
	return true;
}

/* *v -= x, not below 0 (output counts are kept apart and may disagree by a chunk). */
void dm_sub_floor0(uint64_t *v, uint64_t x)
{
	*v -= x < *v ? x : *v;
}

static void sbx_ended(struct daemon *d, struct dm_sbx *s, enum dm_sbx_state final,
		      int64_t stored_ms);

/* The store learns that sandbox id ended (final) at ms; false (logged) if it could not. */
static bool store_end(struct daemon *d, const char *id, enum dm_sbx_state final, int64_t ms)
{
	struct al_error *err = NULL;

	if (store_sandbox_set_status(d->store, id, dm_sbx_state_name(final), ms, &err) == 0)
		return true;
	dm_log_err(d, &err, "sandbox %s ended", id);
	return false;
}

void dm_sbx_ended(struct daemon *d, struct dm_sbx *s, enum dm_sbx_state final)
{
	sbx_ended(d, s, final, 0);
}

/* dm_sbx_ended; stored_ms, if not 0: its end is in the store already, at that time. */
static void sbx_ended(struct daemon *d, struct dm_sbx *s, enum dm_sbx_state final,
		      int64_t stored_ms)
{
	int64_t now = stored_ms ? stored_ms : dm_now_ms();
	struct al_error *err = NULL;

	dm_ca_remove(d, s->id); /* the sandbox's CA key does not outlive it */

	for (size_t i = 0; i < s->n_cmds; i++) {
		struct dm_cmd *c = s->cmds[i];

		if (c->finished)
			continue;
		/* The pid namespace died with PID 1: every process got SIGKILL. */
		c->finished = true;
		c->reason = c->timed_out ? AL_REASON_TIMEOUT : AL_REASON_SIGNALED;
		c->signal = SIGKILL;
		c->finished_ms = now;
		dm_metrics_cmd_end(d, c);
		/* It ended all the same; a restart finds the sandbox dead and ends it again. */
		if (store_command_finish(d->store, c->id, now, -1, SIGKILL,
					 al_reason_name(c->reason), &err) < 0)
			dm_log_err(d, &err, "sandbox %s ended", s->id);
	}
	if (!dm_sbx_has_ended(s)) {
		s->state = final;
		s->stopped_ms = now;
		if (!stored_ms)
			store_end(d, s->id, final, now);
	}
	s->gen++;
	pthread_cond_broadcast(&s->cv);
}

/* --- sandboxes ------------------------------------------------------------- */

/* The lowest uid slot no live sandbox uses (d->mu held). */
static uid_t alloc_host_base(struct daemon *d)
{
	for (uint32_t slot = DM_SLOT_FIRST; slot <= DM_SLOT_LAST; slot++) {
		uid_t base = 0x40000000u + (slot << 16);
		bool used = false;

		for (size_t i = 0; i < d->n_sbxs && !used; i++)
			used = d->sbxs[i]->host_base == base &&
			       (d->sbxs[i]->stopped_ms == 0 || d->sbxs[i]->cgroup_left);
		for (size_t i = 0; i < d->n_reserved && !used; i++)
			used = d->reserved[i] == base;
		if (!used && d->n_reserved < ARRAY_SIZE(d->reserved)) {
			d->reserved[d->n_reserved++] = base; /* ours until the create ends */
			return base;
		}
	}
	return 0;
}

static void release_host_base(struct daemon *d, uid_t base)
{
	for (size_t i = 0; i < d->n_reserved; i++)
		if (d->reserved[i] == base) {
			d->reserved[i] = d->reserved[--d->n_reserved];
			break;
		}
}

/* The store's creation parameters: the spec's own form, the lifetime and the env. */
static char *make_config(const struct dm_create *c, uint64_t timeout_ms)
{
	json_t *o = jail_spec_json(&c->spec), *env = json_array();
	char *s;

	for (size_t i = 0; i < c->n_env; i++)
		json_array_append_new(env, json_string(c->env[i]));
	json_object_set_new(o, "timeout_ms", json_integer((json_int_t)timeout_ms));
	json_object_set_new(o, "env", env);
	json_object_set_new(o, "ports", dm_ports_json(c->ports, c->n_ports));
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

/* The settings (the spec's one validator, after its defaults; the workdir normalized by
 * create), then what only a daemon create has: env and lifetime. */
static int validate_create(const struct dm_create *c, struct al_error **err)
{
	size_t total = 0;

	if (jail_spec_validate(&c->spec, err) < 0 || dm_ports_check(c->ports, c->n_ports, err) < 0)
		return -EINVAL;

	for (size_t i = 0; i < c->n_env; i++) {
		const char *eq = strchr(c->env[i], '=');
		if (!eq || eq == c->env[i])
			return al_error_msg(err, EINVAL, "env entry '%.64s' is not KEY=VALUE",
					    c->env[i]);
		total += strlen(c->env[i]) + 8;
		if (strlen(c->env[i]) > PROTO_MAX_STR || total > PROTO_MAX_FRAME / 4)
			return al_error_msg(err, E2BIG,
					    "env is limited to %u bytes an entry and "
					    "%u in all",
					    PROTO_MAX_STR, PROTO_MAX_FRAME / 4);
	}
	if (c->timeout_ms > DM_MAX_LIFETIME_MS)
		return al_error_msg(err, EINVAL, "timeout over the 24 h maximum");
	return 0;
}

/*
 * A create's image: a directory under the daemon's --images DIR, named relative to it (or
 * by an absolute path inside it), symlinks resolved. Nothing else on the host can become a
 * sandbox's root (a token would otherwise read the host's files through image "/"). The
 * resolved path in *out (NULL: no image).
 */
static int resolve_image(const struct daemon *d, const char *image, char **out,
			 struct al_error **err)
{
	_cleanup_free_ char *root = NULL, *want = NULL;
	char *real;
	struct stat st;
	size_t n;

	*out = NULL;
	if (!image)
		return 0;
	if (!d->opts.images_dir)
		return al_error_msg(err, EINVAL,
				    "image '%.200s': this daemon serves no images "
				    "(airlock serve --images DIR)",
				    image);
	root = realpath(d->opts.images_dir, NULL);
	if (!root)
		return al_error_msg(err, EIO, "the daemon's --images '%s': %s", d->opts.images_dir,
				    strerror(errno));
	want = image[0] == '/' ? xstrdup(image) : xasprintf("%s/%s", root, image);
	real = realpath(want, NULL);
	n = strlen(root);
	if (!real || strncmp(real, root, n) != 0 || real[n] != '/' || stat(real, &st) < 0 ||
	    !S_ISDIR(st.st_mode)) {
		free(real);
		return al_error_msg(err, EINVAL,
				    "image '%.200s' is not a directory under the "
				    "daemon's images",
				    image);
	}
	*out = real;
	return 0;
}

/* What a create gives a sandbox: owner, times, env, config, policy (a new one, or a pooled
 * one being handed out; s->workdir is set). Frees what a pooled one had. */
static void assign_create(struct daemon *d, struct dm_sbx *s, const char *team,
			  const struct dm_create *c)
{
	char *pol = c->network_policy
			? json_dumps(c->network_policy, JSON_COMPACT | JSON_ENCODE_ANY)
			: NULL;

	free(s->team);
	s->team = xstrdup(team);
	s->created_ms = dm_now_ms();
	s->timeout_ms = c->timeout_ms ? c->timeout_ms : d->opts.default_timeout_ms;
	s->expires_ms = s->created_ms + (int64_t)s->timeout_ms;
	for (char **e = s->env; e && *e; e++)
		free(*e);
	free(s->env);
	s->env = xzalloc((c->n_env + 1) * sizeof(char *));
	for (size_t i = 0; i < c->n_env; i++)
		s->env[i] = xstrdup(c->env[i]);
	free(s->config_json);
	s->config_json = make_config(c, s->timeout_ms);
	s->spec = c->spec;
	free(s->policy_json);
	s->policy_json = pol ? pol : xstrdup("\"deny-all\"");
	s->policy_gen = 1;
	s->gw_conns = net_gateway_conn_budget(c->spec.memory_bytes, c->spec.pids);
	s->gw_quiet_until = dm_now_ms() + 15000; /* create starts it itself */
}

static struct dm_sbx *new_sbx(struct daemon *d, const char *team, const struct dm_create *c)
{
	struct dm_sbx *s = xzalloc(sizeof(*s));

	pthread_cond_init(&s->cv, NULL);
	dm_new_id("sbx_", s->id);
	s->state = DM_SBX_RUNNING;
	s->workdir = xstrdup(c->spec.workdir);
	s->image = c->spec.image[0] != '\0';
	assign_create(d, s, team, c);
	s->agent_fd = -1;
	s->root_held = -1;
	pthread_mutex_init(&s->send_mu, NULL);
	return s;
}

void dm_sbx_add(struct daemon *d, struct dm_sbx *s)
{
	d->sbxs = xrealloc(d->sbxs, (d->n_sbxs + 1) * sizeof(*d->sbxs));
	d->sbxs[d->n_sbxs++] = s;
}

static int check_policy(json_t *policy, char **canon, struct al_error **err);

/*
 * Take a pooled sandbox for this create: 1 if taken (*out_id set), 0 if none was ready
 * (or it could not be fitted: create one cold), -1 on an error the caller reports.
 */
static int pool_take(struct daemon *d, const char *team, const struct dm_create *c,
		     const char *canon, char **out_id, struct al_error **err)
{
	struct al_config cfg;
	struct store_sandbox row;
	struct dm_sbx *s = NULL;

	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < d->n_sbxs && !s; i++)
		if (dm_sbx_pooled(d->sbxs[i]) && d->sbxs[i]->n_cmds == 0 &&
		    jail_spec_same_root(&d->sbxs[i]->spec, &c->spec))
			s = d->sbxs[i];
	if (!s) {
		d->pool_missed++;
		pthread_mutex_unlock(&d->mu);
		return 0;
	}
	/* Claimed under the lock: from here on it is this team's, created now. */
	assign_create(d, s, team, c);
	d->pool_taken++;
	s->warm = true;
	to_store(s, &row);
	dm_sbx_hold(s); /* its team may stop it meanwhile: the retention must not free it */
	pthread_cond_broadcast(&d->pool_cv); /* refill */
	pthread_mutex_unlock(&d->mu);
	/* The limits it was started with become the ones asked for. */
	jail_spec_config(&c->spec, &cfg);
	if (jail_sandbox_set_limits(s->id, &cfg, err) < 0 ||
	    store_sandbox_put(d->store, &row, err) < 0) {
		pthread_mutex_lock(&d->mu);
		dm_sbx_stop_locked(d, s, DM_SBX_FAILED);
		dm_sbx_put(s);
		pthread_mutex_unlock(&d->mu);
		return -1;
	}
	if (canon &&
	    dm_apply_policy(d, s->id, s->pid, canon, s->policy_gen, s->gw_conns, err) < 0) {
		pthread_mutex_lock(&d->mu);
		dm_sbx_stop_locked(d, s, DM_SBX_FAILED);
		dm_sbx_put(s);
		pthread_mutex_unlock(&d->mu);
		return al_error_wrap(err, "sandbox network");
	}
	pthread_mutex_lock(&d->mu);
	s->gw_quiet_until = 0;
	*out_id = xstrdup(s->id);
	dm_sbx_put(s);
	pthread_mutex_unlock(&d->mu);
	return 1;
}

/* The team's live sandboxes and creates in flight (d->mu held). A sandbox whose create
 * is about to return is counted twice for a moment: a create racing it may be refused
 * (429, retryable); the limit itself is never passed. */
static size_t team_load(const struct daemon *d, const char *team)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_sbxs; i++)
		n += strcmp(d->sbxs[i]->team, team) == 0 &&
		     (d->sbxs[i]->state == DM_SBX_RUNNING || d->sbxs[i]->state == DM_SBX_STOPPING);
	for (size_t i = 0; i < d->n_creating; i++)
		n += strcmp(d->creating[i], team) == 0;
	return n;
}

static int create(struct daemon *d, const char *team, const struct dm_create *asked, char **out_id,
		  struct al_error **err);

static int create_limited(struct daemon *d, const char *team, const struct dm_create *asked,
			  char **out_id, struct al_error **err);

int dm_sandbox_create(struct daemon *d, const char *team, const struct dm_create *asked,
		      char **out_id, struct al_error **err)
{
	uint64_t t0 = dm_mono_us();
	int r = create_limited(d, team, asked, out_id, err);

	if (team[0]) /* not the warm pool's refills (DM_POOL_TEAM): clients' creates */
		dm_metrics_create(d, r, err ? *err : NULL, t0);
	return r;
}

/* A create within the team's share (--team-max-sandboxes). */
static int create_limited(struct daemon *d, const char *team, const struct dm_create *asked,
			  char **out_id, struct al_error **err)
{
	size_t n, limit = d->opts.team_max_sbxs;
	int r;

	if (!limit)
		return create(d, team, asked, out_id, err);
	pthread_mutex_lock(&d->mu);
	n = team_load(d, team);
	if (n >= limit) {
		pthread_mutex_unlock(&d->mu);
		return al_error_msg(err, EAGAIN,
				    "team '%s' has %zu sandboxes running or being created: the "
				    "most this daemon allows a team (--team-max-sandboxes %zu)",
				    team, n, limit);
	}
	d->creating = xrealloc(d->creating, (d->n_creating + 1) * sizeof(*d->creating));
	d->creating[d->n_creating++] = xstrdup(team);
	pthread_mutex_unlock(&d->mu);
	r = create(d, team, asked, out_id, err);
	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < d->n_creating; i++)
		if (strcmp(d->creating[i], team) == 0) {
			free(d->creating[i]);
			d->creating[i] = d->creating[--d->n_creating];
			break;
		}
	pthread_mutex_unlock(&d->mu);
	return r;
}

/*
 * A create that failed once its sandbox had a uid range: its gateway, its sandbox, its
 * range, and s itself once the agent workers (if it was connected) have let go of it -- the
 * agent is gone, so its connection ends; should it not within 5 s, s is left to them and
 * logged.
 */
static void create_undo(struct daemon *d, struct dm_sbx *s, struct dm_gw_launch *gl)
{
	struct timespec until;
	bool held;

	dm_gateway_abort(gl);
	if (s->pid > 0)
		jail_sandbox_kill(s->pid, s->start_time, s->id);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	{
		_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);

		release_host_base(d, s->host_base);
		while (s->agent_served && pthread_cond_timedwait(&s->cv, &d->mu, &until) == 0)
			;
		held = s->agent_served;
	}
	if (held)
		dm_log(d, "sandbox %s: its agent connection outlived a failed create; left to it",
		       s->id);
	else
		dm_sbx_free(s);
}

static int create(struct daemon *d, const char *team, const struct dm_create *asked, char **out_id,
		  struct al_error **err)
{
	struct store_sandbox row;
	struct dm_sbx *s;
	struct dm_gw_launch gl = {.child = -1, .fd = -1};
	_cleanup_free_ char *canon = NULL, *image = NULL, *workdir = NULL;
	struct dm_create resolved = *asked;
	const struct dm_create *c = &resolved;

	/* The spec as the jail will take it: its workdir in the normal form the rules look
	 * at, its image the directory the name resolves to, every default filled in. */
	if (asked->spec.workdir[0] &&
	    (al_path_normalize(asked->spec.workdir, "workdir", &workdir, err) < 0 ||
	     JAIL_SPEC_SET(resolved.spec.workdir, workdir, "workdir", err) < 0))
		return -1;
	if (resolve_image(d, asked->spec.image[0] ? asked->spec.image : NULL, &image, err) < 0 ||
	    JAIL_SPEC_SET(resolved.spec.image, image ? image : "", "image", err) < 0)
		return -1;
	jail_spec_defaults(&resolved.spec);
	if (validate_create(c, err) < 0 ||
	    (c->network_policy && check_policy(c->network_policy, &canon, err) < 0))
		return -1;
	if (d->opts.pool && team[0] && dm_pool_fits(c)) {
		int r = pool_take(d, team, c, canon, out_id, err);

		if (r != 0)
			return r > 0 ? 0 : -1;
	}
	s = new_sbx(d, team, c);
	{
		_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);

		s->host_base = alloc_host_base(d);
	}
	if (!s->host_base) {
		dm_sbx_free(s);
		return al_error_msg(err, EBUSY, "no free uid range: too many sandboxes");
	}
	to_store(s, &row);
	/* A sandbox asked to have network: its gateway gets ready while the sandbox is made. */
	if (canon && !dm_policy_is_deny_all(canon) &&
	    dm_gateway_launch(d, s->id, canon, s->policy_gen, s->gw_conns, &gl, err) < 0) {
		create_undo(d, s, &gl);
		return al_error_wrap(err, "sandbox network");
	}
	if (dm_spawn(d, s, err) < 0 || dm_agent_connect(d, s, err) < 0 ||
	    (to_store(s, &row), store_sandbox_put(d->store, &row, err)) < 0) {
		create_undo(d, s, &gl);
		return -1;
	}
	{
		_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);

		dm_sbx_add(d, s);
		dm_sbx_hold(s); /* listed now: others may stop it, the retention must not free it */
		release_host_base(d, s->host_base);
	}
	/* ... and is linked to it before anyone can use it. */
	if (gl.fd >= 0 && dm_gateway_attach(&gl, s->pid, err) < 0) {
		_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);

		dm_sbx_stop_locked(d, s, DM_SBX_FAILED);
		dm_sbx_put(s);
		return al_error_wrap(err, "sandbox network");
	}
	{
		_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);

		s->gw_quiet_until = 0;
		*out_id = xstrdup(s->id);
		dm_sbx_put(s);
	}
	return 0;
}

int dm_sandbox_get(struct daemon *d, const char *team, const char *id, json_t **out,
		   struct al_error **err)
{
	struct dm_sbx *s;

	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, id, err);
	if (s)
		*out = sbx_json(s);
	pthread_mutex_unlock(&d->mu);
	return s ? 0 : -ENOENT;
}

int dm_sandbox_list(struct daemon *d, const char *team, json_t **out, struct al_error **err)
{
	json_t *a = json_array();

	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < d->n_sbxs; i++)
		if (strcmp(d->sbxs[i]->team, team) == 0)
			json_array_append_new(a, sbx_json(d->sbxs[i]));
	pthread_mutex_unlock(&d->mu);
	*out = a;
	return 0;
}

/* What a stop does while the kernel ends the sandbox (~0.35 ms here): its agent socket
 * goes, and, if none of its commands is running, the store learns its end. */
struct stop_meanwhile {
	struct daemon *d;
	const char *id, *sock;
	enum dm_sbx_state final;
	bool store; /* no command to end first: the row may be written now */
	int64_t stored_ms;
};

static void stop_meanwhile(void *arg)
{
	struct stop_meanwhile *m = arg;
	int64_t now = dm_now_ms();

	unlink(m->sock);
	/* The SIGKILL is sent and cannot be taken back: a daemon that dies before the end is
	 * seen finds the sandbox ended, as it would a moment later. */
	if (m->store && store_end(m->d, m->id, m->final, now))
		m->stored_ms = now;
}

int dm_sbx_stop_locked(struct daemon *d, struct dm_sbx *s, enum dm_sbx_state final)
{
	pid_t pid = s->pid;
	uint64_t st = s->start_time;
	char sock[4096];
	struct stop_meanwhile m = {
	    .d = d, .id = s->id, .sock = sock, .final = final, .store = true};
	int root;

	if (s->state != DM_SBX_RUNNING)
		return 0;
	/* "stopping" only in memory (other threads must not start anything meanwhile): the
	 * store keeps "running" until the kill is sent, so a daemon that dies before finds a
	 * live agent running again, or a dead one and ends it, after a restart. */
	s->state = DM_SBX_STOPPING;
	snprintf(sock, sizeof(sock), "%s/%s.sock", d->sock_dir, s->id);
	/* A running command's end is stored before the sandbox's (after the wait, below). */
	for (size_t i = 0; i < s->n_cmds && m.store; i++)
		m.store = s->cmds[i]->finished;
	pthread_mutex_unlock(&d->mu);
	/* Every process of the sandbox is gone when this returns; its mounts are not torn
	 * down yet (root: they go when it is closed). */
	jail_sandbox_end_held(pid, st, &root, stop_meanwhile, &m);
	pthread_mutex_lock(&d->mu);
	/* The mounts and the empty cgroup go right after, from the timer thread, not in the
	 * caller's wait (its uid range stays reserved until then). */
	s->root_held = root; /* -1 until now: a sandbox is stopped once */
	s->cgroup_left = true;
	pthread_cond_broadcast(&d->cv);
	sbx_ended(d, s, final, m.stored_ms);
	return 0;
}

int dm_sandbox_stop(struct daemon *d, const char *team, const char *id, struct al_error **err)
{
	uint64_t t0 = dm_mono_us();
	struct dm_sbx *s;

	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, id, err);
	if (s)
		dm_sbx_stop_locked(d, s, DM_SBX_STOPPED);
	pthread_mutex_unlock(&d->mu);
	dm_metrics_stop(d, s ? 0 : -ENOENT, err ? *err : NULL, t0);
	return s ? 0 : -ENOENT;
}

/*
 * A request's store write failed: EIO, an error of the server (5xx), whatever errno
 * SQLite's failure maps to (EBUSY, EROFS, EINVAL... would read as the client's fault).
 */
static int server_error(struct al_error **err)
{
	if (err && *err)
		(*err)->code = EIO;
	return -EIO;
}

int dm_sandbox_extend(struct daemon *d, const char *team, const char *id, uint64_t add_ms,
		      struct al_error **err)
{
	struct dm_sbx *s;
	int r = 0;

	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, id, err);
	if (!s) {
		r = -ENOENT;
	} else if (s->state != DM_SBX_RUNNING) {
		r = al_error_msg(err, ESRCH, "sandbox '%s' is %s", s->id,
				 dm_sbx_state_name(s->state));
	} else if (add_ms == 0 ||
		   (uint64_t)(s->expires_ms - s->created_ms) + add_ms > DM_MAX_LIFETIME_MS) {
		r = al_error_msg(err, EINVAL,
				 "a sandbox lives at most 24 h (and extend needs > 0)");
	} else if (store_sandbox_set_expiry(d->store, s->id, s->expires_ms + (int64_t)add_ms, err) <
		   0) {
		/* Not extended: an expiry the store lacks would be lost at a restart. */
		al_error_wrap(err, "extending sandbox '%s'", s->id);
		r = server_error(err);
	} else {
		s->expires_ms += (int64_t)add_ms;
		s->timeout_ms += add_ms;
	}
	pthread_mutex_unlock(&d->mu);
	return r;
}

int dm_sandbox_set_deadline(struct daemon *d, const char *team, const char *id, int64_t expires_ms,
			    struct al_error **err)
{
	struct dm_sbx *s;
	int r = 0;

	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, id, err);
	if (!s) {
		r = -ENOENT;
	} else if (s->state != DM_SBX_RUNNING) {
		r = al_error_msg(err, ESRCH, "sandbox '%s' is %s", s->id,
				 dm_sbx_state_name(s->state));
	} else if (expires_ms < s->created_ms ||
		   (uint64_t)(expires_ms - s->created_ms) > DM_MAX_LIFETIME_MS) {
		r = al_error_msg(err, EINVAL, "a sandbox lives at most 24 h");
	} else if (store_sandbox_set_expiry(d->store, s->id, expires_ms, err) < 0) {
		al_error_wrap(err, "setting the expiry of sandbox '%s'", s->id);
		r = server_error(err);
	} else {
		s->expires_ms = expires_ms;
		s->timeout_ms = (uint64_t)(expires_ms - s->created_ms);
	}
	pthread_mutex_unlock(&d->mu);
	return r;
}

/* Full validation (the API checked the shape only): the canonical form for the gateway. */
static int check_policy(json_t *policy, char **canon, struct al_error **err)
{
	struct net_policy *p = NULL;
	json_t *c;

	if (net_policy_parse(policy, &p, err) < 0)
		return al_error_wrap(err, "network policy");
	c = net_policy_to_json(p);
	*canon = json_dumps(c, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(c);
	net_policy_free(p);
	return 0;
}

int dm_sandbox_set_ports(struct daemon *d, const char *team, const char *id, const uint16_t *ports,
			 size_t n, struct al_error **err)
{
	struct store_sandbox row;
	struct dm_sbx *s;
	json_t *c;
	int r = -1;

	if (dm_ports_check(ports, n, err) < 0)
		return -1;
	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, id, err);
	if (s && s->state != DM_SBX_RUNNING) {
		al_error_msg(err, ESRCH, "sandbox '%s' is %s", s->id, dm_sbx_state_name(s->state));
	} else if (s) {
		c = config_of(s);
		json_object_set_new(c, "ports", dm_ports_json(ports, n));
		free(s->config_json);
		s->config_json = json_dumps(c, JSON_COMPACT);
		json_decref(c);
		to_store(s, &row);
		r = store_sandbox_put(d->store, &row, err);
	}
	pthread_mutex_unlock(&d->mu);
	return r;
}

int dm_sandbox_set_policy(struct daemon *d, const char *team, const char *id, json_t *policy,
			  struct al_error **err)
{
	struct dm_sbx *s;
	char *p = json_dumps(policy, JSON_COMPACT | JSON_ENCODE_ANY), *canon = NULL;
	char sid[DM_ID_LEN + 1];
	int64_t gen = 0;
	pid_t pid = 0;
	unsigned conns = 0;
	int r = check_policy(policy, &canon, err);

	pthread_mutex_lock(&d->mu);
	s = r < 0 ? NULL : dm_find_sbx(d, team, id, err);
	if (r == 0 && !s) {
		r = -ENOENT;
	} else if (s && s->state != DM_SBX_RUNNING) {
		r = al_error_msg(err, ESRCH, "sandbox '%s' is %s", s->id,
				 dm_sbx_state_name(s->state));
	} else if (s) {
		gen = ++s->policy_gen;
		pid = s->pid;
		conns = s->gw_conns;
		strcpy(sid, s->id);
		s->gw_quiet_until = dm_now_ms() + 15000; /* this update starts or pushes it */
		dm_sbx_hold(s);
	}
	pthread_mutex_unlock(&d->mu);
	if (r == 0) {
		struct al_error *late = NULL;

		/* Acknowledged only once in force; a failed update leaves deny-all. */
		r = dm_apply_policy(d, sid, pid, canon, gen, conns, err);
		pthread_mutex_lock(&d->mu);
		free(s->policy_json);
		s->policy_json = r == 0 ? TAKE_PTR(p) : xstrdup("\"deny-all\"");
		s->gw_quiet_until = 0;
		/* Memory follows the gateway, which enforces the policy already; a store that
		 * did not take it makes the update fail, so the caller knows and can retry. */
		if (r == 0 &&
		    store_sandbox_set_policy(d->store, s->id, s->policy_json, gen, err) < 0) {
			al_error_wrap(err,
				      "the network policy of sandbox '%s' is in force but was "
				      "not stored",
				      s->id);
			r = server_error(err);
		} else if (r < 0 && store_sandbox_set_policy(d->store, s->id, s->policy_json, gen,
							     &late) < 0) {
			dm_log_err(d, &late, "sandbox %s: storing deny-all after a failed update",
				   s->id);
		}
		pthread_mutex_unlock(&d->mu);
		dm_sbx_put(s);
	}
	free(p);
	free(canon);
	return r;
}

int dm_sandbox_egress_read(struct daemon *d, const char *team, const char *id, uint64_t off,
			   char *buf, size_t max, size_t *got, struct al_error **err)
{
	_cleanup_close_ int fd = -1;
	struct dm_sbx *s;
	char *path;
	ssize_t n;

	*got = 0;
	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, id, err);
	pthread_mutex_unlock(&d->mu);
	if (!s)
		return -ENOENT;
	path = dm_egress_log_path(d, id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return errno == ENOENT ? 0 : al_error_set(err, errno, "open the egress log");
	do
		n = pread(fd, buf, max, (off_t)off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return al_error_set(err, errno, "read the egress log");
	*got = (size_t)n;
	return 0;
}

/* --- timers, reaping, recovery --------------------------------------------- */
