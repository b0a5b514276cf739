/* SPDX-License-Identifier: MIT */
/*
 * GET /metrics: airlockd's counters (bumped on the hot paths with relaxed atomics, no
 * lock) and, at scrape time, what the registry holds (d->mu, briefly), the sandboxes'
 * cgroups and the new lines of their egress logs (metrics_read.c, without d->mu).
 * Scrapes take turns (m.scrape_mu): the egress offsets move once per line.
 * docs/metrics.md lists every series.
 */
#include "daemon/internal.h"
#include "daemon/prom.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "jail/jail.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef AIRLOCK_VERSION
#define AIRLOCK_VERSION "0.0.0"
#endif

/* The egress logs read in one scrape, all sandboxes together; the rest waits for the next. */
#define DM_SCRAPE_EGRESS_MAX (16ull << 20)
#define DM_SCRAPE_EGRESS_SBX_MAX (1ull << 20)

static const double create_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double cmd_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1,    2.5,
				    5,	  10,	30,  60,   300, 1800, 3600};
static const char *const outcome_names[DM_OUTCOME_N] = {"ok", "rejected", "failed"};

_Static_assert(ARRAY_SIZE(create_bounds) <= DM_HIST_MAX, "DM_HIST_MAX");
_Static_assert(ARRAY_SIZE(cmd_bounds) <= DM_HIST_MAX, "DM_HIST_MAX");

#define BUMP(p, n) __atomic_fetch_add((p), (n), __ATOMIC_RELAXED)
#define READ(p) __atomic_load_n((p), __ATOMIC_RELAXED)

int64_t dm_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t dm_mono_us(void)
{
	return (uint64_t)dm_mono_ns() / 1000;
}

void dm_metrics_init(struct daemon *d)
{
	d->m.start_ms = dm_now_ms();
	pthread_mutex_init(&d->m.scrape_mu, NULL);
}

static void hist_observe(struct dm_hist *h, const double *bounds, size_t n, uint64_t us)
{
	size_t i = 0;

	while (i < n && (double)us / 1e6 > bounds[i])
		i++;
	BUMP(&h->counts[i], 1);
	BUMP(&h->sum_us, us);
}

/* The client's doing (a bad request, a limit, no such sandbox) or ours. */
static enum dm_outcome outcome_of(int r, const struct al_error *err)
{
	if (r >= 0)
		return DM_OUTCOME_OK;
	switch (err ? err->code : EIO) {
	case EINVAL:
	case E2BIG:
	case EAGAIN:
	case ENOENT:
	case EEXIST:
	case ENAMETOOLONG:
		return DM_OUTCOME_REJECTED;
	default:
		return DM_OUTCOME_FAILED;
	}
}

void dm_metrics_create(struct daemon *d, int r, const struct al_error *err, uint64_t t0_us)
{
	enum dm_outcome o = outcome_of(r, err);

	BUMP(&d->m.creates[o], 1);
	hist_observe(&d->m.create_s[o], create_bounds, ARRAY_SIZE(create_bounds),
		     dm_mono_us() - t0_us);
}

void dm_metrics_stop(struct daemon *d, int r, const struct al_error *err, uint64_t t0_us)
{
	enum dm_outcome o = outcome_of(r, err);

	BUMP(&d->m.stops[o], 1);
	hist_observe(&d->m.stop_s[o], create_bounds, ARRAY_SIZE(create_bounds),
		     dm_mono_us() - t0_us);
}

void dm_metrics_cmd_end(struct daemon *d, const struct dm_cmd *c)
{
	int64_t ms = c->finished_ms - c->started_ms;

	if ((unsigned)c->reason < DM_REASONS)
		BUMP(&d->m.cmds[c->reason], 1);
	hist_observe(&d->m.cmd_s, cmd_bounds, ARRAY_SIZE(cmd_bounds),
		     ms > 0 ? (uint64_t)ms * 1000 : 0);
}

void dm_metrics_gw_restart(struct daemon *d, bool ok)
{
	BUMP(ok ? &d->m.gw_restarts : &d->m.gw_restart_failures, 1);
}

/* --- the scrape ------------------------------------------------------------- */

/* What a scrape copies of the registry under d->mu. */
struct scrape_sbx {
	char id[DM_ID_LEN + 1];
	char *team;
	bool live; /* running or stopping: its cgroup is read */
	uint64_t egress_off;
};

struct scrape {
	size_t states[DM_SBX_FAILED + 1];
	size_t pool_ready;
	uint64_t pool_taken, pool_missed;
	struct scrape_sbx *sbx;
	size_t n;
};

static void scrape_registry(struct daemon *d, struct scrape *sc)
{
	_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);

	sc->sbx = xzalloc((d->n_sbxs + 1) * sizeof(*sc->sbx));
	sc->pool_taken = d->pool_taken;
	sc->pool_missed = d->pool_missed;
	for (size_t i = 0; i < d->n_sbxs; i++) {
		const struct dm_sbx *s = d->sbxs[i];
		struct scrape_sbx *o;

		if (dm_sbx_pooled(s)) { /* the pool's, shown as its size */
			sc->pool_ready++;
			continue;
		}
		if ((unsigned)s->state <= DM_SBX_FAILED)
			sc->states[s->state]++;
		o = &sc->sbx[sc->n++];
		memcpy(o->id, s->id, sizeof(o->id));
		o->team = xstrdup(s->team);
		o->live = !dm_sbx_has_ended(s);
		o->egress_off = s->egress_off;
	}
}

/* The new lines of every sandbox's egress log into the counters; their offsets back. */
static void scrape_egress(struct daemon *d, struct scrape *sc)
{
	uint64_t budget = DM_SCRAPE_EGRESS_MAX;
	struct dm_egress_logs logs;

	dm_egress_logs_list(d, &logs); /* one readdir, not a failed open per sandbox */
	for (size_t i = 0; i < sc->n && budget; i++) {
		struct scrape_sbx *o = &sc->sbx[i];
		uint64_t max =
		    budget < DM_SCRAPE_EGRESS_SBX_MAX ? budget : DM_SCRAPE_EGRESS_SBX_MAX;
		uint64_t off;

		if (!dm_egress_logs_has(&logs, o->id))
			continue;
		off = dm_metrics_egress_tail(d, o->id, o->egress_off, max);
		budget -= off - o->egress_off < budget ? off - o->egress_off : budget;
		o->egress_off = off;
	}
	dm_egress_logs_free(&logs);
	_cleanup_dm_unlock_ struct daemon *locked = dm_lock(d);
	for (size_t i = 0, j = 0; i < sc->n && d->n_sbxs; i++) {
		/* Mostly in the same order as then: looked for from where the last one was. */
		size_t k = 0;

		while (k < d->n_sbxs && strcmp(d->sbxs[(j + k) % d->n_sbxs]->id, sc->sbx[i].id))
			k++;
		if (k == d->n_sbxs)
			continue; /* forgotten meanwhile */
		j = (j + k) % d->n_sbxs;
		if (sc->sbx[i].egress_off > d->sbxs[j]->egress_off)
			d->sbxs[j]->egress_off = sc->sbx[i].egress_off;
	}
}

static void scrape_free(struct scrape *sc)
{
	for (size_t i = 0; i < sc->n; i++)
		free(sc->sbx[i].team);
	free(sc->sbx);
}

static void put_counter(struct prom_buf *b, const char *name, const char *help, uint64_t v)
{
	prom_family(b, name, "counter", help);
	prom_sample_u64(b, name, NULL, 0, v);
}

static void put_gauge(struct prom_buf *b, const char *name, const char *help, double v)
{
	prom_family(b, name, "gauge", help);
	prom_sample(b, name, NULL, 0, v);
}

static void put_hist(struct prom_buf *b, const char *name, const struct prom_label *l, size_t nl,
		     const struct dm_hist *h, const double *bounds, size_t n)
{
	uint64_t counts[DM_HIST_MAX + 1];

	for (size_t i = 0; i <= n; i++)
		counts[i] = READ(&h->counts[i]);
	prom_histogram(b, name, l, nl,
		       &(struct prom_hist){bounds, n, counts, (double)READ(&h->sum_us) / 1e6});
}

/* Creates and stops: a counter and a histogram each, by outcome. */
static void put_lifecycle(struct prom_buf *b, struct daemon *d)
{
	static const char *const what[2] = {"create", "stop"};
	const uint64_t *total[2] = {d->m.creates, d->m.stops};
	const struct dm_hist *hist[2] = {d->m.create_s, d->m.stop_s};
	char name[64];

	for (int k = 0; k < 2; k++) {
		snprintf(name, sizeof(name), "airlock_sandbox_%ss_total", what[k]);
		prom_family(b, name, "counter",
			    k ? "Sandbox stops asked through the API, by outcome (ok, rejected: "
				"no such sandbox, failed)."
			      : "Sandbox creates, by outcome (ok, rejected: the request or a limit "
				"refused it, failed: an error of the daemon).");
		for (int o = 0; o < DM_OUTCOME_N; o++)
			prom_sample_u64(b, name, &(struct prom_label){"outcome", outcome_names[o]},
					1, READ(&total[k][o]));
		snprintf(name, sizeof(name), "airlock_sandbox_%s_duration_seconds", what[k]);
		prom_family(b, name, "histogram",
			    k ? "Time a stop took, from the request to the sandbox's end."
			      : "Time a create took, from the request to a running agent.");
		for (int o = 0; o < DM_OUTCOME_N; o++)
			put_hist(b, name, &(struct prom_label){"outcome", outcome_names[o]}, 1,
				 &hist[k][o], create_bounds, ARRAY_SIZE(create_bounds));
	}
}

static void put_states_and_pool(struct prom_buf *b, struct daemon *d, const struct scrape *sc)
{
	prom_family(b, "airlock_sandboxes", "gauge",
		    "Sandboxes the daemon holds, by state (the warm pool's not included).");
	for (int st = 0; st <= DM_SBX_FAILED; st++)
		prom_sample_u64(b, "airlock_sandboxes",
				&(struct prom_label){"state", dm_sbx_state_name(st)}, 1,
				sc->states[st]);
	put_gauge(b, "airlock_warm_pool_sandboxes", "Sandboxes of the warm pool ready now.",
		  (double)sc->pool_ready);
	put_gauge(b, "airlock_warm_pool_target",
		  "Sandboxes the warm pool keeps ready (--pool, for each of its two workdirs).",
		  (double)d->opts.pool * 2);
	put_counter(b, "airlock_warm_pool_hits_total", "Creates served by a warm sandbox.",
		    sc->pool_taken);
	put_counter(b, "airlock_warm_pool_misses_total",
		    "Creates that fit the warm pool but found no sandbox ready in it.",
		    sc->pool_missed);
}

static void put_commands(struct prom_buf *b, struct daemon *d)
{
	prom_family(b, "airlock_commands_total", "counter",
		    "Commands that finished, by why they ended (the API's reason words).");
	for (int r = 0; r < DM_REASONS; r++)
		prom_sample_u64(b, "airlock_commands_total",
				&(struct prom_label){"reason", al_reason_name(r)}, 1,
				READ(&d->m.cmds[r]));
	prom_family(b, "airlock_command_duration_seconds", "histogram",
		    "Time from a command's start to its end.");
	put_hist(b, "airlock_command_duration_seconds", NULL, 0, &d->m.cmd_s, cmd_bounds,
		 ARRAY_SIZE(cmd_bounds));
}

static void put_egress_and_errors(struct prom_buf *b, struct daemon *d)
{
	prom_family(b, "airlock_egress_decisions_total", "counter",
		    "Decisions of the sandboxes' network gateways, by verdict and reason (their "
		    "egress logs, read at scrape time).");
	for (size_t i = 0; i < d->m.n_egress; i++)
		prom_sample_u64(b, "airlock_egress_decisions_total",
				(struct prom_label[]){{"verdict", d->m.egress[i].verdict},
						      {"reason", d->m.egress[i].reason}},
				2, d->m.egress[i].n);
	prom_family(b, "airlock_egress_bytes_total", "counter",
		    "Bytes the gateways relayed: out, from sandboxes; in, to them.");
	prom_sample_u64(b, "airlock_egress_bytes_total", &(struct prom_label){"direction", "in"}, 1,
			d->m.egress_in);
	prom_sample_u64(b, "airlock_egress_bytes_total", &(struct prom_label){"direction", "out"},
			1, d->m.egress_out);
	put_counter(b, "airlock_egress_log_lines_unreadable_total",
		    "Egress log lines that did not parse (not counted as decisions).",
		    d->m.egress_lines_bad);
	prom_family(b, "airlock_gateway_restarts_total", "counter",
		    "Network gateways the watchdog started again after theirs died, by outcome.");
	prom_sample_u64(b, "airlock_gateway_restarts_total", &(struct prom_label){"outcome", "ok"},
			1, READ(&d->m.gw_restarts));
	prom_sample_u64(b, "airlock_gateway_restarts_total",
			&(struct prom_label){"outcome", "failed"}, 1,
			READ(&d->m.gw_restart_failures));
	put_counter(b, "airlock_store_errors_total", "Failed operations of the SQLite store.",
		    store_errors(d->store));
}

/* Memory and CPU of every live sandbox, from its cgroup now (gone: left out). */
static void put_sandboxes(struct prom_buf *b, const struct scrape *sc)
{
	uint64_t *mem = xzalloc((sc->n + 1) * sizeof(*mem)), *cpu = xzalloc((sc->n + 1) * 8);
	bool *have = xzalloc(sc->n + 1);
	struct jail_cgroup_reader *cg = jail_cgroup_reader_open();

	for (size_t i = 0; i < sc->n; i++)
		have[i] =
		    sc->sbx[i].live && jail_cgroup_usage(cg, sc->sbx[i].id, &mem[i], &cpu[i]) == 0;
	jail_cgroup_reader_close(cg);
	for (int k = 0; k < 2; k++) {
		const char *name =
		    k ? "airlock_sandbox_cpu_seconds_total" : "airlock_sandbox_memory_bytes";

		prom_family(b, name, k ? "counter" : "gauge",
			    k ? "CPU time a live sandbox used so far (its cgroup)."
			      : "Memory a live sandbox uses now (its cgroup's usage, page cache "
				"included).");
		for (size_t i = 0; i < sc->n; i++) {
			const struct prom_label l[2] = {{"sandbox", sc->sbx[i].id},
							{"team", sc->sbx[i].team}};

			if (!have[i])
				continue;
			if (k)
				prom_sample(b, name, l, 2, (double)cpu[i] / 1e9);
			else
				prom_sample_u64(b, name, l, 2, mem[i]);
		}
	}
	free(mem);
	free(cpu);
	free(have);
}

static void put_process(struct prom_buf *b, struct daemon *d)
{
	struct rusage ru;
	int64_t up_ms = dm_now_ms() - d->m.start_ms;

	prom_family(b, "airlock_build_info", "gauge", "The daemon's version (always 1).");
	prom_sample(b, "airlock_build_info", &(struct prom_label){"version", AIRLOCK_VERSION}, 1,
		    1);
	put_gauge(b, "airlock_daemon_start_time_seconds",
		  "When the daemon started (seconds since the epoch).",
		  (double)d->m.start_ms / 1e3);
	put_gauge(b, "airlock_daemon_uptime_seconds", "How long the daemon has been running.",
		  (double)up_ms / 1e3);
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		prom_family(b, "process_cpu_seconds_total", "counter",
			    "CPU time of the daemon process (user and system).");
		prom_sample(b, "process_cpu_seconds_total", NULL, 0,
			    (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
				(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
		put_gauge(b, "process_max_resident_memory_bytes",
			  "The daemon's peak resident memory.", (double)ru.ru_maxrss * 1024);
	}
}

char *dm_metrics_text(struct daemon *d, size_t *len)
{
	struct prom_buf b = {NULL, 0, 0};
	struct scrape sc;

	memset(&sc, 0, sizeof(sc));
	pthread_mutex_lock(&d->m.scrape_mu);
	scrape_registry(d, &sc);
	scrape_egress(d, &sc);
	put_states_and_pool(&b, d, &sc);
	put_lifecycle(&b, d);
	put_commands(&b, d);
	put_egress_and_errors(&b, d);
	put_sandboxes(&b, &sc);
	put_process(&b, d);
	pthread_mutex_unlock(&d->m.scrape_mu);
	scrape_free(&sc);
	*len = b.len;
	return b.s;
}
