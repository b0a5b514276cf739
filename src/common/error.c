/* SPDX-License-Identifier: MIT */
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *vformat(const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0)
		al_oom();
	return s;
}

int al_error_set(struct al_error **err, int errnum, const char *fmt, ...)
{
	struct al_error *e;
	va_list ap;
	char *msg;

	if (errnum <= 0)
		errnum = EIO;
	if (!err)
		return -errnum;
	va_start(ap, fmt);
	msg = vformat(fmt, ap);
	va_end(ap);
	e = xzalloc(sizeof(*e));
	e->code = errnum;
	if (errnum != 0 && strcmp(fmt, "%s") != 0) {
		e->msg = xasprintf("%s: %s", msg, strerror(errnum));
		free(msg);
	} else {
		e->msg = msg;
	}
	al_error_free(*err);
	*err = e;
	return -errnum;
}

int al_error_msg(struct al_error **err, int errnum, const char *fmt, ...)
{
	va_list ap;
	char *msg;
	int r;

	if (!err)
		return -(errnum > 0 ? errnum : EIO);
	va_start(ap, fmt);
	msg = vformat(fmt, ap);
	va_end(ap);
	r = al_error_from(err, errnum, msg);
	free(msg);
	return r;
}

int al_error_from(struct al_error **err, int errnum, const char *msg)
{
	struct al_error *e;

	if (errnum <= 0)
		errnum = EIO;
	if (!err)
		return -errnum;
	e = xzalloc(sizeof(*e));
	e->code = errnum;
	e->msg = xstrdup(msg);
	al_error_free(*err);
	*err = e;
	return -errnum;
}

int al_error_wrap(struct al_error **err, const char *fmt, ...)
{
	va_list ap;
	char *ctx, *msg;

	if (!err || !*err)
		return -EIO;
	va_start(ap, fmt);
	ctx = vformat(fmt, ap);
	va_end(ap);
	msg = xasprintf("%s: %s", ctx, (*err)->msg);
	free(ctx);
	free((*err)->msg);
	(*err)->msg = msg;
	return -(*err)->code;
}

void al_error_free(struct al_error *e)
{
	if (!e)
		return;
	free(e->msg);
	free(e);
}
