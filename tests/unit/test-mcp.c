/* SPDX-License-Identifier: MIT */
/* The MCP server's pure parts: JSON-RPC classification (src/mcp/jsonrpc.c) and tool paths
 * (src/mcp/wspath.c). */
#include "mcp/jsonrpc.h"
#include "mcp/wspath.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void kind(const char *text, enum mcp_kind want, int code, const char *why_part)
{
	struct mcp_msg m;
	enum mcp_kind k = mcp_msg_parse(text, strlen(text), &m);

	CHECK(k == want && m.kind == k && (k != MCP_INVALID || m.error_code == code) &&
		  (!why_part || (m.why && strstr(m.why, why_part))),
	      "%.60s -> kind %d (got %d, code %d, %s)", text, want, k, m.error_code,
	      m.why ? m.why : "-");
	mcp_msg_clear(&m);
}

static void classification(void)
{
	struct mcp_msg m;
	const char *req = "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{"
			  "\"name\":\"exec\"}}";

	CHECK(mcp_msg_parse(req, strlen(req), &m) == MCP_REQUEST &&
		  strcmp(m.method, "tools/call") == 0 && json_is_string(m.id) &&
		  json_is_object(m.params),
	      "a request: method, id, params");
	mcp_msg_clear(&m);
	kind("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}", MCP_REQUEST, 0, NULL);
	kind("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", MCP_NOTIFICATION, 0,
	     NULL);
	kind("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}", MCP_RESPONSE, 0, NULL);
	kind("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":1,\"message\":\"x\"}}",
	     MCP_RESPONSE, 0, NULL);
	kind("", MCP_INVALID, MCP_PARSE_ERROR, "JSON");
	kind("{", MCP_INVALID, MCP_PARSE_ERROR, NULL);
	kind("{\"a\":1,\"a\":2}", MCP_INVALID, MCP_PARSE_ERROR, NULL);
	kind("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\\u0000\"}", MCP_INVALID, MCP_PARSE_ERROR,
	     NULL);
	kind("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", MCP_INVALID,
	     MCP_INVALID_REQUEST, "batch");
	kind("7", MCP_INVALID, MCP_INVALID_REQUEST, "object");
	kind("{\"id\":1,\"method\":\"ping\"}", MCP_INVALID, MCP_INVALID_REQUEST, "2.0");
	kind("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", MCP_INVALID,
	     MCP_INVALID_REQUEST, "id");
	kind("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", MCP_INVALID,
	     MCP_INVALID_REQUEST, "id");
	kind("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":[]}", MCP_INVALID, MCP_INVALID_REQUEST,
	     "method");
	kind("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":[]}", MCP_INVALID,
	     MCP_INVALID_REQUEST, "params");
	kind("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"result\":1}", MCP_INVALID,
	     MCP_INVALID_REQUEST, NULL);
	kind("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{}}", MCP_INVALID,
	     MCP_INVALID_REQUEST, NULL);
	kind("{\"jsonrpc\":\"2.0\",\"result\":1}", MCP_INVALID, MCP_INVALID_REQUEST, NULL);
	/* an invalid request keeps its id when it had a usable one */
	{
		const char *t = "{\"jsonrpc\":\"1.0\",\"id\":42,\"method\":\"ping\"}";
		mcp_msg_parse(t, strlen(t), &m);
		CHECK(m.kind == MCP_INVALID && json_integer_value(m.id) == 42,
		      "an invalid request is answered to its id");
		mcp_msg_clear(&m);
	}
	/* the size cap is judged before parsing */
	CHECK(mcp_msg_parse("{}", (size_t)MCP_MSG_MAX + 1, &m) == MCP_INVALID &&
		  m.error_code == MCP_INVALID_REQUEST && strstr(m.why, "8 MiB"),
	      "over 8 MiB: refused unread");
	mcp_msg_clear(&m);
}

static void versions(void)
{
	CHECK(strcmp(mcp_negotiate_version("2025-06-18"), "2025-06-18") == 0, "a known version");
	CHECK(strcmp(mcp_negotiate_version("2024-11-05"), "2024-11-05") == 0, "the oldest");
	CHECK(strcmp(mcp_negotiate_version("2030-01-01"), "2025-11-25") == 0, "unknown: latest");
	CHECK(strcmp(mcp_negotiate_version(NULL), "2025-11-25") == 0, "none: latest");
}

static void replies(void)
{
	json_t *id = json_integer(3), *e = mcp_error(NULL, -32700, "x"),
	       *r = mcp_result(id, json_object());

	CHECK(json_is_null(json_object_get(e, "id")) &&
		  json_integer_value(json_object_get(json_object_get(e, "error"), "code")) ==
		      -32700,
	      "an error to an unknown id names id null");
	CHECK(json_integer_value(json_object_get(r, "id")) == 3 &&
		  json_is_object(json_object_get(r, "result")),
	      "a result echoes the id");
	json_decref(id);
	json_decref(e);
	json_decref(r);
}

static void ws_ok(const char *in, bool root, const char *want)
{
	char *rel = NULL;
	struct al_error *err = NULL;
	int r = mcp_ws_path(in, strlen(in), root, &rel, &err);

	CHECK(r == 0 && rel && strcmp(rel, want) == 0, "'%s' -> '%s' (got '%s' %s)", in, want,
	      rel ? rel : "-", err ? err->msg : "");
	free(rel);
	al_error_free(err);
}

static void ws_refused(const char *in, size_t len, bool root, const char *needle)
{
	char *rel = NULL;
	struct al_error *err = NULL;
	int r = mcp_ws_path(in, len, root, &rel, &err);

	CHECK(r < 0 && !rel && err && err->code == EINVAL && strstr(err->msg, needle),
	      "'%.40s' refused (%s)", in, err ? err->msg : "accepted");
	free(rel);
	al_error_free(err);
}

static void paths(void)
{
	static char longp[5000];

	ws_ok("a.txt", false, "a.txt");
	ws_ok("a//b/", false, "a/b");
	ws_ok("/workspace/a/b", false, "a/b");
	ws_ok("/workspace", true, "");
	ws_ok("", true, "");
	ws_refused("/workspace", 10, false, "names /workspace");
	ws_refused("..", 2, false, "..");
	ws_refused("a/../../etc", 11, false, "..");
	ws_refused("/workspace/../etc/passwd", 24, false, "..");
	ws_refused("/etc/passwd", 11, false, "outside /workspace");
	ws_refused("/workspaces/x", 13, false, "outside /workspace");
	ws_refused("/", 1, true, "outside /workspace");
	ws_refused("./a", 3, false, ".");
	ws_refused("a\0b", 3, false, "NUL");
	memset(longp, 'a', sizeof(longp) - 1);
	ws_refused(longp, sizeof(longp) - 1, false, "at most");
}

int main(void)
{
	classification();
	versions();
	replies();
	paths();
	return tap_done();
}
