/* SPDX-License-Identifier: MIT */
/*
 * airlock-oci: the OCI runtime command line, in runc's dialect (docs/oci.md). Global
 * options come before the command, as containerd's shim and podman pass them. An error is
 * one line on stderr and, with --log, one JSON line {"level":"error","msg":...} that
 * containerd shows (it reads the log's last error line).
 */
#include "oci/oci.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef AIRLOCK_VERSION
#define AIRLOCK_VERSION "dev"
#endif

static void log_line(const struct oci_opts *o, const char *level, const char *msg)
{
	_cleanup_close_ int fd = -1;
	char ts[40];
	time_t now = time(NULL);
	struct tm tm;
	json_t *j;
	char *line;

	if (!o->log)
		return;
	fd = open(o->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (!o->log_json) {
		dprintf(fd, "time=\"%s\" level=%s msg=\"%s\"\n", ts, level, msg);
		return;
	}
	j = json_pack("{s:s, s:s, s:s}", "level", level, "msg", msg, "time", ts);
	line = json_dumps(j, JSON_COMPACT);
	if (line)
		dprintf(fd, "%s\n", line);
	free(line);
	json_decref(j);
}

int oci_fail(const struct oci_opts *o, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_line(o, "error", msg);
	fprintf(stderr, "airlock-oci: %s\n", msg);
	return 1;
}

static void usage(FILE *f)
{
	fputs("usage: airlock-oci [--root DIR] [--log FILE] [--log-format text|json] "
	      "[--systemd-cgroup] [--debug] COMMAND ...\n"
	      "commands (runc's dialect, docs/oci.md):\n"
	      "  create [--bundle DIR] [--pid-file F] [--console-socket PATH] ID\n"
	      "  exec [--process P.json] [--detach] [--pid-file F] [--console-socket S] [--tty] "
	      "ID [CMD...]\n"
	      "  start ID | state ID | kill [--all] ID [SIGNAL] | delete [--force] ID\n"
	      "  list [--format json] | ps [--format json] ID | pause ID | resume ID\n"
	      "  update --resources - ID | features | --version\n",
	      f);
}

/* The global options; returns the index of the command, or -1. */
static int parse_global(int argc, char **argv, struct oci_opts *o)
{
	static const struct option opts[] = {{"root", required_argument, NULL, 'r'},
					     {"log", required_argument, NULL, 'l'},
					     {"log-format", required_argument, NULL, 'f'},
					     {"systemd-cgroup", no_argument, NULL, 's'},
					     {"debug", no_argument, NULL, 'd'},
					     {"rootless", required_argument, NULL, 'R'},
					     {"criu", required_argument, NULL, 'c'},
					     {"version", no_argument, NULL, 'v'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	int ch;

	while ((ch = getopt_long_only(argc, argv, "+vh", opts, NULL)) != -1) {
		switch (ch) {
		case 'r':
			o->root = optarg;
			break;
		case 'l':
			o->log = optarg;
			break;
		case 'f':
			o->log_json = strcmp(optarg, "json") == 0;
			break;
		case 'd':
			o->debug = true;
			break;
		case 's': /* airlock manages its own cgroups (airlock/oci-ID), systemd or not */
		case 'R':
		case 'c':
			break;
		case 'v':
			printf("airlock-oci version %s\nspec: %s\n", AIRLOCK_VERSION, OCI_VERSION);
			exit(0);
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	return optind < argc ? optind : -1;
}

/* The state directory when no --root is given: $AIRLOCK_OCI_ROOT if it is an absolute path,
 * else /run/airlock-oci. podman 4.3 passes its --runtime-flag options to create and start
 * but not to the delete of its clean-up (`podman run --rm`): a root set in the
 * environment reaches that delete too (docs/oci.md). */
static const char *default_root(void)
{
	const char *env = getenv("AIRLOCK_OCI_ROOT");

	return env && env[0] == '/' ? env : OCI_ROOT_DEFAULT;
}

int main(int argc, char **argv)
{
	struct oci_opts o = {.root = default_root()};
	int i = parse_global(argc, argv, &o), n;
	char **av;
	const char *cmd;

	if (i < 0) {
		usage(stderr);
		return 1;
	}
	av = argv + i;
	n = argc - i;
	cmd = av[0];
	if (strcmp(cmd, "create") == 0)
		return oci_create(&o, n, av);
	if (strcmp(cmd, "start") == 0)
		return oci_start(&o, n, av);
	if (strcmp(cmd, "exec") == 0)
		return oci_exec(&o, n, av);
	if (strcmp(cmd, "state") == 0)
		return oci_cmd_state(&o, n, av);
	if (strcmp(cmd, "kill") == 0)
		return oci_cmd_kill(&o, n, av);
	if (strcmp(cmd, "delete") == 0)
		return oci_cmd_delete(&o, n, av);
	if (strcmp(cmd, "list") == 0)
		return oci_cmd_list(&o, n, av);
	if (strcmp(cmd, "ps") == 0)
		return oci_cmd_ps(&o, n, av);
	if (strcmp(cmd, "update") == 0)
		return oci_cmd_update(&o, n, av);
	if (strcmp(cmd, "pause") == 0 || strcmp(cmd, "resume") == 0)
		return oci_cmd_pause(&o, n, av, cmd[0] == 'p');
	if (strcmp(cmd, "features") == 0)
		return oci_cmd_features(&o, n, av);
	if (strcmp(cmd, "version") == 0) {
		printf("airlock-oci version %s\nspec: %s\n", AIRLOCK_VERSION, OCI_VERSION);
		return 0;
	}
	return oci_fail(&o,
			"unknown command '%s' (checkpoint, restore and events are not "
			"served: docs/oci.md)",
			cmd);
}
