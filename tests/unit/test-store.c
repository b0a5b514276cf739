/* SPDX-License-Identifier: MIT */
#include "store/store.h"
#include "common/error.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SBX_A "sbx_aaaaaaaaaaaaaaaaaaaaaaaa"
#define SBX_B "sbx_bbbbbbbbbbbbbbbbbbbbbbbb"
#define SBX_C "sbx_cccccccccccccccccccccccc"
#define CMD_1 "cmd_111111111111111111111111"
#define CMD_2 "cmd_222222222222222222222222"
#define CMD_3 "cmd_333333333333333333333333"
#define NO_SUCH "sbx_zzzzzzzzzzzzzzzzzzzzzzzz"

static char dir[] = "/tmp/test-store-XXXXXX";
static char db_path[sizeof(dir) + 16];

static struct store *open_ok(const char *path)
{
	struct al_error *err = NULL;
	struct store *st = NULL;
	int r = store_open(path, &st, &err);

	CHECK(r == 0 && st && !err, "store_open '%s' (%s)", path, err ? err->msg : "ok");
	al_error_free(err);
	return st;
}

static void sandbox_fill(struct store_sandbox *s, char *id, char *team, char *status,
			 int64_t created)
{
	*s = (struct store_sandbox){
	    .id = id,
	    .team = team,
	    .status = status,
	    .created_ms = created,
	    .expires_ms = created + 300000,
	    .init_pid = 4242,
	    .init_start = 987654321,
	    .host_base = 200000,
	    .config_json = "{\"image\":\"base\"}",
	    .policy_json = NULL,
	    .policy_gen = 1,
	};
}

static void sandboxes_basic(struct store *st)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct store_sandbox in, out;
	int r;

	sandbox_fill(&in, SBX_A, "team1", "running", 1000);
	r = store_sandbox_put(st, &in, &err);
	CHECK(r == 0, "sandbox put A");
	r = store_sandbox_get(st, SBX_A, &out, &err);
	CHECK(r == 1 && !strcmp(out.id, SBX_A) && !strcmp(out.team, "team1") &&
		  !strcmp(out.status, "running") && out.created_ms == 1000 &&
		  out.expires_ms == 301000 && out.stopped_ms == 0 && out.init_pid == 4242 &&
		  out.init_start == 987654321 && out.host_base == 200000 &&
		  !strcmp(out.config_json, "{\"image\":\"base\"}") && !out.policy_json &&
		  out.policy_gen == 1,
	      "sandbox get A round-trips every field");
	store_sandbox_release(&out);
	CHECK(out.id == NULL, "release clears the struct");

	r = store_sandbox_get(st, NO_SUCH, &out, &err);
	CHECK(r == 0 && !out.id && !err, "unknown sandbox gives 0");

	in.status = "bogus";
	r = store_sandbox_put(st, &in, &err);
	CHECK(r == -EINVAL && err && strstr(err->msg, "write sandbox"), "bad status refused (%s)",
	      err ? err->msg : "");
	al_error_freep(&err);
	in.team = NULL;
	r = store_sandbox_put(st, &in, &err);
	CHECK(r == -EINVAL && err, "sandbox without team refused");
	al_error_freep(&err);

	sandbox_fill(&in, SBX_B, "team2", "running", 3000);
	CHECK(store_sandbox_put(st, &in, &err) == 0, "sandbox put B");
	sandbox_fill(&in, SBX_C, "team1", "stopped", 2000);
	in.stopped_ms = 2500;
	CHECK(store_sandbox_put(st, &in, &err) == 0, "sandbox put C (stopped)");
}

static void sandboxes_set(struct store *st)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct store_sandbox out;

	CHECK(store_sandbox_set_status(st, SBX_B, "stopping", 0, &err) == 1, "set_status B");
	CHECK(store_sandbox_set_expiry(st, SBX_B, 999999, &err) == 1, "set_expiry B");
	CHECK(store_sandbox_set_policy(st, SBX_B, "{\"allow\":[\"*.example.com\"]}", 7, &err) == 1,
	      "set_policy B");
	CHECK(store_sandbox_get(st, SBX_B, &out, &err) == 1 && !strcmp(out.status, "stopping") &&
		  out.expires_ms == 999999 && out.policy_gen == 7 &&
		  !strcmp(out.policy_json, "{\"allow\":[\"*.example.com\"]}"),
	      "setters took effect");
	store_sandbox_release(&out);
	CHECK(store_sandbox_set_status(st, NO_SUCH, "stopped", 1, &err) == 0 && !err,
	      "set_status of unknown id gives 0");
	CHECK(store_sandbox_set_expiry(st, NO_SUCH, 1, &err) == 0, "set_expiry unknown gives 0");
	CHECK(store_sandbox_set_policy(st, NO_SUCH, "{}", 1, &err) == 0,
	      "set_policy unknown gives 0");
	CHECK(store_sandbox_set_status(st, SBX_B, "nonsense", 0, &err) == -EINVAL && err,
	      "set_status with a bad status refused");
}

struct collect {
	char ids[8][40];
	int n, stop_at;
};

static int collect_sandbox(void *ctx, const struct store_sandbox *s)
{
	struct collect *c = ctx;

	if (c->n == c->stop_at)
		return -ECANCELED;
	snprintf(c->ids[c->n++], sizeof(c->ids[0]), "%s", s->id);
	return 0;
}

static void sandboxes_each(struct store *st)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct collect c = {.stop_at = -1};
	int r;

	r = store_sandbox_each(st, NULL, false, collect_sandbox, &c, &err);
	CHECK(r == 0 && c.n == 3 && !strcmp(c.ids[0], SBX_A) && !strcmp(c.ids[1], SBX_C) &&
		  !strcmp(c.ids[2], SBX_B),
	      "each: all sandboxes, ordered by created_ms");
	c = (struct collect){.stop_at = -1};
	r = store_sandbox_each(st, "team1", false, collect_sandbox, &c, &err);
	CHECK(r == 0 && c.n == 2 && !strcmp(c.ids[0], SBX_A) && !strcmp(c.ids[1], SBX_C),
	      "each: team filter");
	c = (struct collect){.stop_at = -1};
	r = store_sandbox_each(st, "team1", true, collect_sandbox, &c, &err);
	CHECK(r == 0 && c.n == 1 && !strcmp(c.ids[0], SBX_A), "each: team + only_live");
	c = (struct collect){.stop_at = -1};
	r = store_sandbox_each(st, NULL, true, collect_sandbox, &c, &err);
	CHECK(r == 0 && c.n == 2, "each: only_live counts running and stopping");
	c = (struct collect){.stop_at = -1};
	r = store_sandbox_each(st, "nobody", false, collect_sandbox, &c, &err);
	CHECK(r == 0 && c.n == 0, "each: unknown team yields nothing");
	c = (struct collect){.stop_at = 1};
	r = store_sandbox_each(st, NULL, false, collect_sandbox, &c, &err);
	CHECK(r == -ECANCELED && c.n == 1 && err, "each: a callback <0 stops the iteration");
}

static int collect_command(void *ctx, const struct store_command *cmd)
{
	struct collect *c = ctx;

	snprintf(c->ids[c->n++], sizeof(c->ids[0]), "%s", cmd->id);
	return 0;
}

static void commands(struct store *st)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct store_command in = {
	    .id = CMD_1,
	    .sandbox_id = SBX_A,
	    .argv_json = "[\"echo\",\"hi\"]",
	    .cwd = "/work",
	    .sudo = true,
	    .started_ms = 5000,
	};
	struct store_command out;
	struct store_sandbox sb;
	struct collect c = {.stop_at = -1};

	CHECK(store_command_put(st, &in, &err) == 0, "command put 1");
	CHECK(store_command_get(st, CMD_1, &out, &err) == 1 && !strcmp(out.sandbox_id, SBX_A) &&
		  !strcmp(out.argv_json, "[\"echo\",\"hi\"]") && !strcmp(out.cwd, "/work") &&
		  out.sudo && out.started_ms == 5000 && out.finished_ms == 0 && !out.reason,
	      "command get 1 (running)");
	store_command_release(&out);
	CHECK(store_command_finish(st, CMD_1, 6000, 3, 0, "exited", &err) == 1, "finish 1");
	CHECK(store_command_get(st, CMD_1, &out, &err) == 1 && out.finished_ms == 6000 &&
		  out.exit_code == 3 && out.signal == 0 && !strcmp(out.reason, "exited"),
	      "finished command reads back");
	store_command_release(&out);
	CHECK(store_command_finish(st, NO_SUCH, 1, 0, 0, "exited", &err) == 0,
	      "finish of unknown id gives 0");
	CHECK(store_command_get(st, NO_SUCH, &out, &err) == 0 && !out.id,
	      "unknown command gives 0");

	in = (struct store_command){
	    .id = CMD_2, .sandbox_id = SBX_A, .argv_json = "[\"ls\"]", .started_ms = 4000};
	CHECK(store_command_put(st, &in, &err) == 0 && !err, "command put 2 (older, no cwd)");
	in = (struct store_command){
	    .id = CMD_3, .sandbox_id = SBX_B, .argv_json = "[\"true\"]", .started_ms = 7000};
	CHECK(store_command_put(st, &in, &err) == 0, "command put 3 in B");
	in.sandbox_id = NO_SUCH;
	in.id = "cmd_orphanorphanorphanorph";
	CHECK(store_command_put(st, &in, &err) == -ENOENT && err && strstr(err->msg, NO_SUCH),
	      "command of an unknown sandbox refused (%s)", err ? err->msg : "");
	al_error_freep(&err);

	CHECK(store_command_each(st, SBX_A, collect_command, &c, &err) == 0 && c.n == 2 &&
		  !strcmp(c.ids[0], CMD_2) && !strcmp(c.ids[1], CMD_1),
	      "command each: oldest first");
	c.n = 0;
	CHECK(store_command_each(st, NO_SUCH, collect_command, &c, &err) == 0 && c.n == 0,
	      "command each of unknown sandbox: nothing");

	/* Re-putting a sandbox updates it in place: its commands survive. */
	CHECK(store_sandbox_get(st, SBX_A, &sb, &err) == 1, "get A again");
	sb.expires_ms += 1;
	CHECK(store_sandbox_put(st, &sb, &err) == 0, "re-put A");
	store_sandbox_release(&sb);
	CHECK(store_command_get(st, CMD_1, &out, &err) == 1, "re-put sandbox keeps its commands");
	store_command_release(&out);
}

struct buf {
	char data[256];
	size_t len;
	int64_t last_seq;
	int chunks, stop_after;
	int streams[8];
};

static int collect_output(void *ctx, int64_t seq, int stream, uint64_t offset, const void *data,
			  size_t len)
{
	struct buf *b = ctx;

	if (b->chunks == b->stop_after)
		return -EINTR;
	if (b->len + len <= sizeof(b->data)) {
		memcpy(b->data + b->len, data, len);
		b->len += len;
	}
	if (b->chunks < 8)
		b->streams[b->chunks] = stream;
	b->chunks++;
	b->last_seq = seq;
	return 0;
}

static bool read_stream(struct store *st, const char *cmd, int stream, int64_t after,
			const char *expect)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct buf b = {.stop_after = -1};

	if (store_output_each(st, cmd, stream, after, collect_output, &b, &err) < 0)
		return false;
	return b.len == strlen(expect) && !memcmp(b.data, expect, b.len);
}

static void output(struct store *st)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct buf b = {.stop_after = -1};
	uint64_t size = 99;
	int64_t first_seq;

	CHECK(store_output_size(st, CMD_1, AL_STDOUT, &size, &err) == 0 && size == 0,
	      "empty output has size 0");
	CHECK(store_output_append(st, CMD_1, AL_STDOUT, 0, "abc", 3, &err) == 0, "append abc @0");
	CHECK(store_output_append(st, CMD_1, AL_STDOUT, 1, "bcdef", 5, &err) == 0,
	      "append bcdef @1 (overlap)");
	CHECK(store_output_size(st, CMD_1, AL_STDOUT, &size, &err) == 0 && size == 6,
	      "size is 6 after trimming the overlap");
	CHECK(read_stream(st, CMD_1, AL_STDOUT, 0, "abcdef"), "stored stdout is abcdef");
	CHECK(store_output_append(st, CMD_1, AL_STDOUT, 0, "abcd", 4, &err) == 0 &&
		  read_stream(st, CMD_1, AL_STDOUT, 0, "abcdef"),
	      "a full replay changes nothing");
	CHECK(store_output_append(st, CMD_1, AL_STDOUT, 6, "", 0, &err) == 0,
	      "empty chunk is a no-op");
	CHECK(store_output_append(st, CMD_1, AL_STDOUT, 10, "xyz", 3, &err) == -EINVAL && err &&
		  strstr(err->msg, "gap"),
	      "a gap is refused (%s)", err ? err->msg : "");
	al_error_freep(&err);
	CHECK(store_output_size(st, CMD_1, AL_STDOUT, &size, &err) == 0 && size == 6,
	      "refused gap stored nothing");
	CHECK(store_output_append(st, CMD_1, 3, 0, "x", 1, &err) == -EINVAL, "stream 3 refused");
	al_error_freep(&err);
	CHECK(store_output_append(st, "cmd_nonenonenonenonenonenone", AL_STDOUT, 0, "x", 1, &err) ==
		      -ENOENT &&
		  err,
	      "append to an unknown command refused (%s)", err ? err->msg : "");
	al_error_freep(&err);

	CHECK(store_output_append(st, CMD_1, AL_STDERR, 0, "ERR", 3, &err) == 0, "append stderr");
	CHECK(store_output_append(st, CMD_1, AL_STDOUT, 6, "gh", 2, &err) == 0, "append gh @6");
	CHECK(read_stream(st, CMD_1, AL_STDOUT, 0, "abcdefgh"), "stdout filter");
	CHECK(read_stream(st, CMD_1, AL_STDERR, 0, "ERR"), "stderr filter");
	CHECK(store_output_each(st, CMD_1, 0, 0, collect_output, &b, &err) == 0 && b.chunks == 4 &&
		  b.len == 11 && !memcmp(b.data, "abcdefERRgh", 11) && b.streams[0] == 1 &&
		  b.streams[2] == 2 && b.streams[3] == 1,
	      "both streams in append order");

	b = (struct buf){.stop_after = 1};
	CHECK(store_output_each(st, CMD_1, 0, 0, collect_output, &b, &err) == -EINTR &&
		  b.chunks == 1,
	      "output each stops when fn returns <0");
	al_error_freep(&err);
	first_seq = b.last_seq;
	CHECK(read_stream(st, CMD_1, 0, first_seq, "defERRgh"), "resume after the first seq");
	CHECK(read_stream(st, CMD_1, AL_STDOUT, first_seq, "defgh"), "resume + stream filter");
	CHECK(read_stream(st, CMD_1, 0, INT64_MAX, ""), "resume past the end: nothing");
	CHECK(store_output_size(st, "cmd_nonenonenonenonenonenone", AL_STDERR, &size, &err) == 0 &&
		  size == 0,
	      "size of an unknown command is 0");
	CHECK(store_output_each(st, CMD_1, 9, 0, collect_output, &b, &err) == -EINVAL,
	      "output each with a bad stream refused");
}

static void output_many(struct store *st)
{
	_cleanup_error_ struct al_error *err = NULL;
	char chunk[1000];
	uint64_t size;
	bool ok = true;
	struct buf b = {.stop_after = -1};
	int rc;

	/* More chunks than one batch (64) and more bytes than fits in buf: checks paging. */
	for (int i = 0; i < 150 && ok; i++) {
		memset(chunk, 'a' + i % 26, sizeof(chunk));
		ok = store_output_append(st, CMD_2, AL_STDERR, (uint64_t)i * sizeof(chunk), chunk,
					 sizeof(chunk), &err) == 0;
	}
	CHECK(ok, "150 appends");
	CHECK(store_output_size(st, CMD_2, AL_STDERR, &size, &err) == 0 && size == 150000,
	      "size 150000");
	rc = store_output_each(st, CMD_2, 0, 0, collect_output, &b, &err);
	CHECK(rc == 0 && b.chunks == 150, "each pages through 150 chunks (%d)", b.chunks);
}

struct writer {
	struct store *st;
	char cmd[40];
	int failures;
};

#define THREADS 8
#define THREAD_CHUNKS 200

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint64_t off = 0;

	for (int i = 0; i < THREAD_CHUNKS; i++) {
		struct al_error *err = NULL;
		char data[64];
		size_t len = 1 + (size_t)(i * 7) % sizeof(data);

		for (size_t j = 0; j < len; j++)
			data[j] = (char)('A' + (off + j) % 26);
		if (store_output_append(w->st, w->cmd, AL_STDOUT, off, data, len, &err) < 0)
			w->failures++;
		/* Replay the last half of the chunk, as after a reconnect. */
		if (store_output_append(w->st, w->cmd, AL_STDOUT, off + len / 2, data + len / 2,
					len - len / 2, &err) < 0)
			w->failures++;
		al_error_free(err);
		off += len;
	}
	return NULL;
}

struct verify {
	uint64_t next;
	bool ok;
};

static int verify_output(void *ctx, int64_t seq, int stream, uint64_t offset, const void *data,
			 size_t len)
{
	struct verify *v = ctx;
	const char *p = data;

	if (offset != v->next)
		v->ok = false;
	for (size_t j = 0; j < len; j++)
		if (p[j] != (char)('A' + (offset + j) % 26))
			v->ok = false;
	v->next = offset + len;
	return 0;
}

static void threads(struct store *st)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct writer w[THREADS];
	pthread_t tid[THREADS];
	uint64_t expect = 0;
	bool ok = true;

	for (int i = 0; i < THREAD_CHUNKS; i++)
		expect += 1 + (size_t)(i * 7) % 64;
	for (int i = 0; i < THREADS; i++) {
		struct store_command c = {
		    .sandbox_id = SBX_B, .argv_json = "[\"yes\"]", .started_ms = 8000 + i};

		w[i] = (struct writer){.st = st};
		snprintf(w[i].cmd, sizeof(w[i].cmd), "cmd_thread%014d", i);
		c.id = w[i].cmd;
		ok = ok && store_command_put(st, &c, &err) == 0;
	}
	CHECK(ok, "8 commands for the writer threads");
	for (int i = 0; i < THREADS; i++)
		pthread_create(&tid[i], NULL, writer_main, &w[i]);
	for (int i = 0; i < THREADS; i++)
		pthread_join(tid[i], NULL);
	for (int i = 0; i < THREADS; i++) {
		struct verify v = {.ok = true};
		uint64_t size = 0;

		ok = w[i].failures == 0 && store_output_size(st, w[i].cmd, 1, &size, &err) == 0 &&
		     size == expect &&
		     store_output_each(st, w[i].cmd, 1, 0, verify_output, &v, &err) == 0 && v.ok &&
		     v.next == expect;
		CHECK(ok, "thread %d: %" PRIu64 "/%" PRIu64 " bytes, contiguous and intact", i,
		      size, expect);
	}
}

static void reopen(struct store **st)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct store_sandbox sb;
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	const char *mode = "";

	store_close(*st);
	*st = open_ok(db_path);
	CHECK(store_sandbox_get(*st, SBX_B, &sb, &err) == 1 && sb.policy_gen == 7,
	      "sandbox persists across close/open");
	store_sandbox_release(&sb);
	CHECK(read_stream(*st, CMD_1, AL_STDOUT, 0, "abcdefgh"), "output persists");
	CHECK(store_output_append(*st, CMD_1, AL_STDOUT, 4, "efghij", 6, &err) == 0 &&
		  read_stream(*st, CMD_1, AL_STDOUT, 0, "abcdefghij"),
	      "overlap trimming works after reopen");

	/* A second connection sees WAL mode and the latest schema version (2). */
	sqlite3_open(db_path, &db);
	sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL);
	if (sqlite3_step(s) == SQLITE_ROW)
		mode = strdupa((const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
	CHECK(!strcmp(mode, "wal"), "journal_mode is wal (%s)", mode);
	sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL);
	CHECK(sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) == 2, "user_version 2");
	sqlite3_finalize(s);
	sqlite3_close(db);
}

static int count_commands(void *ctx, const struct store_command *c)
{
	(*(int *)ctx)++;
	return 0;
}

static void prune(struct store *st)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct store_sandbox sb;
	struct store_command c;
	uint64_t size = 1;
	int n = 0;

	/* A: stopped long ago (pruned); C: stopped at 2500 (pruned); B: stopping (kept). */
	CHECK(store_sandbox_set_status(st, SBX_A, "stopped", 1500, &err) == 1, "stop A");
	CHECK(store_prune(st, 1000, &err) == 0, "prune before any stop time deletes nothing");
	CHECK(store_prune(st, 3000, &err) == 2, "prune removes the two stopped sandboxes");
	CHECK(store_sandbox_get(st, SBX_A, &sb, &err) == 0 &&
		  store_sandbox_get(st, SBX_C, &sb, &err) == 0,
	      "pruned sandboxes are gone");
	CHECK(store_command_get(st, CMD_1, &c, &err) == 0 &&
		  store_command_get(st, CMD_2, &c, &err) == 0,
	      "their commands are gone");
	CHECK(store_output_size(st, CMD_1, AL_STDOUT, &size, &err) == 0 && size == 0 &&
		  read_stream(st, CMD_1, 0, 0, "") && read_stream(st, CMD_2, 0, 0, ""),
	      "their output is gone");
	CHECK(store_sandbox_get(st, SBX_B, &sb, &err) == 1, "live sandbox kept");
	store_sandbox_release(&sb);
	CHECK(store_command_each(st, SBX_B, count_commands, &n, &err) == 0 && n == 1 + THREADS,
	      "live sandbox keeps its commands (%d)", n);
	CHECK(store_output_append(st, CMD_1, AL_STDOUT, 0, "x", 1, &err) == -ENOENT,
	      "append to a pruned command refused");

	/* One ended sandbox at a time (the daemon's cap on ended sandboxes). */
	CHECK(store_sandbox_delete(st, SBX_B, &err) == 0, "a sandbox that has not ended is kept");
	CHECK(store_sandbox_get(st, SBX_B, &sb, &err) == 1, "... and still there");
	store_sandbox_release(&sb);
	CHECK(store_sandbox_set_status(st, SBX_B, "failed", 4000, &err) == 1 &&
		  store_sandbox_delete(st, SBX_B, &err) == 1,
	      "an ended sandbox is deleted by id");
	n = 0;
	CHECK(store_sandbox_get(st, SBX_B, &sb, &err) == 0 &&
		  store_command_each(st, SBX_B, count_commands, &n, &err) == 0 && n == 0,
	      "with its commands");
	CHECK(store_sandbox_delete(st, SBX_B, &err) == 0, "deleting it again finds nothing");
}

/* One command at a time, with its output (the daemon's cap on a sandbox's commands). */
static void delete_command(struct store *st)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct store_sandbox sb = {.id = "sbx_del",
				   .team = "t",
				   .status = "running",
				   .created_ms = 1,
				   .expires_ms = 2,
				   .config_json = "{}",
				   .policy_json = "null"};
	struct store_command c1 = {.id = "cmd_del1",
				   .sandbox_id = "sbx_del",
				   .argv_json = "[]",
				   .cwd = "/",
				   .started_ms = 1};
	struct store_command c2 = c1, got;
	uint64_t size = 1;

	c2.id = "cmd_del2";
	CHECK(store_sandbox_put(st, &sb, &err) == 0 && store_command_put(st, &c1, &err) == 0 &&
		  store_command_put(st, &c2, &err) == 0 &&
		  store_output_append(st, "cmd_del1", AL_STDOUT, 0, "abc", 3, &err) == 0 &&
		  store_output_append(st, "cmd_del2", AL_STDOUT, 0, "xyz", 3, &err) == 0,
	      "a sandbox with two commands and their output");
	CHECK(store_command_delete(st, "cmd_del1", &err) == 1, "a command is deleted by id");
	CHECK(store_command_get(st, "cmd_del1", &got, &err) == 0 &&
		  store_output_size(st, "cmd_del1", AL_STDOUT, &size, &err) == 0 && size == 0,
	      "with its output");
	CHECK(store_command_get(st, "cmd_del2", &got, &err) == 1 &&
		  read_stream(st, "cmd_del2", AL_STDOUT, 0, "xyz"),
	      "the other one is untouched");
	store_command_release(&got);
	CHECK(store_command_delete(st, "cmd_del1", &err) == 0, "deleting it again finds nothing");
}

static void write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd >= 0) {
		(void)!write(fd, data, len);
		close(fd);
	}
}

static void bad_files(void)
{
	_cleanup_error_ struct al_error *err = NULL;
	char path[sizeof(dir) + 32];
	struct store *st = (struct store *)1;
	sqlite3 *db = NULL;
	char garbage[4096];
	int r;

	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (char)(i * 131 + 7);
	snprintf(path, sizeof(path), "%s/garbage.db", dir);
	write_file(path, garbage, sizeof(garbage));
	r = store_open(path, &st, &err);
	CHECK(r < 0 && !st && err && strstr(err->msg, "not a database") && strstr(err->msg, path),
	      "garbage file refused: %s", err ? err->msg : "(no error)");
	al_error_freep(&err);

	snprintf(path, sizeof(path), "%s/other.db", dir);
	sqlite3_open(path, &db);
	sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL);
	sqlite3_close(db);
	r = store_open(path, &st, &err);
	CHECK(r == -EINVAL && !st && err && strstr(err->msg, "not an airlock"),
	      "another application's database refused: %s", err ? err->msg : "");
	al_error_freep(&err);

	snprintf(path, sizeof(path), "%s/future.db", dir);
	sqlite3_open(path, &db);
	sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL);
	sqlite3_close(db);
	r = store_open(path, &st, &err);
	CHECK(r == -ENOTSUP && !st && err && strstr(err->msg, "version 99"),
	      "newer schema refused: %s", err ? err->msg : "");
	al_error_freep(&err);

	snprintf(path, sizeof(path), "%s/no/such/dir/state.db", dir);
	r = store_open(path, &st, &err);
	CHECK(r < 0 && !st && err && strstr(err->msg, "open"), "missing directory: %s",
	      err ? err->msg : "");
	al_error_freep(&err);
	CHECK(store_open("", &st, &err) == -EINVAL && !st, "empty path refused");
}

/* The real state file overwritten: wholly, then all but its 100-byte header. */
static void corrupt_state(void)
{
	_cleanup_error_ struct al_error *err = NULL;
	struct store *st = (struct store *)1;
	char garbage[8192], header[100];
	int fd, r;

	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (char)(i * 37 + 11);
	fd = open(db_path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && read(fd, header, sizeof(header)) == sizeof(header), "read the db header");
	if (fd >= 0)
		close(fd);
	memcpy(garbage, header, sizeof(header));
	write_file(db_path, garbage, sizeof(garbage));
	r = store_open(db_path, &st, &err);
	CHECK(r < 0 && !st && err && strstr(err->msg, db_path),
	      "state file with a valid header and garbage pages refused: %s",
	      err ? err->msg : "(no error)");
	al_error_freep(&err);

	write_file(db_path, garbage + sizeof(header), sizeof(garbage) - sizeof(header));
	r = store_open(db_path, &st, &err);
	CHECK(r < 0 && !st && err && strstr(err->msg, "not a database"),
	      "state file overwritten with garbage refused: %s", err ? err->msg : "(no error)");
}

static void cleanup_dir(void)
{
	static const char *const names[] = {"state.db",	  "state.db-wal", "state.db-shm",
					    "garbage.db", "other.db",	  "future.db"};
	char path[sizeof(dir) + 32];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

int main(void)
{
	struct store *st;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(db_path, sizeof(db_path), "%s/state.db", dir);
	st = open_ok(db_path);
	if (!st)
		return tap_done();
	sandboxes_basic(st);
	sandboxes_set(st);
	sandboxes_each(st);
	commands(st);
	output(st);
	output_many(st);
	threads(st);
	reopen(&st);
	prune(st);
	delete_command(st);
	store_close(st);
	st = open_ok(db_path);
	store_close(st);
	store_close(NULL);
	bad_files();
	corrupt_state();
	cleanup_dir();
	return tap_done();
}
