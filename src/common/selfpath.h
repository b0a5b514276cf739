/* SPDX-License-Identifier: MIT */
/* The binaries that ship together (airlock, airlockd, airlock-agent, the gateways) find each
 * other in the directory of the running one. */
#ifndef AL_COMMON_SELFPATH_H
#define AL_COMMON_SELFPATH_H

/* "<directory of /proc/self/exe>/name", heap-allocated; NULL if /proc/self/exe cannot be
 * read. */
char *al_sibling_path(const char *name);

#endif
