/* SPDX-License-Identifier: MIT */
/*
 * Listening sockets, made here (not by libmicrohttpd) so that errors name the
 * address and the Unix socket gets mode 0600 with no window: it is bound in a
 * fresh 0700 directory next to its final path, chmod'ed, then renamed into place.
 */
#include "api/api_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <libgen.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

/* "HOST:PORT" or "[V6]:PORT" -> host and port (heap copies). */
static int api_split_hostport(const char *spec, char **host, char **port, struct al_error **err)
{
	const char *colon;

	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (!close || close[1] != ':')
			return api_bad(err, "listen address '%s': expected [ADDR]:PORT", spec);
		*host = strndup(spec + 1, close - spec - 1);
		colon = close + 1;
	} else {
		colon = strrchr(spec, ':');
		if (!colon)
			return api_bad(err, "listen address '%s': expected ADDR:PORT", spec);
		*host = strndup(spec, colon - spec);
	}
	if (!*host)
		al_oom();
	*port = xstrdup(colon + 1);
	/* glibc takes a numeric service past 65535 modulo 2^16: 99999 would be port 34463. */
	if (!**port || strspn(*port, "0123456789") != strlen(*port) || strlen(*port) > 5 ||
	    atoi(*port) > 65535) {
		free(*host);
		free(*port);
		*host = *port = NULL; /* the caller frees them too */
		return api_bad(err, "listen address '%s': bad port (0 to 65535)", spec);
	}
	return 0;
}

int api_listen_tcp(const char *spec, int *out_fd, int *out_port, struct al_error **err)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
	_cleanup_free_ char *host = NULL, *port = NULL;
	_cleanup_close_ int fd = -1;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *ai = NULL;
	int one = 1, r;

	if (api_split_hostport(spec, &host, &port, err) < 0)
		return -EINVAL;
	r = getaddrinfo(host, port, &hints, &ai);
	if (r != 0)
		return api_bad(err, "listen address '%s': %s (a numeric address is required)", spec,
			       gai_strerror(r));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		return al_error_set(err, errno, "socket for '%s'", spec);
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	r = bind(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (r < 0)
		return al_error_set(err, errno, "bind '%s'", spec);
	if (listen(fd, 256) < 0)
		return al_error_set(err, errno, "listen '%s'", spec);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return al_error_set(err, errno, "getsockname '%s'", spec);
	*out_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
					     : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	*out_fd = TAKE_FD(fd);
	return 0;
}

static int api_fill_sun(struct sockaddr_un *sun, const char *path, struct al_error **err)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun->sun_path))
		return al_error_msg(err, ENAMETOOLONG, "unix socket path '%s'", path);
	strcpy(sun->sun_path, path);
	return 0;
}

/* An existing path: a stale socket is replaced, a live one or a non-socket is refused. */
static int api_check_existing(const char *path, struct al_error **err)
{
	struct sockaddr_un sun;
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : al_error_set(err, errno, "stat '%s'", path);
	if (!S_ISSOCK(st.st_mode))
		return al_error_msg(err, EEXIST, "'%s' exists and is not a socket", path);
	if (api_fill_sun(&sun, path, err) < 0)
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return al_error_set(err, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
		return al_error_msg(err, EADDRINUSE, "a server already listens on '%s'", path);
	return 0;
}

int api_listen_unix(const char *path, int *out_fd, struct al_error **err)
{
	_cleanup_free_ char *copy = xstrdup(path), *tmpdir = NULL, *tmp = NULL;
	_cleanup_close_ int fd = -1;
	struct sockaddr_un sun;
	int r;

	if (api_check_existing(path, err) < 0)
		return -EEXIST;
	tmpdir = xasprintf("%s/.airlock-api.XXXXXX", dirname(copy));
	if (!mkdtemp(tmpdir))
		return al_error_set(err, errno, "mkdtemp '%s'", tmpdir);
	tmp = xasprintf("%s/s", tmpdir);
	r = api_fill_sun(&sun, tmp, err);
	if (r < 0)
		goto out;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = al_error_set(err, errno, "socket");
		goto out;
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		r = al_error_set(err, errno, "bind '%s'", tmp);
		goto out;
	}
	if (chmod(tmp, 0600) < 0 || listen(fd, 256) < 0) {
		r = al_error_set(err, errno, "chmod/listen '%s'", tmp);
		goto out;
	}
	if (rename(tmp, path) < 0) {
		r = al_error_set(err, errno, "rename '%s' to '%s'", tmp, path);
		goto out;
	}
	*out_fd = TAKE_FD(fd);
	r = 0;
out:
	unlink(tmp);
	rmdir(tmpdir);
	return r;
}
