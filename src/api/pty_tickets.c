/* SPDX-License-Identifier: MIT */
/*
 * The tickets of interactive PTY sessions (docs/pty.md): a random token, handed out by
 * POST .../interactive (or /v1/sandboxes/{id}/pty) to a caller with an API token, that
 * opens one WebSocket to that sandbox of that team within API_PTY_TICKET_MS (or airlockd's
 * --pty-ticket-ms). A ticket is
 * spent when presented, whatever the outcome: a second use, an expired one or one
 * presented for another sandbox is refused.
 */
#include "api/api_internal.h"
#include "common/xalloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct ticket {
	char token[API_PTY_TOKEN_LEN + 1];
	const char *team; /* the auth table's string: lives as long as the api */
	char sbx[API_PTY_ID_MAX + 1];
	uint64_t expires_ms;
};

struct api_pty {
	pthread_mutex_t mu;
	uint64_t ttl_ms;
	struct ticket v[API_PTY_TICKETS_MAX];
	size_t n;
};

uint64_t api_pty_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct api_pty *api_pty_new(uint64_t ttl_ms)
{
	struct api_pty *p = xzalloc(sizeof(*p));

	p->ttl_ms = ttl_ms ? ttl_ms : API_PTY_TICKET_MS;
	pthread_mutex_init(&p->mu, NULL);
	return p;
}

uint64_t api_pty_ttl(const struct api_pty *p)
{
	return p->ttl_ms;
}

void api_pty_free(struct api_pty *p)
{
	if (!p)
		return;
	pthread_mutex_destroy(&p->mu);
	explicit_bzero(p->v, sizeof(p->v));
	free(p);
}

static void drop(struct api_pty *p, size_t i)
{
	p->v[i] = p->v[--p->n];
	explicit_bzero(&p->v[p->n], sizeof(p->v[p->n]));
}

int api_pty_ticket_new(struct api_pty *p, const char *team, const char *sbx,
		       char token[API_PTY_TOKEN_LEN + 1])
{
	uint8_t rnd[API_PTY_TOKEN_LEN / 2];
	uint64_t now = api_pty_now_ms();
	struct ticket *t;

	if (strlen(sbx) > API_PTY_ID_MAX)
		return -EINVAL;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(token + 2 * i, 3, "%02x", rnd[i]);
	pthread_mutex_lock(&p->mu);
	for (size_t i = p->n; i-- > 0;)
		if (p->v[i].expires_ms <= now)
			drop(p, i);
	if (p->n == API_PTY_TICKETS_MAX) {
		pthread_mutex_unlock(&p->mu);
		return -EAGAIN;
	}
	t = &p->v[p->n++];
	memcpy(t->token, token, API_PTY_TOKEN_LEN + 1);
	t->team = team;
	snprintf(t->sbx, sizeof(t->sbx), "%s", sbx);
	t->expires_ms = now + p->ttl_ms;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* Compares every byte whatever the first difference. */
static bool same(const char *a, const char *b, size_t n)
{
	unsigned char d = 0;

	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

int api_pty_ticket_take(struct api_pty *p, const char *token, const char *sbx, const char **team)
{
	uint64_t now = api_pty_now_ms();
	int r = -ENOENT;

	if (!token || strlen(token) != API_PTY_TOKEN_LEN)
		return -ENOENT;
	pthread_mutex_lock(&p->mu);
	for (size_t i = 0; i < p->n; i++) {
		if (!same(p->v[i].token, token, API_PTY_TOKEN_LEN))
			continue;
		if (p->v[i].expires_ms <= now)
			r = -ETIMEDOUT;
		else if (strcmp(p->v[i].sbx, sbx) != 0)
			r = -EXDEV;
		else
			r = 0, *team = p->v[i].team;
		drop(p, i); /* spent, whatever the outcome */
		break;
	}
	pthread_mutex_unlock(&p->mu);
	return r;
}
