/* SPDX-License-Identifier: MIT */
/*
 * A sandbox's declared ports, reached from the host (docs/ports.md): a connection made inside
 * the sandbox's network namespace, and the inbound lines of its egress log.
 */
#include "daemon/internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/syscalls.h"
#include "common/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DM_PORT_CONNECT_MS 5000
#define DM_INBOUND_LOG_MAX (64ull << 20) /* the gateway's GW_LOG_MAX_BYTES */

int dm_ports_check(const uint16_t *ports, size_t n, struct al_error **err)
{
	if (n > DM_PORTS_MAX)
		return al_error_msg(err, EINVAL, "at most %d ports", DM_PORTS_MAX);
	for (size_t i = 0; i < n; i++) {
		if (ports[i] == 0)
			return al_error_msg(err, EINVAL, "port 0 is not a port");
		for (size_t j = 0; j < i; j++)
			if (ports[j] == ports[i])
				return al_error_msg(err, EINVAL, "port %u is listed twice",
						    ports[i]);
	}
	return 0;
}

json_t *dm_ports_json(const uint16_t *ports, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_integer(ports[i]));
	return a;
}

/* d->mu held: is port among s's declared ports (its config's "ports")? */
static bool declared(const struct dm_sbx *s, unsigned port)
{
	json_t *c = json_loads(s->config_json ? s->config_json : "{}", 0, NULL), *p;
	size_t i;
	bool yes = false;

	json_array_foreach(json_object_get(c, "ports"), i, p) yes |=
	    json_integer_value(p) == (json_int_t)port;
	json_decref(c);
	return yes;
}

/* d->mu held: sandbox id of team (NULL: of any team, for the public preview URLs). */
static struct dm_sbx *find(struct daemon *d, const char *team, const char *id,
			   struct al_error **err)
{
	if (team)
		return dm_find_sbx(d, team, id, err);
	for (size_t i = 0; i < d->n_sbxs; i++)
		if (strcmp(d->sbxs[i]->id, id) == 0)
			return d->sbxs[i];
	al_error_msg(err, ENOENT, "no sandbox '%.64s'", id);
	return NULL;
}

struct netns_connect {
	int pidfd;
	unsigned port;
	int fd;	 /* out */
	int err; /* out: an errno */
	const char *what;
};

/* Only this thread enters the namespace (setns applies to the calling thread); it ends
 * right after, so nothing else of the daemon ever runs in the sandbox's network. */
static void *connect_inside(void *arg)
{
	struct netns_connect *nc = arg;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)nc->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct pollfd p;
	socklen_t len = sizeof(nc->err);
	int fd;

	if (setns(nc->pidfd, CLONE_NEWNET) < 0)
		return nc->err = errno, nc->what = "setns", NULL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return nc->err = errno, nc->what = "socket", NULL;
	nc->what = "connect";
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		nc->fd = fd;
		return NULL;
	}
	if (errno != EINPROGRESS) {
		nc->err = errno;
		close(fd);
		return NULL;
	}
	p = (struct pollfd){.fd = fd, .events = POLLOUT};
	if (poll(&p, 1, DM_PORT_CONNECT_MS) != 1)
		nc->err = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &nc->err, &len) < 0)
		nc->err = errno;
	if (nc->err)
		close(fd);
	else
		nc->fd = fd;
	return NULL;
}

int dm_sandbox_port_connect(struct daemon *d, const char *team, const char *id, unsigned port,
			    bool any_port, int *fd, struct al_error **err)
{
	struct netns_connect nc = {.pidfd = -1, .port = port, .fd = -1};
	struct dm_sbx *s;
	pthread_t th;
	pid_t pid = 0;
	bool ok;

	pthread_mutex_lock(&d->mu);
	s = find(d, team, id, err);
	if (s && s->state != DM_SBX_RUNNING)
		al_error_msg(err, ESRCH, "sandbox '%s' is %s", s->id, dm_sbx_state_name(s->state)),
		    s = NULL;
	else if (s && !any_port && !declared(s, port))
		al_error_msg(err, EACCES, "port %u is not one of sandbox '%s''s ports", port,
			     s->id),
		    s = NULL;
	if (s) {
		pid = s->pid;
		/* the pidfd is taken while the sandbox is known to run: its PID 1 is that pid */
		nc.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	}
	ok = s != NULL;
	pthread_mutex_unlock(&d->mu);
	if (!ok)
		return -1;
	if (nc.pidfd < 0)
		return al_error_set(err, errno, "pidfd_open of sandbox '%s'", id);
	if (pthread_create(&th, NULL, connect_inside, &nc) != 0) {
		close(nc.pidfd);
		return al_error_msg(err, EAGAIN, "no thread to enter sandbox '%s'", id);
	}
	pthread_join(th, NULL);
	close(nc.pidfd);
	if (nc.fd < 0) {
		if (nc.err == ECONNREFUSED || nc.err == ETIMEDOUT)
			return al_error_msg(err, nc.err, "nothing %s on port %u in sandbox '%s'",
					    nc.err == ETIMEDOUT ? "answers" : "listens", port, id);
		return al_error_set(err, nc.err, "%s in sandbox '%s'", nc.what, id);
	}
	*fd = nc.fd;
	return 0;
}

void dm_sandbox_log_line(struct daemon *d, const char *id, json_t *o)
{
	_cleanup_free_ char *path = dm_egress_log_path(d, id), *dir = NULL, *line = NULL;
	_cleanup_close_ int fd = -1;
	struct stat st;
	size_t n;

	if (!o) /* a field was not UTF-8 */
		return;
	line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	dir = xasprintf("%s/egress", d->state_dir);
	mkdir(dir, 0700);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (!line || fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_size >= DM_INBOUND_LOG_MAX)
		return;
	n = strlen(line);
	line = xrealloc(line, n + 2);
	line[n] = '\n';
	line[n + 1] = '\0';
	if (write(fd, line, n + 1) < 0) { /* one write: whole lines beside the gateway's */
		struct al_error *e = NULL;

		al_error_set(&e, errno, "a line of sandbox '%s''s egress log", id);
		dm_log_err(d, &e, "ports");
	}
}

void dm_sandbox_inbound_log(struct daemon *d, const char *id, unsigned port, const char *what,
			    int status, uint64_t bytes_in, uint64_t bytes_out)
{
	dm_sandbox_log_line(d, id,
			    json_pack("{s:I,s:s,s:s,s:s,s:s,s:i,s:s,s:i,s:I,s:I}", "time",
				      (json_int_t)dm_now_ms(), "sandbox", id, "direction", "in",
				      "layer", "preview", "verdict",
				      status == 403 ? "deny" : "allow", "port", (int)port, "what",
				      what, "status", status, "bytes_in", (json_int_t)bytes_in,
				      "bytes_out", (json_int_t)bytes_out));
}
