/* SPDX-License-Identifier: MIT */
/* Strict parsers for command-line values: durations and sizes. Pure functions. */
#ifndef AL_COMMON_PARSE_H
#define AL_COMMON_PARSE_H

#include <stdint.h>

/* "30" (seconds), "30s", "1.5s", "500ms", "2m", "1h". Returns 0 or -EINVAL/-ERANGE. */
int al_parse_duration_ms(const char *s, uint64_t *out_ms);
/* "1024", "512K", "64M", "1G", "1T" (binary units; optional trailing "B"/"iB"). */
int al_parse_size(const char *s, uint64_t *out_bytes);
/* A positive decimal number such as "0.5" or "2". */
int al_parse_cpus(const char *s, double *out);
/* A non-negative integer that fits in 32 bits. */
int al_parse_u32(const char *s, uint32_t *out);

#endif
