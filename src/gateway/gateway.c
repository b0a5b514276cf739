/* SPDX-License-Identifier: MIT */
/* The gateway's lifecycle: namespace, link, ruleset, sockets, threads, the egress log. */
#include "gateway/gw.h"
#include "gateway/ca.h"
#include "host/link.h"
#include "host/nft.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool gw_dns_admit(struct net_gateway *g)
{
	bool ok;

	pthread_mutex_lock(&g->mu);
	ok = gw_bucket_take(&g->dns_bucket);
	pthread_mutex_unlock(&g->mu);
	return ok;
}

enum net_verdict gw_decide_name(struct net_gateway *g, const char *canon, const char **reason)
{
	enum net_verdict v;

	pthread_rwlock_rdlock(&g->policy_lock);
	v = net_policy_decide_name(g->policy, canon, reason);
	pthread_rwlock_unlock(&g->policy_lock);
	return v;
}

enum net_verdict gw_vet(struct net_gateway *g, const struct net_addr *a, const char **reason)
{
	enum net_verdict v;

	pthread_rwlock_rdlock(&g->policy_lock);
	v = net_addr_vet(a, g->policy, &g->vet, reason);
	pthread_rwlock_unlock(&g->policy_lock);
	return v;
}

enum net_verdict gw_decide_literal(struct net_gateway *g, const struct net_addr *a,
				   const char **reason)
{
	enum net_verdict v;

	pthread_rwlock_rdlock(&g->policy_lock);
	v = net_addr_decide_literal(a, g->policy, &g->vet, reason);
	pthread_rwlock_unlock(&g->policy_lock);
	return v;
}

uint64_t gw_generation(struct net_gateway *g)
{
	uint64_t gen;

	pthread_rwlock_rdlock(&g->policy_lock);
	gen = g->policy->generation;
	pthread_rwlock_unlock(&g->policy_lock);
	return gen;
}

int net_gateway_set_policy(struct net_gateway *g, struct net_policy *p, struct al_error **err)
{
	struct net_policy *old;

	if (gw_tls_ensure(g, p, err) < 0) {
		net_policy_free(p);
		return -1;
	}
	pthread_rwlock_wrlock(&g->policy_lock);
	old = g->policy;
	g->policy = p;
	pthread_rwlock_unlock(&g->policy_lock);
	net_policy_free(old);
	/* Live flows the new policy refuses are cut now, before the update is acknowledged;
	 * leaf certificates of the old rules are forgotten. */
	gw_tls_policy_changed(g);
	gw_proxy_rejudge(g);
	return 0;
}

const char *net_gateway_ca_pem(struct net_gateway *g)
{
	const char *pem;

	pthread_mutex_lock(&g->tls_mu);
	pem = g->ca ? net_ca_cert_pem(g->ca) : NULL;
	pthread_mutex_unlock(&g->tls_mu);
	return pem; /* lives as long as the gateway: the CA is never replaced */
}

int gw_enter_upstream(struct net_gateway *g)
{
	return g->up_ns >= 0 ? setns(g->up_ns, CLONE_NEWNET) : 0;
}

int gw_wait(struct net_gateway *g, int fd, short events, int timeout_ms)
{
	struct pollfd p[2] = {{.fd = fd, .events = events},
			      {.fd = g->stop_pipe[0], .events = POLLIN}};
	int r;

	do
		r = poll(p, 2, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r <= 0 || p[1].revents)
		return -1;
	return 0;
}

static int open_ns(const char *name, struct al_error **err)
{
	char path[4096];
	int fd;

	if (strchr(name, '/'))
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "/run/netns/%s", name);
	/* A name or path that is no network namespace is the caller's mistake (EINVAL). */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return al_error_msg(err, EINVAL, "--upstream-netns '%s': %s", name,
				    strerror(errno));
	if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET) {
		close(fd);
		return al_error_msg(err, EINVAL, "--upstream-netns '%s': not a network namespace",
				    name);
	}
	return fd;
}

/* "IP" or "IP:PORT" (IPv6 as "[IP]:PORT"); NULL: the first nameserver of /etc/resolv.conf. */
static int parse_upstream_dns(struct net_gateway *g, const char *spec, struct al_error **err)
{
	char buf[128], line[256];
	const char *host = buf, *port = "53";
	struct net_addr a;

	if (!spec) {
		FILE *f = fopen("/etc/resolv.conf", "r");
		buf[0] = '\0';
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "nameserver %127s", buf) == 1)
				break;
		if (f)
			fclose(f);
		if (!buf[0])
			snprintf(buf, sizeof(buf), "127.0.0.1");
	} else {
		char *colon;
		snprintf(buf, sizeof(buf), "%s", spec);
		if (buf[0] == '[' && (colon = strstr(buf, "]:"))) {
			*colon = '\0';
			host = buf + 1;
			port = colon + 2;
		} else if ((colon = strchr(buf, ':')) && !strchr(colon + 1, ':')) {
			*colon = '\0';
			port = colon + 1;
		}
	}
	if (net_addr_parse(host, strlen(host), &a, err) < 0)
		return al_error_wrap(err, "--upstream-dns '%s'", spec ? spec : buf);
	if (strlen(port) < 1 || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port) ||
	    atoi(port) < 1 || atoi(port) > 65535)
		return al_error_msg(err, EINVAL, "--upstream-dns '%s': the port must be 1 to 65535",
				    spec ? spec : buf);
	memset(&g->dns_up, 0, sizeof(g->dns_up));
	if (a.family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&g->dns_up;
		s->sin_family = AF_INET;
		s->sin_port = htons((uint16_t)atoi(port));
		memcpy(&s->sin_addr, a.bytes, 4);
		g->dns_up_len = sizeof(*s);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&g->dns_up;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons((uint16_t)atoi(port));
		memcpy(&s->sin6_addr, a.bytes, 16);
		g->dns_up_len = sizeof(*s);
	}
	return 0;
}

static int listen_on(int type, int port, struct al_error **err)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), one = 1;

	inet_pton(AF_INET, NET_GW_ADDR, &sa.sin_addr);
	if (fd < 0)
		return al_error_set(err, errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)); /* gw0 comes at attach */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 128) < 0)) {
		int e = errno;
		close(fd);
		return al_error_set(err, e, "bind %s:%d in the gateway namespace", NET_GW_ADDR,
				    port);
	}
	return fd;
}

/* In the gateway namespace: the ruleset and the listening sockets. */
static int build_in_gw_ns(struct net_gateway *g, struct al_error **err)
{
	/* The link itself is made at attach time, its sandbox end born in the sandbox; the
	 * ruleset matches it by name, and the listeners bind its address ahead (IP_FREEBIND).
	 * Loopback stays down: nothing in this namespace talks to itself (upstream sockets
	 * are made in the upstream namespace), and bringing it up cost ~0.17 ms of IPv4 and
	 * IPv6 address set-up on every gateway's start. */
	if (!g->pooled && net_nft_apply(err) < 0) /* a pooled namespace has it already */
		return -1;
	if ((g->fd_udp = listen_on(SOCK_DGRAM, NET_DNS_PORT, err)) < 0 ||
	    (g->fd_tcp_dns = listen_on(SOCK_STREAM, NET_DNS_PORT, err)) < 0 ||
	    (g->fd_proxy = listen_on(SOCK_STREAM, NET_PROXY_PORT, err)) < 0 ||
	    (g->fd_tproxy = listen_on(SOCK_STREAM, NET_TPROXY_PORT, err)) < 0)
		return -1;
	/* The ruleset's drops reach the log through NFLOG; without it they are still dropped. */
	g->fd_nflog = gw_nflog_open(NULL);
	return 0;
}

int net_gateway_prepare(const struct net_gateway_opts *o, struct net_gateway **out,
			struct al_error **err)
{
	struct net_gateway *g = xzalloc(sizeof(*g));
	_cleanup_close_ int host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int r;

	g->policy = o->policy;
	g->sandbox_id = xstrdup(o->sandbox_id ? o->sandbox_id : "");
	gw_log_adopt(g, o->log_fd);
	g->gw_ns = g->up_ns = g->fd_udp = g->fd_tcp_dns = g->fd_proxy = g->fd_tproxy = -1;
	g->fd_nflog = -1;
	g->stop_pipe[0] = g->stop_pipe[1] = -1;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->conns_cv, NULL);
	pthread_rwlock_init(&g->policy_lock, NULL);
	pthread_mutex_init(&g->cache_mu, NULL);
	pthread_mutex_init(&g->tls_mu, NULL);
	g->ca_dir = o->ca_dir ? xstrdup(o->ca_dir) : NULL;
	g->upstream_ca = o->upstream_ca ? xstrdup(o->upstream_ca) : NULL;
	g->ca_constrain = o->ca_constrain;
	g->ca_ephemeral = o->ca_ephemeral;
	g->max_conns = (int)(o->max_conns ? o->max_conns : GW_MAX_CONNS);
	pthread_attr_init(&g->conn_attr);
	pthread_attr_setstacksize(&g->conn_attr, GW_CONN_STACK);
	pthread_attr_setdetachstate(&g->conn_attr, PTHREAD_CREATE_DETACHED);
	g->log_bucket = (struct gw_bucket){.tokens = GW_LOG_BURST,
					   .rate = GW_LOG_RATE,
					   .burst = GW_LOG_BURST,
					   .last = gw_mono_s()};
	g->dns_bucket = (struct gw_bucket){.tokens = GW_DNS_BURST,
					   .rate = GW_DNS_RATE,
					   .burst = GW_DNS_BURST,
					   .last = gw_mono_s()};
	/* The gateway and the sandbox link are never a destination. */
	net_cidr_parse("100.96.0.0/16", 13, &g->forbidden[0], NULL);
	g->vet.forbidden = g->forbidden;
	g->vet.n_forbidden = 1;
	*out = g;
	if (host_ns < 0)
		return al_error_set(err, errno, "open /proc/self/ns/net");
	if (pipe2(g->stop_pipe, O_CLOEXEC) < 0)
		return al_error_set(err, errno, "pipe2");
	if (o->upstream_netns && (g->up_ns = open_ns(o->upstream_netns, err)) < 0)
		return -1;
	if (parse_upstream_dns(g, o->upstream_dns, err) < 0)
		return -1;
	if (gw_tls_ensure(g, g->policy, err) < 0)
		return -1;
	/* Make the gateway namespace (or join the pooled one), build it, and come back. */
	if (o->pooled_netns) {
		g->pooled = true;
		g->gw_ns = open(o->pooled_netns, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (g->gw_ns < 0 || ioctl(g->gw_ns, NS_GET_NSTYPE) != CLONE_NEWNET ||
		    setns(g->gw_ns, CLONE_NEWNET) < 0)
			return al_error_set(err, errno ? errno : EINVAL,
					    "pooled gateway namespace '%s'", o->pooled_netns);
	} else {
		if (unshare(CLONE_NEWNET) < 0)
			return al_error_set(err, errno, "unshare(CLONE_NEWNET) for the gateway");
		g->gw_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	}
	r = g->gw_ns < 0 ? al_error_set(err, errno, "open the gateway netns")
			 : build_in_gw_ns(g, err);
	if (setns(host_ns, CLONE_NEWNET) < 0 && r == 0)
		r = al_error_set(err, errno, "setns back to the host netns");
	return r < 0 ? al_error_wrap(err, "network gateway") : 0;
}

int net_gateway_netns(const struct net_gateway *g)
{
	return g->gw_ns;
}

int net_gateway_configure(struct net_gateway *g, const struct net_gateway_opts *o,
			  struct al_error **err)
{
	if (o->upstream_netns && (g->up_ns = open_ns(o->upstream_netns, err)) < 0)
		return -1;
	if (parse_upstream_dns(g, o->upstream_dns, err) < 0)
		return -1;
	free(g->sandbox_id);
	g->sandbox_id = xstrdup(o->sandbox_id ? o->sandbox_id : "");
	if (o->max_conns)
		g->max_conns = (int)o->max_conns;
	gw_log_adopt(g, o->log_fd);
	return net_gateway_set_policy(g, o->policy, err);
}

/*
 * gw0 was brought up before its peer, so without a carrier: the kernel attaches its real
 * queueing discipline only when its linkwatch work runs, and until then every packet gw0
 * sends (a SYN-ACK, a DNS answer) is dropped, costing the sandbox a 1 s SYN retry or a
 * 5 s DNS one. eth0, up second, got its discipline at once. Wait (briefly) until gw0 is
 * running before the sandbox may start; a socket of the gateway's namespace asks.
 */
static void wait_link_running(const struct net_gateway *g)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", NET_GW_LINK);
	for (int i = 0; i < 20000; i++) { /* at most ~1 s */
		struct timespec ts = {0, 50000};

		if (ioctl(g->fd_udp, SIOCGIFFLAGS, &ifr) < 0 || (ifr.ifr_flags & IFF_RUNNING))
			break;
		nanosleep(&ts, NULL);
	}
}

int net_gateway_attach(struct net_gateway *g, pid_t pid, struct al_error **err)
{
	_cleanup_close_ int host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int nl = -1, sbx_ns = -1;
	char path[64];
	int r;

	if (g->pooled) { /* the sandbox joined the link's other end, made with the pool entry */
		wait_link_running(g);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	sbx_ns = open(path, O_RDONLY | O_CLOEXEC);
	if (host_ns < 0 || sbx_ns < 0)
		return al_error_set(err, errno, "open the sandbox's network namespace");
	if (setns(g->gw_ns, CLONE_NEWNET) < 0)
		return al_error_set(err, errno, "enter the gateway netns");
	nl = net_nl_open(err);
	r = nl < 0 ? -1 : net_link_make(nl, sbx_ns, err);
	if (setns(host_ns, CLONE_NEWNET) < 0 && r == 0)
		r = al_error_set(err, errno, "setns back to the host netns");
	if (r == 0)
		wait_link_running(g);
	return r;
}

/* The service threads, each with the socket it serves (-1: not there, no thread). */
#define GW_SERVICES 5
static void *(*const service_main[GW_SERVICES])(void *) = {
    gw_dns_udp_main, gw_dns_tcp_main, gw_proxy_main, gw_tproxy_main, gw_nflog_main};

static int service_fd(const struct net_gateway *g, size_t i)
{
	const int fds[GW_SERVICES] = {g->fd_udp, g->fd_tcp_dns, g->fd_proxy, g->fd_tproxy,
				      g->fd_nflog};

	return fds[i];
}

static int start_service(struct net_gateway *g, size_t i, struct al_error **err)
{
	if (g->n_threads == (int)ARRAY_SIZE(g->threads) ||
	    pthread_create(&g->threads[g->n_threads], NULL, service_main[i], g) != 0)
		return al_error_msg(err, EAGAIN, "starting the gateway threads");
	g->n_threads++;
	return 0;
}

int net_gateway_start(struct net_gateway *g, struct al_error **err)
{
	for (size_t i = 0; i < GW_SERVICES; i++)
		if (service_fd(g, i) >= 0 && start_service(g, i, err) < 0)
			return -1;
	return 0;
}

int net_gateway_serve_lazily(struct net_gateway *g, int ctl, struct al_error **err)
{
	struct pollfd p[GW_SERVICES + 1];

	for (size_t i = 0; i < GW_SERVICES; i++)
		p[i] = (struct pollfd){.fd = service_fd(g, i), .events = POLLIN};
	p[GW_SERVICES] = (struct pollfd){.fd = ctl, .events = POLLIN};
	for (;;) {
		if (poll(p, GW_SERVICES + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return al_error_set(err, errno, "poll");
		}
		for (size_t i = 0; i < GW_SERVICES; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			/* Its first traffic: from now on its own thread serves it. */
			if (start_service(g, i, err) < 0)
				return -1;
			p[i].fd = -1;
		}
		if (p[GW_SERVICES].revents) {
			char c;
			ssize_t n = read(ctl, &c, 1);

			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
				return 0;
		}
	}
}

void net_gateway_quiesce(struct net_gateway *g)
{
	pthread_mutex_lock(&g->mu);
	g->stopping = true;
	pthread_mutex_unlock(&g->mu);
	if (g->stop_pipe[1] >= 0)
		(void)!write(g->stop_pipe[1], "x", 1);
	for (int i = 0; i < g->n_threads; i++)
		pthread_join(g->threads[i], NULL);
	/* Connection threads notice the stop pipe; wait for the last one. */
	pthread_mutex_lock(&g->mu);
	while (g->n_conns > 0)
		pthread_cond_wait(&g->conns_cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
	gw_log_flush(g); /* the flood's counts are never lost */
	g->n_threads = 0;
}

void net_gateway_stop(struct net_gateway *g)
{
	if (!g)
		return;
	int fds[] = {g->fd_udp,	  g->fd_tcp_dns, g->fd_proxy, g->fd_tproxy,
		     g->fd_nflog, g->gw_ns,	 g->up_ns};

	net_gateway_quiesce(g);
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	al_closep(&g->stop_pipe[0]);
	al_closep(&g->stop_pipe[1]);
	net_policy_free(g->policy);
	pthread_rwlock_destroy(&g->policy_lock);
	gw_tls_free(g);
	free(g->ca_dir);
	free(g->upstream_ca);
	free(g->sandbox_id);
	free(g);
}
