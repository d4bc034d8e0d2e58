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
 * A file that is only good whole (a JSON document, a profile, a picture: whole set) is
 * made under a temporary name beside FILE whenever FILE is nothing yet or a regular file,
 * one's own included, and takes FILE's name only once complete (trc_outfile_commit): a trace
 * cut short never leaves a well-formed, incomplete file at FILE (trc_outfile_discard).
 * Caller-allocated.
 */
struct trc_outfile {
	struct trc_newfile nf;  /* the new file; nf.path NULL when FILE is written as it is */
	int fd;                 /* where the trace goes, or -1 */
};

/* Opens FILE for the trace. Returns the descriptor, or -1 with why[0..whylen) said. Main thread. */
int trc_outfile_open(struct trc_outfile *f, const char *path, bool append, bool whole, char *why,
		     size_t whylen);
/*
 * The trace is written (whole, or as much as could be): a new file takes FILE's name. Returns
 * 0, or -1 with why[0..whylen) said (a new file that could not be renamed is kept under its
 * temporary name, which why gives). The descriptor is closed either way.
 */
int trc_outfile_commit(struct trc_outfile *f, char *why, size_t whylen);
/*
 * The trace is not whole (cut short, or its writing failed): nothing of it is left looking
 * like a whole file. A new file is removed (what was at FILE stays as it was); a file written
 * in place (through one's own link) is emptied; a device is left alone. Returns what was done,
 * for the user: "removed", "emptied" or NULL. The descriptor is closed.
 */
const char *trc_outfile_discard(struct trc_outfile *f);
/* Closes what is open, removes a new file not committed. Safe to repeat; on a zeroed struct too. */
void trc_outfile_release(struct trc_outfile *f);

#endif
