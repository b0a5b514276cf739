/* SPDX-License-Identifier: MIT */
#include "cli/cli.h"
#include "common/utf8.h"

#include <jansson.h>
#include <stdlib.h>

static json_t *text(const char *buf, size_t len)
{
	size_t n = 0;
	char *clean = al_utf8_sanitize(buf, len, &n);
	json_t *j = json_stringn(clean, n);

	free(clean);
	return j ? j : json_string("");
}

int cli_print_json(FILE *out, const struct al_result *res, const char *out_buf, size_t out_len,
		   const char *err_buf, size_t err_len, json_t *egress)
{
	json_t *o = json_object();
	char *s;
	int r;
	bool has_code = res->reason == AL_REASON_EXITED || res->reason == AL_REASON_EXEC_FAILED;
	bool has_sig = res->signal != 0 && res->reason != AL_REASON_EXITED;

	json_object_set_new(o, "exit_code", has_code ? json_integer(res->exit_code) : json_null());
	json_object_set_new(o, "signal", has_sig ? json_integer(res->signal) : json_null());
	json_object_set_new(o, "reason", json_string(al_reason_name(res->reason)));
	json_object_set_new(o, "airlock_exit_code", json_integer(al_result_exit_code(res)));
	json_object_set_new(o, "stdout", text(out_buf ? out_buf : "", out_len));
	json_object_set_new(o, "stderr", text(err_buf ? err_buf : "", err_len));
	json_object_set_new(o, "stdout_truncated", json_boolean(res->stdout_truncated));
	json_object_set_new(o, "stderr_truncated", json_boolean(res->stderr_truncated));
	json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)res->stdout_bytes));
	json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)res->stderr_bytes));
	json_object_set_new(o, "duration_ms", json_real(res->duration_ms));
	json_object_set_new(o, "peak_memory_bytes",
			    json_integer((json_int_t)res->peak_memory_bytes));
	if (res->error)
		json_object_set_new(o, "error", json_string(res->error));
	if (egress)
		json_object_set_new(o, "egress", egress);
	s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	if (!s)
		return -1;
	r = fprintf(out, "%s\n", s) < 0 ? -1 : 0;
	free(s);
	return r;
}
