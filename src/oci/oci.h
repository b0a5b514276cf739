/* SPDX-License-Identifier: MIT */
/*
 * airlock-oci: airlock as an OCI runtime in runc's command-line dialect (docs/oci.md), for
 * containerd's runc shim (options.BinaryName) and podman (--runtime). Each container is one
 * airlock jail (src/jail/) whose PID 1 waits at a start gate; its state lives under --root.
 */
#ifndef AL_OCI_OCI_H
#define AL_OCI_OCI_H

#include "jail/jail.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define OCI_VERSION "1.0.2"
#define OCI_ROOT_DEFAULT "/run/airlock-oci"
#define OCI_POLICY_ANNOTATION "airlock.dev/network-policy"
#define OCI_EGRESS_LOG_ANNOTATION "airlock.dev/egress-log"
#define OCI_ROOT_SIZE_ANNOTATION "airlock.dev/root-size" /* a writable root's cap */
/* Host uid ranges of OCI containers: 0x20000000 + slot * 65536 (airlock run and airlockd
 * use 0x40000000 and up). */
#define OCI_SLOT_BASE 0x20000000u
#define OCI_SLOTS 0x2000u

/* What config.json asks for, checked, in the jail's terms (config.c). */
struct oci_config {
	json_t *doc; /* owns every string below */
	struct al_config cfg;
	struct jail_oci oci;
	char rootfs[4096];
	const char **argv, **envp; /* NULL-terminated */
	const char **masked, **readonly;
	const char *cwd;
	uid_t uid;
	gid_t groups[32];
	struct jail_mount mounts[JAIL_OCI_MOUNTS_MAX];
	struct jail_rlimit rlimits[16];
	int netns_fd;	    /* -1, or a network namespace to join (a pod's) */
	const char *policy; /* the network-policy annotation, or NULL */
	void *seccomp;	    /* struct sock_fprog (seccomp.c), or NULL */
};

/* Global options of every command. */
struct oci_opts {
	const char *root;
	const char *log; /* NULL: stderr only */
	bool log_json;
	bool debug;
};

/* config.c */
int oci_config_load(const char *bundle, struct oci_config *c, struct al_error **err);
/* The process object of config.json or of `exec --process`: argv, env, cwd, user,
 * terminal, capabilities (into c). */
int oci_config_process(json_t *proc, struct oci_config *c, struct al_error **err);
void oci_config_free(struct oci_config *c);
/* LinuxResources (linux.resources, `update --resources`) into cfg's limits. */
int oci_config_resources(json_t *res, struct al_config *cfg, struct al_error **err);
/* seccomp.c: linux.seccomp compiled to BPF (a heap struct sock_fprog), or NULL for none. */
int oci_seccomp_compile(json_t *sc, void **out, struct al_error **err);
void oci_seccomp_free(void *prog);

/* state.c: one container's record under root/ID/state.json. */
struct oci_state {
	char id[129];
	pid_t pid;
	uint64_t start_time;
	char bundle[4096];
	char rootfs[4096];
	char created[40];
	char cgroup[160];
	unsigned slot;
	json_t *annotations;
};
bool oci_id_ok(const char *id);
/* An exclusive (or shared) lock on the whole root: held for the command's life. */
int oci_lock(const char *root, bool exclusive, struct al_error **err);
int oci_state_load(const char *root, const char *id, struct oci_state *st, struct al_error **err);
int oci_state_save(const char *root, const struct oci_state *st, struct al_error **err);
void oci_state_free(struct oci_state *st);
/* "created", "running", "paused" or "stopped". */
const char *oci_status(const char *root, const struct oci_state *st);
json_t *oci_state_json(const char *root, const struct oci_state *st);
/* The lowest uid slot no container under root holds. */
int oci_slot_alloc(const char *root, unsigned *slot, struct al_error **err);
char *oci_path(const char *root, const char *id, const char *name);
/* cgroup v1's freezer for pause/resume (v2 has cgroup.freeze in the container's own
 * cgroup): a directory freezer/airlock/CGROUP that PID 1 joins at create. */
#define OCI_V1_FREEZER "/sys/fs/cgroup/freezer"
int oci_freezer_join(const char *cgroup, pid_t pid, struct al_error **err);
void oci_freezer_remove(const char *cgroup);
/* Write "1"/"0" (v2) or FROZEN/THAWED (v1). */
int oci_freeze(const char *cgroup, bool freeze, struct al_error **err);
/* Remove ROOT/ID and what airlock-oci puts there (the egress log included). */
void oci_remove_dir(const char *root, const char *id);
/* Every host pid in the container's pid namespace (PID 1 first); n returned. */
size_t oci_pids(pid_t pid1, pid_t *out, size_t max);

/* create.c */
int oci_create(const struct oci_opts *o, int argc, char **argv);
int oci_start(const struct oci_opts *o, int argc, char **argv);
/* Write a pid file whole or not at all (a shim reads it as soon as we exit). */
int oci_write_pid_file(const char *path, pid_t pid, struct al_error **err);
/* exec.c */
int oci_exec(const struct oci_opts *o, int argc, char **argv);
/* cmds.c */
int oci_cmd_state(const struct oci_opts *o, int argc, char **argv);
int oci_cmd_kill(const struct oci_opts *o, int argc, char **argv);
int oci_cmd_delete(const struct oci_opts *o, int argc, char **argv);
int oci_cmd_list(const struct oci_opts *o, int argc, char **argv);
int oci_cmd_ps(const struct oci_opts *o, int argc, char **argv);
int oci_cmd_update(const struct oci_opts *o, int argc, char **argv);
int oci_cmd_pause(const struct oci_opts *o, int argc, char **argv, bool pause);
int oci_cmd_features(const struct oci_opts *o, int argc, char **argv);
/* main.c: report an error as runc does (stderr, and the --log file's last line). */
int oci_fail(const struct oci_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
