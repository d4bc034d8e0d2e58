/* ps.c: finds --ps targets by scanning /proc (owner, command line, the agent in the maps), new ones too. */
#include "ps.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "inject.h"
#include "proc.h"
#include "xmalloc.h"

/* The pid a /proc entry names, or 0 for the other entries. */
static pid_t
entry_pid(const char *name)
{
	char *end;
	long v = strtol(name, &end, 10);

	return name[0] >= '1' && name[0] <= '9' && *end == '\0' && v > 0 && v <= 0x7fffffff
		       ? (pid_t)v : 0;
}

/* The real uid of pid, from /proc/PID/status; false when it cannot be read. */
static bool
real_uid(pid_t pid, uid_t *uid)
{
	char path[64], line[256];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return false;
	/* "Uid:\treal\teffective\tsaved\tfs" */
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "Uid:", 4) == 0) {
			*uid = (uid_t)strtoul(line + 4, NULL, 10);
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

/* The command line with its NULs as spaces (and no trailing one), NUL-terminated in b. */
static int
read_cmdline(pid_t pid, struct trc_buf *b)
{
	char path[64];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	do {
		trc_buf_grow(b, 4096);
		n = fread(b->data + b->len, 1, b->cap - b->len, f);
		b->len += n;
	} while (n > 0);
	fclose(f);
	while (b->len > 0 && b->data[b->len - 1] == '\0')
		b->len--;
	for (size_t i = 0; i < b->len; i++)
		if (b->data[i] == '\0')
			b->data[i] = ' ';
	trc_buf_addc(b, '\0');
	return 0;
}

static bool
cmdline_matches(pid_t pid, const regex_t *re)
{
	struct trc_buf b;
	bool hit;

	trc_buf_init(&b);
	hit = read_cmdline(pid, &b) == 0 && b.len > 1 && regexec(re, b.data, 0, NULL, 0) == 0;
	trc_buf_release(&b);
	return hit;
}

static int
cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

/*
 * Seconds since pid started (/proc/PID/stat's starttime against /proc/uptime), or a large
 * number when either cannot be read.
 */
static double
age(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	double up = 0;
	char *end;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return 1e9;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* After the command's closing parenthesis: state is field 3, starttime field 22. */
	if ((p = strrchr(buf, ')')) == NULL)
		return 1e9;
	for (int field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL)
		return 1e9;
	errno = 0;
	start = strtoull(p + 1, &end, 10);
	if (end == p + 1 || errno != 0)
		return 1e9;
	if ((f = fopen("/proc/uptime", "re")) == NULL)
		return 1e9;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	up = strtod(buf, &end);
	if (end == buf)
		return 1e9;
	return up - (double)start / (double)sysconf(_SC_CLK_TCK);
}

/*
 * From the second scan on, a process without the agent that started less than this long ago
 * may be loading it itself (ruby -rtracer_agent, a worker booting): it is looked at again at
 * the next scan, not loaded into while its VM is still being made. (The first scan takes the
 * processes that ran when the operator asked.)
 */
#define INJECT_MIN_AGE 2.0

/* Whether pid may run Ruby without the agent yet, and be loaded into now (min_age above). */
static bool
injectable(pid_t pid, double min_age)
{
	return trc_inject_enabled() && trc_inject_candidate(pid) && (min_age <= 0 || age(pid) >= min_age);
}

/*
 * Whether --ps takes pid (ps.h says which). Another user's process that could have been
 * loaded into is counted in ps->left_alone instead.
 */
static bool
takes(struct trc_ps *ps, pid_t pid, double min_age)
{
	uid_t uid;
	bool mine;

	if (!real_uid(pid, &uid))
		return false;
	mine = uid == ps->user;
	if (!mine && (ps->only_user || geteuid() != 0))
		return false;
	if (!cmdline_matches(pid, &ps->re))
		return false;
	if (trc_proc_runtime(pid) == TRC_PROC_AGENT)
		return true;
	if (!injectable(pid, min_age))
		return false;
	if (!mine && ps->left_alone++ == 0)
		ps->left_alone_pid = pid;
	return mine;
}

/* Every matching process, ascending. 0 with *pids (the caller frees it), or -1 with errno. */
static int
find(struct trc_ps *ps, double min_age, pid_t **pids, size_t *npids)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t self = getpid(), pid;

	if (d == NULL)
		return -1;
	*pids = NULL;
	*npids = 0;
	ps->left_alone = 0;
	while ((de = readdir(d)) != NULL) {
		pid = entry_pid(de->d_name);
		if (pid == 0 || pid == self || !takes(ps, pid, min_age))
			continue;
		*pids = xreallocarray(*pids, *npids + 1, sizeof(**pids));
		(*pids)[(*npids)++] = pid;
	}
	closedir(d);
	if (*npids > 0)
		qsort(*pids, *npids, sizeof(**pids), cmp_pid);
	return 0;
}

static bool
has_pid(const pid_t *pids, size_t n, pid_t pid)
{
	return n > 0 && bsearch(&pid, pids, n, sizeof(*pids), cmp_pid) != NULL;
}

int
trc_ps_init(struct trc_ps *ps, const char *regex, uid_t user, bool only_user)
{
	ps->user = user;
	ps->only_user = only_user;
	ps->known = NULL;
	ps->nknown = 0;
	ps->scans = 0;
	ps->left_alone = 0;
	ps->left_alone_pid = 0;
	return regcomp(&ps->re, regex, REG_EXTENDED | REG_NOSUB);
}

void
trc_ps_release(struct trc_ps *ps)
{
	regfree(&ps->re);
	free(ps->known);
	ps->known = NULL;
	ps->nknown = 0;
}

/*
 * Known pids that match no more stay known while their process lives (a worker that renamed
 * itself is still the one we attached to); once gone, their pid may come back as a new one.
 */
static void
remember(struct trc_ps *ps, const pid_t *found, size_t nfound)
{
	pid_t *known = xcalloc(ps->nknown + nfound + 1, sizeof(*known));
	size_t n = 0;

	for (size_t i = 0; i < ps->nknown; i++)
		if (!has_pid(found, nfound, ps->known[i]) && trc_proc_check(ps->known[i]) != TRC_PROC_GONE)
			known[n++] = ps->known[i];
	for (size_t i = 0; i < nfound; i++)
		known[n++] = found[i];
	qsort(known, n, sizeof(*known), cmp_pid);
	free(ps->known);
	ps->known = known;
	ps->nknown = n;
}

int
trc_ps_scan(struct trc_ps *ps, pid_t **fresh, size_t *nfresh)
{
	pid_t *found;
	size_t nfound;

	if (find(ps, ps->scans++ > 0 ? INJECT_MIN_AGE : 0, &found, &nfound) < 0)
		return -1;
	*fresh = xcalloc(nfound ? nfound : 1, sizeof(**fresh));
	*nfresh = 0;
	for (size_t i = 0; i < nfound; i++)
		if (!has_pid(ps->known, ps->nknown, found[i]))
			(*fresh)[(*nfresh)++] = found[i];
	remember(ps, found, nfound);
	free(found);
	return 0;
}
