/* SPDX-License-Identifier: MIT */
/* airlock: the command-line front end. One file per subcommand. */
#include "cli/cli.h"
#include "common/json_seed.h"
#include "common/selfpath.h"
#include "jail/ahead/spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>
#include <sys/socket.h>

static void usage(FILE *out)
{
	fputs(
	    "usage: airlock <command> [flags]\n"
	    "\n"
	    "commands:\n"
	    "  run [flags] -- CMD [ARGS...]   run one command in a fresh sandbox, then remove it\n"
	    "  oci COMMAND ...                the OCI runtime for containerd and podman "
	    "(airlock-oci, docs/oci.md)\n"
	    "  serve [flags]                  run the daemon (airlockd): sandboxes behind an HTTP "
	    "API\n"
	    "  pool fill [N] | status | drain sandbox parts made ahead for `run` (opt-in)\n"
	    "  template status | drop         the read-only root templates `run` keeps\n"
	    "  mcp [flags]                    an MCP server on stdio for agent hosts: tools that "
	    "run\n"
	    "                                 code in sandboxes (`airlock mcp --help`)\n"
	    "\n"
	    "talking to airlockd (--url URL | --socket PATH, --token TOKEN, --json; or "
	    "AIRLOCK_URL,\n"
	    "AIRLOCK_SOCKET, AIRLOCK_TOKEN; default http://127.0.0.1:7070 and the daemon's token "
	    "file):\n"
	    "  create [--image DIR] [--memory SIZE] [--cpus N] [--timeout D] [--env K=V]...\n"
	    "  exec [--sudo] [--cwd DIR] [--env K=V] [-d] SANDBOX -- CMD [ARGS...]\n"
	    "  cp HOST_PATH SANDBOX:DIR | cp SANDBOX:FILE HOST_PATH\n"
	    "  ls [SANDBOX[:PATH]]        list sandboxes, or files in a sandbox\n"
	    "  logs SANDBOX COMMAND       replay and follow a command's output\n"
	    "  stop SANDBOX\n"
	    "  policy SANDBOX [deny-all | allow-all | JSON]\n"
	    "\n"
	    "  help                           this text; `airlock run --help` for run's flags\n"
	    "  version                        print the version\n",
	    out);
}

/* exec NAME (a binary in this binary's directory) with argv = {NAME's subcommand, ...}. */
static int exec_sibling(const char *name, char **argv)
{
	char *path = al_sibling_path(name);

	if (!path) {
		fprintf(stderr, "airlock: cannot find my own directory to run %s\n", name);
		return AL_EXIT_SETUP;
	}
	execv(path, argv);
	fprintf(stderr, "airlock: cannot run %s: %s\n", path, strerror(errno));
	free(path);
	return AL_EXIT_SETUP;
}

/* Make sure fds 0-2 exist, so no pipe or socket of ours is mistaken for stdio. */
static void ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++)
		/* open() takes the lowest free number: the missing fd itself, kept for good. */
		/* cppcheck-suppress leakReturnValNotUsed */
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) < 0)
			_exit(AL_EXIT_SETUP);
}

/* `airlock __spawner AGENT SOCK_DIR`: airlockd's sandbox spawner (src/daemon/spawner.c), on
 * the SOCK_SEQPACKET channel airlockd passes as fd 3. Not for people: refused otherwise. */
static int spawner(int argc, char **argv)
{
	int type = 0;
	socklen_t len = sizeof(type);

	if (argc != 4 || getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_SEQPACKET) {
		fputs(
		    "airlock: __spawner is airlockd's own (it needs airlockd's channel as fd 3)\n",
		    stderr);
		return AL_EXIT_USAGE;
	}
	jail_spawner_serve(3, argv[2], argv[3]);
}

int main(int argc, char **argv)
{
	ensure_stdio();
	al_json_seed(); /* before the first JSON object: a policy's check */
	if (argc < 2) {
		usage(stderr);
		return AL_EXIT_USAGE;
	}
	if (strcmp(argv[1], "__spawner") == 0)
		return spawner(argc, argv);
	if (strcmp(argv[1], "run") == 0)
		return cli_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "pool") == 0)
		return cli_pool(argc - 1, argv + 1);
	if (strcmp(argv[1], "template") == 0)
		return cli_template(argc - 1, argv + 1);
	/*
	 * The daemon, the client subcommands and the MCP server live in their own binaries
	 * (airlockd, airlock-remote, airlock-mcp) next to this one: they link libmicrohttpd,
	 * SQLite, libarchive and libcurl, whose loading would cost `airlock run` ~10 ms on every
	 * sandbox.
	 */
	static const char *const remote[] = {"create", "exec", "cp",	"ls",
					     "logs",   "stop", "policy"};
	if (strcmp(argv[1], "serve") == 0)
		return exec_sibling("airlockd", argv + 1);
	if (strcmp(argv[1], "mcp") == 0)
		return exec_sibling("airlock-mcp", argv + 1);
	if (strcmp(argv[1], "oci") == 0) /* the OCI runtime (docs/oci.md) */
		return exec_sibling("airlock-oci", argv + 1);
	for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++)
		if (strcmp(argv[1], remote[i]) == 0)
			return exec_sibling("airlock-remote", argv + 1);
	if (cli_is_help(argv[1])) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
		puts("airlock " AIRLOCK_VERSION);
		return 0;
	}
	fprintf(stderr, "airlock: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return AL_EXIT_USAGE;
}
