/* SPDX-License-Identifier: MIT */
#include "common/selfpath.h"
#include "common/xalloc.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

char *al_sibling_path(const char *name)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	return xasprintf("%s/%s", self, name);
}
