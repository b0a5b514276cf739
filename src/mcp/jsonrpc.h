/* SPDX-License-Identifier: MIT */
/*
 * The MCP server's JSON-RPC 2.0 framing (docs/mcp.md): pure code, no I/O, no process. One
 * newline-delimited message in, a typed message or the JSON-RPC error to answer out.
 * Fuzzed by tests/fuzz/fuzz_mcp.c, unit-tested by tests/unit/test-mcp.c.
 */
#ifndef AL_MCP_JSONRPC_H
#define AL_MCP_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

/* The largest message we read (a line of stdin, its newline excluded). */
#define MCP_MSG_MAX (8u << 20)

/* JSON-RPC 2.0 error codes, and MCP's own for an unknown resource. */
enum {
	MCP_PARSE_ERROR = -32700,
	MCP_INVALID_REQUEST = -32600,
	MCP_METHOD_NOT_FOUND = -32601,
	MCP_INVALID_PARAMS = -32602,
	MCP_INTERNAL_ERROR = -32603,
	MCP_RESOURCE_NOT_FOUND = -32002,
};

enum mcp_kind {
	MCP_INVALID,	  /* answer error_code / why, to id (or null) */
	MCP_REQUEST,	  /* method, id, params */
	MCP_NOTIFICATION, /* method, params; never answered */
	MCP_RESPONSE,	  /* a response from the client (we send no requests: ignored) */
};

struct mcp_msg {
	enum mcp_kind kind;
	json_t *root;	    /* the parsed message, owned (NULL when it did not parse) */
	json_t *id;	    /* borrowed from root: a string or an integer; NULL if none/unknown */
	const char *method; /* borrowed from root */
	json_t *params;	    /* borrowed from root: an object, or NULL when absent */
	int error_code;	    /* MCP_INVALID: MCP_PARSE_ERROR or MCP_INVALID_REQUEST */
	const char *why;    /* MCP_INVALID: a static reason */
};

/*
 * buf[0..len) is one message without its newline. Classifies it into *m (which the caller
 * releases with mcp_msg_clear) and returns m->kind. Refused: more than MCP_MSG_MAX bytes, not
 * JSON (or invalid UTF-8, a NUL, a duplicate key: parse error), a batch (an array: JSON-RPC
 * batching is not part of MCP since 2025-06-18), anything but an object, jsonrpc other than
 * "2.0", an id that is not a string or an integer (null included), a method that is not a
 * string, params that are not an object, both a method and a result/error, neither.
 */
enum mcp_kind mcp_msg_parse(const char *buf, size_t len, struct mcp_msg *m);
void mcp_msg_clear(struct mcp_msg *m);

/* The protocol revisions we speak, newest first (NULL-terminated). */
extern const char *const mcp_protocol_versions[];
/* The revision to answer an initialize that asked for `asked` (NULL: not a string): the same
 * if we speak it, else our latest. */
const char *mcp_negotiate_version(const char *asked);

/* {"jsonrpc":"2.0","id":id,"result":result} (result's reference is taken; id copied, NULL
 * = null). */
json_t *mcp_result(json_t *id, json_t *result);
/* {"jsonrpc":"2.0","id":id,"error":{"code":code,"message":msg}}. */
json_t *mcp_error(json_t *id, int code, const char *msg);
/* {"jsonrpc":"2.0","method":method,"params":params} (params' reference is taken). */
json_t *mcp_notification(const char *method, json_t *params);

#endif
