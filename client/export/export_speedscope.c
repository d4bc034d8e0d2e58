/* export_speedscope.c: --format speedscope: one evented profile per thread, written at the end. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export_format.h"
#include "json.h"
#include "spool.h"
#include "xmalloc.h"

#define SCHEMA "https://www.speedscope.app/file-format-schema.json"
#define WRITE_AT (64u << 10)    /* bytes of document to gather before each write */
#define KEEP (4u << 20)         /* bytes of events held in memory, all threads together */

/*
 * The format wants a thread's events in one array, inside a document that also lists every
 * frame first, so the events must wait for the end: 16 bytes per open or close, which a busy
 * -f makes tens of megabytes of a second. They wait in memory up to KEEP bytes, then every
 * thread's go to a scratch file (spool.h's: beside the output, or in $TMPDIR), each thread's
 * as a list of pieces, read back in order at the end. Memory stays at KEEP plus 16 bytes per
 * piece. The core hands events over properly nested; times are kept non-decreasing here too,
 * as the importer requires.
 */
struct ss_event {
	uint64_t at;
	uint32_t frame;
	uint32_t open;          /* 1: "O", 0: "C" */
};

struct piece {
	off_t off;              /* in the scratch file */
	uint32_t n;             /* events */
};

struct ss_thread {
	struct ss_event *ev;    /* in memory, after the pieces */
	uint32_t n, cap;
	struct piece *pieces;
	size_t npieces, pieces_cap;
	uint64_t first_at, last_at, total;
};

struct speedscope {
	int fd;                 /* the scratch file, -1 until the first events go there */
	off_t size;
	size_t kept;            /* bytes of events in memory */
	uint64_t dropped;       /* events left out once the scratch file failed */
};

static void
begin(struct trc_export *e)
{
	struct speedscope *ss = xcalloc(1, sizeof(*ss));

	ss->fd = -1;
	e->fs = ss;
}

static int
open_scratch(struct trc_export *e, struct speedscope *ss)
{
	const char *dir = e->opts.scratch_dir;

	if (dir == NULL && (dir = getenv("TMPDIR")) == NULL)
		dir = "/tmp";
	if ((ss->fd = trc_spool_scratch(dir)) < 0)
		trc_xp_fail(e, "cannot make its scratch file in '%s': %s", dir, strerror(errno));
	return ss->fd;
}

static int
write_piece(struct trc_export *e, struct speedscope *ss, struct ss_thread *t)
{
	const char *p = (const char *)t->ev;
	size_t len = (size_t)t->n * sizeof(*t->ev), done = 0;
	ssize_t w;

	while (done < len) {
		w = pwrite(ss->fd, p + done, len - done, ss->size + (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			trc_xp_fail(e, "cannot write its scratch file: %s", w < 0 ? strerror(errno) : "no room");
			return -1;
		}
		done += (size_t)w;
	}
	if (t->npieces == t->pieces_cap) {
		t->pieces_cap = t->pieces_cap ? t->pieces_cap * 2 : 8;
		t->pieces = xreallocarray(t->pieces, t->pieces_cap, sizeof(*t->pieces));
	}
	t->pieces[t->npieces++] = (struct piece){ ss->size, t->n };
	ss->size += (off_t)len;
	t->n = 0;
	return 0;
}

/* Every thread's events in memory go to the scratch file. */
static void
spill(struct trc_export *e, struct speedscope *ss)
{
	if (ss->fd < 0 && open_scratch(e, ss) < 0)
		return;
	for (size_t i = 0; i < e->nsources; i++) {
		const struct trc_xp_source *s = e->sources[i];

		for (uint32_t k = 0; k < s->replay.nthreads; k++) {
			struct ss_thread *t = trc_xp_thread(s, k)->fmt;

			if (t != NULL && t->n > 0 && write_piece(e, ss, t) < 0)
				return;
		}
	}
	ss->kept = 0;
}

static void
add_event(struct trc_export *e, struct trc_xp_thread *th, uint64_t at, uint32_t frame, bool open)
{
	struct speedscope *ss = e->fs;
	struct ss_thread *t = th->fmt;

	if (e->failed[0] != '\0') {
		ss->dropped++;
		return;
	}
	if (t == NULL)
		t = th->fmt = xcalloc(1, sizeof(*t));
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->ev = xreallocarray(t->ev, t->cap, sizeof(*t->ev));
	}
	if (t->total > 0 && at < t->last_at)
		at = t->last_at;
	if (t->total == 0)
		t->first_at = at;
	t->last_at = at;
	t->total++;
	t->ev[t->n++] = (struct ss_event){ at, frame, open };
	if ((ss->kept += sizeof(struct ss_event)) >= KEEP)
		spill(e, ss);
}

static void
call(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th)
{
	const struct trc_xp_call *c = &trc_xp_calls(th)[th->base.depth - 1];

	(void)s;
	add_event(e, th, c->base.start, c->frame, true);
}

static void
ret(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
    const struct trc_xp_span *sp)
{
	(void)s;
	add_event(e, th, sp->end, sp->frame, false);
}

static void
maybe_write(struct trc_export *e)
{
	if (e->line.len >= WRITE_AT)
		trc_xp_emit(e);
}

static void
put_frames(struct trc_export *e)
{
	for (uint32_t i = 0; i < e->nframes; i++) {
		const struct trc_xp_frame *f = &e->frames[i];
		size_t file_len;

		trc_xp_str(e, f->file, &file_len);
		trc_buf_adds(&e->line, i > 0 ? ",{\"name\":" : "{\"name\":");
		trc_xp_json(e, f->name);
		if (file_len > 0) {
			trc_buf_adds(&e->line, ",\"file\":");
			trc_xp_json(e, f->file);
			if (f->line > 0) {
				trc_buf_adds(&e->line, ",\"line\":");
				trc_json_int(&e->line, f->line);
			}
		}
		trc_buf_addc(&e->line, '}');
		maybe_write(e);
	}
}

static void
put_events(struct trc_export *e, const struct ss_event *ev, size_t n, uint64_t *left)
{
	for (size_t i = 0; i < n; i++) {
		trc_buf_adds(&e->line, ev[i].open ? "{\"type\":\"O\",\"frame\":" : "{\"type\":\"C\",\"frame\":");
		trc_json_uint(&e->line, ev[i].frame);
		trc_buf_adds(&e->line, ",\"at\":");
		trc_json_int(&e->line, trc_xp_rel(e, ev[i].at));
		trc_buf_adds(&e->line, --*left > 0 ? "}," : "}");
		maybe_write(e);
	}
}

/* A piece of a thread's events, read back from the scratch file. */
static int
put_piece(struct trc_export *e, const struct piece *p, uint64_t *left)
{
	struct speedscope *ss = e->fs;
	size_t len = (size_t)p->n * sizeof(struct ss_event), done = 0;
	struct ss_event *ev = xmalloc(len);
	ssize_t r;

	while (done < len) {
		r = pread(ss->fd, (char *)ev + done, len - done, p->off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			trc_xp_fail(e, "cannot read its scratch file back: %s",
				    r < 0 ? strerror(errno) : "it is shorter than written");
			free(ev);
			return -1;
		}
		done += (size_t)r;
	}
	put_events(e, ev, p->n, left);
	free(ev);
	return 0;
}

/* {"type":"evented","name":"THREAD (pid PID)",...,"events":[...]} */
static void
put_profile(struct trc_export *e, const struct trc_xp_source *s, const struct trc_xp_thread *th,
	    bool first)
{
	const struct ss_thread *t = th->fmt;
	size_t len;
	const char *name = trc_xp_str(e, th->name, &len);
	uint64_t left = t->total;

	trc_buf_adds(&e->line, first ? "\n{\"type\":\"evented\",\"name\":\""
				     : ",\n{\"type\":\"evented\",\"name\":\"");
	trc_json_str_body(&e->line, name, len);
	trc_buf_adds(&e->line, " (pid ");
	trc_json_int(&e->line, s->pid);
	trc_buf_adds(&e->line, ")\",\"unit\":\"nanoseconds\",\"startValue\":");
	trc_json_int(&e->line, trc_xp_rel(e, t->first_at));
	trc_buf_adds(&e->line, ",\"endValue\":");
	trc_json_int(&e->line, trc_xp_rel(e, t->last_at));
	trc_buf_adds(&e->line, ",\"events\":[");
	for (size_t i = 0; i < t->npieces; i++)
		if (put_piece(e, &t->pieces[i], &left) < 0)
			return;
	put_events(e, t->ev, t->n, &left);
	trc_buf_adds(&e->line, "]}");
}

static void
put_profiles(struct trc_export *e)
{
	bool first = true;

	for (size_t i = 0; i < e->nsources && e->failed[0] == '\0'; i++) {
		const struct trc_xp_source *s = e->sources[i];

		for (uint32_t k = 0; k < s->replay.nthreads && e->failed[0] == '\0'; k++) {
			const struct trc_xp_thread *th = trc_xp_thread(s, k);
			const struct ss_thread *t = th->fmt;

			if (t == NULL || t->total == 0)
				continue;
			put_profile(e, s, th, first);
			first = false;
		}
	}
}

/* A document cut short by a failed scratch file is not written at all: it would look whole. */
static void
end(struct trc_export *e)
{
	struct speedscope *ss = e->fs;

	if (e->failed[0] != '\0')
		return;
	trc_buf_adds(&e->line, "{\"$schema\":\"" SCHEMA "\",\"shared\":{\"frames\":[");
	put_frames(e);
	trc_buf_adds(&e->line, "]},\"profiles\":[");
	put_profiles(e);
	if (e->failed[0] != '\0') {
		e->line.len = 0;
		return;
	}
	trc_buf_adds(&e->line, "],\"name\":\"tracer");
	for (size_t i = 0; i < e->nsources; i++) {
		trc_buf_adds(&e->line, i > 0 ? ", " : " ");
		trc_json_int(&e->line, e->sources[i]->pid);
	}
	trc_buf_adds(&e->line, "\",\"activeProfileIndex\":0,\"exporter\":");
	trc_json_str(&e->line, e->opts.tool, strlen(e->opts.tool));
	trc_buf_adds(&e->line, "}\n");
	trc_xp_emit(e);
	(void)ss;
}

static void
free_thread(void *fmt)
{
	struct ss_thread *t = fmt;

	free(t->ev);
	free(t->pieces);
	free(t);
}

static void
free_speedscope(struct trc_export *e)
{
	struct speedscope *ss = e->fs;

	if (ss != NULL && ss->fd >= 0)
		close(ss->fd);
	free(ss);
}

const struct trc_xp_format trc_xp_speedscope = {
	.begin = begin,
	.call = call,
	.ret = ret,
	.end = end,
	.free_thread = free_thread,
	.free = free_speedscope,
};
