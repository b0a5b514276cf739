/* SPDX-License-Identifier: MIT */
/*
 * The egress (audit) log: one JSON line per decision.
 *
 * What a sandbox can do to it is bounded without blinding it:
 *  - a flow's lines (its "open" line, its closing line with byte counts, any line that
 *    carries bytes) are always written: where data went and how much is never dropped;
 *  - any other line repeated (same layer, verdict, reason, detail, name, address, port,
 *    generation) within GW_AGG_WINDOW seconds is written once, and the repeats become
 *    one line with "suppressed": N when the window closes (gw_log_tick, which the DNS
 *    thread calls when gw_log_wake_ms says; else with the next line, and at stop);
 *  - what still comes (a flood of distinct names) is capped by a token bucket
 *    (GW_LOG_BURST, then GW_LOG_RATE a second); what it drops is counted in one
 *    "rate_limited" line of layer "audit" with "suppressed": N;
 *  - the file stops at GW_LOG_MAX_BYTES with one "log_full" line.
 */
#include "gateway/gw.h"
#include "common/xalloc.h"

#include <jansson.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double gw_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

bool gw_bucket_take(struct gw_bucket *b)
{
	double now = gw_mono_s();

	b->tokens += (now - b->last) * b->rate;
	if (b->tokens > b->burst)
		b->tokens = b->burst;
	b->last = now;
	if (b->tokens < 1.0)
		return false;
	b->tokens -= 1.0;
	return true;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The log file was handed to us: what it holds already counts against its cap. */
void gw_log_adopt(struct net_gateway *g, int fd)
{
	struct stat st;

	g->log_fd = fd;
	g->log_bytes = fd >= 0 && fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	g->log_full = false;
}

/* Append one line (g->mu held). Past GW_LOG_MAX_BYTES the log ends with one "log_full"
 * line and takes nothing more (a file already over it gets nothing at all). */
static void log_write(struct net_gateway *g, uint64_t gen, const char *line, size_t len)
{
	char last[256];
	int n;

	if (g->log_full)
		return;
	if (g->log_bytes + len + sizeof(last) <= GW_LOG_MAX_BYTES) {
		if (write(g->log_fd, line, len) == (ssize_t)len)
			g->log_bytes += len;
		return;
	}
	g->log_full = true;
	n = snprintf(last, sizeof(last),
		     "{\"time\":%lld,\"sandbox\":\"%.40s\",\"generation\":%llu,"
		     "\"layer\":\"audit\",\"verdict\":\"deny\",\"reason\":\"log_full\","
		     "\"name\":null,\"address\":null,\"port\":null,\"bytes_out\":0,"
		     "\"bytes_in\":0}\n",
		     (long long)now_ms(), g->sandbox_id, (unsigned long long)gen);
	if (g->log_bytes < GW_LOG_MAX_BYTES && n > 0 && (size_t)n < sizeof(last) &&
	    write(g->log_fd, last, (size_t)n) == n)
		g->log_bytes += (size_t)n;
}

/* Format and append one line (g->mu held); suppressed > 0 adds that count. */
static void emit(struct net_gateway *g, uint64_t gen, const struct gw_event *e, uint64_t suppressed)
{
	char addr[NET_ADDR_STRLEN];
	json_t *o;
	char *line;
	size_t len;

	if (e->addr)
		net_addr_format(e->addr, addr);
	o = json_pack("{s:I, s:s, s:I, s:s, s:s, s:s}", "time", (json_int_t)now_ms(), "sandbox",
		      g->sandbox_id ? g->sandbox_id : "", "generation", (json_int_t)gen, "layer",
		      e->layer, "verdict", e->allow ? "allow" : "deny", "reason",
		      e->reason ? e->reason : "");
	if (!o)
		return;
	/* Names are ASCII here (canonical, or escaped by their parser); one that is not
	 * valid UTF-8 is logged as null rather than losing the line. */
	json_object_set_new(o, "name", e->name ? json_string(e->name) : json_null());
	if (!json_object_get(o, "name"))
		json_object_set_new(o, "name", json_null());
	json_object_set_new(o, "address", e->addr ? json_string(addr) : json_null());
	json_object_set_new(o, "port", e->port ? json_integer(e->port) : json_null());
	json_object_set_new(o, "bytes_out", json_integer((json_int_t)e->bytes_out));
	json_object_set_new(o, "bytes_in", json_integer((json_int_t)e->bytes_in));
	if (e->event)
		json_object_set_new(o, "event", json_string(e->event));
	if (e->flow)
		json_object_set_new(o, "flow", json_integer((json_int_t)e->flow));
	if (e->detail)
		json_object_set_new(o, "detail", json_string(e->detail));
	if (suppressed)
		json_object_set_new(o, "suppressed", json_integer((json_int_t)suppressed));
	line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	if (!line)
		return;
	len = strlen(line);
	line[len] = '\n'; /* over its NUL: written with its length */
	log_write(g, gen, line, len + 1);
	free(line);
}

/* The rate limit's count, as one "audit" line (g->mu held). */
static void emit_rate_limited(struct net_gateway *g, uint64_t gen)
{
	uint64_t n = g->log_suppressed;

	if (!n)
		return;
	g->log_suppressed = 0;
	emit(g, gen, &(struct gw_event){.layer = "audit", .reason = "rate_limited"}, n);
}

/* A closed window: its count as one line (repeats are counted, never lost), then free. */
static void agg_close(struct net_gateway *g, struct gw_agg *a)
{
	if (a->count)
		emit(g, a->gen,
		     &(struct gw_event){.layer = a->layer,
					.allow = a->allow,
					.reason = a->reason,
					.name = a->has_name ? a->name : NULL,
					.addr = a->has_addr ? &a->addr : NULL,
					.port = a->port,
					.detail = a->detail[0] ? a->detail : NULL,
					.event = "repeated"},
		     a->count);
	a->until = 0;
	a->count = 0;
}

/* Close the windows that have ended (all of them with force), g->mu held. */
static void agg_sweep(struct net_gateway *g, double now, bool force)
{
	double next = 0;

	if (!force && (g->agg_next == 0 || now < g->agg_next))
		return;
	for (int i = 0; i < GW_AGG_SLOTS; i++) {
		struct gw_agg *a = &g->agg[i];

		if (a->until == 0)
			continue;
		if (force || now >= a->until)
			agg_close(g, a);
		else if (next == 0 || a->until < next)
			next = a->until;
	}
	g->agg_next = next;
}

static bool addr_same(const struct net_addr *a, const struct net_addr *b)
{
	return a->family == b->family &&
	       memcmp(a->bytes, b->bytes, a->family == AF_INET ? 4 : sizeof(a->bytes)) == 0;
}

static bool agg_same(const struct gw_agg *a, const struct gw_event *e, uint64_t gen)
{
	return a->gen == gen && a->allow == e->allow && a->port == e->port &&
	       strcmp(a->layer, e->layer) == 0 &&
	       strcmp(a->reason, e->reason ? e->reason : "") == 0 &&
	       strcmp(a->detail, e->detail ? e->detail : "") == 0 &&
	       a->has_name == (e->name != NULL) && (!e->name || strcmp(a->name, e->name) == 0) &&
	       a->has_addr == (e->addr != NULL) && (!e->addr || addr_same(&a->addr, e->addr));
}

static uint32_t agg_hash(const struct gw_event *e)
{
	const char *parts[4] = {e->layer, e->reason ? e->reason : "", e->name ? e->name : "",
				e->detail ? e->detail : ""};
	uint32_t h = (2166136261u ^ (e->allow ? 1u : 0u) ^ ((uint32_t)e->port << 1)) * 16777619u;

	for (int i = 0; i < 4; i++)
		for (const char *p = parts[i]; *p; p++)
			h = (h ^ (uint8_t)*p) * 16777619u;
	if (e->addr)
		for (size_t i = 0; i < (e->addr->family == AF_INET ? 4 : sizeof(e->addr->bytes));
		     i++)
			h = (h ^ e->addr->bytes[i]) * 16777619u;
	return h;
}

/*
 * A repeat within its window is counted (true: write nothing). Otherwise the line opens a
 * window in a free slot, or in one whose line had no repeat yet (nothing is lost by
 * reusing it); with none, it is simply not aggregated. g->mu held.
 */
static bool agg_count(struct net_gateway *g, const struct gw_event *e, uint64_t gen, double now)
{
	uint32_t h = agg_hash(e);
	struct gw_agg *spare = NULL;

	for (int i = 0; i < GW_AGG_PROBE; i++) {
		struct gw_agg *a = &g->agg[(h + (uint32_t)i) % GW_AGG_SLOTS];

		if (a->until != 0 && agg_same(a, e, gen)) {
			a->count++;
			return true;
		}
		if (!spare && (a->until == 0 || a->count == 0))
			spare = a;
	}
	if (!spare)
		return false;
	*spare = (struct gw_agg){.until = now + GW_AGG_WINDOW,
				 .gen = gen,
				 .allow = e->allow,
				 .has_name = e->name != NULL,
				 .has_addr = e->addr != NULL,
				 .port = e->port};
	snprintf(spare->layer, sizeof(spare->layer), "%s", e->layer);
	snprintf(spare->reason, sizeof(spare->reason), "%s", e->reason ? e->reason : "");
	snprintf(spare->detail, sizeof(spare->detail), "%s", e->detail ? e->detail : "");
	snprintf(spare->name, sizeof(spare->name), "%s", e->name ? e->name : "");
	if (e->addr)
		spare->addr = *e->addr;
	if (g->agg_next == 0 || spare->until < g->agg_next)
		g->agg_next = spare->until;
	return false;
}

static bool is_flow_line(const struct gw_event *e)
{
	return e->event || e->flow || e->bytes_out || e->bytes_in;
}

void gw_log(struct net_gateway *g, const struct gw_event *e)
{
	uint64_t gen;
	double now;

	if (g->log_fd < 0)
		return;
	/* a flow's lines carry the generation it went upstream under (no lock taken then:
	 * its opener may hold the policy lock) */
	gen = e->generation ? e->generation : gw_generation(g);
	now = gw_mono_s();
	pthread_mutex_lock(&g->mu);
	agg_sweep(g, now, false);
	if (is_flow_line(e)) {
		emit_rate_limited(g, gen);
		emit(g, gen, e, 0);
	} else if (!agg_count(g, e, gen, now)) {
		if (gw_bucket_take(&g->log_bucket)) {
			emit_rate_limited(g, gen);
			emit(g, gen, e, 0);
		} else {
			g->log_suppressed++;
		}
	}
	pthread_mutex_unlock(&g->mu);
}

void gw_flow_open(struct gw_conn *k)
{
	struct net_gateway *g = k->g;

	if (k->flow)
		return;
	pthread_mutex_lock(&g->mu);
	k->flow = ++g->flows;
	pthread_mutex_unlock(&g->mu);
	gw_log(g, &(struct gw_event){.layer = k->layer,
				     .allow = true,
				     .reason = "open",
				     .name = k->name[0] ? k->name : NULL,
				     .addr = &k->addr,
				     .port = k->port,
				     .flow = k->flow,
				     .event = "open",
				     .generation = k->gen});
}

uint64_t gw_flow_take(struct gw_conn *k)
{
	k->flow_closed = true;
	return k->flow;
}

void gw_flow_end(struct gw_conn *k)
{
	bool cut = __atomic_load_n(&k->cut, __ATOMIC_SEQ_CST);

	if (!k->flow || k->flow_closed)
		return;
	gw_log(k->g, &(struct gw_event){.layer = k->layer,
					.allow = !cut && !k->refused,
					.reason = cut	       ? "policy_changed"
						  : k->refused ? "refused"
							       : "ended",
					.name = k->name[0] ? k->name : NULL,
					.addr = &k->addr,
					.port = k->port,
					.bytes_out = k->out,
					.bytes_in = k->in,
					.flow = gw_flow_take(k),
					.event = "close"});
}

int gw_log_wake_ms(struct net_gateway *g)
{
	int ms = -1;

	pthread_mutex_lock(&g->mu);
	if (g->agg_next > 0) {
		double d = (g->agg_next - gw_mono_s()) * 1000.0;

		ms = d < 10 ? 10 : d > 60000 ? 60000 : (int)d + 1;
	}
	if (g->log_suppressed && (ms < 0 || ms > 1000))
		ms = 1000;
	pthread_mutex_unlock(&g->mu);
	return ms;
}

void gw_log_tick(struct net_gateway *g)
{
	uint64_t gen;

	if (g->log_fd < 0)
		return;
	gen = gw_generation(g);
	pthread_mutex_lock(&g->mu);
	agg_sweep(g, gw_mono_s(), false);
	if (g->log_suppressed && gw_bucket_take(&g->log_bucket))
		emit_rate_limited(g, gen);
	pthread_mutex_unlock(&g->mu);
}

void gw_log_flush(struct net_gateway *g)
{
	uint64_t gen;

	if (g->log_fd < 0)
		return;
	gen = gw_generation(g);
	pthread_mutex_lock(&g->mu);
	agg_sweep(g, gw_mono_s(), true);
	emit_rate_limited(g, gen);
	pthread_mutex_unlock(&g->mu);
}
