/* SPDX-License-Identifier: MIT */
/*
 * PTYs (sandbox.pty): the sandbox has its own devpts, so a PTY is made inside it, by
 * util-linux script(1) run as the command: `script -qfec INNER /dev/null`, where INNER
 * sets the size (stty), writes the name of its terminal to a file of ours under /tmp,
 * and execs the program asked for. Its output is the terminal's (data.pty events);
 * input goes to its stdin, which script copies to the terminal. A resize is
 * `stty -F <that terminal> cols C rows R`, run as the same user: the kernel then sends
 * SIGWINCH to the terminal's foreground group. The image needs script and stty (the host
 * runtime has them).
 */
#include "api/e2b/e2b.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define E2B_PTY_MAX 4096 /* columns or rows */

/* s in single quotes for sh (heap). */
static char *e2b_sq(const char *s)
{
	size_t n = 2, i;
	char *out, *w;

	for (i = 0; s[i]; i++)
		n += s[i] == '\'' ? 4 : 1;
	out = xzalloc(n + 1);
	w = out;
	*w++ = '\'';
	for (i = 0; s[i]; i++) {
		if (s[i] == '\'') { /* ' -> '\'' */
			*w++ = '\'';
			*w++ = '\\';
			*w++ = '\'';
			*w++ = '\'';
		} else {
			*w++ = s[i];
		}
	}
	*w = '\'';
	return out;
}

static int e2b_pty_size(json_t *pty, unsigned *cols, unsigned *rows, struct al_error **err)
{
	json_t *size = json_object_get(pty, "size");
	json_int_t c = json_integer_value(json_object_get(size, "cols"));
	json_int_t r = json_integer_value(json_object_get(size, "rows"));

	if (!json_is_object(size) || c < 1 || r < 1 || c > E2B_PTY_MAX || r > E2B_PTY_MAX)
		return api_bad(err, "pty.size needs cols and rows from 1 to %d", E2B_PTY_MAX);
	*cols = (unsigned)c;
	*rows = (unsigned)r;
	return 0;
}

int e2b_pty_wrap(json_t *pty, struct dm_exec *e, struct e2b_pty_cmd *out, struct al_error **err)
{
	unsigned cols, rows;
	unsigned char raw[8];
	char hex[17];
	size_t len;
	char *inner, *q;

	if (e2b_pty_size(pty, &cols, &rows, err) < 0)
		return -EINVAL;
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		abort();
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	out->file = xasprintf("/tmp/.airlock-pty-%s", hex);
	q = e2b_sq(e->cmd);
	inner = xasprintf("stty cols %u rows %u 2>/dev/null; tty > %s; exec %s", cols, rows,
			  out->file, q);
	free(q);
	for (size_t i = 0; i < e->n_args; i++) {
		q = e2b_sq(e->args[i]);
		len = strlen(inner);
		inner = xrealloc(inner, len + strlen(q) + 2);
		snprintf(inner + len, strlen(q) + 2, " %s", q);
		free(q);
	}
	out->inner = inner;
	out->argv[0] = "-qfec";
	out->argv[1] = inner;
	out->argv[2] = "/dev/null";
	e->cmd = "script";
	e->args = out->argv;
	e->n_args = 3;
	e->keep_stdin = true;
	return 0;
}

void e2b_pty_cmd_free(struct e2b_pty_cmd *p)
{
	free(p->file);
	free(p->inner);
}

/* The PTY file and user of a process of the request's sandbox (heap), or NULL. */
static char *e2b_pty_of(struct api_req *r, json_t *msg, bool *root)
{
	json_t *sel = json_object_get(msg, "process"), *pid = json_object_get(sel, "pid");
	struct e2b *e = r->api->e2b;
	struct e2b_sbx *s;
	char *file = NULL;

	pthread_mutex_lock(&e->mu);
	s = e2b_find(e, r->team, e2b_envd_sbx(r));
	for (size_t i = 0; s && json_is_integer(pid) && i < s->n_procs; i++) {
		if (s->procs[i].pid == json_integer_value(pid) && s->procs[i].pty_file) {
			file = xstrdup(s->procs[i].pty_file);
			*root = s->procs[i].root;
		}
	}
	pthread_mutex_unlock(&e->mu);
	return file;
}

void e2b_proc_update(struct api_req *r)
{
	_cleanup_json_ json_t *msg = e2b_request_msg(r, false);
	_cleanup_free_ char *file = NULL, *out = NULL, *errout = NULL;
	struct al_error *err = NULL;
	char c[16], w[16];
	unsigned cols, rows;
	bool root = false;
	int status = 0;

	if (!msg)
		return;
	if (!json_object_get(msg, "pty"))
		return e2b_unary_ok(r, json_object());
	if (e2b_pty_size(json_object_get(msg, "pty"), &cols, &rows, &err) < 0)
		goto fail;
	file = e2b_pty_of(r, msg, &root);
	if (!file)
		return e2b_unary_error(r, "not_found", "no such PTY process");
	snprintf(c, sizeof(c), "%u", cols);
	snprintf(w, sizeof(w), "%u", rows);
	const char *argv[] = {
	    "sh", "-c", "stty -F \"$(cat \"$1\")\" cols \"$2\" rows \"$3\"", "sh", file, c, w};

	if (e2b_run_wait(r, e2b_envd_sbx(r), root, argv, 7, &status, &out, &errout, &err) < 0)
		goto fail;
	if (status != 0)
		return e2b_unary_error(r, "failed_precondition",
				       errout && errout[0] ? errout : "resizing the PTY failed");
	return e2b_unary_ok(r, json_object());
fail:
	e2b_unary_al_error(r, err);
	al_error_free(err);
}
