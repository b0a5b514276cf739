/* SPDX-License-Identifier: MIT */
#include "common/error.h"
#include "common/path.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void ok(const char *in, const char *want)
{
	char *out = NULL;
	struct al_error *err = NULL;
	int r = al_path_normalize(in, "path", &out, &err);

	CHECK(r == 0 && out && strcmp(out, want) == 0, "'%s' -> '%s' (got '%s')", in, want,
	      out ? out : "(refused)");
	free(out);
	al_error_free(err);
}

static void refused(const char *in, size_t len, const char *needle)
{
	char *out = NULL;
	struct al_error *err = NULL;
	int r = al_path_normalize_len(in, len, "workdir", &out, &err);
	const char *msg = err ? err->msg : "";

	CHECK(r < 0 && !out && err && err->code == EINVAL && strstr(msg, needle) &&
		  strncmp(msg, "workdir", 7) == 0,
	      "'%.40s' refused (%s)", in, msg);
	free(out);
	al_error_free(err);
}

int main(void)
{
	static char longp[AL_PATH_MAX + 8], longc[300];

	ok("/", "/");
	ok("//", "/");
	ok("/workspace", "/workspace");
	ok("//workspace//a///b/", "/workspace/a/b");
	ok("//proc", "/proc");
	ok("/dev/shm//x", "/dev/shm/x");
	ok("/a/.b/..c/...", "/a/.b/..c/...");
	refused("", 0, "empty");
	refused("workspace", 9, "absolute");
	refused("./x", 3, "absolute");
	refused("/./dev", 6, "'.'");
	refused("/proc/.", 7, "'.'");
	refused("/workspace//../proc", 19, "'..'");
	refused("/..", 3, "'..'");
	refused("/a/b/..", 7, "'..'");
	refused("/a\0b", 4, "NUL");
	memset(longc, 'x', sizeof(longc) - 1);
	longc[0] = '/';
	refused(longc, strlen(longc), "255");
	for (size_t i = 0; i + 2 < sizeof(longp); i += 2) /* the last byte stays NUL */
		memcpy(longp + i, "/x", 2);
	refused(longp, strlen(longp), "4095");

	CHECK(al_path_in_pseudo_fs("/proc"), "/proc is pseudo");
	CHECK(al_path_in_pseudo_fs("/proc/1"), "/proc/1 is pseudo");
	CHECK(al_path_in_pseudo_fs("/sys/x"), "/sys/x is pseudo");
	CHECK(al_path_in_pseudo_fs("/dev"), "/dev is pseudo");
	CHECK(al_path_in_pseudo_fs("/"), "/ holds them all");
	CHECK(!al_path_in_pseudo_fs("/dev/shm"), "/dev/shm is the sandbox's");
	CHECK(!al_path_in_pseudo_fs("/dev/shm/a"), "/dev/shm/a is the sandbox's");
	CHECK(!al_path_in_pseudo_fs("/processes"), "/processes is not /proc");
	CHECK(!al_path_in_pseudo_fs("/devx"), "/devx is not /dev");
	CHECK(!al_path_in_pseudo_fs("/workspace"), "/workspace is not pseudo");
	CHECK(al_path_is_under("/a/b", "/a") && al_path_is_under("/a", "/a") &&
		  !al_path_is_under("/ab", "/a") && al_path_is_under("/x", "/"),
	      "is_under");
	return tap_done();
}
