/* export_jsonl.c: --format jsonl: one JSON object per event and line, streamed. */
#include "export_format.h"
#include "json.h"

/*
 * {"pid":P,"thread":"main","event":"call","method":"A#b","ts":NS,"depth":D,...} with ts in
 * nanoseconds since the first event. Only what was seen is written: a call closed without
 * its return (events lost, or still running at the end) has no "return" line.
 */
static void
line_start(struct trc_export *e, const struct trc_xp_source *s, const struct trc_xp_thread *th,
	   const char *event)
{
	trc_buf_adds(&e->line, "{\"pid\":");
	trc_json_int(&e->line, s->pid);
	trc_buf_adds(&e->line, ",\"thread\":");
	if (th != NULL)
		trc_xp_json(e, th->name);
	else
		trc_buf_adds(&e->line, "null");
	trc_buf_adds(&e->line, ",\"event\":\"");
	trc_buf_adds(&e->line, event);
	trc_buf_addc(&e->line, '"');
}

static void
put_method(struct trc_export *e, uint32_t frame)
{
	trc_buf_adds(&e->line, ",\"method\":");
	trc_xp_json(e, e->frames[frame].name);
}

static void
put_when(struct trc_export *e, uint64_t ts, uint32_t depth)
{
	trc_buf_adds(&e->line, ",\"ts\":");
	trc_json_int(&e->line, trc_xp_rel(e, ts));
	trc_buf_adds(&e->line, ",\"depth\":");
	trc_json_uint(&e->line, depth);
}

static void
line_end(struct trc_export *e)
{
	trc_buf_adds(&e->line, "}\n");
	trc_xp_emit(e);
}

static void
call(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th)
{
	uint32_t depth = th->base.depth - 1;
	const struct trc_xp_call *c = &trc_xp_calls(th)[depth];

	line_start(e, s, th, "call");
	put_method(e, c->frame);
	put_when(e, c->base.start, depth);
	if (c->args.len > 0) {
		trc_buf_adds(&e->line, ",\"expr\":{");
		trc_buf_add(&e->line, c->args.data, c->args.len);
		trc_buf_addc(&e->line, '}');
	}
	line_end(e);
}

static void
ret(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
    const struct trc_xp_span *sp)
{
	if (!sp->returned)
		return;
	line_start(e, s, th, "return");
	put_method(e, sp->frame);
	put_when(e, sp->end, sp->depth);
	trc_buf_adds(&e->line, ",\"duration_ns\":");
	trc_json_uint(&e->line, sp->end - sp->start);
	line_end(e);
}

static void
exception(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
	  const struct trc_message *m)
{
	line_start(e, s, th, "raise");
	put_when(e, m->raise.ts, th->base.depth);
	trc_buf_adds(&e->line, ",\"exception\":");
	trc_json_str(&e->line, m->raise.cls.ptr, m->raise.cls.len);
	trc_buf_adds(&e->line, ",\"message\":");
	trc_json_str(&e->line, m->raise.message.ptr, m->raise.message.len);
	trc_buf_adds(&e->line, ",\"file\":");
	trc_json_str(&e->line, m->raise.path.ptr, m->raise.path.len);
	trc_buf_adds(&e->line, ",\"line\":");
	trc_json_int(&e->line, m->raise.line);
	line_end(e);
}

static void
slow(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
     const struct trc_message *m)
{
	line_start(e, s, th, "slow");
	put_method(e, trc_xp_method_frame(s, m->slow.method));
	put_when(e, m->slow.start_ts, m->slow.depth);
	trc_buf_adds(&e->line, ",\"duration_ns\":");
	trc_json_uint(&e->line, m->slow.duration_ns);
	line_end(e);
}

static void
gc(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
   const struct trc_message *m)
{
	line_start(e, s, th, "gc");
	put_when(e, m->gc.start_ts, th != NULL ? th->base.depth : 0);
	trc_buf_adds(&e->line, m->gc.major ? ",\"major\":true" : ",\"major\":false");
	trc_buf_adds(&e->line, ",\"reason\":");
	trc_json_str(&e->line, m->gc.reason.ptr, m->gc.reason.len);
	trc_buf_adds(&e->line, ",\"duration_ns\":");
	trc_json_uint(&e->line, m->gc.pause_ns);
	line_end(e);
}

/* {"event":"thread_begin",...,"text":"..."}: every mark (TRC_MARKS) by its name. */
static void
mark(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
     const struct trc_message *m)
{
	line_start(e, s, th, trc_mark_type(m->type)->name);
	put_when(e, m->mark.ts, th != NULL ? th->base.depth : 0);
	trc_buf_adds(&e->line, ",\"text\":");
	trc_json_str(&e->line, m->mark.text.ptr, m->mark.text.len);
	line_end(e);
}

const struct trc_xp_format trc_xp_jsonl = {
	.call = call,
	.ret = ret,
	.raise = exception,
	.slow = slow,
	.gc = gc,
	.mark = mark,
};
