/* SPDX-License-Identifier: MIT */
/*
 * What a scrape reads besides the counters: the gateways' decisions. airlockd does not
 * see them as they happen -- each sandbox's gateway appends them to its egress log,
 * STATE/egress/<id>.jsonl (docs/network.md, "The egress log") -- so a scrape reads
 * the lines added since the last one (the offset is kept per sandbox, dm_sbx.egress_off)
 * and counts them: a decision per line but a flow's "close" line (its "open" line was
 * the decision), a "repeated" or "rate_limited" line as its "suppressed" count; bytes
 * from every line. m.scrape_mu is held: one scrape at a time moves the offsets.
 */
#include "daemon/internal.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t dm_egress_log_size(struct daemon *d, const char *id)
{
	_cleanup_free_ char *path = dm_egress_log_path(d, id);
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* A reason word of the gateway's vocabulary ([a-z0-9_], short), else "other": a label
 * value the metrics keep must come from a small set. */
static const char *word_or_other(const char *s, size_t max)
{
	size_t n = s ? strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") : 0;

	return s && n && n == strlen(s) && n < max ? s : "other";
}

static void count_decision(struct dm_metrics *m, const char *verdict, const char *reason,
			   uint64_t n)
{
	size_t i;

	verdict = strcmp(verdict, "allow") == 0 || strcmp(verdict, "deny") == 0 ? verdict : "other";
	reason = word_or_other(reason, sizeof(m->egress[0].reason));
	for (i = 0; i < m->n_egress; i++)
		if (strcmp(m->egress[i].verdict, verdict) == 0 &&
		    strcmp(m->egress[i].reason, reason) == 0)
			break;
	if (i == m->n_egress) {
		/* Past the first DM_EGRESS_KINDS - 3 pairs, new reasons count as "other" (one
		 * slot for each verdict is left for it). */
		if (m->n_egress >= DM_EGRESS_KINDS - 3 && strcmp(reason, "other") != 0)
			return count_decision(m, verdict, "other", n);
		m->n_egress++;
		snprintf(m->egress[i].verdict, sizeof(m->egress[i].verdict), "%s", verdict);
		snprintf(m->egress[i].reason, sizeof(m->egress[i].reason), "%s", reason);
	}
	m->egress[i].n += n;
}

static uint64_t json_u64(json_t *o, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(o, key));

	return v > 0 ? (uint64_t)v : 0;
}

static void count_line(struct dm_metrics *m, const char *line, size_t len)
{
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	const char *event;
	uint64_t n;

	if (!json_is_object(o)) {
		m->egress_lines_bad++;
		json_decref(o);
		return;
	}
	if (json_object_get(o, "direction")) { /* airlockd's inbound lines (ports.c): not egress */
		json_decref(o);
		return;
	}
	m->egress_in += json_u64(o, "bytes_in");
	m->egress_out += json_u64(o, "bytes_out");
	event = json_string_value(json_object_get(o, "event"));
	if (!event || strcmp(event, "close") != 0) {
		n = json_u64(o, "suppressed");
		count_decision(m, json_string_value(json_object_get(o, "verdict")) ?: "",
			       json_string_value(json_object_get(o, "reason")), n ? n : 1);
	}
	json_decref(o);
}

uint64_t dm_metrics_egress_tail(struct daemon *d, const char *id, uint64_t off, uint64_t max)
{
	_cleanup_free_ char *path = dm_egress_log_path(d, id), *buf = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t want, got = 0, start = 0;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_size <= off)
		return fd < 0 ? off : (uint64_t)st.st_size < off ? (uint64_t)st.st_size : off;
	want = (size_t)((uint64_t)st.st_size - off < max ? (uint64_t)st.st_size - off : max);
	buf = xrealloc(NULL, want ? want : 1);
	while (got < want && (n = pread(fd, buf + got, want - got, (off_t)(off + got))) > 0)
		got += (size_t)n;
	for (size_t i = 0; i < got; i++) {
		if (buf[i] != '\n')
			continue;
		if (i > start)
			count_line(&d->m, buf + start, i - start);
		start = i + 1;
	}
	/* A line longer than all we may read at once is none of the gateway's: skipped. */
	if (start == 0 && got == max) {
		d->m.egress_lines_bad++;
		start = got;
	}
	return off + start;
}

static int id_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

void dm_egress_logs_list(struct daemon *d, struct dm_egress_logs *out)
{
	_cleanup_free_ char *dir = xasprintf("%s/egress", d->state_dir);
	DIR *dp = opendir(dir);
	size_t cap = 0;
	struct dirent *de;

	out->id = NULL;
	out->n = 0;
	while (dp && (de = readdir(dp))) {
		size_t len = strlen(de->d_name);

		if (len != DM_ID_LEN + 6 || strcmp(de->d_name + DM_ID_LEN, ".jsonl") != 0)
			continue;
		if (out->n == cap) {
			cap = cap ? cap * 2 : 64;
			out->id = xrealloc(out->id, cap * sizeof(*out->id));
		}
		memcpy(out->id[out->n], de->d_name, DM_ID_LEN);
		out->id[out->n++][DM_ID_LEN] = '\0';
	}
	if (dp)
		closedir(dp);
	if (out->n)
		qsort(out->id, out->n, sizeof(*out->id), id_cmp);
}

bool dm_egress_logs_has(const struct dm_egress_logs *l, const char *id)
{
	return l->n && bsearch(id, l->id, l->n, sizeof(*l->id), id_cmp) != NULL;
}

void dm_egress_logs_free(struct dm_egress_logs *l)
{
	free(l->id);
	l->id = NULL;
	l->n = 0;
}
