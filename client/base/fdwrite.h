/* fdwrite.h: write() to an fd that may be non-blocking, for the output and the progress line. */
#ifndef TRC_FDWRITE_H
#define TRC_FDWRITE_H

#include <stddef.h>

/* write() all of p; waits when fd is non-blocking (a terminal shared with a non-blocking app).
 * Returns 0, or -1 with errno. */
int trc_write_all(int fd, const char *p, size_t n);

#endif
