/* SPDX-License-Identifier: MIT */
/* Allocation that cannot fail: out of memory aborts, so error paths are for real failures. */
#ifndef AL_COMMON_XALLOC_H
#define AL_COMMON_XALLOC_H

#include <stddef.h>

__attribute__((noreturn)) void al_oom(void);
void *xzalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
