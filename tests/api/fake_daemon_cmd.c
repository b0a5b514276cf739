/* SPDX-License-Identifier: MIT */
/* Included by fake_daemon.c: simulated commands and log cursors. */

/* Under the lock. */
static void fk_out(struct fk_cmd *c, int stream, const char *data, size_t len)
{
	c->chunks = xrealloc(c->chunks, (c->n_chunks + 1) * sizeof(*c->chunks));
	c->chunks[c->n_chunks].stream = stream;
	c->chunks[c->n_chunks].data = xzalloc(len + 1);
	memcpy(c->chunks[c->n_chunks].data, data, len);
	c->chunks[c->n_chunks].len = len;
	c->n_chunks++;
	pthread_cond_broadcast(&c->sbx->d->cv);
}

/* Sleeps ms under the lock; false if killed meanwhile. */
static bool fk_sleep(struct daemon *d, struct fk_cmd *c, uint64_t ms)
{
	struct timespec ts;

	fk_deadline(&ts, ms);
	while (!c->signal)
		if (pthread_cond_timedwait(&d->cv, &d->mu, &ts) == ETIMEDOUT)
			break;
	return !c->signal;
}

static void fk_cmd_body(struct daemon *d, struct fk_cmd *c)
{
	size_t i, n = json_array_size(c->args);
	char *line = xstrdup("");

	if (strcmp(c->name, "sleep") == 0) {
		uint64_t ms =
		    n ? strtoull(json_string_value(json_array_get(c->args, 0)), NULL, 10) : 1000;

		if (c->timeout_ms && c->timeout_ms < ms) {
			if (fk_sleep(d, c, c->timeout_ms))
				c->signal = 9, c->reason = "timeout";
		} else {
			fk_sleep(d, c, ms);
		}
	} else if (strcmp(c->name, "cat") == 0) {
		while (!c->signal) {
			if (c->stdin_len) {
				fk_out(c, 1, c->stdin_buf, c->stdin_len);
				c->stdin_len = 0;
			} else if (!c->stdin_open) {
				break;
			} else {
				pthread_cond_wait(&d->cv, &d->mu);
			}
		}
	} else if (strcmp(c->name, "binary") == 0) {
		fk_out(c, 1, "caf\xc3", 4);
		fk_sleep(d, c, 10);
		fk_out(c, 1, "\xa9\n", 2);
		fk_out(c, 1, "\xff\xfe\n", 3);
	} else {
		for (i = 0; i < n; i++) {
			char *s = xasprintf("%s%s%s", line, i ? " " : "",
					    json_string_value(json_array_get(c->args, i)));
			free(line);
			line = s;
		}
		size_t len = strlen(line), third = len / 3;
		int stream = strcmp(c->name, "stderr") == 0 ? 2 : 1;

		fk_out(c, stream, line, third);
		fk_sleep(d, c, 10);
		fk_out(c, stream, line + third, third);
		fk_sleep(d, c, 10);
		fk_out(c, stream, line + 2 * third, len - 2 * third);
		fk_out(c, stream, "\n", 1);
	}
	free(line);
}

static void *fk_cmd_thread(void *arg)
{
	struct fk_cmd *c = arg;
	struct daemon *d = c->sbx->d;

	pthread_mutex_lock(&d->mu);
	fk_cmd_body(d, c);
	if (c->signal) {
		c->reason = c->reason ? c->reason : "signaled";
	} else {
		c->exit_code = c->want_exit;
		c->reason = "exited";
	}
	c->finished = fk_now();
	c->done = true;
	d->running--;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

int dm_cmd_start(struct daemon *d, const char *team, const char *sbx, const struct dm_exec *e,
		 char **out_cmd_id, struct al_error **err)
{
	struct fk_sbx *s;
	struct fk_cmd *c;
	pthread_t t;
	size_t i;
	int r = 0;

	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, sbx, err);
	if (!s) {
		r = -ENOENT;
		goto out;
	}
	if (s->stopped) {
		r = al_error_set(err, ESRCH, "sandbox '%s' is stopped", sbx);
		goto out;
	}
	c = xzalloc(sizeof(*c));
	c->id = xasprintf("cmd_%04u", ++d->counter);
	c->name = xstrdup(e->cmd);
	c->args = json_array();
	for (i = 0; i < e->n_args; i++)
		json_array_append_new(c->args, json_string(e->args[i]));
	for (i = 0; i < e->n_env; i++)
		if (strncmp(e->env[i], "EXIT=", 5) == 0)
			c->want_exit = atoi(e->env[i] + 5);
	c->cwd = xstrdup(e->cwd ? e->cwd : s->workdir);
	c->sudo = e->sudo;
	c->timeout_ms = e->timeout_ms;
	c->started = fk_now();
	c->stdin_open = e->keep_stdin;
	if (e->stdin_len) {
		c->stdin_buf = xzalloc(e->stdin_len);
		memcpy(c->stdin_buf, e->stdin_data, e->stdin_len);
		c->stdin_len = e->stdin_len;
	}
	c->sbx = s;
	c->next = s->cmds;
	s->cmds = c;
	d->running++;
	if (pthread_create(&t, NULL, fk_cmd_thread, c) != 0)
		abort();
	pthread_detach(t);
	*out_cmd_id = xstrdup(c->id);
out:
	pthread_mutex_unlock(&d->mu);
	return r;
}

int dm_cmd_get(struct daemon *d, const char *team, const char *sbx, const char *cmd, json_t **out,
	       struct al_error **err)
{
	struct fk_cmd *c;

	pthread_mutex_lock(&d->mu);
	c = fk_cmd_find(d, team, sbx, cmd, err);
	if (c)
		*out = fk_cmd_view(c);
	pthread_mutex_unlock(&d->mu);
	return c ? 0 : -ENOENT;
}

int dm_cmd_wait(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		uint64_t timeout_ms, json_t **out, struct al_error **err)
{
	struct timespec ts;
	struct fk_cmd *c;
	int r = 0;

	fk_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&d->mu);
	c = fk_cmd_find(d, team, sbx, cmd, err);
	while (c && !c->done)
		if (pthread_cond_timedwait(&d->cv, &d->mu, &ts) == ETIMEDOUT)
			break;
	if (!c)
		r = -ENOENT;
	else if (!c->done)
		r = al_error_set(err, ETIMEDOUT, "wait for command '%s'", cmd);
	else
		*out = fk_cmd_view(c);
	pthread_mutex_unlock(&d->mu);
	return r;
}

/* The cursor is the place (1, 2, ... oldest first) of the last one a page had. */
int dm_cmd_list(struct daemon *d, const char *team, const char *sbx, uint64_t cursor, size_t limit,
		json_t **out_array, uint64_t *next, struct al_error **err)
{
	struct fk_sbx *s;
	struct fk_cmd *c;
	json_t *a;

	*next = 0;
	pthread_mutex_lock(&d->mu);
	s = fk_sbx_find(d, team, sbx, err);
	if (s) {
		a = json_array();
		for (c = s->cmds; c; c = c->next)
			json_array_insert_new(a, 0, fk_cmd_view(c));
		/* a is oldest first: keep [cursor, cursor + limit). */
		size_t n = json_array_size(a), from = cursor < n ? (size_t)cursor : n;
		json_t *page = json_array();

		for (size_t i = from; i < n && i - from < limit; i++)
			json_array_append(page, json_array_get(a, i));
		if (n - from > limit)
			*next = from + limit;
		json_decref(a);
		*out_array = page;
	}
	pthread_mutex_unlock(&d->mu);
	return s ? 0 : -ENOENT;
}

int dm_cmd_write_stdin(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		       const void *data, size_t len, bool close_after, struct al_error **err)
{
	struct fk_cmd *c;
	int r = 0;

	pthread_mutex_lock(&d->mu);
	c = fk_cmd_find(d, team, sbx, cmd, err);
	if (!c) {
		r = -ENOENT;
	} else if (!c->stdin_open || c->done) {
		r = al_error_set(err, EBUSY, "stdin of command '%s' is closed", cmd);
	} else {
		c->stdin_buf = xrealloc(c->stdin_buf, c->stdin_len + len + 1);
		if (len)
			memcpy(c->stdin_buf + c->stdin_len, data, len);
		c->stdin_len += len;
		if (close_after)
			c->stdin_open = false;
		pthread_cond_broadcast(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
	return r;
}

int dm_cmd_resize(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		  unsigned rows, unsigned cols, struct al_error **err)
{
	struct fk_cmd *c;

	if (rows < 1 || rows > 65535 || cols < 1 || cols > 65535)
		return al_error_msg(err, EINVAL, "rows and cols must be 1..65535");
	pthread_mutex_lock(&d->mu);
	c = fk_cmd_find(d, team, sbx, cmd, err);
	pthread_mutex_unlock(&d->mu);
	return c ? 0 : -ENOENT;
}

int dm_cmd_kill(struct daemon *d, const char *team, const char *sbx, const char *cmd, int sig,
		struct al_error **err)
{
	struct fk_cmd *c;
	int r = 0;

	pthread_mutex_lock(&d->mu);
	c = fk_cmd_find(d, team, sbx, cmd, err);
	if (!c) {
		r = -ENOENT;
	} else if (!c->done) {
		c->signal = sig;
		pthread_cond_broadcast(&d->cv);
		while (!c->done)
			pthread_cond_wait(&d->cv, &d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	return r;
}

int dm_logs_open(struct daemon *d, const char *team, const char *sbx, const char *cmd,
		 struct dm_logs **out, struct al_error **err)
{
	struct fk_cmd *c;

	pthread_mutex_lock(&d->mu);
	c = fk_cmd_find(d, team, sbx, cmd, err);
	pthread_mutex_unlock(&d->mu);
	if (!c)
		return -ENOENT;
	*out = xzalloc(sizeof(**out));
	(*out)->d = d;
	(*out)->c = c;
	return 0;
}

int dm_logs_next(struct dm_logs *l, char *buf, size_t cap, int *stream, size_t *len,
		 uint64_t timeout_ms)
{
	struct daemon *d = l->d;
	struct fk_cmd *c = l->c;
	struct timespec ts;
	int r;

	fk_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&d->mu);
	while (l->idx == c->n_chunks && !c->done)
		if (pthread_cond_timedwait(&d->cv, &d->mu, &ts) == ETIMEDOUT)
			break;
	if (l->idx < c->n_chunks) {
		struct fk_chunk *k = &c->chunks[l->idx];
		size_t n = k->len - l->off < cap ? k->len - l->off : cap;

		memcpy(buf, k->data + l->off, n);
		*stream = k->stream;
		*len = n;
		l->off += n;
		if (l->off == k->len)
			l->idx++, l->off = 0;
		r = 1;
	} else {
		r = c->done ? 0 : -ETIMEDOUT;
	}
	pthread_mutex_unlock(&d->mu);
	return r;
}

void dm_logs_close(struct dm_logs *l)
{
	if (!l)
		return;
	fprintf(stderr, "fake: logs_close %s\n", l->c->id);
	free(l);
}
