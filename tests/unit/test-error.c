/* SPDX-License-Identifier: MIT */
#include "common/error.h"
#include "tap.h"

#include <errno.h>
#include <string.h>

static int fails(struct al_error **err)
{
	return al_error_set(err, ENOENT, "open '%s'", "/nope");
}

int main(void)
{
	struct al_error *err = NULL;
	int rc = fails(&err);

	CHECK(rc == -ENOENT, "returns -errno");
	CHECK(err && err->code == ENOENT, "code kept");
	CHECK(err && strcmp(err->msg, "open '/nope': No such file or directory") == 0,
	      "message names syscall, object and errno: %s", err ? err->msg : "(null)");
	rc = al_error_wrap(&err, "building %s", "root");
	CHECK(rc == -ENOENT && strncmp(err->msg, "building root: open", 19) == 0,
	      "wrap adds context: %s", err->msg);
	al_error_free(err);
	CHECK(fails(NULL) == -ENOENT, "NULL err pointer tolerated");
	err = NULL;
	al_error_set(&err, 0, "%s", "zero errno becomes EIO");
	CHECK(err && err->code == EIO, "errno 0 -> EIO");
	al_error_free(err);
	return tap_done();
}
