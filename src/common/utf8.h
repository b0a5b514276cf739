/* SPDX-License-Identifier: MIT */
#ifndef AL_COMMON_UTF8_H
#define AL_COMMON_UTF8_H

#include <stddef.h>

/* A copy of buf with every invalid UTF-8 sequence (and NUL) replaced by U+FFFD. */
char *al_utf8_sanitize(const char *buf, size_t len, size_t *out_len);

#endif
