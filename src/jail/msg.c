/* SPDX-License-Identifier: MIT */
#include "jail/jail.h"
#include "common/error.h"
#include "common/fdpass.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int jail_msg_send(int fd, const struct jail_msg *m, int pass_fd)
{
	return al_send_with_fd(fd, m, sizeof(*m), pass_fd) == (ssize_t)sizeof(*m) ? 0 : -1;
}

int jail_msg_recv(int fd, struct jail_msg *m, int *got_fd)
{
	int flags = 0;
	ssize_t n = al_recv_with_fd(fd, m, sizeof(*m), 0, got_fd, &flags);

	/* A peer that exits with our message unread (a GO it never waited for) leaves
	 * ECONNRESET on this socket, reported once and ahead of what it sent before it went
	 * (its JMSG_ERROR): read on. */
	if (n < 0 && errno == ECONNRESET)
		n = al_recv_with_fd(fd, m, sizeof(*m), 0, got_fd, &flags);

	if (n == 0)
		return 0;
	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(*m) || (flags & (MSG_TRUNC | MSG_CTRUNC)))
		return -EBADMSG;
	m->text[sizeof(m->text) - 1] = '\0';
	return 1;
}

void jail_take_child_error(int sync_fd, struct al_error **err)
{
	struct pollfd p = {.fd = sync_fd, .events = POLLIN};
	struct jail_msg m;
	int fd = -1;

	/* A child that failed sent its reason before it exited: it is queued if it is gone. */
	while (poll(&p, 1, 0) > 0 && jail_msg_recv(sync_fd, &m, &fd) > 0) {
		if (fd >= 0)
			close(fd);
		fd = -1;
		if (m.type == JMSG_ERROR) {
			al_error_from(err, m.code, m.text);
			return;
		}
	}
}

void jail_child_fail(int sync_fd, struct al_error *err)
{
	struct jail_msg m = {.type = JMSG_ERROR};

	m.code = err ? err->code : EIO;
	if (err && err->msg)
		strncpy(m.text, err->msg, sizeof(m.text) - 1);
	else
		strcpy(m.text, "unknown error");
	jail_msg_send(sync_fd, &m, -1);
	_exit(AL_EXIT_SETUP);
}

/* Wait for the parent's message `want`; a JMSG_LINK on the way is noted. */
int jail_wait_msg_fd(struct jail_ctx *ctx, uint32_t want, int *fd_out, struct al_error **err)
{
	if (fd_out)
		*fd_out = -1;
	for (;;) {
		struct jail_msg m;
		int fd = -1, r = jail_msg_recv(ctx->sync_fd, &m, &fd);

		if (r > 0 && m.type == JMSG_LINK && want != JMSG_LINK) {
			if (fd >= 0)
				close(fd);
			ctx->link_ready = true;
			continue;
		}
		if (r <= 0 || m.type != want) {
			if (fd >= 0)
				close(fd);
			return al_error_set(err, r < 0 ? -r : EPIPE, "waiting for the parent");
		}
		if (fd_out)
			*fd_out = fd;
		else if (fd >= 0)
			close(fd);
		return 0;
	}
}

int jail_wait_msg(struct jail_ctx *ctx, uint32_t want, struct al_error **err)
{
	return jail_wait_msg_fd(ctx, want, NULL, err);
}

int jail_wait_link(struct jail_ctx *ctx, struct al_error **err)
{
	if (!ctx->net_link || ctx->link_ready)
		return 0;
	if (jail_wait_msg(ctx, JMSG_LINK, err) < 0)
		return -1;
	ctx->link_ready = true;
	return 0;
}
