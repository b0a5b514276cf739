/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the cgroup v1 bookkeeping that needs no kernel: cgroups made ahead and
 * taken by rename (with the rename undone when one of the three fails), the sweep of a
 * dead maker's leftovers, every sandbox's cpu cgroup, and the weights of airlock/ and
 * airlockd/ (v1 and v2). The tree is a plain
 * directory (AIRLOCK_CGROUP_ROOT) with memory/, pids/ and cpu/ subdirectories; limit
 * files are plain files the test makes where a write is expected, as kernfs would.
 */
#include "jail/jail.h"
#include "common/error.h"
#include "tap.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const ctrls[] = {"memory", "pids", "cpu"};

static char root[256];

static bool is_dir(const char *ctrl, const char *name)
{
	char p[1024];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s/airlock/%s", root, ctrl, name);
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* How many entries of ctrl's airlock/ start with prefix ("": all); the first into out. */
static int count_prefix(const char *ctrl, const char *prefix, char *out, size_t len)
{
	char p[1024];
	DIR *d;
	struct dirent *de;
	int n = 0;

	snprintf(p, sizeof(p), "%s/%s/airlock", root, ctrl);
	d = opendir(p);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' || strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		if (n++ == 0 && out)
			snprintf(out, len, "%s", de->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

/* The one ahead-<pid>-* name in ctrl's airlock/ (into out), or false. */
static bool find_ahead(const char *ctrl, char *out, size_t len)
{
	return count_prefix(ctrl, "ahead-", out, len) == 1;
}

static void mkdirs(const char *ctrl, const char *name)
{
	char p[1024];

	snprintf(p, sizeof(p), "%s/%s/airlock/%s", root, ctrl, name);
	mkdir(p, 0755);
}

static void rm_rf(const char *path)
{
	pid_t pid = fork();

	if (pid == 0) {
		execlp("rm", "rm", "-rf", path, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, NULL, 0);
}

/* A config with no limits: a fresh cgroup then gets no writes, plain directories suffice. */
static void config_without_limits(struct al_config *cfg)
{
	al_config_init(cfg);
	cfg->memory_bytes = 0;
	cfg->pids = 0;
	cfg->cpus = 0;
}

/* jail_cgroup_ahead, checked. */
static struct jail_cgroup *make_ahead(const struct al_config *cfg, const char *what)
{
	struct jail_cgroup *cg = NULL;
	struct al_error *err = NULL;

	CHECK(jail_cgroup_ahead(cfg, &cg, &err) == 0, "%s made (%s)", what,
	      err && err->msg ? err->msg : "");
	al_error_free(err);
	return cg;
}

static void test_ahead_is_taken_by_rename(void)
{
	struct al_config cfg;
	struct jail_cgroup *cg = NULL;
	struct al_error *err = NULL;
	char name[NAME_MAX + 1], again[NAME_MAX + 1];
	struct stat before, after;
	char p[1024];

	config_without_limits(&cfg);
	cg = make_ahead(&cfg, "ahead");
	CHECK(find_ahead("memory", name, sizeof(name)), "one ahead-* in memory");
	CHECK(strncmp(name, "ahead-", 6) == 0 && atoi(name + 6) == (int)getpid(),
	      "named after its maker's pid: %s", name);
	for (int i = 0; i < 3; i++)
		CHECK(find_ahead(ctrls[i], again, sizeof(again)) && strcmp(again, name) == 0,
		      "the same name in %s", ctrls[i]);
	snprintf(p, sizeof(p), "%s/pids/airlock/%s", root, name);
	stat(p, &before);

	CHECK(jail_cgroup_take(cg, "sbx_one", &cfg, &err) == 0, "taken with the same limits");
	al_error_free(err);
	err = NULL;
	for (int i = 0; i < 3; i++)
		CHECK(is_dir(ctrls[i], "sbx_one") && !is_dir(ctrls[i], name),
		      "renamed in %s, the ahead name gone", ctrls[i]);
	snprintf(p, sizeof(p), "%s/pids/airlock/sbx_one", root);
	stat(p, &after);
	CHECK(before.st_ino == after.st_ino, "the very directory, renamed (same inode)");
	CHECK(jail_cgroup_destroy_now(cg) == 0, "destroyed");
	for (int i = 0; i < 3; i++)
		CHECK(!is_dir(ctrls[i], "sbx_one"), "nothing left in %s", ctrls[i]);
}

static void test_failed_take_is_undone(void)
{
	struct al_config cfg;
	struct jail_cgroup *cg = NULL;
	struct al_error *err = NULL;
	char name[NAME_MAX + 1], p[1024];

	config_without_limits(&cfg);
	cg = make_ahead(&cfg, "second ahead");
	CHECK(find_ahead("memory", name, sizeof(name)), "one ahead-* again");
	/* The target exists, not empty, in cpu only: memory and pids rename, cpu fails. */
	mkdirs("cpu", "sbx_two");
	snprintf(p, sizeof(p), "%s/cpu/airlock/sbx_two/busy", root);
	mkdir(p, 0755);
	CHECK(jail_cgroup_take(cg, "sbx_two", &cfg, &err) < 0, "take fails on cpu");
	CHECK(err && err->msg && strstr(err->msg, "rename"), "the error says what failed: %s",
	      err && err->msg ? err->msg : "(none)");
	al_error_free(err);
	err = NULL;
	CHECK(is_dir("memory", name) && is_dir("pids", name) && is_dir("cpu", name),
	      "all three back under the ahead name");
	CHECK(!is_dir("memory", "sbx_two") && !is_dir("pids", "sbx_two"),
	      "no half-taken sandbox cgroup left");
	CHECK(jail_cgroup_destroy_now(cg) == 0, "the ahead one is removed whole");
	CHECK(!is_dir("memory", name) && !is_dir("pids", name) && !is_dir("cpu", name),
	      "nothing of it left");
	rm_rf(p);
	snprintf(p, sizeof(p), "%s/cpu/airlock/sbx_two", root);
	rmdir(p);
}

/* Make ctrl/airlock/dir/file an empty plain file (kernfs makes them; a plain tree does not). */
static void touch(const char *ctrl, const char *dir, const char *file)
{
	char p[1024];
	int fd;

	snprintf(p, sizeof(p), "%s/%s/airlock/%s/%s", root, ctrl, dir, file);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0)
		close(fd);
}

static bool holds(const char *dir, const char *file, const char *want)
{
	char p[1024], buf[128] = {0};
	int fd;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	fd = open(p, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n >= 0 && strcmp(buf, want) == 0;
}

static bool file_is(const char *ctrl, const char *dir, const char *file, const char *want)
{
	char d[1024];

	snprintf(d, sizeof(d), "%s/%s/airlock/%s", root, ctrl, dir);
	return holds(d, file, want);
}

static void test_limits_written_only_when_they_differ(void)
{
	struct al_config made, want;
	struct jail_cgroup *cg = NULL;
	struct al_error *err = NULL;
	char name[NAME_MAX + 1];

	config_without_limits(&made);
	cg = make_ahead(&made, "third ahead");
	CHECK(find_ahead("pids", name, sizeof(name)), "one ahead-* again");
	touch("memory", name, "memory.limit_in_bytes");
	touch("memory", name, "memory.memsw.limit_in_bytes");
	touch("pids", name, "pids.max");
	touch("cpu", name, "cpu.cfs_period_us");
	touch("cpu", name, "cpu.cfs_quota_us");
	want = made;
	want.pids = 77;
	want.memory_bytes = 96u << 20;
	want.cpus = 0.5;
	CHECK(jail_cgroup_take(cg, "sbx_three", &want, &err) == 0, "taken with other limits (%s)",
	      err && err->msg ? err->msg : "");
	al_error_free(err);
	CHECK(file_is("pids", "sbx_three", "pids.max", "77"), "pids.max written");
	CHECK(file_is("memory", "sbx_three", "memory.limit_in_bytes", "100663296"),
	      "memory.limit_in_bytes written");
	CHECK(file_is("cpu", "sbx_three", "cpu.cfs_quota_us", "50000"), "cpu quota written");
	for (int i = 0; i < 3; i++) {
		char p[1024];

		snprintf(p, sizeof(p), "%s/%s/airlock/sbx_three", root, ctrls[i]);
		rm_rf(p);
	}
	jail_cgroup_forget(cg);
}

static void test_sweep_removes_a_dead_makers_only(void)
{
	pid_t dead = fork();
	char stale[64], live[64];

	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	snprintf(stale, sizeof(stale), "ahead-%d-1", (int)dead);
	snprintf(live, sizeof(live), "ahead-%d-1", (int)getpid());
	for (int i = 0; i < 3; i++) {
		mkdirs(ctrls[i], stale);
		mkdirs(ctrls[i], live);
		mkdirs(ctrls[i], "sbx_other");
	}
	jail_cgroup_sweep(true);
	for (int i = 0; i < 3; i++) {
		CHECK(!is_dir(ctrls[i], stale), "a dead maker's ahead-* swept in %s", ctrls[i]);
		CHECK(is_dir(ctrls[i], live), "a live maker's kept in %s", ctrls[i]);
		CHECK(is_dir(ctrls[i], "sbx_other"), "a sandbox's never touched in %s", ctrls[i]);
	}
	for (int i = 0; i < 3; i++) {
		char p[1024];

		snprintf(p, sizeof(p), "%s/%s/airlock/%s", root, ctrls[i], live);
		rmdir(p);
		snprintf(p, sizeof(p), "%s/%s/airlock/sbx_other", root, ctrls[i]);
		rmdir(p);
	}
}

static void test_every_sandbox_has_its_cpu_cgroup(void)
{
	struct al_config cfg;
	struct jail_cgroup *cg = NULL;
	struct al_error *err = NULL;

	config_without_limits(&cfg);
	CHECK(jail_cgroup_create("run-1-1", &cfg, &cg, &err) == 0, "one-shot cgroup made");
	al_error_free(err);
	err = NULL;
	for (int i = 0; i < 3; i++)
		CHECK(is_dir(ctrls[i], "run-1-1"), "%s made without a limit", ctrls[i]);
	CHECK(jail_cgroup_destroy_now(cg) == 0, "removed");
	cg = NULL;
	CHECK(jail_cgroup_create_split("run-1-2", &cfg, &cg, &err) == 0, "split cgroup made");
	al_error_free(err);
	CHECK(is_dir("pids", "run-1-2") && is_dir("cpu", "run-1-2"),
	      "the parent's half: pids and cpu, without a CPU limit");
	CHECK(!is_dir("memory", "run-1-2"), "memory left to the child");
	CHECK(jail_cgroup_destroy_now(cg) == 0, "removed");
	CHECK(count_prefix("cpu", "", NULL, 0) == 0, "nothing left under cpu/airlock");
}

/* A fake cgroup directory with the files the kernel would have in it. */
static void fake_cgroup(const char *dir, const char *const files[])
{
	char p[1024];

	mkdir(dir, 0755);
	for (int i = 0; files[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		close(open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644));
	}
}

static void put(const char *dir, const char *file, const char *val)
{
	char p[1100];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	fd = open(p, O_WRONLY | O_TRUNC);
	if (fd >= 0) {
		if (write(fd, val, strlen(val)) < 0)
			perror("write");
		close(fd);
	}
}

/*
 * A fake tree for jail_cgroup_weigh_at in a fresh directory made from template t: v1 has
 * airlock/ and airlockd/ under cpu/, v2 has them at the top beside a
 * cgroup.subtree_control. airlock/ gets the files sbx, airlockd/ the files daemon (not
 * made when daemon is NULL: the test makes it later); their paths go into p and q (len
 * bytes each). False when the directory could not be made.
 */
static bool fake_weigh_tree(char *t, bool v2, const char *const sbx[], const char *const daemon[],
			    char *p, char *q, size_t len)
{
	static const char *const none[] = {NULL};
	static const char *const top[] = {"cgroup.subtree_control", NULL};
	const char *sub = v2 ? "" : "/cpu";

	if (!mkdtemp(t))
		return false;
	snprintf(p, len, "%s%s", t, sub);
	fake_cgroup(p, v2 ? top : none);
	snprintf(p, len, "%s%s/airlock", t, sub);
	snprintf(q, len, "%s%s/" JAIL_CGROUP_DAEMON, t, sub);
	fake_cgroup(p, sbx);
	if (daemon)
		fake_cgroup(q, daemon);
	return true;
}

/* v1: cpu/airlock/ weighs one host task (another value written over),
 * cpu/airlockd/ four, and the caller is moved into the latter; a host where a file
 * cannot be written gets an error. */
static void test_v1_weights_and_the_daemon_joins_its_cgroup(void)
{
	char t[] = "/tmp/test-cgroup-w1.XXXXXX", p[1024], q[1024];
	const char *const files[] = {"cpu.shares", "cgroup.procs", NULL};
	struct al_error *err = NULL;

	if (!fake_weigh_tree(t, false, files, NULL, p, q, sizeof(p)))
		return;
	put(p, "cpu.shares", "2048"); /* an operator's (a plain file is not truncated) */
	CHECK(jail_cgroup_weigh_at(t, false, &err) < 0 && err, "no cgroup.procs there: an error");
	al_error_free(err);
	err = NULL;
	fake_cgroup(q, files);
	CHECK(jail_cgroup_weigh_at(t, false, &err) == 0, "weighed (%s)",
	      err && err->msg ? err->msg : "");
	al_error_free(err);
	CHECK(holds(p, "cpu.shares", "1024"), "the sandboxes together: one host task");
	CHECK(holds(q, "cpu.shares", "4096"), "the daemons: four times the sandboxes");
	CHECK(holds(q, "cgroup.procs", "0"), "the caller moved into airlockd/");
	CHECK(atoi(JAIL_CGROUP_DAEMON_SHARES) > atoi(JAIL_CGROUP_SANDBOXES_SHARES),
	      "the daemon weighs more than all sandboxes");
	rm_rf(t);
}

/* v2: the controllers delegated, airlock/ at the default weight (100), airlockd/ at four
 * times that, the caller moved into it. */
static void test_v2_weights_and_the_daemon_joins_its_cgroup(void)
{
	char t[] = "/tmp/test-cgroup-w2.XXXXXX", p[1024], q[1024];
	const char *const leaf[] = {"cpu.weight", "cgroup.procs", NULL};
	const char *const sbx[] = {"cpu.weight", NULL};
	struct al_error *err = NULL;

	if (!fake_weigh_tree(t, true, sbx, leaf, p, q, sizeof(p)))
		return;
	CHECK(jail_cgroup_weigh_at(t, true, &err) == 0, "weighed (%s)",
	      err && err->msg ? err->msg : "");
	al_error_free(err);
	CHECK(holds(t, "cgroup.subtree_control", "+memory +pids +cpu"), "cpu delegated");
	CHECK(holds(p, "cpu.weight", "100"), "the sandboxes together: a default weight");
	CHECK(holds(q, "cpu.weight", "400"), "the daemons: four times that");
	CHECK(holds(q, "cgroup.procs", "0"), "the caller moved into airlockd/");
	rm_rf(t);
}

/* A file in a plain directory makes its rmdir fail as a busy cgroup's would. */
static void make_busy(const char *ctrl, const char *name, bool busy)
{
	char p[1024];

	snprintf(p, sizeof(p), "%s/%s/airlock/%s/task", root, ctrl, name);
	if (busy)
		close(open(p, O_WRONLY | O_CREAT, 0600));
	else
		unlink(p);
}

static pid_t dead_pid(void)
{
	pid_t dead = fork();

	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	return dead;
}

static void test_one_shot_sweep_reads_pids_and_keeps_it_last(void)
{
	char all[64], mem_only[64], busy[64];

	snprintf(all, sizeof(all), "run-%d-1", (int)dead_pid());
	snprintf(mem_only, sizeof(mem_only), "run-%d-2", (int)dead_pid());
	snprintf(busy, sizeof(busy), "run-%d-3", (int)dead_pid());
	for (int i = 0; i < 3; i++) {
		mkdirs(ctrls[i], all);
		mkdirs(ctrls[i], busy);
	}
	mkdirs("memory", mem_only);
	make_busy("memory", busy, true);
	jail_cgroup_sweep(false);
	for (int i = 0; i < 3; i++)
		CHECK(!is_dir(ctrls[i], all), "a dead run's cgroup swept from %s", ctrls[i]);
	CHECK(is_dir("memory", mem_only), "one without a pids twin: not seen by the quick sweep");
	CHECK(!is_dir("cpu", busy), "the busy one's cpu cgroup removed");
	CHECK(is_dir("memory", busy), "its busy memory cgroup left");
	CHECK(is_dir("pids", busy), "and its pids cgroup kept, to mark it for the next sweep");
	make_busy("memory", busy, false);
	jail_cgroup_sweep(false);
	CHECK(!is_dir("memory", busy) && !is_dir("pids", busy), "swept once no longer busy");
	jail_cgroup_sweep(true);
	CHECK(!is_dir("memory", mem_only), "the full sweep reads every hierarchy");
}

static void test_destroy_keeps_pids_while_another_is_left(void)
{
	struct al_config cfg;
	struct jail_cgroup *cg = NULL;
	struct al_error *err = NULL;

	config_without_limits(&cfg);
	CHECK(jail_cgroup_create("run-1-3", &cfg, &cg, &err) == 0, "cgroups made");
	al_error_free(err);
	make_busy("memory", "run-1-3", true);
	CHECK(jail_cgroup_destroy_now(cg) < 0, "a busy memory cgroup: destroy says so");
	CHECK(!is_dir("cpu", "run-1-3"), "cpu removed");
	CHECK(is_dir("memory", "run-1-3") && is_dir("pids", "run-1-3"),
	      "memory left, and pids kept as its marker");
	make_busy("memory", "run-1-3", false);
	jail_cgroup_sweep(false); /* pid 1 is alive: a live maker's are kept */
	CHECK(is_dir("pids", "run-1-3"), "a live maker's cgroup is not swept");
	for (int i = 0; i < 3; i++) {
		char p[1024];

		snprintf(p, sizeof(p), "%s/%s/airlock/run-1-3", root, ctrls[i]);
		rmdir(p);
	}
}

/* jail_cgroup_usage on v1: memory.usage_in_bytes, the CPU of the processes listed in
 * pids/ (here: this test, after some work), a name that is not there, a path in a name. */
static void test_usage_reads_memory_and_the_processes_cpu(void)
{
	struct jail_cgroup_reader *r;
	uint64_t mem = 0, cpu = 0;
	volatile unsigned long spin = 0;
	struct timespec t;
	long start = -1, ns;
	char p[1024];
	FILE *f;

	mkdirs("memory", "sbx_use");
	mkdirs("pids", "sbx_use");
	snprintf(p, sizeof(p), "%s/memory/airlock/sbx_use/memory.usage_in_bytes", root);
	f = fopen(p, "w");
	fprintf(f, "52428800\n");
	fclose(f);
	snprintf(p, sizeof(p), "%s/pids/airlock/sbx_use/cgroup.procs", root);
	f = fopen(p, "w");
	fprintf(f, "%d\n999999999\n", (int)getpid()); /* and one gone: counts 0 */
	fclose(f);
	do { /* 50 ms of CPU: a few clock ticks at least */
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
		ns = t.tv_sec * 1000000000L + t.tv_nsec;
		start = start < 0 ? ns : start;
		spin++;
	} while (ns - start < 50000000L);
	r = jail_cgroup_reader_open();
	CHECK(jail_cgroup_usage(r, "sbx_use", &mem, &cpu) == 0, "usage read");
	CHECK(mem == 52428800, "memory from memory.usage_in_bytes (%llu)", (unsigned long long)mem);
	CHECK(cpu >= 20000000, "CPU of the listed processes (%llu ns)", (unsigned long long)cpu);
	CHECK(jail_cgroup_usage(r, "sbx_gone", &mem, &cpu) == -ENOENT, "a cgroup not there");
	CHECK(jail_cgroup_usage(r, "../airlock/sbx_use", &mem, &cpu) == -ENOENT,
	      "a name with a slash is no cgroup name");
	jail_cgroup_reader_close(r);
}

int main(void)
{
	char tmpl[] = "/tmp/airlock-test-cgroup-XXXXXX";

	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(root, sizeof(root), "%s", tmpl);
	for (int i = 0; i < 3; i++) {
		char p[1024];

		snprintf(p, sizeof(p), "%s/%s", root, ctrls[i]);
		mkdir(p, 0755);
		snprintf(p, sizeof(p), "%s/%s/airlock", root, ctrls[i]);
		mkdir(p, 0755);
	}
	setenv("AIRLOCK_CGROUP_ROOT", root, 1);
	test_ahead_is_taken_by_rename();
	test_failed_take_is_undone();
	test_limits_written_only_when_they_differ();
	test_sweep_removes_a_dead_makers_only();
	test_every_sandbox_has_its_cpu_cgroup();
	test_v1_weights_and_the_daemon_joins_its_cgroup();
	test_v2_weights_and_the_daemon_joins_its_cgroup();
	test_one_shot_sweep_reads_pids_and_keeps_it_last();
	test_destroy_keeps_pids_while_another_is_left();
	test_usage_reads_memory_and_the_processes_cpu();
	rm_rf(root);
	return tap_done();
}
