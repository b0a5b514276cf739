/* SPDX-License-Identifier: MIT */
/*
 * A create's source (docs/sources.md): a tarball or a git repository fetched *inside* the
 * new sandbox, as a command (curl, git) that goes out through its gateway under its own
 * network policy -- a deny-all sandbox fetches nothing, and an allowed fetch is in its
 * egress log like any other request. A tarball's bytes come back as the command's output
 * and are extracted by the daemon's strict tar code (files_tar.c), as an upload is.
 */
#include "daemon/internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DM_SOURCE_MS (300u * 1000)   /* a fetch's time */
#define DM_SOURCE_MAX (256ull << 20) /* a tarball's bytes */
#define DM_SOURCE_ERR_MAX 400	     /* of the fetch's stderr in the error */

static bool url_ok(const char *u)
{
	size_t n = strlen(u);

	return (strncmp(u, "https://", 8) == 0 || strncmp(u, "http://", 7) == 0) && n < 4096 &&
	       !u[strcspn(u, " \t\r\n")];
}

/* Runs argv in the sandbox as its user, in dir; its stdout (up to max) into *out, its
 * stderr's first bytes into errbuf; the exit code, or -1 with err. */
static int run(struct daemon *d, const char *team, const char *id, const struct dm_exec *e,
	       char **out, size_t *out_len, size_t max, char *errbuf, size_t errcap,
	       struct al_error **err)
{
	_cleanup_free_ char *cid = NULL, *buf = xrealloc(NULL, 65536);
	struct dm_logs *l = NULL;
	json_t *v = NULL, *ec;
	size_t len, elen = 0;
	int stream, r, code;

	*out = NULL, *out_len = 0, errbuf[0] = '\0';
	if (dm_cmd_start(d, team, id, e, &cid, err) < 0 ||
	    dm_logs_open(d, team, id, cid, &l, err) < 0)
		return -1;
	while ((r = dm_logs_next(l, buf, 65536, &stream, &len, DM_SOURCE_MS)) == 1) {
		if (stream == 1 && out && *out_len + len <= max) {
			*out = xrealloc(*out, *out_len + len + 1);
			memcpy(*out + *out_len, buf, len);
			*out_len += len;
		} else if (stream == 1) {
			dm_logs_close(l);
			dm_cmd_kill(d, team, id, cid, 9, NULL);
			return al_error_msg(err, E2BIG, "the source is over %llu bytes",
					    (unsigned long long)max);
		} else if (elen + 1 < errcap) {
			size_t k = len < errcap - 1 - elen ? len : errcap - 1 - elen;

			memcpy(errbuf + elen, buf, k);
			errbuf[elen += k] = '\0';
		}
	}
	dm_logs_close(l);
	if (r < 0) {
		dm_cmd_kill(d, team, id, cid, 9, NULL);
		return al_error_msg(err, ETIMEDOUT, "fetching the source took over %u s",
				    DM_SOURCE_MS / 1000);
	}
	if (dm_cmd_get(d, team, id, cid, &v, err) < 0)
		return -1;
	ec = json_object_get(v, "exit_code");
	code = json_is_integer(ec) ? (int)json_integer_value(ec) : 128;
	json_decref(v);
	for (char *p = errbuf; *p; p++) /* one line, printable, for the error's message */
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = ' ';
	return code;
}

static int fetch_tarball(struct daemon *d, const char *team, const char *id, const char *wd,
			 const struct dm_source *src, struct al_error **err)
{
	const char *args[] = {"-fsSL", "--proto", "=http,https", "--max-filesize", "268435456",
			      "-o",    "-",	  "--",		 src->url};
	struct dm_exec e = {.cmd = "curl", .args = args, .n_args = 9, .cwd = wd};
	_cleanup_free_ char *data = NULL;
	char msg[DM_SOURCE_ERR_MAX];
	size_t len;
	int code = run(d, team, id, &e, &data, &len, DM_SOURCE_MAX, msg, sizeof(msg), err);

	if (code < 0)
		return -1;
	if (code != 0)
		return al_error_msg(err, EHOSTUNREACH,
				    "fetching the tarball failed under the sandbox's network "
				    "policy (curl exited %d): %s",
				    code, msg[0] ? msg : "no message");
	if (dm_fs_write_tar(d, team, id, wd, data ? data : "", len, err) < 0)
		return al_error_wrap(err, "extracting the tarball");
	return 0;
}

static int fetch_git(struct daemon *d, const char *team, const char *id, const char *wd,
		     const struct dm_source *src, struct al_error **err)
{
	static const char script[] = "d=${1:+--depth=$1}; git clone -q $d -- \"$2\" . && "
				     "if [ -n \"$3\" ]; then git fetch -q $d origin \"$3\" && "
				     "git -c advice.detachedHead=false checkout -q FETCH_HEAD; fi";
	char depth[16] = "";
	const char *args[] = {"-c",  script,   "sh",
			      depth, src->url, src->revision ? src->revision : ""};
	const char *env[] = {"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1"};
	struct dm_exec e = {
	    .cmd = "sh", .args = args, .n_args = 6, .cwd = wd, .env = env, .n_env = 2};
	_cleanup_free_ char *out = NULL;
	char msg[DM_SOURCE_ERR_MAX];
	size_t len;
	int code;

	if (src->depth)
		snprintf(depth, sizeof(depth), "%u", src->depth);
	code = run(d, team, id, &e, &out, &len, 1 << 20, msg, sizeof(msg), err);
	if (code < 0)
		return -1;
	if (code != 0)
		return al_error_msg(err, EHOSTUNREACH,
				    "cloning the git repository failed under the sandbox's "
				    "network policy (git exited %d): %s",
				    code, msg[0] ? msg : "no message");
	return 0;
}

int dm_sandbox_fetch_source(struct daemon *d, const char *team, const char *id,
			    const struct dm_source *src, struct al_error **err)
{
	_cleanup_free_ char *wd = NULL;
	json_t *v = NULL;
	int r;

	if (!src->url || !url_ok(src->url))
		return al_error_msg(err, EINVAL, "a source's url is an http:// or https:// URL");
	if (src->revision &&
	    (!src->revision[0] || src->revision[0] == '-' || strlen(src->revision) > 255))
		return al_error_msg(err, EINVAL, "a source's revision is a ref or a commit");
	if (dm_sandbox_get(d, team, id, &v, err) < 0)
		return -1;
	wd = xstrdup(json_string_value(json_object_get(v, "workdir")) ?: "/workspace");
	json_decref(v);
	if (strcmp(src->type, "tarball") == 0)
		r = fetch_tarball(d, team, id, wd, src, err);
	else if (strcmp(src->type, "git") == 0)
		r = fetch_git(d, team, id, wd, src, err);
	else
		return al_error_msg(err, EINVAL, "a source's type is tarball or git");
	/* The gateway logs what the fetch sent out; this line says what it was for and how
	 * it ended (a deny-all sandbox has no gateway to log anything). */
	dm_sandbox_log_line(d, id,
			    json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:s,s:s?}", "time",
				      (json_int_t)dm_now_ms(), "sandbox", id, "direction", "out",
				      "layer", "source", "verdict", r == 0 ? "allow" : "deny",
				      "what", src->type, "url", src->url, "error",
				      r == 0 || !err || !*err ? NULL : (*err)->msg));
	return r;
}
