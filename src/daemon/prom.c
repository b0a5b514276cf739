/* SPDX-License-Identifier: MIT */
/* The Prometheus text format's writer (prom.h). */
#include "daemon/prom.h"
#include "common/xalloc.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void prom_reserve(struct prom_buf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;

	if (b->len + more + 1 <= b->cap)
		return;
	while (cap < b->len + more + 1)
		cap *= 2;
	b->s = xrealloc(b->s, cap);
	b->cap = cap;
}

void prom_printf(struct prom_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	prom_reserve(b, 256);
	va_start(ap, fmt);
	n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort(); /* a programming error: a bad format */
	if ((size_t)n >= b->cap - b->len) {
		prom_reserve(b, (size_t)n);
		va_start(ap, fmt);
		vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

static void prom_putc(struct prom_buf *b, char c)
{
	prom_reserve(b, 1);
	b->s[b->len++] = c;
	b->s[b->len] = '\0';
}

/* Escapes \ and newline (HELP text), and " too in a label value. */
static void prom_escaped(struct prom_buf *b, const char *s, int quote)
{
	for (; *s; s++) {
		if (*s == '\\' || (quote && *s == '"')) {
			prom_putc(b, '\\');
			prom_putc(b, *s);
		} else if (*s == '\n') {
			prom_putc(b, '\\');
			prom_putc(b, 'n');
		} else {
			prom_putc(b, *s);
		}
	}
}

void prom_family(struct prom_buf *b, const char *name, const char *type, const char *help)
{
	prom_printf(b, "# HELP %s ", name);
	prom_escaped(b, help, 0);
	prom_printf(b, "\n# TYPE %s %s\n", name, type);
}

/* name{labels[,le="..."]} -- le is NULL but in a bucket. */
static void prom_series(struct prom_buf *b, const char *name, const char *suffix,
			const struct prom_label *l, size_t nl, const char *le)
{
	prom_printf(b, "%s%s", name, suffix);
	if (!nl && !le)
		return;
	prom_putc(b, '{');
	for (size_t i = 0; i < nl; i++) {
		prom_printf(b, "%s%s=\"", i ? "," : "", l[i].name);
		prom_escaped(b, l[i].value, 1);
		prom_putc(b, '"');
	}
	if (le)
		prom_printf(b, "%sle=\"%s\"", nl ? "," : "", le);
	prom_putc(b, '}');
}

/* A double as Prometheus reads it: NaN, +Inf, -Inf, or the shortest %g that reads back. */
static void prom_double(char out[40], double v)
{
	if (isnan(v)) {
		strcpy(out, "NaN");
		return;
	}
	if (isinf(v)) {
		strcpy(out, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(out, 40, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			return;
	}
}

void prom_sample(struct prom_buf *b, const char *name, const struct prom_label *l, size_t nl,
		 double value)
{
	char v[40];

	prom_double(v, value);
	prom_series(b, name, "", l, nl, NULL);
	prom_printf(b, " %s\n", v);
}

void prom_sample_u64(struct prom_buf *b, const char *name, const struct prom_label *l, size_t nl,
		     uint64_t value)
{
	prom_series(b, name, "", l, nl, NULL);
	prom_printf(b, " %llu\n", (unsigned long long)value);
}

void prom_histogram(struct prom_buf *b, const char *name, const struct prom_label *l, size_t nl,
		    const struct prom_hist *h)
{
	uint64_t cum = 0;
	char le[40], sum[40];

	for (size_t i = 0; i <= h->n; i++) {
		cum += h->counts[i];
		if (i < h->n)
			prom_double(le, h->bounds[i]);
		else
			strcpy(le, "+Inf");
		prom_series(b, name, "_bucket", l, nl, le);
		prom_printf(b, " %llu\n", (unsigned long long)cum);
	}
	prom_double(sum, h->sum);
	prom_series(b, name, "_sum", l, nl, NULL);
	prom_printf(b, " %s\n", sum);
	prom_series(b, name, "_count", l, nl, NULL);
	prom_printf(b, " %llu\n", (unsigned long long)cum);
}
