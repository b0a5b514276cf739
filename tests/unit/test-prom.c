/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text format's writer (src/daemon/prom.c): HELP and TYPE lines, label
 * values escaped (\, ", newline), numbers that read back, and histograms whose buckets
 * are cumulative, end with le="+Inf" and agree with _count, followed by _sum.
 */
#include "daemon/prom.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void family_and_escaping(void)
{
	struct prom_buf b = {NULL, 0, 0};

	prom_family(&b, "x_total", "counter", "a \\ backslash\nand a newline");
	CHECK(strcmp(b.s, "# HELP x_total a \\\\ backslash\\nand a newline\n"
			  "# TYPE x_total counter\n") == 0,
	      "HELP escapes \\ and newline");
	b.len = 0;
	prom_sample_u64(&b, "x_total",
			(struct prom_label[]){{"a", "q\"uote"}, {"b", "back\\slash\nline"}}, 2, 7);
	CHECK(strcmp(b.s, "x_total{a=\"q\\\"uote\",b=\"back\\\\slash\\nline\"} 7\n") == 0,
	      "label values escape \", \\ and newline");
	b.len = 0;
	prom_sample_u64(&b, "x_total", NULL, 0, 18446744073709551615ull);
	CHECK(strcmp(b.s, "x_total 18446744073709551615\n") == 0, "a u64 exactly");
	b.len = 0;
	prom_sample(&b, "g", &(struct prom_label){"l", ""}, 1, 0.1);
	CHECK(strcmp(b.s, "g{l=\"\"} 0.1\n") == 0, "an empty label value, 0.1 short");
	b.len = 0;
	prom_sample(&b, "g", NULL, 0, 1.0 / 3);
	CHECK(strtod(strchr(b.s, ' ') + 1, NULL) == 1.0 / 3, "a double reads back");
	b.len = 0;
	prom_sample(&b, "g", NULL, 0, INFINITY);
	prom_sample(&b, "g", NULL, 0, -INFINITY);
	prom_sample(&b, "g", NULL, 0, NAN);
	CHECK(strcmp(b.s, "g +Inf\ng -Inf\ng NaN\n") == 0, "+Inf, -Inf, NaN");
	free(b.s);
}

static void histogram(void)
{
	static const double bounds[] = {0.5, 1, 2.5};
	static const uint64_t counts[] = {2, 0, 3, 1}; /* 1 above 2.5 */
	struct prom_buf b = {NULL, 0, 0};
	const char *want = "h_bucket{k=\"v\",le=\"0.5\"} 2\n"
			   "h_bucket{k=\"v\",le=\"1\"} 2\n"
			   "h_bucket{k=\"v\",le=\"2.5\"} 5\n"
			   "h_bucket{k=\"v\",le=\"+Inf\"} 6\n"
			   "h_sum{k=\"v\"} 7.25\n"
			   "h_count{k=\"v\"} 6\n";

	prom_histogram(&b, "h", &(struct prom_label){"k", "v"}, 1,
		       &(struct prom_hist){bounds, 3, counts, 7.25});
	CHECK(strcmp(b.s, want) == 0, "cumulative buckets, +Inf = _count, then _sum");
	b.len = 0;
	prom_histogram(&b, "h", NULL, 0,
		       &(struct prom_hist){bounds, 3, (const uint64_t[]){0, 0, 0, 0}, 0});
	CHECK(strstr(b.s, "h_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n") != NULL,
	      "an empty histogram without labels");
	free(b.s);
}

static void growth(void)
{
	struct prom_buf b = {NULL, 0, 0};
	char big[10000];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	for (int i = 0; i < 100; i++)
		prom_sample_u64(&b, "n", &(struct prom_label){"v", big}, 1, (uint64_t)i);
	CHECK(b.len == 100 * (strlen("n{v=\"\"} 0\n") + sizeof(big) - 1) + 90 &&
		  strlen(b.s) == b.len,
	      "a buffer of 1 MB grows and stays terminated (%zu)", b.len);
	free(b.s);
}

int main(void)
{
	family_and_escaping();
	histogram();
	growth();
	return tap_done();
}
