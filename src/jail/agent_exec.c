/* SPDX-License-Identifier: MIT */
/*
 * Daemon sandboxes: PID 1 becomes airlock-agent. The agent binary is opened
 * on the host before pivot_root and exec'd through its fd, so it needs no
 * path inside the sandbox (and works with any --image: it is static). Its
 * listening socket is bound at a host path the daemon can reach and the
 * sandbox cannot; it crosses as fd 3.
 */
#include "jail/jail.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define AGENT_LISTEN_FD 3

int jail_agent_prepare(struct jail_ctx *ctx, struct al_error **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	ctx->agent_fd = open(ctx->agent_path, O_RDONLY | O_CLOEXEC);
	if (ctx->agent_fd < 0)
		return al_error_set(err, errno, "open agent '%s'", ctx->agent_path);
	if (strlen(ctx->agent_sock) >= sizeof(sa.sun_path))
		return al_error_msg(err, ENAMETOOLONG, "agent socket path '%s'", ctx->agent_sock);
	strcpy(sa.sun_path, ctx->agent_sock);
	ctx->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ctx->listen_fd < 0)
		return al_error_set(err, errno, "socket(AF_UNIX)");
	unlink(ctx->agent_sock);
	if (bind(ctx->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return al_error_set(err, errno, "bind '%s'", ctx->agent_sock);
	if (chmod(ctx->agent_sock, 0600) < 0 || listen(ctx->listen_fd, 8) < 0)
		return al_error_set(err, errno, "listen '%s'", ctx->agent_sock);
	return 0;
}

void jail_agent_exec(struct jail_ctx *ctx)
{
	struct al_error *err = NULL;
	const char *workdir = ctx->cfg->workdir ? ctx->cfg->workdir : "/workspace";
	char *const argv[] = {"airlock-agent", "--workdir", (char *)workdir, NULL};
	char *const envp[] = {NULL};
	int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	int ok;

	/* Move what we still need above the fds we are about to assign. */
	ctx->agent_fd = fcntl(ctx->agent_fd, F_DUPFD_CLOEXEC, 5);
	ctx->sync_fd = fcntl(ctx->sync_fd, F_DUPFD_CLOEXEC, 5);
	ctx->listen_fd = fcntl(ctx->listen_fd, F_DUPFD_CLOEXEC, 5);
	/* stdio: the sandbox's own /dev/null; fd 3: the listening socket; nothing else. */
	ok = null_fd >= 0 && ctx->agent_fd >= 0 && ctx->sync_fd >= 0 && ctx->listen_fd >= 0 &&
	     dup2(null_fd, 0) == 0 && dup2(null_fd, 1) == 1 && dup2(null_fd, 2) == 2 &&
	     dup2(ctx->listen_fd, AGENT_LISTEN_FD) == AGENT_LISTEN_FD;
	if (!ok) {
		al_error_set(&err, errno, "agent stdio");
		jail_child_fail(ctx->sync_fd >= 0 ? ctx->sync_fd : 4, err);
	}
	/* Everything else the spawner had open closes at exec. */
	sys_close_range(AGENT_LISTEN_FD + 1, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */);
	/* The sync socket is close-on-exec: its EOF tells the spawner the exec happened. */
	fexecve(ctx->agent_fd, argv, envp);
	al_error_set(&err, errno, "fexecve agent '%s'", ctx->agent_path);
	jail_child_fail(ctx->sync_fd, err);
}
