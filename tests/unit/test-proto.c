/* SPDX-License-Identifier: MIT */
#include "proto/proto.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define S(lit) (lit), (sizeof(lit) - 1)

static int str_eq(const char *p, size_t len, const char *want)
{
	return p && len == strlen(want) && memcmp(p, want, len) == 0;
}

/* Finish b and decode it; the frame stays in b for the caller. */
static int roundtrip(struct proto_buf *b, struct proto_msg *m)
{
	if (proto_finish(b) < 0)
		return -1000;
	return proto_decode(b->data, b->len, m);
}

/* Finish b, decode, and check the exact error. */
static void expect(struct proto_buf *b, int want, const char *what)
{
	struct proto_msg m;
	int rc = roundtrip(b, &m);

	CHECK(rc == want, "%s -> %d (want %d)", what, rc, want);
}

/* Decode raw bytes and check the exact error. */
static void expect_raw(const uint8_t *p, size_t len, int want, const char *what)
{
	struct proto_msg m;
	int rc = proto_decode(p, len, &m);

	CHECK(rc == want, "%s -> %d (want %d)", what, rc, want);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void rt_exec(struct proto_buf *b)
{
	struct proto_msg m;
	size_t len;
	const char *s;

	proto_begin(b, PROTO_EXEC, 7);
	proto_put_str(b, PT_CMD_ID, S("cmd_1-A"));
	proto_put_str(b, PT_ARG, S("python3"));
	proto_put_str(b, PT_ENV, S("PATH=/usr/bin"));
	proto_put_str(b, PT_ARG, S("-c"));
	proto_put_str(b, PT_ARG, S(""));
	proto_put_str(b, PT_ENV, S("EMPTY="));
	proto_put_str(b, PT_CWD, S("/workspace"));
	proto_put_u32(b, PT_UID, 1000);
	proto_put_u8(b, PT_TTY, 1);
	CHECK(roundtrip(b, &m) == 0, "EXEC decodes");
	CHECK(m.type == PROTO_EXEC && m.id == 7, "EXEC type and id");
	CHECK(str_eq(m.cmd_id, m.cmd_id_len, "cmd_1-A"), "EXEC cmd_id");
	CHECK(m.n_args == 3 && m.n_env == 2, "EXEC counts %zu %zu", m.n_args, m.n_env);
	s = proto_msg_arg(&m, 0, &len);
	CHECK(str_eq(s, len, "python3"), "EXEC arg 0");
	s = proto_msg_arg(&m, 1, &len);
	CHECK(str_eq(s, len, "-c"), "EXEC arg 1");
	s = proto_msg_arg(&m, 2, &len);
	CHECK(s && len == 0, "EXEC arg 2 is empty");
	CHECK(proto_msg_arg(&m, 3, &len) == NULL, "EXEC arg 3 out of range");
	s = proto_msg_env(&m, 0, &len);
	CHECK(str_eq(s, len, "PATH=/usr/bin"), "EXEC env 0");
	s = proto_msg_env(&m, 1, &len);
	CHECK(str_eq(s, len, "EMPTY="), "EXEC env 1");
	CHECK(proto_msg_env(&m, 2, &len) == NULL, "EXEC env 2 out of range");
	{
		static const char *want[] = {"python3", "-c", ""};
		size_t cur = 0, n = 0, ok = 0;

		while ((s = proto_msg_next_arg(&m, &cur, &len))) {
			ok += n < 3 && str_eq(s, len, want[n]) && s == proto_msg_arg(&m, n, NULL);
			n++;
		}
		CHECK(n == 3 && ok == 3, "EXEC arg iterator yields the 3 args in order");
		CHECK(proto_msg_next_arg(&m, &cur, &len) == NULL,
		      "EXEC arg iterator end is sticky");
		cur = 0;
		s = proto_msg_next_env(&m, &cur, &len);
		CHECK(str_eq(s, len, "PATH=/usr/bin"), "EXEC env iterator first");
		s = proto_msg_next_env(&m, &cur, &len);
		CHECK(str_eq(s, len, "EMPTY=") && !proto_msg_next_env(&m, &cur, &len),
		      "EXEC env iterator second, then end");
	}
	CHECK(str_eq(m.cwd, m.cwd_len, "/workspace"), "EXEC cwd");
	CHECK(m.uid == 1000 && m.tty == 1, "EXEC uid and tty");
	CHECK(m.present == ((1u << PT_CMD_ID) | (1u << PT_CWD) | (1u << PT_UID) | (1u << PT_TTY)),
	      "EXEC present mask 0x%x", m.present);
	CHECK(m.data == NULL && m.stdin_eof == 0, "EXEC without stdin fields");

	/* An EXEC may carry the command's first stdin bytes and their end. */
	proto_begin(b, PROTO_EXEC, 9);
	proto_put_str(b, PT_CMD_ID, S("c2"));
	proto_put_str(b, PT_ARG, S("cat"));
	proto_put_bytes(b, PT_DATA, "a\0b", 3);
	proto_put_u8(b, PT_STDIN_EOF, 1);
	CHECK(roundtrip(b, &m) == 0, "EXEC with DATA and STDIN_EOF decodes");
	CHECK(m.data_len == 3 && memcmp(m.data, "a\0b", 3) == 0 && m.stdin_eof == 1,
	      "EXEC stdin bytes and eof");
}

static void rt_stdin_kill_replay(struct proto_buf *b)
{
	static const uint8_t bytes[] = {0, 1, 2, 0xff, 0};
	struct proto_msg m;

	proto_begin(b, PROTO_STDIN, 8);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_bytes(b, PT_DATA, bytes, sizeof(bytes));
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_STDIN && m.id == 8, "STDIN decodes");
	CHECK(m.data_len == sizeof(bytes) && memcmp(m.data, bytes, sizeof(bytes)) == 0,
	      "STDIN data with NUL bytes");

	proto_begin(b, PROTO_STDIN_CLOSE, 9);
	proto_put_str(b, PT_CMD_ID, S("c"));
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_STDIN_CLOSE &&
		  str_eq(m.cmd_id, m.cmd_id_len, "c"),
	      "STDIN_CLOSE decodes");

	proto_begin(b, PROTO_KILL, 10);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_u32(b, PT_SIGNAL, 9);
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_KILL && m.signal == 9, "KILL decodes");

	proto_begin(b, PROTO_REPLAY, 11);
	proto_put_str(b, PT_CMD_ID, S("c"));
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_REPLAY && m.present == (1u << PT_CMD_ID),
	      "REPLAY with only a command id");
	proto_begin(b, PROTO_REPLAY, 12);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_u64(b, PT_OFFSET, 1ull << 40);
	proto_put_u8(b, PT_STREAM, 2);
	CHECK(roundtrip(b, &m) == 0 && m.offset == 1ull << 40 && m.stream == 2,
	      "REPLAY with offset and stream");

	proto_begin(b, PROTO_RESIZE, 14);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_u32(b, PT_ROWS, 50);
	proto_put_u32(b, PT_COLS, 132);
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_RESIZE && m.rows == 50 && m.cols == 132,
	      "RESIZE decodes");
	proto_begin(b, PROTO_RESIZE, 14);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_u32(b, PT_ROWS, 50);
	CHECK(roundtrip(b, &m) == -EPROTO, "RESIZE without COLS is refused");
	proto_begin(b, PROTO_RESIZE, 14);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_u32(b, PT_ROWS, 0);
	proto_put_u32(b, PT_COLS, 80);
	CHECK(roundtrip(b, &m) == -EBADMSG, "RESIZE with 0 rows is refused");
	proto_begin(b, PROTO_RESIZE, 14);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_u32(b, PT_ROWS, 24);
	proto_put_u32(b, PT_COLS, PROTO_MAX_WINSIZE + 1);
	CHECK(roundtrip(b, &m) == -EBADMSG, "RESIZE over 65535 columns is refused");
	proto_begin(b, PROTO_RESIZE, 14);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_u8(b, PT_ROWS, 24);
	proto_put_u32(b, PT_COLS, 80);
	CHECK(roundtrip(b, &m) == -EBADMSG, "RESIZE with a 1-byte ROWS is refused");
	proto_begin(b, PROTO_KILL, 14);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_u32(b, PT_SIGNAL, 9);
	proto_put_u32(b, PT_ROWS, 24);
	CHECK(roundtrip(b, &m) == -EPROTO, "ROWS on a KILL is refused");
	proto_begin(b, PROTO_EXEC, 14);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_str(b, PT_ARG, S("bash"));
	proto_put_u8(b, PT_TTY, 1);
	proto_put_u32(b, PT_ROWS, 24);
	proto_put_u32(b, PT_COLS, 80);
	CHECK(roundtrip(b, &m) == 0 && m.tty == 1 && m.rows == 24 && m.cols == 80,
	      "EXEC with a TTY and its size decodes");

	proto_begin(b, PROTO_PING, 13);
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_PING && m.id == 13 && b->len == PROTO_HEADER,
	      "PING decodes");
	proto_begin(b, PROTO_PONG, 13);
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_PONG && m.id == 13, "PONG decodes");
}

static void rt_agent(struct proto_buf *b)
{
	struct proto_msg m;

	proto_begin(b, PROTO_OK, 7);
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_OK && m.present == 0, "OK without pid");
	proto_begin(b, PROTO_OK, 7);
	proto_put_u32(b, PT_PID, 42);
	CHECK(roundtrip(b, &m) == 0 && m.pid == 42, "OK with pid");

	proto_begin(b, PROTO_ERROR, 7);
	proto_put_i32(b, PT_ERRNO, ENOENT);
	proto_put_str(b, PT_MESSAGE, S("execvp python4: No such file"));
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_ERROR && m.err == ENOENT &&
		  str_eq(m.message, m.message_len, "execvp python4: No such file"),
	      "ERROR decodes");

	proto_begin(b, PROTO_OUTPUT, 0);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_u8(b, PT_STREAM, 1);
	proto_put_u64(b, PT_OFFSET, 123456789012ull);
	proto_put_bytes(b, PT_DATA, "hello\n", 6);
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_OUTPUT && m.stream == 1 &&
		  m.offset == 123456789012ull && m.data_len == 6 && !memcmp(m.data, "hello\n", 6),
	      "OUTPUT decodes");

	proto_begin(b, PROTO_EXIT, 0);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_i32(b, PT_STATUS, -1);
	proto_put_i32(b, PT_ERRNO, EPERM);
	proto_put_str(b, PT_MESSAGE, S("seccomp"));
	proto_put_u64(b, PT_TIME_MS, 1700000000000ull);
	proto_put_u64(b, PT_OUT_BYTES, 6);
	proto_put_u64(b, PT_ERR_BYTES, 0);
	CHECK(roundtrip(b, &m) == 0 && m.type == PROTO_EXIT && m.status == -1 && m.err == EPERM &&
		  m.time_ms == 1700000000000ull && m.out_bytes == 6 && m.err_bytes == 0 &&
		  (m.present & (1u << PT_ERR_BYTES)),
	      "EXIT decodes, negative status kept");
	proto_begin(b, PROTO_EXIT, 0);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_i32(b, PT_STATUS, 0x0900);
	CHECK(roundtrip(b, &m) == 0 && m.status == 0x0900 && !(m.present & (1u << PT_ERRNO)),
	      "EXIT minimal");
}

static void put_entry(struct proto_buf *b, const char *id, uint32_t pid, int with_status)
{
	size_t mark = proto_nest_begin(b, PT_COMMAND);

	proto_put_str(b, PT_CMD_ID, id, strlen(id));
	proto_put_u32(b, PT_PID, pid);
	if (with_status)
		proto_put_i32(b, PT_STATUS, 0);
	proto_put_u64(b, PT_OUT_BYTES, pid * 10ull);
	proto_put_u64(b, PT_ERR_BYTES, pid * 20ull);
	proto_put_u64(b, PT_TIME_MS, 99);
	proto_nest_end(b, mark);
}

static void rt_hello(struct proto_buf *b)
{
	struct proto_msg m, e;
	size_t cur = 0;
	int rc;

	proto_begin(b, PROTO_HELLO, 0);
	proto_put_u32(b, PT_VERSION, PROTO_VERSION);
	CHECK(roundtrip(b, &m) == 0 && m.version == PROTO_VERSION && m.n_commands == 0,
	      "HELLO without commands");
	CHECK(proto_hello_next(&m, &cur, &e) == 0, "HELLO without commands iterates nothing");

	proto_begin(b, PROTO_HELLO, 0);
	put_entry(b, "first", 100, 0);
	proto_put_u32(b, PT_VERSION, PROTO_VERSION);
	proto_put_u64(b, PT_TIME_MS, 5);
	put_entry(b, "second", 200, 1);
	CHECK(roundtrip(b, &m) == 0 && m.n_commands == 2 && m.time_ms == 5,
	      "HELLO with 2 commands");
	cur = 0;
	rc = proto_hello_next(&m, &cur, &e);
	CHECK(rc == 1 && str_eq(e.cmd_id, e.cmd_id_len, "first") && e.pid == 100 &&
		  e.out_bytes == 1000 && e.err_bytes == 2000 && e.time_ms == 99 &&
		  !(e.present & (1u << PT_STATUS)),
	      "HELLO entry 1 (running)");
	rc = proto_hello_next(&m, &cur, &e);
	CHECK(rc == 1 && str_eq(e.cmd_id, e.cmd_id_len, "second") && e.pid == 200 &&
		  (e.present & (1u << PT_STATUS)) && e.status == 0,
	      "HELLO entry 2 (ended)");
	CHECK(proto_hello_next(&m, &cur, &e) == 0, "HELLO end");
	CHECK(proto_hello_next(&m, &cur, &e) == 0, "HELLO end is sticky");
	CHECK(proto_msg_arg(&m, 0, NULL) == NULL, "arg accessor refuses a HELLO");
	cur = 0;
	CHECK(proto_msg_next_arg(&m, &cur, NULL) == NULL, "arg iterator refuses a HELLO");
}

static void frame_size(void)
{
	uint8_t h[4] = {0};

	CHECK(proto_frame_size(h, 0) == 0 && proto_frame_size(h, 3) == 0,
	      "frame size needs 4 bytes");
	put_le32(h, 8);
	CHECK(proto_frame_size(h, 4) == PROTO_HEADER, "frame size of an empty frame");
	put_le32(h, 7);
	CHECK(proto_frame_size(h, 4) == -EBADMSG, "frame size under the header");
	put_le32(h, PROTO_MAX_FRAME - 4);
	CHECK(proto_frame_size(h, 4) == PROTO_MAX_FRAME, "frame size at the limit");
	put_le32(h, PROTO_MAX_FRAME - 3);
	CHECK(proto_frame_size(h, 4) == -E2BIG, "frame size over the limit");
	put_le32(h, 0xffffffffu);
	CHECK(proto_frame_size(h, 4) == -E2BIG, "frame size 0xffffffff");
}

static void bad_header(struct proto_buf *b)
{
	uint8_t raw[64] = {0};

	expect_raw(raw, 0, -EBADMSG, "empty input");
	proto_begin(b, PROTO_PING, 1);
	proto_finish(b);
	expect_raw(b->data, 3, -EBADMSG, "3 bytes");
	expect_raw(b->data, PROTO_HEADER - 1, -EBADMSG, "truncated header");
	memcpy(raw, b->data, PROTO_HEADER);
	put_le32(raw, 4);
	expect_raw(raw, 8, -EBADMSG, "declared length under the header");
	put_le32(raw, PROTO_MAX_FRAME);
	expect_raw(raw, PROTO_HEADER, -E2BIG, "declared length over the max");
	memcpy(raw, b->data, PROTO_HEADER);
	raw[PROTO_HEADER] = 0;
	expect_raw(raw, PROTO_HEADER + 1, -EBADMSG, "trailing byte after the frame");
	raw[6] = 1;
	expect_raw(raw, PROTO_HEADER, -EPROTO, "flags set");
	raw[6] = 0;
	raw[7] = 0x80;
	expect_raw(raw, PROTO_HEADER, -EPROTO, "high flag set");
	raw[7] = 0;
	raw[4] = 0;
	expect_raw(raw, PROTO_HEADER, -EPROTO, "type 0");
	raw[4] = 7;
	expect_raw(raw, PROTO_HEADER, -EPROTO, "type 7");
	raw[4] = 70;
	expect_raw(raw, PROTO_HEADER, -EPROTO, "type 70");
	raw[4] = PROTO_PING;
	raw[5] = 1;
	expect_raw(raw, PROTO_HEADER, -EPROTO, "type 0x106");

	/* Every proper prefix of a valid EXEC is refused. */
	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("x"));
	proto_put_str(b, PT_ARG, S("true"));
	proto_finish(b);
	{
		struct proto_msg m;
		size_t bad = 0;

		for (size_t n = 0; n < b->len; n++)
			bad += proto_decode(b->data, n, &m) == -EBADMSG;
		CHECK(bad == b->len, "every truncation of an EXEC is -EBADMSG (%zu/%zu)", bad,
		      b->len);
		CHECK(proto_decode(b->data, b->len, &m) == 0, "the whole EXEC decodes");
	}
}

static void bad_tags(struct proto_buf *b)
{
	proto_begin(b, PROTO_PING, 1);
	proto_put_u32(b, (enum proto_tag)99, 1);
	expect(b, -EPROTO, "unknown tag 99");
	proto_begin(b, PROTO_PING, 1);
	proto_put_u32(b, (enum proto_tag)0, 1);
	expect(b, -EPROTO, "tag 0");
	proto_begin(b, PROTO_PING, 1);
	proto_put_u32(b, (enum proto_tag)0xffff, 1);
	expect(b, -EPROTO, "tag 0xffff");
	proto_begin(b, PROTO_PONG, 1);
	proto_put_u64(b, PT_TIME_MS, 1);
	expect(b, -EPROTO, "PONG with a field");
	proto_begin(b, PROTO_KILL, 1);
	proto_put_str(b, PT_CMD_ID, S("c"));
	proto_put_u32(b, PT_SIGNAL, 9);
	proto_put_bytes(b, PT_DATA, "x", 1);
	expect(b, -EPROTO, "KILL with DATA (tag of another type)");
	proto_begin(b, PROTO_OK, 1);
	proto_put_str(b, PT_ARG, S("x"));
	expect(b, -EPROTO, "OK with ARG");

	proto_begin(b, PROTO_STDIN_CLOSE, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_str(b, PT_CMD_ID, S("a"));
	expect(b, -EPROTO, "duplicate CMD_ID");
	proto_begin(b, PROTO_KILL, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_u32(b, PT_SIGNAL, 9);
	proto_put_u32(b, PT_SIGNAL, 15);
	expect(b, -EPROTO, "duplicate SIGNAL");
	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("c3"));
	proto_put_str(b, PT_ARG, S("cat"));
	proto_put_u8(b, PT_STDIN_EOF, 1);
	proto_put_u8(b, PT_STDIN_EOF, 1);
	expect(b, -EPROTO, "STDIN_EOF twice");
	proto_begin(b, PROTO_STDIN, 1);
	proto_put_str(b, PT_CMD_ID, S("c3"));
	proto_put_bytes(b, PT_DATA, "x", 1);
	proto_put_u8(b, PT_STDIN_EOF, 1);
	expect(b, -EPROTO, "STDIN_EOF outside EXEC");
	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_str(b, PT_ARG, S("x"));
	proto_put_str(b, PT_CWD, S("/"));
	proto_put_str(b, PT_CWD, S("/tmp"));
	expect(b, -EPROTO, "duplicate CWD");
}

static void missing_required(struct proto_buf *b)
{
	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_ARG, S("true"));
	expect(b, -EPROTO, "EXEC without CMD_ID");
	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_str(b, PT_ENV, S("A=1"));
	expect(b, -EPROTO, "EXEC without ARG");
	proto_begin(b, PROTO_STDIN, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	expect(b, -EPROTO, "STDIN without DATA");
	proto_begin(b, PROTO_KILL, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	expect(b, -EPROTO, "KILL without SIGNAL");
	proto_begin(b, PROTO_REPLAY, 1);
	proto_put_u64(b, PT_OFFSET, 0);
	expect(b, -EPROTO, "REPLAY without CMD_ID");
	proto_begin(b, PROTO_OUTPUT, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_u8(b, PT_STREAM, 1);
	proto_put_bytes(b, PT_DATA, "x", 1);
	expect(b, -EPROTO, "OUTPUT without OFFSET");
	proto_begin(b, PROTO_EXIT, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	expect(b, -EPROTO, "EXIT without STATUS");
	proto_begin(b, PROTO_ERROR, 1);
	proto_put_i32(b, PT_ERRNO, EIO);
	expect(b, -EPROTO, "ERROR without MESSAGE");
	proto_begin(b, PROTO_HELLO, 1);
	expect(b, -EPROTO, "HELLO without VERSION");
}

static void bad_integers(struct proto_buf *b)
{
	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_str(b, PT_ARG, S("x"));
	proto_put_bytes(b, PT_UID, "\1\2", 2);
	expect(b, -EBADMSG, "UID of 2 bytes");
	proto_begin(b, PROTO_OUTPUT, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_u32(b, PT_STREAM, 1);
	expect(b, -EBADMSG, "STREAM of 4 bytes");
	proto_begin(b, PROTO_REPLAY, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_u32(b, PT_OFFSET, 1);
	expect(b, -EBADMSG, "OFFSET of 4 bytes");
	proto_begin(b, PROTO_KILL, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_u64(b, PT_SIGNAL, 9);
	expect(b, -EBADMSG, "SIGNAL of 8 bytes");
	proto_begin(b, PROTO_HELLO, 1);
	proto_put_bytes(b, PT_VERSION, "", 0);
	expect(b, -EBADMSG, "VERSION of 0 bytes");
}

/* A KILL with the given signal; a REPLAY with the given stream; and friends. */
static void bad_values(struct proto_buf *b)
{
	static const struct {
		uint32_t sig;
		int want;
	} sigs[] = {{0, -EBADMSG}, {1, 0}, {64, 0}, {65, -EBADMSG}, {0xffffffffu, -EBADMSG}};
	static const struct {
		uint8_t stream;
		int want;
	} streams[] = {{0, -EBADMSG}, {1, 0}, {2, 0}, {3, -EBADMSG}, {0xff, -EBADMSG}};
	char what[64];

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		proto_begin(b, PROTO_KILL, 1);
		proto_put_str(b, PT_CMD_ID, S("a"));
		proto_put_u32(b, PT_SIGNAL, sigs[i].sig);
		snprintf(what, sizeof(what), "signal %u", sigs[i].sig);
		expect(b, sigs[i].want, what);
	}
	for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); i++) {
		proto_begin(b, PROTO_OUTPUT, 1);
		proto_put_str(b, PT_CMD_ID, S("a"));
		proto_put_u8(b, PT_STREAM, streams[i].stream);
		proto_put_u64(b, PT_OFFSET, 0);
		proto_put_bytes(b, PT_DATA, "x", 1);
		snprintf(what, sizeof(what), "stream %u", streams[i].stream);
		expect(b, streams[i].want, what);
	}
	proto_begin(b, PROTO_OUTPUT, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_u8(b, PT_STREAM, 1);
	proto_put_u64(b, PT_OFFSET, UINT64_MAX);
	proto_put_bytes(b, PT_DATA, "x", 1);
	expect(b, -EBADMSG, "OUTPUT whose offset + length overflows");
	proto_begin(b, PROTO_REPLAY, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_u8(b, PT_STREAM, 3);
	expect(b, -EBADMSG, "REPLAY stream 3");
	proto_begin(b, PROTO_OK, 1);
	proto_put_u32(b, PT_PID, 0);
	expect(b, -EBADMSG, "pid 0");
	proto_begin(b, PROTO_OK, 1);
	proto_put_u32(b, PT_PID, 0x80000000u);
	expect(b, -EBADMSG, "pid over INT32_MAX");
	proto_begin(b, PROTO_ERROR, 1);
	proto_put_i32(b, PT_ERRNO, 0);
	proto_put_str(b, PT_MESSAGE, S("x"));
	expect(b, -EBADMSG, "errno 0");
	proto_begin(b, PROTO_ERROR, 1);
	proto_put_i32(b, PT_ERRNO, -5);
	proto_put_str(b, PT_MESSAGE, S("x"));
	expect(b, -EBADMSG, "errno -5");
	proto_begin(b, PROTO_ERROR, 1);
	proto_put_i32(b, PT_ERRNO, PROTO_MAX_ERRNO + 1);
	proto_put_str(b, PT_MESSAGE, S("x"));
	expect(b, -EBADMSG, "errno 4096");
}

/* An EXEC with one extra field. */
static void exec_with(struct proto_buf *b, enum proto_tag tag, const char *s, size_t len)
{
	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_str(b, PT_ARG, S("sh"));
	proto_put_str(b, tag, s, len);
}

static void exec_with_u(struct proto_buf *b, enum proto_tag tag, int size, uint32_t v)
{
	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_str(b, PT_ARG, S("sh"));
	if (size == 1)
		proto_put_u8(b, tag, (uint8_t)v);
	else
		proto_put_u32(b, tag, v);
}

static void bad_strings(struct proto_buf *b)
{
	char id[PROTO_ID_MAX + 2];
	static const char *bad_ids[] = {"a/b", "a b", "a.b", "\xc3\xa9", "a\n", "a\0"};
	char *big;

	exec_with(b, PT_ARG, "a\0b", 3);
	expect(b, -EBADMSG, "NUL in ARG");
	exec_with(b, PT_ENV, "A=\0", 3);
	expect(b, -EBADMSG, "NUL in ENV");
	exec_with(b, PT_ENV, S("NOEQUALS"));
	expect(b, -EBADMSG, "ENV without '='");
	exec_with(b, PT_ENV, S("=value"));
	expect(b, -EBADMSG, "ENV with an empty key");
	exec_with(b, PT_CWD, S("workspace"));
	expect(b, -EBADMSG, "relative cwd");
	exec_with(b, PT_CWD, S(""));
	expect(b, -EBADMSG, "empty cwd");
	exec_with(b, PT_CWD, "/a\0", 3);
	expect(b, -EBADMSG, "NUL in cwd");
	exec_with_u(b, PT_TTY, 1, 2);
	expect(b, -EBADMSG, "tty 2");
	exec_with_u(b, PT_STDIN_EOF, 1, 2);
	expect(b, -EBADMSG, "stdin_eof 2");
	exec_with_u(b, PT_STDIN_EOF, 4, 1);
	expect(b, -EBADMSG, "stdin_eof as a u32");
	exec_with_u(b, PT_UID, 4, 0xffffffffu);
	expect(b, -EBADMSG, "uid 0xffffffff");
	exec_with_u(b, PT_UID, 4, 0);
	expect(b, 0, "uid 0 is allowed");

	proto_begin(b, PROTO_ERROR, 1);
	proto_put_i32(b, PT_ERRNO, EIO);
	proto_put_str(b, PT_MESSAGE, "bad\0", 4);
	expect(b, -EBADMSG, "NUL in MESSAGE");

	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		proto_begin(b, PROTO_STDIN_CLOSE, 1);
		proto_put_str(b, PT_CMD_ID, bad_ids[i], strlen(bad_ids[i]) + (i == 5));
		snprintf(id, sizeof(id), "bad command id #%zu", i);
		expect(b, -EBADMSG, id);
	}
	proto_begin(b, PROTO_STDIN_CLOSE, 1);
	proto_put_str(b, PT_CMD_ID, "", 0);
	expect(b, -EBADMSG, "empty command id");
	memset(id, 'x', sizeof(id));
	proto_begin(b, PROTO_STDIN_CLOSE, 1);
	proto_put_str(b, PT_CMD_ID, id, PROTO_ID_MAX);
	expect(b, 0, "command id of 64 bytes");
	proto_begin(b, PROTO_STDIN_CLOSE, 1);
	proto_put_str(b, PT_CMD_ID, id, PROTO_ID_MAX + 1);
	expect(b, -E2BIG, "command id of 65 bytes");

	big = calloc(1, PROTO_MAX_STR + 1);
	memset(big, 'a', PROTO_MAX_STR + 1);
	exec_with(b, PT_ARG, big, PROTO_MAX_STR);
	expect(b, 0, "ARG of PROTO_MAX_STR bytes");
	exec_with(b, PT_ARG, big, PROTO_MAX_STR + 1);
	expect(b, -E2BIG, "ARG over PROTO_MAX_STR");
	proto_begin(b, PROTO_ERROR, 1);
	proto_put_i32(b, PT_ERRNO, EIO);
	proto_put_str(b, PT_MESSAGE, big, PROTO_MAX_MESSAGE + 1);
	expect(b, -E2BIG, "MESSAGE over 4096");
	free(big);
}

static void bad_fields(struct proto_buf *b)
{
	uint8_t *d;

	proto_begin(b, PROTO_STDIN_CLOSE, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_bytes(b, PT_CMD_ID, NULL, 0);
	proto_finish(b);
	b->len -= 3; /* leave 3 bytes of a field header */
	put_le32(b->data, (uint32_t)b->len - 4);
	expect_raw(b->data, b->len, -EBADMSG, "truncated field header");

	proto_begin(b, PROTO_STDIN, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_bytes(b, PT_DATA, "abcd", 4);
	proto_finish(b);
	d = b->data + b->len - 4 - 4; /* DATA's length */
	put_le32(d, 5);
	expect_raw(b->data, b->len, -EBADMSG, "field overruns the frame by one");
	put_le32(d, 0xffffffffu);
	expect_raw(b->data, b->len, -EBADMSG, "field length 0xffffffff");
	put_le32(d, 3);
	expect_raw(b->data, b->len, -EBADMSG, "field shorter than declared leaves junk");
}

static void bad_nested(struct proto_buf *b)
{
	size_t mark;

	proto_begin(b, PROTO_HELLO, 1);
	proto_put_u32(b, PT_VERSION, 1);
	mark = proto_nest_begin(b, PT_COMMAND);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_nest_end(b, mark);
	proto_finish(b);
	put_le32(b->data + mark + 2, (uint32_t)(b->len - mark - 6 + 1));
	expect_raw(b->data, b->len, -EBADMSG, "nested entry overruns the frame");

	/* An entry whose inner field overruns the entry but not the frame. */
	proto_begin(b, PROTO_HELLO, 1);
	mark = proto_nest_begin(b, PT_COMMAND);
	proto_put_str(b, PT_CMD_ID, S("abc"));
	proto_nest_end(b, mark);
	proto_put_u32(b, PT_VERSION, 1);
	proto_finish(b);
	put_le32(b->data + mark + 2, 6 + 2); /* cuts CMD_ID "abc" to "ab" inside the entry */
	expect_raw(b->data, b->len, -EBADMSG, "inner field overruns its entry");

	proto_begin(b, PROTO_HELLO, 1);
	proto_put_u32(b, PT_VERSION, 1);
	mark = proto_nest_begin(b, PT_COMMAND);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_u64(b, PT_OUT_BYTES, 0);
	proto_put_u64(b, PT_ERR_BYTES, 0);
	proto_put_u64(b, PT_TIME_MS, 0);
	proto_nest_end(b, mark);
	expect(b, -EPROTO, "entry without PID");

	proto_begin(b, PROTO_HELLO, 1);
	proto_put_u32(b, PT_VERSION, 1);
	put_entry(b, "ok", 1, 1);
	mark = proto_nest_begin(b, PT_COMMAND);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_str(b, PT_ARG, S("a"));
	proto_nest_end(b, mark);
	expect(b, -EPROTO, "entry with ARG");

	proto_begin(b, PROTO_HELLO, 1);
	proto_put_u32(b, PT_VERSION, 1);
	mark = proto_nest_begin(b, PT_COMMAND);
	mark = proto_nest_begin(b, PT_COMMAND);
	proto_nest_end(b, mark);
	expect(b, -EPROTO, "entry nested in an entry");

	proto_begin(b, PROTO_HELLO, 1);
	proto_put_u32(b, PT_VERSION, 1);
	put_entry(b, "a b", 1, 0);
	expect(b, -EBADMSG, "entry with a bad command id");

	proto_begin(b, PROTO_HELLO, 1);
	proto_put_u32(b, PT_VERSION, 1);
	put_entry(b, "a", 0, 0);
	expect(b, -EBADMSG, "entry with pid 0");

	proto_begin(b, PROTO_HELLO, 1);
	proto_put_u32(b, PT_VERSION, 1);
	mark = proto_nest_begin(b, PT_COMMAND);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_nest_end(b, mark);
	expect(b, -EPROTO, "entry with a duplicate CMD_ID");

	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_str(b, PT_ARG, S("a"));
	put_entry(b, "a", 1, 0);
	expect(b, -EPROTO, "COMMAND in an EXEC");
}

static void counts(struct proto_buf *b)
{
	struct proto_msg m;
	size_t len;

	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	for (int i = 0; i < PROTO_MAX_ARGS; i++)
		proto_put_str(b, PT_ARG, S("x"));
	CHECK(roundtrip(b, &m) == 0 && m.n_args == PROTO_MAX_ARGS, "PROTO_MAX_ARGS args");
	CHECK(proto_msg_arg(&m, PROTO_MAX_ARGS - 1, &len) && len == 1, "last arg reachable");
	{
		size_t cur = 0, n = 0;

		while (proto_msg_next_arg(&m, &cur, &len))
			n++;
		CHECK(n == PROTO_MAX_ARGS, "arg iterator yields PROTO_MAX_ARGS args");
	}
	proto_put_str(b, PT_ARG, S("x"));
	expect(b, -E2BIG, "PROTO_MAX_ARGS + 1 args");

	proto_begin(b, PROTO_EXEC, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_str(b, PT_ARG, S("x"));
	for (int i = 0; i <= PROTO_MAX_ARGS; i++)
		proto_put_str(b, PT_ENV, S("A=1"));
	expect(b, -E2BIG, "PROTO_MAX_ARGS + 1 env");

	proto_begin(b, PROTO_HELLO, 1);
	proto_put_u32(b, PT_VERSION, 1);
	for (int i = 0; i <= PROTO_MAX_ARGS; i++)
		put_entry(b, "c", 1, 0);
	expect(b, -E2BIG, "PROTO_MAX_ARGS + 1 command entries");
}

static void encoder_limits(struct proto_buf *b)
{
	struct proto_buf fresh = {0};
	struct proto_msg m;
	uint8_t *big = calloc(1, PROTO_MAX_FRAME);
	size_t room;

	CHECK(proto_finish(&fresh) == -EINVAL, "finish without begin");
	proto_buf_free(&fresh);

	room = PROTO_MAX_FRAME - PROTO_HEADER - 6 - 7;
	proto_begin(b, PROTO_STDIN, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_bytes(b, PT_DATA, big, room);
	CHECK(roundtrip(b, &m) == 0 && b->len == PROTO_MAX_FRAME && m.data_len == room,
	      "a frame of exactly PROTO_MAX_FRAME");
	proto_begin(b, PROTO_STDIN, 1);
	proto_put_str(b, PT_CMD_ID, S("a"));
	proto_put_bytes(b, PT_DATA, big, room + 1);
	CHECK(b->failed && proto_finish(b) == -E2BIG, "encoder refuses a frame over the limit");
	proto_begin(b, PROTO_PING, 2);
	CHECK(!b->failed && roundtrip(b, &m) == 0 && m.id == 2, "begin resets a failed buffer");
	proto_begin(b, PROTO_PING, 2);
	proto_nest_end(b, 3);
	CHECK(b->failed && proto_finish(b) == -E2BIG, "bad nest mark fails the frame");
	proto_begin(b, PROTO_PING, 2);
	proto_put_u8(b, (enum proto_tag)0x10000, 1);
	CHECK(proto_finish(b) == -E2BIG, "tag over 16 bits fails the frame");
	free(big);
}

int main(void)
{
	struct proto_buf b = {0};

	rt_exec(&b);
	rt_stdin_kill_replay(&b);
	rt_agent(&b);
	rt_hello(&b);
	frame_size();
	bad_header(&b);
	bad_tags(&b);
	missing_required(&b);
	bad_integers(&b);
	bad_values(&b);
	bad_strings(&b);
	bad_fields(&b);
	bad_nested(&b);
	counts(&b);
	encoder_limits(&b);
	proto_buf_free(&b);
	return tap_done();
}
