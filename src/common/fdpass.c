/* SPDX-License-Identifier: MIT */
#include "common/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

union fd_control {
	char buf[CMSG_SPACE(AL_FDPASS_MAX * sizeof(int))];
	struct cmsghdr align;
};

ssize_t al_send_with_fds(int sock, const void *buf, size_t len, const int *fds, size_t n_fds,
			 int flags)
{
	union fd_control u;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (n_fds > AL_FDPASS_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (n_fds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, n_fds * sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n;
}

ssize_t al_send_with_fd(int sock, const void *buf, size_t len, int fd)
{
	return al_send_with_fds(sock, buf, len, &fd, fd >= 0, 0);
}

ssize_t al_recv_with_fds(int sock, void *buf, size_t len, int flags, int *fds, size_t max_fds,
			 size_t *n_fds, int *msg_flags)
{
	union fd_control u;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = CMSG_SPACE(
				(max_fds < AL_FDPASS_MAX ? max_fds : AL_FDPASS_MAX) * sizeof(int))};
	ssize_t n;

	*n_fds = 0;
	do
		n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return n;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (k > max_fds - *n_fds)
			k = max_fds - *n_fds; /* cannot happen: the buffer holds max_fds */
		memcpy(fds + *n_fds, CMSG_DATA(c), k * sizeof(int));
		*n_fds += k;
	}
	if (msg_flags)
		*msg_flags = mh.msg_flags;
	return n;
}

ssize_t al_recv_with_fd(int sock, void *buf, size_t len, int flags, int *fd, int *msg_flags)
{
	size_t got;
	ssize_t n = al_recv_with_fds(sock, buf, len, flags, fd, 1, &got, msg_flags);

	if (!got)
		*fd = -1;
	return n;
}
