/* SPDX-License-Identifier: MIT */
/*
 * Writes one valid frame of every agent protocol message type into a directory,
 * plus frames at (and two just over) the limits, as seeds for tests/fuzz/fuzz_proto.c:
 *
 *   gcc -D_GNU_SOURCE -Iinclude -Isrc src/proto/proto.c src/common/xalloc.c \
 *	tests/fuzz/gen_proto_seeds.c -o gen_proto_seeds
 *   ./gen_proto_seeds tests/fuzz/corpus/proto
 */
#include "proto/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(lit) (lit), (sizeof(lit) - 1)

static int write_seed(const char *dir, const char *name, struct proto_buf *b)
{
	char path[4096];
	FILE *f;
	int ok;

	if (proto_finish(b) < 0) {
		fprintf(stderr, "%s: frame too big\n", name);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	f = fopen(path, "wb");
	if (!f) {
		perror(path);
		return -1;
	}
	ok = fwrite(b->data, 1, b->len, f) == b->len;
	if (fclose(f) != 0 || !ok) {
		perror(path);
		return -1;
	}
	return 0;
}

static void put_entry(struct proto_buf *b, const char *id, uint32_t pid, int ended)
{
	size_t mark = proto_nest_begin(b, PT_COMMAND);

	proto_put_str(b, PT_CMD_ID, id, strlen(id));
	proto_put_u32(b, PT_PID, pid);
	if (ended)
		proto_put_i32(b, PT_STATUS, 0x100);
	proto_put_u64(b, PT_OUT_BYTES, 4096);
	proto_put_u64(b, PT_ERR_BYTES, 12);
	proto_put_u64(b, PT_TIME_MS, 1700000000000ull);
	proto_nest_end(b, mark);
}

static int daemon_seeds(const char *dir, struct proto_buf *b)
{
	int r = 0;

	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("cmd-1"));
	proto_put_str(b, PT_ARG, S("true"));
	r |= write_seed(dir, "exec-min", b);

	proto_begin(b, PROTO_EXEC, 2);
	proto_put_str(b, PT_CMD_ID, S("cmd_2"));
	proto_put_str(b, PT_ARG, S("python3"));
	proto_put_str(b, PT_ARG, S("-c"));
	proto_put_str(b, PT_ARG, S("print(1)"));
	proto_put_str(b, PT_ENV, S("PATH=/usr/bin:/bin"));
	proto_put_str(b, PT_ENV, S("HOME=/workspace"));
	proto_put_str(b, PT_CWD, S("/workspace"));
	proto_put_u32(b, PT_UID, 1000);
	proto_put_u8(b, PT_TTY, 0);
	proto_put_bytes(b, PT_DATA, "in\n", 3);
	proto_put_u8(b, PT_STDIN_EOF, 1);
	r |= write_seed(dir, "exec-full", b);

	proto_begin(b, PROTO_STDIN, 3);
	proto_put_str(b, PT_CMD_ID, S("cmd_2"));
	proto_put_bytes(b, PT_DATA, "line\n\0\xff", 7);
	r |= write_seed(dir, "stdin", b);

	proto_begin(b, PROTO_STDIN_CLOSE, 4);
	proto_put_str(b, PT_CMD_ID, S("cmd_2"));
	r |= write_seed(dir, "stdin-close", b);

	proto_begin(b, PROTO_KILL, 5);
	proto_put_str(b, PT_CMD_ID, S("cmd_2"));
	proto_put_u32(b, PT_SIGNAL, 9);
	r |= write_seed(dir, "kill", b);

	proto_begin(b, PROTO_REPLAY, 6);
	proto_put_str(b, PT_CMD_ID, S("cmd_2"));
	r |= write_seed(dir, "replay", b);

	proto_begin(b, PROTO_REPLAY, 7);
	proto_put_str(b, PT_CMD_ID, S("cmd_2"));
	proto_put_u64(b, PT_OFFSET, 4096);
	proto_put_u8(b, PT_STREAM, 2);
	r |= write_seed(dir, "replay-stream", b);

	proto_begin(b, PROTO_PING, 8);
	r |= write_seed(dir, "ping", b);

	proto_begin(b, PROTO_EXEC, 9);
	proto_put_str(b, PT_CMD_ID, S("cmd_3"));
	proto_put_str(b, PT_ARG, S("bash"));
	proto_put_u8(b, PT_TTY, 1);
	proto_put_u32(b, PT_ROWS, 24);
	proto_put_u32(b, PT_COLS, 80);
	r |= write_seed(dir, "exec-tty", b);

	proto_begin(b, PROTO_RESIZE, 10);
	proto_put_str(b, PT_CMD_ID, S("cmd_3"));
	proto_put_u32(b, PT_ROWS, 50);
	proto_put_u32(b, PT_COLS, 132);
	r |= write_seed(dir, "resize", b);
	return r;
}

static int agent_seeds(const char *dir, struct proto_buf *b)
{
	int r = 0;

	proto_begin(b, PROTO_HELLO, 0);
	proto_put_u32(b, PT_VERSION, PROTO_VERSION);
	r |= write_seed(dir, "hello-empty", b);

	proto_begin(b, PROTO_HELLO, 0);
	proto_put_u32(b, PT_VERSION, PROTO_VERSION);
	proto_put_u64(b, PT_TIME_MS, 1700000000123ull);
	put_entry(b, "running", 17, 0);
	put_entry(b, "ended", 18, 1);
	r |= write_seed(dir, "hello-commands", b);

	proto_begin(b, PROTO_OK, 1);
	proto_put_u32(b, PT_PID, 17);
	r |= write_seed(dir, "ok-pid", b);

	proto_begin(b, PROTO_OK, 4);
	r |= write_seed(dir, "ok", b);

	proto_begin(b, PROTO_ERROR, 1);
	proto_put_i32(b, PT_ERRNO, 2);
	proto_put_str(b, PT_MESSAGE, S("execvp python4: No such file or directory"));
	r |= write_seed(dir, "error", b);

	proto_begin(b, PROTO_OUTPUT, 0);
	proto_put_str(b, PT_CMD_ID, S("cmd_2"));
	proto_put_u8(b, PT_STREAM, 1);
	proto_put_u64(b, PT_OFFSET, 0);
	proto_put_bytes(b, PT_DATA, "1\n", 2);
	r |= write_seed(dir, "output", b);

	proto_begin(b, PROTO_EXIT, 0);
	proto_put_str(b, PT_CMD_ID, S("cmd_2"));
	proto_put_i32(b, PT_STATUS, 0);
	r |= write_seed(dir, "exit", b);

	proto_begin(b, PROTO_EXIT, 6);
	proto_put_str(b, PT_CMD_ID, S("cmd_2"));
	proto_put_i32(b, PT_STATUS, 0x9);
	proto_put_i32(b, PT_ERRNO, 1);
	proto_put_str(b, PT_MESSAGE, S("killed by seccomp"));
	proto_put_u64(b, PT_TIME_MS, 1700000000999ull);
	proto_put_u64(b, PT_OUT_BYTES, 2);
	proto_put_u64(b, PT_ERR_BYTES, 0);
	r |= write_seed(dir, "exit-full", b);

	proto_begin(b, PROTO_PONG, 8);
	r |= write_seed(dir, "pong", b);
	return r;
}

/* Frames at the limits, so the fuzzer starts next to the E2BIG edges. */
static int limit_seeds(const char *dir, struct proto_buf *b)
{
	char *big = malloc(PROTO_MAX_STR);
	int r = 0;

	if (!big)
		return -1;
	memset(big, 'a', PROTO_MAX_STR);
	proto_begin(b, PROTO_EXEC, 9);
	proto_put_str(b, PT_CMD_ID, big, PROTO_ID_MAX);
	proto_put_str(b, PT_ARG, S("sh"));
	proto_put_str(b, PT_ARG, big, PROTO_MAX_STR);
	r |= write_seed(dir, "exec-max-arg", b);

	proto_begin(b, PROTO_EXEC, 10);
	proto_put_str(b, PT_CMD_ID, S("many"));
	for (int i = 0; i < PROTO_MAX_ARGS; i++)
		proto_put_str(b, PT_ARG, S("x"));
	for (int i = 0; i < PROTO_MAX_ARGS; i++)
		proto_put_str(b, PT_ENV, S("A="));
	r |= write_seed(dir, "exec-max-args", b);

	proto_begin(b, PROTO_ERROR, 11);
	proto_put_i32(b, PT_ERRNO, 4095);
	proto_put_str(b, PT_MESSAGE, big, PROTO_MAX_MESSAGE);
	r |= write_seed(dir, "error-max-message", b);

	proto_begin(b, PROTO_HELLO, 0);
	proto_put_u32(b, PT_VERSION, PROTO_VERSION);
	for (int i = 0; i < 64; i++)
		put_entry(b, "c", (uint32_t)i + 1, i & 1);
	r |= write_seed(dir, "hello-64-commands", b);
	/* Just over the limits (invalid: -E2BIG), so mutations explore both sides. */
	proto_begin(b, PROTO_ERROR, 12);
	proto_put_i32(b, PT_ERRNO, 5);
	proto_put_str(b, PT_MESSAGE, big, PROTO_MAX_MESSAGE + 1);
	r |= write_seed(dir, "over-message", b);

	proto_begin(b, PROTO_EXEC, 13);
	proto_put_str(b, PT_CMD_ID, S("big"));
	proto_put_str(b, PT_ARG, big, PROTO_MAX_STR - 64); /* room to grow over */
	proto_put_str(b, PT_CWD, big, 65);
	r |= write_seed(dir, "over-relative-cwd", b);
	free(big);
	return r;
}

int main(int argc, char **argv)
{
	struct proto_buf b = {0};
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	r = daemon_seeds(argv[1], &b) | agent_seeds(argv[1], &b) | limit_seeds(argv[1], &b);
	proto_buf_free(&b);
	return r ? 1 : 0;
}
