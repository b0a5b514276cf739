/* SPDX-License-Identifier: MIT */
/* Building responses: JSON bodies (ASCII only), errors, raw bytes, parameters. */
#include "api/api_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/utf8.h"
#include "common/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *api_param(const struct api_req *r, const char *name)
{
	size_t i, len = strlen(name);

	for (i = 0; i < r->params.n; i++)
		if (r->params.name_lens[i] == len && memcmp(r->params.names[i], name, len) == 0)
			return r->params.values[i];
	return NULL;
}

const char *api_query(const struct api_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

char *api_json_dump(json_t *j, bool nl, size_t *len)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
	size_t n;

	if (!s)
		al_oom();
	n = strlen(s);
	if (nl) {
		s = xrealloc(s, n + 2);
		s[n++] = '\n';
		s[n] = '\0';
	}
	if (len)
		*len = n;
	return s;
}

static void api_set_response(struct api_req *r, unsigned status, struct MHD_Response *resp)
{
	if (r->resp)
		MHD_destroy_response(r->resp);
	r->resp = resp;
	r->status = status;
}

void api_reply_raw(struct api_req *r, unsigned status, const char *content_type, char *data,
		   size_t len)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	if (!resp)
		al_oom();
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	api_set_response(r, status, resp);
}

void api_reply_json(struct api_req *r, unsigned status, json_t *body)
{
	size_t len;
	char *s = api_json_dump(body, true, &len);

	json_decref(body);
	api_reply_raw(r, status, "application/json", s, len);
}

void api_reply_wrapped(struct api_req *r, unsigned status, const char *key, json_t *obj)
{
	json_t *o = json_object();

	json_object_set_new(o, key, obj ? obj : json_null());
	api_reply_json(r, status, o);
}

void api_reply_ok(struct api_req *r)
{
	api_reply_json(r, 200, json_pack("{s:b}", "ok", 1));
}

void api_reply_error_code(struct api_req *r, unsigned status, const char *code, const char *msg)
{
	/* json_pack refuses invalid UTF-8: never let a message break the reply. */
	const char *text = msg ? msg : code;
	size_t clen;
	_cleanup_free_ char *clean = al_utf8_sanitize(text, strlen(text), &clen);

	api_reply_json(r, status,
		       json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", clean));
}

unsigned api_status_of_errno(int code, const char **name)
{
	switch (code) {
	case ENOENT:
		*name = "not_found";
		return 404;
	case EINVAL:
	case EISDIR:  /* reading a directory as a file */
	case ENOTDIR: /* a path through a file */
	case ENAMETOOLONG:
		*name = "bad_request";
		return 400;
	case E2BIG:
		*name = "payload_too_large";
		return 413;
	case ELOOP: /* a symlink in the way of a write */
	case ENXIO: /* a FIFO or socket (planted by the sandbox) in the way of a write */
		*name = "conflict";
		return 409;
	case ENOSPC: /* the sandbox's disk (--disk) is full */
		*name = "insufficient_storage";
		return 507;
	case EACCES: /* e.g. a write outside the sandbox's writable areas */
	case EPERM:
	case EROFS: /* a write into the read-only runtime (a workdir set there) */
		*name = "forbidden";
		return 403;
	case EEXIST:
	case EBUSY:
	case EPIPE:  /* a command's stdin is closed */
	case ENOTTY: /* a resize of a command without a PTY */
		*name = "conflict";
		return 409;
	case EAGAIN: /* a command's stdin buffer is full, or the sandbox runs its most commands */
		*name = "busy";
		return 429;
	case ESRCH:
		*name = "gone";
		return 410;
	case ETIMEDOUT:
		*name = "timeout";
		return 504;
	default:
		*name = "internal";
		return 500;
	}
}

void api_reply_error(struct api_req *r, const struct al_error *err)
{
	const char *name;
	unsigned status = api_status_of_errno(err ? err->code : EIO, &name);

	api_reply_error_code(r, status, name, err && err->msg ? err->msg : "internal error");
}

void api_reply_stream(struct api_req *r, struct MHD_Response *resp)
{
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	/* A command may print nothing for minutes: no idle timeout while streaming (the
	 * stream callback notices a client that went away on its next write). */
	MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
	api_set_response(r, 200, resp);
}
