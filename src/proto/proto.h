/* SPDX-License-Identifier: MIT */
/*
 * The agent wire protocol: how airlockd talks to airlock-agent (PID 1 in a
 * sandbox) over a Unix stream socket. Specified in docs/agent-protocol.md.
 *
 * A frame is
 *
 *	u32 len      bytes after this field (header rest + payload), 8 .. PROTO_MAX_FRAME - 4
 *	u16 type     enum proto_type
 *	u16 flags    must be 0
 *	u32 id       request id (responses echo it; events carry 0 or the request's id)
 *	payload      a sequence of fields: u16 tag, u32 len, len bytes
 *
 * All integers little-endian. Each message type admits a fixed set of tags
 * (below); a decoder refuses an unknown tag, a duplicate single-valued tag, a
 * missing required tag, a field that overruns the frame, a string with a NUL
 * byte or over its limit, too many list entries, and trailing bytes. The
 * agent receives from a daemon it trusts, but the daemon receives from an
 * agent that shares a sandbox with hostile code, so the decoder is strict and
 * fuzzed (tests/fuzz/fuzz_proto.c).
 *
 * The decoder does not allocate: decoded strings and byte ranges point into
 * the caller's frame buffer, which must outlive the message.
 *
 * The per-type tag table, the value rules and the error each violation gets are
 * in docs/agent-protocol.md. In short: -EBADMSG for broken bytes (truncation,
 * overrun, trailing bytes, wrong integer width, NUL in a string, a value out of
 * its range), -E2BIG for a limit (frame, string, list length), -EPROTO for a
 * frame that is well-formed but not this protocol (unknown type, flags, a tag
 * not allowed for the type, a duplicate single-valued tag, a missing required tag).
 */
#ifndef AL_PROTO_PROTO_H
#define AL_PROTO_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION 2		   /* 2: RESIZE, and EXEC's ROWS/COLS */
#define PROTO_HEADER 12		   /* u32 len + u16 type + u16 flags + u32 id */
#define PROTO_MAX_FRAME (1u << 20) /* 1 MiB including the header */
#define PROTO_MAX_ARGS 4096	   /* argv / env entries */
#define PROTO_MAX_STR 65536	   /* one string (an argument, a path, ...) */
#define PROTO_ID_MAX 64		   /* command ids */
#define PROTO_MAX_MESSAGE 4096	   /* PT_MESSAGE */
#define PROTO_MAX_ERRNO 4095	   /* PT_ERRNO is 1..PROTO_MAX_ERRNO */
#define PROTO_MAX_WINSIZE 65535	   /* PT_ROWS, PT_COLS are 1..PROTO_MAX_WINSIZE */

enum proto_type {
	/* daemon -> agent */
	PROTO_EXEC = 1,	 /* start a command */
	PROTO_STDIN = 2, /* bytes for a command's stdin */
	PROTO_STDIN_CLOSE = 3,
	PROTO_KILL = 4,	  /* signal a command's process group */
	PROTO_REPLAY = 5, /* resend a command's output from an offset, then its EXIT if ended */
	PROTO_PING = 6,
	PROTO_RESIZE = 7, /* a TTY command's window size (TIOCSWINSZ on its PTY) */
	/* agent -> daemon */
	PROTO_HELLO = 64,  /* first frame on every connection: version and every known command */
	PROTO_OK = 65,	   /* a request succeeded */
	PROTO_ERROR = 66,  /* a request failed: errno + message */
	PROTO_OUTPUT = 67, /* a chunk of a command's stdout or stderr */
	PROTO_EXIT = 68,   /* a command ended */
	PROTO_PONG = 69,
};

enum proto_tag {
	PT_CMD_ID = 1,	   /* string, <= PROTO_ID_MAX, [A-Za-z0-9_-] */
	PT_ARG = 2,	   /* string, repeated (argv, in order; at least one) */
	PT_ENV = 3,	   /* string KEY=VALUE, repeated */
	PT_CWD = 4,	   /* string, absolute path */
	PT_UID = 5,	   /* u32, not 0xffffffff ((uid_t)-1 means "unchanged" to setresuid) */
	PT_STREAM = 6,	   /* u8: 1 stdout, 2 stderr */
	PT_OFFSET = 7,	   /* u64: byte offset of DATA in its stream */
	PT_DATA = 8,	   /* bytes, <= PROTO_MAX_FRAME - overhead */
	PT_SIGNAL = 9,	   /* u32, 1..64 */
	PT_STATUS = 10,	   /* i32: a wait(2) status */
	PT_ERRNO = 11,	   /* i32, 1..PROTO_MAX_ERRNO */
	PT_MESSAGE = 12,   /* string, <= PROTO_MAX_MESSAGE */
	PT_VERSION = 13,   /* u32 */
	PT_PID = 14,	   /* u32, 1..INT32_MAX (a valid pid_t, never a process group) */
	PT_TIME_MS = 15,   /* u64: epoch milliseconds */
	PT_COMMAND = 16,   /* nested, repeated: a HELLO's command entry (its payload is
			    * fields: CMD_ID, PID, STATUS?, OUT_BYTES, ERR_BYTES, TIME_MS) */
	PT_OUT_BYTES = 17, /* u64 */
	PT_ERR_BYTES = 18, /* u64 */
	PT_TTY = 19,	   /* u8 0/1 */
	PT_STDIN_EOF = 20, /* u8 0/1: EXEC's stdin ends after its DATA (saves a STDIN_CLOSE) */
	PT_ROWS = 21,	   /* u32, 1..PROTO_MAX_WINSIZE: a PTY's rows */
	PT_COLS = 22,	   /* u32, 1..PROTO_MAX_WINSIZE: a PTY's columns */
};

/* A decoded message. Only the fields of its type are meaningful. */
struct proto_msg {
	enum proto_type type;
	uint32_t id;

	const char *cmd_id; /* points into the frame, not NUL-terminated: use cmd_id_len */
	size_t cmd_id_len;
	size_t n_args; /* EXEC: count of ARG fields (read them with proto_msg_arg) */
	size_t n_env;
	size_t n_commands; /* HELLO: count of COMMAND entries (proto_hello_next) */
	const char *cwd;
	size_t cwd_len;
	uint32_t uid;
	uint8_t stream;
	uint64_t offset;
	const uint8_t *data;
	size_t data_len;
	uint32_t signal;
	int32_t status;
	int32_t err;
	const char *message;
	size_t message_len;
	uint32_t version;
	uint32_t pid;
	uint64_t time_ms;
	uint64_t out_bytes; /* COMMAND entry, EXIT: bytes of stdout / stderr so far */
	uint64_t err_bytes;
	uint8_t tty;
	uint8_t stdin_eof;
	uint32_t rows, cols; /* EXEC (with TTY), RESIZE */
	uint32_t present;    /* bit (1 << tag) for every single-valued tag seen */
	/* HELLO: command entries, decoded lazily with proto_hello_next() */
	const uint8_t *payload;
	size_t payload_len;
};

/*
 * Decode one complete frame (buf[0..len), header included); len must be exactly
 * the frame's size (fewer bytes: truncated, more: trailing bytes, both -EBADMSG).
 * Returns 0, or -EBADMSG (malformed), -E2BIG (over a limit), -EPROTO
 * (unknown type, flags != 0, tag not allowed for the type, duplicate tag,
 * missing required tag). HELLO's COMMAND entries are all validated here too.
 * On failure *m is zeroed.
 */
int proto_decode(const uint8_t *buf, size_t len, struct proto_msg *m);

/*
 * How many bytes the frame at the start of buf needs in total (4 + len), from
 * its header: 0 if fewer than 4 bytes are available yet, -E2BIG if that total
 * is over PROTO_MAX_FRAME, -EBADMSG if it is under PROTO_HEADER.
 */
long proto_frame_size(const uint8_t *buf, size_t avail);

/* The i-th argv / env string of an EXEC (any index < n_args / n_env); NULL if out of range.
 * Each call walks the payload from the start (O(i)): to read them all, use the iterators. */
const char *proto_msg_arg(const struct proto_msg *m, size_t i, size_t *len);
const char *proto_msg_env(const struct proto_msg *m, size_t i, size_t *len);
/* EXEC: the next argv / env string in order, O(1) each. *cursor starts at 0; NULL at the end. */
const char *proto_msg_next_arg(const struct proto_msg *m, size_t *cursor, size_t *len);
const char *proto_msg_next_env(const struct proto_msg *m, size_t *cursor, size_t *len);

/* HELLO: iterate command entries. *cursor starts at 0. Returns 1 with *out filled, 0 at the
 * end, <0 if an entry is malformed. *out has type PROTO_HELLO, the HELLO's id, and the
 * entry's fields (cmd_id, pid, status if present & (1 << PT_STATUS), out_bytes, err_bytes,
 * time_ms). */
int proto_hello_next(const struct proto_msg *m, size_t *cursor, struct proto_msg *out);

/*
 * Encoding: a growable buffer of one frame. Start from a zeroed struct
 * (struct proto_buf b = {0}); proto_begin may be called again to reuse the
 * allocation for the next frame. The encoder checks sizes only (a frame over
 * PROTO_MAX_FRAME, a tag over 0xffff, a bad nest mark set failed); it does not
 * check the per-type tag rules, which the receiving decoder enforces.
 */
struct proto_buf {
	uint8_t *data;
	size_t len, cap;
	int failed; /* set when a limit was exceeded; proto_finish then fails */
};

void proto_begin(struct proto_buf *b, enum proto_type type, uint32_t id);
void proto_put_str(struct proto_buf *b, enum proto_tag tag, const char *s, size_t len);
void proto_put_bytes(struct proto_buf *b, enum proto_tag tag, const void *p, size_t len);
void proto_put_u8(struct proto_buf *b, enum proto_tag tag, uint8_t v);
void proto_put_u32(struct proto_buf *b, enum proto_tag tag, uint32_t v);
void proto_put_i32(struct proto_buf *b, enum proto_tag tag, int32_t v);
void proto_put_u64(struct proto_buf *b, enum proto_tag tag, uint64_t v);
/* Nested entry (PT_COMMAND): begin returns a mark, end patches the length. */
size_t proto_nest_begin(struct proto_buf *b, enum proto_tag tag);
void proto_nest_end(struct proto_buf *b, size_t mark);
/* Patches the length; returns 0, -E2BIG if the frame is over PROTO_MAX_FRAME (or b->failed),
 * or -EINVAL if proto_begin was not called. The frame is b->data[0..b->len). */
int proto_finish(struct proto_buf *b);
void proto_buf_free(struct proto_buf *b);

#endif
