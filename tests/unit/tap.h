/* SPDX-License-Identifier: MIT */
/* A tiny TAP producer for the C unit tests. */
#ifndef AL_TESTS_TAP_H
#define AL_TESTS_TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		tap_n++;                                                                           \
		if (cond) {                                                                        \
			printf("ok %d - ", tap_n);                                                 \
		} else {                                                                           \
			tap_failed++;                                                              \
			printf("not ok %d - %s:%d: ", tap_n, __FILE__, __LINE__);                  \
		}                                                                                  \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
