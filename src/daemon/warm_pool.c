/* SPDX-License-Identifier: MIT */
/*
 * The warm pool: sandboxes started ahead of need (internal.h, "The warm pool").
 * A thread keeps opts.pool of them ready through the ordinary create path,
 * under the team DM_POOL_TEAM, which no API token has; dm_sandbox_create
 * hands one out (registry.c, pool_take). They are never shown, never run a
 * command before being taken, and a daemon that restarts stops any it finds
 * rather than reuse them.
 */
#include "daemon/internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* A pooled sandbox is recycled after this long unused (its clock started at spawn). */
#define POOL_IDLE_MS (60ull * 60 * 1000)
/* A refill waits this long after a take: the new owner's first commands (the usual next
 * step) do not share the CPU with the next sandbox's set-up. */
#define POOL_REFILL_DELAY_MS 20

/* The workdirs a pool is kept for (the agent's Landlock rules are fixed at its start): the
 * native default and the Vercel API's. Each gets opts.pool sandboxes. */
static const char *const pool_workdirs[] = {"/workspace", "/vercel/sandbox"};

/* The settings a pool's sandboxes are made with: the defaults, with that workdir. */
static void pool_spec(struct jail_spec *s, const char *workdir)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->workdir, sizeof(s->workdir), "%s", workdir);
	jail_spec_defaults(s);
}

bool dm_pool_fits(const struct dm_create *c)
{
	struct jail_spec pool;

	for (size_t i = 0; i < ARRAY_SIZE(pool_workdirs); i++) {
		pool_spec(&pool, pool_workdirs[i]);
		if (jail_spec_same_root(&pool, &c->spec))
			return true;
	}
	return false;
}

size_t dm_pool_ready(struct daemon *d, const char *workdir)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_sbxs; i++)
		n += dm_sbx_pooled(d->sbxs[i]) && strcmp(d->sbxs[i]->workdir, workdir) == 0;
	return n;
}

void *dm_pool_main(void *arg)
{
	struct daemon *d = arg;
	struct dm_create c = {.timeout_ms = POOL_IDLE_MS};

	pthread_mutex_lock(&d->mu);
	while (!d->closing) {
		struct timespec ts;
		const char *need = NULL;

		for (size_t i = 0; i < ARRAY_SIZE(pool_workdirs) && !need; i++)
			if (dm_pool_ready(d, pool_workdirs[i]) < d->opts.pool)
				need = pool_workdirs[i];
		if (need) {
			struct al_error *err = NULL;
			char *id = NULL;

			pthread_mutex_unlock(&d->mu);
			nanosleep(&(struct timespec){.tv_nsec = POOL_REFILL_DELAY_MS * 1000000L},
				  NULL);
			pool_spec(&c.spec, need);
			if (__atomic_load_n(&d->closing, __ATOMIC_RELAXED)) {
				pthread_mutex_lock(&d->mu);
				continue; /* the daemon is closing: no more sandboxes */
			}
			if (dm_sandbox_create(d, DM_POOL_TEAM, &c, &id, &err) < 0) {
				dm_log_err(d, &err, "pool");
				nanosleep(&(struct timespec){.tv_sec = 1},
					  NULL); /* no busy retry */
			}
			free(id);
			pthread_mutex_lock(&d->mu);
			continue;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&d->pool_cv, &d->mu, &ts);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}
