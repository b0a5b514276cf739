/* SPDX-License-Identifier: MIT */
/* Bytes with file descriptors beside them (SCM_RIGHTS), over a Unix socket. */
#ifndef AL_COMMON_FDPASS_H
#define AL_COMMON_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

#define AL_FDPASS_MAX 4 /* fds in one message, at most */

/* sendmsg(buf, len, flags | MSG_NOSIGNAL) with fds[0..n_fds) alongside; EINTR is retried.
 * What sendmsg returns (-1 with EINVAL for more than AL_FDPASS_MAX fds). */
ssize_t al_send_with_fds(int sock, const void *buf, size_t len, const int *fds, size_t n_fds,
			 int flags);
/* The same with one fd, or none when fd < 0. */
ssize_t al_send_with_fd(int sock, const void *buf, size_t len, int fd);
/* recvmsg into buf with flags (MSG_CMSG_CLOEXEC is added); EINTR is retried. Passed fds land
 * in fds[0..*n_fds), at most max_fds (<= AL_FDPASS_MAX; more come truncated, the kernel
 * closes them, and MSG_CTRUNC says so); *msg_flags (if not NULL) gets the message's flags
 * (a truncated message or control data shows there). What recvmsg returns. */
ssize_t al_recv_with_fds(int sock, void *buf, size_t len, int flags, int *fds, size_t max_fds,
			 size_t *n_fds, int *msg_flags);
/* The same with at most one fd, in *fd (-1: none came). */
ssize_t al_recv_with_fd(int sock, void *buf, size_t len, int flags, int *fd, int *msg_flags);

#endif
