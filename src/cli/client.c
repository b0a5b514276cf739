/* SPDX-License-Identifier: MIT */
#include "cli/client.h"
#include "common/xalloc.h"

#include <airlock/airlock.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

static char *first_token(void)
{
	const char *dir = getenv("AIRLOCK_STATE_DIR");
	char *path = xasprintf("%s/tokens", dir && *dir ? dir : "/var/lib/airlock");
	char line[512], tok[256];
	FILE *f = fopen(path, "r");

	free(path);
	while (f && fgets(line, sizeof(line), f))
		if (line[0] != '#' && sscanf(line, "%255s", tok) == 1) {
			fclose(f);
			return xstrdup(tok);
		}
	if (f)
		fclose(f);
	return NULL;
}

int client_init(struct client *c, int argc, char **argv)
{
	const char *e;
	int out = 1;

	memset(c, 0, sizeof(*c));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char **slot = strcmp(a, "--url") == 0	   ? &c->url
			      : strcmp(a, "--socket") == 0 ? &c->socket
			      : strcmp(a, "--token") == 0  ? &c->token
							   : NULL;
		if (strcmp(a, "--") == 0) {
			while (i < argc)
				argv[out++] = argv[i++];
			break;
		}
		if (slot) {
			if (i + 1 >= argc) {
				fprintf(stderr, "airlock: %s needs a value\n", a);
				return -1;
			}
			free(*slot);
			*slot = xstrdup(argv[++i]);
		} else if (strcmp(a, "--json") == 0) {
			c->json = true;
		} else {
			argv[out++] = argv[i];
		}
	}
	argv[out] = NULL;
	if (!c->url && (e = getenv("AIRLOCK_URL")) && *e)
		c->url = xstrdup(e);
	if (!c->socket && (e = getenv("AIRLOCK_SOCKET")) && *e)
		c->socket = xstrdup(e);
	if (!c->token && (e = getenv("AIRLOCK_TOKEN")) && *e)
		c->token = xstrdup(e);
	if (!c->token)
		c->token = first_token();
	if (!c->url)
		c->url = xstrdup("http://127.0.0.1:7070");
	if (!c->token) {
		fputs(
		    "airlock: no API token: pass --token, set AIRLOCK_TOKEN, or run as a user who "
		    "can read /var/lib/airlock/tokens\n",
		    stderr);
		return -1;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	return out;
}

void client_free(struct client *c)
{
	free(c->url);
	free(c->socket);
	free(c->token);
}

void client_resp_free(struct client_resp *r)
{
	free(r->body);
	r->body = NULL;
}

static size_t collect(char *p, size_t sz, size_t n, void *ctx)
{
	struct client_resp *r = ctx;

	r->body = xrealloc(r->body, r->len + sz * n + 1);
	memcpy(r->body + r->len, p, sz * n);
	r->len += sz * n;
	r->body[r->len] = '\0';
	return sz * n;
}

static CURL *prepare(struct client *c, const char *method, const char *path,
		     struct curl_slist **hdrs, const char *content_type)
{
	CURL *h = curl_easy_init();
	char *url = xasprintf("%s%s", c->url, path),
	     *auth = xasprintf("Authorization: Bearer %s", c->token);

	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (c->socket)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	*hdrs = curl_slist_append(NULL, auth);
	if (content_type) {
		char *ct = xasprintf("Content-Type: %s", content_type);
		*hdrs = curl_slist_append(*hdrs, ct);
		free(ct);
	}
	*hdrs = curl_slist_append(*hdrs, "Expect:");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	free(url);
	free(auth);
	return h;
}

int client_call(struct client *c, const char *method, const char *path, const void *body,
		size_t body_len, const char *content_type, struct client_resp *out)
{
	struct curl_slist *hdrs = NULL;
	CURL *h = prepare(c, method, path, &hdrs, body ? content_type : NULL);
	CURLcode rc;

	memset(out, 0, sizeof(*out));
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	} else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
	}
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	if (rc != CURLE_OK) {
		fprintf(stderr,
			"airlock: cannot reach airlockd at %s: %s (is `airlock serve` running?)\n",
			c->socket ? c->socket : c->url, curl_easy_strerror(rc));
		client_resp_free(out);
		return -1;
	}
	return 0;
}

struct stream_ctx {
	char *buf;
	size_t len;
	int (*fn)(void *ctx, json_t *line);
	void *ctx;
	int stopped;
};

static size_t stream_write(char *p, size_t sz, size_t n, void *arg)
{
	struct stream_ctx *s = arg;
	char *nl;

	s->buf = xrealloc(s->buf, s->len + sz * n + 1);
	memcpy(s->buf + s->len, p, sz * n);
	s->len += sz * n;
	s->buf[s->len] = '\0';
	while (!s->stopped && (nl = memchr(s->buf, '\n', s->len))) {
		json_t *j;

		*nl = '\0';
		j = json_loads(s->buf, 0, NULL);
		if (j && json_is_object(json_object_get(j, "error"))) {
			fprintf(stderr, "airlock: %s\n",
				json_string_value(
				    json_object_get(json_object_get(j, "error"), "message"))
				    ?: "error");
			s->stopped = 1;
		} else if (j && s->fn(s->ctx, j) < 0) {
			s->stopped = 1;
		}
		json_decref(j);
		s->len -= (size_t)(nl + 1 - s->buf);
		memmove(s->buf, nl + 1, s->len);
	}
	return s->stopped ? 0 : sz * n;
}

int client_stream(struct client *c, const char *method, const char *path, const char *json_body,
		  int (*fn)(void *ctx, json_t *line), void *ctx, long *status)
{
	struct stream_ctx s = {.fn = fn, .ctx = ctx};
	struct curl_slist *hdrs = NULL;
	CURL *h = prepare(c, method, path, &hdrs, json_body ? "application/json" : NULL);
	CURLcode rc;

	if (json_body)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stream_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	if (*status >= 400 && s.len) {
		json_t *j = json_loads(s.buf, 0, NULL), *e = json_object_get(j, "error");
		fprintf(stderr, "airlock: %s\n",
			json_string_value(json_object_get(e, "message")) ?: s.buf);
		json_decref(j);
	}
	free(s.buf);
	if (rc != CURLE_OK && !s.stopped) {
		fprintf(stderr, "airlock: cannot reach airlockd at %s: %s\n",
			c->socket ? c->socket : c->url, curl_easy_strerror(rc));
		return -1;
	}
	return 0;
}

int client_fail(const struct client_resp *r, const char *what)
{
	json_t *j = r->body ? json_loads(r->body, 0, NULL) : NULL;
	json_t *e = json_object_get(j, "error");
	const char *msg = json_string_value(json_object_get(e, "message"));

	fprintf(stderr, "airlock: %s: %s (HTTP %ld)\n", what, msg ? msg : "request failed",
		r->status);
	json_decref(j);
	return r->status == 404 ? 1 : r->status == 400 ? AL_EXIT_USAGE : 1;
}

char *client_escape(const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0), *r = xstrdup(e ? e : "");

	curl_free(e);
	return r;
}
