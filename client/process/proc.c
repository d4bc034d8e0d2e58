/* proc.c: process liveness and ownership from kill() and /proc. */
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xmalloc.h"

/* A zombie has exited: it will never answer, so it counts as gone. */
static bool
is_zombie(pid_t pid)
{
	char path[64], buf[512], *paren;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return errno == ENOENT;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may itself hold parentheses, so take the last one. */
	paren = strrchr(buf, ')');
	return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* Reads the second (effective) id of the "Uid:" or "Gid:" line. */
static int
status_id(const char *line, const char *key, unsigned *id)
{
	unsigned real;

	if (strncmp(line, key, strlen(key)) != 0)
		return 0;
	/* The kernel writes these: decimal ids that fit an unsigned, so sscanf cannot overflow. */
	return sscanf(line + strlen(key), "%u %u", &real, id) == 2;  /* NOLINT(cert-err34-c) */
}

int
trc_proc_owner(pid_t pid, uid_t *uid, gid_t *gid)
{
	char path[64], line[256];
	unsigned u = 0, g = 0;
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		found += status_id(line, "Uid:", &u);
		found += status_id(line, "Gid:", &g);
	}
	fclose(f);
	if (found != 2) {
		errno = ENOENT;
		return -1;
	}
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

/*
 * "NSpid:\t4242\t7\t1\n": pid in the pid namespace of this /proc, then in each nested one
 * down to the process's own. The kernel writes decimal pids: strtol cannot overflow them.
 */
static int
parse_nspid(const char *line, pid_t *inner, int *levels)
{
	const char *p = line + strlen("NSpid:");
	char *end;
	long v;

	*levels = 0;
	for (;;) {
		v = strtol(p, &end, 10);
		if (end == p)
			break;
		*inner = (pid_t)v;
		++*levels;
		p = end;
	}
	return *levels > 0 ? 0 : -1;
}

int
trc_proc_nspid(pid_t pid, pid_t *inner, int *levels)
{
	char path[64], line[256];
	int rc = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (rc < 0 && fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "NSpid:", strlen("NSpid:")) == 0)
			rc = parse_nspid(line, inner, levels);
	fclose(f);
	/* No NSpid line (a kernel before 4.1): no pid namespaces to tell apart. */
	if (rc < 0) {
		*inner = pid;
		*levels = 1;
	}
	return 0;
}

enum trc_proc_status
trc_proc_check(pid_t pid)
{
	uid_t uid;
	gid_t gid;

	if (pid <= 0)
		return TRC_PROC_GONE;
	if (kill(pid, 0) < 0)
		return errno == EPERM ? TRC_PROC_DENIED : TRC_PROC_GONE;
	if (is_zombie(pid))
		return TRC_PROC_GONE;
	if (geteuid() != 0 && trc_proc_owner(pid, &uid, &gid) == 0 && uid != geteuid())
		return TRC_PROC_DENIED;
	return TRC_PROC_ALIVE;
}

/* The parent of pid, from "pid (comm) S ppid ..."; -1 when pid is gone. */
static pid_t
parent_of(pid_t pid)
{
	char path[64], buf[512], *paren;
	FILE *f;
	size_t n;
	int ppid;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* comm may hold parentheses and spaces: the state and ppid follow the last ')'. */
	paren = strrchr(buf, ')');
	if (paren == NULL || sscanf(paren + 1, " %*c %d", &ppid) != 1)  /* NOLINT(cert-err34-c) */
		return -1;
	return (pid_t)ppid;
}

bool
trc_proc_descends(pid_t pid, pid_t ancestor)
{
	/* The depth bound is for a /proc that changes under us; real trees are far shallower. */
	for (int depth = 0; depth < 256 && pid > 1; depth++) {
		pid = parent_of(pid);
		if (pid == ancestor)
			return true;
	}
	return false;
}

/* A mapping's file (the text after the last '/', up to the line's end) names Ruby's code. */
static bool
is_ruby_file(const char *line)
{
	const char *base = strrchr(line, '/');

	if (base == NULL)
		return false;
	base++;
	return strncmp(base, "libruby", 7) == 0 || strncmp(base, "ruby", 4) == 0;
}

enum trc_proc_runtime
trc_proc_runtime(pid_t pid)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	enum trc_proc_runtime found = TRC_PROC_OTHER;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return TRC_PROC_UNSEEN;
	while (found != TRC_PROC_AGENT && getline(&line, &cap, f) > 0) {
		if (strstr(line, TRC_PROC_AGENT_FILE) != NULL)
			found = TRC_PROC_AGENT;
		else if (is_ruby_file(line))
			found = TRC_PROC_RUBY;
	}
	/* An empty read: a kernel thread, or a process that exited meanwhile. */
	if (ferror(f) || (line == NULL && found == TRC_PROC_OTHER))
		found = TRC_PROC_UNSEEN;
	free(line);
	fclose(f);
	return found;
}

/* A /proc entry's name as a pid, or 0 when it is none. */
static pid_t
entry_pid(const char *name)
{
	char *end;
	long v = strtol(name, &end, 10);

	return *name >= '1' && *name <= '9' && *end == '\0' && v <= INT_MAX ? (pid_t)v : 0;
}

pid_t
trc_proc_child(pid_t parent, pid_t inner)
{
	DIR *dir = opendir("/proc");
	struct dirent *d;
	pid_t found = 0;

	if (dir == NULL)
		return 0;
	while (found == 0 && (d = readdir(dir)) != NULL) {
		pid_t pid = entry_pid(d->d_name), self;
		int levels;

		if (pid > 0 && parent_of(pid) == parent && trc_proc_nspid(pid, &self, &levels) == 0 &&
		    self == inner)
			found = pid;
	}
	closedir(dir);
	return found;
}

char *
trc_proc_self_path(const char *rel)
{
	char exe[PATH_MAX], path[PATH_MAX], *slash, *joined;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe));

	if (n <= 0 || (size_t)n >= sizeof(exe))
		return NULL;
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')) == NULL)
		return NULL;
	*slash = '\0';
	joined = xasprintf("%s%s", exe, rel);
	n = realpath(joined, path) == NULL ? -1 : 0;
	free(joined);
	return n < 0 ? NULL : xstrdup(path);
}
