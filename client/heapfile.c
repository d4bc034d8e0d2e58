/* heapfile.c: the --heapdump file: a temporary name beside the target name, renamed when complete. */
#define _GNU_SOURCE     /* mkostemps */
#include "heapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xmalloc.h"

#define TMP_SUFFIX ".tmp"

int
trc_heapfile_open(struct trc_heapfile *h, const char *path)
{
	h->path = xstrdup(path);
	h->tmp = xasprintf("%s.XXXXXX" TMP_SUFFIX, path);
	/* mkostemps: O_CREAT | O_EXCL, mode 0600, a name nobody else has. */
	h->fd = mkostemps(h->tmp, (int)strlen(TMP_SUFFIX), O_CLOEXEC);
	if (h->fd < 0) {
		int saved = errno;

		free(h->tmp);
		h->tmp = NULL;
		errno = saved;
		return -1;
	}
	return 0;
}

int
trc_heapfile_commit(struct trc_heapfile *h)
{
	int rc = close(h->fd);

	h->fd = -1;
	if (rc < 0 || rename(h->tmp, h->path) < 0)
		return -1;
	free(h->tmp);
	h->tmp = NULL;
	return 0;
}

void
trc_heapfile_release(struct trc_heapfile *h)
{
	if (h->path == NULL)    /* never opened (zeroed), or released already */
		return;
	if (h->fd >= 0)
		close(h->fd);
	/* Still under its temporary name: made here, never completed. */
	if (h->tmp != NULL)
		unlink(h->tmp);
	h->fd = -1;
	free(h->tmp);
	free(h->path);
	h->tmp = h->path = NULL;
}
