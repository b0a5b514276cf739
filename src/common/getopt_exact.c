/* SPDX-License-Identifier: MIT */
/* getopt_long without abbreviations (see getopt_exact.h). */
#include "common/getopt_exact.h"

#include <string.h>

int al_getopt_exact(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	int before = optind, li = -1;
	int c = getopt_long(argc, argv, shortopts, longopts, &li);
	const char *tok = before < argc ? argv[before] : NULL;

	if (c != -1 && li >= 0 && tok && strncmp(tok, "--", 2) == 0) {
		size_t len = strcspn(tok + 2, "=");

		if (strlen(longopts[li].name) != len ||
		    strncmp(tok + 2, longopts[li].name, len) != 0) {
			optind = before + 1; /* argv[optind - 1]: the option as written */
			return '?';
		}
	}
	return c;
}
