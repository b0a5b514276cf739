/* SPDX-License-Identifier: MIT */
/* airlock-remote: the client subcommands of `airlock` that talk to airlockd. */
#include "cli/client.h"

#include <airlock/airlock.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {{"create", cli_create}, {"exec", cli_exec}, {"cp", cli_cp},
		    {"ls", cli_ls},	    {"logs", cli_logs}, {"stop", cli_stop},
		    {"policy", cli_policy}};

	for (size_t i = 0; argc > 0 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[0], cmds[i].name) == 0)
			return cmds[i].fn(argc, argv);
	fprintf(stderr, "airlock-remote: run it as `airlock create|exec|cp|ls|logs|stop|policy`\n");
	return AL_EXIT_USAGE;
}
