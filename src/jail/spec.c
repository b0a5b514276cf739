/* SPDX-License-Identifier: MIT */
#include "jail/spec.h"
#include "jail/jail.h"
#include "common/path.h"

#include <airlock/airlock.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int jail_spec_set(char *field, size_t cap, const char *value, const char *what,
		  struct al_error **err)
{
	if (!value)
		return 0;
	if (strlen(value) >= cap)
		return al_error_msg(err, EINVAL, "%s is longer than %zu bytes", what, cap - 1);
	memcpy(field, value, strlen(value) + 1);
	return 0;
}

void jail_spec_defaults(struct jail_spec *s)
{
	if (!s->memory_bytes)
		s->memory_bytes = 1ull << 30;
	if (!s->disk_bytes)
		s->disk_bytes = JAIL_DISK_DEFAULT;
	if (!s->pids)
		s->pids = JAIL_SPEC_PIDS;
	if (!s->workdir[0])
		snprintf(s->workdir, sizeof(s->workdir), "%s", "/workspace");
	if (!s->hostname[0])
		snprintf(s->hostname, sizeof(s->hostname), "%s", JAIL_HOSTNAME_DEFAULT);
}

bool jail_hostname_ok(const char *h)
{
	size_t n = strlen(h);

	return n >= 1 && n <= 63 &&
	       strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789-.") == n &&
	       h[0] != '-' && h[0] != '.' && h[n - 1] != '-' && h[n - 1] != '.';
}

int jail_spec_validate(const struct jail_spec *s, struct al_error **err)
{
	if (!isfinite(s->vcpus) || s->vcpus < 0 || s->vcpus > JAIL_SPEC_VCPUS_MAX ||
	    (s->vcpus > 0 && s->vcpus < 0.01))
		return al_error_msg(err, EINVAL,
				    "resources: vcpus must be 0.01 to %d (or 0: no limit)",
				    JAIL_SPEC_VCPUS_MAX);
	if (s->memory_bytes < JAIL_SPEC_MEMORY_MIN)
		return al_error_msg(err, EINVAL, "memory must be at least 4 MiB");
	if (s->disk_bytes < JAIL_SPEC_DISK_MIN)
		return al_error_msg(
		    err, EINVAL,
		    "resources: disk must be at least 1 MiB (the sandbox's own /etc "
		    "and directories live there)");
	if (s->workdir[0] != '/')
		return al_error_msg(err, EINVAL, "workdir must be an absolute path");
	if (al_path_in_pseudo_fs(s->workdir))
		return al_error_msg(
		    err, EINVAL,
		    "workdir '%.200s' is /, or in /proc, /sys or /dev (only /dev/shm "
		    "there is the sandbox's)",
		    s->workdir);
	if (!jail_hostname_ok(s->hostname))
		return al_error_msg(err, EINVAL,
				    "hostname '%.80s': 1 to 63 letters, digits, '-' and '.', not "
				    "starting or ending with '-' or '.'",
				    s->hostname);
	return 0;
}

void jail_spec_config(const struct jail_spec *s, struct al_config *cfg)
{
	/* Whole, not al_config_init's one-shot defaults: every setting a daemon sandbox has
	 * comes from the spec (its output is the agent's, never relay-limited). */
	memset(cfg, 0, sizeof(*cfg));
	cfg->cpus = s->vcpus;
	cfg->timeout_ms = 0; /* a daemon sandbox's lifetime is the daemon's timer's */
	cfg->pids = s->pids;
	cfg->memory_bytes = s->memory_bytes;
	cfg->disk_bytes = s->disk_bytes;
	cfg->image = s->image[0] ? s->image : NULL;
	cfg->workdir = s->workdir;
	cfg->hostname = s->hostname;
}

bool jail_spec_same_root(const struct jail_spec *made, const struct jail_spec *want)
{
	return made->disk_bytes == want->disk_bytes && strcmp(made->image, want->image) == 0 &&
	       strcmp(made->workdir, want->workdir) == 0 &&
	       strcmp(made->hostname, want->hostname) == 0;
}

json_t *jail_spec_json(const struct jail_spec *s)
{
	return json_pack("{s:o, s:f, s:I, s:I, s:s, s:s}", "image",
			 s->image[0] ? json_string(s->image) : json_null(), "vcpus", s->vcpus,
			 "memory_bytes", (json_int_t)s->memory_bytes, "disk_bytes",
			 (json_int_t)s->disk_bytes, "workdir", s->workdir, "hostname", s->hostname);
}

void jail_spec_from_json(json_t *o, struct jail_spec *s)
{
	json_t *v;

	memset(s, 0, sizeof(*s));
	if ((v = json_object_get(o, "vcpus")) && json_is_number(v))
		s->vcpus = json_number_value(v);
	if ((v = json_object_get(o, "memory_bytes")) && json_is_integer(v) &&
	    json_integer_value(v) > 0)
		s->memory_bytes = (uint64_t)json_integer_value(v);
	if ((v = json_object_get(o, "disk_bytes")) && json_is_integer(v) &&
	    json_integer_value(v) > 0)
		s->disk_bytes = (uint64_t)json_integer_value(v);
	JAIL_SPEC_SET(s->image, json_string_value(json_object_get(o, "image")), "image", NULL);
	JAIL_SPEC_SET(s->workdir, json_string_value(json_object_get(o, "workdir")), "workdir",
		      NULL);
	JAIL_SPEC_SET(s->hostname, json_string_value(json_object_get(o, "hostname")), "hostname",
		      NULL);
	jail_spec_defaults(s);
}
