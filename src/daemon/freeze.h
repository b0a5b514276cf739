/* SPDX-License-Identifier: MIT */
/* Freezing a daemon sandbox's processes (its cgroup) for a snapshot's capture: freeze.c. */
#ifndef AL_DAEMON_FREEZE_H
#define AL_DAEMON_FREEZE_H

#include "common/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Freeze (true) or thaw (false) every process of sandbox id; a freeze returns once all
 * are frozen (ETIMEDOUT after 3 s: thaw then). */
int dm_freeze(const char *id, bool frozen, struct al_error **err);
/* The processes of sandbox id (its pids cgroup on v1, its own on v2), in *out (freed by the
 * caller). */
int dm_freeze_pids(const char *id, pid_t **out, size_t *n, struct al_error **err);
/* v1: remove the sandbox's freezer cgroup once it ended (nothing on v2: its cgroup goes
 * with the others). */
void dm_freeze_forget(const char *id);

#endif
