/* SPDX-License-Identifier: MIT */
/*
 * airlockd's counters for GET /metrics (docs/metrics.md). They live in struct daemon (its
 * field m); the hot paths bump them with relaxed atomics, without a lock of their own;
 * a scrape reads them (metrics.c) and the sandboxes' cgroups and egress logs
 * (metrics_read.c). Declarations of both files are in internal.h.
 */
#ifndef AL_DAEMON_METRICS_H
#define AL_DAEMON_METRICS_H

#include <airlock/airlock.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* How a create or a stop ended: done, refused as the client's (a bad request, a limit,
 * no such sandbox), or failed on our side. */
enum dm_outcome { DM_OUTCOME_OK, DM_OUTCOME_REJECTED, DM_OUTCOME_FAILED, DM_OUTCOME_N };

#define DM_HIST_MAX 14 /* bounds of one histogram, at most */
#define DM_REASONS (AL_REASON_INTERRUPTED + 1)
#define DM_EGRESS_KINDS 64 /* distinct (verdict, reason) pairs kept; more count as "other" */

/* A histogram of durations: counts[i] below bound i (and above bound i-1), counts[n] above
 * the last; the sum in microseconds. */
struct dm_hist {
	uint64_t counts[DM_HIST_MAX + 1];
	uint64_t sum_us;
};

struct dm_egress_kind {
	char verdict[8];
	char reason[40];
	uint64_t n;
};

struct dm_metrics {
	int64_t start_ms; /* the daemon's start (epoch ms) */
	uint64_t creates[DM_OUTCOME_N];
	struct dm_hist create_s[DM_OUTCOME_N];
	uint64_t stops[DM_OUTCOME_N];
	struct dm_hist stop_s[DM_OUTCOME_N];
	uint64_t cmds[DM_REASONS];
	struct dm_hist cmd_s;
	uint64_t gw_restarts, gw_restart_failures;
	/* One scrape at a time (scrape_mu): what the egress logs said so far. */
	pthread_mutex_t scrape_mu;
	struct dm_egress_kind egress[DM_EGRESS_KINDS];
	size_t n_egress;
	uint64_t egress_in, egress_out, egress_lines_bad;
};

#endif
