/* SPDX-License-Identifier: MIT */
/*
 * The sandbox spawner's serve loop and wire format (spawner.c). airlockd runs it in a
 * small process of its own (src/daemon/spawner.c): one request in, one report out, over a
 * SOCK_SEQPACKET pair, one create at a time. Both ends are built from this header in one
 * build; a record of another size is refused.
 */
#ifndef AL_JAIL_SPAWNER_H
#define AL_JAIL_SPAWNER_H

#include "jail/spec.h"

#include <stdint.h>

#define JAIL_SPAWN_ID_LEN 28 /* a sandbox id: "sbx_" + 24 */

struct jail_spawn_req {
	struct jail_spec spec; /* the sandbox's settings, defaults applied (jail/spec.h) */
	uint32_t host_base;
	char id[JAIL_SPAWN_ID_LEN + 1];
};

struct jail_spawn_report {
	int32_t code; /* 0 ok, else errno */
	int32_t pid;
	uint64_t start_time;
	char msg[480];
};

/* What the spawner says first, in a report's msg (code 0, pid its own): the version and
 * the two record sizes it was built with. airlockd compares it with its own, so an
 * `airlock` from another build is never fed records it would misread. */
void jail_spawn_abi(char out[64]);

/* Say hello (jail_spawn_abi), then serve requests on fd until its peer closes it; then
 * _exit(0). Names the process "airlockd-spawn". Each sandbox's PID 1 becomes a child of
 * this process's parent (CLONE_PARENT), its agent socket is SOCK_DIR/ID.sock. */
void __attribute__((noreturn))
jail_spawner_serve(int fd, const char *agent_path, const char *sock_dir);

#endif
