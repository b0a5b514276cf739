/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition format, version 0.0.4: a growing buffer, a family's HELP
 * and TYPE lines, samples with escaped label values, and histograms (cumulative buckets
 * ending with le="+Inf", then _sum and _count). Pure code: no I/O, no daemon; the
 * daemon's series are in metrics.c. docs/metrics.md lists them.
 */
#ifndef AL_DAEMON_PROM_H
#define AL_DAEMON_PROM_H

#include <stddef.h>
#include <stdint.h>

struct prom_buf {
	char *s; /* NUL-terminated; the caller frees it */
	size_t len, cap;
};

struct prom_label {
	const char *name;
	const char *value; /* any bytes but NUL: \, " and newline are escaped */
};

/* A histogram's state. counts[i] (i < n) are observations <= bounds[i] and above the
 * bound before it (not cumulative); counts[n] the ones above the last bound. */
struct prom_hist {
	const double *bounds; /* increasing */
	size_t n;
	const uint64_t *counts; /* n + 1 of them */
	double sum;
};

/* printf into the buffer (grows it; never fails: out of memory aborts). */
void prom_printf(struct prom_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "# HELP name help" (help escaped) and "# TYPE name type". */
void prom_family(struct prom_buf *b, const char *name, const char *type, const char *help);
/* name{l0="v0",...} value -- a double in the shortest form that reads back the same. */
void prom_sample(struct prom_buf *b, const char *name, const struct prom_label *l, size_t nl,
		 double value);
/* The same for an integer (a counter's exact value past 2^53). */
void prom_sample_u64(struct prom_buf *b, const char *name, const struct prom_label *l, size_t nl,
		     uint64_t value);
/* name_bucket{...,le="..."} for every bound and +Inf (cumulative), name_sum, name_count. */
void prom_histogram(struct prom_buf *b, const char *name, const struct prom_label *l, size_t nl,
		    const struct prom_hist *h);

#endif
