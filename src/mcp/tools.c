/* SPDX-License-Identifier: MIT */
/*
 * The tools: their JSON Schemas and descriptions (tools/list), the checks of a call's
 * arguments (a bad one is a tool error the model can read and correct) and the results
 * (structuredContent, and the same JSON as a text block).
 */
#include "mcp/mcp.h"
#include "mcp/jsonrpc.h"
#include "mcp/wspath.h"
#include "common/cleanup.h"
#include "common/path.h"
#include "common/utf8.h"
#include "common/xalloc.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define RUN_OUTPUT_SCHEMA                                                                          \
	"{\"type\":\"object\",\"required\":[\"stdout\",\"stderr\",\"exit_code\",\"signal\","       \
	"\"reason\",\"stdout_truncated\",\"stderr_truncated\"],\"properties\":{"                   \
	"\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"                       \
	"\"exit_code\":{\"type\":[\"integer\",\"null\"],\"description\":\"the exit status when "   \
	"reason is exited (or exec_failed)\"},"                                                    \
	"\"signal\":{\"type\":[\"integer\",\"null\"],\"description\":\"the signal that ended "     \
	"it\"},"                                                                                   \
	"\"reason\":{\"type\":\"string\",\"enum\":[\"exited\",\"signaled\",\"timeout\",\"oom\","   \
	"\"seccomp\",\"setup_failed\",\"exec_failed\",\"interrupted\"],\"description\":\"why it "  \
	"ended (the words of airlock run --json)\"},"                                              \
	"\"stdout_truncated\":{\"type\":\"boolean\"},\"stderr_truncated\":{\"type\":\"boolean\"}," \
	"\"duration_ms\":{\"type\":\"number\"}}}"

#define TIMEOUT_PROP                                                                               \
	"\"timeout\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"description\":\"seconds; can "  \
	"only shorten the server's own limit\"}"
#define STDIN_PROP "\"stdin\":{\"type\":\"string\",\"description\":\"text given on stdin\"}"

static const char *const run_code_in =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"language\",\"code\"],"
    "\"properties\":{\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"node\",\"bash\"]},"
    "\"code\":{\"type\":\"string\",\"description\":\"the program (at most 128 KiB)\"}," STDIN_PROP
    "," TIMEOUT_PROP "}}";
static const char *const exec_in =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"argv\"],"
    "\"properties\":{\"argv\":{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":"
    "\"string\"},\"description\":\"the command and its arguments; argv[0] is searched in "
    "PATH\"}," STDIN_PROP "," TIMEOUT_PROP ",\"cwd\":{\"type\":\"string\",\"description\":"
    "\"working directory inside (default /workspace)\"}}}";
static const char *const write_in =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"path\",\"content\"],"
    "\"properties\":{\"path\":{\"type\":\"string\",\"description\":\"relative to /workspace, "
    "or absolute under it\"},\"content\":{\"type\":\"string\",\"description\":\"the file's "
    "text (UTF-8)\"}}}";
static const char *const write_out =
    "{\"type\":\"object\",\"required\":[\"path\",\"size\"],\"properties\":{\"path\":{\"type\":"
    "\"string\"},\"size\":{\"type\":\"integer\"}}}";
static const char *const read_in =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"path\"],"
    "\"properties\":{\"path\":{\"type\":\"string\",\"description\":\"relative to /workspace, "
    "or absolute under it\"}}}";
static const char *const read_out =
    "{\"type\":\"object\",\"required\":[\"path\",\"content\",\"encoding\",\"truncated\"],"
    "\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"},"
    "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"],\"description\":"
    "\"base64 when the bytes are not UTF-8 text\"},\"size\":{\"type\":\"integer\"},"
    "\"truncated\":{\"type\":\"boolean\",\"description\":\"only the first 4 MiB\"}}}";
static const char *const list_in =
    "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{\"path\":{\"type\":"
    "\"string\",\"description\":\"a directory; default /workspace\"}}}";
static const char *const list_out =
    "{\"type\":\"object\",\"required\":[\"path\",\"entries\"],\"properties\":{\"path\":{"
    "\"type\":\"string\"},\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"required\":[\"name\",\"type\"],\"properties\":{\"name\":{\"type\":\"string\"},\"type\":"
    "{\"type\":\"string\",\"enum\":[\"file\",\"dir\",\"symlink\",\"other\"]},\"size\":{"
    "\"type\":\"integer\"}}}}}}";
static const char *const reset_in = "{\"type\":\"object\",\"additionalProperties\":false}";
static const char *const reset_out =
    "{\"type\":\"object\",\"required\":[\"stopped\"],\"properties\":{\"stopped\":{\"type\":"
    "\"boolean\"},\"sandbox\":{\"type\":[\"string\",\"null\"]}}}";

#define EMB_STATE                                                                                  \
	" Each call runs in a fresh sandbox: files written with write_file are copied into its "   \
	"/workspace, and whatever the command writes is gone when it ends."
#define REM_STATE                                                                                  \
	" All calls share this session's sandbox: files and installed packages persist between "   \
	"calls until reset or the end of the session."
#define LIMITS                                                                                     \
	" Limits (time, memory, CPU, disk) and the network policy are the server's; the call "     \
	"cannot change them. A command that does not exit 0 is reported with isError."

static json_t *tool(const char *name, const char *title, const char *desc, const char *in,
		    const char *out)
{
	return json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", name, "title", title, "description",
			 desc, "inputSchema", json_loads(in, 0, NULL), "outputSchema",
			 json_loads(out, 0, NULL));
}

json_t *mcp_tools_list(bool remote)
{
	const char *state = remote ? REM_STATE : EMB_STATE;
	_cleanup_free_ char *run = xasprintf(
	    "Run a program in a sandbox (no network unless the server allows it): python "
	    "(python3), node or bash. Returns stdout, stderr, exit code and why it ended.%s%s",
	    state, LIMITS);
	_cleanup_free_ char *ex =
	    xasprintf("Run one command (an argv array, no shell) in a sandbox, in /workspace "
		      "unless cwd is given.%s%s",
		      state, LIMITS);
	json_t *tools = json_array();

	json_array_append_new(tools,
			      tool("run_code", "Run code", run, run_code_in, RUN_OUTPUT_SCHEMA));
	json_array_append_new(tools, tool("exec", "Run a command", ex, exec_in, RUN_OUTPUT_SCHEMA));
	json_array_append_new(
	    tools, tool("write_file", "Write a file",
			remote ? "Write a text file in the sandbox (parents are made)."
			       : "Write a text file into the session's workspace (parents are "
				 "made); every later command finds it in /workspace.",
			write_in, write_out));
	json_array_append_new(
	    tools, tool("read_file", "Read a file",
			remote ? "Read a file of the sandbox (at most 4 MiB returned)."
			       : "Read a file of the session's workspace: what write_file wrote "
				 "(commands' own writes do not outlive them). At most 4 MiB.",
			read_in, read_out));
	json_array_append_new(
	    tools, tool("list_files", "List files",
			remote ? "List a directory of the sandbox (default /workspace)."
			       : "List a directory of the session's workspace (what write_file "
				 "wrote; default /workspace).",
			list_in, list_out));
	if (remote)
		json_array_append_new(
		    tools, tool("reset", "Reset the sandbox",
				"Stop this session's sandbox; the next call gets a fresh one "
				"(files and processes are gone).",
				reset_in, reset_out));
	return tools;
}

/* ---- results ---- */

static json_t *text_block(const char *text)
{
	return json_pack("[{s:s, s:s}]", "type", "text", "text", text);
}

/* A tool's result: structured content, the same as JSON text, and isError. */
static json_t *result(json_t *structured, bool is_error)
{
	_cleanup_free_ char *text = json_dumps(structured, JSON_COMPACT | JSON_ENSURE_ASCII);

	return json_pack("{s:o, s:o, s:b}", "content", text_block(text ? text : "{}"),
			 "structuredContent", structured, "isError", is_error);
}

/* A tool error the model can read: the message, isError, no structured content. */
static json_t *tool_error(const struct al_error *e)
{
	return json_pack("{s:o, s:b}", "content", text_block(e ? e->msg : "failed"), "isError", 1);
}

json_t *mcp_text_capped(const char *buf, size_t len, uint64_t limit, bool *truncated)
{
	size_t n = 0;
	_cleanup_free_ char *clean = NULL;

	*truncated = limit && len > limit;
	if (*truncated) {
		len = (size_t)limit;
		while (len && ((unsigned char)buf[len] & 0xc0) == 0x80)
			len--; /* not inside a UTF-8 character */
	}
	clean = al_utf8_sanitize(buf ? buf : "", len, &n);
	return json_stringn(clean, n);
}

static char *base64(const unsigned char *p, size_t len)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = xzalloc(4 * ((len + 2) / 3) + 1), *o = out;

	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) |
			     (i + 2 < len ? p[i + 2] : 0);
		*o++ = tab[v >> 18 & 63];
		*o++ = tab[v >> 12 & 63];
		*o++ = i + 1 < len ? tab[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? tab[v & 63] : '=';
	}
	return out;
}

json_t *mcp_file_result(const char *rel, const char *data, size_t len, bool truncated)
{
	size_t n = 0;
	_cleanup_free_ char *clean = al_utf8_sanitize(data, len, &n);
	_cleanup_free_ char *b64 = NULL;
	bool text = n == len && memcmp(clean, data, len) == 0;

	if (!text)
		b64 = base64((const unsigned char *)data, len);
	return json_pack("{s:s+, s:s, s:s, s:I, s:b}", "path", "/workspace/", rel, "content",
			 text ? clean : b64, "encoding", text ? "utf-8" : "base64", "size",
			 (json_int_t)len, "truncated", truncated);
}

/* ---- arguments ---- */

/* args[key] as a string (*s, *len); absent: 0 with *s NULL unless required. */
static int arg_string(json_t *args, const char *key, bool required, const char **s, size_t *len,
		      struct al_error **err)
{
	json_t *v = json_object_get(args, key);

	*s = NULL;
	*len = 0;
	if (!v && !required)
		return 0;
	if (!json_is_string(v))
		return al_error_msg(err, EINVAL, "argument '%s': %s", key,
				    v ? "must be a string" : "is required");
	*s = json_string_value(v);
	*len = json_string_length(v);
	return 0;
}

static int check_keys(json_t *args, const char *const *allowed, struct al_error **err)
{
	const char *key;
	json_t *v;

	json_object_foreach(args, key, v)
	{
		size_t i = 0;

		while (allowed[i] && strcmp(allowed[i], key) != 0)
			i++;
		if (!allowed[i])
			return al_error_msg(err, EINVAL, "unknown argument '%s'", key);
	}
	return 0;
}

/* The command's limit: the command line's, or the call's timeout (seconds) if shorter. */
static int arg_timeout(struct mcp_job *job, json_t *args, uint64_t *ms, struct al_error **err)
{
	json_t *v = json_object_get(args, "timeout");
	uint64_t cap = job->srv->opts->timeout_ms;
	double t;

	*ms = cap;
	if (!v)
		return 0;
	t = json_number_value(v);
	if (!json_is_number(v) || !(t > 0) || !isfinite(t))
		return al_error_msg(err, EINVAL, "argument 'timeout': seconds, a number above 0");
	if (t < 30.0 * 86400 && (!cap || (uint64_t)ceil(t * 1000) < cap))
		*ms = (uint64_t)ceil(t * 1000);
	return 0;
}

static int arg_stdin(json_t *args, struct mcp_cmd *cmd, struct al_error **err)
{
	return arg_string(args, "stdin", false, &cmd->stdin_data, &cmd->stdin_len, err);
}

/* ---- the tools ---- */

static const char *const languages[][2] = {
    {"python", "python3"}, {"node", "node"}, {"bash", "bash"}};

static json_t *run_code(struct mcp_job *job, json_t *args, struct al_error **err)
{
	static const char *const keys[] = {"language", "code", "stdin", "timeout", NULL};
	const char *lang, *code;
	size_t len, clen;
	char *argv[4] = {NULL, NULL, NULL, NULL};
	struct mcp_cmd cmd = {.argv = argv};
	json_t *out;

	if (check_keys(args, keys, err) < 0 ||
	    arg_string(args, "language", true, &lang, &len, err) < 0 ||
	    arg_string(args, "code", true, &code, &clen, err) < 0 ||
	    arg_stdin(args, &cmd, err) < 0 || arg_timeout(job, args, &cmd.timeout_ms, err) < 0)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(languages); i++)
		if (strcmp(lang, languages[i][0]) == 0)
			argv[0] = (char *)languages[i][1];
	if (!argv[0])
		return al_error_msg(err, EINVAL,
				    "argument 'language': '%s' is not one of python, node, bash",
				    lang),
		       NULL;
	if (memchr(code, '\0', clen) || clen >= MCP_CODE_MAX)
		return al_error_msg(err, EINVAL,
				    "argument 'code': at most %u bytes and no NUL byte (write "
				    "bigger programs with write_file and run them with exec)",
				    MCP_CODE_MAX - 1),
		       NULL;
	argv[1] = strcmp(lang, "node") == 0 ? "-e" : "-c";
	argv[2] = (char *)code;
	out = job->srv->be->exec(job, &cmd, err);
	/* A new object that holds nothing of cmd (cppcheck cannot see through the pointer). */
	/* cppcheck-suppress returnDanglingLifetime */
	return out;
}

/* exec's cwd: absolute, or relative to /workspace; never /, /proc, /sys, /dev. */
static int arg_cwd(json_t *args, char **cwd, struct al_error **err)
{
	const char *s;
	size_t len;
	_cleanup_free_ char *full = NULL;

	*cwd = NULL;
	if (arg_string(args, "cwd", false, &s, &len, err) < 0 || !s)
		return -!!*err;
	if (memchr(s, '\0', len))
		return al_error_msg(err, EINVAL, "argument 'cwd': has a NUL byte");
	full = xasprintf("%s%s", s[0] == '/' ? "" : MCP_WORKSPACE "/", s);
	if (al_path_normalize(full, "cwd", cwd, err) < 0)
		return -1;
	if (al_path_in_pseudo_fs(*cwd)) {
		al_error_msg(err, EINVAL, "argument 'cwd': '%s' is /, or in /proc, /sys or /dev",
			     *cwd);
		free(TAKE_PTR(*cwd));
		return -1;
	}
	return 0;
}

static json_t *exec_tool(struct mcp_job *job, json_t *args, struct al_error **err)
{
	static const char *const keys[] = {"argv", "stdin", "timeout", "cwd", NULL};
	json_t *arr = json_object_get(args, "argv"), *v;
	_cleanup_free_ char **argv = NULL;
	_cleanup_free_ char *cwd = NULL;
	struct mcp_cmd cmd = {0};
	size_t i;
	json_t *out;

	if (check_keys(args, keys, err) < 0 || arg_stdin(args, &cmd, err) < 0 ||
	    arg_timeout(job, args, &cmd.timeout_ms, err) < 0 || arg_cwd(args, &cwd, err) < 0)
		return NULL;
	if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > 4096)
		return al_error_msg(err, EINVAL,
				    "argument 'argv': an array of 1 to 4096 strings is required"),
		       NULL;
	argv = xzalloc((json_array_size(arr) + 1) * sizeof(*argv));
	json_array_foreach(arr, i, v)
	{
		if (!json_is_string(v) || memchr(json_string_value(v), '\0', json_string_length(v)))
			return al_error_msg(err, EINVAL,
					    "argument 'argv': item %zu is not a string without NUL",
					    i),
			       NULL;
		argv[i] = (char *)json_string_value(v);
	}
	if (!argv[0][0])
		return al_error_msg(err, EINVAL, "argument 'argv': the command is empty"), NULL;
	cmd.argv = argv;
	cmd.cwd = cwd;
	out = job->srv->be->exec(job, &cmd, err);
	/* A new object that holds nothing of cmd (cppcheck cannot see through the pointer). */
	/* cppcheck-suppress returnDanglingLifetime */
	return out;
}

/* args.path through mcp_ws_path (*rel: heap). */
static int arg_path(json_t *args, bool required, char **rel, struct al_error **err)
{
	const char *s;
	size_t len;

	*rel = NULL;
	if (arg_string(args, "path", required, &s, &len, err) < 0)
		return -1;
	if (mcp_ws_path(s ? s : "", len, !required, rel, err) < 0)
		return al_error_wrap(err, "argument 'path'");
	return 0;
}

static json_t *file_tool(struct mcp_job *job, const char *name, json_t *args, struct al_error **err)
{
	static const char *const wkeys[] = {"path", "content", NULL}, *const rkeys[] = {"path",
											NULL};
	struct mcp_server *s = job->srv;
	_cleanup_free_ char *rel = NULL;
	const char *content;
	size_t len;

	if (check_keys(args, strcmp(name, "write_file") == 0 ? wkeys : rkeys, err) < 0 ||
	    arg_path(args, strcmp(name, "list_files") != 0, &rel, err) < 0)
		return NULL;
	if (strcmp(name, "read_file") == 0)
		return s->be->read_file(s, rel, err);
	if (strcmp(name, "list_files") == 0)
		return s->be->list_files(s, rel, err);
	if (arg_string(args, "content", true, &content, &len, err) < 0)
		return NULL;
	return s->be->write_file(s, rel, content, len, err);
}

/* The command did not exit 0: the result says isError. */
static bool run_failed(json_t *r)
{
	return !json_is_string(json_object_get(r, "reason")) ||
	       strcmp(json_string_value(json_object_get(r, "reason")), "exited") != 0 ||
	       json_integer_value(json_object_get(r, "exit_code")) != 0;
}

json_t *mcp_tools_call(struct mcp_job *job, int *rpc_code, char **rpc_msg)
{
	_cleanup_error_ struct al_error *err = NULL;
	json_t *name = json_object_get(job->params, "name");
	json_t *args = json_object_get(job->params, "arguments"), *out = NULL;
	json_t *empty = json_object();
	const char *n = json_string_value(name);
	bool found = false;

	if (!json_is_string(name) || (args && !json_is_object(args))) {
		*rpc_code = MCP_INVALID_PARAMS;
		*rpc_msg = xstrdup("tools/call: params.name must be a string and params.arguments "
				   "an object");
		json_decref(empty);
		return NULL;
	}
	args = args ? args : empty;
	for (size_t i = 0; i < json_array_size(job->srv->tools); i++)
		found |= strcmp(json_string_value(
				    json_object_get(json_array_get(job->srv->tools, i), "name")),
				n) == 0;
	if (!found) {
		*rpc_code = MCP_INVALID_PARAMS;
		*rpc_msg =
		    xasprintf("unknown tool '%s'%s", n,
			      strcmp(n, "reset") == 0 ? " (reset needs --url or --socket)" : "");
		json_decref(empty);
		return NULL;
	}
	if (strcmp(n, "run_code") == 0)
		out = run_code(job, args, &err);
	else if (strcmp(n, "exec") == 0)
		out = exec_tool(job, args, &err);
	else if (strcmp(n, "reset") == 0)
		out = json_object_size(args) ? (al_error_msg(&err, EINVAL,
							     "reset takes no "
							     "arguments"),
						NULL)
					     : job->srv->be->reset(job->srv, &err);
	else
		out = file_tool(job, n, args, &err);
	json_decref(empty);
	if (!out)
		return tool_error(err);
	return result(out,
		      (strcmp(n, "run_code") == 0 || strcmp(n, "exec") == 0) && run_failed(out));
}
