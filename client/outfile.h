/* outfile.h: the -o FILE: written in place when that is safe, else a new file renamed over the name. */
#ifndef TRC_OUTFILE_H
#define TRC_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "newfile.h"

/*
 * What is at FILE decides, before anything is attached:
 *   nothing                   a file made there (O_EXCL: nothing planted meanwhile is
 *                             followed), written as the trace comes
 *   one's own regular file    written in place (truncated, or appended to)
 *   another user's regular    a new file beside it (newfile.h), renamed over FILE at the
 *   file or symbolic link     end: what another user planted is replaced, never written
 *                             through; refused with --append, and in a sticky directory the
 *                             rename could not replace it in
 *   one's own or root's       followed, as a shell's > does (a "latest" name, /dev/stdout)
 *   symbolic link
 *   a directory               refused
 *   a device, FIFO, socket    written as it is (/dev/null), if it is one's own or root's
 * Caller-allocated.
 */
struct trc_outfile {
	struct trc_newfile nf;  /* the new file; nf.path NULL when FILE is written as it is */
	int fd;                 /* where the trace goes, or -1 */
};

/* Opens FILE for the trace. Returns the descriptor, or -1 with why[0..whylen) said. Main thread. */
int trc_outfile_open(struct trc_outfile *f, const char *path, bool append, char *why,
		     size_t whylen);
/*
 * The trace is written (whole, or as much as could be): a new file takes FILE's name. Returns
 * 0, or -1 with why[0..whylen) said (a new file that could not be renamed is kept under its
 * temporary name, which why gives). The descriptor is closed either way.
 */
int trc_outfile_commit(struct trc_outfile *f, char *why, size_t whylen);
/* Closes what is open, removes a new file not committed. Safe to repeat; on a zeroed struct too. */
void trc_outfile_release(struct trc_outfile *f);

#endif
