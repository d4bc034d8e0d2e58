/* spool.c: the agent's bytes kept in a scratch file while tracing, decoded into a sink later. */
#define _GNU_SOURCE     /* O_TMPFILE */
#include "spool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "decode.h"
#include "xmalloc.h"

#define SPOOL_WRITE_AT (256u << 10)     /* kept bytes written out in pieces this big */
#define SPOOL_READ (1u << 20)           /* and read back in pieces this big */
#define SPOOL_SAY_AT (64u << 20)        /* kept bytes left at the end worth a note */

struct trc_spool {
	int fd;
	struct trc_buf pending;         /* kept bytes not written to fd yet */
	uint64_t size;                  /* bytes kept, pending included */
	uint64_t read_off;              /* bytes of fd read back into buf */
	uint64_t decoded;               /* bytes decoded */
	uint8_t *buf;                   /* read back, not decoded: [start, end) */
	size_t start, end, cap;
	size_t need;                    /* decode again once this many bytes are in buf */
	struct trc_decoder dec;
	uint64_t lost;                  /* what the TRC_EV_LOST seen live said */
	struct trc_sink inner;
	struct trc_output *out;
	bool *cut_short;                /* set when closing finds the trace cut short, or NULL */
	char error[160];
};

static void
fail(struct trc_spool *sp, const char *fmt, const char *detail)
{
	if (sp->error[0] == '\0')
		snprintf(sp->error, sizeof(sp->error), fmt, detail);
}

static void
write_pending(struct trc_spool *sp)
{
	if (sp->pending.len == 0)
		return;
	if (sp->error[0] == '\0' && trc_write_all(sp->fd, sp->pending.data, sp->pending.len) < 0)
		fail(sp, "cannot write its scratch file: %s", strerror(errno));
	sp->pending.len = 0;
}

struct trc_spool *
trc_spool_new_fd(int fd, struct trc_sink inner, struct trc_output *out)
{
	struct trc_spool *sp = xcalloc(1, sizeof(*sp));

	sp->fd = fd;
	sp->inner = inner;
	sp->out = out;
	sp->need = 1;
	trc_buf_init(&sp->pending);
	trc_decoder_init(&sp->dec);
	return sp;
}

int
trc_spool_scratch(const char *dir)
{
	char *path;
	int fd;

#ifdef O_TMPFILE
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
#endif
	path = xmalloc(strlen(dir) + sizeof("/.tracer-spool-XXXXXX"));
	sprintf(path, "%s/.tracer-spool-XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
	free(path);
	return fd;
}

struct trc_spool *
trc_spool_new(const char *dir, struct trc_sink inner, struct trc_output *out)
{
	int fd = trc_spool_scratch(dir);

	return fd < 0 ? NULL : trc_spool_new_fd(fd, inner, out);
}

void
trc_spool_put(struct trc_spool *sp, const void *p, size_t n)
{
	trc_buf_add(&sp->pending, p, n);
	sp->size += n;
	if (sp->pending.len >= SPOOL_WRITE_AT)
		write_pending(sp);
}

/* Reads more kept bytes into buf, keeping room for a whole message. Returns bytes read. */
static ssize_t
read_more(struct trc_spool *sp)
{
	size_t live = sp->end - sp->start;
	size_t want = live + (sp->need > SPOOL_READ ? sp->need : SPOOL_READ);
	ssize_t r;

	write_pending(sp);
	if (sp->error[0] != '\0')
		return -1;
	if (sp->start > 0) {
		memmove(sp->buf, sp->buf + sp->start, live);
		sp->start = 0;
		sp->end = live;
	}
	if (sp->cap < want) {
		sp->buf = xrealloc(sp->buf, want);
		sp->cap = want;
	}
	do
		r = pread(sp->fd, sp->buf + sp->end, sp->cap - sp->end, (off_t)sp->read_off);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		fail(sp, "cannot read its scratch file: %s", strerror(errno));
		return -1;
	}
	sp->end += (size_t)r;
	sp->read_off += (uint64_t)r;
	return r;
}

int64_t
trc_spool_pump(struct trc_spool *sp, size_t max)
{
	int64_t count = 0;

	if (sp->error[0] != '\0')
		return -1;
	while ((size_t)count < max) {
		struct trc_message m;
		size_t used;

		if (sp->end - sp->start < sp->need) {
			ssize_t r = sp->read_off < sp->size ? read_more(sp) : 0;

			if (r < 0)
				return -1;
			if (r == 0)
				break;
			continue;
		}
		switch (trc_decode(&sp->dec, sp->buf + sp->start, sp->end - sp->start, &m, &used)) {
		case TRC_DECODE_OK:
			sp->start += used;
			sp->decoded += used;
			sp->need = 1;
			count++;
			/* The session's own messages (WELCOME, SPEC, DETACHED...) were seen live. */
			if (m.type >= TRC_EV_METHOD && trc_sink_feed(&sp->inner, &m) < 0) {
				fail(sp, "%s", trc_sink_error(&sp->inner));
				return -1;
			}
			break;
		case TRC_DECODE_MORE:
			sp->need = sp->dec.need;
			break;
		case TRC_DECODE_ERROR:
			fail(sp, "%s", sp->dec.error);
			return -1;
		}
	}
	return count;
}

bool
trc_spool_behind(const struct trc_spool *sp)
{
	return sp->error[0] == '\0' && sp->size - sp->decoded >= sp->need;
}

uint64_t
trc_spool_size(const struct trc_spool *sp)
{
	return sp->size;
}

const char *
trc_spool_error(const struct trc_spool *sp)
{
	return sp->error;
}

/* ---- the sink the session sees ---- */

static int
live_feed(void *impl, const struct trc_message *m)
{
	struct trc_spool *sp = impl;

	if (m->type == TRC_EV_LOST)
		sp->lost += m->lost.count;
	return 0;
}

static void
live_set_clock(void *impl, uint64_t mono_ns, uint64_t real_ns)
{
	struct trc_spool *sp = impl;

	trc_sink_set_clock(&sp->inner, mono_ns, real_ns);
}

static const char *
live_error(const void *impl)
{
	return ((const struct trc_spool *)impl)->error;
}

static uint64_t
live_lost(const void *impl)
{
	return ((const struct trc_spool *)impl)->lost;
}

/* The rest into inner, then the end. */
static void
live_close(void *impl)
{
	struct trc_spool *sp = impl;
	uint64_t left = sp->size - sp->decoded;

	/* Seconds of work after a long flood: say what the wait is for. */
	if (left >= SPOOL_SAY_AT && sp->out != NULL && sp->error[0] == '\0')
		trc_output_note(sp->out, "formatting the %" PRIu64 " MB kept while events came faster "
				"than they could be written", left >> 20);
	while (trc_spool_pump(sp, SIZE_MAX) > 0)
		;
	if (sp->error[0] != '\0' && sp->out != NULL)
		trc_output_note(sp->out, "the trace is cut short: %s", sp->error);
	if (sp->error[0] != '\0' && sp->cut_short != NULL)
		*sp->cut_short = true;
	trc_sink_close(&sp->inner);
	trc_decoder_release(&sp->dec);
	trc_buf_release(&sp->pending);
	free(sp->buf);
	close(sp->fd);
	free(sp);
}

static bool
live_idle(void *impl, double now)
{
	struct trc_spool *sp = impl;

	return trc_sink_idle(&sp->inner, now);
}

static const struct trc_sink_ops live_ops = {
	.feed = live_feed, .set_clock = live_set_clock, .error = live_error, .lost = live_lost,
	.close = live_close, .idle = live_idle,
};

void
trc_spool_report(struct trc_spool *sp, bool *cut_short)
{
	sp->cut_short = cut_short;
}

struct trc_sink
trc_spool_sink(struct trc_spool *sp)
{
	return (struct trc_sink){ .ops = &live_ops, .impl = sp };
}
