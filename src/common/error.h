/* SPDX-License-Identifier: MIT */
/*
 * The error rule (docs/design/errors.md): a fallible function returns int (<0)
 * or NULL and takes a final `struct al_error **err`. The failure site raises
 * the error once, passing errno inside the return expression:
 *
 *	return al_error_set(err, errno, "open '%s'", path);
 *
 * Callers add context with al_error_wrap() and drop a tolerated error with
 * al_error_free(). Library code never prints.
 */
#ifndef AL_COMMON_ERROR_H
#define AL_COMMON_ERROR_H

#include <airlock/airlock.h>

int al_error_set(struct al_error **err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for a logical error (bad input, not found, ...): errnum is its category and
 * strerror is not appended. */
int al_error_msg(struct al_error **err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int al_error_wrap(struct al_error **err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Rebuild an error from a code and a complete message (e.g. received over a pipe). */
int al_error_from(struct al_error **err, int errnum, const char *msg);

static inline void al_error_freep(struct al_error **e)
{
	al_error_free(*e);
	*e = NULL;
}
#define _cleanup_error_ __attribute__((cleanup(al_error_freep)))

#endif
