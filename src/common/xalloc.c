/* SPDX-License-Identifier: MIT */
#include "common/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void al_oom(void)
{
	static const char msg[] = "airlock: out of memory\n";

	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	abort();
}

void *xzalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	if (!p)
		al_oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		al_oom();
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		al_oom();
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (r < 0)
		al_oom();
	return s;
}
