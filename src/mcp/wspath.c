/* SPDX-License-Identifier: MIT */
#include "mcp/wspath.h"
#include "common/cleanup.h"
#include "common/path.h"
#include "common/xalloc.h"

#include <errno.h>
#include <string.h>

int mcp_ws_path(const char *arg, size_t len, bool allow_root, char **rel, struct al_error **err)
{
	_cleanup_free_ char *full = NULL, *norm = NULL;
	const char *prefix = len && arg[0] == '/' ? "" : MCP_WORKSPACE "/";

	*rel = NULL;
	if (memchr(arg, '\0', len))
		return al_error_msg(err, EINVAL, "path: has a NUL byte");
	if (len >= AL_PATH_MAX)
		return al_error_msg(err, EINVAL, "path: %zu bytes, at most %d", len,
				    AL_PATH_MAX - 1);
	full = xasprintf("%s%.*s", prefix, (int)len, arg);
	if (al_path_normalize(full, "path", &norm, err) < 0)
		return -1;
	if (!al_path_is_under(norm, MCP_WORKSPACE))
		return al_error_msg(err, EINVAL,
				    "path '%s': outside /workspace (give a path relative to "
				    "/workspace or one under it)",
				    norm);
	if (strcmp(norm, MCP_WORKSPACE) == 0 && !allow_root)
		return al_error_msg(err, EINVAL, "path '%s': names /workspace, not a file", norm);
	*rel = xstrdup(norm + strlen(MCP_WORKSPACE) + (norm[strlen(MCP_WORKSPACE)] == '/'));
	return 0;
}
