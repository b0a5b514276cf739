/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the MCP server's framing (src/mcp/jsonrpc.c) and tool paths
 * (src/mcp/wspath.c): the input is one stdin line. Invariants, any violation aborts:
 *   - every input classifies: an invalid one with -32700 or -32600 and a reason, a
 *     request with a method and a string or integer id, a notification with a method
 *     and no id, a response with an id;
 *   - what is accepted, serialized again, classifies the same (kind, method, id);
 *   - the error we would answer serializes and parses back as a response;
 *   - a path mcp_ws_path accepts is relative, has no "." or ".." component, and
 *     "/workspace/" + it is already in normal form.
 */
#include "mcp/jsonrpc.h"
#include "mcp/wspath.h"
#include "common/path.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();
}

static void check_msg(const struct mcp_msg *m)
{
	must(!m->id || json_is_string(m->id) || json_is_integer(m->id));
	switch (m->kind) {
	case MCP_INVALID:
		must(m->error_code == MCP_PARSE_ERROR || m->error_code == MCP_INVALID_REQUEST);
		must(m->why != NULL);
		break;
	case MCP_REQUEST:
		must(m->method && m->id && (!m->params || json_is_object(m->params)));
		break;
	case MCP_NOTIFICATION:
		must(m->method && !m->id);
		break;
	case MCP_RESPONSE:
		must(m->id != NULL);
		break;
	}
}

static void roundtrip(const struct mcp_msg *m)
{
	char *again = json_dumps(m->root, JSON_COMPACT);
	struct mcp_msg m2;

	must(again != NULL);
	must(mcp_msg_parse(again, strlen(again), &m2) == m->kind);
	must(!m->method || strcmp(m->method, m2.method) == 0);
	must((m->id == NULL) == (m2.id == NULL) && (!m->id || json_equal(m->id, m2.id)));
	mcp_msg_clear(&m2);
	free(again);
}

static void answer(const struct mcp_msg *m)
{
	json_t *e = mcp_error(m->id, m->error_code ? m->error_code : MCP_INTERNAL_ERROR, "x");
	char *text = json_dumps(e, JSON_COMPACT);
	struct mcp_msg back;

	must(text != NULL && !strchr(text, '\n'));
	must(mcp_msg_parse(text, strlen(text), &back) == (m->id ? MCP_RESPONSE : MCP_INVALID));
	mcp_msg_clear(&back);
	free(text);
	json_decref(e);
}

static void path(const uint8_t *data, size_t size)
{
	char *rel = NULL, *full, *norm = NULL;
	struct al_error *err = NULL;

	if (mcp_ws_path((const char *)data, size, true, &rel, &err) < 0) {
		must(rel == NULL && err != NULL);
		al_error_free(err);
		return;
	}
	must(rel[0] != '/' && !strstr(rel, "//"));
	full = malloc(strlen(rel) + 12);
	strcpy(full, rel[0] ? "/workspace/" : "/workspace");
	strcat(full, rel);
	must(al_path_normalize(full, "path", &norm, &err) == 0 && strcmp(norm, full) == 0);
	must(al_path_is_under(norm, "/workspace"));
	free(norm);
	free(full);
	free(rel);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp_msg m;

	mcp_msg_parse((const char *)data, size, &m);
	check_msg(&m);
	if (m.kind != MCP_INVALID)
		roundtrip(&m);
	answer(&m);
	mcp_msg_clear(&m);
	path(data, size);
	return 0;
}
