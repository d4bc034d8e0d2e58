/* test_output.c: the output shared with another writer (--exec's program): whole lines only. */
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "output.h"
#include "test.h"

/* The next write the peer made, NUL-terminated in buf (SOCK_SEQPACKET keeps them apart). */
static const char *
next_write(int fd, char *buf, size_t size)
{
	ssize_t n = recv(fd, buf, size - 1, MSG_DONTWAIT);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void
test_whole_lines(void)
{
	struct trc_output o;
	int sv[2];
	char buf[16384], line[3001];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0) {
		test_cond("socketpair", 0);
		return;
	}
	trc_output_init(&o, sv[0], -1);
	trc_output_share(&o);
	o.atomic = 4096;        /* as to a pipe */
	trc_output_write(&o, "Foo#a <0.1>\nBar#b", 17);
	test_cond("flushed", trc_output_flush(&o) == 0);
	test_str("the whole line goes", next_write(sv[1], buf, sizeof(buf)), "Foo#a <0.1>\n");
	test_str("the open one waits", next_write(sv[1], buf, sizeof(buf)), "");
	trc_output_write(&o, " <0.2>\n", 7);
	trc_output_flush(&o);
	test_str("then goes whole", next_write(sv[1], buf, sizeof(buf)), "Bar#b <0.2>\n");
	memset(line, 'x', sizeof(line) - 1);
	line[sizeof(line) - 2] = '\n';
	line[sizeof(line) - 1] = '\0';
	for (int i = 0; i < 3; i++)
		trc_output_write(&o, line, sizeof(line) - 1);
	trc_output_flush(&o);
	test_cond("lines of 3000 bytes: one write each, under the atomic size",
		  strlen(next_write(sv[1], buf, sizeof(buf))) == 3000 &&
		  strlen(next_write(sv[1], buf, sizeof(buf))) == 3000 &&
		  strlen(next_write(sv[1], buf, sizeof(buf))) == 3000 &&
		  next_write(sv[1], buf, sizeof(buf))[0] == '\0');
	trc_output_write(&o, "a\nb\nlast", 8);
	trc_output_end(&o);
	test_str("the end writes the lines together", next_write(sv[1], buf, sizeof(buf)), "a\nb\n");
	test_str("and an unfinished line at last", next_write(sv[1], buf, sizeof(buf)), "last");
	trc_output_release(&o);
	close(sv[0]);
	close(sv[1]);
}

void
test_output(void)
{
	test_whole_lines();
}
