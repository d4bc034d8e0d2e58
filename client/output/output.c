/* output.c: the buffered trace writer and the status notes. */
#define _GNU_SOURCE     /* memrchr */
#include "output.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "progress.h"

void
trc_output_init(struct trc_output *o, int fd, int err_fd)
{
	trc_buf_init(&o->out);
	trc_buf_init(&o->err);
	o->fd = fd;
	o->err_fd = err_fd;
	o->error = 0;
	o->line_owner = NULL;
	o->line_close = NULL;
	o->codec = (struct trc_codec){ NULL, NULL };
	o->ended = false;
	o->whole_lines = false;
	o->atomic = 0;
}

void
trc_output_share(struct trc_output *o)
{
	struct stat st;

	o->whole_lines = true;
	o->atomic = o->fd >= 0 && fstat(o->fd, &st) == 0 && S_ISFIFO(st.st_mode) ? PIPE_BUF : 0;
}

void
trc_output_release(struct trc_output *o)
{
	if (o->codec.ops != NULL)
		o->codec.ops->close(o->codec.impl);
	o->codec = (struct trc_codec){ NULL, NULL };
	trc_buf_release(&o->out);
	trc_buf_release(&o->err);
}

void
trc_output_set_codec(struct trc_output *o, struct trc_codec codec)
{
	o->codec = codec;
}

/* The pending bytes through the codec, then to fd; end: the codec's stream ends too. */
static int
write_coded(struct trc_output *o, bool end)
{
	struct trc_buf coded;
	int rc;

	trc_buf_init(&coded);
	rc = o->codec.ops->put(o->codec.impl, o->out.data, o->out.len, end, &coded);
	if (rc == 0)
		rc = trc_write_all(o->fd, coded.data, coded.len);
	trc_buf_release(&coded);
	return rc;
}

/* Bytes of p[0..n) up to the end of its last line within max (0: no limit), or of its first
 * line when that is longer; 0 when no line ends in it. */
static size_t
lines_end(const char *p, size_t n, size_t max)
{
	size_t within = max > 0 && max < n ? max : n;
	const char *nl = within > 0 ? memrchr(p, '\n', within) : NULL;

	if (nl == NULL && within < n)
		nl = memchr(p + within, '\n', n - within);
	return nl != NULL ? (size_t)(nl - p) + 1 : 0;
}

/* Whole lines only (whole_lines): each write ends at a line's end; an open line waits. */
static int
write_lines(struct trc_output *o, bool end)
{
	size_t done = 0, n;

	while ((n = lines_end(o->out.data + done, o->out.len - done, o->atomic)) > 0) {
		if (trc_write_all(o->fd, o->out.data + done, n) < 0)
			return -1;
		done += n;
	}
	if (end && done < o->out.len && trc_write_all(o->fd, o->out.data + done, o->out.len - done) < 0)
		return -1;
	trc_buf_consume(&o->out, end ? o->out.len : done);
	return 0;
}

/* Writes (or, after an error or the end, drops) the pending bytes. */
static int
write_out(struct trc_output *o, bool end)
{
	int rc = 0;

	if (o->error == 0 && !o->ended && o->codec.ops != NULL)
		rc = write_coded(o, end);
	else if (o->error == 0 && !o->ended && o->whole_lines)
		rc = write_lines(o, end);
	else if (o->error == 0 && !o->ended && o->out.len > 0)
		rc = trc_write_all(o->fd, o->out.data, o->out.len);
	if (rc < 0)
		o->error = errno;
	if (rc < 0 || !o->whole_lines || o->codec.ops != NULL || o->ended)
		o->out.len = 0;
	return o->error ? -1 : 0;
}

int
trc_output_flush(struct trc_output *o)
{
	if (o->fd < 0 || o->out.len == 0)
		return o->error ? -1 : 0;
	return write_out(o, false);
}

int
trc_output_end(struct trc_output *o)
{
	int rc;

	if (o->fd < 0 || o->ended)
		return o->error ? -1 : 0;
	rc = write_out(o, true);
	o->ended = true;
	return rc;
}

void
trc_output_close_line(struct trc_output *o)
{
	void *owner = o->line_owner;

	if (owner != NULL) {
		o->line_owner = NULL;
		o->line_close(owner);
	}
}

void
trc_output_open_line(struct trc_output *o, void *owner, void (*close)(void *owner))
{
	o->line_owner = owner;
	o->line_close = close;
}

void
trc_output_note(struct trc_output *o, const char *fmt, ...)
{
	struct trc_buf *line = &o->err;
	struct trc_buf tmp;
	va_list ap;

	trc_output_close_line(o);
	trc_output_flush(o);
	trc_buf_init(&tmp);
	if (o->err_fd >= 0) {
		line = &tmp;
		trc_progress_clear();
	}
	trc_buf_adds(line, "*** ");
	va_start(ap, fmt);
	trc_buf_vaddf(line, fmt, ap);
	va_end(ap);
	trc_buf_addc(line, '\n');
	if (o->err_fd >= 0)
		trc_write_all(o->err_fd, tmp.data, tmp.len);
	trc_buf_release(&tmp);
}
