/* sandbox.c: a process's seccomp filters, process and descriptor limits, read before the agent goes in. */
#define _GNU_SOURCE
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <unistd.h>

#include "freeze.h"
#include "permit.h"
#include "seccomp.h"
#include "xmalloc.h"

#define PTRACE_SECCOMP_GET_FILTER_REQ 0x420c    /* linux/ptrace.h */
#define CAP_SYS_ADMIN_BIT 21
#define CAP_SYS_RESOURCE_BIT 24
#define FREEZE_MS 250
#define MAX_FILTERS 512                         /* the kernel's chain is shorter (MAX_INSNS_PER_PATH) */

/* What the agent takes, at most, on top of what the process has: see the limits below. */
static const struct {
	int threads, fds;
	const char *doing;      /* "tracer does not DOING" */
} needs[] = {
	/* The loader's thread and the listener; an attach's I/O and eval threads, while 3.1 keeps
	 * the loader's for reuse. The file being loaded, the listener's eventfd, Ruby's timer pipe;
	 * an attach's socket, eventfd and dump file. */
	[TRC_SANDBOX_LOAD] = { 4, 8, "load the agent into it" },
	[TRC_SANDBOX_ATTACH] = { 2, 4, "attach to it" },
};

/* ---- /proc ---- */

/* The number after key in a /proc status file, or -1 when absent. */
static long
status_number(const char *path, const char *key, int base)
{
	char line[512];
	size_t n = strlen(key);
	long v = -1;
	FILE *f;

	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (v < 0 && fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, n) == 0)
			v = strtol(line + n, NULL, base);
	fclose(f);
	return v;
}

static bool
has_cap(const char *status, int bit)
{
	char line[512];
	bool yes = false;
	FILE *f;

	if ((f = fopen(status, "re")) == NULL)
		return false;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "CapEff:", 7) == 0)
			yes = (strtoull(line + 7, NULL, 16) >> bit) & 1;
	fclose(f);
	return yes;
}

/* The soft limit of a line of /proc/PID/limits ("Max processes"); -1 unlimited or unknown. */
static long
soft_limit(pid_t pid, const char *name)
{
	char path[64], line[256], *p;
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, name, strlen(name)) != 0)
			continue;
		p = line + strlen(name) + strspn(line + strlen(name), " ");
		v = strncmp(p, "unlimited", 9) == 0 ? -1 : strtol(p, NULL, 10);
	}
	fclose(f);
	return v;
}

/* The highest seccomp mode among pid's threads (0, 1 strict, 2 filter), and the filters' count. */
static int
seccomp_mode(pid_t pid, long *filters)
{
	char path[96];
	struct dirent *de;
	long mode = 0, m, count;
	DIR *d;

	*filters = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if ((d = opendir(path)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/status", (int)pid, de->d_name);
		if ((m = status_number(path, "Seccomp:", 10)) > mode)
			mode = m;
		if ((count = status_number(path, "Seccomp_filters:", 10)) > *filters)
			*filters = count;
	}
	closedir(d);
	return (int)mode;
}

/* ---- limits ---- */

/* How many threads (tasks) uid runs, as RLIMIT_NPROC counts them: by real uid. */
static long
tasks_of(uid_t uid)
{
	char path[64], line[256];
	struct dirent *de;
	long total = 0, threads;
	unsigned long real;
	bool mine;
	DIR *d;
	FILE *f;

	if ((d = opendir("/proc")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%.16s/status", de->d_name);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		mine = false;
		threads = 0;
		while (fgets(line, sizeof(line), f) != NULL) {
			if (strncmp(line, "Uid:", 4) == 0 && sscanf(line + 4, "%lu", &real) == 1) /* NOLINT(cert-err34-c) */
				mine = real == uid;
			else if (strncmp(line, "Threads:", 8) == 0)
				threads = strtol(line + 8, NULL, 10);
		}
		fclose(f);
		if (mine)
			total += threads;
	}
	closedir(d);
	return total;
}

/*
 * RLIMIT_NPROC counts every thread of the process's (real) user, and a thread it would exceed
 * is refused (EAGAIN): the loader's Thread.new raises in the job, which Ruby drops. Root, and
 * a process with CAP_SYS_RESOURCE or CAP_SYS_ADMIN, are not held to it.
 */
static int
check_nproc(pid_t pid, enum trc_sandbox_for what, char *why, size_t n)
{
	char status[64];
	long limit = soft_limit(pid, "Max processes"), uid, have;

	snprintf(status, sizeof(status), "/proc/%d/status", (int)pid);
	uid = status_number(status, "Uid:", 10);
	if (limit < 0 || uid <= 0 || has_cap(status, CAP_SYS_RESOURCE_BIT) || has_cap(status, CAP_SYS_ADMIN_BIT))
		return 0;
	if ((have = tasks_of((uid_t)uid)) < 0 || have + needs[what].threads <= limit)
		return 0;
	return trc_permit_say(why, n, "process %d is at its user's limit: uid %ld may run %ld processes and "
		   "threads (RLIMIT_NPROC, ulimit -u) and runs %ld already, and the agent needs up to %d more "
		   "threads, so tracer does not %s; raise the limit (prlimit --pid %d --nproc=%ld) and run "
		   "tracer again", (int)pid, uid, limit, have, needs[what].threads, needs[what].doing, (int)pid,
		   have + needs[what].threads + 16);
}

/* Descriptors below the soft RLIMIT_NOFILE: the only ones the process may still open. */
static int
check_nofile(pid_t pid, enum trc_sandbox_for what, char *why, size_t n)
{
	char path[64];
	struct dirent *de;
	long limit = soft_limit(pid, "Max open files"), used = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if (limit < 0 || (d = opendir(path)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.' && strtol(de->d_name, NULL, 10) < limit)
			used++;
	closedir(d);
	if (used + needs[what].fds <= limit)
		return 0;
	return trc_permit_say(why, n, "process %d has %ld of the %ld file descriptors it may open in use "
		   "(RLIMIT_NOFILE, ulimit -n), and the agent needs up to %d more, so tracer does not %s; raise "
		   "the limit (prlimit --pid %d --nofile=%ld) and run tracer again", (int)pid, used, limit,
		   needs[what].fds, needs[what].doing, (int)pid, used + needs[what].fds + 64);
}

/* ---- seccomp filters ---- */

struct chain {
	struct trc_seccomp_filter f[MAX_FILTERS];
	size_t n;
};

static void
chain_release(struct chain *c)
{
	for (size_t i = 0; i < c->n; i++)
		free((void *)c->f[i].insns);
	c->n = 0;
}

/* Thread tid's filters, newest first. 0; 1 when it has none; -1 with errno. */
static int
read_chain(pid_t tid, struct chain *c)
{
	long len;

	c->n = 0;
	for (unsigned long i = 0; i < MAX_FILTERS; i++) {
		struct trc_bpf_insn *insns;

		if ((len = ptrace(PTRACE_SECCOMP_GET_FILTER_REQ, tid, (void *)i, NULL)) < 0) {
			/* ENOENT: past the oldest; EINVAL at 0: the thread has no filter. */
			if (errno == ENOENT || (errno == EINVAL && i == 0))
				return c->n == 0 ? 1 : 0;
			return -1;
		}
		if (len <= 0 || len > TRC_BPF_MAX_INSNS) {
			errno = EINVAL;
			return -1;
		}
		insns = xcalloc((size_t)len, sizeof(*insns));
		if (ptrace(PTRACE_SECCOMP_GET_FILTER_REQ, tid, (void *)i, insns) != len) {
			free(insns);
			errno = errno ? errno : EINVAL;
			return -1;
		}
		c->f[c->n].insns = insns;
		c->f[c->n++].n = (size_t)len;
	}
	errno = E2BIG;
	return -1;
}

static bool
same_chain(const struct chain *a, const struct chain *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (a->f[i].n != b->f[i].n || memcmp(a->f[i].insns, b->f[i].insns, a->f[i].n * sizeof(*a->f[i].insns)) != 0)
			return false;
	return true;
}

/* Every distinct chain of the threads, read while they are held still (the kernel's rule). */
struct chains {
	struct chain *c;
	pid_t *tid;             /* a thread that has it, for the message */
	size_t n;
};

static void
chains_release(struct chains *cs)
{
	for (size_t i = 0; i < cs->n; i++)
		chain_release(&cs->c[i]);
	free(cs->c);
	free(cs->tid);
	memset(cs, 0, sizeof(*cs));
}

static int
read_chains(const struct trc_freeze *f, struct chains *cs)
{
	struct chain *cur = xcalloc(1, sizeof(*cur));
	int rc;

	for (size_t i = 0; i < f->n; i++) {
		if (!f->t[i].stopped)
			continue;
		if ((rc = read_chain(f->t[i].tid, cur)) < 0) {
			int saved = errno;

			chain_release(cur);
			free(cur);
			errno = saved;
			return -1;
		}
		bool seen = rc == 1;

		for (size_t j = 0; !seen && j < cs->n; j++)
			seen = same_chain(&cs->c[j], cur);
		if (seen) {
			chain_release(cur);
			continue;
		}
		cs->c = xreallocarray(cs->c, cs->n + 1, sizeof(*cs->c));
		cs->tid = xreallocarray(cs->tid, cs->n + 1, sizeof(*cs->tid));
		cs->c[cs->n] = *cur;
		cs->tid[cs->n++] = f->t[i].tid;
		cur->n = 0;
	}
	free(cur);
	return 0;
}

/* What a refused call would do to the process. */
static const char *
consequence(uint32_t action)
{
	switch (action & 0xffff0000u) {
	case 0x80000000u: return "that call would kill the process";
	case 0x00000000u: return "that call would kill the thread that makes it, and leave the app hung";
	case 0x00030000u: return "that call would send it SIGSYS, which kills it";
	case 0x00050000u: return "that call would fail, and the agent could not work";
	default: return "another process would answer that call, which tracer cannot ask";
	}
}

static int
judge(pid_t pid, const struct chains *cs, enum trc_sandbox_for what, char *why, size_t n)
{
	struct trc_seccomp_refusal r;
	char action[96];

	for (size_t i = 0; i < cs->n; i++) {
		if (trc_seccomp_judge(cs->c[i].f, cs->c[i].n, &r) == 0)
			continue;
		if (r.invalid)
			return trc_permit_say(why, n, "process %d runs under a seccomp filter (thread %d's) that tracer "
				   "cannot run (an instruction it does not know): tracer does not %s, "
				   TRC_PERMIT_INSTEAD, (int)pid, (int)cs->tid[i], needs[what].doing);
		return trc_permit_say(why, n, "process %d runs under a seccomp filter (thread %d's) that answers %s "
			   "(%s) with %s: tracer does not %s: %s", (int)pid, (int)cs->tid[i],
			   r.call, r.purpose, trc_seccomp_action_name(r.action, action, sizeof(action)),
			   needs[what].doing, consequence(r.action));
	}
	return 0;
}

/* Whether this client may read another process's filters: CAP_SYS_ADMIN, and no filter of its own. */
static bool
can_read_filters(void)
{
	return has_cap("/proc/self/status", CAP_SYS_ADMIN_BIT) &&
	       status_number("/proc/self/status", "Seccomp:", 10) == 0;
}

/* What would let this client read a filter, for the refusal. */
static const char *
how_to_read(void)
{
	if (status_number("/proc/self/status", "Seccomp:", 10) > 0)
		return "tracer runs under a seccomp filter itself: run it without one";
	if (geteuid() == 0)
		return "tracer runs as root without CAP_SYS_ADMIN (a container?): give it that capability, or "
		       "run it from the host";
	return "run tracer as root";
}

static int
check_filters(pid_t pid, enum trc_sandbox_for what, long filters, uint64_t *held_ns, bool *denied,
	      char *why, size_t n)
{
	struct chains cs = { 0 };
	struct trc_freeze f;
	int rc, err;

	if (!can_read_filters()) {
		*denied = true;
		return trc_permit_say(why, n, "process %d runs under a seccomp filter (Seccomp_filters: %ld in "
			   "/proc/%d/status), which only root can read (CAP_SYS_ADMIN, tracer itself unfiltered): "
			   "tracer cannot tell whether it would kill the process for a call the agent makes, so it "
			   "does not %s; %s", (int)pid, filters, (int)pid, needs[what].doing, how_to_read());
	}
	if (trc_freeze(&f, pid, FREEZE_MS) < 0) {
		err = errno;
		if (err == ETIMEDOUT)
			return trc_permit_say(why, n, "a thread of process %d did not stop within %d ms, so tracer could "
				   "not read its seccomp filter: try again", (int)pid, FREEZE_MS);
		*denied = trc_permit_explain(pid, err, why, n);
		return -1;
	}
	rc = read_chains(&f, &cs);
	err = errno;
	trc_thaw(&f);
	*held_ns = f.frozen_ns;
	if (rc < 0) {
		chains_release(&cs);
		*denied = err == EACCES || err == EPERM;
		return trc_permit_say(why, n, "cannot read the seccomp filter of process %d (PTRACE_SECCOMP_GET_FILTER: "
			   "%s%s): tracer does not %s", (int)pid, strerror(err),
			   err == EIO ? ", a kernel without CONFIG_CHECKPOINT_RESTORE?" : "", needs[what].doing);
	}
	rc = judge(pid, &cs, what, why, n);
	chains_release(&cs);
	return rc;
}

int
trc_sandbox_check(pid_t pid, enum trc_sandbox_for what, uint64_t *held_ns, bool *denied, char *why, size_t n)
{
	long filters;
	int mode = seccomp_mode(pid, &filters);

	*held_ns = 0;
	*denied = false;
	if (mode == 1)
		return trc_permit_say(why, n, "process %d has a thread in strict seccomp mode (Seccomp: 1 in its "
			   "status: only read, write and exit are allowed): tracer does not %s", (int)pid,
			   needs[what].doing);
	if (check_nproc(pid, what, why, n) < 0 || check_nofile(pid, what, why, n) < 0)
		return -1;
	return mode == 2 ? check_filters(pid, what, filters, held_ns, denied, why, n) : 0;
}

int
trc_sandbox_explain(pid_t pid, char *why, size_t n)
{
	/* Its filter was run on the agent's calls before, and let them through (or it was refused). */
	return check_nproc(pid, TRC_SANDBOX_ATTACH, why, n) < 0 || check_nofile(pid, TRC_SANDBOX_ATTACH, why, n) < 0
	       ? 0 : -1;
}
