/* agentfile.c: the agent's files: owners and modes up to /, the target's view of them, their libruby. */
#define _GNU_SOURCE     /* O_PATH */
#include "agentfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "permit.h"

/*
 * One file or directory: only root or owner may change it. A sticky directory that anyone may
 * write (/tmp) is fine above a path of root's or owner's: others cannot rename what is in it.
 */
static int
safe_one(const char *path, uid_t owner, pid_t pid, char *why, size_t n)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return trc_permit_say(why, n, "cannot check the agent's %s: %s", path, strerror(errno));
	if (st.st_uid != 0 && st.st_uid != owner)
		return trc_permit_say(why, n, "the agent's %s belongs to uid %u, neither root nor the user of process "
			   "%d, who would run what that uid puts there: chown it, " TRC_PERMIT_INSTEAD,
			   path, (unsigned)st.st_uid, (int)pid);
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)))
		return trc_permit_say(why, n, "the agent's %s is writable by %s, who could make process %d run "
			   "anything: chmod go-w %s, " TRC_PERMIT_INSTEAD, path,
			   st.st_mode & S_IWOTH ? "anyone" : "its group", (int)pid, path);
	return 0;
}

/* path and every directory above it. */
static int
safe_path(const char *path, uid_t owner, pid_t pid, char *why, size_t n)
{
	char buf[PATH_MAX + 64], *slash;

	snprintf(buf, sizeof(buf), "%s", path);
	for (;;) {
		if (safe_one(buf[0] ? buf : "/", owner, pid, why, n) < 0)
			return -1;
		if (buf[0] == '\0' || (slash = strrchr(buf, '/')) == NULL)
			return 0;
		*slash = '\0';
	}
}

/* Every file of lib/tracer_agent/ (the .rb files it requires, the library). */
static int
safe_dir_files(const char *dir, uid_t owner, pid_t pid, char *why, size_t n)
{
	char path[PATH_MAX + 512];
	struct dirent *de;
	DIR *d = opendir(dir);
	int rc = 0;

	if (d == NULL)
		return trc_permit_say(why, n, "cannot list the agent's %s: %s", dir, strerror(errno));
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		rc = safe_one(path, owner, pid, why, n);
	}
	closedir(d);
	return rc;
}

/* The process must see path as this very file: in another mount namespace it may not. */
static int
same_in_target(const char *path, pid_t pid, char *why, size_t n)
{
	char there[PATH_MAX + 64];
	struct stat mine, theirs;

	snprintf(there, sizeof(there), "/proc/%d/root%s", (int)pid, path);
	if (stat(path, &mine) < 0)
		return trc_permit_say(why, n, "cannot stat the agent's %s: %s", path, strerror(errno));
	if (stat(there, &theirs) < 0 || mine.st_dev != theirs.st_dev || mine.st_ino != theirs.st_ino)
		return trc_permit_say(why, n, "process %d does not see the agent's %s (its file system is another: a "
			   "container?): mount the directory there at the same path, read-only, "
			   TRC_PERMIT_INSTEAD, (int)pid, path);
	return 0;
}

/* ---- the process's own view: what it resolves when it loads, not what tracer sees ---- */

static const char *
uid_name(uid_t uid, char *buf, size_t size)
{
	struct passwd pw, *found = NULL;
	char scratch[1024];

	if (getpwuid_r(uid, &pw, scratch, sizeof(scratch), &found) == 0 && found != NULL)
		snprintf(buf, size, "uid %u (%s)", (unsigned)uid, found->pw_name);
	else
		snprintf(buf, size, "uid %u", (unsigned)uid);
	return buf;
}

/* Whether the process's root is another directory than ours (a chroot), for the message. */
static const char *
whose_view(pid_t pid)
{
	struct stat mine, theirs;
	char root[64];

	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	if (stat("/", &mine) == 0 && stat(root, &theirs) == 0 &&
	    (mine.st_dev != theirs.st_dev || mine.st_ino != theirs.st_ino))
		return " (its root is not tracer's: a chroot or a container)";
	return "";
}

/*
 * One step of the process's path, as it resolves it: st is what the step's fd points at, shown
 * is the path up to it. Only root or the process's user may be able to replace what is below
 * it (rename, or a new entry where one was removed).
 */
static int
target_step(const struct stat *st, const char *shown, uid_t owner, pid_t pid, char *why, size_t n)
{
	char who[96];

	if (S_ISLNK(st->st_mode))
		return trc_permit_say(why, n, "process %d would load the agent through %s, which is a symbolic link "
			   "in its view of the file system%s: tracer loads only a path whose every part is a real "
			   "directory or file; point TRACER_AGENT_LIB at the directory itself, "
			   TRC_PERMIT_INSTEAD, (int)pid, shown, whose_view(pid));
	if (st->st_uid != 0 && st->st_uid != owner)
		return trc_permit_say(why, n, "process %d would load the agent through %s, which belongs to %s in its "
			   "view of the file system%s, neither root nor the user of the process: that user could put "
			   "code of their own there (by renaming what is in it) to run as the process's user; "
			   "reach the agent there only through directories of root's (a bind mount at a root-owned "
			   "path), " TRC_PERMIT_INSTEAD, (int)pid, shown, uid_name(st->st_uid, who, sizeof(who)),
			   whose_view(pid));
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX)))
		return trc_permit_say(why, n, "process %d would load the agent through %s, which is writable by %s in "
			   "its view of the file system%s: they could put code of their own there to run as the "
			   "process's user; make it writable by its owner only, " TRC_PERMIT_INSTEAD, (int)pid,
			   shown, st->st_mode & S_IWOTH ? "anyone" : "its group", whose_view(pid));
	return 0;
}

/*
 * Opens path as the process resolves it: from its root (/proc/PID/root: its chroot, its mount
 * namespace), a component at a time with O_NOFOLLOW, each checked by what was opened, so that
 * what is checked is what is walked. Returns an O_PATH descriptor of path, or -1 with why set.
 */
static int
open_in_target(const char *path, pid_t pid, uid_t owner, char *why, size_t n)
{
	char root[64], shown[PATH_MAX + 64], part[NAME_MAX + 1];
	const char *p = path, *end;
	struct stat st;
	int fd, next;

	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	snprintf(shown, sizeof(shown), "/");
	if ((fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return trc_permit_say(why, n, "cannot open the root of process %d (%s): %s", (int)pid, root,
				      strerror(errno));
	for (;;) {
		if (fstat(fd, &st) < 0) {
			trc_permit_say(why, n, "cannot check %s in process %d: %s", shown, (int)pid, strerror(errno));
			close(fd);
			return -1;
		}
		if (target_step(&st, shown, owner, pid, why, n) < 0) {
			close(fd);
			return -1;
		}
		p += strspn(p, "/");
		if (*p == '\0')
			return fd;
		end = p + strcspn(p, "/");
		if ((size_t)(end - p) >= sizeof(part)) {
			close(fd);
			return trc_permit_say(why, n, "the agent's path %s has a part too long", path);
		}
		memcpy(part, p, (size_t)(end - p));
		part[end - p] = '\0';
		snprintf(shown + strlen(shown), sizeof(shown) - strlen(shown), "%s%s", strcmp(shown, "/") ? "/" : "", part);
		next = openat(fd, part, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (next < 0)
			return trc_permit_say(why, n, "process %d does not see the agent's %s (its file system is another: "
				   "a container?): mount the directory there at the same path, read-only, "
				   TRC_PERMIT_INSTEAD, (int)pid, path);
		fd = next;
		p = end;
	}
}

/* Each entry of the directory fd (an O_PATH descriptor of dir, already checked). */
static int
target_entries(int fd, const char *dir, pid_t pid, uid_t owner, char *why, size_t n)
{
	char shown[PATH_MAX + 2 * NAME_MAX + 64];
	struct dirent *de;
	struct stat st;
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	DIR *d;

	if (dfd < 0 || (d = fdopendir(dfd)) == NULL) {
		if (dfd >= 0)
			close(dfd);
		return trc_permit_say(why, n, "cannot list the agent's %s in process %d: %s", dir, (int)pid,
				      strerror(errno));
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(shown, sizeof(shown), "%s/%s", dir, de->d_name);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			rc = trc_permit_say(why, n, "cannot check the agent's %s in process %d: %s", shown, (int)pid,
					    strerror(errno));
		else
			rc = target_step(&st, shown, owner, pid, why, n);
	}
	closedir(d);
	return rc;
}

/*
 * What the process will open, as it will open it: tracer_inject.so (dlopen), tracer_agent.rb
 * beside it (require) and every file of lib/tracer_agent/ (require_relative, the library),
 * each reached through directories only root or the process's user can change. Then nobody
 * else can swap any of them between this check and the load (the rename of a
 * directory above a bind mount); root and that user could, but they can run what they like
 * as that user anyway. The files the agent requires later by name (objspace, ripper) come
 * through the app's own $LOAD_PATH, which its own requires trust already.
 */
static int
safe_in_target(const struct trc_agentfile *a, const char *sub, pid_t pid, uid_t owner, char *why, size_t n)
{
	int fd;

	if ((fd = open_in_target(a->rb, pid, owner, why, n)) < 0)
		return -1;
	close(fd);
	if ((fd = open_in_target(a->loader, pid, owner, why, n)) < 0)
		return -1;
	close(fd);
	if ((fd = open_in_target(sub, pid, owner, why, n)) < 0)
		return -1;
	if (target_entries(fd, sub, pid, owner, why, n) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* The libruby the library needs ("" for none: built by a static Ruby), into buf. */
static int
needed_libruby(const char *so, uint16_t *machine, char *buf, size_t size, char *why, size_t n)
{
	struct trc_elf_file f;
	struct trc_elf e;
	char name[128];

	buf[0] = '\0';
	if (trc_elf_file_open(&f, so) < 0)
		return trc_permit_say(why, n, "cannot read the agent's %s: %s", so, strerror(errno));
	if (trc_elf_open(&e, &f.mem, trc_elf_file_header(&f)) < 0) {
		trc_elf_file_release(&f);
		return trc_permit_say(why, n, "the agent's %s is no ELF library tracer can read", so);
	}
	*machine = e.machine;
	for (size_t i = 0; i < e.nneeded; i++)
		if (trc_elf_string(&e, e.needed[i], name, sizeof(name)) == 0 && strncmp(name, "libruby", 7) == 0)
			snprintf(buf, size, "%s", name);
	trc_elf_file_release(&f);
	return 0;
}

/* What lib/tracer_agent/built_for says (a static Ruby's version), or "". */
static void
built_for(const char *dir, char *buf, size_t size)
{
	char path[PATH_MAX + 64];
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s/%s", dir, TRC_AGENTFILE_BUILT_FOR);
	if ((f = fopen(path, "re")) == NULL)
		return;
	if (fgets(buf, (int)size, f) == NULL)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/* "3.3.8" and "3.3.0" are of one series. */
static bool
same_series(const char *a, const char *b)
{
	const char *da = strchr(a, '.'), *db = strchr(b, '.');

	if (da == NULL || db == NULL)
		return false;
	da = strchr(da + 1, '.');
	db = strchr(db + 1, '.');
	return da != NULL && db != NULL && da - a == db - b && strncmp(a, b, (size_t)(da - a)) == 0;
}

static int
built_for_ruby(const char *dir, const char *so, const struct trc_rubyproc *r, char *why, size_t n)
{
	char lib[128], version[64];
	uint16_t machine = 0;

	if (needed_libruby(so, &machine, lib, sizeof(lib), why, n) < 0)
		return -1;
	if (machine != r->elf.machine)
		return trc_permit_say(why, n, "the agent's %s is built for another architecture than process %d",
			   so, (int)r->pid);
	if (!r->is_static && strcmp(lib, r->soname) != 0)
		return trc_permit_say(why, n, "the agent's %s was built for %s, and process %d runs Ruby %s (%s): build "
			   "the agent with that Ruby (make agent RUBY=...) and set TRACER_AGENT_LIB to its "
			   "lib, " TRC_PERMIT_INSTEAD, so, lib[0] ? lib : "a static Ruby", (int)r->pid,
			   r->version, r->soname);
	if (r->is_static) {
		built_for(dir, version, sizeof(version));
		if (lib[0] != '\0' || !same_series(version, r->version))
			return trc_permit_say(why, n, "process %d runs a static Ruby %s, and the agent's %s was built for "
				   "%s: build the agent with that Ruby (make agent RUBY=...) and set "
				   "TRACER_AGENT_LIB to its lib, " TRC_PERMIT_INSTEAD, (int)r->pid, r->version,
				   so, lib[0] ? lib : version[0] ? version : "a Ruby tracer cannot tell");
	}
	return 0;
}

int
trc_agentfile_missing(const char *lib, bool loader, char *why, size_t n)
{
	static const struct {
		const char *file, *fix;
	} parts[] = {
		{ "tracer_agent.rb", "set TRACER_AGENT_LIB to the lib/ of a tracer checkout, or to make install's "
		  "PREFIX/lib/tracer" },
		{ "tracer_agent/tracer_agent.so", "build it (make agent in the checkout), or make install" },
		{ "tracer_agent/tracer_inject.so", "build it (make agent in the checkout), or make install; "
		  "a gem older than this tracer has none" },
	};
	char path[PATH_MAX + 64];

	for (size_t i = 0; i < (loader ? 3 : 2); i++) {
		snprintf(path, sizeof(path), "%s/%s", lib, parts[i].file);
		if (access(path, R_OK) < 0)
			return trc_permit_say(why, n, "cannot read the agent's %s (%s): %s", path, strerror(errno),
					      parts[i].fix);
	}
	return 0;
}

int
trc_agentfile_check(struct trc_agentfile *a, const char *lib, const struct trc_rubyproc *r,
		    uid_t owner, char *why, size_t n)
{
	char dir[PATH_MAX], sub[PATH_MAX + 16];

	if (lib == NULL)
		return trc_permit_say(why, n, "found no agent to load into process %d: tracer looks in $TRACER_AGENT_LIB, "
			   "then in lib/ beside the directory of its binary (a checkout's client/tracer), then in "
			   "PREFIX/lib/tracer (make install's PREFIX/bin/tracer); make install puts it there, "
			   TRC_PERMIT_INSTEAD, (int)r->pid);
	if (trc_agentfile_missing(lib, true, why, n) < 0) {
		snprintf(why + strlen(why), n - strlen(why), ", " TRC_PERMIT_INSTEAD);
		return -1;
	}
	if (realpath(lib, dir) == NULL)
		return trc_permit_say(why, n, "cannot resolve the agent's %s: %s", lib, strerror(errno));
	snprintf(a->rb, sizeof(a->rb), "%s/tracer_agent.rb", dir);
	snprintf(a->so, sizeof(a->so), "%s/tracer_agent/tracer_agent.so", dir);
	snprintf(a->loader, sizeof(a->loader), "%s/tracer_agent/tracer_inject.so", dir);
	snprintf(sub, sizeof(sub), "%s/tracer_agent", dir);
	if (safe_path(a->rb, owner, r->pid, why, n) < 0 || safe_path(a->so, owner, r->pid, why, n) < 0 ||
	    safe_path(a->loader, owner, r->pid, why, n) < 0 || safe_dir_files(sub, owner, r->pid, why, n) < 0)
		return -1;
	if (same_in_target(a->rb, r->pid, why, n) < 0 || same_in_target(a->so, r->pid, why, n) < 0 ||
	    same_in_target(a->loader, r->pid, why, n) < 0 || safe_in_target(a, sub, r->pid, owner, why, n) < 0)
		return -1;
	return built_for_ruby(dir, a->so, r, why, n);
}
