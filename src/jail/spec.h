/* SPDX-License-Identifier: MIT */
/*
 * A daemon sandbox's settings, defined once: what the API dialects parse into, the daemon
 * validates, stores and hands to its spawner, and the spawner builds. One set of defaults
 * (jail_spec_defaults), one validator (jail_spec_validate), one store form
 * (jail_spec_json / jail_spec_from_json), one translation into the jail's al_config
 * (jail_spec_config), one test of whether a sandbox made ahead suits it
 * (jail_spec_same_root). Adding a setting means adding it here and to the front ends
 * that accept it.
 *
 * The spawner record (jail/ahead/spawner.h) carries it whole: it is a binary interface of
 * one build, its size part of jail_spawn_abi.
 */
#ifndef AL_JAIL_SPEC_H
#define AL_JAIL_SPEC_H

#include "common/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define JAIL_SPEC_PATH_MAX 1024	  /* bytes of an image path or a workdir, NUL included */
#define JAIL_SPEC_HOSTNAME_MAX 64 /* a hostname: 1 to 63 bytes, NUL included */
#define JAIL_SPEC_PIDS 1024u	  /* a daemon sandbox's processes */
#define JAIL_SPEC_MEMORY_MIN (4ull << 20)
#define JAIL_SPEC_DISK_MIN (1ull << 20) /* its own /etc and directories live there */
#define JAIL_SPEC_VCPUS_MAX 1024

struct jail_spec {
	double vcpus;			       /* CPU quota in CPUs; 0: no limit */
	uint64_t memory_bytes;		       /* 0: the default (1 GiB) */
	uint64_t disk_bytes;		       /* the writable tmpfs; 0: the default (1 GiB) */
	uint32_t pids;			       /* 0: JAIL_SPEC_PIDS */
	char image[JAIL_SPEC_PATH_MAX];	       /* "": the host runtime; else the image's root */
	char workdir[JAIL_SPEC_PATH_MAX];      /* "": /workspace */
	char hostname[JAIL_SPEC_HOSTNAME_MAX]; /* "": JAIL_HOSTNAME_DEFAULT */
};

/* Copy a front end's string into one of the spec's fields: EINVAL (naming `what`) when it
 * does not fit. NULL leaves the field as it is. */
int jail_spec_set(char *field, size_t cap, const char *value, const char *what,
		  struct al_error **err);
#define JAIL_SPEC_SET(field, value, what, err)                                                     \
	jail_spec_set((field), sizeof(field), (value), (what), (err))

/* A hostname /etc/hosts and uname can carry: 1 to 63 RFC 1123 characters (letters,
 * digits, '-', '.'), not starting or ending with '-' or '.' (also `airlock run --hostname`). */
bool jail_hostname_ok(const char *h);
/* Every unset (0 or "") setting to its default. */
void jail_spec_defaults(struct jail_spec *s);
/* After jail_spec_defaults, with workdir in its normal form (common/path.h): EINVAL (or
 * E2BIG) with the setting named when one is out of range. */
int jail_spec_validate(const struct jail_spec *s, struct al_error **err);
/* The jail's settings for it (cfg is initialised first; its strings point into s). */
struct al_config;
void jail_spec_config(const struct jail_spec *s, struct al_config *cfg);
/* Whether a sandbox made for `made` (a root made ahead, a warm sandbox) suits `want`: the
 * settings fixed when a sandbox is made (its root, its hostname) are the same. Limits are
 * not: they are set again on a sandbox handed out. Both after jail_spec_defaults. */
bool jail_spec_same_root(const struct jail_spec *made, const struct jail_spec *want);
/* The store's form: {"image": path|null, "vcpus", "memory_bytes", "disk_bytes", "workdir",
 * "hostname"} (a new reference). */
json_t *jail_spec_json(const struct jail_spec *s);
/* Back from that form (a row written by this or an older build: what is missing keeps
 * its default); then jail_spec_defaults. */
void jail_spec_from_json(json_t *o, struct jail_spec *s);

#endif
