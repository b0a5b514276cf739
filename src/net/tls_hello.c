/* SPDX-License-Identifier: MIT */
/*
 * TLS ClientHello reader. Contract in tls_hello.h; rationale in
 * docs/design/parsers.md. Two stages: reassemble() strips record headers
 * into the caller's scratch buffer, parse_body() walks the handshake body
 * with a bounds-checked cursor (struct rd): every read asks rd_take() for
 * n bytes, which fails rather than run past the end.
 */
#include "net/tls_hello.h"

#include <string.h>

#define REC_HANDSHAKE 22
#define HS_CLIENT_HELLO 1

struct rd {
	const uint8_t *p;
	size_t len, pos;
};

static int fail(struct net_tls_hello *h, const char *why)
{
	h->why = why;
	return -1;
}

static const uint8_t *rd_take(struct rd *r, size_t n)
{
	const uint8_t *p;

	if (n > r->len - r->pos)
		return NULL;
	p = r->p + r->pos;
	r->pos += n;
	return p;
}

static bool rd_u8(struct rd *r, size_t *v)
{
	const uint8_t *p = rd_take(r, 1);

	if (p)
		*v = p[0];
	return p != NULL;
}

static bool rd_u16(struct rd *r, size_t *v)
{
	const uint8_t *p = rd_take(r, 2);

	if (p)
		*v = (size_t)p[0] << 8 | p[1];
	return p != NULL;
}

/* A sub-reader over the next n bytes of r. */
static bool rd_sub(struct rd *r, size_t n, struct rd *sub)
{
	const uint8_t *p = rd_take(r, n);

	if (!p)
		return false;
	*sub = (struct rd){.p = p, .len = n};
	return true;
}

static bool rd_done(const struct rd *r)
{
	return r->pos == r->len;
}

/* Check the bytes of a record header that have arrived so far. */
static int check_record_header(const uint8_t *p, size_t avail, size_t later,
			       struct net_tls_hello *h)
{
	if (avail >= 1 && p[0] != REC_HANDSHAKE)
		return fail(h, later ? "record is not a handshake record"
				     : "not a TLS handshake record (or an SSLv2 hello)");
	if (avail >= 2 && p[1] != 3)
		return fail(h, "record version is not 3.x");
	if (avail >= 3 && (p[2] < 1 || p[2] > 4))
		return fail(h, "record version out of 0x0301..0x0304");
	if (avail >= 3 && later && (uint16_t)(p[1] << 8 | p[2]) != h->record_version)
		return fail(h, "record version changes between records");
	if (avail >= 5) {
		size_t n = (size_t)p[3] << 8 | p[4];
		if (n == 0)
			return fail(h, "empty handshake record");
		if (n > NET_TLS_MAX_RECORD)
			return fail(h, "record longer than 2^14");
	}
	return 0;
}

/*
 * Append the handshake bytes of data's records to scratch until the
 * ClientHello is complete. Returns 0, -1, or -2 with *need.
 */
static int reassemble(const uint8_t *data, size_t len, uint8_t *scratch, size_t cap,
		      struct net_tls_hello *h, size_t *need)
{
	size_t pos = 0, got = 0, total = 0; /* total: 4 + hs length, once known */

	for (;;) {
		size_t avail = len - pos, rlen, take;

		if (check_record_header(data + pos, avail < 5 ? avail : 5, h->n_records, h) < 0)
			return -1;
		if (avail < 5) {
			*need = pos + 5;
			return -2;
		}
		if (!h->n_records)
			h->record_version = (uint16_t)(data[pos + 1] << 8 | data[pos + 2]);
		rlen = (size_t)data[pos + 3] << 8 | data[pos + 4];
		take = avail - 5 < rlen ? avail - 5 : rlen;
		if (take > cap - got)
			return fail(h, "ClientHello larger than the reassembly cap");
		/* SAFETY: take <= len - pos - 5 and take <= cap - got. */
		memcpy(scratch + got, data + pos + 5, take);
		got += take;
		if (got >= 1 && scratch[0] != HS_CLIENT_HELLO)
			return fail(h, "handshake message is not a ClientHello");
		if (!total && got >= 4) {
			total =
			    4 + ((size_t)scratch[1] << 16 | (size_t)scratch[2] << 8 | scratch[3]);
			if (total > cap || total > NET_TLS_MAX_HELLO)
				return fail(h, "ClientHello larger than the reassembly cap");
		}
		if (total && got > total)
			return fail(h, "bytes after the ClientHello in its record");
		if (take < rlen) {
			*need = pos + 5 + rlen;
			return -2;
		}
		pos += 5 + rlen;
		h->n_records++;
		if (total && got == total) {
			h->consumed = pos;
			h->hello_len = total - 4;
			return 0;
		}
	}
}

static int ext_server_name(struct rd *e, struct net_tls_hello *h)
{
	struct rd list;
	size_t n, type;
	const uint8_t *name;

	if (!rd_u16(e, &n) || !rd_sub(e, n, &list) || !rd_done(e))
		return fail(h, "malformed server_name extension");
	if (!rd_u8(&list, &type) || !rd_u16(&list, &n) || !(name = rd_take(&list, n)))
		return fail(h, "malformed server_name list");
	if (type != 0)
		return fail(h, "server_name entry is not a host_name");
	if (!rd_done(&list))
		return fail(h, "more than one server name");
	if (n == 0)
		return fail(h, "empty server name");
	if (n > NET_TLS_MAX_SNI)
		return fail(h, "server name longer than 255 bytes");
	for (size_t i = 0; i < n; i++)
		if (name[i] <= 0x20 || name[i] >= 0x7f)
			return fail(h, "NUL, control, space or high byte in the server name");
	h->sni = name;
	h->sni_len = n;
	return 0;
}

static int ext_alpn(struct rd *e, struct net_tls_hello *h)
{
	struct rd list;
	size_t n;

	if (!rd_u16(e, &n) || !rd_sub(e, n, &list) || !rd_done(e) || n == 0)
		return fail(h, "malformed ALPN extension");
	h->alpn = list.p;
	h->alpn_len = n;
	while (!rd_done(&list)) {
		if (!rd_u8(&list, &n) || n == 0 || !rd_take(&list, n))
			return fail(h, "malformed ALPN protocol name");
		h->n_alpn++;
	}
	return 0;
}

static int ext_versions(struct rd *e, struct net_tls_hello *h)
{
	struct rd list;
	size_t n, v;

	if (!rd_u8(e, &n) || !rd_sub(e, n, &list) || !rd_done(e) || n == 0 || n % 2)
		return fail(h, "malformed supported_versions extension");
	h->versions = list.p;
	h->versions_len = n;
	while (rd_u16(&list, &v))
		if (v == 0x0304)
			h->tls13 = true;
	return 0;
}

static int parse_extension(size_t type, struct rd *e, struct net_tls_hello *h)
{
	switch (type) {
	case NET_TLS_EXT_SERVER_NAME:
		return ext_server_name(e, h);
	case NET_TLS_EXT_ALPN:
		return ext_alpn(e, h);
	case NET_TLS_EXT_SUPPORTED_VERSIONS:
		return ext_versions(e, h);
	case NET_TLS_EXT_ECH:
		h->ech = true;
		return 0;
	case NET_TLS_EXT_ESNI:
		h->esni = true;
		return 0;
	default:
		return 0;
	}
}

static int parse_extensions(struct rd *r, struct net_tls_hello *h)
{
	uint64_t seen[65536 / 64] = {0};
	struct rd exts, e;
	size_t n, type;

	if (rd_done(r))
		return 0; /* no extension block: legal before TLS 1.3 */
	if (!rd_u16(r, &n) || !rd_sub(r, n, &exts) || !rd_done(r))
		return fail(h, "extension block does not fill the ClientHello");
	while (!rd_done(&exts)) {
		if (!rd_u16(&exts, &type) || !rd_u16(&exts, &n) || !rd_sub(&exts, n, &e))
			return fail(h, "truncated extension");
		if (seen[type / 64] >> (type % 64) & 1)
			return fail(h, "duplicate extension");
		seen[type / 64] |= UINT64_C(1) << (type % 64);
		h->n_extensions++;
		if (type == NET_TLS_EXT_PRE_SHARED_KEY && !rd_done(&exts))
			return fail(h, "pre_shared_key is not the last extension");
		if (parse_extension(type, &e, h) < 0)
			return -1;
	}
	return 0;
}

static int parse_body(const uint8_t *body, size_t len, struct net_tls_hello *h)
{
	struct rd r = {.p = body, .len = len};
	const uint8_t *comp;
	size_t n, v;

	if (!rd_u16(&r, &v) || v < 0x0301 || v > 0x0303)
		return fail(h, "legacy_version out of 0x0301..0x0303");
	h->legacy_version = (uint16_t)v;
	if (!rd_take(&r, 32))
		return fail(h, "truncated random");
	if (!rd_u8(&r, &n) || n > 32 || !rd_take(&r, n))
		return fail(h, "malformed session id");
	if (!rd_u16(&r, &n) || n == 0 || n % 2 || !rd_take(&r, n))
		return fail(h, "malformed cipher suite list");
	if (!rd_u8(&r, &n) || n == 0 || !(comp = rd_take(&r, n)))
		return fail(h, "malformed compression method list");
	if (!memchr(comp, 0, n))
		return fail(h, "compression methods lack null");
	return parse_extensions(&r, h);
}

int net_tls_parse_hello(const uint8_t *data, size_t len, uint8_t *scratch, size_t scratch_cap,
			struct net_tls_hello *h, size_t *need)
{
	int r;

	memset(h, 0, sizeof(*h));
	*need = 0;
	if (scratch_cap > NET_TLS_MAX_HELLO)
		scratch_cap = NET_TLS_MAX_HELLO;
	r = reassemble(data, len, scratch, scratch_cap, h, need);
	if (r < 0)
		return r;
	if (parse_body(scratch + 4, h->hello_len, h) < 0)
		return -1;
	return h->sni ? 0 : NET_TLS_NO_SNI;
}

int net_tls_alpn_next(const struct net_tls_hello *h, size_t *cursor, const uint8_t **name,
		      size_t *name_len)
{
	size_t n;

	/* SAFETY: the list was checked to tile alpn[0..alpn_len) with non-empty names. */
	if (!h->alpn || *cursor >= h->alpn_len)
		return 0;
	n = h->alpn[*cursor];
	if (n == 0 || n > h->alpn_len - *cursor - 1)
		return 0;
	*name = h->alpn + *cursor + 1;
	*name_len = n;
	*cursor += 1 + n;
	return 1;
}
