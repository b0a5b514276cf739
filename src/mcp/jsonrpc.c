/* SPDX-License-Identifier: MIT */
/* JSON-RPC 2.0 framing and classification for the MCP server (jsonrpc.h). Pure code. */
#include "mcp/jsonrpc.h"

#include <string.h>

const char *const mcp_protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
					     NULL};

const char *mcp_negotiate_version(const char *asked)
{
	for (size_t i = 0; asked && mcp_protocol_versions[i]; i++)
		if (strcmp(asked, mcp_protocol_versions[i]) == 0)
			return mcp_protocol_versions[i];
	return mcp_protocol_versions[0];
}

static enum mcp_kind invalid(struct mcp_msg *m, int code, const char *why)
{
	m->kind = MCP_INVALID;
	m->error_code = code;
	m->why = why;
	m->method = NULL;
	m->params = NULL;
	return MCP_INVALID;
}

/* An id we can answer to: a string or an integer (MCP: never null). */
static int id_ok(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

/* The object's members: jsonrpc, id, method, params, result, error. */
static enum mcp_kind classify(struct mcp_msg *m)
{
	json_t *o = m->root, *ver = json_object_get(o, "jsonrpc"), *id = json_object_get(o, "id");
	json_t *method = json_object_get(o, "method"), *params = json_object_get(o, "params");
	int has_result = json_object_get(o, "result") != NULL,
	    has_error = json_object_get(o, "error") != NULL;

	if (id && id_ok(id))
		m->id = id; /* errors below are answered to it */
	if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0)
		return invalid(m, MCP_INVALID_REQUEST, "jsonrpc must be \"2.0\"");
	if (id && !id_ok(id))
		return invalid(m, MCP_INVALID_REQUEST, "id must be a string or an integer");
	if (method) {
		if (!json_is_string(method))
			return invalid(m, MCP_INVALID_REQUEST, "method must be a string");
		if (has_result || has_error)
			return invalid(m, MCP_INVALID_REQUEST,
				       "a request cannot carry a result or an error");
		if (params && !json_is_object(params))
			return invalid(m, MCP_INVALID_REQUEST, "params must be an object");
		m->method = json_string_value(method);
		m->params = params;
		m->kind = id ? MCP_REQUEST : MCP_NOTIFICATION;
		return m->kind;
	}
	if (has_result == has_error || !id)
		return invalid(m, MCP_INVALID_REQUEST,
			       "neither a request, a notification nor a response");
	m->kind = MCP_RESPONSE;
	return MCP_RESPONSE;
}

enum mcp_kind mcp_msg_parse(const char *buf, size_t len, struct mcp_msg *m)
{
	json_error_t jerr;

	memset(m, 0, sizeof(*m));
	if (len > MCP_MSG_MAX)
		return invalid(m, MCP_INVALID_REQUEST, "message larger than 8 MiB");
	/* Without JSON_ALLOW_NUL a NUL byte (raw or \u0000) is refused; jansson checks UTF-8. */
	m->root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!m->root)
		return invalid(m, MCP_PARSE_ERROR, "not a JSON text");
	if (json_is_array(m->root))
		return invalid(m, MCP_INVALID_REQUEST, "batches (JSON arrays) are not supported");
	if (!json_is_object(m->root))
		return invalid(m, MCP_INVALID_REQUEST, "a message must be a JSON object");
	return classify(m);
}

void mcp_msg_clear(struct mcp_msg *m)
{
	json_decref(m->root);
	memset(m, 0, sizeof(*m));
}

json_t *mcp_result(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result",
			 result);
}

json_t *mcp_error(json_t *id, int code, const char *msg)
{
	return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			 "error", "code", code, "message", msg);
}

json_t *mcp_notification(const char *method, json_t *params)
{
	return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params);
}
