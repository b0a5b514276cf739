/* SPDX-License-Identifier: MIT */
/* airlockd: opening and closing the daemon -- the store, the threads, and the sandboxes
 * a previous daemon left running (found again, or ended). */
#include "daemon/internal.h"
#include "daemon/cowfork.h"
#include "jail/jail.h"
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
		if (dm_reason_parse(r->reason, &c->reason) < 0)
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
	jail_spec_from_json(cfg, &s->spec);
	s->gw_conns = net_gateway_conn_budget(s->spec.memory_bytes, s->spec.pids);
	s->timeout_ms = (uint64_t)(s->expires_ms - s->created_ms);
	s->workdir = xstrdup(s->spec.workdir);
	s->image = s->spec.image[0] != '\0';
	env = json_object_get(cfg, "env");
	s->env = xzalloc((json_array_size(env) + 1) * sizeof(char *));
	for (i = 0; i < json_array_size(env); i++)
		s->env[i] = xstrdup(json_string_value(json_array_get(env, i)) ?: "X=");
	json_decref(cfg);
	s->agent_fd = -1;
	s->root_held = -1;
	/* Its decisions so far were counted by the daemon before us (metrics_read.c). */
	s->egress_off = dm_egress_log_size(d, s->id);
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
	dm_sbx_add(d, s);
	/* Still the same PID 1? Then reconnect to its agent, which replays what we missed.
	 * A pooled sandbox of an earlier run is not reused: it is stopped. So is one whose
	 * stop was under way. */
	if (known && !stopping && s->team[0] && jail_proc_start_time(s->pid, &st) == 0 &&
	    st == s->start_time && dm_agent_connect(d, s, NULL) == 0)
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
		return al_error_msg(err, ENOEXEC,
				    "--agent '%s' is not an executable ELF file "
				    "(the airlock-agent binary is)",
				    path);
	return 0;
}

/*
 * The daemon's threads, each one required: without the agent workers nothing an agent
 * says is heard, without the reaper sandbox PID 1s stay zombies,
 * without the timer nothing expires, without the watchdog a dead gateway stays dead, and
 * --pool asked for a pool. A thread not started fails the start (daemon_close undoes it).
 */
static int start_threads(struct daemon *d, struct al_error **err)
{
	pthread_t w;
	int e;

	if (dm_agent_io_start(d, err) < 0)
		return -1;
	e = pthread_create(&d->reaper, NULL, dm_reaper_main, d);
	if (e)
		return al_error_set(err, e, "start the reaper thread");
	pthread_detach(d->reaper);
	e = pthread_create(&d->timer, NULL, dm_timer_main, d);
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
	d->cows = dm_cows_new();
	dm_metrics_init(d);
	/* Every sandbox's agent socket is SOCK_DIR/<id>.sock: refuse to start rather than fail
	 * every create later (a client's request would look at fault). */
	if (strlen(d->sock_dir) + 1 + DM_ID_LEN + strlen(".sock") > sock_max) {
		al_error_msg(
		    err, ENAMETOOLONG,
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
	/* The daemon's cpu cgroup first: its spawner and gateways are forked into it. */
	if (jail_cgroup_join_daemon(&why) < 0)
		dm_log_err(d, &why, "CPU weights");
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
	/* Before the recovery, which connects to the live sandboxes' agents. */
	if (dm_agent_io_open(d, err) < 0) {
		daemon_close(d);
		return -1;
	}
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
			dm_now_ms() -
			    (int64_t)(d->opts.retain_ms ? d->opts.retain_ms : DM_RETAIN_DEFAULT_MS),
			&why) < 0)
		dm_log_err(d, &why, "pruning ended sandboxes (again at the next start)");
	dm_prune_egress_logs(d);
	if (dm_snaps_open(d, err) < 0 || dm_drives_open(d, err) < 0 || dm_names_open(d, err) < 0) {
		daemon_close(d);
		return -1;
	}
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
			dm_sbx_stop_locked(d, d->sbxs[i], DM_SBX_STOPPED);
	/* What the timer had still to remove: a last try of up to 5 s, not to leave it. */
	for (int t = 0; t < 100 && dm_reclaim_cgroups(d) > 0; t++) {
		pthread_mutex_unlock(&d->mu);
		usleep(50000);
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	/* Sandboxes keep running; the agent workers are detached threads that die with us. */
	if (d->store)
		store_close(d->store);
	dm_snaps_close(d);
	dm_drives_close(d);
	dm_cows_free(d->cows);
	d->cows = NULL;
	dm_names_close(d);
	dm_state_unlock(d);
	free(d->sock_dir);
	free(d->creating); /* empty: no create outlives the API */
	free(d->state_dir);
	free(d->agent_path);
	free(d->spawner_exe);
	/* The registry itself is left to process exit: the agent workers may still use it. */
}
