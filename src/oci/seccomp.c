/* SPDX-License-Identifier: MIT */
/*
 * linux.seccomp of config.json, compiled to BPF with libseccomp at create. The workload
 * installs it after airlock's own filter (security.c), never instead of it: the kernel
 * runs both and takes the stricter answer, so a permissive profile widens nothing.
 */
#include "oci/oci.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/xalloc.h"

#include <errno.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int action_of(const char *a, json_t *errno_ret, uint32_t *out)
{
	int e = json_is_integer(errno_ret) ? (int)json_integer_value(errno_ret) : EPERM;

	if (!a)
		return -1;
	if (strcmp(a, "SCMP_ACT_ALLOW") == 0)
		*out = SCMP_ACT_ALLOW;
	else if (strcmp(a, "SCMP_ACT_ERRNO") == 0)
		*out = SCMP_ACT_ERRNO((uint32_t)e);
	else if (strcmp(a, "SCMP_ACT_KILL") == 0 || strcmp(a, "SCMP_ACT_KILL_THREAD") == 0)
		*out = SCMP_ACT_KILL_THREAD;
	else if (strcmp(a, "SCMP_ACT_KILL_PROCESS") == 0)
		*out = SCMP_ACT_KILL_PROCESS;
	else if (strcmp(a, "SCMP_ACT_TRAP") == 0)
		*out = SCMP_ACT_TRAP;
	else if (strcmp(a, "SCMP_ACT_LOG") == 0)
		*out = SCMP_ACT_LOG;
	else if (strcmp(a, "SCMP_ACT_TRACE") == 0)
		*out = SCMP_ACT_ERRNO((uint32_t)e); /* no tracer here: refused as an errno */
	else
		return -1;
	return 0;
}

static int op_of(const char *op, enum scmp_compare *out)
{
	static const struct {
		const char *name;
		enum scmp_compare op;
	} ops[] = {{"SCMP_CMP_NE", SCMP_CMP_NE},
		   {"SCMP_CMP_LT", SCMP_CMP_LT},
		   {"SCMP_CMP_LE", SCMP_CMP_LE},
		   {"SCMP_CMP_EQ", SCMP_CMP_EQ},
		   {"SCMP_CMP_GE", SCMP_CMP_GE},
		   {"SCMP_CMP_GT", SCMP_CMP_GT},
		   {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}};

	for (size_t i = 0; op && i < ARRAY_SIZE(ops); i++)
		if (strcmp(op, ops[i].name) == 0) {
			*out = ops[i].op;
			return 0;
		}
	return -1;
}

/* One entry of syscalls[]: every name it lists gets its action under its argument tests. */
static int add_rule(scmp_filter_ctx f, json_t *r, size_t i, struct al_error **err)
{
	struct scmp_arg_cmp cmp[6];
	uint32_t act;
	json_t *args = json_object_get(r, "args"), *a, *n;
	size_t k, na = 0;

	if (action_of(json_string_value(json_object_get(r, "action")),
		      json_object_get(r, "errnoRet"), &act) < 0)
		return al_error_msg(err, EINVAL, "syscalls[%zu]: action not supported", i);
	json_array_foreach(args, k, a)
	{
		enum scmp_compare op;

		if (na >= ARRAY_SIZE(cmp) ||
		    op_of(json_string_value(json_object_get(a, "op")), &op) < 0)
			return al_error_msg(err, EINVAL, "syscalls[%zu].args[%zu]", i, k);
		cmp[na++] = (struct scmp_arg_cmp){
		    .arg = (unsigned)json_integer_value(json_object_get(a, "index")),
		    .op = op,
		    .datum_a = (scmp_datum_t)json_integer_value(json_object_get(a, "value")),
		    .datum_b = (scmp_datum_t)json_integer_value(json_object_get(a, "valueTwo"))};
	}
	json_array_foreach(json_object_get(r, "names"), k, n)
	{
		int nr =
		    seccomp_syscall_resolve_name(json_string_value(n) ? json_string_value(n) : "");

		if (nr == __NR_SCMP_ERROR)
			continue; /* unknown to this kernel's architecture: nothing to filter */
		if (seccomp_rule_add_array(f, act, nr, (unsigned)na, cmp) < 0 && na == 0)
			continue; /* the default action already (libseccomp refuses the same) */
	}
	return 0;
}

/* The filter as BPF, through a memfd: libseccomp writes it to an fd only. */
static int export_bpf(scmp_filter_ctx f, void **out, struct al_error **err)
{
	_cleanup_close_ int fd = memfd_create("oci-seccomp", MFD_CLOEXEC);
	struct sock_fprog *prog;
	struct stat st;

	if (fd < 0 || seccomp_export_bpf(f, fd) < 0 || fstat(fd, &st) < 0)
		return al_error_set(err, errno ? errno : EINVAL, "exporting the filter");
	if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
	    st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
		return al_error_msg(err, E2BIG, "the filter has %lld bytes", (long long)st.st_size);
	prog = xzalloc(sizeof(*prog));
	prog->len = (unsigned short)(st.st_size / (off_t)sizeof(struct sock_filter));
	prog->filter = xzalloc((size_t)st.st_size);
	if (pread(fd, prog->filter, (size_t)st.st_size, 0) != st.st_size) {
		oci_seccomp_free(prog);
		return al_error_set(err, errno ? errno : EIO, "reading the filter back");
	}
	*out = prog;
	return 0;
}

int oci_seccomp_compile(json_t *sc, void **out, struct al_error **err)
{
	uint32_t def;
	scmp_filter_ctx f;
	json_t *r;
	size_t i;
	int ret;

	*out = NULL;
	if (!sc || json_is_null(sc))
		return 0;
	if (action_of(json_string_value(json_object_get(sc, "defaultAction")),
		      json_object_get(sc, "defaultErrnoRet"), &def) < 0)
		return al_error_msg(err, EINVAL, "defaultAction not supported");
	f = seccomp_init(def);
	if (!f)
		return al_error_msg(err, EINVAL, "seccomp_init");
	/* No no_new_privs bit from libseccomp: the workload sets it itself (init.c). */
	seccomp_attr_set(f, SCMP_FLTATR_CTL_NNP, 0);
	ret = 0;
	json_array_foreach(json_object_get(sc, "syscalls"), i, r) if (ret == 0) ret =
	    add_rule(f, r, i, err);
	if (ret == 0)
		ret = export_bpf(f, out, err);
	seccomp_release(f);
	return ret;
}

void oci_seccomp_free(void *p)
{
	struct sock_fprog *prog = p;

	if (prog)
		free(prog->filter);
	free(prog);
}
