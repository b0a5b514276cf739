/* SPDX-License-Identifier: MIT */
#include "common/parse.h"
#include "tap.h"

#include <errno.h>
#include <string.h>

static void durations(void)
{
	static const struct {
		const char *in;
		int rc;
		uint64_t ms;
	} cases[] = {
	    {"30", 0, 30000},
	    {"30s", 0, 30000},
	    {"1.5s", 0, 1500},
	    {"500ms", 0, 500},
	    {"2m", 0, 120000},
	    {"1h", 0, 3600000},
	    {"0", 0, 0},
	    {".5", 0, 500},
	    {"", -EINVAL, 0},
	    {"abc", -EINVAL, 0},
	    {"10x", -EINVAL, 0},
	    {"-1", -EINVAL, 0},
	    {"1 s", -EINVAL, 0},
	    {"s", -EINVAL, 0},
	    {"1.2.3", -EINVAL, 0},
	    {"999999h", -ERANGE, 0},
	    {"1e3", -EINVAL, 0},
	    /* under a millisecond would round to 0, "none" */
	    {"0.0004s", -ERANGE, 0},
	    {"0.4ms", -ERANGE, 0},
	    {"1ms", 0, 1},
	    {"0.0ms", 0, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t ms = 12345;
		int rc = al_parse_duration_ms(cases[i].in, &ms);
		CHECK(rc == cases[i].rc && (rc < 0 || ms == cases[i].ms),
		      "duration '%s' -> %d %llu", cases[i].in, rc, (unsigned long long)ms);
	}
}

static void sizes(void)
{
	static const struct {
		const char *in;
		int rc;
		uint64_t v;
	} cases[] = {
	    {"1024", 0, 1024},
	    {"512K", 0, 512 << 10},
	    {"64M", 0, 64 << 20},
	    {"1G", 0, 1ULL << 30},
	    {"1g", 0, 1ULL << 30},
	    {"2GiB", 0, 2ULL << 30},
	    {"1.5M", 0, 3 << 19},
	    {"10MB", 0, 10 << 20},
	    {"0", 0, 0},
	    {"12Q", -EINVAL, 0},
	    {"", -EINVAL, 0},
	    {"M", -EINVAL, 0},
	    {"1MM", -EINVAL, 0},
	    {"-5M", -EINVAL, 0},
	    {"99999999999T", -ERANGE, 0},
	    /* under a byte would truncate to 0, "none" */
	    {"0.5", -ERANGE, 0},
	    {"0.0001K", -ERANGE, 0},
	    {"0.0", 0, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 7;
		int rc = al_parse_size(cases[i].in, &v);
		CHECK(rc == cases[i].rc && (rc < 0 || v == cases[i].v), "size '%s' -> %d %llu",
		      cases[i].in, rc, (unsigned long long)v);
	}
}

static void numbers(void)
{
	double c;
	uint32_t u;

	CHECK(al_parse_cpus("0.5", &c) == 0 && c == 0.5, "cpus 0.5");
	CHECK(al_parse_cpus("0", &c) == -ERANGE, "cpus 0 refused");
	CHECK(al_parse_cpus("1x", &c) == -EINVAL, "cpus 1x refused");
	CHECK(al_parse_u32("64", &u) == 0 && u == 64, "u32 64");
	CHECK(al_parse_u32("-1", &u) == -EINVAL, "u32 -1 refused");
	CHECK(al_parse_u32("4294967296", &u) == -ERANGE, "u32 overflow refused");
	CHECK(al_parse_u32("12a", &u) == -EINVAL, "u32 12a refused");
}

int main(void)
{
	durations();
	sizes();
	numbers();
	return tap_done();
}
