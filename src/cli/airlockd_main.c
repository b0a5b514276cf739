/* SPDX-License-Identifier: MIT */
/* airlockd: the daemon; also reached as `airlock serve`. */
#include "cli/cli.h"

#include <string.h>

int main(int argc, char **argv)
{
	/* `airlock serve ARGS` execs us as `serve ARGS`; run directly, argv[0] is our path. */
	return cli_serve(argc, argv);
}
