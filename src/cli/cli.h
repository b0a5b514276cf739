/* SPDX-License-Identifier: MIT */
#ifndef AL_CLI_CLI_H
#define AL_CLI_CLI_H

#include <airlock/airlock.h>
#include <stddef.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int cli_run(int argc, char **argv);
/* "help", "--help" or "-h": the argument asks for a command's usage. */
static inline bool cli_is_help(const char *arg)
{
	return strcmp(arg, "help") == 0 || strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

int cli_pool(int argc, char **argv);
int cli_template(int argc, char **argv);
int cli_serve(int argc, char **argv);
void cli_serve_usage(FILE *out);
void cli_run_usage(FILE *out);

/* json.c: the --json result object (one line, UTF-8; invalid bytes become U+FFFD). */
int cli_print_json(FILE *out, const struct al_result *res, const char *out_buf, size_t out_len,
		   const char *err_buf, size_t err_len, json_t *egress);

#endif
