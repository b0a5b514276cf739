/* SPDX-License-Identifier: MIT */
#include "common/utf8.h"
#include "common/xalloc.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, surrogates, > U+10FFFF). */
static size_t valid_seq(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n, i;
	uint32_t cp;

	if (c >= 0x01 && c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	if (left < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

char *al_utf8_sanitize(const char *buf, size_t len, size_t *out_len)
{
	const unsigned char *s = (const unsigned char *)buf;
	char *out = xzalloc(len * 3 + 1);
	size_t i = 0, o = 0;

	while (i < len) {
		size_t n = valid_seq(s + i, len - i);

		if (n) {
			memcpy(out + o, s + i, n);
			o += n;
			i += n;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	*out_len = o;
	return out;
}
