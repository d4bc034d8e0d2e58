/* outfile.c: what is at -o FILE decides how the trace goes there: in place, by a rename at the end, or not at all. */
#include "outfile.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "xmalloc.h"

#define MODE 0666               /* less the umask, as a shell's > makes it */

static int __attribute__((format(printf, 3, 4)))
refuse(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -1;
}

static bool
trusted_owner(const struct stat *st)
{
	return st->st_uid == geteuid() || st->st_uid == 0;
}

/*
 * Whether the rename at the end may replace what is at path, which st describes: in a sticky
 * directory (/tmp) only root, the owner of the file or of the directory may, and a trace that
 * could not take its name at the end is better refused now.
 */
static bool
replaceable(const char *path, const struct stat *st)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash == NULL ? xstrdup(".") :
		    xstrndup(path, slash == path ? 1 : (size_t)(slash - path));
	struct stat ds;
	bool ok;

	ok = geteuid() == 0 || st->st_uid == geteuid() || stat(dir, &ds) < 0 ||
	     !(ds.st_mode & S_ISVTX) || ds.st_uid == geteuid();
	free(dir);
	return ok;
}

/* A new file under a name of its own, renamed over path at the end. */
static int
open_new(struct trc_outfile *f, const char *path, char *why, size_t whylen)
{
	if (trc_newfile_open(&f->nf, path, MODE, true) < 0)
		return refuse(why, whylen, "cannot create a file beside '%s': %s", path,
			      strerror(errno));
	return f->fd = f->nf.fd;
}

/* path as it is, not following a symbolic link that replaced what lstat saw. */
static int
open_as_is(struct trc_outfile *f, const char *path, int flags, char *why, size_t whylen)
{
	f->fd = open(path, O_WRONLY | O_CLOEXEC | flags, MODE);
	if (f->fd < 0)
		return refuse(why, whylen, "cannot open '%s': %s", path, strerror(errno));
	return f->fd;
}

/*
 * path as it is (one's own file, or what one's own link names): written in place, as a shell's
 * > does, so a reader can follow it as it grows. A file that turns out not to be one's own
 * once open (it was swapped since lstat) is refused.
 */
static int
open_own(struct trc_outfile *f, const char *path, int flags, char *why, size_t whylen)
{
	struct stat st;

	if (open_as_is(f, path, flags, why, whylen) < 0)
		return -1;
	if (fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid != geteuid()) {
		close(f->fd);
		f->fd = -1;
		return refuse(why, whylen, "'%s' belongs to another user: not written to", path);
	}
	return f->fd;
}

/*
 * Another user's regular file or symbolic link, which may be a trap (a link to a file of root's,
 * a file its owner reads along): replaced at the end, never written through; never appended to.
 */
static int
open_replacing(struct trc_outfile *f, const char *path, const struct stat *st, bool append,
	       char *why, size_t whylen)
{
	const char *what = S_ISLNK(st->st_mode) ? "a symbolic link that belongs" : "a file that belongs";

	if (append)
		return refuse(why, whylen, "'%s' is %s to another user: not appended to", path, what);
	if (!replaceable(path, st))
		return refuse(why, whylen, "'%s' is %s to another user, in a sticky directory: "
			      "tracer may not replace it", path, what);
	return open_new(f, path, why, whylen);
}

/* What lstat found at path decides (outfile.h). */
static int
open_existing(struct trc_outfile *f, const char *path, const struct stat *st, bool append,
	      bool whole, char *why, size_t whylen)
{
	int keep = append ? O_APPEND : O_TRUNC;

	if (S_ISDIR(st->st_mode))
		return refuse(why, whylen, "'%s' is a directory", path);
	if (S_ISREG(st->st_mode) && st->st_uid == geteuid() && whole)
		return open_new(f, path, why, whylen);
	if (S_ISREG(st->st_mode) && st->st_uid == geteuid())
		return open_own(f, path, keep | O_NOFOLLOW, why, whylen);
	if (S_ISREG(st->st_mode) || (S_ISLNK(st->st_mode) && !trusted_owner(st)))
		return open_replacing(f, path, st, append, why, whylen);
	/* One's own link (a "latest" name, /dev/stdout): through it, as a shell's > would. */
	if (S_ISLNK(st->st_mode))
		return open_own(f, path, O_CREAT | keep, why, whylen);
	if (!trusted_owner(st))
		return refuse(why, whylen, "'%s' is a special file that belongs to another user: "
			      "not written to", path);
	return open_as_is(f, path, O_NOFOLLOW | (append ? O_APPEND : 0), why, whylen);
}

int
trc_outfile_open(struct trc_outfile *f, const char *path, bool append, bool whole, char *why,
		 size_t whylen)
{
	struct stat st;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->nf.fd = -1;
	/* Nothing there: made here, exclusively; something planted meanwhile is looked at again. */
	for (int tries = 0; tries < 3; tries++) {
		if (lstat(path, &st) == 0)
			return open_existing(f, path, &st, append, whole, why, whylen);
		if (errno != ENOENT)
			break;
		if (whole)
			return open_new(f, path, why, whylen);
		f->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, MODE);
		if (f->fd >= 0 || errno != EEXIST)
			break;
	}
	if (f->fd < 0)
		return refuse(why, whylen, "cannot open '%s': %s", path, strerror(errno));
	return f->fd;
}

int
trc_outfile_commit(struct trc_outfile *f, char *why, size_t whylen)
{
	int rc;

	if (f->nf.path == NULL) {
		rc = f->fd >= 0 ? close(f->fd) : 0;
		f->fd = -1;
		return rc < 0 ? refuse(why, whylen, "cannot close the output: %s", strerror(errno)) : 0;
	}
	f->fd = -1;
	if (trc_newfile_commit(&f->nf) == 0)
		return 0;
	/* The trace is there, under the other name: it stays, and the user is told where. */
	refuse(why, whylen, "cannot rename '%s' to '%s': %s; the trace is in '%s'", f->nf.tmp,
	       f->nf.path, strerror(errno), f->nf.tmp);
	free(f->nf.tmp);
	f->nf.tmp = NULL;
	return -1;
}

const char *
trc_outfile_discard(struct trc_outfile *f)
{
	struct stat st;
	const char *done = NULL;

	if (f->nf.path != NULL) {
		trc_newfile_release(&f->nf);    /* closes it, and removes it */
		f->fd = -1;
		return "removed";
	}
	if (f->fd < 0)
		return NULL;
	if (fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(f->fd, 0) == 0)
		done = "emptied";
	close(f->fd);
	f->fd = -1;
	return done;
}

void
trc_outfile_release(struct trc_outfile *f)
{
	if (f->nf.path != NULL)
		trc_newfile_release(&f->nf);
	else if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}
