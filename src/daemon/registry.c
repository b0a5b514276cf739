/* SPDX-License-Identifier: MIT */
/* airlockd: the registry of sandboxes, their lifecycle, timers and recovery. */
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
		      dm_sbx_state_name(s->state),
		      "created_at", (json_int_t)s->created_ms, "expires_at",
		      (json_int_t)s->expires_ms, "stopped_at",
		      s->stopped_ms ? json_integer(s->stopped_ms) : json_null(), "timeout_ms",
		      (json_int_t)s->timeout_ms);
	json_object_set_new(o, "resources",
			    json_pack("{s:O?, s:O?, s:O?}", "vcpus", json_object_get(c, "vcpus"),
				      "memory_bytes", json_object_get(c, "memory_bytes"),
				      "disk_bytes", json_object_get(c, "disk_bytes")));
	json_object_set(o, "image", json_object_get(c, "image") ? json_object_get(c, "image")
							       : json_null());
	json_object_set_new(o, "workdir", json_string(s->workdir));
	/* Secret header values (per-request rules) never leave the daemon. */
	json_object_set_new(o, "network_policy",
			    pol ? net_policy_redact_json(pol) : json_string("deny-all"));
	json_decref(pol);
	json_object_set_new(o, "policy_generation", json_integer(s->policy_gen));
	json_object_set_new(o, "warm", json_boolean(s->warm));
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

static void cmd_free(struct dm_cmd *c)
{
	free(c->argv_json);
	free(c->cwd);
	free(c);
}

static void sbx_free(struct dm_sbx *s)
{
	if (s->root_held >= 0)
		close(s->root_held);
	for (size_t i = 0; i < s->n_cmds; i++)
		cmd_free(s->cmds[i]);
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
static int reason_parse(const char *name, enum al_reason *out)
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
static bool has_ended(const struct dm_sbx *s)
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
static void sub_floor0(uint64_t *v, uint64_t x)
{
	*v -= x < *v ? x : *v;
}

void dm_sbx_ended(struct daemon *d, struct dm_sbx *s, enum dm_sbx_state final)
{
	int64_t now = dm_now_ms();
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
		/* It ended all the same; a restart finds the sandbox dead and ends it again. */
		if (store_command_finish(d->store, c->id, now, -1, SIGKILL,
					 al_reason_name(c->reason), &err) < 0)
			dm_log_err(d, &err, "sandbox %s ended", s->id);
	}
	if (!has_ended(s)) {
		s->state = final;
		s->stopped_ms = now;
		if (store_sandbox_set_status(d->store, s->id, dm_sbx_state_name(final), now,
					     &err) < 0)
			dm_log_err(d, &err, "sandbox %s ended", s->id);
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

static char *make_config(const struct dm_create *c, uint64_t timeout_ms, const char *workdir)
{
	json_t *o = json_object(), *env = json_array();
	char *s;

	for (size_t i = 0; i < c->n_env; i++)
		json_array_append_new(env, json_string(c->env[i]));
	json_object_set_new(o, "image", c->image ? json_string(c->image) : json_null());
	json_object_set_new(o, "vcpus", json_real(c->vcpus));
	json_object_set_new(o, "memory_bytes",
			    json_integer((json_int_t)(c->memory_bytes ? c->memory_bytes : 1ull << 30)));
	json_object_set_new(o, "disk_bytes",
			    json_integer((json_int_t)(c->disk_bytes ? c->disk_bytes : 1ull << 30)));
	json_object_set_new(o, "timeout_ms", json_integer((json_int_t)timeout_ms));
	json_object_set_new(o, "workdir", json_string(workdir));
	json_object_set_new(o, "env", env);
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

static int validate_create(const struct dm_create *c, struct al_error **err)
{
	size_t total = 0;

	/* c->workdir is normalized (create): the rules look at that form only. */
	if (c->workdir && strlen(c->workdir) > 1024)
		return al_error_msg(err, EINVAL, "workdir is longer than 1024 bytes");

	for (size_t i = 0; i < c->n_env; i++) {
		const char *eq = strchr(c->env[i], '=');
		if (!eq || eq == c->env[i])
			return al_error_msg(err, EINVAL, "env entry '%.64s' is not KEY=VALUE",
					    c->env[i]);
		total += strlen(c->env[i]) + 8;
		if (strlen(c->env[i]) > PROTO_MAX_STR || total > PROTO_MAX_FRAME / 4)
			return al_error_msg(err, E2BIG, "env is limited to %u bytes an entry and "
					    "%u in all", PROTO_MAX_STR, PROTO_MAX_FRAME / 4);
	}
	if (c->vcpus < 0 || c->vcpus > 1024 || (c->vcpus > 0 && c->vcpus < 0.01))
		return al_error_msg(err, EINVAL, "resources: vcpus must be 0.01 to 1024 (or 0: no "
				    "limit)");
	if (c->disk_bytes && c->disk_bytes < DM_MIN_DISK)
		return al_error_msg(err, EINVAL, "resources: disk must be at least 1 MiB (the "
				    "sandbox's own /etc and directories live there)");
	if (c->workdir && al_path_in_pseudo_fs(c->workdir))
		return al_error_msg(err, EINVAL,
				    "workdir '%.200s' is /, or in /proc, /sys or /dev "
				    "(only /dev/shm there is the sandbox's)",
				    c->workdir);
	if (c->memory_bytes && c->memory_bytes < (4u << 20))
		return al_error_msg(err, EINVAL, "memory must be at least 4 MiB");
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
		return al_error_msg(err, EINVAL, "image '%.200s': this daemon serves no images "
				    "(airlock serve --images DIR)", image);
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
		return al_error_msg(err, EINVAL, "image '%.200s' is not a directory under the "
				    "daemon's images", image);
	}
	*out = real;
	return 0;
}

/* What a create gives a sandbox: owner, times, env, config, policy (a new one, or a pooled
 * one being handed out; s->workdir is set). Frees what a pooled one had. */
static void assign_create(struct daemon *d, struct dm_sbx *s, const char *team,
			  const struct dm_create *c)
{
	char *pol = c->network_policy ? json_dumps(c->network_policy,
						   JSON_COMPACT | JSON_ENCODE_ANY)
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
	s->config_json = make_config(c, s->timeout_ms, s->workdir);
	free(s->policy_json);
	s->policy_json = pol ? pol : xstrdup("\"deny-all\"");
	s->policy_gen = 1;
	s->gw_conns = net_gateway_conn_budget(c->memory_bytes ? c->memory_bytes : 1ull << 30,
					      DM_SANDBOX_PIDS);
	s->gw_quiet_until = dm_now_ms() + 15000; /* create starts it itself */
}

/* The limits a create asks for, as the jail takes them. */
static void create_limits(const struct dm_create *c, struct al_config *cfg)
{
	al_config_init(cfg);
	cfg->cpus = c->vcpus;
	cfg->timeout_ms = 0; /* the daemon's timer owns the lifetime */
	cfg->pids = DM_SANDBOX_PIDS;
	if (c->memory_bytes)
		cfg->memory_bytes = c->memory_bytes;
	if (c->disk_bytes)
		cfg->disk_bytes = c->disk_bytes;
}

static struct dm_sbx *new_sbx(struct daemon *d, const char *team, const struct dm_create *c)
{
	struct dm_sbx *s = xzalloc(sizeof(*s));

	pthread_cond_init(&s->cv, NULL);
	dm_new_id("sbx_", s->id);
	s->state = DM_SBX_RUNNING;
	s->workdir = xstrdup(c->workdir ? c->workdir : "/workspace");
	s->image = c->image != NULL;
	assign_create(d, s, team, c);
	s->agent_fd = -1;
	s->root_held = -1;
	pthread_mutex_init(&s->send_mu, NULL);
	return s;
}

static void add_sbx(struct daemon *d, struct dm_sbx *s)
{
	d->sbxs = xrealloc(d->sbxs, (d->n_sbxs + 1) * sizeof(*d->sbxs));
	d->sbxs[d->n_sbxs++] = s;
}

static int stop_locked_sbx(struct daemon *d, struct dm_sbx *s, enum dm_sbx_state final);
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
		    strcmp(d->sbxs[i]->workdir, c->workdir ? c->workdir : "/workspace") == 0)
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
	create_limits(c, &cfg);
	if (jail_sandbox_set_limits(s->id, &cfg, err) < 0 ||
	    store_sandbox_put(d->store, &row, err) < 0) {
		pthread_mutex_lock(&d->mu);
		stop_locked_sbx(d, s, DM_SBX_FAILED);
		dm_sbx_put(s);
		pthread_mutex_unlock(&d->mu);
		return -1;
	}
	if (canon && dm_apply_policy(d, s->id, s->pid, canon, s->policy_gen, s->gw_conns, err) < 0) {
		pthread_mutex_lock(&d->mu);
		stop_locked_sbx(d, s, DM_SBX_FAILED);
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

static int create(struct daemon *d, const char *team, const struct dm_create *asked,
		  char **out_id, struct al_error **err);

int dm_sandbox_create(struct daemon *d, const char *team, const struct dm_create *asked,
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

static int create(struct daemon *d, const char *team, const struct dm_create *asked,
		  char **out_id, struct al_error **err)
{
	struct al_config cfg;
	struct store_sandbox row;
	struct dm_sbx *s;
	struct dm_gw_launch gl = {.child = -1, .fd = -1};
	char *canon = NULL;
	_cleanup_free_ char *image = NULL, *workdir = NULL;
	struct dm_create resolved = *asked;
	const struct dm_create *c = &resolved;

	if (asked->workdir && al_path_normalize(asked->workdir, "workdir", &workdir, err) < 0)
		return -1;
	resolved.workdir = workdir;
	if (resolve_image(d, asked->image, &image, err) < 0)
		return -1;
	resolved.image = image;
	if (validate_create(c, err) < 0 ||
	    (c->network_policy && check_policy(c->network_policy, &canon, err) < 0))
		return -1;
	if (d->opts.pool && team[0] && dm_pool_fits(c)) {
		int r = pool_take(d, team, c, canon, out_id, err);

		if (r != 0) {
			free(canon);
			return r > 0 ? 0 : -1;
		}
	}
	s = new_sbx(d, team, c);
	create_limits(c, &cfg);
	cfg.image = c->image;
	cfg.workdir = s->workdir;

	pthread_mutex_lock(&d->mu);
	s->host_base = alloc_host_base(d);
	pthread_mutex_unlock(&d->mu);
	if (!s->host_base) {
		sbx_free(s);
		free(canon);
		return al_error_msg(err, EBUSY, "no free uid range: too many sandboxes");
	}
	to_store(s, &row);
	/* A sandbox asked to have network: its gateway gets ready while the sandbox is made. */
	if (canon && !dm_policy_is_deny_all(canon) &&
	    dm_gateway_launch(d, s->id, canon, s->policy_gen, s->gw_conns, &gl, err) < 0) {
		pthread_mutex_lock(&d->mu);
		release_host_base(d, s->host_base);
		pthread_mutex_unlock(&d->mu);
		sbx_free(s);
		free(canon);
		return al_error_wrap(err, "sandbox network");
	}
	if (dm_spawn(d, s, &cfg, err) < 0 || dm_agent_connect(d, s, err) < 0 ||
	    (to_store(s, &row), store_sandbox_put(d->store, &row, err)) < 0) {
		dm_gateway_abort(&gl);
		if (s->pid > 0)
			jail_sandbox_kill(s->pid, s->start_time, s->id);
		pthread_mutex_lock(&d->mu);
		release_host_base(d, s->host_base);
		pthread_mutex_unlock(&d->mu);
		if (!s->reader_running)
			sbx_free(s); /* else its reader thread still holds it: leave it (rare) */
		free(canon);
		return -1;
	}
	pthread_mutex_lock(&d->mu);
	add_sbx(d, s);
	dm_sbx_hold(s); /* listed now: others may stop it, the retention must not free it */
	release_host_base(d, s->host_base);
	pthread_mutex_unlock(&d->mu);
	/* ... and is linked to it before anyone can use it. */
	if (gl.fd >= 0 && dm_gateway_attach(&gl, s->pid, err) < 0) {
		free(canon);
		pthread_mutex_lock(&d->mu);
		stop_locked_sbx(d, s, DM_SBX_FAILED);
		dm_sbx_put(s);
		pthread_mutex_unlock(&d->mu);
		return al_error_wrap(err, "sandbox network");
	}
	free(canon);
	pthread_mutex_lock(&d->mu);
	s->gw_quiet_until = 0;
	*out_id = xstrdup(s->id);
	dm_sbx_put(s);
	pthread_mutex_unlock(&d->mu);
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

static int stop_locked_sbx(struct daemon *d, struct dm_sbx *s, enum dm_sbx_state final)
{
	pid_t pid = s->pid;
	uint64_t st = s->start_time;
	char sock[4096];
	int root;

	if (s->state != DM_SBX_RUNNING)
		return 0;
	/* "stopping" only in memory (other threads must not start anything meanwhile): the
	 * store keeps "running" until "stopped", so a daemon that dies in between finds a
	 * live agent running again, or a dead one and ends it, after a restart. */
	s->state = DM_SBX_STOPPING;
	snprintf(sock, sizeof(sock), "%s/%s.sock", d->sock_dir, s->id);
	pthread_mutex_unlock(&d->mu);
	/* Every process of the sandbox is gone when this returns; its mounts are not torn
	 * down yet (root: they go when it is closed). */
	jail_sandbox_end_held(pid, st, &root);
	unlink(sock);
	pthread_mutex_lock(&d->mu);
	/* The mounts and the empty cgroup go right after, from the timer thread, not in the
	 * caller's wait (its uid range stays reserved until then). */
	s->root_held = root; /* -1 until now: a sandbox is stopped once */
	s->cgroup_left = true;
	pthread_cond_broadcast(&d->cv);
	dm_sbx_ended(d, s, final);
	return 0;
}

int dm_sandbox_stop(struct daemon *d, const char *team, const char *id, struct al_error **err)
{
	struct dm_sbx *s;

	pthread_mutex_lock(&d->mu);
	s = dm_find_sbx(d, team, id, err);
	if (s)
		stop_locked_sbx(d, s, DM_SBX_STOPPED);
	pthread_mutex_unlock(&d->mu);
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
	} else if (add_ms == 0 || (uint64_t)(s->expires_ms - s->created_ms) + add_ms >
					  DM_MAX_LIFETIME_MS) {
		r = al_error_msg(err, EINVAL, "a sandbox lives at most 24 h (and extend needs > 0)");
	} else if (store_sandbox_set_expiry(d->store, s->id, s->expires_ms + (int64_t)add_ms,
					    err) < 0) {
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
			al_error_wrap(err, "the network policy of sandbox '%s' is in force but was "
				      "not stored", s->id);
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

static void kill_cmd(struct dm_sbx *s, const char *cmd_id, int sig)
{
	struct proto_buf b = {0};
	uint32_t sg = (uint32_t)sig;

	proto_begin(&b, PROTO_KILL, 0);
	proto_put_str(&b, PT_CMD_ID, cmd_id, strlen(cmd_id));
	proto_put_u32(&b, PT_SIGNAL, sg);
	dm_agent_send(s, &b);
}

/*
 * Cgroups of ended sandboxes not removed yet (d->mu held; it is dropped around the
 * attempts): those of stopped sandboxes, left to us so that a stop answers sooner, and
 * those still busy when their sandbox ended; before them, the mount namespaces that
 * stops held (s->root_held). One try each, no waiting; their uid ranges
 * stay reserved until they are gone (alloc_host_base). Returns how many are still left.
 */
static size_t reclaim_cgroups(struct daemon *d)
{
	char (*ids)[DM_ID_LEN + 1] = NULL;
	int *roots = NULL;
	size_t n = 0, left = 0, n_roots = 0;

	for (size_t i = 0; i < d->n_sbxs; i++) {
		if (d->sbxs[i]->root_held >= 0) {
			roots = xrealloc(roots, (n_roots + 1) * sizeof(*roots));
			roots[n_roots++] = d->sbxs[i]->root_held;
			d->sbxs[i]->root_held = -1;
		}
		if (d->sbxs[i]->cgroup_left) {
			ids = xrealloc(ids, (n + 1) * sizeof(*ids));
			strcpy(ids[n++], d->sbxs[i]->id);
		}
	}
	if (!n && !n_roots)
		return 0;
	pthread_mutex_unlock(&d->mu);
	/* The stopped sandboxes' mounts: torn down here (as each close returns), not in the
	 * stop that the caller waited for. */
	for (size_t k = 0; k < n_roots; k++)
		close(roots[k]);
	free(roots);
	for (size_t k = 0; k < n; k++)
		if (jail_sandbox_reclaim(ids[k]) < 0) {
			ids[k][0] = '\0';
			left++;
		}
	pthread_mutex_lock(&d->mu);
	for (size_t k = 0; k < n; k++)
		for (size_t i = 0; ids[k][0] && i < d->n_sbxs; i++)
			if (strcmp(d->sbxs[i]->id, ids[k]) == 0)
				d->sbxs[i]->cgroup_left = false;
	free(ids);
	return left;
}

/* An ended sandbox nobody uses any more (d->mu held): no caller holds it, its reader has
 * let it go, its cgroup is gone. */
static bool forgettable(const struct dm_sbx *s)
{
	return has_ended(s) && !__atomic_load_n(&s->refs, __ATOMIC_ACQUIRE) &&
	       !s->reader_running && !s->cgroup_left;
}

/* STATE/egress/<sandbox id>.jsonl of sandboxes the store no longer has (at start). */
static void prune_egress_logs(struct daemon *d)
{
	char *path = xasprintf("%s/egress", d->state_dir);
	DIR *dir = opendir(path);
	struct dirent *de;

	free(path);
	while (dir && (de = readdir(dir))) {
		struct store_sandbox row;
		struct al_error *err = NULL;
		char id[DM_ID_LEN + 1];
		int r;

		if (strlen(de->d_name) != DM_ID_LEN + 6 || strncmp(de->d_name, "sbx_", 4) != 0 ||
		    strcmp(de->d_name + DM_ID_LEN, ".jsonl") != 0)
			continue;
		memcpy(id, de->d_name, DM_ID_LEN);
		id[DM_ID_LEN] = '\0';
		r = store_sandbox_get(d->store, id, &row, &err);
		if (r == 1)
			store_sandbox_release(&row);
		else if (r == 0)
			unlinkat(dirfd(dir), de->d_name, 0);
		else /* it stays: the next start looks again */
			dm_log_err(d, &err, "keeping egress log %s", de->d_name);
	}
	if (dir)
		closedir(dir);
}

/* What forget_ended took out of memory leaves the store, and each sandbox's egress log
 * the disk, with d->mu dropped meanwhile; ids is freed. */
static void delete_forgotten(struct daemon *d, char (*ids)[DM_ID_LEN + 1], size_t n)
{
	if (!n)
		return;
	pthread_mutex_unlock(&d->mu);
	for (size_t k = 0; k < n; k++) {
		char *log = dm_egress_log_path(d, ids[k]);
		struct al_error *err = NULL;

		/* A failure leaves a row, pruned at a later start (store_prune). */
		if (store_sandbox_delete(d->store, ids[k], &err) < 0)
			dm_log_err(d, &err, "forgetting sandbox %s", ids[k]);
		unlink(log);
		free(log);
	}
	free(ids);
	pthread_mutex_lock(&d->mu);
}

/*
 * Retention (d->mu held; dropped around the store): an ended sandbox is forgotten, with
 * its commands and their output, its egress log and its rows, once it ended retain_ms
 * ago, or when more than max_ended ended ones are held or their output in the store is
 * over ended_output_max (the oldest first). Without it the daemon kept every sandbox it
 * ever made: memory, every look-up and every timer round grew with them (3,000
 * create+stop cycles: +17 MB), and the store without end.
 */
static void forget_ended(struct daemon *d)
{
	uint64_t retain = d->opts.retain_ms ? d->opts.retain_ms : DM_RETAIN_DEFAULT_MS;
	size_t max = d->opts.max_ended ? d->opts.max_ended : DM_MAX_ENDED_DEFAULT;
	uint64_t max_bytes = d->opts.ended_output_max ? d->opts.ended_output_max
						      : DM_ENDED_OUTPUT_DEFAULT;
	int64_t now = dm_now_ms();
	char (*ids)[DM_ID_LEN + 1] = NULL;
	size_t n = 0, ended = 0;
	uint64_t bytes = 0; /* the output the ended ones hold in the store */

	for (size_t i = 0; i < d->n_sbxs; i++)
		if (has_ended(d->sbxs[i]))
			ended++, bytes += d->sbxs[i]->out_total;
	for (;;) {
		bool over = ended > max || bytes > max_bytes;
		size_t pick = d->n_sbxs;

		for (size_t i = 0; i < d->n_sbxs; i++) {
			const struct dm_sbx *s = d->sbxs[i];

			if (!forgettable(s))
				continue;
			if (s->stopped_ms + (int64_t)retain <= now) {
				pick = i;
				break;
			}
			if (over && (pick == d->n_sbxs || s->stopped_ms < d->sbxs[pick]->stopped_ms))
				pick = i;
		}
		if (pick == d->n_sbxs)
			break;
		ids = xrealloc(ids, (n + 1) * sizeof(*ids));
		strcpy(ids[n++], d->sbxs[pick]->id);
		sub_floor0(&bytes, d->sbxs[pick]->out_total);
		sbx_free(d->sbxs[pick]);
		memmove(&d->sbxs[pick], &d->sbxs[pick + 1], (d->n_sbxs - pick - 1) * sizeof(*d->sbxs));
		d->n_sbxs--;
		ended--;
	}
	delete_forgotten(d, ids, n);
}

uint64_t dm_cmd_rec_bytes(const struct dm_cmd *c)
{
	return strlen(c->argv_json) + (c->cwd ? strlen(c->cwd) : 0);
}

static void ids_add(struct dm_ids *ids, const char *id)
{
	if (ids->n == ids->cap)
		ids->id =
		    xrealloc(ids->id, (ids->cap = ids->cap ? 2 * ids->cap : 64) * sizeof(*ids->id));
	strcpy(ids->id[ids->n++], id);
}

void dm_ids_delete(struct daemon *d, struct dm_ids *ids)
{
	struct al_error *err = NULL;

	/* A failure leaves the row until its sandbox's rows go. */
	for (size_t k = 0; k < ids->n; k++)
		if (store_command_delete(d->store, ids->id[k], &err) < 0)
			dm_log_err(d, &err, "forgetting command %s", ids->id[k]);
	free(ids->id);
	*ids = (struct dm_ids){0};
}

/*
 * A sandbox keeps its newest max_cmds finished commands, and no more of their records
 * (argv, cwd) than the records budget: older finished ones nobody holds are forgotten
 * with their output. Without it a client running `true` in a loop grew the daemon by ~360
 * bytes a command (~2 GB an hour at full speed) and the store without end, and 120
 * commands with ~512 KiB of arguments each held 52 MiB. One pass keeps the others in
 * order (a memmove per command would move the whole array each time, under the lock: at
 * 1,500 commands/s and 10,000 kept, ~120 MB a second). One that is held, or not in the
 * store yet, stays past its turn; by count the newest max stay regardless.
 */
bool dm_cmds_trim(struct daemon *d, struct dm_sbx *s, uint64_t extra, struct dm_ids *ids)
{
	size_t max = d->opts.max_cmds ? d->opts.max_cmds : DM_MAX_CMDS_DEFAULT;
	uint64_t budget =
	    d->opts.sbx_records_max ? d->opts.sbx_records_max : DM_SBX_RECORDS_DEFAULT;
	size_t due = 0, kept = 0;

	if (s->n_cmds <= max && s->rec_total + extra <= budget)
		return true;
	for (size_t k = 0; k < s->n_cmds; k++)
		due += s->cmds[k]->finished;
	due = due > max ? due - max : 0;
	for (size_t k = 0; k < s->n_cmds; k++) {
		struct dm_cmd *c = s->cmds[k];
		bool over = s->rec_total + extra > budget;

		if (c->finished && (due || over)) {
			due -= due > 0;
			if (c->row_stored && !__atomic_load_n(&c->refs, __ATOMIC_ACQUIRE)) {
				ids_add(ids, c->id);
				/* Its output and record leave the store: room in the budgets. */
				sub_floor0(&s->out_total, c->stored[0] + c->stored[1]);
				sub_floor0(&s->rec_total, dm_cmd_rec_bytes(c));
				cmd_free(c);
				continue;
			}
		}
		s->cmds[kept++] = c;
	}
	s->n_cmds = kept;
	return s->rec_total + extra <= budget;
}

/* Once a second, every sandbox (d->mu held; dropped around the store). */
static void forget_old_cmds(struct daemon *d)
{
	struct dm_ids ids = {0};

	for (size_t i = 0; i < d->n_sbxs; i++)
		dm_cmds_trim(d, d->sbxs[i], 0, &ids);
	if (!ids.n)
		return;
	pthread_mutex_unlock(&d->mu);
	dm_ids_delete(d, &ids);
	pthread_mutex_lock(&d->mu);
}

/* Sandboxes past their expiry are stopped; commands past their timeout are killed; once
 * a second, ended sandboxes past retention and old finished commands are forgotten. */
static void *timer_main(void *arg)
{
	struct daemon *d = arg;
	int64_t next_forget = 0;

	pthread_mutex_lock(&d->mu);
	while (!d->closing) {
		struct timespec ts;
		int64_t now = dm_now_ms();

		for (size_t i = 0; i < d->n_sbxs; i++) {
			struct dm_sbx *s = d->sbxs[i];

			if (s->state != DM_SBX_RUNNING)
				continue;
			if (s->expires_ms <= now) {
				for (size_t j = 0; j < s->n_cmds; j++)
					if (!s->cmds[j]->finished)
						s->cmds[j]->timed_out = true;
				stop_locked_sbx(d, s, DM_SBX_STOPPED);
				break; /* the list may have changed while unlocked */
			}
			for (size_t j = 0; j < s->n_cmds; j++) {
				struct dm_cmd *c = s->cmds[j];
				char cid[DM_ID_LEN + 1];

				if (c->finished || !c->deadline_ms ||
				    (int64_t)c->deadline_ms > now || c->timed_out)
					continue;
				c->timed_out = true;
				strcpy(cid, c->id);
				pthread_mutex_unlock(&d->mu);
				kill_cmd(s, cid, SIGKILL);
				pthread_mutex_lock(&d->mu);
			}
		}
		reclaim_cgroups(d);
		if (now >= next_forget) {
			forget_ended(d);
			forget_old_cmds(d);
			next_forget = now + 1000;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000;
		if (ts.tv_nsec >= 1000000000)
			ts.tv_sec++, ts.tv_nsec -= 1000000000;
		pthread_cond_timedwait(&d->cv, &d->mu, &ts);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* We are the subreaper of every sandbox's PID 1 once its spawner exits. */
static void *reaper_main(void *arg)
{
	struct daemon *d = arg;

	while (!__atomic_load_n(&d->closing, __ATOMIC_RELAXED)) {
		/* __WALL: sandbox PID 1s are CLONE_PARENT children without an exit signal. */
		if (waitpid(-1, NULL, __WALL) < 0) {
			struct timespec ts = {0, 50 * 1000000};
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static int load_cmd(void *ctx, const struct store_command *r)
{
	struct dm_sbx *s = ctx;
	struct dm_cmd *c = xzalloc(sizeof(*c));

	snprintf(c->id, sizeof(c->id), "%s", r->id);
	c->sbx = s;
	c->row_stored = true;
	c->argv_json = xstrdup(r->argv_json ? r->argv_json : "[]");
	c->cwd = r->cwd ? xstrdup(r->cwd) : NULL;
	c->sudo = r->sudo;
	c->started_ms = r->started_ms;
	c->finished_ms = r->finished_ms;
	c->exit_code = r->exit_code;
	c->signal = r->signal;
	if (r->reason) {
		c->finished = true;
		/* Only this vocabulary is ever stored; anything else reads as a kill. */
		if (reason_parse(r->reason, &c->reason) < 0)
			c->reason = AL_REASON_SIGNALED;
	}
	c->deadline_ms = (uint64_t)r->deadline_ms;
	c->out_gen = 1; /* an earlier run may have stored output: readers must look */
	s->rec_total += dm_cmd_rec_bytes(c);
	c->seq = ++s->cmd_seq;
	s->cmds = xrealloc(s->cmds, (s->n_cmds + 1) * sizeof(*s->cmds));
	s->cmds[s->n_cmds++] = c;
	return 0;
}

static int recover_one(void *ctx, const struct store_sandbox *r)
{
	struct daemon *d = ctx;
	struct dm_sbx *s = xzalloc(sizeof(*s));

	pthread_cond_init(&s->cv, NULL);
	json_t *cfg = json_loads(r->config_json ? r->config_json : "{}", 0, NULL), *env;
	uint64_t st = 0;
	size_t i;
	/* Only live rows are loaded: running, or stopping (written by earlier versions
	 * before the kill). A row the store's CHECK should have refused ends as failed. */
	bool known = dm_sbx_state_parse(r->status, &s->state) == 0;
	bool stopping = known && s->state == DM_SBX_STOPPING;
	struct al_error *err = NULL;

	if (!known) {
		dm_log(d, "sandbox %s: unknown state '%.32s' in the store: ended as failed", r->id,
		       r->status ? r->status : "");
		s->state = DM_SBX_RUNNING; /* so that dm_sbx_ended stores "failed" */
	}
	snprintf(s->id, sizeof(s->id), "%s", r->id);
	s->team = xstrdup(r->team);
	s->created_ms = r->created_ms;
	s->expires_ms = r->expires_ms;
	s->pid = r->init_pid;
	s->start_time = (uint64_t)r->init_start;
	s->host_base = r->host_base;
	s->config_json = xstrdup(r->config_json ? r->config_json : "{}");
	s->policy_json = xstrdup(r->policy_json ? r->policy_json : "\"deny-all\"");
	s->policy_gen = r->policy_gen;
	s->gw_conns = net_gateway_conn_budget(
		(uint64_t)json_integer_value(json_object_get(cfg, "memory_bytes")), DM_SANDBOX_PIDS);
	s->timeout_ms = (uint64_t)(s->expires_ms - s->created_ms);
	s->workdir = xstrdup(json_string_value(json_object_get(cfg, "workdir"))
				     ?: "/workspace");
	s->image = json_is_string(json_object_get(cfg, "image"));
	env = json_object_get(cfg, "env");
	s->env = xzalloc((json_array_size(env) + 1) * sizeof(char *));
	for (i = 0; i < json_array_size(env); i++)
		s->env[i] = xstrdup(json_string_value(json_array_get(env, i)) ?: "X=");
	json_decref(cfg);
	s->agent_fd = -1;
	s->root_held = -1;
	pthread_mutex_init(&s->send_mu, NULL);
	/* Either failure leaves the sandbox less to show (commands, or their output counts),
	 * not a reason to leave it unmanaged. */
	if (store_command_each(d->store, s->id, load_cmd, s, &err) < 0)
		dm_log_err(d, &err, "sandbox %s: loading its commands", s->id);
	for (i = 0; i < s->n_cmds; i++) {
		struct dm_cmd *c = s->cmds[i];

		if (store_output_size(d->store, c->id, 1, &c->stored[0], &err) < 0 ||
		    store_output_size(d->store, c->id, 2, &c->stored[1], &err) < 0)
			dm_log_err(d, &err, "command %s: the size of its stored output", c->id);
		/* What it stored in earlier runs counts against its budget in this one. */
		s->out_total += c->stored[0] + c->stored[1];
	}
	add_sbx(d, s);
	/* Still the same PID 1? Then reconnect to its agent, which replays what we missed.
	 * A pooled sandbox of an earlier run is not reused: it is stopped. So is one whose
	 * stop was under way. */
	if (known && !stopping && s->team[0] &&
	    jail_proc_start_time(s->pid, &st) == 0 && st == s->start_time &&
	    dm_agent_connect(d, s, NULL) == 0)
		return 0;
	jail_sandbox_kill(s->pid, s->start_time, s->id);
	pthread_mutex_lock(&d->mu);
	dm_sbx_ended(d, s, stopping ? DM_SBX_STOPPED : DM_SBX_FAILED);
	pthread_mutex_unlock(&d->mu);
	return 0;
}

/* The agent: a regular, executable ELF file (what fexecve in each sandbox will need). */
static int check_agent(const char *path, struct al_error **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char magic[4] = {0};
	struct stat st;

	if (fd < 0)
		return al_error_set(err, errno, "--agent '%s'", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111) ||
	    read(fd, magic, sizeof(magic)) != (ssize_t)sizeof(magic) ||
	    memcmp(magic, "\177ELF", 4) != 0)
		return al_error_msg(err, ENOEXEC, "--agent '%s' is not an executable ELF file "
				    "(the airlock-agent binary is)", path);
	return 0;
}

/*
 * The daemon's threads, each one required: without the reaper sandbox PID 1s stay zombies,
 * without the timer nothing expires, without the watchdog a dead gateway stays dead, and
 * --pool asked for a pool. A thread not started fails the start (daemon_close undoes it).
 */
static int start_threads(struct daemon *d, struct al_error **err)
{
	pthread_t w;
	int e;

	e = pthread_create(&d->reaper, NULL, reaper_main, d);
	if (e)
		return al_error_set(err, e, "start the reaper thread");
	pthread_detach(d->reaper);
	e = pthread_create(&d->timer, NULL, timer_main, d);
	if (e) {
		d->timer = 0; /* nothing to join */
		return al_error_set(err, e, "start the timer thread");
	}
	if (d->opts.pool) {
		if (d->opts.pool > DM_POOL_MAX)
			d->opts.pool = DM_POOL_MAX;
		e = pthread_create(&d->pool_thread, NULL, dm_pool_main, d);
		if (e)
			return al_error_set(err, e, "start the warm pool's thread");
		d->pool_running = true;
	}
	e = pthread_create(&w, NULL, dm_netwatch_main, d);
	if (e)
		return al_error_set(err, e, "start the gateways' watchdog thread");
	pthread_detach(w);
	return 0;
}

int daemon_open(const struct daemon_opts *o, struct daemon **out, struct al_error **err)
{
	struct daemon *d = xzalloc(sizeof(*d));
	const size_t sock_max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	struct al_error *why = NULL;
	char *db;
	int r;

	d->spawner_fd = -1;
	d->lock_fd = -1;

	d->opts = *o;
	d->state_dir = xstrdup(o->state_dir);
	d->agent_path = xstrdup(o->agent_path);
	d->opts.state_dir = d->state_dir;
	d->opts.agent_path = d->agent_path;
	if (!d->opts.default_timeout_ms)
		d->opts.default_timeout_ms = 5 * 60 * 1000;
	d->sock_dir = xasprintf("%s/sockets", d->state_dir);
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	/* Every sandbox's agent socket is SOCK_DIR/<id>.sock: refuse to start rather than fail
	 * every create later (a client's request would look at fault). */
	if (strlen(d->sock_dir) + 1 + DM_ID_LEN + strlen(".sock") > sock_max) {
		al_error_msg(err, ENAMETOOLONG,
			     "--state-dir '%s' is too long: the agents' sockets under it need at most "
			     "%zu bytes of path; use a shorter directory",
			     d->state_dir, sock_max);
		daemon_close(d);
		return -1;
	}
	/* An agent that cannot be exec'd must stop the start with a message naming the
	 * option, not fail every create later (a client's request would look at fault). */
	if (check_agent(d->agent_path, err) < 0) {
		daemon_close(d);
		return -1;
	}
	if ((mkdir(d->state_dir, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(d->sock_dir, 0700) < 0 && errno != EEXIST)) {
		al_error_set(err, errno, "mkdir '%s'", d->sock_dir);
		daemon_close(d);
		return -1;
	}
	if (dm_state_lock(d, err) < 0) {
		daemon_close(d);
		return -1;
	}
	/* Before the store and every thread: the spawner's fork copies little. */
	if (dm_spawner_start(d, &why) < 0) /* not fatal: the first create forks it again */
		dm_log_err(d, &why, "the sandbox spawner");
	db = xasprintf("%s/airlock.db", d->state_dir);
	r = store_open(db, &d->store, err);
	free(db);
	if (r < 0) {
		daemon_close(d);
		return -1;
	}
	/* Sandbox PID 1s become our children when their spawner exits. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* A daemon that does not know its live sandboxes would give their uid ranges out
	 * again and leave them unmanaged: it does not start. */
	if (store_sandbox_each(d->store, NULL, true, recover_one, d, err) < 0) {
		al_error_wrap(err, "recovering the sandboxes of '%s'", d->state_dir);
		daemon_close(d);
		return -1;
	}
	/* Ended sandboxes of earlier runs are not loaded (nothing serves them): their rows go
	 * once past the retention, and with them their egress logs. */
	if (store_prune(d->store,
			dm_now_ms() - (int64_t)(d->opts.retain_ms ? d->opts.retain_ms
								 : DM_RETAIN_DEFAULT_MS),
			&why) < 0)
		dm_log_err(d, &why, "pruning ended sandboxes (again at the next start)");
	prune_egress_logs(d);
	pthread_cond_init(&d->pool_cv, NULL);
	if (start_threads(d, err) < 0) {
		daemon_close(d);
		return -1;
	}
	*out = d;
	return 0;
}

void daemon_close(struct daemon *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->closing = true;
	pthread_cond_broadcast(&d->cv);
	pthread_cond_broadcast(&d->pool_cv);
	pthread_mutex_unlock(&d->mu);
	if (d->timer)
		pthread_join(d->timer, NULL);
	/* A refill in flight would add a pooled sandbox after the loop below stopped the
	 * others, and it would outlive us: let it land first (the spawner is still up). */
	if (d->pool_running)
		pthread_join(d->pool_thread, NULL);
	d->pool_running = false;
	dm_spawner_stop(d);
	/* Pooled sandboxes were never handed out: they end with us. */
	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < d->n_sbxs; i++)
		if (dm_sbx_pooled(d->sbxs[i]))
			stop_locked_sbx(d, d->sbxs[i], DM_SBX_STOPPED);
	/* What the timer had still to remove: a last try of up to 5 s, not to leave it. */
	for (int t = 0; t < 100 && reclaim_cgroups(d) > 0; t++) {
		pthread_mutex_unlock(&d->mu);
		usleep(50000);
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	/* Sandboxes keep running; their readers are detached threads that die with us. */
	if (d->store)
		store_close(d->store);
	dm_state_unlock(d);
	free(d->sock_dir);
	free(d->creating); /* empty: no create outlives the API */
	free(d->state_dir);
	free(d->agent_path);
	free(d->spawner_exe);
	/* The registry itself is left to process exit: reader threads may still use it. */
}
