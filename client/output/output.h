/* output.h: every byte the client prints: the trace (stdout or -o FILE) and "*** " status notes. */
#ifndef TRC_OUTPUT_H
#define TRC_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "fdwrite.h"

/* Above this many pending bytes, a write flushes at once instead of waiting for the loop. */
#define TRC_OUTPUT_FLUSH_AT (64u << 10)

/*
 * A transformation of every byte on its way to the fd: compress.c's gzip and zstd streams.
 * put appends what p[0..n) becomes to out; with end set it also ends the stream (a gzip
 * trailer, the end of a zstd frame), after which put is not called again. It returns 0, or
 * -1 with errno. close frees impl. ops NULL: no codec, bytes go out as they are.
 */
struct trc_codec_ops {
	int (*put)(void *impl, const void *p, size_t n, bool end, struct trc_buf *out);
	void (*close)(void *impl);
};

struct trc_codec {
	const struct trc_codec_ops *ops;
	void *impl;
};

/*
 * Trace bytes are buffered and written when the event loop goes idle (or the buffer is full),
 * so a flood of events costs one write per loop iteration, not one per line.
 *
 * An "open line" is a line its writer may still extend (a call waiting to learn if it is a
 * leaf). Writers that share the output ask the owner to end it before they print anything.
 */
struct trc_output {
	struct trc_buf out;     /* trace bytes not written yet */
	struct trc_buf err;     /* notes, when err_fd is -1 (tests) */
	int fd;                 /* -1: keep everything in out (tests, benchmarks) */
	int err_fd;
	int error;              /* errno of the first failed write; later output is dropped */
	struct trc_codec codec; /* what the bytes pass through on their way to fd: none, or a
				 * compressor (trc_output_set_codec) */
	bool ended;             /* trc_output_end has run */
	/*
	 * Another process writes to fd too (--exec's program shares the terminal or pipe): only
	 * whole lines go out, each write ending at a line's end and, to a pipe, no longer than
	 * PIPE_BUF when it can be (such writes are atomic), so that the program's bytes never
	 * land inside a line. A line still open waits for its end.
	 */
	bool whole_lines;
	size_t atomic;          /* with whole_lines: the most a write carries (0: no limit) */
	void *line_owner;       /* writer of the open line, or NULL */
	void (*line_close)(void *owner);
};

/* fd receives the trace, err_fd the notes; -1 keeps them in memory. The caller owns the fds. */
void trc_output_init(struct trc_output *o, int fd, int err_fd);
void trc_output_release(struct trc_output *o);

/* From now on, whole lines only (see whole_lines). Before anything is written. */
void trc_output_share(struct trc_output *o);

/* Sends every byte from now on through codec, which the output owns from then on (it closes
 * it on release). Before anything is written. */
void trc_output_set_codec(struct trc_output *o, struct trc_codec codec);

/* Writes the pending trace bytes. Returns 0, or -1 with o->error set. Main thread. */
int trc_output_flush(struct trc_output *o);

/*
 * Flushes and ends the codec's stream: after this nothing more is written to fd. Without a
 * codec, the same as trc_output_flush. Returns 0, or -1 with o->error set. Main thread.
 */
int trc_output_end(struct trc_output *o);

/* Ends the open line, if any, through its owner. */
void trc_output_close_line(struct trc_output *o);
/* Marks the line just written as open: close(owner) must end it. */
void trc_output_open_line(struct trc_output *o, void *owner, void (*close)(void *owner));

/* Ends the open line, flushes the trace, then writes "*** " + message + "\n" as a note. */
void trc_output_note(struct trc_output *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void
trc_output_write(struct trc_output *o, const void *p, size_t n)
{
	trc_buf_add(&o->out, p, n);
	if (o->out.len >= TRC_OUTPUT_FLUSH_AT && o->fd >= 0)
		trc_output_flush(o);
}

static inline void
trc_output_putc(struct trc_output *o, char c)
{
	trc_buf_addc(&o->out, c);
}

#endif
