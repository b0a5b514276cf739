/* SPDX-License-Identifier: MIT */
/*
 * getopt_long, but a long option must be written in full: glibc and musl take any
 * unique prefix ("--ret" for "--retention"), so a script that works today would break,
 * or silently change meaning, the day an option with the same prefix is added. An
 * abbreviation is returned as '?' (an unknown option) with argv[optind - 1] the option
 * as written.
 */
#ifndef AL_COMMON_GETOPT_EXACT_H
#define AL_COMMON_GETOPT_EXACT_H

#include <getopt.h>

int al_getopt_exact(int argc, char **argv, const char *shortopts, const struct option *longopts);

#endif
