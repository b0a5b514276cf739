/* SPDX-License-Identifier: MIT */
/* The name canonicalizer and matcher: see name.h. */
#include "net/name.h"
#include "common/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

static bool name_is_ldh(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static bool name_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool name_is_xdigit(char c)
{
	return name_is_digit(c) || (c >= 'a' && c <= 'f');
}

/* Fold one input byte to its canonical form, or refuse it. */
static int name_fold(unsigned char c, size_t off, char *outc, struct al_error **err)
{
	if (c == 0)
		return al_error_msg(err, EINVAL, "name contains a NUL byte at offset %zu", off);
	if (c >= 0x80)
		return al_error_msg(err, EINVAL,
				    "name contains the non-ASCII byte 0x%02x at offset %zu "
				    "(names must be ASCII; use the xn-- A-label form)",
				    c, off);
	if (c < 0x20 || c == 0x7f)
		return al_error_msg(err, EINVAL,
				    "name contains the control byte 0x%02x at offset %zu", c, off);
	if (c >= 'A' && c <= 'Z')
		c = (unsigned char)(c - 'A' + 'a');
	if (c != '.' && !name_is_ldh((char)c))
		return al_error_msg(
		    err, EINVAL, "name contains the invalid character '%c' at offset %zu", c, off);
	*outc = (char)c;
	return 0;
}

/* Check one label [s, s+n) of an already folded name. */
static int name_check_label(const char *s, size_t n, struct al_error **err)
{
	if (n == 0)
		return al_error_msg(err, EINVAL, "name has an empty label");
	if (n > NET_LABEL_MAX)
		return al_error_msg(err, EINVAL, "name has a label of %zu bytes (at most %d)", n,
				    NET_LABEL_MAX);
	if (s[0] == '-' || s[n - 1] == '-')
		return al_error_msg(err, EINVAL,
				    "name has a label that starts or ends with '-': '%.*s'", (int)n,
				    s);
	return 0;
}

/* Is the folded name a numeric spelling (an IP address in disguise)? */
static bool name_is_numeric(const char *s, size_t n)
{
	const char *last = memrchr(s, '.', n);
	struct in_addr ia;
	size_t i, ln;

	last = last ? last + 1 : s;
	ln = n - (size_t)(last - s);
	for (i = 0; i < ln && name_is_digit(last[i]); i++)
		;
	if (i == ln)
		return true;
	if (ln >= 2 && last[0] == '0' && last[1] == 'x') {
		for (i = 2; i < ln && name_is_xdigit(last[i]); i++)
			;
		if (i == ln)
			return true;
	}
	/* Belt and braces: whatever libc's legacy parser takes is an address. */
	return inet_aton(s, &ia) != 0;
}

int net_name_canon(const char *in, size_t len, char out[NET_NAME_MAX + 1], struct al_error **err)
{
	size_t n, i, start;
	int r;

	out[0] = '\0';
	if (len == 0)
		return al_error_msg(err, EINVAL, "empty name");
	n = len;
	if (in[n - 1] == '.')
		n--;
	if (n == 0)
		return al_error_msg(err, EINVAL, "name '.' has no labels");
	if (n > NET_NAME_MAX)
		return al_error_msg(err, EINVAL, "name is %zu bytes long (at most %d)", n,
				    NET_NAME_MAX);
	for (i = 0; i < n; i++) {
		r = name_fold((unsigned char)in[i], i, &out[i], err);
		if (r < 0) {
			out[0] = '\0';
			return r;
		}
	}
	out[n] = '\0';
	for (start = 0, i = 0; i <= n; i++) {
		if (i < n && out[i] != '.')
			continue;
		r = name_check_label(out + start, i - start, err);
		if (r < 0) {
			out[0] = '\0';
			return r;
		}
		start = i + 1;
	}
	if (name_is_numeric(out, n)) {
		r = al_error_msg(err, EINVAL,
				 "name '%s' is a numeric spelling of an address (IP literals "
				 "are not names)",
				 out);
		out[0] = '\0';
		return r;
	}
	return 0;
}

size_t net_name_labels(const char *canon_name)
{
	size_t n = 0;

	if (!canon_name[0])
		return 0;
	for (const char *p = canon_name; *p; p++)
		n += *p == '.';
	return n + 1;
}

/* Is base a proper label-wise suffix of name: every label of base equals the matching
 * trailing label of name, and name has at least one more label? Never a byte suffix. */
static bool name_has_label_suffix(const char *name, size_t nlen, const char *base, size_t blen)
{
	size_t ni = nlen, bi = blen;

	while (bi > 0) {
		size_t ne = ni, be = bi;

		while (bi > 0 && base[bi - 1] != '.')
			bi--;
		while (ni > 0 && name[ni - 1] != '.')
			ni--;
		if (be - bi != ne - ni || memcmp(base + bi, name + ni, be - bi) != 0)
			return false;
		if (bi == 0)
			break;
		if (ni == 0)
			return false; /* name ran out of labels first */
		bi--;
		ni--;
	}
	/* All labels of base matched; name must have at least one more label before them. */
	return ni >= 2 && name[ni - 1] == '.';
}

bool net_name_match(const char *canon_name, const char *canon_pattern)
{
	if (!canon_name || !canon_pattern || !canon_name[0] || !canon_pattern[0])
		return false;
	if (canon_pattern[0] != '*')
		return strchr(canon_pattern, '*') == NULL && strcmp(canon_name, canon_pattern) == 0;
	if (canon_pattern[1] != '.' || !canon_pattern[2] || strchr(canon_pattern + 1, '*'))
		return false;
	return net_name_under(canon_name, canon_pattern + 2);
}

bool net_name_under(const char *canon_name, const char *canon_base)
{
	if (!canon_name || !canon_base || !canon_base[0])
		return false;
	return name_has_label_suffix(canon_name, strlen(canon_name), canon_base,
				     strlen(canon_base));
}
