/* SPDX-License-Identifier: MIT */
/*
 * airlockd's HTTP API: a libmicrohttpd server (one thread per connection) on
 * TCP loopback and/or a Unix socket, bearer-token authentication, and a router
 * that serves the native REST API under /v1 (routes_native*.c). Handlers call
 * only the registry interface of src/daemon/daemon.h.
 */
#ifndef AL_API_API_H
#define AL_API_API_H

#include <stddef.h>
#include <stdint.h>

struct daemon;
struct al_error;
struct api;

struct api_opts {
	const char *listen; /* "127.0.0.1:7070", "[::1]:7070" (numeric; port 0 = any), or NULL */
	const char *socket_path; /* Unix socket, created with mode 0600, or NULL */
	const char *tokens_path; /* "TOKEN TEAM" per line; required */
	size_t max_body;	 /* JSON and other small bodies; 0: 1 MiB */
	size_t max_upload;	 /* tar uploads (and file reads); 0: 256 MiB */
	/* Optional (0: default). */
	unsigned timeout_s;	  /* idle timeout of a connection; default 60 */
	unsigned max_connections; /* per listening socket; default 8192 */
	/* GET /metrics (docs/metrics.md): served on the API's listeners to a bearer token of
	 * this file (one token a line; API tokens never grant it), and/or on a listener of
	 * its own, "ADDR:PORT" as listen, without a token. NULL: not there. */
	const char *metrics_tokens_path;
	const char *metrics_listen;
	/* How long a PTY ticket opens its WebSocket (docs/pty.md); 0: 60 s. */
	uint64_t pty_ticket_ms;
	/* Preview URLs <port>-<sandbox>.DOMAIN (docs/ports.md); NULL: only the path form. */
	const char *preview_domain;
	const char *e2b_domain; /* E2B's <port>-<id>.<domain> hosts are envd's (NULL: none) */
	/* HTTPS (docs/daemon.md, "TLS"): PEM files, both or neither. With them the TCP
	 * listener (listen) speaks TLS, or, with tls_listen ("ADDR:PORT" as listen), a listener
	 * of its own does and listen stays plain. The Unix socket is always plain. */
	const char *tls_cert;
	const char *tls_key;
	const char *tls_listen;
};

/* Starts serving at once; at least one of listen, tls_listen and socket_path must be set. */
int api_start(struct daemon *d, const struct api_opts *o, struct api **out, struct al_error **err);
/* The bound TCP port (useful with port 0), or 0 without a TCP listener. */
int api_tcp_port(const struct api *a);
/* The bound port of the HTTPS listener (listen's with TLS on it, else tls_listen's), or 0. */
int api_tls_port(const struct api *a);
/* The bound port of the metrics listener, or 0 without one. */
int api_metrics_port(const struct api *a);
/* Stops the server (waits for the connection threads) and removes the Unix socket. */
void api_stop(struct api *a);

#endif
