/* SPDX-License-Identifier: MIT */
/*
 * Bearer tokens. The tokens file has one "TOKEN TEAM" pair per line; blank lines
 * and lines starting with '#' are ignored. A presented token is compared with
 * every known token in constant time (no early exit on the first difference,
 * no early exit on a match), so timing reveals neither contents nor position.
 */
#include "api/api_internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct api_token {
	char *token;
	size_t len;
	char *team;
};

struct api_auth {
	struct api_token *v;
	size_t n;
};

static bool api_auth_word_ok(const char *s)
{
	for (; *s; s++)
		if (!isgraph((unsigned char)*s))
			return false;
	return true;
}

static int api_auth_parse_line(struct api_auth *a, char *line, unsigned lineno, const char *path,
			       struct al_error **err)
{
	char *save = NULL, *tok, *team, *extra;

	line[strcspn(line, "\r\n")] = '\0';
	tok = strtok_r(line, " \t", &save);
	if (!tok || tok[0] == '#')
		return 0;
	team = strtok_r(NULL, " \t", &save);
	extra = strtok_r(NULL, " \t", &save);
	if (!team || (extra && extra[0] != '#')) {
		al_error_from(err, EINVAL, "expected 'TOKEN TEAM'");
		return al_error_wrap(err, "tokens file %s:%u", path, lineno);
	}
	if (!api_auth_word_ok(tok) || !api_auth_word_ok(team)) {
		al_error_from(err, EINVAL, "non-printable character");
		return al_error_wrap(err, "tokens file %s:%u", path, lineno);
	}
	a->v = xrealloc(a->v, (a->n + 1) * sizeof(*a->v));
	a->v[a->n].token = xstrdup(tok);
	a->v[a->n].len = strlen(tok);
	a->v[a->n].team = xstrdup(team);
	a->n++;
	return 0;
}

int api_auth_load(const char *path, struct api_auth **out, struct al_error **err)
{
	_cleanup_fclose_ FILE *f = NULL;
	_cleanup_free_ char *line = NULL;
	struct api_auth *a;
	size_t cap = 0;
	unsigned lineno = 0;

	if (!path)
		return al_error_from(err, EINVAL, "no tokens file given");
	f = fopen(path, "re");
	if (!f)
		return al_error_set(err, errno, "open tokens file '%s'", path);
	a = xzalloc(sizeof(*a));
	while (getline(&line, &cap, f) >= 0) {
		if (api_auth_parse_line(a, line, ++lineno, path, err) < 0) {
			api_auth_free(a);
			return -EINVAL;
		}
	}
	if (ferror(f)) {
		api_auth_free(a);
		return al_error_msg(err, EIO, "read tokens file '%s'", path);
	}
	*out = a;
	return 0;
}

int api_auth_load_plain(const char *path, const char *who, struct api_auth **out,
			struct al_error **err)
{
	_cleanup_fclose_ FILE *f = NULL;
	_cleanup_free_ char *line = NULL;
	struct api_auth *a;
	size_t cap = 0;
	unsigned lineno = 0;

	f = fopen(path, "re");
	if (!f)
		return al_error_set(err, errno, "open token file '%s'", path);
	a = xzalloc(sizeof(*a));
	while (getline(&line, &cap, f) >= 0) {
		char *save = NULL, *tok, *extra;

		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		tok = strtok_r(line, " \t", &save);
		if (!tok || tok[0] == '#')
			continue;
		extra = strtok_r(NULL, " \t", &save);
		if ((extra && extra[0] != '#') || !api_auth_word_ok(tok)) {
			api_auth_free(a);
			return al_error_msg(err, EINVAL, "token file %s:%u: expected one token",
					    path, lineno);
		}
		a->v = xrealloc(a->v, (a->n + 1) * sizeof(*a->v));
		a->v[a->n].token = xstrdup(tok);
		a->v[a->n].len = strlen(tok);
		a->v[a->n].team = xstrdup(who);
		a->n++;
	}
	if (!a->n) {
		api_auth_free(a);
		return al_error_msg(err, EINVAL, "token file '%s' holds no token", path);
	}
	*out = a;
	return 0;
}

bool api_auth_shared(const struct api_auth *a, const struct api_auth *b)
{
	for (size_t i = 0; i < a->n; i++)
		if (api_auth_team(b, a->v[i].token, a->v[i].len))
			return true;
	return false;
}

/* 0 when equal; looks at every byte of the stored token whatever the input. */
static unsigned api_auth_cmp(const struct api_token *t, const char *s, size_t len)
{
	volatile unsigned diff = (unsigned)(t->len ^ len) | (len == 0);
	size_t i;

	for (i = 0; i < t->len; i++)
		diff |= (unsigned char)t->token[i] ^ (unsigned char)(len ? s[i % len] : 0);
	return diff;
}

const char *api_auth_team(const struct api_auth *a, const char *token, size_t len)
{
	const char *team = NULL;
	size_t i;

	for (i = 0; i < a->n; i++) {
		unsigned d = api_auth_cmp(&a->v[i], token, len);
		/* Branch-free select of the first match. */
		uintptr_t mask = (uintptr_t)0 - (uintptr_t)(d == 0 && team == NULL);

		team = (const char *)(((uintptr_t)a->v[i].team & mask) | ((uintptr_t)team & ~mask));
	}
	return team;
}

const char *api_auth_header(const struct api_auth *a, const char *value)
{
	size_t len;

	if (!value || strncasecmp(value, "Bearer ", 7) != 0)
		return NULL;
	value += 7;
	while (*value == ' ')
		value++;
	len = strlen(value);
	while (len && (value[len - 1] == ' ' || value[len - 1] == '\t'))
		len--;
	if (!len)
		return NULL;
	return api_auth_team(a, value, len);
}

void api_auth_free(struct api_auth *a)
{
	size_t i;

	if (!a)
		return;
	for (i = 0; i < a->n; i++) {
		explicit_bzero(a->v[i].token, a->v[i].len);
		free(a->v[i].token);
		free(a->v[i].team);
	}
	free(a->v);
	free(a);
}
