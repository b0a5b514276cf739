/* SPDX-License-Identifier: MIT */
#ifndef AL_COMMON_JSON_SEED_H
#define AL_COMMON_JSON_SEED_H

/*
 * Seed jansson's hash tables from getrandom(2), before the process's first JSON object.
 * Without it, jansson opens, reads and closes /dev/urandom on first use: three system
 * calls and a path walk on the start-up path of `airlock run` with a policy and of every
 * gateway. Best effort: if getrandom fails, jansson seeds itself as before.
 */
void al_json_seed(void);

#endif
