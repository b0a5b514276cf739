/* SPDX-License-Identifier: MIT */
/*
 * al_run(): the parent side of a one-shot sandbox. Creates the cgroup,
 * clones the child (child.c), answers its set-up requests, relays stdin,
 * stdout and stderr, enforces the timeout, and turns what happened into an
 * al_result. Every resource is released on every path.
 */
#include "host/ca_bundle.h"
#include "jail/jail.h"
#include "jail/relay.h"
#include "jail/run.h"
#include "net/contract.h"
#include "host/gw_client.h"
#include "jail/ahead/pool.h"
#include "jail/ahead/recycle.h"
#include "jail/ahead/template.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/path.h"
#include "common/xalloc.h"

#include <errno.h>
#include <poll.h>
#include <jansson.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

void al_config_init(struct al_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->workdir = "/workspace";
	cfg->timeout_ms = 5 * 60 * 1000;
	cfg->memory_bytes = 1ULL << 30;
	cfg->disk_bytes = 1ULL << 30;
	cfg->output_limit = 64ULL << 20;
	cfg->pids = 512;
	cfg->hostname = JAIL_HOSTNAME_DEFAULT;
}

const char *al_reason_name(enum al_reason r)
{
	static const char *const names[] = {"exited",	   "signaled",	 "timeout",
					    "oom",	   "seccomp",	 "setup_failed",
					    "exec_failed", "interrupted"};

	return (unsigned)r < ARRAY_SIZE(names) ? names[r] : "unknown";
}

int al_result_exit_code(const struct al_result *res)
{
	switch (res->reason) {
	case AL_REASON_EXITED:
		return res->exit_code;
	case AL_REASON_SIGNALED:
	case AL_REASON_SECCOMP:
		return AL_EXIT_SIGNAL_BASE + res->signal;
	case AL_REASON_TIMEOUT:
		return AL_EXIT_TIMEOUT;
	case AL_REASON_OOM:
		return AL_EXIT_OOM;
	case AL_REASON_EXEC_FAILED:
		return res->exit_code;
	case AL_REASON_INTERRUPTED:
		return AL_EXIT_SIGNAL_BASE + res->interrupt_signal;
	case AL_REASON_SETUP_FAILED:
	default:
		return AL_EXIT_SETUP;
	}
}

void al_result_release(struct al_result *res)
{
	free(res->error);
	res->error = NULL;
}

/* The workload's whole environment: a minimal base, then the caller's --env entries. */
static char **build_env(const struct al_config *cfg, bool with_net, bool with_ca)
{
	size_t n = 0, i, j, cap = cfg->n_env + 6 + NET_CA_ENV_N;
	char **env = xzalloc(cap * sizeof(*env));

	env[n++] = xstrdup("PATH=" DEFAULT_PATH);
	env[n++] = xstrdup("HOME=" JAIL_HOME);
	env[n++] = xstrdup("LANG=C.UTF-8");
	if (with_net) {
		/* Explicit-proxy clients use these; everything else is redirected anyway. */
		static const char *const proxy[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
						    "https_proxy"};
		env = xrealloc(env, (cap += 6) * sizeof(*env));
		for (size_t k = 0; k < 4; k++)
			env[n++] =
			    xasprintf("%s=http://%s:%d", proxy[k], NET_GW_ADDR, NET_PROXY_PORT);
		env[n++] = xstrdup("NO_PROXY=localhost,127.0.0.1");
		env[n++] = xstrdup("no_proxy=localhost,127.0.0.1");
	}
	for (i = 0; with_ca && i < NET_CA_ENV_N; i++) /* TLS-terminated domains: trust its CA */
		env[n++] = xstrdup(net_ca_env(cfg->image != NULL)[i]);
	if (cfg->tty)
		env[n++] = xasprintf("TERM=%s", cfg->term && *cfg->term ? cfg->term : "xterm");
	for (i = 0; i < cfg->n_env; i++) {
		const char *kv = cfg->env[i], *eq = strchr(kv, '=');
		size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);

		for (j = 0; j < n; j++) /* an explicit --env replaces a default */
			if (strncmp(env[j], kv, klen) == 0 && env[j][klen] == '=') {
				free(env[j]);
				env[j] = env[--n];
			}
		env[n++] = xstrdup(kv);
	}
	env[n] = NULL;
	return env;
}

static void free_env(char **env)
{
	for (char **e = env; e && *e; e++)
		free(*e);
	free(env);
}

/* The whole document is "deny-all" (a JSON string, blanks around it allowed); anything
 * else, even starting so, goes to the policy parser. */
static bool is_deny_all(const char *p)
{
	p += strspn(p, " \t\r\n");
	if (strcmp(p, "deny-all") == 0)
		return true;
	if (strncmp(p, "\"deny-all\"", 10) != 0)
		return false;
	p += 10;
	return p[strspn(p, " \t\r\n")] == '\0';
}

/* The workdir is taken in its normal form only (common/path.h), outside the kernel's. */
static int check_workdir(const char *wd, struct al_error **err)
{
	_cleanup_free_ char *norm = NULL;

	if (al_path_normalize(wd, "workdir", &norm, err) < 0)
		return -1;
	if (strcmp(norm, wd) != 0)
		return al_error_msg(err, EINVAL,
				    "workdir '%.200s' is not in normal form ('%.200s')", wd, norm);
	if (al_path_in_pseudo_fs(norm))
		return al_error_msg(err, EINVAL,
				    "workdir '%.200s' is /, or in /proc, /sys or /dev "
				    "(only /dev/shm there is the sandbox's)",
				    norm);
	return 0;
}

static int validate(const struct al_config *cfg, struct al_error **err)
{
	size_t i;

	if (!cfg->argv || !cfg->argv[0] || !cfg->argv[0][0])
		return al_error_msg(err, EINVAL, "no command given");
	if (cfg->workdir && check_workdir(cfg->workdir, err) < 0)
		return -1;
	for (i = 0; i < cfg->n_env; i++) {
		const char *eq = strchr(cfg->env[i], '=');
		if (!eq || eq == cfg->env[i])
			return al_error_msg(err, EINVAL, "environment entry '%s' is not KEY=VALUE",
					    cfg->env[i]);
	}
	for (i = 0; i < cfg->n_files; i++)
		if (!cfg->files[i].src[0] || !cfg->files[i].dst[0])
			return al_error_msg(err, EINVAL, "file copy needs SRC:DST");
	if (cfg->hostname && (strlen(cfg->hostname) > 63 || !cfg->hostname[0]))
		return al_error_msg(err, EINVAL, "hostname must have 1 to 63 characters");
	return 0;
}

/* Everything a run owns; released by run_cleanup() whatever happened. */
struct run {
	const struct jail_run_opts *o;
	bool no_rules; /* the policy surely has no per-request rules (jail_policy_without_rules) */
	struct jail_ctx ctx;
	struct jail_cgroup *cg;
	int sync[2], in[2], out[2], errp[2];
	int pidfd;
	pid_t pid;
	struct gw_client *gw; /* NULL for deny-all */
	const char *cg_name;  /* the run's cgroup, made after the clone on v1 (spawn) */
	int netns_fd;	      /* the sandbox's network namespace, made after the clone, or -1 */
	struct jail_pool_claim pool; /* namespaces made ahead, when the pool had one */
	bool gw_abandon; /* the caller exits next and wants no egress log: do not wait for it */
	int crowd_fd;	 /* our slot among the launches under way (jail_crowd_join), or -1 */
	char *cg_memory; /* v1: the memory cgroup the child makes (ctx.cg_memory), or NULL */
	struct jail_recycle recycle; /* the recycled network namespace (or pair), or its own */
	bool stranded;		     /* left in a namespace it checked: the caller must exit */
	int mnt_fd; /* the sandbox's mount namespace (relay.h): let go last, off our path */
	/* A recycled pair and a policy without rules: the gateway has no link, ruleset or CA
	 * to make, and starts after the clone (its exec does not hold the clone up). */
	const struct al_io *gw_io;
	const char *gw_name;
};

/* The root template's namespace (ctx.mntns_fd is ours then, not the pool's). */
static void close_template(struct run *r)
{
	if (r->ctx.root == JAIL_ROOT_TEMPLATE)
		al_closep(&r->ctx.mntns_fd);
}

/* r's record of the run's cgroups freed, the cgroups left as they are (a detached child
 * removes them, remove_cgroups). */
static void forget_cgroups(struct run *r)
{
	jail_cgroup_forget(r->cg);
	r->cg = NULL;
	free(r->cg_memory);
	r->cg_memory = NULL;
}

/* The run's cgroups removed (every process of the sandbox is dead), and r's record freed. */
static void remove_cgroups(void *arg)
{
	struct run *r = arg;

	if (!r->cg && r->cg_memory) /* the child may have made it before we made the rest */
		jail_cgroup_remove(r->cg_memory);
	jail_cgroup_destroy(r->cg);
	r->cg = NULL;
	forget_cgroups(r);
}

static void run_cleanup(struct run *r)
{
	int *fds[] = {r->sync, r->in, r->out, r->errp};

	/* A linked pair to check for reuse: its gateway's side as the gateway sent it. */
	bool pair = r->recycle.link && r->recycle.state != JAIL_RECYCLE_OFF;
	_cleanup_close_ int gw_exit = -1; /* a pidfd of the gateway */
	_cleanup_close_ int gw_ctl = -1;  /* its channel, closed once it was killed */
	int released;

	if (pair && r->recycle.state == JAIL_RECYCLE_FRESH) /* a copy is kept */
		jail_recycle_adopt_gw_fd(&r->recycle, gw_client_netns(r->gw));
	/* The gateway finishes and exits while we do the rest; its exit is awaited last,
	 * unless nothing it would still write is wanted by a caller about to exit. Then a
	 * pair's gateway is left to the pair's check (gw_exit, gw_ctl: neither signalled nor
	 * told here, so its exit never runs on our CPU ahead of ours); any other is killed. */
	if (r->gw_abandon) {
		if (pair)
			gw_client_hand_over(r->gw, &gw_ctl, &gw_exit);
		else
			gw_client_abandon(r->gw);
		r->gw = NULL;
	}
	gw_client_close(r->gw);
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		for (int j = 0; j < 2; j++)
			al_closep(&fds[i][j]);
	if (r->pidfd >= 0) {
		sys_pidfd_send_signal(r->pidfd, SIGKILL);
		while (waitid(P_PIDFD, (id_t)r->pidfd, NULL, WEXITED) < 0 && errno == EINTR)
			;
		al_closep(&r->pidfd);
	}
	/* Every process of the sandbox is dead (PID 1 of its pid namespace is reaped), and
	 * of a pair its gateway too: its network namespace (or pair) goes back to the pool if
	 * nothing of it remains, else it is destroyed (jail/ahead/recycle.h). */
	if (pair) { /* its egress log wanted: all of it before the caller goes on */
		gw_client_stop(r->gw);
		r->gw = NULL;
	}
	/* A caller about to exit does not wait for the check: a detached child makes it,
	 * unless launches fill every CPU: the child's fork and exit would then only take
	 * CPU from them, and what the caller waits for is their CPU. */
	if (r->o->caller_exits && !jail_crowd_full(r->crowd_fd, jail_crowd_cpus(), true)) {
		/* its cgroups too: the caller's exit waits for neither (3 rmdirs on v1, ~60 µs) */
		const struct jail_recycle_also also = {remove_cgroups, r};
		bool taken;

		released =
		    jail_recycle_release_detached(&r->recycle, gw_exit, &r->mnt_fd, &also, &taken);
		if (taken)
			forget_cgroups(r);
	} else {
		jail_recycle_end_gateway(gw_exit);
		released = jail_recycle_release(&r->recycle);
	}
	if (released == JAIL_NS_STRANDED)
		r->stranded = true;
	al_closep(&r->mnt_fd); /* without a detached check: its unmounts here */
	remove_cgroups(r);
	al_closep(&r->netns_fd);
	close_template(r);
	/* Launches on every CPU: the cold path (no pinning, no claim) serves them best, and a
	 * refill would only compete with them. The pool refills once the host is less busy. */
	if ((r->pool.held || r->pool.refill_only) &&
	    jail_crowd_full(r->crowd_fd, jail_crowd_cpus(), true))
		r->pool.no_refill = true;
	al_closep(&r->crowd_fd); /* no longer a launch under way */
	gw_client_stop(r->gw);
	r->gw = NULL;
	free_env(r->ctx.envp);
	r->ctx.envp = NULL;
	jail_pool_release(&r->pool); /* never used again: unpinned, and the pool topped up */
}

static int open_channels(struct run *r, const struct al_config *cfg, const struct al_io *io,
			 struct al_error **err)
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, r->sync) < 0)
		return al_error_set(err, errno, "socketpair");
	if (cfg->tty)
		return 0; /* stdio is the PTY the child opens in its own devpts */
	if (pipe2(r->out, O_CLOEXEC) < 0 || pipe2(r->errp, O_CLOEXEC) < 0)
		return al_error_set(err, errno, "pipe2");
	if (io->stdin_fd >= 0) {
		if (pipe2(r->in, O_CLOEXEC) < 0)
			return al_error_set(err, errno, "pipe2");
		fcntl(r->in[1], F_SETFL, O_NONBLOCK);
	} else {
		/* The sandbox's own /dev/null is not there yet: give it an empty pipe. */
		if (pipe2(r->in, O_CLOEXEC) < 0)
			return al_error_set(err, errno, "pipe2");
		al_closep(&r->in[1]);
	}
	return 0;
}

static int make_cgroup(struct run *r, struct al_error **err)
{
	/* pids/ alone; now and then every hierarchy, for what builds that removed pids/ first
	 * may have left (airlockd's start reads them all too). */
	jail_cgroup_sweep((getpid() & 63) == 0);
	if (r->ctx.cg_memory) /* v1, after the clone: the child makes its memory half (C4c) */
		return jail_cgroup_create_split(r->cg_name, r->ctx.cfg, &r->cg, err);
	return jail_cgroup_create(r->cg_name, r->ctx.cfg, &r->cg, err);
}

static int start_gateway(struct run *r, const struct al_config *cfg, const struct al_io *io,
			 const char *name, bool with_net, struct al_error **err);

static int spawn(struct run *r, struct al_error **err)
{
	r->ctx.sync_fd = r->sync[1];
	r->ctx.stdio[0] = r->in[0];
	r->ctx.stdio[1] = r->out[1];
	r->ctx.stdio[2] = r->errp[1];
	/* While the child builds its root, the parent makes the cgroups (v1, deny-all; see
	 * al_run) and the network namespace: the child is put on another CPU so that the two
	 * overlap (-0.4 ms in all, v1). Not with a gateway, busy on the other CPU then
	 * (+0.2 ms), nor with a root made ahead (little to do). */
	if (!r->gw && r->ctx.root != JAIL_ROOT_AHEAD) {
		jail_note_cpus(&r->ctx, r->crowd_fd);
		if (r->ctx.cpus_moved && r->ctx.netns == JAIL_NETNS_CLONE)
			r->ctx.netns = JAIL_NETNS_LATER;
	}
	if (jail_clone(&r->ctx, r->cg, &r->pid, &r->pidfd, err) < 0)
		return -1;
	if (r->gw_io && start_gateway(r, r->ctx.cfg, r->gw_io, r->gw_name, true, err) < 0)
		return -1;
	if (r->recycle.state == JAIL_RECYCLE_FRESH && r->ctx.netns == JAIL_NETNS_CLONE) {
		char path[64];
		_cleanup_close_ int fd = -1;

		snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)r->pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		jail_recycle_adopt_fd(&r->recycle, fd);
	}
	al_closep(&r->pool.sbx_fd); /* the child has joined them, or holds its own copies */
	al_closep(&r->pool.mnt_fd);
	close_template(r);
	/* Parent: close the child's ends. */
	al_closep(&r->sync[1]);
	al_closep(&r->in[0]);
	al_closep(&r->out[1]);
	al_closep(&r->errp[1]);
	/* The gateway, started before the clone, makes the link while the child builds its
	 * root; the relay follows it and sends JMSG_LINK, which the workload waits for. Its
	 * pid first: the link does not wait for the cgroups. */
	if (r->gw && gw_client_send_pid(r->gw, r->pid, err) < 0)
		return -1;
	/* Meanwhile (the child waits for GO before anything of the sandbox's runs). */
	jail_child_elsewhere(&r->ctx, r->pid);
	if (r->ctx.netns == JAIL_NETNS_LATER && jail_netns_make(&r->netns_fd, err) != 0)
		return -1; /* stranded in it or not: the run fails, nothing ran */
	if (r->ctx.netns == JAIL_NETNS_LATER)
		jail_recycle_adopt_fd(&r->recycle, r->netns_fd);
	if (!r->cg && make_cgroup(r, err) < 0)
		return -1;
	if (jail_release_child(r->cg, r->pid, r->sync[0], r->netns_fd, err) < 0)
		return -1;
	al_closep(&r->netns_fd); /* the child has it now */
	return 0;
}

static void set_setup_failed(struct al_result *res, struct al_error *e, const char *fallback)
{
	res->reason = AL_REASON_SETUP_FAILED;
	free(res->error);
	res->error = xstrdup(e && e->msg ? e->msg : fallback);
}

/* The name its gateway logs the run under: the caller's sandbox id, else the run's own. */
static const char *sandbox_id(const struct al_config *cfg, const char *name)
{
	return cfg->sandbox_id ? cfg->sandbox_id : name;
}

/* Namespaces the run made itself are destroyed as always, not kept for the next run. */
static void forget_fresh(struct run *r)
{
	if (r->recycle.state == JAIL_RECYCLE_FRESH)
		r->recycle.state = JAIL_RECYCLE_OFF;
}

/*
 * A set-up that failed ends the run: as an error when it was the caller's mistake (an
 * invalid policy), else as a result that says so. Everything is released either way.
 */
static int end_setup_failed(struct run *r, struct al_result *res, struct al_error **setup,
			    bool callers_mistake, const char *fallback, double t0,
			    struct al_error **err)
{
	forget_fresh(r); /* a run that never ran adds nothing to the pool */
	if (callers_mistake) {
		*err = TAKE_PTR(*setup);
		run_cleanup(r);
		return -1;
	}
	set_setup_failed(res, *setup, fallback);
	run_cleanup(r);
	res->duration_ms = jail_now_ms() - t0;
	return 0;
}

/*
 * Namespaces made ahead, if there is a pool: the sandbox joins its own (loopback up,
 * or eth0 configured and linked to the gateway's, whose ruleset is in place), and its
 * root too when its settings are the defaults the root was made with.
 */
static void claim_pool(struct run *r, const struct al_config *cfg, bool with_net)
{
	if (!r->o->pool_dir ||
	    !jail_pool_claim(r->o->pool_dir, with_net ? JAIL_POOL_LINK : JAIL_POOL_LOOPBACK,
			     &r->pool))
		return;
	r->ctx.netns = JAIL_NETNS_AHEAD;
	r->ctx.netns_fd = r->pool.sbx_fd;
	r->recycle.state = JAIL_RECYCLE_OFF; /* a made-ahead entry is never reused */
	if (jail_pool_root_fits(cfg, with_net && !r->no_rules)) {
		r->ctx.root = JAIL_ROOT_AHEAD;
		r->ctx.mntns_fd = r->pool.mnt_fd;
	}
}

/*
 * No entry of the one-shot pool: a recycled network namespace if one is ready (deny-all),
 * or a recycled pair (an allowlist: the sandbox's namespace, linked to its gateway's, whose
 * ruleset is in place, and usually a gateway waiting there, claimed now); the child joins
 * it, the gateway (the waiting one, or one started later) the pair's other side, and the
 * parent keeps its own fds, to check them after the run. Else the run makes its own
 * as always and may leave them in the pool at the end.
 */
static void claim_recycled(struct run *r, const struct al_config *cfg, const struct al_io *io,
			   const char *name, bool with_net)
{
	if (r->pool.held || !r->o->recycle_root)
		return;
	/* A pair's waiting gateway is the lite one: a policy with rules takes a pair without. */
	jail_recycle_claim(r->o->recycle_root, with_net, r->no_rules, &r->recycle);
	if (r->recycle.state != JAIL_RECYCLE_CLAIMED)
		return;
	/* Its waiting gateway takes our policy now; if it cannot, nobody else may start one
	 * in its namespace while it may still be there: the pair is given up. */
	if (r->recycle.gw_sock[0] &&
	    gw_client_start_pooled(cfg, true, sandbox_id(cfg, name), io->egress_log_fd,
				   r->recycle.gw_sock, &r->gw) < 0) {
		jail_recycle_give_up(&r->recycle, "its waiting gateway could not be claimed");
		return;
	}
	r->ctx.netns = JAIL_NETNS_AHEAD;
	r->ctx.netns_fd = r->recycle.fd;
}

/*
 * The gateway starts now and gets ready while the sandbox is built, unless the policy
 * may have per-request rules: then the sandbox needs its CA, made at start. None for
 * deny-all or no policy.
 */
static int start_gateway(struct run *r, const struct al_config *cfg, const struct al_io *io,
			 const char *name, bool with_net, struct al_error **err)
{
	const char *id = sandbox_id(cfg, name);

	if (!with_net)
		return 0;
	if (r->pool.held && gw_client_start_pooled(cfg, r->no_rules, id, io->egress_log_fd,
						   r->pool.gw_sock, &r->gw) == 0)
		return 0; /* the entry's own gateway, made ahead with it */
	if (gw_client_start(cfg, r->no_rules, id, io->egress_log_fd,
			    r->pool.held			       ? r->pool.gw_path
			    : r->recycle.state == JAIL_RECYCLE_CLAIMED ? r->recycle.gw_path
								       : NULL,
			    &r->gw, err) < 0)
		return -1;
	if (!r->no_rules && gw_client_ready(r->gw, err) < 0)
		return -1;
	return 0;
}

/*
 * Hand the parent's ends of the channels to the relay, which runs the sandbox to its end
 * (relay.c); the pidfd comes back reaped (or -1 after reaping).
 */
static void relay_run(struct run *r, struct relay *rl, const struct al_config *cfg,
		      const struct al_io *io, struct al_result *res, double t0)
{
	relay_init(rl, cfg, io, res);
	rl->sync_fd = r->sync[0];
	rl->pidfd = r->pidfd;
	rl->out_fd = r->out[0];
	rl->err_fd = r->errp[0];
	rl->in_fd = r->in[1];
	rl->pid = r->pid;
	rl->cg = r->cg;
	rl->host_base = r->ctx.host_base;
	rl->deadline_ms = cfg->timeout_ms ? t0 + (double)cfg->timeout_ms : 0;
	rl->gw = r->gw;
	rl->sandbox_has_ca = r->ctx.ca_pem != NULL;
	r->sync[0] = r->out[0] = r->errp[0] = r->in[1] = -1; /* the relay owns them now */
	relay_loop(rl);
	r->pidfd = TAKE_FD(rl->pidfd);
	if (rl->init_reaped) /* nothing left to kill or reap */
		al_closep(&r->pidfd);
	r->mnt_fd = TAKE_FD(rl->mnt_fd);
}

bool jail_policy_without_rules(const char *doc)
{
	json_t *p = doc ? json_loads(doc, JSON_DECODE_ANY, NULL) : NULL, *allow, *v;
	const char *k;
	bool none = p != NULL;

	allow = json_is_object(p) ? json_object_get(p, "allow") : NULL;
	if (json_is_object(allow))
		json_object_foreach(allow, k, v) none =
		    none && !(json_is_array(v) && json_array_size(v) > 0);
	json_decref(p);
	return none;
}

int al_run(const struct al_config *cfg, const struct al_io *io, struct al_result *res,
	   struct al_error **err)
{
	return jail_run(cfg, io, &(struct jail_run_opts){0}, res, err);
}

int jail_run(const struct al_config *cfg, const struct al_io *io, const struct jail_run_opts *o,
	     struct al_result *res, struct al_error **err)
{
	struct run r = {.o = o,
			.sync = {-1, -1},
			.in = {-1, -1},
			.out = {-1, -1},
			.errp = {-1, -1},
			.pidfd = -1,
			.pool = {.sbx_fd = -1, .mnt_fd = -1},
			.netns_fd = -1,
			.crowd_fd = -1,
			.recycle = {.fd = -1, .gw_fd = -1},
			.mnt_fd = -1};
	struct relay rl;
	bool with_net, cg_first;
	_cleanup_error_ struct al_error *setup = NULL;
	char name[64];
	double t0 = jail_now_ms();

	memset(res, 0, sizeof(*res));
	if (validate(cfg, err) < 0)
		return -1;
	/* "deny-all" needs no gateway: loopback only, as without a policy. */
	with_net = cfg->net_policy_json && !is_deny_all(cfg->net_policy_json);
	r.ctx.cfg = cfg;
	r.ctx.uid = cfg->root ? 0 : JAIL_USER_UID;
	r.ctx.host_base = 0x40000000u + (((uid_t)getpid() & 0x3fffu) << 16);
	r.ctx.net_link = with_net;
	r.no_rules = with_net && jail_policy_without_rules(cfg->net_policy_json);
	r.gw_abandon = o->caller_exits && io->egress_log_fd < 0;
	if (io->tty_fd >= 0)
		ioctl(io->tty_fd, TIOCGWINSZ, &r.ctx.winsz);
	snprintf(name, sizeof(name), "run-%d-%lld", (int)getpid(), (long long)(t0 * 1000));
	r.crowd_fd = jail_crowd_join(JAIL_CROWD_FILE); /* one of the launches under way */

	claim_pool(&r, cfg, with_net);
	claim_recycled(&r, cfg, io, name, with_net);
	if (r.gw) {
		/* the recycled pair's waiting gateway, claimed */
	} else if (with_net && r.no_rules && r.recycle.state == JAIL_RECYCLE_CLAIMED) {
		r.gw_io = io; /* spawn() starts it */
		r.gw_name = name;
	} else if (start_gateway(&r, cfg, io, name, with_net, &setup) < 0) {
		/* EINVAL: the policy is invalid, the caller's mistake */
		return end_setup_failed(&r, res, &setup, setup->code == EINVAL, "network gateway",
					t0, err);
	}
	r.ctx.ca_pem = gw_client_ca_pem(r.gw);
	/* No root made ahead: the read-only template's copy if it suits (one is made now if
	 * there is none for the host as it is), else the child builds the whole root. */
	if (r.ctx.root == JAIL_ROOT_BUILD && o->template_dir &&
	    jail_template_fits(cfg, r.ctx.ca_pem)) {
		r.ctx.mntns_fd = jail_template_open(o->template_dir, with_net, NULL);
		if (r.ctx.mntns_fd >= 0)
			r.ctx.root = JAIL_ROOT_TEMPLATE;
	}
	r.ctx.envp = build_env(cfg, with_net, r.ctx.ca_pem != NULL);
	r.cg_name = name;
	/* The cgroups come first on v2 (the clone joins them) and with a gateway of its own: its
	 * start makes a network namespace, and the clone (which makes the sandbox's) then
	 * waits less for it, and releases the child at once (2 x 2,000 alternated: -0.13 ms). */
	cg_first = jail_cgroup_at_clone() || (r.gw && r.ctx.netns != JAIL_NETNS_AHEAD);
	if (!cg_first) /* v1, after the clone: in two halves, the child's and ours */
		r.ctx.cg_memory = r.cg_memory = jail_cgroup_memory_path(name);
	if ((cg_first && make_cgroup(&r, &setup) < 0) || open_channels(&r, cfg, io, &setup) < 0 ||
	    spawn(&r, &setup) < 0) {
		/* a policy refused: it came before the pid could be sent */
		return end_setup_failed(&r, res, &setup, gw_client_policy_refused(r.gw),
					"set-up failed", t0, err);
	}

	relay_run(&r, &rl, cfg, io, res, t0);
	jail_cgroup_stats(r.cg, &res->peak_memory_bytes, &rl.oom_kills);
	relay_finish(&rl);
	if (res->reason == AL_REASON_SETUP_FAILED || rl.policy_refused)
		forget_fresh(&r); /* a run that never ran adds nothing to the pool */
	run_cleanup(&r);
	res->duration_ms = jail_now_ms() - t0;
	if (r.stranded) { /* jail/ahead/recycle.h: left in the namespace it checked */
		al_error_msg(err, EIO, "stranded in a sandbox's network namespace after the run");
		al_result_release(res);
		return -1;
	}
	if (rl.policy_refused) { /* an invalid policy is the caller's mistake, as above */
		al_error_msg(err, EINVAL, "%s", res->error ? res->error : "invalid network policy");
		al_result_release(res);
		return -1;
	}
	return 0;
}
