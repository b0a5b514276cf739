/* SPDX-License-Identifier: MIT */
#include "common/fdpass.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Does fd refer to the same open file as want? */
static int same_file(int fd, int want)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && fstat(want, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

int main(void)
{
	int sp[2], p[2], fds[AL_FDPASS_MAX], got_fds[AL_FDPASS_MAX], fd = -1, flags = 0;
	char buf[16];
	size_t got = 0;
	ssize_t n;

	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) == 0 && pipe(p) == 0, "set-up");

	n = al_send_with_fd(sp[0], "one", 3, p[0]);
	CHECK(n == 3, "one fd sent");
	n = al_recv_with_fd(sp[1], buf, sizeof(buf), 0, &fd, &flags);
	CHECK(n == 3 && memcmp(buf, "one", 3) == 0 && fd >= 0 && same_file(fd, p[0]),
	      "one fd received with its bytes");
	CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0, "received close-on-exec");
	close(fd);

	n = al_send_with_fd(sp[0], "none", 4, -1);
	n = al_recv_with_fd(sp[1], buf, sizeof(buf), 0, &fd, NULL);
	CHECK(n == 4 && fd == -1, "bytes without an fd: fd is -1");

	for (int i = 0; i < AL_FDPASS_MAX; i++)
		fds[i] = i % 2 ? p[1] : p[0];
	n = al_send_with_fds(sp[0], "four", 4, fds, AL_FDPASS_MAX, MSG_DONTWAIT);
	CHECK(n == 4, "four fds sent");
	n = al_recv_with_fds(sp[1], buf, sizeof(buf), 0, got_fds, AL_FDPASS_MAX, &got, &flags);
	CHECK(n == 4 && got == AL_FDPASS_MAX && !(flags & MSG_CTRUNC), "four fds received");
	for (size_t i = 0; i < got; i++) {
		CHECK(same_file(got_fds[i], fds[i]), "fd %zu in its place", i);
		close(got_fds[i]);
	}

	n = al_send_with_fds(sp[0], "four", 4, fds, AL_FDPASS_MAX, 0);
	n = al_recv_with_fd(sp[1], buf, sizeof(buf), 0, &fd, &flags);
	CHECK(n == 4 && fd >= 0 && (flags & MSG_CTRUNC), "room for one of four: one, MSG_CTRUNC");
	close(fd);

	errno = 0;
	CHECK(al_send_with_fds(sp[0], "x", 1, fds, AL_FDPASS_MAX + 1, 0) < 0 && errno == EINVAL,
	      "more than AL_FDPASS_MAX fds refused");
	return tap_done();
}
