/* SPDX-License-Identifier: MIT */
/*
 * airlock template status | drop: the read-only root templates `airlock run` keeps for
 * runs with default settings (src/jail/ahead/template.h). Made by the first run that needs one,
 * remade when the host files they bind change; `drop` removes them (the next run makes
 * one again, unless it runs with --no-template).
 */
#include "cli/cli.h"
#include "common/error.h"
#include "jail/ahead/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: airlock template status | drop\n"
		"\n"
		"`airlock run` builds the read-only part of a default sandbox's root (the host\n"
		"runtime, /etc, /dev) once, in a mount namespace of its own, and gives each run a\n"
		"private copy of it plus a fresh writable tmpfs, devpts and /proc. A template is\n"
		"remade when a host file it binds changes (e.g. ldconfig), and never written.\n"
		"\n"
		"  status     how many templates are kept, and where\n"
		"  drop       remove them (the next run makes one again)\n"
		"\n"
		"They live in %s ($AIRLOCK_TEMPLATE to move them).\n"
		"`airlock run --no-template` builds its root itself.\n",
		JAIL_TEMPLATE_ROOT);
}

int cli_template(int argc, char **argv)
{
	struct al_error *err = NULL;
	const char *dir = jail_template_root(NULL);
	int n;

	if (argc != 2) {
		usage(stderr);
		return AL_EXIT_USAGE;
	}
	if (cli_is_help(argv[1])) {
		usage(stdout);
		return 0;
	}
	if (getenv("AIRLOCK_TEMPLATE") && getenv("AIRLOCK_TEMPLATE")[0] != '/') {
		fprintf(stderr, "airlock template: $AIRLOCK_TEMPLATE must be an absolute path\n");
		return AL_EXIT_USAGE;
	}
	if (strcmp(argv[1], "status") == 0) {
		printf("templates %s: %u\n", dir, jail_template_count(dir));
		return 0;
	}
	if (strcmp(argv[1], "drop") == 0) {
		n = jail_template_drop(dir, &err);
		if (n < 0) {
			fprintf(stderr, "airlock template: %s\n",
				err && err->msg ? err->msg : "failed");
			al_error_free(err);
			return AL_EXIT_SETUP;
		}
		printf("templates dropped: %d\n", n);
		return 0;
	}
	fprintf(stderr, "airlock template: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return AL_EXIT_USAGE;
}
