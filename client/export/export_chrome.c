/* export_chrome.c: --format chrome: Trace Event Format JSON for Perfetto and chrome://tracing, streamed. */
#include <stdlib.h>
#include <string.h>

#include "export_format.h"
#include "json.h"
#include "xmalloc.h"

#define STR(x) #x
#define DECIMAL(x) STR(x)

/*
 * {"traceEvents":[ ...one event per line... ],"displayTimeUnit":"ms",...}: a complete ("X")
 * event is written when its call returns, so nothing accumulates; the closing brackets come
 * from trc_export_finish(), which the client reaches on every detach, signals included.
 * Each Ruby thread is a track: tid is its index + 1, since Perfetto and other viewers have
 * taken tid 0 for the idle task and merged it with others. Viewers reject negative
 * timestamps: a slow call that began before the first event is cut at 0.
 */
struct chrome {
	bool any;               /* an event was written: the next one needs a comma */
	pid_t *named;           /* (pid, tid) pairs of the tracks of our own that have a name */
	size_t nnamed;
};

/* Garbage collections get a track of their own in each process: their steps may span the
 * returns of the calls around them, which a thread's track could not nest. */
#define GC_TID 999999
/*
 * Marks that name no traced thread (a thread's begin: it has no index yet) go on a track of
 * their own too: viewers attach every event to a pid and a tid (speedscope's importer fails on
 * one without a tid), and a process-wide event on some other thread's track would mislead.
 */
#define THREADS_TID 999998

static void
event_start(struct trc_export *e, const char *json)
{
	struct chrome *c = e->fs;

	trc_buf_adds(&e->line, c->any ? ",\n{" : "\n{");
	trc_buf_adds(&e->line, json);
	c->any = true;
}

static void
put_ids(struct trc_export *e, const struct trc_xp_source *s, const struct trc_xp_thread *th)
{
	trc_buf_adds(&e->line, ",\"pid\":");
	trc_json_int(&e->line, s->pid);
	trc_buf_adds(&e->line, ",\"tid\":");
	trc_json_uint(&e->line, (uint64_t)th->base.idx + 1);
}

static void
begin(struct trc_export *e)
{
	e->fs = xcalloc(1, sizeof(struct chrome));
	trc_buf_adds(&e->line, "{\"traceEvents\":[");
	trc_xp_emit(e);
}

static void
process(struct trc_export *e, struct trc_xp_source *s)
{
	event_start(e, "\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
	trc_json_int(&e->line, s->pid);
	trc_buf_adds(&e->line, ",\"args\":{\"name\":\"ruby ");
	trc_json_int(&e->line, s->pid);
	trc_buf_adds(&e->line, "\"}}");
	trc_xp_emit(e);
}

static void
thread(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th)
{
	event_start(e, "\"name\":\"thread_name\",\"ph\":\"M\"");
	put_ids(e, s, th);
	trc_buf_adds(&e->line, ",\"args\":{\"name\":");
	trc_xp_json(e, th->name);
	trc_buf_adds(&e->line, "}}");
	trc_xp_emit(e);
}

/* One "X" event; args is a list of JSON members, or NULL. */
static void
complete(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
	 uint32_t frame, uint64_t start, uint64_t dur, const struct trc_buf *args)
{
	int64_t ts = trc_xp_rel(e, start), d = dur > INT64_MAX ? INT64_MAX : (int64_t)dur;

	if (ts < 0) {
		d = d + ts > 0 ? d + ts : 0;
		ts = 0;
	}
	event_start(e, "\"name\":");
	trc_xp_json(e, e->frames[frame].name);
	trc_buf_adds(&e->line, ",\"cat\":\"ruby\",\"ph\":\"X\"");
	put_ids(e, s, th);
	trc_buf_adds(&e->line, ",\"ts\":");
	trc_json_micros(&e->line, ts);
	trc_buf_adds(&e->line, ",\"dur\":");
	trc_json_micros(&e->line, d);
	if (args != NULL && args->len > 0) {
		trc_buf_adds(&e->line, ",\"args\":{");
		trc_buf_add(&e->line, args->data, args->len);
		trc_buf_addc(&e->line, '}');
	}
	trc_buf_addc(&e->line, '}');
	trc_xp_emit(e);
}

static void
ret(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
    const struct trc_xp_span *sp)
{
	complete(e, s, th, sp->frame, sp->start, sp->end - sp->start, sp->args);
}

static void
slow(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
     const struct trc_message *m)
{
	complete(e, s, th, trc_xp_method_frame(s, m->slow.method), m->slow.start_ts,
		 m->slow.duration_ns, NULL);
}

/* A thread-scoped instant event "EXCEPTION Class: message", with the raise site in args. */
static void
exception(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
      const struct trc_message *m)
{
	int64_t ts = trc_xp_rel(e, m->raise.ts);

	event_start(e, "\"name\":\"EXCEPTION ");
	trc_json_str_body(&e->line, m->raise.cls.ptr, m->raise.cls.len);
	trc_buf_adds(&e->line, ": ");
	trc_json_str_body(&e->line, m->raise.message.ptr, m->raise.message.len);
	trc_buf_adds(&e->line, "\",\"cat\":\"ruby\",\"ph\":\"i\",\"s\":\"t\"");
	put_ids(e, s, th);
	trc_buf_adds(&e->line, ",\"ts\":");
	trc_json_micros(&e->line, ts > 0 ? ts : 0);
	trc_buf_adds(&e->line, ",\"args\":{\"file\":");
	trc_json_str(&e->line, m->raise.path.ptr, m->raise.path.len);
	trc_buf_adds(&e->line, ",\"line\":");
	trc_json_int(&e->line, m->raise.line);
	trc_buf_adds(&e->line, "}}");
	trc_xp_emit(e);
}

/* The first event on one of our own tracks in a process names it. */
static void
own_track(struct trc_export *e, const struct trc_xp_source *s, pid_t tid, const char *name)
{
	struct chrome *c = e->fs;

	for (size_t i = 0; i < c->nnamed; i += 2)
		if (c->named[i] == s->pid && c->named[i + 1] == tid)
			return;
	c->named = xreallocarray(c->named, c->nnamed + 2, sizeof(*c->named));
	c->named[c->nnamed++] = s->pid;
	c->named[c->nnamed++] = tid;
	event_start(e, "\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
	trc_json_int(&e->line, s->pid);
	trc_buf_adds(&e->line, ",\"tid\":");
	trc_json_int(&e->line, tid);
	trc_buf_adds(&e->line, ",\"args\":{\"name\":\"");
	trc_buf_adds(&e->line, name);
	trc_buf_adds(&e->line, "\"}}");
	trc_xp_emit(e);
}

/* "GC major (nofree)" on the GC track, as long as its pause, with the thread it ran on. */
static void
gc(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
   const struct trc_message *m)
{
	int64_t ts = trc_xp_rel(e, m->gc.start_ts);
	uint64_t d = m->gc.pause_ns;

	own_track(e, s, GC_TID, "GC");
	event_start(e, m->gc.major ? "\"name\":\"GC major" : "\"name\":\"GC minor");
	if (m->gc.reason.len > 0) {
		trc_buf_adds(&e->line, " (");
		trc_json_str_body(&e->line, m->gc.reason.ptr, m->gc.reason.len);
		trc_buf_addc(&e->line, ')');
	}
	trc_buf_adds(&e->line, "\",\"cat\":\"gc\",\"ph\":\"X\",\"pid\":");
	trc_json_int(&e->line, s->pid);
	trc_buf_adds(&e->line, ",\"tid\":" DECIMAL(GC_TID) ",\"ts\":");
	trc_json_micros(&e->line, ts > 0 ? ts : 0);
	trc_buf_adds(&e->line, ",\"dur\":");
	trc_json_micros(&e->line, d > INT64_MAX ? INT64_MAX : (int64_t)d);
	if (th != NULL) {
		trc_buf_adds(&e->line, ",\"args\":{\"thread\":");
		trc_xp_json(e, th->name);
		trc_buf_addc(&e->line, '}');
	}
	trc_buf_addc(&e->line, '}');
	trc_xp_emit(e);
}

/*
 * "TITLE text" (TRC_MARKS) as an instant event: on its thread's track, or on the process's
 * "threads" track when it names no traced thread.
 */
static void
mark(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
     const struct trc_message *m)
{
	const struct trc_mark_type *k = trc_mark_type(m->type);
	int64_t ts = trc_xp_rel(e, m->mark.ts);

	if (th == NULL)
		own_track(e, s, THREADS_TID, "threads");
	event_start(e, "\"name\":\"");
	trc_json_str_body(&e->line, k->title, strlen(k->title));
	if (m->mark.text.len > 0) {
		trc_buf_addc(&e->line, ' ');
		trc_json_str_body(&e->line, m->mark.text.ptr, m->mark.text.len);
	}
	trc_buf_adds(&e->line, "\",\"cat\":\"ruby\",\"ph\":\"i\",\"s\":\"t\"");
	if (th != NULL) {
		put_ids(e, s, th);
	} else {
		trc_buf_adds(&e->line, ",\"pid\":");
		trc_json_int(&e->line, s->pid);
		trc_buf_adds(&e->line, ",\"tid\":" DECIMAL(THREADS_TID));
	}
	trc_buf_adds(&e->line, ",\"ts\":");
	trc_json_micros(&e->line, ts > 0 ? ts : 0);
	trc_buf_addc(&e->line, '}');
	trc_xp_emit(e);
}

static void
end(struct trc_export *e)
{
	trc_buf_adds(&e->line, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":");
	trc_json_str(&e->line, e->opts.tool, strlen(e->opts.tool));
	trc_buf_adds(&e->line, "}}\n");
	trc_xp_emit(e);
}

static void
free_chrome(struct trc_export *e)
{
	struct chrome *c = e->fs;

	if (c != NULL)
		free(c->named);
	free(e->fs);
}

const struct trc_xp_format trc_xp_chrome = {
	.begin = begin,
	.process = process,
	.thread = thread,
	.ret = ret,
	.raise = exception,
	.slow = slow,
	.gc = gc,
	.mark = mark,
	.end = end,
	.free = free_chrome,
};
