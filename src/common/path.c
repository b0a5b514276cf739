/* SPDX-License-Identifier: MIT */
#include "common/path.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#include <errno.h>
#include <string.h>

/* A short, printable copy of s[0..len) for a message. */
static void path_show(const char *s, size_t len, char *out, size_t size)
{
	size_t n = len < size - 4 ? len : size - 4, i;

	for (i = 0; i < n; i++)
		out[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
	strcpy(out + i, len > n ? "..." : "");
}

static int path_refuse(const char *in, size_t len, const char *what, const char *why,
		       struct al_error **err)
{
	char show[128];

	path_show(in, len, show, sizeof(show));
	return al_error_msg(err, EINVAL, "%s '%s' %s", what, show, why);
}

int al_path_normalize_len(const char *in, size_t len, const char *what, char **out,
			  struct al_error **err)
{
	const char *c, *end = in + len;
	char buf[AL_PATH_MAX];
	size_t n = 0;

	*out = NULL;
	if (!in || len == 0)
		return al_error_msg(err, EINVAL, "%s is empty", what);
	if (memchr(in, '\0', len))
		return path_refuse(in, len, what, "has a NUL byte", err);
	if (in[0] != '/')
		return path_refuse(in, len, what, "is not an absolute path", err);
	for (c = in; c < end;) {
		const char *e;
		size_t clen;

		if (*c == '/') {
			c++;
			continue;
		}
		e = memchr(c, '/', (size_t)(end - c));
		e = e ? e : end;
		clen = (size_t)(e - c);
		if ((clen == 1 && c[0] == '.') || (clen == 2 && c[0] == '.' && c[1] == '.'))
			return path_refuse(in, len, what, "has a '.' or '..' component", err);
		if (clen > AL_PATH_NAME_MAX)
			return path_refuse(in, len, what,
					   "has a component too long (over 255 bytes)", err);
		if (n + 1 + clen >= sizeof(buf))
			return path_refuse(in, len, what, "is too long (over 4095 bytes)", err);
		buf[n++] = '/';
		memcpy(buf + n, c, clen);
		n += clen;
		c = e;
	}
	if (n == 0)
		buf[n++] = '/';
	buf[n] = '\0';
	*out = xstrdup(buf);
	return 0;
}

int al_path_normalize(const char *in, const char *what, char **out, struct al_error **err)
{
	return al_path_normalize_len(in, in ? strlen(in) : 0, what, out, err);
}

bool al_path_is_under(const char *p, const char *root)
{
	size_t n = strlen(root);

	if (strcmp(root, "/") == 0)
		return p[0] == '/';
	return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

bool al_path_in_pseudo_fs(const char *p)
{
	static const char *const roots[] = {"/proc", "/sys", "/dev"};

	if (strcmp(p, "/") == 0)
		return true;
	if (al_path_is_under(p, "/dev/shm"))
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(roots); i++)
		if (al_path_is_under(p, roots[i]))
			return true;
	return false;
}
