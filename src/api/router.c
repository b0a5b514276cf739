/* SPDX-License-Identifier: MIT */
/*
 * The router: tables of {method, pattern, handler}. A pattern is a path whose
 * segments are literals or {name}; a {name} matches exactly one non-empty
 * segment. Several tables (native, Vercel-compatible, ...) plug into one router.
 */
#include "api/api_internal.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

void api_router_add(struct api_router *rt, const struct api_route *table, size_t n)
{
	if (rt->n_tables >= API_MAX_TABLES)
		abort(); /* a programming error: raise API_MAX_TABLES */
	rt->tables[rt->n_tables] = table;
	rt->sizes[rt->n_tables] = n;
	rt->n_tables++;
}

void api_params_clear(struct api_params *p)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		free(p->values[i]);
	memset(p, 0, sizeof(*p));
}

/* Matches path against pattern; fills p on success (p is cleared on failure). */
static bool api_pattern_match(const char *pattern, const char *path, struct api_params *p)
{
	const char *pp = pattern, *sp = path;

	api_params_clear(p);
	while (*pp && *sp) {
		if (*pp != '/' || *sp != '/')
			goto fail;
		pp++, sp++;
		size_t plen = strcspn(pp, "/"), slen = strcspn(sp, "/");

		if (plen >= 2 && pp[0] == '{' && pp[plen - 1] == '}') {
			if (slen == 0 || p->n >= API_MAX_PARAMS)
				goto fail;
			p->names[p->n] = pp + 1;
			p->name_lens[p->n] = plen - 2;
			p->values[p->n] = strndup(sp, slen);
			if (!p->values[p->n])
				al_oom();
			p->n++;
		} else if (plen != slen || memcmp(pp, sp, plen) != 0) {
			goto fail;
		}
		pp += plen, sp += slen;
	}
	if (*pp == '\0' && *sp == '\0')
		return true;
fail:
	api_params_clear(p);
	return false;
}

static void api_allow_append(char **allow, const char *method)
{
	char *s;

	if (*allow && strstr(*allow, method))
		return;
	s = *allow ? xasprintf("%s, %s", *allow, method) : xstrdup(method);
	free(*allow);
	*allow = s;
}

enum api_match api_router_match(const struct api_router *rt, const char *method, const char *path,
				const struct api_route **route, struct api_params *params,
				char **allow)
{
	bool path_known = false;
	size_t t, i;

	*allow = NULL;
	for (t = 0; t < rt->n_tables; t++) {
		for (i = 0; i < rt->sizes[t]; i++) {
			const struct api_route *r = &rt->tables[t][i];

			if (!api_pattern_match(r->pattern, path, params))
				continue;
			if (strcmp(r->method, method) == 0) {
				free(*allow);
				*allow = NULL;
				*route = r;
				return API_MATCH_OK;
			}
			path_known = true;
			api_allow_append(allow, r->method);
			api_params_clear(params);
		}
	}
	return path_known ? API_MATCH_NO_METHOD : API_MATCH_NO_PATH;
}
