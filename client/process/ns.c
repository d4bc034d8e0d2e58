/* ns.c: a target's namespaces from /proc/PID/ns: which differ from ours, setns in and out. */
#define _GNU_SOURCE     /* setns, CLONE_NEW* */
#include "ns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
	const char *file;       /* in /proc/PID/ns */
	int type;               /* for setns */
	const char *label;
} kinds[TRC_NS_KINDS] = {
	[TRC_NS_NET] = { "net", CLONE_NEWNET, "network" },
	[TRC_NS_IPC] = { "ipc", CLONE_NEWIPC, "IPC" },
};

static int
open_ns(pid_t pid, const char *file)
{
	char path[64];

	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/ns/%s", file);
	else
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, file);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* A namespace is its nsfs inode: the same device and inode number, the same namespace. */
static bool
same_file(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Keeps the target's namespace of kind open if it is not ours. */
static int
open_kind(struct trc_ns *ns, pid_t pid, enum trc_ns_kind kind)
{
	int theirs = open_ns(pid, kinds[kind].file), ours;

	/* EACCES/EPERM: not ours to look at (another user's process): as before namespaces. */
	if (theirs < 0)
		return errno == EACCES || errno == EPERM ? 0 : -1;
	if ((ours = open_ns(0, kinds[kind].file)) < 0 || same_file(theirs, ours)) {
		int saved = errno;

		close(theirs);
		if (ours >= 0)
			close(ours);
		errno = saved;
		return ours < 0 ? -1 : 0;
	}
	ns->target[kind] = theirs;
	ns->home[kind] = ours;
	return 0;
}

void
trc_ns_init(struct trc_ns *ns)
{
	for (int k = 0; k < TRC_NS_KINDS; k++)
		ns->target[k] = ns->home[k] = -1;
}

int
trc_ns_open(struct trc_ns *ns, pid_t pid)
{
	trc_ns_init(ns);
	for (int k = 0; k < TRC_NS_KINDS; k++) {
		if (open_kind(ns, pid, (enum trc_ns_kind)k) < 0) {
			int saved = errno;

			trc_ns_close(ns);
			errno = saved;
			return -1;
		}
	}
	return 0;
}

int
trc_ns_enter(struct trc_ns *ns, enum trc_ns_kind kind)
{
	if (ns->target[kind] < 0)
		return 0;
	return setns(ns->target[kind], kinds[kind].type);
}

int
trc_ns_leave(struct trc_ns *ns, enum trc_ns_kind kind)
{
	if (ns->home[kind] < 0)
		return 0;
	return setns(ns->home[kind], kinds[kind].type);
}

void
trc_ns_close(struct trc_ns *ns)
{
	for (int k = 0; k < TRC_NS_KINDS; k++) {
		if (ns->target[k] >= 0)
			close(ns->target[k]);
		if (ns->home[k] >= 0)
			close(ns->home[k]);
	}
	trc_ns_init(ns);
}

const char *
trc_ns_label(enum trc_ns_kind kind)
{
	return kinds[kind].label;
}

/*
 * Whether a uid_map line "inside outside count" maps uid. Read by a process of another user
 * namespace, "outside" is in the reader's own namespace (user_namespaces(7)): ours.
 */
static bool
line_maps(const char *line, uid_t uid)
{
	unsigned long inside, outside, count;

	/* The kernel writes three decimal numbers that fit: sscanf cannot overflow here. */
	if (sscanf(line, "%lu %lu %lu", &inside, &outside, &count) != 3)  /* NOLINT(cert-err34-c) */
		return false;
	return uid >= outside && uid - outside < count;
}

int
trc_ns_uid_mapped(pid_t pid, uid_t uid)
{
	char path[64], line[128];
	int theirs = open_ns(pid, "user"), ours = open_ns(0, "user");
	bool same = theirs >= 0 && ours >= 0 && same_file(theirs, ours);
	int mapped = 0;
	FILE *f;

	if (theirs >= 0)
		close(theirs);
	if (ours >= 0)
		close(ours);
	if (same)
		return 1;
	if (theirs < 0 || ours < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (!mapped && fgets(line, sizeof(line), f) != NULL)
		mapped = line_maps(line, uid);
	fclose(f);
	return mapped;
}
