/* export_speedscope.c: --format speedscope: one evented profile per thread, written at the end. */
#include <stdlib.h>
#include <string.h>

#include "export_format.h"
#include "json.h"
#include "xmalloc.h"

#define SCHEMA "https://www.speedscope.app/file-format-schema.json"
#define WRITE_AT (64u << 10)    /* bytes of document to gather before each write */

/*
 * The format wants a thread's events in one array, inside a document that also lists every
 * frame first, so the events wait in memory until the end: 16 bytes per open or close. The
 * core hands them over properly nested; times are kept non-decreasing here too, as the
 * importer requires.
 */
struct ss_event {
	uint64_t at;
	uint32_t frame;
	uint32_t open;          /* 1: "O", 0: "C" */
};

struct ss_thread {
	struct ss_event *ev;
	size_t n, cap;
};

static void
add_event(struct trc_xp_thread *th, uint64_t at, uint32_t frame, bool open)
{
	struct ss_thread *t = th->fmt;

	if (t == NULL)
		t = th->fmt = xcalloc(1, sizeof(*t));
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 256;
		t->ev = xreallocarray(t->ev, t->cap, sizeof(*t->ev));
	}
	if (t->n > 0 && at < t->ev[t->n - 1].at)
		at = t->ev[t->n - 1].at;
	t->ev[t->n++] = (struct ss_event){ at, frame, open };
}

static void
call(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th)
{
	const struct trc_xp_call *c = &trc_xp_calls(th)[th->base.depth - 1];

	(void)e, (void)s;
	add_event(th, c->base.start, c->frame, true);
}

static void
ret(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
    const struct trc_xp_span *sp)
{
	(void)e, (void)s;
	add_event(th, sp->end, sp->frame, false);
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

/* {"type":"evented","name":"THREAD (pid PID)",...,"events":[...]} */
static void
put_profile(struct trc_export *e, const struct trc_xp_source *s, const struct trc_xp_thread *th,
	    bool first)
{
	const struct ss_thread *t = th->fmt;
	size_t len;
	const char *name = trc_xp_str(e, th->name, &len);

	trc_buf_adds(&e->line, first ? "\n{\"type\":\"evented\",\"name\":\""
				     : ",\n{\"type\":\"evented\",\"name\":\"");
	trc_json_str_body(&e->line, name, len);
	trc_buf_adds(&e->line, " (pid ");
	trc_json_int(&e->line, s->pid);
	trc_buf_adds(&e->line, ")\",\"unit\":\"nanoseconds\",\"startValue\":");
	trc_json_int(&e->line, trc_xp_rel(e, t->ev[0].at));
	trc_buf_adds(&e->line, ",\"endValue\":");
	trc_json_int(&e->line, trc_xp_rel(e, t->ev[t->n - 1].at));
	trc_buf_adds(&e->line, ",\"events\":[");
	for (size_t i = 0; i < t->n; i++) {
		trc_buf_adds(&e->line, t->ev[i].open ? "{\"type\":\"O\",\"frame\":"
						     : "{\"type\":\"C\",\"frame\":");
		trc_json_uint(&e->line, t->ev[i].frame);
		trc_buf_adds(&e->line, ",\"at\":");
		trc_json_int(&e->line, trc_xp_rel(e, t->ev[i].at));
		trc_buf_adds(&e->line, i + 1 < t->n ? "}," : "}");
		maybe_write(e);
	}
	trc_buf_adds(&e->line, "]}");
}

static void
put_profiles(struct trc_export *e)
{
	bool first = true;

	for (size_t i = 0; i < e->nsources; i++) {
		const struct trc_xp_source *s = e->sources[i];

		for (uint32_t k = 0; k < s->replay.nthreads; k++) {
			const struct trc_xp_thread *th = trc_xp_thread(s, k);

			if (th->fmt == NULL)
				continue;
			put_profile(e, s, th, first);
			first = false;
		}
	}
}

static void
end(struct trc_export *e)
{
	trc_buf_adds(&e->line, "{\"$schema\":\"" SCHEMA "\",\"shared\":{\"frames\":[");
	put_frames(e);
	trc_buf_adds(&e->line, "]},\"profiles\":[");
	put_profiles(e);
	trc_buf_adds(&e->line, "],\"name\":\"tracer");
	for (size_t i = 0; i < e->nsources; i++) {
		trc_buf_adds(&e->line, i > 0 ? ", " : " ");
		trc_json_int(&e->line, e->sources[i]->pid);
	}
	trc_buf_adds(&e->line, "\",\"activeProfileIndex\":0,\"exporter\":");
	trc_json_str(&e->line, e->opts.tool, strlen(e->opts.tool));
	trc_buf_adds(&e->line, "}\n");
	trc_xp_emit(e);
}

static void
free_thread(void *fmt)
{
	struct ss_thread *t = fmt;

	free(t->ev);
	free(t);
}

const struct trc_xp_format trc_xp_speedscope = {
	.call = call,
	.ret = ret,
	.end = end,
	.free_thread = free_thread,
};
