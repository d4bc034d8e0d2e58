/* newfile.h: a file made whole or not at all: written under a temporary name beside its own, renamed into place. */
#ifndef TRC_NEWFILE_H
#define TRC_NEWFILE_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * The client makes the files it writes or has written (-o FILE, a --heapdump or --shapesdump
 * file), so they belong to whoever asked (root, say, while the process runs as www-data). A
 * new file under a name of its own (mkostemps: O_EXCL, nobody else's file and no symlink
 * followed) is renamed over the name once complete, so that nothing planted at the name is
 * written through, and a reader of the name sees the old file or the new whole one. A dump's
 * process gets the open descriptor over the socket and writes into it.
 * Caller-allocated; path, tmp and fd are for reading.
 */
struct trc_newfile {
	char *path;             /* where the file ends up (its final name once committed) */
	char *tmp;              /* "PATH.XXXXXX.tmp", in the same directory; NULL once renamed */
	int fd;                 /* open on tmp for writing, or -1 */
	bool replace;           /* whatever is at path is replaced; false: a name is found beside */
};

/*
 * Creates a new temporary file beside path, with mode (less the umask; the temporary name is
 * 0600 until then). replace false: path is a name tracer chose, and if something is there
 * when the file is committed (a file, or a directory another user made), the file takes the
 * first free PATH-N name instead. Returns 0, or -1 with errno.
 */
int trc_newfile_open(struct trc_newfile *f, const char *path, mode_t mode, bool replace);
/*
 * After someone else wrote the file through its descriptor: flushes it to the disk and checks
 * that the file system has room left. A write that found it full may have been cut short with
 * no error seen (a dump's writer ignores one): a file system with no block left to write is
 * taken for one that cut the file. Returns 0, or -1 with errno (ENOSPC for the full one).
 */
int trc_newfile_check(const struct trc_newfile *f);
/* Closes the file and renames it into place (path may change: see replace). Returns 0, or -1
 * with errno (the file is then still under its temporary name, and release removes it). */
int trc_newfile_commit(struct trc_newfile *f);
/*
 * Closes the file and, unless it was committed, removes it; frees the names. Safe to repeat,
 * and on a zeroed struct that was never opened.
 */
void trc_newfile_release(struct trc_newfile *f);

#endif
