/* SPDX-License-Identifier: MIT */
/* The gateway's internals, shared by gateway.c, gw_dns.c, gw_proxy.c. */
#ifndef AL_GATEWAY_GW_H
#define AL_GATEWAY_GW_H

#include "net/addr.h"
#include "gateway/gateway.h"
#include "net/policy.h"
#include "net/http_req.h"
#include "net/tls_hello.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define GW_MAX_CONNS ((int)NET_GW_CONNS_MAX) /* proxied connections at once, at most */
/* File descriptors: a spliced connection holds 6 (two sockets, two pipes). */
#define GW_NOFILE (GW_MAX_CONNS * 6 + 1024)
#define GW_CONN_STACK (128 * 1024) /* a connection thread's stack (no big buffers on it) */
#define GW_MAX_ADDRS 16		   /* addresses kept from one resolution */
#define GW_IO_TIMEOUT_MS 30000	   /* a silent client or upstream, before the head is complete */

/* A proxied connection (gw_proxy.c; gw_mitm.c for terminated ones). */
struct gw_conn {
	struct net_gateway *g;
	bool literal;	 /* dialled an IP literal (judged by address only) */
	bool cut;	 /* closed because the policy changed */
	int slot;	 /* its index in g->conns once registered, else -1 */
	bool terminated; /* TLS terminated here (per-request rules): cut on any change */
	int c, u;	 /* client (sandbox) and upstream sockets */
	bool transparent;
	const char *layer;
	char name[NET_NAME_MAX + 1]; /* the checked name ("" for an IP literal) */
	struct net_addr addr;	     /* what we dialled */
	int port;
	uint64_t out, in;
	uint64_t gen;  /* the policy generation its first upstream byte went under (0: none yet) */
	uint64_t flow; /* its id in the log once its "open" line is out (0: none) */
	bool flow_closed; /* its closing line is out */
	bool refused;	  /* a refusal of it was logged: its closing line is no allow */
	char buf[NET_HTTP_MAX_HEAD + 1]; /* bytes read from the client, not yet forwarded */
	size_t len;
	uint8_t scratch[NET_TLS_MAX_HELLO];
};

#define GW_CACHE_SIZE 128
struct net_ca;

struct gw_cache_entry {
	char name[NET_NAME_MAX + 1]; /* "" = free */
	struct net_addr addrs[16];
	int n;
	double expires; /* epoch seconds */
};

/* A token bucket (under the gateway's mu). */
struct gw_bucket {
	double tokens, rate, burst;
	double last; /* monotonic seconds */
};
#define GW_LOG_RATE 200.0 /* log lines a second, sustained */
#define GW_LOG_BURST 1000.0
/* A sandbox's egress log stops here, with a last "log_full" line (what airlockd serves of
 * it is capped alike): at GW_LOG_RATE a day of a flood would be ~4 GB of host disk. */
#define GW_LOG_MAX_BYTES (64ull << 20)
/* Repeated lines (same layer, verdict, reason, detail, name, address, port) are
 * aggregated: the first is written, the repeats within GW_AGG_WINDOW seconds are counted
 * and written as one line with "suppressed" when the window closes. Flow lines (with
 * bytes or an event) are never dropped nor aggregated. */
#define GW_AGG_SLOTS 256
#define GW_AGG_PROBE 8
#define GW_AGG_WINDOW 2.0
#define GW_DNS_RATE 2000.0 /* DNS queries a second from one sandbox */
#define GW_DNS_BURST 4000.0

/* One aggregation window (under the gateway's mu); until == 0: free. */
struct gw_agg {
	double until;	/* monotonic seconds */
	uint64_t count; /* repeats not written */
	uint64_t gen;	/* the policy generation: a new policy opens new windows */
	bool allow, has_name, has_addr;
	int port;
	char layer[16];
	char reason[64];
	char detail[64];
	char name[NET_NAME_MAX + 1];
	struct net_addr addr;
};

struct net_gateway {
	struct net_policy *policy; /* read under policy_lock; replaced by net_gateway_set_policy */
	pthread_rwlock_t policy_lock;
	/* Live proxied connections (under mu). Slots at conns_hi and above were never used: a
	 * scan stops there, so a gateway that proxies a few connections touches a few of the
	 * table's 32 pages, not all of them on its first policy (a page fault each). */
	struct gw_conn *conns[GW_MAX_CONNS];
	int conns_hi;
	struct net_vet_ctx vet;
	struct net_cidr forbidden[2];
	char *sandbox_id;
	int gw_ns;   /* the gateway's netns */
	bool pooled; /* gw_ns came ready from the one-shot pool: ruleset and link made */
	int up_ns;   /* where upstream sockets are made (-1: the caller's) */
	struct sockaddr_storage dns_up;
	socklen_t dns_up_len;
	int fd_udp, fd_tcp_dns, fd_proxy, fd_tproxy, fd_nflog;
	int stop_pipe[2]; /* readable when stopping */
	pthread_t threads[5];
	int n_threads;
	pthread_mutex_t mu; /* the log and the connection count */
	int log_fd;
	struct gw_bucket log_bucket, dns_bucket;
	uint64_t log_suppressed; /* lines dropped by the log's rate limit, not yet reported */
	uint64_t log_bytes;	 /* in the log file (its size when we got it, then ours) */
	bool log_full;		 /* GW_LOG_MAX_BYTES reached: nothing more is written */
	struct gw_agg agg[GW_AGG_SLOTS]; /* repeated lines being counted (gw_audit.c) */
	double agg_next;		 /* the earliest window end (0: none open) */
	uint64_t flows;			 /* flow ids handed out */
	int n_conns;
	int max_conns; /* this sandbox's budget of n_conns (net_gateway_conn_budget) */
	int big_pipes; /* relay pipes grown past 64 KiB (atomic; gw_proxy.c, grow_pipe) */
	pthread_cond_t conns_cv;
	pthread_attr_t conn_attr; /* small stacks: thousands of idle tunnels stay cheap */
	pthread_mutex_t cache_mu;
	struct gw_cache_entry cache[GW_CACHE_SIZE];
	bool stopping;
	/* TLS termination (gw_mitm.c): the sandbox's CA, made on first need */
	pthread_mutex_t tls_mu;
	struct net_ca *ca;
	void *ssl_srv, *ssl_cli; /* SSL_CTX * */
	char *ca_dir;		 /* where the CA lives on the host (NULL: termination off) */
	char *upstream_ca;	 /* CA file for upstream verification (NULL: the system's) */
	bool ca_constrain;	 /* name-constrain a new CA to the policy's domains */
	bool ca_ephemeral;	 /* the CA key stays in memory (one-shot runs) */
};

/* One decision, as one JSON line. */
struct gw_event {
	const char *layer; /* dns, proxy, transparent, tls */
	bool allow;
	const char *reason;
	const char *name;	     /* or NULL */
	const struct net_addr *addr; /* or NULL */
	int port;		     /* or 0 */
	uint64_t bytes_out, bytes_in;
	uint64_t generation; /* the policy generation it was decided under (0: the current) */
	uint64_t flow;	     /* a proxied flow's id, or 0 */
	const char *event;   /* a flow's "open" or "close", or NULL */
	const char *detail;  /* a parser's reason (malformed input), or NULL */
};
/* gw_audit.c: the egress log. A line with bytes, a flow id or an event (a flow's) is always
 * written; others are aggregated when repeated and capped by the log's rate limit. */
void gw_log(struct net_gateway *g, const struct gw_event *e);
/* A proxied flow starts: its "open" line, written before its first byte goes upstream. */
void gw_flow_open(struct gw_conn *k);
/* Its id for its closing line, which it marks written (0 if it has none). */
uint64_t gw_flow_take(struct gw_conn *k);
/* The connection is done: a flow opened and not closed gets its closing line, reason
 * "refused" (verdict deny: a refusal of it was logged, e.g. a cut body or a refused request
 * inside terminated TLS), "ended" (it ended early: a failed send) or
 * "policy_changed" (cut). */
void gw_flow_end(struct gw_conn *k);
/* Milliseconds until a window closes or a rate-limit count is due (-1: none), and the
 * call that writes what is due then (the DNS thread waits on it). */
int gw_log_wake_ms(struct net_gateway *g);
void gw_log_tick(struct net_gateway *g);
/* Write every pending count (aggregated repeats, the rate limit's): at stop. */
void gw_log_flush(struct net_gateway *g);
void gw_log_adopt(struct net_gateway *g, int fd);
double gw_mono_s(void);
/* Take one token (caller holds g->mu). */
bool gw_bucket_take(struct gw_bucket *b);
/* One DNS query's worth of the sandbox's DNS budget; false when it is exhausted. */
bool gw_dns_admit(struct net_gateway *g);

/* The policy, read under its lock (it can change while the sandbox lives). */
enum net_verdict gw_decide_name(struct net_gateway *g, const char *canon, const char **reason);
enum net_verdict gw_vet(struct net_gateway *g, const struct net_addr *a, const char **reason);
enum net_verdict gw_decide_literal(struct net_gateway *g, const struct net_addr *a,
				   const char **reason);
uint64_t gw_generation(struct net_gateway *g);

/* gw_proxy.c: re-judge every live connection; close those the policy now refuses. */
void gw_proxy_rejudge(struct net_gateway *g);

/* gw_proxy.c helpers shared with gw_mitm.c */
void gw_conn_deny(struct gw_conn *k, const char *reason, const char *name, int status);
void gw_conn_log_allow(struct gw_conn *k, const char *reason);
int gw_send_all(int fd, const void *p, size_t n);

/* One side of a relayed body: plain sockets (gw_proxy.c) or TLS streams (gw_mitm.c). */
struct gw_io {
	void *ctx;
	long (*read)(void *ctx, void *buf, size_t n);	    /* > 0 bytes, <= 0 EOF/error */
	int (*write)(void *ctx, const void *buf, size_t n); /* 0, or -1 */
};
/*
 * A chunked request body, relayed byte for byte (the framing is the sandbox's own) while
 * the strict decoder checks it: pre[0..pre_len) first (what was read past the head), then
 * from `from`, until the final CRLF; nothing after it is sent. Counts k->out.
 * 0, -1 (I/O), or -2 (bad framing: the upstream saw a cut body and gets no more).
 */
int gw_relay_chunked(struct gw_conn *k, const char *pre, size_t pre_len, const struct gw_io *from,
		     const struct gw_io *to);
/* Resolve (or parse) host, vet, and connect to host:port; the socket, or -1 with *reason. */
int gw_dial(struct gw_conn *k, const char *host, int port, struct net_addr *addr,
	    const char **reason);

/* gw_mitm.c: TLS termination for a domain with per-request rules. The client's
 * ClientHello is in k->buf (already judged); k->u is the connected upstream. */
void gw_mitm_serve(struct gw_conn *k, const struct net_rules *rules);
/* Make the CA if the policy needs one and there is none (under tls_mu). 0 or -1. */
int gw_tls_ensure(struct net_gateway *g, const struct net_policy *p, struct al_error **err);
/* A policy change: forget leaves. */
void gw_tls_policy_changed(struct net_gateway *g);
void gw_tls_free(struct net_gateway *g);

/* gw_seccomp.c: the gateway's own filter, installed once set-up is done. */
int gw_seccomp_install(struct al_error **err);

/* gw_dns.c */
void *gw_dns_udp_main(void *arg);
void *gw_dns_tcp_main(void *arg);
/* Resolve an allowed canonical name upstream (A only), vet every address; fills up to
 * max vetted addresses. Returns the count (0: none survived; *reason says why), <0 error. */
int gw_resolve(struct net_gateway *g, const char *canon, struct net_addr *out, int max,
	       uint32_t *ttl, const char **reason);

/* nflog.c: the ruleset's drops as decision lines */
int gw_nflog_open(struct al_error **err);
void *gw_nflog_main(void *arg);

/* gw_proxy.c */
void *gw_proxy_main(void *arg);	 /* explicit proxy accept loop */
void *gw_tproxy_main(void *arg); /* transparent proxy accept loop */

/* Enter the upstream namespace in the calling thread (for its upstream sockets). */
int gw_enter_upstream(struct net_gateway *g);
/* Wait for fd to be readable (POLLIN) or writable; 0 ok, -1 timeout/stop/error. */
int gw_wait(struct net_gateway *g, int fd, short events, int timeout_ms);

#endif
