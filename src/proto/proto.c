/* SPDX-License-Identifier: MIT */
/*
 * The agent wire protocol codec: a size-checking encoder and a strict,
 * non-allocating decoder. The rules are tabled in docs/agent-protocol.md.
 *
 * Every read of the input goes through field_next() or the header checks in
 * proto_frame_size(); both compare a wanted length with the bytes *left*
 * (never pos + n against the end), so no length arithmetic can overflow.
 */
#include "proto/proto.h"

#include "common/xalloc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define TAG(t) (UINT32_C(1) << (t))
#define FIELD_HEADER 6 /* u16 tag + u32 len */
#define LEN_FIELD 4    /* the frame's leading u32 len */

/* Tags that may appear more than once; every other tag at most once. */
#define REPEATED_TAGS (TAG(PT_ARG) | TAG(PT_ENV) | TAG(PT_COMMAND))

struct schema {
	uint32_t allowed;  /* required tags are allowed too */
	uint32_t required; /* for a repeated tag: at least one */
};

struct field {
	uint16_t tag;
	const uint8_t *p;
	size_t len;
};

/* The payload of a PT_COMMAND entry inside a HELLO. */
static const struct schema command_schema = {
    .allowed = TAG(PT_STATUS),
    .required =
	TAG(PT_CMD_ID) | TAG(PT_PID) | TAG(PT_OUT_BYTES) | TAG(PT_ERR_BYTES) | TAG(PT_TIME_MS),
};

static const struct schema *schema_for(uint16_t type)
{
	static const struct schema exec = {
	    .allowed = TAG(PT_ENV) | TAG(PT_CWD) | TAG(PT_UID) | TAG(PT_TTY) | TAG(PT_DATA) |
		       TAG(PT_STDIN_EOF) | TAG(PT_ROWS) | TAG(PT_COLS),
	    .required = TAG(PT_CMD_ID) | TAG(PT_ARG),
	};
	static const struct schema stdin_ = {.required = TAG(PT_CMD_ID) | TAG(PT_DATA)};
	static const struct schema cmd_only = {.required = TAG(PT_CMD_ID)};
	static const struct schema kill_ = {.required = TAG(PT_CMD_ID) | TAG(PT_SIGNAL)};
	static const struct schema resize = {.required =
						 TAG(PT_CMD_ID) | TAG(PT_ROWS) | TAG(PT_COLS)};
	static const struct schema replay = {
	    .allowed = TAG(PT_OFFSET) | TAG(PT_STREAM),
	    .required = TAG(PT_CMD_ID),
	};
	static const struct schema empty = {0};
	static const struct schema hello = {
	    .allowed = TAG(PT_COMMAND) | TAG(PT_TIME_MS),
	    .required = TAG(PT_VERSION),
	};
	static const struct schema ok = {.allowed = TAG(PT_PID)};
	static const struct schema error = {.required = TAG(PT_ERRNO) | TAG(PT_MESSAGE)};
	static const struct schema output = {
	    .required = TAG(PT_CMD_ID) | TAG(PT_STREAM) | TAG(PT_OFFSET) | TAG(PT_DATA),
	};
	static const struct schema exit_ = {
	    .allowed = TAG(PT_ERRNO) | TAG(PT_MESSAGE) | TAG(PT_TIME_MS) | TAG(PT_OUT_BYTES) |
		       TAG(PT_ERR_BYTES),
	    .required = TAG(PT_CMD_ID) | TAG(PT_STATUS),
	};

	switch (type) {
	case PROTO_EXEC:
		return &exec;
	case PROTO_STDIN:
		return &stdin_;
	case PROTO_STDIN_CLOSE:
		return &cmd_only;
	case PROTO_KILL:
		return &kill_;
	case PROTO_REPLAY:
		return &replay;
	case PROTO_RESIZE:
		return &resize;
	case PROTO_PING:
	case PROTO_PONG:
		return &empty;
	case PROTO_HELLO:
		return &hello;
	case PROTO_OK:
		return &ok;
	case PROTO_ERROR:
		return &error;
	case PROTO_OUTPUT:
		return &output;
	case PROTO_EXIT:
		return &exit_;
	}
	return NULL;
}

static uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void set_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void set_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void set_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * The field at *pos of buf[0..len): 1 with *f filled and *pos moved past it,
 * 0 at the end, -EBADMSG if the field header or its value overruns.
 */
static int field_next(const uint8_t *buf, size_t len, size_t *pos, struct field *f)
{
	size_t rest;
	uint32_t flen;

	if (*pos >= len)
		return 0;
	rest = len - *pos;
	if (rest < FIELD_HEADER)
		return -EBADMSG;
	f->tag = get_u16(buf + *pos);
	flen = get_u32(buf + *pos + 2);
	if (flen > rest - FIELD_HEADER)
		return -EBADMSG;
	f->p = buf + *pos + FIELD_HEADER;
	f->len = flen;
	*pos += FIELD_HEADER + (size_t)flen;
	return 1;
}

/* A string: no NUL byte, at most max bytes. */
static int check_str(const struct field *f, size_t max)
{
	if (f->len > max)
		return -E2BIG;
	if (memchr(f->p, 0, f->len))
		return -EBADMSG;
	return 0;
}

static int check_cmd_id(const struct field *f)
{
	if (f->len > PROTO_ID_MAX)
		return -E2BIG;
	if (f->len == 0)
		return -EBADMSG;
	for (size_t i = 0; i < f->len; i++) {
		uint8_t c = f->p[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '-';
		if (!ok)
			return -EBADMSG;
	}
	return 0;
}

/* KEY=VALUE with a non-empty KEY. */
static int check_env(const struct field *f)
{
	int r = check_str(f, PROTO_MAX_STR);

	if (r < 0)
		return r;
	if (f->len == 0 || f->p[0] == '=' || !memchr(f->p, '=', f->len))
		return -EBADMSG;
	return 0;
}

static int check_cwd(const struct field *f)
{
	int r = check_str(f, PROTO_MAX_STR);

	if (r < 0)
		return r;
	if (f->len == 0 || f->p[0] != '/')
		return -EBADMSG;
	return 0;
}

/* An integer field of exactly `size` bytes, zero-extended into *v. */
static int get_int(const struct field *f, size_t size, uint64_t *v)
{
	if (f->len != size)
		return -EBADMSG;
	switch (size) {
	case 1:
		*v = f->p[0];
		break;
	case 4:
		*v = get_u32(f->p);
		break;
	default:
		*v = get_u64(f->p);
		break;
	}
	return 0;
}

/* The integer tags with a range: u8 STREAM 1..2, u8 TTY and STDIN_EOF 0..1, u32 UID, SIGNAL 1..64,
 * PID, ROWS and COLS 1..PROTO_MAX_WINSIZE. */
static int decode_ranged_int(struct proto_msg *m, const struct field *f)
{
	uint64_t v;
	int r;

	switch (f->tag) {
	case PT_STREAM:
		if ((r = get_int(f, 1, &v)) < 0)
			return r;
		if (v != 1 && v != 2)
			return -EBADMSG;
		m->stream = (uint8_t)v;
		return 0;
	case PT_TTY:
	case PT_STDIN_EOF:
		if ((r = get_int(f, 1, &v)) < 0)
			return r;
		if (v > 1)
			return -EBADMSG;
		*(f->tag == PT_TTY ? &m->tty : &m->stdin_eof) = (uint8_t)v;
		return 0;
	case PT_UID:
		if ((r = get_int(f, 4, &v)) < 0)
			return r;
		if (v == UINT32_MAX)
			return -EBADMSG;
		m->uid = (uint32_t)v;
		return 0;
	case PT_SIGNAL:
		if ((r = get_int(f, 4, &v)) < 0)
			return r;
		if (v < 1 || v > 64)
			return -EBADMSG;
		m->signal = (uint32_t)v;
		return 0;
	case PT_PID:
		if ((r = get_int(f, 4, &v)) < 0)
			return r;
		if (v < 1 || v > INT32_MAX)
			return -EBADMSG;
		m->pid = (uint32_t)v;
		return 0;
	case PT_ROWS:
	case PT_COLS:
		if ((r = get_int(f, 4, &v)) < 0)
			return r;
		if (v < 1 || v > PROTO_MAX_WINSIZE)
			return -EBADMSG;
		*(f->tag == PT_ROWS ? &m->rows : &m->cols) = (uint32_t)v;
		return 0;
	default:
		break;
	}
	return -EPROTO; /* unreachable: the schema admits only the tags handled here */
}

/* Integer tags: exact width (u32/i32 4 bytes, u64 8 bytes), then the value's range. */
static int decode_int(struct proto_msg *m, const struct field *f)
{
	uint64_t v;
	int r;

	switch (f->tag) {
	case PT_STATUS:
	case PT_ERRNO:
	case PT_VERSION:
		if ((r = get_int(f, 4, &v)) < 0)
			return r;
		if (f->tag == PT_VERSION) {
			m->version = (uint32_t)v;
		} else if (f->tag == PT_STATUS) {
			m->status = (int32_t)(uint32_t)v;
		} else {
			if (v < 1 || v > PROTO_MAX_ERRNO)
				return -EBADMSG;
			m->err = (int32_t)v;
		}
		return 0;
	case PT_OFFSET:
	case PT_TIME_MS:
	case PT_OUT_BYTES:
	case PT_ERR_BYTES:
		if ((r = get_int(f, 8, &v)) < 0)
			return r;
		if (f->tag == PT_OFFSET)
			m->offset = v;
		else if (f->tag == PT_TIME_MS)
			m->time_ms = v;
		else if (f->tag == PT_OUT_BYTES)
			m->out_bytes = v;
		else
			m->err_bytes = v;
		return 0;
	default:
		return decode_ranged_int(m, f);
	}
}

static int decode_command(const struct field *f, struct proto_msg *out);

/* One field whose tag the schema allows: check its value and store it. */
static int decode_value(struct proto_msg *m, const struct field *f)
{
	struct proto_msg entry;
	int r;

	switch (f->tag) {
	case PT_CMD_ID:
		if ((r = check_cmd_id(f)) < 0)
			return r;
		m->cmd_id = (const char *)f->p;
		m->cmd_id_len = f->len;
		return 0;
	case PT_ARG:
		if ((r = check_str(f, PROTO_MAX_STR)) < 0)
			return r;
		return ++m->n_args > PROTO_MAX_ARGS ? -E2BIG : 0;
	case PT_ENV:
		if ((r = check_env(f)) < 0)
			return r;
		return ++m->n_env > PROTO_MAX_ARGS ? -E2BIG : 0;
	case PT_COMMAND:
		if ((r = decode_command(f, &entry)) < 0)
			return r;
		return ++m->n_commands > PROTO_MAX_ARGS ? -E2BIG : 0;
	case PT_CWD:
		if ((r = check_cwd(f)) < 0)
			return r;
		m->cwd = (const char *)f->p;
		m->cwd_len = f->len;
		return 0;
	case PT_MESSAGE:
		if ((r = check_str(f, PROTO_MAX_MESSAGE)) < 0)
			return r;
		m->message = (const char *)f->p;
		m->message_len = f->len;
		return 0;
	case PT_DATA:
		m->data = f->p;
		m->data_len = f->len;
		return 0;
	default:
		return decode_int(m, f);
	}
}

/*
 * Decode a sequence of fields against a schema: every tag allowed, single-valued
 * tags at most once, required tags present. Fills m; m->present gets the
 * single-valued tags seen.
 */
static int decode_fields(struct proto_msg *m, const uint8_t *p, size_t len, const struct schema *s)
{
	uint32_t allowed = s->allowed | s->required, seen = 0;
	struct field f;
	size_t pos = 0;
	int r;

	while ((r = field_next(p, len, &pos, &f)) > 0) {
		if (f.tag >= 32 || !(allowed & TAG(f.tag)))
			return -EPROTO;
		if ((seen & TAG(f.tag)) && !(REPEATED_TAGS & TAG(f.tag)))
			return -EPROTO;
		seen |= TAG(f.tag);
		if ((r = decode_value(m, &f)) < 0)
			return r;
	}
	if (r < 0)
		return r;
	if ((seen & s->required) != s->required)
		return -EPROTO;
	m->present = seen & ~REPEATED_TAGS;
	return 0;
}

/* A HELLO's COMMAND entry, into a zeroed *out. */
static int decode_command(const struct field *f, struct proto_msg *out)
{
	memset(out, 0, sizeof(*out));
	out->type = PROTO_HELLO;
	out->payload = f->p;
	out->payload_len = f->len;
	return decode_fields(out, f->p, f->len, &command_schema);
}

long proto_frame_size(const uint8_t *buf, size_t avail)
{
	uint32_t len;

	if (!buf || avail < LEN_FIELD)
		return 0;
	len = get_u32(buf);
	if (len > PROTO_MAX_FRAME - LEN_FIELD)
		return -E2BIG;
	if (len < PROTO_HEADER - LEN_FIELD)
		return -EBADMSG;
	return (long)len + LEN_FIELD;
}

static int decode_frame(const uint8_t *buf, size_t len, struct proto_msg *m)
{
	const struct schema *s;
	long size;
	uint16_t type;
	int r;

	if (!buf || len < LEN_FIELD)
		return -EBADMSG;
	size = proto_frame_size(buf, len);
	if (size < 0)
		return (int)size;
	if (len != (size_t)size)
		return -EBADMSG; /* truncated, or trailing bytes */
	type = get_u16(buf + 4);
	s = schema_for(type);
	if (!s || get_u16(buf + 6) != 0)
		return -EPROTO;
	m->type = (enum proto_type)type;
	m->id = get_u32(buf + 8);
	m->payload = buf + PROTO_HEADER;
	m->payload_len = len - PROTO_HEADER;
	r = decode_fields(m, m->payload, m->payload_len, s);
	if (r < 0)
		return r;
	/* OUTPUT: the chunk's end must be a representable stream offset. */
	if (m->type == PROTO_OUTPUT && m->data_len > UINT64_MAX - m->offset)
		return -EBADMSG;
	return 0;
}

int proto_decode(const uint8_t *buf, size_t len, struct proto_msg *m)
{
	int r;

	memset(m, 0, sizeof(*m));
	r = decode_frame(buf, len, m);
	if (r < 0)
		memset(m, 0, sizeof(*m));
	return r;
}

/* The next field with the given tag from *cursor in an EXEC's payload. */
static const char *next_field(const struct proto_msg *m, uint16_t tag, size_t *cursor, size_t *len)
{
	struct field f;

	if (m->type != PROTO_EXEC || !m->payload)
		return NULL;
	while (field_next(m->payload, m->payload_len, cursor, &f) > 0) {
		if (f.tag != tag)
			continue;
		if (len)
			*len = f.len;
		return (const char *)f.p;
	}
	return NULL;
}

const char *proto_msg_next_arg(const struct proto_msg *m, size_t *cursor, size_t *len)
{
	return next_field(m, PT_ARG, cursor, len);
}

const char *proto_msg_next_env(const struct proto_msg *m, size_t *cursor, size_t *len)
{
	return next_field(m, PT_ENV, cursor, len);
}

/* The i-th field with the given tag in an EXEC's payload: O(i), see the iterators. */
static const char *nth_field(const struct proto_msg *m, uint16_t tag, size_t i, size_t *len)
{
	struct field f;
	size_t pos = 0;

	if (!m->payload)
		return NULL;
	while (field_next(m->payload, m->payload_len, &pos, &f) > 0) {
		if (f.tag == tag && i-- == 0) {
			if (len)
				*len = f.len;
			return (const char *)f.p;
		}
	}
	return NULL;
}

const char *proto_msg_arg(const struct proto_msg *m, size_t i, size_t *len)
{
	if (m->type != PROTO_EXEC || i >= m->n_args)
		return NULL;
	return nth_field(m, PT_ARG, i, len);
}

const char *proto_msg_env(const struct proto_msg *m, size_t i, size_t *len)
{
	if (m->type != PROTO_EXEC || i >= m->n_env)
		return NULL;
	return nth_field(m, PT_ENV, i, len);
}

int proto_hello_next(const struct proto_msg *m, size_t *cursor, struct proto_msg *out)
{
	struct field f;
	int r;

	if (m->type != PROTO_HELLO || !m->payload)
		return 0;
	while ((r = field_next(m->payload, m->payload_len, cursor, &f)) > 0) {
		if (f.tag != PT_COMMAND)
			continue;
		r = decode_command(&f, out);
		if (r < 0)
			return r;
		out->id = m->id;
		return 1;
	}
	return r;
}

/* Encoder */

/* Room for n more bytes; NULL (and b->failed) if the frame would exceed the limit. */
static uint8_t *buf_grow(struct proto_buf *b, size_t n)
{
	uint8_t *p;

	if (b->failed)
		return NULL;
	if (b->len > PROTO_MAX_FRAME || n > PROTO_MAX_FRAME - b->len) {
		b->failed = 1;
		return NULL;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap >= 256 ? b->cap : 256;

		while (cap < b->len + n)
			cap *= 2;
		if (cap > PROTO_MAX_FRAME)
			cap = PROTO_MAX_FRAME;
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
	p = b->data + b->len;
	b->len += n;
	return p;
}

/* A field header for a value of len bytes; returns where the value goes. */
static uint8_t *put_field(struct proto_buf *b, enum proto_tag tag, size_t len)
{
	uint8_t *p;

	if ((unsigned)tag > UINT16_MAX || len > PROTO_MAX_FRAME) {
		b->failed = 1;
		return NULL;
	}
	p = buf_grow(b, FIELD_HEADER + len);
	if (!p)
		return NULL;
	set_u16(p, (uint16_t)tag);
	set_u32(p + 2, (uint32_t)len);
	return p + FIELD_HEADER;
}

void proto_begin(struct proto_buf *b, enum proto_type type, uint32_t id)
{
	uint8_t *p;

	b->len = 0;
	b->failed = 0;
	p = buf_grow(b, PROTO_HEADER);
	if (!p)
		return;
	set_u32(p, 0);
	set_u16(p + 4, (uint16_t)type);
	set_u16(p + 6, 0);
	set_u32(p + 8, id);
}

void proto_put_bytes(struct proto_buf *b, enum proto_tag tag, const void *v, size_t len)
{
	uint8_t *p = put_field(b, tag, len);

	if (p && len)
		memcpy(p, v, len);
}

void proto_put_str(struct proto_buf *b, enum proto_tag tag, const char *s, size_t len)
{
	proto_put_bytes(b, tag, s, len);
}

void proto_put_u8(struct proto_buf *b, enum proto_tag tag, uint8_t v)
{
	uint8_t *p = put_field(b, tag, 1);

	if (p)
		p[0] = v;
}

void proto_put_u32(struct proto_buf *b, enum proto_tag tag, uint32_t v)
{
	uint8_t *p = put_field(b, tag, 4);

	if (p)
		set_u32(p, v);
}

void proto_put_i32(struct proto_buf *b, enum proto_tag tag, int32_t v)
{
	proto_put_u32(b, tag, (uint32_t)v);
}

void proto_put_u64(struct proto_buf *b, enum proto_tag tag, uint64_t v)
{
	uint8_t *p = put_field(b, tag, 8);

	if (p)
		set_u64(p, v);
}

size_t proto_nest_begin(struct proto_buf *b, enum proto_tag tag)
{
	size_t mark = b->len;

	put_field(b, tag, 0);
	return mark;
}

void proto_nest_end(struct proto_buf *b, size_t mark)
{
	if (b->failed)
		return;
	if (mark < PROTO_HEADER || mark > b->len || b->len - mark < FIELD_HEADER) {
		b->failed = 1;
		return;
	}
	set_u32(b->data + mark + 2, (uint32_t)(b->len - mark - FIELD_HEADER));
}

int proto_finish(struct proto_buf *b)
{
	if (b->failed)
		return -E2BIG;
	if (!b->data || b->len < PROTO_HEADER)
		return -EINVAL;
	set_u32(b->data, (uint32_t)(b->len - LEN_FIELD));
	return 0;
}

void proto_buf_free(struct proto_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
}
