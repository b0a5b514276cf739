/* SPDX-License-Identifier: MIT */
/* Where a tool's path argument points in the sandbox's /workspace. Pure code. */
#ifndef AL_MCP_WSPATH_H
#define AL_MCP_WSPATH_H

#include "common/error.h"

#include <stdbool.h>
#include <stddef.h>

#define MCP_WORKSPACE "/workspace"

/*
 * arg[0..len) (a path a model chose) -> *rel (heap): the path relative to /workspace, ""
 * for /workspace itself (accepted only with allow_root). A relative arg is relative to
 * /workspace; an absolute one must lie in it. Refused (EINVAL, a message that names arg):
 * a NUL, "." or "..", a component over 255 bytes, 4096 bytes or more, a place outside
 * /workspace. Nothing is resolved: the caller opens *rel component by component without
 * following links.
 */
int mcp_ws_path(const char *arg, size_t len, bool allow_root, char **rel, struct al_error **err);

#endif
