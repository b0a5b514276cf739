/* SPDX-License-Identifier: MIT */
#include "common/json_seed.h"

#include <jansson.h>
#include <stdint.h>
#include <sys/random.h>

void al_json_seed(void)
{
	uint32_t seed = 0;

	/* Zero would have jansson seed itself (open, read and close /dev/urandom). */
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed) && seed)
		json_object_seed(seed);
}
