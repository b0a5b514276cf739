/* SPDX-License-Identifier: MIT */
/*
 * GET /metrics (docs/metrics.md): the daemon's metrics in the Prometheus text format. They
 * name every team's sandboxes, so no API token grants them. Two ways to serve them, either
 * or both:
 *   --metrics-token-file FILE  on the API's listeners, to a bearer token of FILE (a tenant's
 *                              token gets 403, none or another 401);
 *   --metrics-listen ADDR:PORT a listener of its own that serves /metrics alone, without a
 *                              token (bind it where only the scraper reaches: loopback).
 * With neither, /metrics on the API answers 404 with a message saying how to turn it on.
 */
#include "api/api_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <unistd.h>

#define API_METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define API_METRICS_MAX_CONN 64

static void api_metrics(struct api_req *r)
{
	size_t len;
	char *text = dm_metrics_text(r->api->d, &len);

	api_reply_raw(r, 200, API_METRICS_TYPE, text, len);
}

const struct api_route api_metrics_routes[] = {
    {"GET", "/metrics", api_metrics, API_ROUTE_METRICS},
};
const size_t api_metrics_routes_n = ARRAY_SIZE(api_metrics_routes);

bool api_metrics_refused(struct api_req *r)
{
	struct api *a = r->api;
	const char *h;

	if (r->listener->open)
		return false;
	if (!a->metrics_auth) {
		api_reply_error_code(r, 404, "not_found",
				     a->mhd_metrics
					 ? "metrics are served on the --metrics-listen address"
					 : "metrics are off: start airlockd with --metrics-listen "
					   "or --metrics-token-file");
		return true;
	}
	h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (api_auth_header(a->metrics_auth, h))
		return false;
	if (api_auth_header(a->auth, h)) {
		api_reply_error_code(r, 403, "forbidden",
				     "an API token does not grant /metrics: it takes the metrics "
				     "token (--metrics-token-file)");
		return true;
	}
	api_reply_error_code(r, 401, "unauthorized", "missing or invalid metrics token");
	MHD_add_response_header(r->resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	return true;
}

int api_metrics_start(struct api *a, const struct api_opts *o, struct al_error **err)
{
	int fd = -1;

	if (o->metrics_tokens_path) {
		if (api_auth_load_plain(o->metrics_tokens_path, "(metrics)", &a->metrics_auth,
					err) < 0)
			return al_error_wrap(err, "--metrics-token-file");
		if (api_auth_shared(a->metrics_auth, a->auth))
			return al_error_msg(err, EINVAL,
					    "--metrics-token-file: a metrics token is also an API "
					    "token of %s: a tenant could read every team's metrics",
					    o->tokens_path);
	}
	if (!o->metrics_listen)
		return 0;
	api_router_add(&a->metrics_router, api_metrics_routes, api_metrics_routes_n);
	a->metrics_l = (struct api_listener){a, &a->metrics_router, true};
	if (api_listen_tcp(o->metrics_listen, &fd, &a->metrics_port, err) < 0)
		return al_error_wrap(err, "--metrics-listen");
	a->mhd_metrics = api_mhd_start(&a->metrics_l, fd, API_METRICS_MAX_CONN, false);
	if (!a->mhd_metrics) {
		close(fd);
		return al_error_msg(err, EIO, "start the metrics server on '%s'",
				    o->metrics_listen);
	}
	return 0;
}

int api_metrics_port(const struct api *a)
{
	return a->mhd_metrics ? a->metrics_port : 0;
}
