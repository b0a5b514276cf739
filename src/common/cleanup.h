/* SPDX-License-Identifier: MIT */
/*
 * Cleanup attributes for every fd and allocation. Initialise at declaration
 * (fd -1, pointer NULL); hand ownership out only with TAKE_FD / TAKE_PTR.
 */
#ifndef AL_COMMON_CLEANUP_H
#define AL_COMMON_CLEANUP_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>
#include <stdio.h>

static inline void al_freep(void *p)
{
	free(*(void **)p);
}

static inline void al_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
	*fd = -1;
}

static inline void al_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

static inline void al_closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

#ifdef __CPPCHECK__
/* scripts/lint defines __CPPCHECK__. cppcheck ignores the cleanup attribute and
 * would report every such variable as leaked; to it they are static, which it
 * never reports. */
#define _cleanup_free_ static
#define _cleanup_close_ static
#define _cleanup_fclose_ static
#define _cleanup_closedir_ static
#else
#define _cleanup_free_ __attribute__((cleanup(al_freep)))
#define _cleanup_close_ __attribute__((cleanup(al_closep)))
#define _cleanup_fclose_ __attribute__((cleanup(al_fclosep)))
#define _cleanup_closedir_ __attribute__((cleanup(al_closedirp)))
#endif

#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _fd = (fd);                                                                    \
		(fd) = -1;                                                                         \
		_fd;                                                                               \
	})

#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _p = (p);                                                            \
		(p) = NULL;                                                                        \
		_p;                                                                                \
	})

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
