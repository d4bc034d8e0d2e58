/* fdwrite.c: write() all of a buffer, whatever the fd's blocking mode. */
#include "fdwrite.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

int
trc_write_all(int fd, const char *p, size_t n)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	ssize_t w;

	while (n > 0) {
		w = write(fd, p, n);
		if (w >= 0) {
			p += w;
			n -= (size_t)w;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			poll(&pfd, 1, -1);
		} else if (errno != EINTR) {
			return -1;
		}
	}
	return 0;
}
