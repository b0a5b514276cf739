/* SPDX-License-Identifier: MIT */
/* Thin wrappers for syscalls glibc does not wrap (or wraps too late), with fallbacks. */
#ifndef AL_COMMON_SYSCALLS_H
#define AL_COMMON_SYSCALLS_H

#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef __NR_pidfd_send_signal
#define __NR_pidfd_send_signal 424
#endif
#ifndef __NR_close_range
#define __NR_close_range 436
#endif
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif
#define AL_CLONE_NEWTIME 0x80ULL /* time namespace (clone3 puts the child in it) */
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

struct al_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
	    set_tid_size, cgroup;
};

static inline pid_t sys_clone3(struct al_clone_args *args)
{
	return (pid_t)syscall(__NR_clone3, args, sizeof(*args));
}

static inline int sys_pidfd_send_signal(int pidfd, int sig)
{
	return (int)syscall(__NR_pidfd_send_signal, pidfd, sig, NULL, 0);
}

static inline int sys_pivot_root(const char *new_root, const char *put_old)
{
	return (int)syscall(__NR_pivot_root, new_root, put_old);
}

static inline int sys_close_range(unsigned first, unsigned last, unsigned flags)
{
	return (int)syscall(__NR_close_range, first, last, flags);
}

/* Landlock UAPI (vendored subset, ABI 1-6), so the build does not depend on host headers. */
#define AL_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define AL_LANDLOCK_RULE_PATH_BENEATH 1
#define AL_LL_FS_EXECUTE (1ULL << 0)
#define AL_LL_FS_WRITE_FILE (1ULL << 1)
#define AL_LL_FS_READ_FILE (1ULL << 2)
#define AL_LL_FS_READ_DIR (1ULL << 3)
#define AL_LL_FS_REMOVE_DIR (1ULL << 4)
#define AL_LL_FS_REMOVE_FILE (1ULL << 5)
#define AL_LL_FS_MAKE_CHAR (1ULL << 6)
#define AL_LL_FS_MAKE_DIR (1ULL << 7)
#define AL_LL_FS_MAKE_REG (1ULL << 8)
#define AL_LL_FS_MAKE_SOCK (1ULL << 9)
#define AL_LL_FS_MAKE_FIFO (1ULL << 10)
#define AL_LL_FS_MAKE_BLOCK (1ULL << 11)
#define AL_LL_FS_MAKE_SYM (1ULL << 12)
#define AL_LL_FS_REFER (1ULL << 13)		     /* ABI 2 */
#define AL_LL_FS_TRUNCATE (1ULL << 14)		     /* ABI 3 */
#define AL_LL_FS_IOCTL_DEV (1ULL << 15)		     /* ABI 5 */
#define AL_LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define AL_LL_SCOPE_SIGNAL (1ULL << 1)		     /* ABI 6 */

struct al_landlock_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct al_landlock_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

static inline int sys_landlock_create_ruleset(const struct al_landlock_ruleset_attr *attr,
					      size_t size, uint32_t flags)
{
	return (int)syscall(__NR_landlock_create_ruleset, attr, size, flags);
}

static inline int sys_landlock_add_rule(int fd, int type, const void *attr, uint32_t flags)
{
	return (int)syscall(__NR_landlock_add_rule, fd, type, attr, flags);
}

static inline int sys_landlock_restrict_self(int fd, uint32_t flags)
{
	return (int)syscall(__NR_landlock_restrict_self, fd, flags);
}

#endif
