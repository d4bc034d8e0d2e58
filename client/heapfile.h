/* heapfile.h: the --heapdump file: made by the client, filled by the agent, renamed into place. */
#ifndef TRC_HEAPFILE_H
#define TRC_HEAPFILE_H

#include <stdbool.h>

/*
 * The client makes the file, so it belongs to whoever asked (root, say, while the process runs
 * as www-data), in a directory the process may not be able to write or even see (another mount
 * namespace). The process gets the open descriptor over the socket and writes the dump into it.
 * Caller-allocated; path, tmp and fd are for reading.
 */
struct trc_heapfile {
	char *path;             /* where the dump ends up */
	char *tmp;              /* "PATH.XXXXXX.tmp", in the same directory; NULL once renamed */
	int fd;                 /* open on tmp for writing, or -1 */
};

/* Creates a new temporary file beside path (O_EXCL, mode 0600). Returns 0, or -1 with errno. */
int trc_heapfile_open(struct trc_heapfile *h, const char *path);
/* The dump is complete: closes the file and renames it to path. Returns 0, or -1 with errno. */
int trc_heapfile_commit(struct trc_heapfile *h);
/*
 * Closes the file and, unless it was committed, removes it; frees the names. Safe to repeat,
 * and on a zeroed struct that was never opened.
 */
void trc_heapfile_release(struct trc_heapfile *h);

#endif
