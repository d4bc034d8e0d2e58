/* permit.c: ptrace access as the kernel decides it: owners, dumpability, Yama, capabilities, seccomp. */
#include "permit.h"

#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc.h"

#define CAP_SYS_PTRACE_BIT 19

int
trc_permit_say(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return -1;
}

/* The text after "key" in /proc/PID/status (pid 0: self), into buf. 0, or -1 when absent. */
static int
status_field(pid_t pid, const char *key, char *buf, size_t size)
{
	char path[64], line[512];
	size_t n = strlen(key);
	int rc = -1;
	FILE *f;

	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/status");
	else
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (rc < 0 && fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, key, n) != 0)
			continue;
		snprintf(buf, size, "%s", line + n + strspn(line + n, " \t"));
		buf[strcspn(buf, "\n")] = '\0';
		rc = 0;
	}
	fclose(f);
	return rc;
}

/* The four ids of a "Uid:" or "Gid:" line: real, effective, saved, filesystem. */
static int
ids(pid_t pid, const char *key, unsigned long v[4])
{
	char buf[128], *p = buf, *end;

	if (status_field(pid, key, buf, sizeof(buf)) < 0)
		return -1;
	for (int i = 0; i < 4; i++, p = end) {
		v[i] = strtoul(p, &end, 10);
		if (end == p)
			return -1;
	}
	return 0;
}

static bool
has_cap_sys_ptrace(void)
{
	char buf[64];

	return status_field(0, "CapEff:", buf, sizeof(buf)) == 0 &&
	       (strtoull(buf, NULL, 16) >> CAP_SYS_PTRACE_BIT & 1) != 0;
}

/* Yama's kernel.yama.ptrace_scope, or 0 when there is no Yama. */
static int
yama_scope(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	int v = 0;

	if (f == NULL)
		return 0;
	if (fscanf(f, "%d", &v) != 1)   /* NOLINT(cert-err34-c): the kernel writes one digit */
		v = 0;
	fclose(f);
	return v;
}

static const char *
user_name(unsigned long uid, char *buf, size_t size)
{
	struct passwd pw, *found = NULL;
	char scratch[1024];

	if (getpwuid_r((uid_t)uid, &pw, scratch, sizeof(scratch), &found) == 0 && found != NULL)
		snprintf(buf, size, "%s (uid %lu)", found->pw_name, uid);
	else
		snprintf(buf, size, "uid %lu", uid);
	return buf;
}

/* Without CAP_SYS_PTRACE, the kernel's rule: the caller's real ids are all of the target's. */
static int
check_owner(pid_t pid, char *why, size_t n)
{
	unsigned long u[4], g[4];
	char name[64];
	struct stat st;
	char path[64];

	if (ids(pid, "Uid:", u) < 0 || ids(pid, "Gid:", g) < 0)
		return trc_permit_say(why, n, "cannot read the owner of process %d", (int)pid);
	if (u[0] != getuid() || u[1] != getuid() || u[2] != getuid()) {
		if (geteuid() == 0)
			return trc_permit_say(why, n, "process %d belongs to %s and tracer runs as root without "
				   "CAP_SYS_PTRACE (a container?): give tracer that capability "
				   "(docker run --cap-add SYS_PTRACE), " TRC_PERMIT_INSTEAD, (int)pid,
				   user_name(u[1], name, sizeof(name)));
		return trc_permit_say(why, n, "process %d belongs to %s: only that user or root may load the agent "
			   "into it: run tracer as either, " TRC_PERMIT_INSTEAD, (int)pid,
			   user_name(u[1], name, sizeof(name)));
	}
	if (g[0] != getgid() || g[1] != getgid() || g[2] != getgid())
		return trc_permit_say(why, n, "process %d runs with another group than tracer (it changed groups): "
			   "only root may load the agent into it, " TRC_PERMIT_INSTEAD, (int)pid);
	/* A process that is not dumpable has the files of its /proc directory owned by root. */
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (stat(path, &st) == 0 && st.st_uid == 0 && u[1] != 0)
		return trc_permit_say(why, n, "process %d is not dumpable (it changed its user, or called "
			   "prctl(PR_SET_DUMPABLE, 0)): only root may load the agent into it, "
			   TRC_PERMIT_INSTEAD, (int)pid);
	return 0;
}

int
trc_permit_check(pid_t pid, char *why, size_t n)
{
	int scope = yama_scope();

	if (scope >= 3)
		return trc_permit_say(why, n, "kernel.yama.ptrace_scope is 3: no process may ptrace another, root "
			   "included, so tracer cannot load the agent into process %d; "
			   TRC_PERMIT_INSTEAD, (int)pid);
	if (has_cap_sys_ptrace())
		return 0;
	if (check_owner(pid, why, n) < 0)
		return -1;
	if (scope == 2)
		return trc_permit_say(why, n, "kernel.yama.ptrace_scope is 2: only root (CAP_SYS_PTRACE) may ptrace, "
			   "so load the agent into process %d as root, " TRC_PERMIT_INSTEAD, (int)pid);
	if (scope == 1 && !trc_proc_descends(pid, getpid()))
		return trc_permit_say(why, n, "kernel.yama.ptrace_scope is 1: a user may ptrace only processes "
			   "they started from it; run tracer as root, or set "
			   "kernel.yama.ptrace_scope=0, " TRC_PERMIT_INSTEAD);
	return 0;
}

pid_t
trc_permit_tracer(pid_t pid)
{
	char buf[32];

	if (status_field(pid, "TracerPid:", buf, sizeof(buf)) < 0)
		return -1;
	return (pid_t)strtol(buf, NULL, 10);
}

static const char *
comm(pid_t pid, char *buf, size_t size)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	buf[0] = '\0';
	if ((f = fopen(path, "re")) != NULL) {
		if (fgets(buf, (int)size, f) == NULL)
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
	return buf[0] ? buf : "?";
}

bool
trc_permit_held_by_tracer(pid_t pid)
{
	char name[64];
	pid_t tracer = trc_permit_tracer(pid);

	return tracer > 0 && tracer != getpid() && strcmp(comm(tracer, name, sizeof(name)), "tracer") == 0;
}

bool
trc_permit_explain(pid_t pid, int err, char *why, size_t n)
{
	char name[64], mode[16];
	pid_t tracer = trc_permit_tracer(pid);

	if (tracer > 0 && tracer != getpid()) {
		trc_permit_say(why, n, "process %d is ptraced by process %d (%s): tracer cannot stop it to load the "
		    "agent while that holds it; detach it first, " TRC_PERMIT_INSTEAD, (int)pid,
		    (int)tracer, comm(tracer, name, sizeof(name)));
		return false;
	}
	if (err == ESRCH) {
		trc_permit_say(why, n, "process %d exited before tracer could load the agent", (int)pid);
		return false;
	}
	if (err != EPERM && err != EACCES && err != ENOSYS) {
		trc_permit_say(why, n, "cannot ptrace process %d: %s; " TRC_PERMIT_INSTEAD, (int)pid, strerror(err));
		return false;
	}
	if (status_field(0, "Seccomp:", mode, sizeof(mode)) == 0 && strcmp(mode, "0") != 0)
		trc_permit_say(why, n, "a seccomp filter on tracer (Seccomp: %s in /proc/self/status: a container's "
		    "default profile?) forbids ptrace: run tracer without it (docker: --cap-add "
		    "SYS_PTRACE, or --security-opt seccomp=unconfined), " TRC_PERMIT_INSTEAD, mode);
	else if (trc_permit_check(pid, why, n) == 0)
		trc_permit_say(why, n, "the kernel does not let tracer ptrace process %d (%s): a security module "
		    "(AppArmor, SELinux) may forbid it; " TRC_PERMIT_INSTEAD, (int)pid, strerror(err));
	return true;
}
