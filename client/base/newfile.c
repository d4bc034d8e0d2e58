/* newfile.c: a temporary name beside the target name, renamed (or given a free name) when complete. */
#define _GNU_SOURCE     /* mkostemps, renameat2 */
#include "newfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "xmalloc.h"

#define TMP_SUFFIX ".tmp"
#define FREE_NAMES 100          /* PATH-1 ... PATH-99 for a chosen name that is taken */

int
trc_newfile_open(struct trc_newfile *f, const char *path, mode_t mode, bool replace)
{
	mode_t mask = umask(0);

	umask(mask);
	f->path = xstrdup(path);
	f->replace = replace;
	f->tmp = xasprintf("%s.XXXXXX" TMP_SUFFIX, path);
	/* mkostemps: O_CREAT | O_EXCL, mode 0600, a name nobody else has. */
	f->fd = mkostemps(f->tmp, (int)strlen(TMP_SUFFIX), O_CLOEXEC);
	if (f->fd < 0 || fchmod(f->fd, mode & ~mask) < 0) {
		int saved = errno;

		if (f->fd >= 0) {
			close(f->fd);
			unlink(f->tmp);
		}
		f->fd = -1;
		free(f->tmp);
		f->tmp = NULL;
		errno = saved;
		return -1;
	}
	return 0;
}

int
trc_newfile_check(const struct trc_newfile *f)
{
	struct statvfs vfs;

	if (fsync(f->fd) < 0)
		return -1;
	if (fstatvfs(f->fd, &vfs) == 0 && vfs.f_bavail == 0) {
		errno = ENOSPC;
		return -1;
	}
	return 0;
}

/* name, or name with "-n" before its ".json" (or at its end): the caller frees it. */
static char *
numbered(const char *name, int n)
{
	size_t len = strlen(name);
	size_t stem = len > 5 && strcmp(name + len - 5, ".json") == 0 ? len - 5 : len;

	return xasprintf("%.*s-%d%s", (int)stem, name, n, name + stem);
}

/*
 * Renames tmp to path without replacing anything (renameat2's RENAME_NOREPLACE; a file system
 * without it: link, which never replaces either, then unlink).
 */
static int
rename_new(const char *tmp, const char *path)
{
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (link(tmp, path) < 0)
		return -1;
	unlink(tmp);
	return 0;
}

/* A name of tracer's choosing: the first free one of PATH, PATH-1... */
static int
commit_chosen(struct trc_newfile *f)
{
	char *name = xstrdup(f->path);

	for (int n = 1; rename_new(f->tmp, name) < 0; n++) {
		if (errno != EEXIST || n == FREE_NAMES) {
			int saved = errno;

			free(name);
			errno = saved;
			return -1;
		}
		free(name);
		name = numbered(f->path, n);
	}
	free(f->path);
	f->path = name;
	return 0;
}

int
trc_newfile_commit(struct trc_newfile *f)
{
	int rc = close(f->fd);

	f->fd = -1;
	if (rc < 0)
		return -1;
	rc = f->replace ? rename(f->tmp, f->path) : commit_chosen(f);
	if (rc < 0)
		return -1;
	free(f->tmp);
	f->tmp = NULL;
	return 0;
}

void
trc_newfile_release(struct trc_newfile *f)
{
	if (f->path == NULL)    /* never opened (zeroed), or released already */
		return;
	if (f->fd >= 0)
		close(f->fd);
	/* Still under its temporary name: made here, never completed. */
	if (f->tmp != NULL)
		unlink(f->tmp);
	f->fd = -1;
	free(f->tmp);
	free(f->path);
	f->tmp = f->path = NULL;
}
