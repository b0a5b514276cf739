/* SPDX-License-Identifier: MIT */
/*
 * airlockd and the network boundary: a sandbox gets its gateway
 * (airlock-gateway, in daemon mode) the first time its policy is anything
 * but deny-all; policy updates go to the gateway's control socket and are
 * acknowledged only once in force (the flows they refuse cut). The gateway
 * lives as long as the sandbox's PID 1 -- daemon restarts included.
 */
#include "daemon/internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "host/gw_client.h"
#include "net/gwctl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

bool dm_policy_is_deny_all(const char *json)
{
	return !json || strcmp(json, "\"deny-all\"") == 0 ||
	       strcmp(json, "{\"mode\":\"deny-all\"}") == 0 || strcmp(json, "deny-all") == 0;
}

static char *gw_ctl_path(struct daemon *d, const char *id)
{
	return xasprintf("%s/%s.gw", d->sock_dir, id);
}

char *dm_ca_dir(struct daemon *d, const char *id)
{
	return xasprintf("%s/ca/%s", d->state_dir, id);
}

void dm_ca_remove(struct daemon *d, const char *id)
{
	static const char *const files[] = {"ca.key", "ca.pem", "ca.key.tmp", "ca.pem.tmp"};
	char *dir = dm_ca_dir(d, id);

	if (rmdir(dir) == 0 || errno == ENOENT) { /* no CA (most sandboxes), or an empty dir */
		free(dir);
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char *f = xasprintf("%s/%s", dir, files[i]);
		unlink(f);
		free(f);
	}
	rmdir(dir);
	free(dir);
}

bool dm_sandbox_has_ca(struct daemon *d, const char *id)
{
	char *dir = dm_ca_dir(d, id), *pem = xasprintf("%s/ca.pem", dir);
	bool has = access(pem, F_OK) == 0;

	free(dir);
	free(pem);
	return has;
}

char *dm_egress_log_path(struct daemon *d, const char *id)
{
	return xasprintf("%s/egress/%s.jsonl", d->state_dir, id);
}

/* Read one reply line ("R", "A ...", "E<errno> msg"); 0 or -errno with err. */
/* The gateway's next line (net/gwctl.h) into line[cap], parsed into m (pointing into it);
 * an error line is the gateway's error. */
static int read_line(int fd, int timeout_ms, char *line, size_t cap, struct net_gwctl *m,
		     struct al_error **err)
{
	size_t n = 0;

	while (n < cap - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, timeout_ms) <= 0)
			return al_error_msg(err, ETIMEDOUT, "the network gateway did not answer");
		if (read(fd, line + n, 1) != 1)
			return al_error_msg(err, EPIPE, "the network gateway went away");
		if (line[n] == '\n')
			break;
		n++;
	}
	line[n] = '\0';
	if (net_gwctl_parse(line, m) < 0)
		return al_error_msg(err, EPROTO, "the network gateway said '%.100s'", line);
	if (m->kind == NET_GWCTL_ERROR)
		return al_error_from(err, m->code, m->text);
	return 0;
}

/* Alive = its control socket accepts (a killed gateway leaves a stale socket file). */
bool dm_gateway_running(struct daemon *d, const char *id)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char *path = gw_ctl_path(d, id);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool up;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	free(path);
	up = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return up;
}

/*
 * The gateways' watchdog: a sandbox whose policy allows something but whose
 * gateway is gone (killed, crashed, or the host restarted it) gets a new one
 * with its stored policy and generation. Until then it has no network: fail
 * closed. Runs once a second, and first at daemon start.
 */
void *dm_netwatch_main(void *arg)
{
	struct daemon *d = arg;

	while (!__atomic_load_n(&d->closing, __ATOMIC_RELAXED)) {
		struct todo {
			char id[DM_ID_LEN + 1];
			pid_t pid;
			char *policy;
			int64_t gen;
			unsigned conns;
		} *todo = NULL;
		size_t n = 0;

		pthread_mutex_lock(&d->mu);
		todo = xzalloc((d->n_sbxs + 1) * sizeof(*todo));
		for (size_t i = 0; i < d->n_sbxs; i++) {
			struct dm_sbx *s = d->sbxs[i];

			if (s->state != DM_SBX_RUNNING || dm_policy_is_deny_all(s->policy_json) ||
			    dm_now_ms() < s->gw_quiet_until)
				continue;
			strcpy(todo[n].id, s->id);
			todo[n].pid = s->pid;
			todo[n].policy = xstrdup(s->policy_json);
			todo[n].gen = s->policy_gen;
			todo[n].conns = s->gw_conns;
			n++;
		}
		pthread_mutex_unlock(&d->mu);
		for (size_t i = 0; i < n; i++) {
			if (!dm_gateway_running(d, todo[i].id)) {
				struct al_error *err = NULL;

				int r = dm_apply_policy(d, todo[i].id, todo[i].pid, todo[i].policy,
							todo[i].gen, todo[i].conns, &err);

				dm_metrics_gw_restart(d, r == 0);
				al_error_free(err); /* tried again next second */
			}
			free(todo[i].policy);
		}
		free(todo);
		sleep(1);
	}
	return NULL;
}

/*
 * Start a sandbox's gateway, its control channel (a socketpair) as fd 3. With a
 * pid it attaches to that sandbox at once (--attach-pid); with 0 it gets ready and then
 * reads the pid from fd 3 (a create starts it before the sandbox exists). *fd is our end.
 */
static int launch_gateway(struct daemon *d, const char *id, pid_t pid, const char *policy,
			  int64_t gen, unsigned conns, pid_t *child_out, int *fd,
			  struct al_error **err)
{
	char *gw = xasprintf("%s", d->agent_path), *slash = strrchr(gw, '/');
	char *bin = slash ? (*slash = '\0', xasprintf("%s/airlock-gateway", gw))
			  : xstrdup("airlock-gateway");
	char *ctl = gw_ctl_path(d, id), *log = dm_egress_log_path(d, id), *egress_dir;
	char *ca_dir = dm_ca_dir(d, id), *ca_top = xasprintf("%s/ca", d->state_dir);
	char pidbuf[16], genbuf[24], connbuf[16];
	const char *argv[26];
	int sp[2] = {-1, -1}, a = 0, r;
	pid_t child;

	egress_dir = xasprintf("%s/egress", d->state_dir);
	mkdir(egress_dir, 0700);
	free(egress_dir);
	mkdir(ca_top, 0700); /* the gateway makes STATE/ca/<id> in it when rules first come */
	free(ca_top);
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	snprintf(genbuf, sizeof(genbuf), "%lld", (long long)gen);
	snprintf(connbuf, sizeof(connbuf), "%u", conns);
	argv[a++] = "airlock-gateway";
	argv[a++] = "--policy", argv[a++] = policy;
	argv[a++] = "--sandbox", argv[a++] = id;
	if (pid > 0)
		argv[a++] = "--attach-pid", argv[a++] = pidbuf;
	argv[a++] = "--generation", argv[a++] = genbuf;
	argv[a++] = "--max-conns", argv[a++] = connbuf;
	argv[a++] = "--control-socket", argv[a++] = ctl;
	argv[a++] = "--log-file", argv[a++] = log;
	if (d->opts.upstream_netns)
		argv[a++] = "--upstream-netns", argv[a++] = d->opts.upstream_netns;
	if (d->opts.upstream_dns)
		argv[a++] = "--upstream-dns", argv[a++] = d->opts.upstream_dns;
	argv[a++] = "--ca-dir", argv[a++] = ca_dir;
	if (d->opts.upstream_ca)
		argv[a++] = "--upstream-ca", argv[a++] = d->opts.upstream_ca;
	argv[a] = NULL;
	r = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp);
	child = r < 0 ? -1 : gw_exec(bin, argv, sp[1], -1, "(it belongs next to airlock-agent)");
	if (sp[1] >= 0)
		close(sp[1]);
	r = child < 0 ? al_error_set(err, errno, "start the network gateway") : 0;
	if (r < 0 && sp[0] >= 0)
		close(sp[0]);
	*child_out = child;
	*fd = r < 0 ? -1 : sp[0];
	free(gw);
	free(bin);
	free(ctl);
	free(log);
	free(ca_dir);
	return r;
}

/* Read the gateway's next line; anything but `want` (or an error line) is an error. */
static int expect_line(int fd, enum net_gwctl_kind want, struct al_error **err)
{
	char line[1024];
	struct net_gwctl m;

	if (read_line(fd, 10000, line, sizeof(line), &m, err) < 0)
		return -1;
	if (m.kind != want)
		return al_error_msg(err, EIO, "the network gateway said '%.100s'", line);
	return 0;
}

/* Spawn the gateway for a running sandbox. */
static int start_gateway(struct daemon *d, const char *id, pid_t pid, const char *policy,
			 int64_t gen, unsigned conns, struct al_error **err)
{
	pid_t child;
	int fd, r = launch_gateway(d, id, pid, policy, gen, conns, &child, &fd, err);

	if (r == 0)
		r = expect_line(fd, NET_GWCTL_READY, err);
	if (child > 0 && r < 0)
		kill(child, SIGKILL);
	if (fd >= 0)
		close(fd);
	return r;
}

int dm_gateway_launch(struct daemon *d, const char *id, const char *policy, int64_t gen,
		      unsigned conns, struct dm_gw_launch *gl, struct al_error **err)
{
	gl->child = -1;
	gl->fd = -1;
	return launch_gateway(d, id, 0, policy, gen, conns, &gl->child, &gl->fd, err);
}

int dm_gateway_attach(struct dm_gw_launch *gl, pid_t pid, struct al_error **err)
{
	int r = expect_line(gl->fd, NET_GWCTL_READY, err); /* its namespace, ruleset, listeners */

	if (r == 0 &&
	    net_gwctl_send(gl->fd, &(struct net_gwctl){.kind = NET_GWCTL_PID,
						       .gen = (unsigned long long)pid}) < 0)
		r = al_error_set(err, errno, "talk to the network gateway");
	if (r == 0) /* linked, serving, its control socket up */
		r = expect_line(gl->fd, NET_GWCTL_ATTACHED, err);
	if (r < 0)
		dm_gateway_abort(gl);
	al_closep(&gl->fd);
	gl->child = -1;
	return r;
}

void dm_gateway_abort(struct dm_gw_launch *gl)
{
	if (gl->child > 0)
		kill(gl->child, SIGKILL);
	gl->child = -1;
	al_closep(&gl->fd);
}

/* Send a policy to a running gateway; 0 once it is in force. */
static int push_policy(struct daemon *d, const char *id, const char *policy, int64_t gen,
		       struct al_error **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char *path = gw_ctl_path(d, id), line[1024];
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct net_gwctl m;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	free(path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return al_error_set(err, errno, "connect to the network gateway");
	if (net_gwctl_send(fd, &(struct net_gwctl){.kind = NET_GWCTL_POLICY,
						   .gen = (unsigned long long)gen,
						   .text = policy}) < 0)
		return al_error_set(err, errno, "send the policy to the network gateway");
	if (read_line(fd, 10000, line, sizeof(line), &m, err) < 0)
		return -1;
	if (m.kind != NET_GWCTL_ATTACHED || m.gen != (unsigned long long)gen)
		return al_error_msg(err, EIO, "the network gateway said '%.100s'", line);
	return 0;
}

int dm_apply_policy(struct daemon *d, const char *id, pid_t pid, const char *policy, int64_t gen,
		    unsigned conns, struct al_error **err)
{
	if (dm_gateway_running(d, id))
		return push_policy(d, id, policy, gen, err);
	if (dm_policy_is_deny_all(policy))
		return 0; /* no link, no gateway: loopback only */
	return start_gateway(d, id, pid, policy, gen, conns, err);
}
