/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the gateway's control lines (src/net/gwctl.c).
 *
 * The input, cut at its first NUL, is one line. Invariants, any violation aborts:
 *   - the parser accepts or refuses it, never reads past it;
 *   - what it accepts, sent again (net_gwctl_send into a pipe), parses to the same
 *     message: kind, code, generation and text;
 *   - a parsed text has no control character.
 */
#include "net/gwctl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line = malloc(size + 1), back[4096];
	struct net_gwctl m, again;
	int p[2];
	ssize_t n;

	memcpy(line, data, size);
	line[size] = '\0';
	if (net_gwctl_parse(line, &m) == 0 && size < 2048 && pipe(p) == 0) {
		for (const char *t = m.text; t && *t; t++)
			must((unsigned char)*t >= 0x20 && *t != 0x7f);
		must(net_gwctl_send(p[1], &m) == 0);
		n = read(p[0], back, sizeof(back) - 1);
		must(n > 0 && back[n - 1] == '\n');
		back[n - 1] = '\0';
		must(net_gwctl_parse(back, &again) == 0);
		must(again.kind == m.kind && again.code == m.code && again.gen == m.gen);
		/* an empty error text is sent as "-" */
		must(!m.text || !again.text || strcmp(m.text, again.text) == 0 ||
		     (!m.text[0] && !strcmp(again.text, "-")));
		close(p[0]);
		close(p[1]);
	}
	free(line);
	return 0;
}
