/* SPDX-License-Identifier: MIT */
/* Bytes with at most one file descriptor beside them (SCM_RIGHTS), over a Unix socket. */
#ifndef AL_COMMON_FDPASS_H
#define AL_COMMON_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* sendmsg(buf, len) with fd alongside when fd >= 0; EINTR is retried. What sendmsg returns. */
ssize_t al_send_with_fd(int sock, const void *buf, size_t len, int fd);
/* recvmsg into buf with flags (MSG_CMSG_CLOEXEC is added); EINTR is retried. A passed fd
 * lands in *fd (-1: none came); *msg_flags (if not NULL) gets the message's flags (a
 * truncated message or control data shows there). What recvmsg returns. */
ssize_t al_recv_with_fd(int sock, void *buf, size_t len, int flags, int *fd, int *msg_flags);

#endif
