/* SPDX-License-Identifier: MIT */
/*
 * glibc's _FORTIFY_SOURCE entry points, for the binaries linked with musl (scripts/musl-cc).
 * Debian's static archives linked into them (libjansson.a; for airlock-gateway-lite also
 * libidn2.a, libpsl.a, libunistring.a and libpcre2-8.a) were compiled against glibc with
 * fortification and call these; musl has no fortify layer. Each checks what glibc checks
 * (the destination's real size against the length it was told) and aborts on overflow,
 * as glibc's do.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int __vsnprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, va_list ap);
int __snprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, ...);
char *__strncpy_chk(char *dst, const char *src, size_t len, size_t dstlen);
void *__memcpy_chk(void *dst, const void *src, size_t len, size_t dstlen);
void *__memmove_chk(void *dst, const void *src, size_t len, size_t dstlen);

int __vsnprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, va_list ap)
{
	(void)flag;
	if (slen < maxlen)
		abort();
	return vsnprintf(s, maxlen, fmt, ap);
}

int __snprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = __vsnprintf_chk(s, maxlen, flag, slen, fmt, ap);
	va_end(ap);
	return r;
}

char *__strncpy_chk(char *dst, const char *src, size_t len, size_t dstlen)
{
	if (dstlen < len)
		abort();
	return strncpy(dst, src, len);
}

void *__memcpy_chk(void *dst, const void *src, size_t len, size_t dstlen)
{
	if (dstlen < len)
		abort();
	return memcpy(dst, src, len);
}

void *__memmove_chk(void *dst, const void *src, size_t len, size_t dstlen)
{
	if (dstlen < len)
		abort();
	return memmove(dst, src, len);
}
