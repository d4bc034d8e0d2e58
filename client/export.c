/* export.c: the exporters' core: format table, per-target tables, call stacks, nesting repair. */
#include "export.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_format.h"
#include "json.h"
#include "trace.h"
#include "xmalloc.h"

static const struct {
	const char *name;
	const struct trc_xp_format *fmt;        /* NULL: the call-tree printer */
	bool document;                          /* one JSON document: no --append */
} formats[] = {
	[TRC_FORMAT_TEXT] = { "text", NULL, false },
	[TRC_FORMAT_CHROME] = { "chrome", &trc_xp_chrome, true },
	[TRC_FORMAT_SPEEDSCOPE] = { "speedscope", &trc_xp_speedscope, true },
	[TRC_FORMAT_COLLAPSED] = { "collapsed", &trc_xp_collapsed, false },
	[TRC_FORMAT_JSONL] = { "jsonl", &trc_xp_jsonl, false },
};
#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

int
trc_format_parse(const char *name, enum trc_format *f)
{
	for (size_t i = 0; i < NFORMATS; i++) {
		if (strcmp(formats[i].name, name) == 0) {
			*f = (enum trc_format)i;
			return 0;
		}
	}
	return -1;
}

const char *
trc_format_name(enum trc_format f)
{
	return (size_t)f < NFORMATS ? formats[f].name : "?";
}

bool
trc_format_is_document(enum trc_format f)
{
	return (size_t)f < NFORMATS && formats[f].document;
}

/* ---- helpers for the formats ---- */

void
trc_xp_emit(struct trc_export *e)
{
	trc_output_write(e->out, e->line.data, e->line.len);
	e->line.len = 0;
}

const char *
trc_xp_str(const struct trc_export *e, uint32_t id, size_t *len)
{
	return trc_intern_str(&e->strings, id, len);
}

void
trc_xp_json(struct trc_export *e, uint32_t id)
{
	size_t len;
	const char *s = trc_intern_str(&e->strings, id, &len);

	trc_json_str(&e->line, s, len);
}

uint32_t
trc_xp_intern(struct trc_export *e, const char *p, size_t n)
{
	return trc_intern_id(&e->strings, p, n);
}

/* ---- tables ---- */

static int
fail(struct trc_xp_source *s, const char *what, uint64_t value)
{
	snprintf(s->error, sizeof(s->error), "%s %" PRIu64 " is out of range", what, value);
	return -1;
}

static uint32_t
frame_id(struct trc_export *e, uint32_t name, uint32_t file, int32_t line)
{
	uint32_t key[3] = { name, file, (uint32_t)line };
	uint32_t id = trc_intern_id(&e->frame_keys, key, sizeof(key));

	if (id == e->nframes) {
		if (e->nframes == e->frames_cap) {
			e->frames_cap = e->frames_cap ? e->frames_cap * 2 : 64;
			e->frames = xreallocarray(e->frames, e->frames_cap, sizeof(*e->frames));
		}
		e->frames[e->nframes++] = (struct trc_xp_frame){ name, file, line };
	}
	return id;
}

uint32_t
trc_xp_method_frame(struct trc_xp_source *s, uint32_t idx)
{
	if (idx < s->nmethods && s->methods[idx] != 0)
		return s->methods[idx] - 1;
	return frame_id(s->e, trc_xp_intern(s->e, "(unknown)", 9), trc_xp_intern(s->e, "", 0), 0);
}

static void
name_thread(struct trc_export *e, struct trc_xp_thread *th, uint32_t idx, struct trc_str name)
{
	char dflt[24];

	if (name.len > 0) {
		th->name = trc_xp_intern(e, name.ptr, name.len);
	} else {
		snprintf(dflt, sizeof(dflt), "thread %" PRIu32, idx);
		th->name = trc_xp_intern(e, dflt, strlen(dflt));
	}
	th->named = true;
}

/* The thread an event names; on its first event the format hears of it (and of the target). */
static struct trc_xp_thread *
thread_get(struct trc_xp_source *s, uint32_t idx)
{
	struct trc_export *e = s->e;
	struct trc_xp_thread *th;

	if (idx >= TRC_TRACE_MAX_THREADS) {
		fail(s, "thread index", idx);
		return NULL;
	}
	if (idx >= s->nthreads)
		s->threads = xgrowzero(s->threads, &s->nthreads, idx, sizeof(*s->threads));
	th = &s->threads[idx];
	if (!th->named)
		name_thread(e, th, idx, (struct trc_str){ "", 0 });
	if (!s->started) {
		s->started = true;
		if (e->fmt->process)
			e->fmt->process(e, s);
	}
	if (!th->used) {
		th->used = true;
		th->idx = idx;
		if (e->fmt->thread)
			e->fmt->thread(e, s, th);
	}
	return th;
}

static void
saw(struct trc_xp_source *s, uint64_t ts)
{
	if (!s->e->have_t0) {
		s->e->have_t0 = true;
		s->e->t0 = ts;
	}
	if (ts > s->last_ts)
		s->last_ts = ts;
}

/* ---- stacks ---- */

static int
push(struct trc_xp_source *s, struct trc_xp_thread *th, uint32_t frame, uint64_t start)
{
	struct trc_xp_call *c;

	if (th->depth == th->cap) {
		uint32_t cap = th->cap ? th->cap * 2 : 64;

		if (th->cap >= TRC_TRACE_MAX_DEPTH)
			return fail(s, "call depth", th->cap);
		th->stack = xreallocarray(th->stack, cap, sizeof(*th->stack));
		memset(th->stack + th->cap, 0, (size_t)(cap - th->cap) * sizeof(*th->stack));
		th->cap = cap;
	}
	c = &th->stack[th->depth++];
	c->frame = frame;
	c->start = start;
	c->end = 0;
	c->child_ns = 0;
	c->args.len = 0;        /* the buffer itself is reused */
	return 0;
}

/* Ends the call on top of th's stack at end: the format's ret, then its time goes to the caller. */
static void
pop(struct trc_xp_source *s, struct trc_xp_thread *th, uint64_t end, bool returned)
{
	struct trc_xp_call *c = &th->stack[th->depth - 1];
	uint64_t dur = end > c->start ? end - c->start : 0;
	struct trc_xp_span sp = {
		.frame = c->frame, .depth = th->depth - 1, .start = c->start, .end = c->start + dur,
		.self_ns = dur > c->child_ns ? dur - c->child_ns : 0, .returned = returned,
		.args = &c->args,
	};

	s->e->fmt->ret(s->e, s, th, &sp);
	if (--th->depth > 0)
		th->stack[th->depth - 1].child_ns += dur;
}

/* The call waiting for its expressions is complete: tell the format. */
static void
flush_pending(struct trc_xp_source *s)
{
	struct trc_xp_thread *th;

	if (!s->pending)
		return;
	s->pending = false;
	th = &s->threads[s->pending_thread];
	if (th->depth > 0 && s->e->fmt->call)
		s->e->fmt->call(s->e, s, th);
}

static int
cmp_slow(const void *a, const void *b)
{
	const struct trc_xp_slow *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;        /* the outer one first */
	return x->depth < y->depth ? -1 : x->depth > y->depth;
}

/*
 * Slow calls arrive as they return, innermost first: sorted by start (outer first on ties)
 * they replay as properly nested calls and returns. A call that overlaps its caller's end
 * (lost events) is cut there.
 */
static int
replay_slow(struct trc_xp_source *s, struct trc_xp_thread *th)
{
	uint32_t base = th->depth;
	int rc = 0;

	qsort(th->slow, th->nslow, sizeof(*th->slow), cmp_slow);
	for (size_t i = 0; i < th->nslow && rc == 0; i++) {
		const struct trc_xp_slow *sl = &th->slow[i];
		uint64_t end = sl->end;

		while (th->depth > base && th->stack[th->depth - 1].end <= sl->start)
			pop(s, th, th->stack[th->depth - 1].end, true);
		if (th->depth > base && end > th->stack[th->depth - 1].end)
			end = th->stack[th->depth - 1].end;
		if ((rc = push(s, th, sl->frame, sl->start)) == 0) {
			th->stack[th->depth - 1].end = end;
			if (s->e->fmt->call)
				s->e->fmt->call(s->e, s, th);
		}
	}
	while (th->depth > base)
		pop(s, th, th->stack[th->depth - 1].end, true);
	th->nslow = 0;
	return rc;
}

/* ---- events ---- */

static int
on_method(struct trc_xp_source *s, const struct trc_message *m)
{
	struct trc_export *e = s->e;
	uint32_t idx = m->method.idx, name;
	struct trc_buf b;

	if (idx >= TRC_TRACE_MAX_METHODS)
		return fail(s, "method index", idx);
	if (idx >= s->nmethods)
		s->methods = xgrowzero(s->methods, &s->nmethods, idx, sizeof(*s->methods));
	trc_buf_init(&b);
	if (m->method.cls.len > 0) {
		trc_buf_add(&b, m->method.cls.ptr, m->method.cls.len);
		trc_buf_add(&b, m->method.sep.ptr, m->method.sep.len);
	}
	trc_buf_add(&b, m->method.name.ptr, m->method.name.len);
	name = trc_xp_intern(e, b.data, b.len);
	trc_buf_release(&b);
	s->methods[idx] = frame_id(e, name, trc_xp_intern(e, m->method.path.ptr, m->method.path.len),
				   m->method.line) + 1;
	return 0;
}

static int
on_thread(struct trc_xp_source *s, const struct trc_message *m)
{
	uint32_t idx = m->thread.idx;
	struct trc_xp_thread *th;

	if (idx >= TRC_TRACE_MAX_THREADS)
		return fail(s, "thread index", idx);
	if (idx >= s->nthreads)
		s->threads = xgrowzero(s->threads, &s->nthreads, idx, sizeof(*s->threads));
	th = &s->threads[idx];
	name_thread(s->e, th, idx, m->thread.name);
	if (th->used && s->e->fmt->thread)     /* renamed after its first event */
		s->e->fmt->thread(s->e, s, th);
	return 0;
}

static int
on_call(struct trc_xp_source *s, const struct trc_message *m)
{
	struct trc_xp_thread *th;

	flush_pending(s);
	if ((th = thread_get(s, m->call.thread)) == NULL)
		return -1;
	saw(s, m->call.ts);
	if (push(s, th, trc_xp_method_frame(s, m->call.method), m->call.ts) < 0)
		return -1;
	s->pending = true;
	s->pending_thread = m->call.thread;
	return 0;
}

static int
on_return(struct trc_xp_source *s, const struct trc_message *m)
{
	struct trc_xp_thread *th;
	uint32_t frame;
	int64_t k;

	flush_pending(s);
	if ((th = thread_get(s, m->call.thread)) == NULL)
		return -1;
	saw(s, m->call.ts);
	frame = trc_xp_method_frame(s, m->call.method);
	for (k = (int64_t)th->depth - 1; k >= 0 && th->stack[k].frame != frame; k--)
		;
	if (k < 0)              /* its call came before the trace began, or was lost */
		return 0;
	while (th->depth > (uint32_t)k + 1)
		pop(s, th, m->call.ts, false);
	pop(s, th, m->call.ts, true);
	return 0;
}

/* "expr":"value" joins the args of the thread's latest call. */
static int
on_expr(struct trc_xp_source *s, const struct trc_message *m)
{
	const struct trc_export_opts *o = &s->e->opts;
	struct trc_xp_thread *th = thread_get(s, m->expr.thread);
	uint32_t spec = m->expr.spec, expr = m->expr.expr;
	const char *name = "?";
	struct trc_buf *args;

	if (th == NULL)
		return -1;
	if (th->depth == 0)
		return 0;
	if (spec < o->nspecs && expr < o->specs[spec].nexprs)
		name = o->specs[spec].exprs[expr];
	args = &th->stack[th->depth - 1].args;
	if (args->len > 0)
		trc_buf_addc(args, ',');
	trc_json_str(args, name, strlen(name));
	trc_buf_addc(args, ':');
	trc_json_str(args, m->expr.text.ptr, m->expr.text.len);
	return 0;
}

static int
on_raise(struct trc_xp_source *s, const struct trc_message *m)
{
	struct trc_xp_thread *th;

	flush_pending(s);
	if ((th = thread_get(s, m->raise.thread)) == NULL)
		return -1;
	saw(s, m->raise.ts);
	if (s->e->fmt->raise)
		s->e->fmt->raise(s->e, s, th, m);
	return 0;
}

static int
on_slow(struct trc_xp_source *s, const struct trc_message *m)
{
	struct trc_xp_thread *th;
	struct trc_xp_slow *sl;

	flush_pending(s);
	if ((th = thread_get(s, m->slow.thread)) == NULL)
		return -1;
	if (m->slow.depth >= TRC_TRACE_MAX_DEPTH)
		return fail(s, "call depth", m->slow.depth);
	saw(s, m->slow.start_ts);
	saw(s, m->slow.start_ts + m->slow.duration_ns);
	if (s->e->fmt->slow) {
		s->e->fmt->slow(s->e, s, th, m);
		return 0;
	}
	if (th->nslow == th->slow_cap) {
		th->slow_cap = th->slow_cap ? th->slow_cap * 2 : 16;
		th->slow = xreallocarray(th->slow, th->slow_cap, sizeof(*th->slow));
	}
	sl = &th->slow[th->nslow++];
	*sl = (struct trc_xp_slow){ trc_xp_method_frame(s, m->slow.method), m->slow.depth,
				    m->slow.start_ts, m->slow.start_ts + m->slow.duration_ns };
	return m->slow.depth == 0 ? replay_slow(s, th) : 0;
}

static int
on_lost(struct trc_xp_source *s, const struct trc_message *m)
{
	char tag[24] = "";

	if (s->e->opts.label_pids)
		snprintf(tag, sizeof(tag), "[%d] ", (int)s->pid);
	s->lost += m->lost.count;
	trc_output_note(s->e->out, "%s%" PRIu64 " events lost", tag, m->lost.count);
	return 0;
}

/* Handlers of the trace events, indexed by type - TRC_EV_METHOD. */
static int (*const handlers[])(struct trc_xp_source *, const struct trc_message *) = {
	[TRC_EV_METHOD - TRC_EV_METHOD] = on_method,
	[TRC_EV_THREAD - TRC_EV_METHOD] = on_thread,
	[TRC_EV_CALL - TRC_EV_METHOD] = on_call,
	[TRC_EV_RETURN - TRC_EV_METHOD] = on_return,
	[TRC_EV_RAISE - TRC_EV_METHOD] = on_raise,
	[TRC_EV_EXPR - TRC_EV_METHOD] = on_expr,
	[TRC_EV_SLOW - TRC_EV_METHOD] = on_slow,
	[TRC_EV_LOST - TRC_EV_METHOD] = on_lost,
};

/* ---- the sink of one target ---- */

static int
source_feed(void *impl, const struct trc_message *m)
{
	struct trc_xp_source *s = impl;
	uint32_t i = m->type - TRC_EV_METHOD;

	if (s->ended || m->type < TRC_EV_METHOD || i >= sizeof(handlers) / sizeof(handlers[0]))
		return 0;
	return handlers[i](s, m);
}

static void
source_set_clock(void *impl, uint64_t mono_ns, uint64_t real_ns)
{
	(void)impl, (void)mono_ns, (void)real_ns;
}

static const char *
source_error(const void *impl)
{
	return ((const struct trc_xp_source *)impl)->error;
}

static uint64_t
source_lost(const void *impl)
{
	return ((const struct trc_xp_source *)impl)->lost;
}

/* The target is done: calls still open end at its last timestamp, slow calls replay. */
static void
source_end(void *impl)
{
	struct trc_xp_source *s = impl;

	if (s->ended)
		return;
	flush_pending(s);
	for (uint32_t i = 0; i < s->nthreads; i++) {
		struct trc_xp_thread *th = &s->threads[i];

		while (th->depth > 0)
			pop(s, th, s->last_ts, false);
		if (th->nslow > 0)
			replay_slow(s, th);
	}
	s->ended = true;
}

static const struct trc_sink_ops source_ops = {
	.feed = source_feed,
	.set_clock = source_set_clock,
	.error = source_error,
	.lost = source_lost,
	.close = source_end,
};

struct trc_sink
trc_export_sink(struct trc_export *e, pid_t pid)
{
	struct trc_xp_source *s = xcalloc(1, sizeof(*s));

	s->e = e;
	s->pid = pid;
	e->sources = xreallocarray(e->sources, e->nsources + 1, sizeof(*e->sources));
	e->sources[e->nsources++] = s;
	return (struct trc_sink){ &source_ops, s };
}

/* ---- the exporter ---- */

struct trc_export *
trc_export_new(struct trc_output *out, const struct trc_export_opts *opts)
{
	struct trc_export *e = xcalloc(1, sizeof(*e));

	e->out = out;
	e->opts = *opts;
	e->fmt = formats[opts->format].fmt;
	if (e->fmt->begin)
		e->fmt->begin(e);
	return e;
}

void
trc_export_finish(struct trc_export *e)
{
	if (e->finished)
		return;
	for (size_t i = 0; i < e->nsources; i++)
		source_end(e->sources[i]);
	if (e->fmt->end)
		e->fmt->end(e);
	e->finished = true;
}

static void
free_source(struct trc_export *e, struct trc_xp_source *s)
{
	for (uint32_t i = 0; i < s->nthreads; i++) {
		struct trc_xp_thread *th = &s->threads[i];

		for (uint32_t k = 0; k < th->cap; k++)
			trc_buf_release(&th->stack[k].args);
		free(th->stack);
		free(th->slow);
		if (th->fmt != NULL && e->fmt->free_thread)
			e->fmt->free_thread(th->fmt);
	}
	free(s->threads);
	free(s->methods);
	free(s);
}

void
trc_export_free(struct trc_export *e)
{
	if (e->fmt->free)
		e->fmt->free(e);
	for (size_t i = 0; i < e->nsources; i++)
		free_source(e, e->sources[i]);
	free(e->sources);
	trc_intern_release(&e->strings);
	trc_intern_release(&e->frame_keys);
	free(e->frames);
	trc_buf_release(&e->line);
	free(e);
}
