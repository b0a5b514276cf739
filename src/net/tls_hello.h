/* SPDX-License-Identifier: MIT */
/*
 * The TLS ClientHello at the start of a sandbox's connection
 * (docs/design/parsers.md). The gateway reads it to learn the
 * SNI and to refuse what it cannot judge, then splices or terminates.
 *
 * Accepted: one or more TLS records of type handshake (22), record version
 * 0x0301..0x0304, the same in every record, each 1..2^14 bytes, carrying
 * exactly one handshake message of type client_hello (1) of at most
 * NET_TLS_MAX_HELLO bytes (header included), ending exactly at a record's
 * end. Inside: legacy_version 0x0301..0x0303, a 32-byte random, a session
 * id of at most 32 bytes, a non-empty even cipher-suite list, a compression
 * list containing null, and an extension block that fills the rest exactly
 * (or is absent). Every extension appears at most once; pre_shared_key, if
 * present, is last. server_name holds exactly one host_name entry of 1..255
 * bytes of printable ASCII without space; ALPN a non-empty list of non-empty
 * names; supported_versions a non-empty even list.
 *
 * Refused (-1): SSLv2-style hellos and any non-handshake record, record or
 * handshake lengths out of range, interleaved or trailing handshake data, a
 * malformed field or extension, a duplicate extension, an empty, NUL,
 * control or high byte name, several names, a non-host_name entry.
 *
 * Flagged, for the caller to refuse: encrypted_client_hello (0xfe0d) and the
 * legacy encrypted_server_name (0xffce); a hello without server_name returns
 * NET_TLS_NO_SNI instead of 0.
 *
 * The handshake body is reassembled (record headers stripped) into a caller
 * scratch buffer; every span in struct net_tls_hello points into it. No
 * allocation, no recursion. Return convention as picohttpparser: 0 / 1 =
 * parsed, -1 malformed (h->why, static), -2 need more bytes (*need = total
 * input length needed before anything new can be learnt).
 */
#ifndef AL_NET_TLS_HELLO_H
#define AL_NET_TLS_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_TLS_MAX_HELLO 16384	 /* reassembly cap: handshake header + body */
#define NET_TLS_MAX_RECORD 16384 /* 2^14, RFC 8446 §5.1 */
#define NET_TLS_MAX_SNI 255
#define NET_TLS_NO_SNI 1 /* parsed, but there is no server_name extension */

#define NET_TLS_EXT_SERVER_NAME 0x0000
#define NET_TLS_EXT_ALPN 0x0010
#define NET_TLS_EXT_PRE_SHARED_KEY 0x0029
#define NET_TLS_EXT_SUPPORTED_VERSIONS 0x002b
#define NET_TLS_EXT_ECH 0xfe0d
#define NET_TLS_EXT_ESNI 0xffce

struct net_tls_hello {
	uint16_t record_version; /* of the records */
	uint16_t legacy_version; /* ClientHello.legacy_version */
	size_t consumed;	 /* input bytes of the records that carried the hello */
	size_t n_records;
	size_t hello_len; /* handshake body length */
	/* SAFETY: every span below points into the caller's scratch buffer. */
	const uint8_t *sni; /* raw host_name bytes, not NUL-terminated; NULL without SNI */
	size_t sni_len;
	bool ech;	     /* encrypted_client_hello present */
	bool esni;	     /* legacy encrypted_server_name present */
	const uint8_t *alpn; /* the ProtocolNameList body (len-prefixed names) */
	size_t alpn_len;
	size_t n_alpn;
	const uint8_t *versions; /* supported_versions list body (2 bytes each) */
	size_t versions_len;
	bool tls13; /* supported_versions offers 0x0304 */
	size_t n_extensions;
	const char *why; /* on -1, a static reason */
};

/*
 * Parse the ClientHello at the start of data[0..len). scratch must hold
 * NET_TLS_MAX_HELLO bytes (a smaller one lowers the cap). Returns 0 (SNI
 * present), NET_TLS_NO_SNI, -1 (h->why), or -2 with *need > len. Bytes after
 * the hello's last record (h->consumed) are not examined.
 */
int net_tls_parse_hello(const uint8_t *data, size_t len, uint8_t *scratch, size_t scratch_cap,
			struct net_tls_hello *h, size_t *need);

/*
 * Iterate the ALPN names: start with *cursor = 0; returns 1 with *name and
 * *name_len for each, then 0.
 */
int net_tls_alpn_next(const struct net_tls_hello *h, size_t *cursor, const uint8_t **name,
		      size_t *name_len);

#endif
