/* SPDX-License-Identifier: MIT */
#include "common/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Parse a non-negative decimal with an optional fraction; *end points past it. */
static int parse_decimal(const char *s, double *out, const char **end)
{
	const char *p = s;
	double v = 0, scale = 0.1;
	int digits = 0;

	while (isdigit((unsigned char)*p)) {
		v = v * 10 + (*p - '0');
		p++;
		digits++;
	}
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p)) {
			v += (*p - '0') * scale;
			scale /= 10;
			p++;
			digits++;
		}
	}
	if (digits == 0 || digits > 30)
		return -EINVAL;
	*out = v;
	*end = p;
	return 0;
}

int al_parse_duration_ms(const char *s, uint64_t *out_ms)
{
	static const struct {
		const char *suffix;
		double ms;
	} units[] = {{"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
	const char *end;
	double v;
	size_t i;

	if (!s || parse_decimal(s, &v, &end) < 0)
		return -EINVAL;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			double ms = v * units[i].ms;
			/* Under a millisecond would round to 0, which means "none". */
			if (ms > 30.0 * 24 * 3600 * 1000 || (ms > 0 && ms < 1))
				return -ERANGE;
			*out_ms = (uint64_t)llround(ms);
			return 0;
		}
	}
	return -EINVAL;
}

int al_parse_size(const char *s, uint64_t *out_bytes)
{
	static const char units[] = "BKMGT";
	const char *end, *u;
	double v, mult = 1;

	if (!s || parse_decimal(s, &v, &end) < 0)
		return -EINVAL;
	if (*end) {
		u = strchr(units, toupper((unsigned char)*end));
		if (!u)
			return -EINVAL;
		mult = ldexp(1.0, 10 * (int)(u - units));
		end++;
		if (u != units && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0 ||
				   strcmp(end, "ib") == 0 || strcmp(end, "b") == 0))
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	v *= mult;
	/* Under a byte would truncate to 0, which means "none". */
	if (v >= 18446744073709551615.0 || (v > 0 && v < 1))
		return -ERANGE;
	*out_bytes = (uint64_t)v;
	return 0;
}

int al_parse_cpus(const char *s, double *out)
{
	const char *end;
	double v;

	if (!s || parse_decimal(s, &v, &end) < 0 || *end)
		return -EINVAL;
	if (v < 0.01 || v > 1024)
		return -ERANGE;
	*out = v;
	return 0;
}

int al_parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	if (v > UINT32_MAX)
		return -ERANGE;
	*out = (uint32_t)v;
	return 0;
}
