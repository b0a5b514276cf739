/* SPDX-License-Identifier: MIT */
/*
 * airlockd's durable state in SQLite (docs/design/store.md).
 *
 * One connection, opened without SQLite's own mutexes and serialized by
 * st->lock instead. Every statement is prepared once at open and cached; all
 * values travel as bound parameters. The *_each() functions copy rows out
 * under the lock and call back without it, so a callback may call the store.
 */
#include "store/store.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <string.h>

#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_APPLICATION_ID 1095912523 /* 0x41524c4b, "ARLK" */
#define OUTPUT_BATCH_ROWS 64
#define OUTPUT_BATCH_BYTES (1 << 20)

/* Migration i takes the schema from version i to i + 1 and sets user_version. */
static const char *const store_migrations[] = {
    "PRAGMA application_id = 1095912523;"
    "CREATE TABLE sandboxes ("
    " id TEXT PRIMARY KEY NOT NULL,"
    " team TEXT NOT NULL,"
    " status TEXT NOT NULL CHECK (status IN ('running', 'stopping', 'stopped', 'failed')),"
    " created_ms INTEGER NOT NULL,"
    " expires_ms INTEGER NOT NULL,"
    " stopped_ms INTEGER NOT NULL DEFAULT 0,"
    " init_pid INTEGER NOT NULL DEFAULT 0,"
    " init_start INTEGER NOT NULL DEFAULT 0,"
    " host_base INTEGER NOT NULL DEFAULT 0,"
    " config_json TEXT,"
    " policy_json TEXT,"
    " policy_gen INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX sandboxes_created ON sandboxes (created_ms);"
    "CREATE INDEX sandboxes_team_created ON sandboxes (team, created_ms);"
    "CREATE INDEX sandboxes_stopped ON sandboxes (stopped_ms);"
    "CREATE TABLE commands ("
    " id TEXT PRIMARY KEY NOT NULL,"
    " sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,"
    " argv_json TEXT NOT NULL,"
    " cwd TEXT,"
    " sudo INTEGER NOT NULL DEFAULT 0,"
    " started_ms INTEGER NOT NULL,"
    " finished_ms INTEGER NOT NULL DEFAULT 0,"
    " exit_code INTEGER NOT NULL DEFAULT 0,"
    " signal INTEGER NOT NULL DEFAULT 0,"
    " reason TEXT);"
    "CREATE INDEX commands_sandbox ON commands (sandbox_id, started_ms);"
    "CREATE TABLE output ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " command_id TEXT NOT NULL REFERENCES commands (id) ON DELETE CASCADE,"
    " stream INTEGER NOT NULL CHECK (stream IN (1, 2)),"
    " \"offset\" INTEGER NOT NULL CHECK (\"offset\" >= 0),"
    " data BLOB NOT NULL);"
    "CREATE INDEX output_command_seq ON output (command_id, seq);"
    "CREATE UNIQUE INDEX output_command_stream_offset ON output (command_id, stream, \"offset\");"
    "PRAGMA user_version = 1;",
    /* v2: a command's own timeout, so it survives a daemon restart. */
    "ALTER TABLE commands ADD COLUMN deadline_ms INTEGER NOT NULL DEFAULT 0;"
    "PRAGMA user_version = 2;",
};
#define STORE_SCHEMA_VERSION ((int)ARRAY_SIZE(store_migrations))

#define SBX_COLS                                                                                   \
	"id, team, status, created_ms, expires_ms, stopped_ms, init_pid, init_start, host_base, "  \
	"config_json, policy_json, policy_gen"
#define CMD_COLS                                                                                   \
	"id, sandbox_id, argv_json, cwd, sudo, started_ms, finished_ms, exit_code, signal, "       \
	"reason, "                                                                                 \
	"deadline_ms"

enum stmt_id {
	S_BEGIN,
	S_COMMIT,
	S_ROLLBACK,
	S_SBX_PUT,
	S_SBX_GET,
	S_SBX_EACH_ALL,
	S_SBX_EACH_TEAM,
	S_SBX_SET_STATUS,
	S_SBX_SET_EXPIRY,
	S_SBX_SET_POLICY,
	S_CMD_PUT,
	S_CMD_GET,
	S_CMD_FINISH,
	S_CMD_EACH,
	S_OUT_SIZE,
	S_OUT_INSERT,
	S_OUT_EACH,
	S_PRUNE,
	S_SBX_DELETE,
	S_CMD_DELETE,
	S__MAX
};

static const struct {
	const char *what; /* the statement's purpose, for error messages */
	const char *sql;
} stmts[S__MAX] = {
    [S_BEGIN] = {"begin transaction", "BEGIN IMMEDIATE"},
    [S_COMMIT] = {"commit transaction", "COMMIT"},
    [S_ROLLBACK] = {"roll back transaction", "ROLLBACK"},
    [S_SBX_PUT] = {"write sandbox",
		   "INSERT INTO sandboxes (" SBX_COLS ") VALUES "
		   "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) "
		   "ON CONFLICT (id) DO UPDATE SET team = excluded.team, "
		   "status = excluded.status, created_ms = excluded.created_ms, "
		   "expires_ms = excluded.expires_ms, stopped_ms = excluded.stopped_ms, "
		   "init_pid = excluded.init_pid, init_start = excluded.init_start, "
		   "host_base = excluded.host_base, config_json = excluded.config_json, "
		   "policy_json = excluded.policy_json, policy_gen = excluded.policy_gen"},
    [S_SBX_GET] = {"read sandbox", "SELECT " SBX_COLS " FROM sandboxes WHERE id = ?1"},
    [S_SBX_EACH_ALL] = {"list sandboxes", "SELECT " SBX_COLS " FROM sandboxes "
					  "WHERE ?2 = 0 OR status IN ('running', 'stopping') "
					  "ORDER BY created_ms, id"},
    [S_SBX_EACH_TEAM] = {"list sandboxes of team",
			 "SELECT " SBX_COLS " FROM sandboxes "
			 "WHERE team = ?1 AND (?2 = 0 OR status IN ('running', 'stopping')) "
			 "ORDER BY created_ms, id"},
    [S_SBX_SET_STATUS] = {"set sandbox status",
			  "UPDATE sandboxes SET status = ?2, stopped_ms = ?3 WHERE id = ?1"},
    [S_SBX_SET_EXPIRY] = {"set sandbox expiry",
			  "UPDATE sandboxes SET expires_ms = ?2 WHERE id = ?1"},
    [S_SBX_SET_POLICY] = {"set sandbox network policy",
			  "UPDATE sandboxes SET policy_json = ?2, policy_gen = ?3 WHERE id = ?1"},
    [S_CMD_PUT] = {"write command",
		   "INSERT INTO commands (" CMD_COLS ") VALUES "
		   "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
		   "ON CONFLICT (id) DO UPDATE SET sandbox_id = excluded.sandbox_id, "
		   "argv_json = excluded.argv_json, cwd = excluded.cwd, sudo = excluded.sudo, "
		   "started_ms = excluded.started_ms, finished_ms = excluded.finished_ms, "
		   "exit_code = excluded.exit_code, signal = excluded.signal, "
		   "reason = excluded.reason, deadline_ms = excluded.deadline_ms"},
    [S_CMD_GET] = {"read command", "SELECT " CMD_COLS " FROM commands WHERE id = ?1"},
    [S_CMD_FINISH] = {"finish command",
		      "UPDATE commands SET finished_ms = ?2, exit_code = ?3, signal = ?4, "
		      "reason = ?5 WHERE id = ?1"},
    [S_CMD_EACH] = {"list commands", "SELECT " CMD_COLS " FROM commands WHERE sandbox_id = ?1 "
				     "ORDER BY started_ms, rowid"},
    [S_OUT_SIZE] = {"read output size",
		    "SELECT \"offset\" + length(data) FROM output "
		    "WHERE command_id = ?1 AND stream = ?2 ORDER BY \"offset\" DESC LIMIT 1"},
    [S_OUT_INSERT] = {"append output chunk",
		      "INSERT INTO output (command_id, stream, \"offset\", data) "
		      "VALUES (?1, ?2, ?3, ?4)"},
    [S_OUT_EACH] = {"read output", "SELECT seq, stream, \"offset\", data FROM output "
				   "WHERE command_id = ?1 AND seq > ?2 AND (?3 = 0 OR stream = ?3) "
				   "ORDER BY seq LIMIT ?4"},
    [S_PRUNE] = {"prune stopped sandboxes",
		 "DELETE FROM sandboxes WHERE status IN ('stopped', 'failed') "
		 "AND stopped_ms > 0 AND stopped_ms < ?1"},
    [S_SBX_DELETE] = {"delete an ended sandbox",
		      "DELETE FROM sandboxes WHERE id = ?1 AND status IN ('stopped', 'failed')"},
    [S_CMD_DELETE] = {"delete a command", "DELETE FROM commands WHERE id = ?1"},
};

struct store {
	pthread_mutex_t lock;
	sqlite3 *db;
	char *path;
	uint64_t errors; /* SQLite failures so far (db_fail; atomic: read without the lock) */
	sqlite3_stmt *stmt[S__MAX];
};

/* ---- helpers ---------------------------------------------------------- */

static struct store *store_lock(struct store *st)
{
	pthread_mutex_lock(&st->lock);
	return st;
}

static void store_unlockp(struct store **st)
{
	if (*st)
		pthread_mutex_unlock(&(*st)->lock);
}
#define _cleanup_unlock_ __attribute__((cleanup(store_unlockp), unused))

/* Leaves a cached statement ready for its next use, and drops pointers bound to it. */
static void stmt_resetp(sqlite3_stmt **s)
{
	if (*s) {
		sqlite3_reset(*s);
		sqlite3_clear_bindings(*s);
	}
}
#define _cleanup_stmt_ __attribute__((cleanup(stmt_resetp)))

static int sqlite_errno(sqlite3 *db, int rc)
{
	int e;

	switch (rc & 0xff) {
	case SQLITE_FULL:
		return ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return EBUSY;
	case SQLITE_NOMEM:
		return ENOMEM;
	case SQLITE_READONLY:
		return EROFS;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return EACCES;
	case SQLITE_TOOBIG:
		return EFBIG;
	case SQLITE_CONSTRAINT:
		return rc == SQLITE_CONSTRAINT_FOREIGNKEY ? ENOENT : EINVAL;
	case SQLITE_CANTOPEN:
	case SQLITE_IOERR:
		e = db ? sqlite3_system_errno(db) : 0;
		return e > 0 ? e : EIO;
	default:
		return EIO;
	}
}

/* Raises a SQLite failure: "store: <what> '<subject>': <sqlite message>". */
static int db_fail(struct store *st, int rc, const char *what, const char *subject,
		   struct al_error **err)
{
	const char *msg = st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc);

	__atomic_fetch_add(&st->errors, 1, __ATOMIC_RELAXED);

	if (subject)
		return al_error_set(err, sqlite_errno(st->db, rc), "store: %s '%s': %s", what,
				    subject, msg);
	return al_error_set(err, sqlite_errno(st->db, rc), "store: %s: %s", what, msg);
}

static int stmt_fail(struct store *st, int rc, enum stmt_id id, const char *subject,
		     struct al_error **err)
{
	return db_fail(st, rc, stmts[id].what, subject, err);
}

/* Runs a statement that returns no rows; returns the number of rows changed. */
static int stmt_run(struct store *st, enum stmt_id id, const char *subject, struct al_error **err)
{
	_cleanup_stmt_ sqlite3_stmt *s = st->stmt[id];
	int rc = sqlite3_step(s);

	if (rc != SQLITE_DONE)
		return stmt_fail(st, rc, id, subject, err);
	return sqlite3_changes(st->db);
}

static int tx_begin(struct store *st, struct al_error **err)
{
	int r = stmt_run(st, S_BEGIN, NULL, err);

	return r < 0 ? r : 0;
}

static void tx_rollback(struct store *st)
{
	_cleanup_error_ struct al_error *ignored = NULL;

	if (!sqlite3_get_autocommit(st->db))
		stmt_run(st, S_ROLLBACK, NULL, &ignored);
}

/* Ends the transaction: commits if r >= 0, else (or if the commit fails) rolls back. */
static int tx_end(struct store *st, int r, struct al_error **err)
{
	if (r >= 0) {
		int c = stmt_run(st, S_COMMIT, NULL, err);

		r = c < 0 ? c : r;
	}
	if (r < 0)
		tx_rollback(st);
	return r;
}

static char *col_str(sqlite3_stmt *s, int i)
{
	const unsigned char *t;

	if (sqlite3_column_type(s, i) == SQLITE_NULL)
		return NULL;
	t = sqlite3_column_text(s, i);
	if (!t)
		al_oom();
	return xstrdup((const char *)t);
}

static int bind_str(sqlite3_stmt *s, int i, const char *v)
{
	return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
}

/* Runs a statement of one row and one column; *out is untouched if there is no row. */
static int db_query_int(struct store *st, const char *sql, const char *what, int64_t *out,
			struct al_error **err)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL), r = 0;

	if (rc == SQLITE_OK) {
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			*out = sqlite3_column_int64(s, 0);
			rc = SQLITE_OK;
		} else if (rc == SQLITE_DONE) {
			rc = SQLITE_OK;
		}
	}
	if (rc != SQLITE_OK)
		r = db_fail(st, rc, what, st->path, err);
	sqlite3_finalize(s);
	return r;
}

static int db_exec(struct store *st, const char *sql, const char *what, struct al_error **err)
{
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK)
		return db_fail(st, rc, what, st->path, err);
	return 0;
}

/* ---- open, schema, close ---------------------------------------------- */

static int db_set_journal_wal(struct store *st, struct al_error **err)
{
	sqlite3_stmt *s = NULL;
	const unsigned char *mode;
	int rc, r = 0;

	rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(s);
	if (rc != SQLITE_ROW) {
		r = db_fail(st, rc, "set journal_mode=WAL on", st->path, err);
	} else {
		mode = sqlite3_column_text(s, 0);
		if (!mode || strcmp((const char *)mode, "wal") != 0)
			r = al_error_msg(err, ENOTSUP,
					 "store: '%s' cannot use WAL (journal_mode %s)", st->path,
					 mode ? (const char *)mode : "unknown");
	}
	sqlite3_finalize(s);
	return r;
}

static int db_configure(struct store *st, struct al_error **err)
{
	int64_t fk = 0;
	int r;

	sqlite3_extended_result_codes(st->db, 1);
	sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
	r = db_exec(st, "PRAGMA foreign_keys = ON", "enable foreign keys on", err);
	if (r < 0)
		return r;
	r = db_set_journal_wal(st, err);
	if (r < 0)
		return r;
	r = db_exec(st, "PRAGMA synchronous = NORMAL", "set synchronous=NORMAL on", err);
	if (r < 0)
		return r;
	r = db_query_int(st, "PRAGMA foreign_keys", "read foreign_keys of", &fk, err);
	if (r < 0)
		return r;
	if (fk != 1)
		return al_error_msg(err, ENOTSUP, "store: this SQLite has no foreign key support");
	return 0;
}

/* Inside the schema transaction: refuses foreign or newer files, then migrates. */
static int db_migrate_locked(struct store *st, struct al_error **err)
{
	int64_t app_id = 0, version = 0, tables = 0;
	int r;

	r = db_query_int(st, "PRAGMA application_id", "read application_id of", &app_id, err);
	r = r ?: db_query_int(st, "PRAGMA user_version", "read user_version of", &version, err);
	r = r
		?: db_query_int(st, "SELECT count(*) FROM sqlite_master", "read schema of", &tables,
				err);
	if (r < 0)
		return r;
	if (app_id != 0 && app_id != STORE_APPLICATION_ID)
		return al_error_msg(err, EINVAL,
				    "store: '%s' is not an airlock state database (application_id "
				    "%" PRId64 ")",
				    st->path, app_id);
	if (version == 0 && tables != 0)
		return al_error_set(
		    err, EINVAL,
		    "store: '%s' is not an airlock state database (it has tables but "
		    "no schema version)",
		    st->path);
	if (version < 0 || version > STORE_SCHEMA_VERSION)
		return al_error_msg(err, ENOTSUP,
				    "store: '%s' has schema version %" PRId64
				    ", this airlockd knows up to %d",
				    st->path, version, STORE_SCHEMA_VERSION);
	for (int v = (int)version; r >= 0 && v < STORE_SCHEMA_VERSION; v++)
		r = db_exec(st, store_migrations[v], "create or migrate the schema of", err);
	return r;
}

static int db_migrate(struct store *st, struct al_error **err)
{
	int r = db_exec(st, "BEGIN IMMEDIATE", "begin schema transaction on", err);

	if (r < 0)
		return r;
	r = db_migrate_locked(st, err);
	if (r >= 0)
		r = db_exec(st, "COMMIT", "commit schema transaction on", err);
	if (r < 0 && !sqlite3_get_autocommit(st->db))
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	return r;
}

static int db_prepare_all(struct store *st, struct al_error **err)
{
	for (int i = 0; i < S__MAX; i++) {
		int rc = sqlite3_prepare_v3(st->db, stmts[i].sql, -1, SQLITE_PREPARE_PERSISTENT,
					    &st->stmt[i], NULL);
		if (rc != SQLITE_OK)
			return db_fail(st, rc, "prepare statement", stmts[i].what, err);
	}
	return 0;
}

int store_open(const char *path, struct store **out, struct al_error **err)
{
	const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
	struct store *st;
	int rc, r;

	*out = NULL;
	if (!path || !*path)
		return al_error_msg(err, EINVAL, "store: empty database path");
	if (!sqlite3_threadsafe())
		return al_error_msg(err, ENOTSUP, "store: SQLite was built without thread support");
	st = xzalloc(sizeof(*st));
	st->path = xstrdup(path);
	pthread_mutex_init(&st->lock, NULL);
	rc = sqlite3_open_v2(path, &st->db, flags, NULL);
	if (rc != SQLITE_OK)
		r = db_fail(st, rc, "open", path, err);
	else
		r = db_configure(st, err) ?: db_migrate(st, err) ?: db_prepare_all(st, err);
	if (r < 0) {
		store_close(st);
		return r;
	}
	*out = st;
	return 0;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	for (int i = 0; i < S__MAX; i++)
		sqlite3_finalize(st->stmt[i]);
	sqlite3_close(st->db);
	pthread_mutex_destroy(&st->lock);
	free(st->path);
	free(st);
}

/* ---- sandboxes -------------------------------------------------------- */

void store_sandbox_release(struct store_sandbox *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->team);
	free(s->status);
	free(s->config_json);
	free(s->policy_json);
	memset(s, 0, sizeof(*s));
}

static void sandbox_read(sqlite3_stmt *s, struct store_sandbox *out)
{
	out->id = col_str(s, 0);
	out->team = col_str(s, 1);
	out->status = col_str(s, 2);
	out->created_ms = sqlite3_column_int64(s, 3);
	out->expires_ms = sqlite3_column_int64(s, 4);
	out->stopped_ms = sqlite3_column_int64(s, 5);
	out->init_pid = (int32_t)sqlite3_column_int64(s, 6);
	out->init_start = sqlite3_column_int64(s, 7);
	out->host_base = (uint32_t)sqlite3_column_int64(s, 8);
	out->config_json = col_str(s, 9);
	out->policy_json = col_str(s, 10);
	out->policy_gen = sqlite3_column_int64(s, 11);
}

int store_sandbox_put(struct store *st, const struct store_sandbox *sb, struct al_error **err)
{
	if (!sb->id || !sb->team || !sb->status)
		return al_error_msg(err, EINVAL,
				    "store: a sandbox needs an id, a team and a status");

	_cleanup_unlock_ struct store *locked = store_lock(st);
	_cleanup_stmt_ sqlite3_stmt *s = st->stmt[S_SBX_PUT];
	int rc = SQLITE_OK;

	rc = rc ?: bind_str(s, 1, sb->id);
	rc = rc ?: bind_str(s, 2, sb->team);
	rc = rc ?: bind_str(s, 3, sb->status);
	rc = rc ?: sqlite3_bind_int64(s, 4, sb->created_ms);
	rc = rc ?: sqlite3_bind_int64(s, 5, sb->expires_ms);
	rc = rc ?: sqlite3_bind_int64(s, 6, sb->stopped_ms);
	rc = rc ?: sqlite3_bind_int64(s, 7, sb->init_pid);
	rc = rc ?: sqlite3_bind_int64(s, 8, sb->init_start);
	rc = rc ?: sqlite3_bind_int64(s, 9, sb->host_base);
	rc = rc ?: bind_str(s, 10, sb->config_json);
	rc = rc ?: bind_str(s, 11, sb->policy_json);
	rc = rc ?: sqlite3_bind_int64(s, 12, sb->policy_gen);
	rc = rc ?: sqlite3_step(s);
	if (rc != SQLITE_DONE)
		return stmt_fail(st, rc, S_SBX_PUT, sb->id, err);
	return 0;
}

int store_sandbox_get(struct store *st, const char *id, struct store_sandbox *out,
		      struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);
	_cleanup_stmt_ sqlite3_stmt *s = st->stmt[S_SBX_GET];
	int rc;

	memset(out, 0, sizeof(*out));
	rc = bind_str(s, 1, id) ?: sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return stmt_fail(st, rc, S_SBX_GET, id, err);
	sandbox_read(s, out);
	return 1;
}

static int sandbox_collect(struct store *st, const char *team, bool only_live,
			   struct store_sandbox **out, size_t *n, struct al_error **err)
{
	enum stmt_id id = team ? S_SBX_EACH_TEAM : S_SBX_EACH_ALL;
	_cleanup_unlock_ struct store *locked = store_lock(st);
	_cleanup_stmt_ sqlite3_stmt *s = st->stmt[id];
	size_t cap = 0;
	int rc = SQLITE_OK;

	if (team)
		rc = bind_str(s, 1, team);
	rc = rc ?: sqlite3_bind_int(s, 2, only_live);
	while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			*out = xrealloc(*out, cap * sizeof(**out));
		}
		sandbox_read(s, &(*out)[(*n)++]);
		rc = SQLITE_OK;
	}
	if (rc != SQLITE_DONE)
		return stmt_fail(st, rc, id, team, err);
	return 0;
}

/* A callback asked to stop: make sure the caller gets an error, as the rule says. */
static int callback_stopped(int r, struct al_error **err)
{
	if (err && !*err)
		return al_error_set(err, -r, "store: iteration stopped by its callback");
	return r;
}

int store_sandbox_each(struct store *st, const char *team, bool only_live,
		       int (*fn)(void *ctx, const struct store_sandbox *s), void *ctx,
		       struct al_error **err)
{
	struct store_sandbox *rows = NULL;
	size_t n = 0, i;
	int r;

	r = sandbox_collect(st, team, only_live, &rows, &n, err);
	for (i = 0; r >= 0 && i < n; i++) {
		r = fn(ctx, &rows[i]);
		store_sandbox_release(&rows[i]);
		if (r < 0)
			r = callback_stopped(r, err);
	}
	for (; i < n; i++)
		store_sandbox_release(&rows[i]);
	free(rows);
	return r < 0 ? r : 0;
}

/* Runs an UPDATE by id: 1 if the row exists, 0 if not. */
static int update_by_id(struct store *st, enum stmt_id id, const char *key, int rc,
			struct al_error **err)
{
	sqlite3_stmt *s = st->stmt[id];

	rc = rc ?: bind_str(s, 1, key);
	if (rc != SQLITE_OK) {
		rc = stmt_fail(st, rc, id, key, err);
		stmt_resetp(&s);
		return rc;
	}
	rc = stmt_run(st, id, key, err);
	return rc < 0 ? rc : rc > 0;
}

int store_sandbox_set_status(struct store *st, const char *id, const char *status,
			     int64_t stopped_ms, struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);
	sqlite3_stmt *s = st->stmt[S_SBX_SET_STATUS];

	return update_by_id(st, S_SBX_SET_STATUS, id,
			    bind_str(s, 2, status) ?: sqlite3_bind_int64(s, 3, stopped_ms), err);
}

int store_sandbox_set_expiry(struct store *st, const char *id, int64_t expires_ms,
			     struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);
	sqlite3_stmt *s = st->stmt[S_SBX_SET_EXPIRY];

	return update_by_id(st, S_SBX_SET_EXPIRY, id, sqlite3_bind_int64(s, 2, expires_ms), err);
}

int store_sandbox_set_policy(struct store *st, const char *id, const char *policy_json, int64_t gen,
			     struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);
	sqlite3_stmt *s = st->stmt[S_SBX_SET_POLICY];

	return update_by_id(st, S_SBX_SET_POLICY, id,
			    bind_str(s, 2, policy_json) ?: sqlite3_bind_int64(s, 3, gen), err);
}

/* ---- commands --------------------------------------------------------- */

void store_command_release(struct store_command *c)
{
	if (!c)
		return;
	free(c->id);
	free(c->sandbox_id);
	free(c->argv_json);
	free(c->cwd);
	free(c->reason);
	memset(c, 0, sizeof(*c));
}

static void command_read(sqlite3_stmt *s, struct store_command *out)
{
	out->id = col_str(s, 0);
	out->sandbox_id = col_str(s, 1);
	out->argv_json = col_str(s, 2);
	out->cwd = col_str(s, 3);
	out->sudo = sqlite3_column_int(s, 4) != 0;
	out->started_ms = sqlite3_column_int64(s, 5);
	out->finished_ms = sqlite3_column_int64(s, 6);
	out->exit_code = (int32_t)sqlite3_column_int64(s, 7);
	out->signal = (int32_t)sqlite3_column_int64(s, 8);
	out->reason = col_str(s, 9);
	out->deadline_ms = sqlite3_column_int64(s, 10);
}

int store_command_put(struct store *st, const struct store_command *c, struct al_error **err)
{
	if (!c->id || !c->sandbox_id || !c->argv_json)
		return al_error_msg(err, EINVAL,
				    "store: a command needs an id, a sandbox id and an argv");

	_cleanup_unlock_ struct store *locked = store_lock(st);
	_cleanup_stmt_ sqlite3_stmt *s = st->stmt[S_CMD_PUT];
	int rc = SQLITE_OK;

	rc = rc ?: bind_str(s, 1, c->id);
	rc = rc ?: bind_str(s, 2, c->sandbox_id);
	rc = rc ?: bind_str(s, 3, c->argv_json);
	rc = rc ?: bind_str(s, 4, c->cwd);
	rc = rc ?: sqlite3_bind_int(s, 5, c->sudo);
	rc = rc ?: sqlite3_bind_int64(s, 6, c->started_ms);
	rc = rc ?: sqlite3_bind_int64(s, 7, c->finished_ms);
	rc = rc ?: sqlite3_bind_int64(s, 8, c->exit_code);
	rc = rc ?: sqlite3_bind_int64(s, 9, c->signal);
	rc = rc ?: bind_str(s, 10, c->reason);
	rc = rc ?: sqlite3_bind_int64(s, 11, c->deadline_ms);
	rc = rc ?: sqlite3_step(s);
	if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
		return al_error_msg(err, ENOENT, "store: write command '%s': no sandbox '%s'",
				    c->id, c->sandbox_id);
	if (rc != SQLITE_DONE)
		return stmt_fail(st, rc, S_CMD_PUT, c->id, err);
	return 0;
}

int store_command_get(struct store *st, const char *id, struct store_command *out,
		      struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);
	_cleanup_stmt_ sqlite3_stmt *s = st->stmt[S_CMD_GET];
	int rc;

	memset(out, 0, sizeof(*out));
	rc = bind_str(s, 1, id) ?: sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return stmt_fail(st, rc, S_CMD_GET, id, err);
	command_read(s, out);
	return 1;
}

int store_command_finish(struct store *st, const char *id, int64_t finished_ms, int32_t exit_code,
			 int32_t signal, const char *reason, struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);
	sqlite3_stmt *s = st->stmt[S_CMD_FINISH];
	int rc;

	rc = sqlite3_bind_int64(s, 2, finished_ms) ?: sqlite3_bind_int64(s, 3, exit_code);
	rc = rc ?: sqlite3_bind_int64(s, 4, signal) ?: bind_str(s, 5, reason);
	return update_by_id(st, S_CMD_FINISH, id, rc, err);
}

static int command_collect(struct store *st, const char *sandbox_id, struct store_command **out,
			   size_t *n, struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);
	_cleanup_stmt_ sqlite3_stmt *s = st->stmt[S_CMD_EACH];
	size_t cap = 0;
	int rc = bind_str(s, 1, sandbox_id);

	while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			*out = xrealloc(*out, cap * sizeof(**out));
		}
		command_read(s, &(*out)[(*n)++]);
		rc = SQLITE_OK;
	}
	if (rc != SQLITE_DONE)
		return stmt_fail(st, rc, S_CMD_EACH, sandbox_id, err);
	return 0;
}

int store_command_each(struct store *st, const char *sandbox_id,
		       int (*fn)(void *ctx, const struct store_command *c), void *ctx,
		       struct al_error **err)
{
	struct store_command *rows = NULL;
	size_t n = 0, i;
	int r;

	r = command_collect(st, sandbox_id, &rows, &n, err);
	for (i = 0; r >= 0 && i < n; i++) {
		r = fn(ctx, &rows[i]);
		store_command_release(&rows[i]);
		if (r < 0)
			r = callback_stopped(r, err);
	}
	for (; i < n; i++)
		store_command_release(&rows[i]);
	free(rows);
	return r < 0 ? r : 0;
}

/* ---- output ----------------------------------------------------------- */

static int output_size_locked(struct store *st, const char *cmd_id, int stream, uint64_t *out,
			      struct al_error **err)
{
	_cleanup_stmt_ sqlite3_stmt *s = st->stmt[S_OUT_SIZE];
	int rc;

	*out = 0;
	rc = bind_str(s, 1, cmd_id) ?: sqlite3_bind_int(s, 2, stream) ?: sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*out = (uint64_t)sqlite3_column_int64(s, 0);
	else if (rc != SQLITE_DONE)
		return stmt_fail(st, rc, S_OUT_SIZE, cmd_id, err);
	return 0;
}

static int output_insert_locked(struct store *st, const char *cmd_id, int stream, uint64_t offset,
				const void *data, size_t len, struct al_error **err)
{
	_cleanup_stmt_ sqlite3_stmt *s = st->stmt[S_OUT_INSERT];
	int rc;

	rc = bind_str(s, 1, cmd_id) ?: sqlite3_bind_int(s, 2, stream);
	rc = rc ?: sqlite3_bind_int64(s, 3, (int64_t)offset);
	rc = rc ?: sqlite3_bind_blob64(s, 4, data, len, SQLITE_STATIC);
	rc = rc ?: sqlite3_step(s);
	if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
		return al_error_msg(err, ENOENT, "store: append output: no command '%s'", cmd_id);
	if (rc != SQLITE_DONE)
		return stmt_fail(st, rc, S_OUT_INSERT, cmd_id, err);
	return 0;
}

static int output_append_locked(struct store *st, const char *cmd_id, int stream, uint64_t offset,
				const uint8_t *data, size_t len, struct al_error **err)
{
	uint64_t size, skip;
	int r;

	r = output_size_locked(st, cmd_id, stream, &size, err);
	if (r < 0)
		return r;
	if (offset > size)
		return al_error_msg(err, EINVAL,
				    "store: output of '%s' stream %d: chunk at offset %" PRIu64
				    " leaves a gap after %" PRIu64 " stored bytes",
				    cmd_id, stream, offset, size);
	if (offset + len <= size)
		return 0; /* a replay of bytes stored already */
	skip = size - offset;
	return output_insert_locked(st, cmd_id, stream, size, data + skip, len - skip, err);
}

int store_output_append(struct store *st, const char *cmd_id, int stream, uint64_t offset,
			const void *data, size_t len, struct al_error **err)
{
	if (!cmd_id || (stream != AL_STDOUT && stream != AL_STDERR))
		return al_error_msg(err, EINVAL, "store: append output: bad command or stream %d",
				    stream);
	if (offset > INT64_MAX || len > INT64_MAX - offset || (len && !data))
		return al_error_msg(err, EINVAL, "store: append output of '%s': bad chunk", cmd_id);
	if (len == 0)
		return 0;

	_cleanup_unlock_ struct store *locked = store_lock(st);
	int r = tx_begin(st, err);

	if (r < 0)
		return r;
	r = output_append_locked(st, cmd_id, stream, offset, data, len, err);
	return tx_end(st, r, err);
}

int store_output_size(struct store *st, const char *cmd_id, int stream, uint64_t *out,
		      struct al_error **err)
{
	if (!cmd_id || (stream != AL_STDOUT && stream != AL_STDERR))
		return al_error_msg(err, EINVAL, "store: output size: bad command or stream %d",
				    stream);

	_cleanup_unlock_ struct store *locked = store_lock(st);

	return output_size_locked(st, cmd_id, stream, out, err);
}

struct output_chunk {
	int64_t seq;
	int stream;
	uint64_t offset;
	size_t len;
	void *data;
};

/* Copies the next batch of chunks after *after_seq; *more is false once no rows remain. */
static int output_batch(struct store *st, const char *cmd_id, int stream, int64_t after_seq,
			struct output_chunk *batch, size_t *n, bool *more, struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);
	_cleanup_stmt_ sqlite3_stmt *s = st->stmt[S_OUT_EACH];
	size_t bytes = 0;
	int rc;

	rc = bind_str(s, 1, cmd_id) ?: sqlite3_bind_int64(s, 2, after_seq);
	rc = rc ?: sqlite3_bind_int(s, 3, stream) ?: sqlite3_bind_int(s, 4, OUTPUT_BATCH_ROWS);
	*more = true;
	while (rc == SQLITE_OK && bytes < OUTPUT_BATCH_BYTES &&
	       (rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct output_chunk *c = &batch[(*n)++];
		const void *blob = sqlite3_column_blob(s, 3);

		c->seq = sqlite3_column_int64(s, 0);
		c->stream = sqlite3_column_int(s, 1);
		c->offset = (uint64_t)sqlite3_column_int64(s, 2);
		c->len = (size_t)sqlite3_column_bytes(s, 3);
		if (c->len && !blob)
			al_oom();
		c->data = xzalloc(c->len);
		memcpy(c->data, blob, c->len);
		bytes += c->len;
		rc = SQLITE_OK;
	}
	if (rc == SQLITE_DONE)
		*more = *n == OUTPUT_BATCH_ROWS; /* LIMIT reached: there may be more */
	else if (rc != SQLITE_OK)
		return stmt_fail(st, rc, S_OUT_EACH, cmd_id, err);
	return 0;
}

int store_output_each(struct store *st, const char *cmd_id, int stream, int64_t after_seq,
		      int (*fn)(void *ctx, int64_t seq, int stream, uint64_t offset,
				const void *data, size_t len),
		      void *ctx, struct al_error **err)
{
	struct output_chunk batch[OUTPUT_BATCH_ROWS];
	bool more = true;
	int r = 0;

	if (!cmd_id || (stream != 0 && stream != AL_STDOUT && stream != AL_STDERR))
		return al_error_msg(err, EINVAL, "store: read output: bad command or stream %d",
				    stream);
	while (r >= 0 && more) {
		size_t n = 0, i;

		r = output_batch(st, cmd_id, stream, after_seq, batch, &n, &more, err);
		for (i = 0; r >= 0 && i < n; i++) {
			r = fn(ctx, batch[i].seq, batch[i].stream, batch[i].offset, batch[i].data,
			       batch[i].len);
			after_seq = batch[i].seq;
			if (r < 0)
				r = callback_stopped(r, err);
		}
		for (i = 0; i < n; i++)
			free(batch[i].data);
		if (n == 0)
			more = false;
	}
	return r < 0 ? r : 0;
}

/* ---- retention -------------------------------------------------------- */

int store_prune(struct store *st, int64_t cutoff_ms, struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);
	sqlite3_stmt *s = st->stmt[S_PRUNE];
	int rc = sqlite3_bind_int64(s, 1, cutoff_ms);

	if (rc != SQLITE_OK) {
		rc = stmt_fail(st, rc, S_PRUNE, NULL, err);
		stmt_resetp(&s);
		return rc;
	}
	return stmt_run(st, S_PRUNE, NULL, err);
}

int store_sandbox_delete(struct store *st, const char *id, struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);

	return update_by_id(st, S_SBX_DELETE, id, SQLITE_OK, err);
}

int store_command_delete(struct store *st, const char *id, struct al_error **err)
{
	_cleanup_unlock_ struct store *locked = store_lock(st);

	return update_by_id(st, S_CMD_DELETE, id, SQLITE_OK, err);
}

uint64_t store_errors(const struct store *st)
{
	return st ? __atomic_load_n(&st->errors, __ATOMIC_RELAXED) : 0;
}
