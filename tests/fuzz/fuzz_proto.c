/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the agent protocol decoder (src/proto/proto.c).
 *
 * For every input: proto_frame_size, proto_decode, and every accessor (the
 * iterators over every entry, the index accessors over every index of lists up
 * to 256 entries and a sample of longer ones, which are O(n^2)). When
 * the input decodes, it is re-encoded field by field in a canonical order and
 * the result must (a) have the input's length, (b) decode, (c) carry the same
 * fields, and (d) re-encode to the very same bytes. Any mismatch aborts.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *	src/proto/proto.c src/common/xalloc.c tests/fuzz/fuzz_proto.c -o fuzz_proto
 *   ./fuzz_proto tests/fuzz/corpus/proto
 */
#include "proto/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HAS(m, t) ((m)->present & (UINT32_C(1) << (t)))

static void must(int cond)
{
	if (!cond)
		abort();
}

static int same_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
	return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

/* Touch every byte a decoded range claims, so ASan checks the pointers. */
static unsigned touch(const void *p, size_t len)
{
	const volatile uint8_t *q = p;
	unsigned sum = 0;

	for (size_t i = 0; i < len; i++)
		sum += q[i];
	return sum;
}

/* The single-valued fields of m, in tag order. */
static void put_singles(struct proto_buf *b, const struct proto_msg *m)
{
	for (int t = 1; t < 32; t++) {
		if (!HAS(m, t))
			continue;
		switch (t) {
		case PT_CMD_ID:
			proto_put_str(b, t, m->cmd_id, m->cmd_id_len);
			break;
		case PT_CWD:
			proto_put_str(b, t, m->cwd, m->cwd_len);
			break;
		case PT_MESSAGE:
			proto_put_str(b, t, m->message, m->message_len);
			break;
		case PT_DATA:
			proto_put_bytes(b, t, m->data, m->data_len);
			break;
		case PT_STREAM:
			proto_put_u8(b, t, m->stream);
			break;
		case PT_TTY:
			proto_put_u8(b, t, m->tty);
			break;
		case PT_STDIN_EOF:
			proto_put_u8(b, t, m->stdin_eof);
			break;
		case PT_UID:
			proto_put_u32(b, t, m->uid);
			break;
		case PT_SIGNAL:
			proto_put_u32(b, t, m->signal);
			break;
		case PT_VERSION:
			proto_put_u32(b, t, m->version);
			break;
		case PT_PID:
			proto_put_u32(b, t, m->pid);
			break;
		case PT_ROWS:
			proto_put_u32(b, t, m->rows);
			break;
		case PT_COLS:
			proto_put_u32(b, t, m->cols);
			break;
		case PT_STATUS:
			proto_put_i32(b, t, m->status);
			break;
		case PT_ERRNO:
			proto_put_i32(b, t, m->err);
			break;
		case PT_OFFSET:
			proto_put_u64(b, t, m->offset);
			break;
		case PT_TIME_MS:
			proto_put_u64(b, t, m->time_ms);
			break;
		case PT_OUT_BYTES:
			proto_put_u64(b, t, m->out_bytes);
			break;
		case PT_ERR_BYTES:
			proto_put_u64(b, t, m->err_bytes);
			break;
		default:
			abort(); /* present has a bit for a tag that is not single-valued */
		}
	}
}

static void reencode(const struct proto_msg *m, struct proto_buf *b)
{
	struct proto_msg e;
	size_t cur = 0, len, mark;
	const char *s;

	proto_begin(b, m->type, m->id);
	put_singles(b, m);
	while ((s = proto_msg_next_arg(m, &cur, &len)))
		proto_put_str(b, PT_ARG, s, len);
	cur = 0;
	while ((s = proto_msg_next_env(m, &cur, &len)))
		proto_put_str(b, PT_ENV, s, len);
	cur = 0;
	while (proto_hello_next(m, &cur, &e) == 1) {
		mark = proto_nest_begin(b, PT_COMMAND);
		put_singles(b, &e);
		proto_nest_end(b, mark);
	}
	must(proto_finish(b) == 0);
}

static int same_singles(const struct proto_msg *a, const struct proto_msg *b)
{
	return a->type == b->type && a->id == b->id && a->present == b->present &&
	       same_bytes(a->cmd_id, a->cmd_id_len, b->cmd_id, b->cmd_id_len) &&
	       same_bytes(a->cwd, a->cwd_len, b->cwd, b->cwd_len) &&
	       same_bytes(a->message, a->message_len, b->message, b->message_len) &&
	       same_bytes(a->data, a->data_len, b->data, b->data_len) && a->uid == b->uid &&
	       a->stream == b->stream && a->offset == b->offset && a->signal == b->signal &&
	       a->status == b->status && a->err == b->err && a->version == b->version &&
	       a->pid == b->pid && a->time_ms == b->time_ms && a->out_bytes == b->out_bytes &&
	       a->err_bytes == b->err_bytes && a->tty == b->tty && a->stdin_eof == b->stdin_eof &&
	       a->rows == b->rows && a->cols == b->cols && a->n_args == b->n_args &&
	       a->n_env == b->n_env && a->n_commands == b->n_commands;
}

static void compare(const struct proto_msg *a, const struct proto_msg *b)
{
	struct proto_msg ea, eb;
	size_t ca = 0, cb = 0, la, lb;
	const char *sa, *sb;
	int ra, rb;

	must(same_singles(a, b));
	do {
		sa = proto_msg_next_arg(a, &ca, &la);
		sb = proto_msg_next_arg(b, &cb, &lb);
		must(!sa == !sb && (!sa || same_bytes(sa, la, sb, lb)));
	} while (sa);
	ca = cb = 0;
	do {
		sa = proto_msg_next_env(a, &ca, &la);
		sb = proto_msg_next_env(b, &cb, &lb);
		must(!sa == !sb && (!sa || same_bytes(sa, la, sb, lb)));
	} while (sa);
	ca = cb = 0;
	do {
		ra = proto_hello_next(a, &ca, &ea);
		rb = proto_hello_next(b, &cb, &eb);
		must(ra == rb && ra >= 0);
		if (ra == 1) {
			/* entries point at their own payloads: compare fields, not pointers */
			ea.payload = eb.payload = NULL;
			ea.payload_len = eb.payload_len = 0;
			must(same_singles(&ea, &eb));
		}
	} while (ra == 1);
}

/*
 * The index accessors are O(i) each, so O(n^2) over a list: check every index
 * of a short list, and the ends plus a stride of a long one.
 */
static int sampled(size_t i, size_t n)
{
	return n <= 256 || i < 64 || i >= n - 64 || i % 61 == 0;
}

/* Every accessor over every entry, checking the invariants of a decoded message. */
static void walk(const struct proto_msg *m)
{
	struct proto_msg e;
	size_t cur = 0, len, len2, n = 0;
	const char *s;
	int r;

	for (size_t i = 0; (s = proto_msg_next_arg(m, &cur, &len)); i++) {
		must(i < m->n_args && !memchr(s, 0, len) && len <= PROTO_MAX_STR);
		must(!sampled(i, m->n_args) || proto_msg_arg(m, i, &len2) == s);
		n++;
	}
	must(n == m->n_args && proto_msg_arg(m, m->n_args, &len) == NULL);
	cur = n = 0;
	for (size_t i = 0; (s = proto_msg_next_env(m, &cur, &len)); i++) {
		must(i < m->n_env && len >= 2 && s[0] != '=' && memchr(s, '=', len));
		must(!sampled(i, m->n_env) || proto_msg_env(m, i, &len2) == s);
		n++;
	}
	must(n == m->n_env && proto_msg_env(m, m->n_env, &len) == NULL);
	cur = n = 0;
	must(m->type != PROTO_EXEC || (m->n_args >= 1 && m->n_args <= PROTO_MAX_ARGS));
	must(!HAS(m, PT_CWD) || (m->cwd_len >= 1 && m->cwd[0] == '/'));
	must(!HAS(m, PT_SIGNAL) || (m->signal >= 1 && m->signal <= 64));
	must(!HAS(m, PT_STREAM) || m->stream == 1 || m->stream == 2);
	must(!HAS(m, PT_CMD_ID) || (m->cmd_id_len >= 1 && m->cmd_id_len <= PROTO_ID_MAX));
	touch(m->data, m->data_len);
	touch(m->message, m->message_len);
	touch(m->cmd_id, m->cmd_id_len);
	touch(m->cwd, m->cwd_len);
	while ((r = proto_hello_next(m, &cur, &e)) == 1) {
		must(HAS(&e, PT_CMD_ID) && HAS(&e, PT_PID) && e.pid >= 1);
		touch(e.cmd_id, e.cmd_id_len);
		n++;
	}
	must(r == 0 && n == m->n_commands);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_buf b1 = {0}, b2 = {0};
	struct proto_msg m, m1, m2;
	long fs = proto_frame_size(data, size);
	int r = proto_decode(data, size, &m);

	must(r == 0 || r == -EBADMSG || r == -E2BIG || r == -EPROTO);
	if (r < 0) {
		static const struct proto_msg zero;
		struct proto_msg e;
		size_t cur = 0;

		must(memcmp(&m, &zero, sizeof(m)) == 0);
		/* the accessors are safe on the zeroed result too */
		must(proto_msg_arg(&m, 0, NULL) == NULL && proto_hello_next(&m, &cur, &e) == 0);
		return 0;
	}
	must(fs == (long)size);
	walk(&m);

	reencode(&m, &b1);
	must(b1.len == size);
	must(proto_decode(b1.data, b1.len, &m1) == 0);
	compare(&m, &m1);
	reencode(&m1, &b2);
	must(same_bytes(b1.data, b1.len, b2.data, b2.len));
	must(proto_decode(b2.data, b2.len, &m2) == 0);
	compare(&m1, &m2);
	proto_buf_free(&b1);
	proto_buf_free(&b2);
	return 0;
}
