/* SPDX-License-Identifier: MIT */
/*
 * airlock pool fill [N] | status | drain: the one-shot pool of sandbox parts made
 * ahead (src/jail/ahead/pool.h). `airlock run` draws from it while it has entries, and each
 * run that drew one tops it up again in a detached process.
 */
#include "cli/cli.h"
#include "common/error.h"
#include "jail/ahead/pool.h"
#include "jail/ahead/recycle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POOL_DEFAULT_SIZE 4u

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: airlock pool fill [N] | status | drain | netns status | netns drain\n"
	    "\n"
	    "Sandbox parts made ahead, so that `airlock run` joins finished ones instead of\n"
	    "making them: a network namespace (with an allowlist also the link, the gateway's\n"
	    "namespace and ruleset, and the gateway itself, waiting), and the root of a sandbox\n"
	    "with default settings. Each entry serves one sandbox, once; runs refill the pool\n"
	    "in the background, except while one-shot launches occupy every CPU (then runs\n"
	    "go the cold way once it is empty). Off until filled.\n"
	    "\n"
	    "  fill [N]   keep N of each kind ready (deny-all, and linked for allowlists);\n"
	    "             default %u, at most %u; makes them now\n"
	    "  status     the size and how many are ready\n"
	    "  drain      release every entry and turn the pool off\n"
	    "  netns status  how many recycled network namespaces of deny-all runs, and linked\n"
	    "                pairs of allowlisted runs, are ready\n"
	    "  netns drain   destroy them (runs refill it again, unless --fresh-netns or the\n"
	    "                host setting %s: docs/security.md)\n"
	    "\n"
	    "The pool lives in %s ($AIRLOCK_POOL to move it), one directory per build.\n"
	    "`airlock run --no-pool` ignores it.\n",
	    POOL_DEFAULT_SIZE, JAIL_POOL_MAX_SIZE, JAIL_RECYCLE_OFF_FILE, JAIL_POOL_ROOT);
}

static int pool_error(struct al_error *err)
{
	fprintf(stderr, "airlock pool: %s\n", err && err->msg ? err->msg : "failed");
	al_error_free(err);
	return AL_EXIT_SETUP;
}

/* airlock pool netns status|drain: the recycled namespaces (jail/ahead/recycle.h), wherever
 * runs keep them ($AIRLOCK_NETNS_POOL), even while the host setting turns recycling off. */
static int netns_pool(const char *cmd)
{
	const char *root = getenv("AIRLOCK_NETNS_POOL");

	if (!root || root[0] != '/')
		root = JAIL_RECYCLE_ROOT;
	jail_recycle_settle(root); /* what the runs that just ended give back counts */
	if (strcmp(cmd, "status") == 0) {
		unsigned pairs = 0, ready = jail_recycle_count(root, &pairs);

		printf("recycled network namespaces %s: %u ready, %u linked pairs ready%s\n", root,
		       ready, pairs,
		       access(JAIL_RECYCLE_OFF_FILE, F_OK) == 0 ? " (off: " JAIL_RECYCLE_OFF_FILE
								  ")"
								: "");
		return 0;
	}
	if (strcmp(cmd, "drain") == 0) {
		printf("recycled network namespaces drained: %d destroyed\n",
		       jail_recycle_drain(root));
		return 0;
	}
	fprintf(stderr, "airlock pool netns: unknown command '%s'\n", cmd);
	return AL_EXIT_USAGE;
}

int cli_pool(int argc, char **argv)
{
	struct al_error *err = NULL;
	unsigned lo, link;
	char dir[200];

	if (argc < 2 || argc > 3) {
		usage(stderr);
		return AL_EXIT_USAGE;
	}
	if (cli_is_help(argv[1])) {
		usage(stdout);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "netns") == 0)
		return netns_pool(argv[2]);
	if (getenv("AIRLOCK_POOL") && getenv("AIRLOCK_POOL")[0] != '/') {
		fprintf(stderr, "airlock pool: $AIRLOCK_POOL must be an absolute path\n");
		return AL_EXIT_USAGE;
	}
	if (jail_pool_dir(NULL, dir, sizeof(dir)) < 0) {
		fprintf(stderr, "airlock pool: $AIRLOCK_POOL is too long\n");
		return AL_EXIT_USAGE;
	}
	if (strcmp(argv[1], "fill") == 0) {
		unsigned long n = POOL_DEFAULT_SIZE;
		char *end = NULL;
		int made;

		if (argc == 3) {
			n = strtoul(argv[2], &end, 10);
			if (!argv[2][0] || *end ||
			    strspn(argv[2], "0123456789") != strlen(argv[2]) || n < 1 ||
			    n > JAIL_POOL_MAX_SIZE) {
				fprintf(stderr,
					"airlock pool fill: '%s': expected a number from 1 to %u\n",
					argv[2], JAIL_POOL_MAX_SIZE);
				return AL_EXIT_USAGE;
			}
		}
		made = jail_pool_fill(dir, (unsigned)n, &err);
		if (made < 0)
			return pool_error(err);
		jail_pool_count(dir, &lo, &link);
		printf("pool %s: size %lu, made %d; ready: %u deny-all, %u linked\n", dir, n, made,
		       lo, link);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "status") == 0) {
		jail_pool_count(dir, &lo, &link);
		printf("pool %s: size %u; ready: %u deny-all, %u linked\n", dir,
		       jail_pool_size(dir), lo, link);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "drain") == 0) {
		int n = jail_pool_drain(NULL, &err);

		if (n < 0)
			return pool_error(err);
		printf("pool drained: %d entries released\n", n);
		return 0;
	}
	fprintf(stderr, "airlock pool: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return AL_EXIT_USAGE;
}
