/* SPDX-License-Identifier: MIT */
#include "net/gwctl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Digits only, at least one, no sign, no overflow; *end after them. */
static int parse_u64(const char *s, unsigned long long *out, const char **end)
{
	unsigned long long v = 0;
	const char *p = s;

	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (~0ull - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (p == s)
		return -1;
	*out = v;
	*end = p;
	return 0;
}

static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

int net_gwctl_parse(const char *line, struct net_gwctl *m)
{
	unsigned long long v;
	const char *p;

	*m = (struct net_gwctl){0};
	if (has_control(line))
		return -1;
	if (strcmp(line, "R") == 0 || strcmp(line, "P") == 0 || strcmp(line, "A") == 0) {
		m->kind = line[0] == 'R'   ? NET_GWCTL_READY
			  : line[0] == 'P' ? NET_GWCTL_POOLED
					   : NET_GWCTL_ATTACHED;
		return 0;
	}
	if (strncmp(line, "A ", 2) == 0) {
		if (parse_u64(line + 2, &v, &p) < 0 || *p)
			return -1;
		m->kind = NET_GWCTL_ATTACHED;
		m->gen = v;
		return 0;
	}
	if (line[0] == 'E') {
		if (parse_u64(line + 1, &v, &p) < 0 || v < 1 || v > 4095 || *p != ' ')
			return -1;
		m->kind = NET_GWCTL_ERROR;
		m->code = (int)v;
		m->text = p + 1;
		return 0;
	}
	if (strncmp(line, "PID ", 4) == 0) {
		if (parse_u64(line + 4, &v, &p) < 0 || *p || v < 1 || v > 0x3fffffff)
			return -1;
		m->kind = NET_GWCTL_PID;
		m->gen = v;
		return 0;
	}
	if (strncmp(line, "POLICY ", 7) == 0) {
		if (parse_u64(line + 7, &v, &p) < 0 || *p != ' ' || !p[1])
			return -1;
		m->kind = NET_GWCTL_POLICY;
		m->gen = v;
		m->text = p + 1;
		return 0;
	}
	return -1;
}

/* Write all of buf (a short write goes on where it stopped). */
static int write_all(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

int net_gwctl_send(int fd, const struct net_gwctl *m)
{
	char small[1024], *buf = small;
	const char *text = m->text ? m->text : "";
	size_t cap = sizeof(small), len, head;
	int r, n;

	switch (m->kind) {
	case NET_GWCTL_READY:
		return write_all(fd, "R\n", 2);
	case NET_GWCTL_POOLED:
		return write_all(fd, "P\n", 2);
	case NET_GWCTL_ATTACHED:
		n = m->gen ? snprintf(small, sizeof(small), "A %llu\n", m->gen)
			   : snprintf(small, sizeof(small), "A\n");
		return write_all(fd, small, (size_t)n);
	case NET_GWCTL_PID:
		n = snprintf(small, sizeof(small), "PID %llu\n", m->gen);
		return write_all(fd, small, (size_t)n);
	case NET_GWCTL_ERROR:
		n = snprintf(small, sizeof(small), "E%d ",
			     m->code >= 1 && m->code <= 4095 ? m->code : EIO);
		break;
	case NET_GWCTL_POLICY:
		n = snprintf(small, sizeof(small), "POLICY %llu ", m->gen);
		break;
	default:
		errno = EINVAL;
		return -1;
	}
	head = (size_t)n;
	len = strlen(text);
	if (len == 0)
		text = "-", len = 1; /* never an empty message: the parser wants one */
	if (head + len + 1 > NET_GWCTL_LINE_MAX)
		len = NET_GWCTL_LINE_MAX - head - 1;
	if (head + len + 1 > cap) {
		cap = head + len + 1;
		buf = malloc(cap);
		if (!buf)
			return -1;
		memcpy(buf, small, head);
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];

		buf[head + i] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	buf[head + len] = '\n';
	r = write_all(fd, buf, head + len + 1);
	if (buf != small)
		free(buf);
	return r;
}
