/* export.c: the exporters' core: format table, frames, properly nested calls for the formats. */
#include "export.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "export_format.h"
#include "json.h"
#include "replay.h"
#include "xmalloc.h"

/* An exporter's hooks, from TRC_FORMATS' exporter column: the printer has none. */
#define XP_0(name) NULL
#define XP_1(name) &trc_xp_##name

static const struct {
	const char *name;
	const struct trc_xp_format *fmt;        /* NULL: the call-tree printer */
	const char *document;                   /* one per file: no --append */
	bool profile;                           /* --top profile writes it */
} formats[] = {
#define TRC_X(NAME, name, exporter, document, profile) \
	[TRC_FORMAT_##NAME] = { #name, XP_##exporter(name), document, profile },
	TRC_FORMATS(TRC_X)
#undef TRC_X
};
#define NFORMATS (sizeof(formats) / sizeof(formats[0]))
_Static_assert(NFORMATS == TRC_FORMAT_COUNT, "a row of formats[] per TRC_FORMATS");

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

const char *
trc_format_document(enum trc_format f)
{
	return (size_t)f < NFORMATS ? formats[f].document : NULL;
}

const char *
trc_format_list(bool profile)
{
	static char lists[2][256];
	char *out = lists[profile];
	size_t n = 0, left = 0;

	if (out[0] != '\0')
		return out;
	for (size_t i = 0; i < NFORMATS; i++)
		left += !profile || formats[i].profile;
	for (size_t i = 0; i < NFORMATS; i++) {
		if (profile && !formats[i].profile)
			continue;
		left--;
		n += (size_t)snprintf(out + n, sizeof(lists[0]) - n, "%s%s", formats[i].name,
				      left > 1 ? ", " : left == 1 ? " or " : "");
	}
	return out;
}

static bool
ends_with(const char *s, size_t n, const char *tail)
{
	size_t k = strlen(tail);

	return n >= k && strncasecmp(s + n - k, tail, k) == 0;
}

bool
trc_format_html(const char *path)
{
	size_t n = strlen(path);

	if (ends_with(path, n, ".gz"))
		n -= 3;
	else if (ends_with(path, n, ".zst"))
		n -= 4;
	return ends_with(path, n, ".html") || ends_with(path, n, ".htm");
}

int
trc_split_parse(const char *name, enum trc_split *s)
{
	if (strcmp(name, "process") == 0)
		*s = TRC_SPLIT_PROCESS;
	else if (strcmp(name, "thread") == 0)
		*s = TRC_SPLIT_THREAD;
	else
		return -1;
	return 0;
}

/* ---- helpers for the formats ---- */

void
trc_xp_fail(struct trc_export *e, const char *fmt, ...)
{
	va_list ap;

	if (e->failed[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(e->failed, sizeof(e->failed), fmt, ap);
	va_end(ap);
	trc_output_note(e->out, "the %s file cannot be made whole: %s", formats[e->opts.format].name,
			e->failed);
}

const char *
trc_export_failed(const struct trc_export *e)
{
	return e->failed[0] != '\0' ? e->failed : NULL;
}

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

/* ---- frames and threads ---- */

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
	uint32_t frame;

	if (trc_replay_method(&s->replay, idx, &frame))
		return frame;
	return frame_id(s->e, trc_xp_intern(s->e, "(unknown)", 9), trc_xp_intern(s->e, "", 0), 0);
}

/* TRC_EV_METHOD: the method's frame, "Class#meth" at its file and line. */
static uint32_t
on_method(void *user, const struct trc_message *m)
{
	struct trc_xp_source *s = user;
	struct trc_export *e = s->e;
	uint32_t name;
	struct trc_buf b;

	trc_buf_init(&b);
	if (m->method.cls.len > 0) {
		trc_buf_add(&b, m->method.cls.ptr, m->method.cls.len);
		trc_buf_add(&b, m->method.sep.ptr, m->method.sep.len);
	}
	trc_buf_add(&b, m->method.name.ptr, m->method.name.len);
	name = trc_xp_intern(e, b.data, b.len);
	trc_buf_release(&b);
	return frame_id(e, name, trc_xp_intern(e, m->method.path.ptr, m->method.path.len),
			m->method.line);
}

static void
on_name(void *user, void *thread, struct trc_str name)
{
	struct trc_xp_source *s = user;
	struct trc_xp_thread *th = thread;

	th->name = trc_xp_intern(s->e, name.ptr, name.len);
	if (th->base.seen && s->e->fmt->thread)        /* renamed after its first event */
		s->e->fmt->thread(s->e, s, th);
}

/* On the target's first event the format hears of it. */
static void
start_source(struct trc_xp_source *s)
{
	if (!s->started) {
		s->started = true;
		if (s->e->fmt->process)
			s->e->fmt->process(s->e, s);
	}
}

/* On a thread's first event the format hears of it (and, on the target's, of the target). */
static void
on_first(void *user, void *thread)
{
	struct trc_xp_source *s = user;
	struct trc_export *e = s->e;

	start_source(s);
	if (e->fmt->thread)
		e->fmt->thread(e, s, thread);
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
push(struct trc_xp_source *s, struct trc_xp_thread *th, uint32_t method, uint32_t frame,
     uint64_t start)
{
	struct trc_xp_call *c = trc_replay_push(&s->replay, &th->base, method, start);

	if (c == NULL)
		return -1;
	c->frame = frame;
	c->end = 0;
	c->child_ns = 0;
	c->args.len = 0;        /* the buffer itself is reused */
	return 0;
}

/* The call on top of th's stack. */
static struct trc_xp_call *
top(const struct trc_xp_thread *th)
{
	return &trc_xp_calls(th)[th->base.depth - 1];
}

/* Ends the call on top of th's stack at end: the format's ret, then its time goes to the caller. */
static void
pop(struct trc_xp_source *s, struct trc_xp_thread *th, uint64_t end, bool returned)
{
	struct trc_xp_call *c = top(th);
	uint64_t start = c->base.start, dur = end > start ? end - start : 0;
	struct trc_xp_span sp = {
		.frame = c->frame, .depth = th->base.depth - 1, .start = start, .end = start + dur,
		.self_ns = dur > c->child_ns ? dur - c->child_ns : 0, .returned = returned,
		.args = &c->args,
	};

	s->e->fmt->ret(s->e, s, th, &sp);
	if (--th->base.depth > 0)
		top(th)->child_ns += dur;
}

/* The call waiting for its expressions is complete: tell the format. */
static void
flush_pending(struct trc_xp_source *s)
{
	struct trc_xp_thread *th;

	if (!s->pending)
		return;
	s->pending = false;
	th = trc_xp_thread(s, s->pending_thread);
	if (th->base.depth > 0 && s->e->fmt->call)
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
	uint32_t base = th->base.depth;
	int rc = 0;

	qsort(th->slow, th->nslow, sizeof(*th->slow), cmp_slow);
	for (size_t i = 0; i < th->nslow && rc == 0; i++) {
		const struct trc_xp_slow *sl = &th->slow[i];
		uint64_t end = sl->end;

		while (th->base.depth > base && top(th)->end <= sl->start)
			pop(s, th, top(th)->end, true);
		if (th->base.depth > base && end > top(th)->end)
			end = top(th)->end;
		if ((rc = push(s, th, sl->method, sl->frame, sl->start)) == 0) {
			top(th)->end = end;
			if (s->e->fmt->call)
				s->e->fmt->call(s->e, s, th);
		}
	}
	while (th->base.depth > base)
		pop(s, th, top(th)->end, true);
	th->nslow = 0;
	return rc;
}

/* ---- events ---- */

static int
on_call(void *user, void *thread, const struct trc_message *m)
{
	struct trc_xp_source *s = user;
	struct trc_xp_thread *th = thread;
	uint32_t frame;

	flush_pending(s);
	saw(s, m->call.ts);
	frame = trc_xp_method_frame(s, m->call.method);
	if (push(s, th, m->call.method, frame, m->call.ts) < 0)
		return -1;
	s->pending = true;
	s->pending_thread = m->call.thread;
	return 0;
}

/*
 * Returns match the frame of the call, not its method index: a method defined again, or two
 * indexes of one name, file and line, are one frame to the formats.
 */
static int
on_return(void *user, void *thread, const struct trc_message *m)
{
	struct trc_xp_source *s = user;
	struct trc_xp_thread *th = thread;
	uint32_t frame;
	int64_t k;

	flush_pending(s);
	saw(s, m->call.ts);
	frame = trc_xp_method_frame(s, m->call.method);
	for (k = (int64_t)th->base.depth - 1; k >= 0 && trc_xp_calls(th)[k].frame != frame; k--)
		;
	if (k < 0)              /* its call came before the trace began, or was lost */
		return 0;
	while (th->base.depth > (uint32_t)k + 1)
		pop(s, th, m->call.ts, false);
	pop(s, th, m->call.ts, true);
	return 0;
}

/* "expr":"value" joins the args of the thread's latest call. */
static int
on_expr(void *user, void *thread, const struct trc_message *m)
{
	struct trc_xp_source *s = user;
	struct trc_xp_thread *th = thread;
	const struct trc_export_opts *o = &s->e->opts;
	uint32_t spec = m->expr.spec, expr = m->expr.expr;
	const char *name = "?";
	struct trc_buf *args;

	if (th->base.depth == 0)
		return 0;
	if (spec < o->nspecs && expr < o->specs[spec].nexprs)
		name = o->specs[spec].exprs[expr];
	args = &top(th)->args;
	if (args->len > 0)
		trc_buf_addc(args, ',');
	trc_json_str(args, name, strlen(name));
	trc_buf_addc(args, ':');
	trc_json_str(args, m->expr.text.ptr, m->expr.text.len);
	return 0;
}

static int
on_raise(void *user, void *thread, const struct trc_message *m)
{
	struct trc_xp_source *s = user;

	flush_pending(s);
	saw(s, m->raise.ts);
	if (s->e->fmt->raise)
		s->e->fmt->raise(s->e, s, thread, m);
	return 0;
}

static int
on_slow(void *user, void *thread, const struct trc_message *m)
{
	struct trc_xp_source *s = user;
	struct trc_xp_thread *th = thread;
	uint64_t start = m->slow.start_ts, end = start + m->slow.duration_ns;

	flush_pending(s);
	saw(s, start);
	saw(s, end);
	if (s->e->fmt->slow) {
		s->e->fmt->slow(s->e, s, th, m);
		return 0;
	}
	if (th->nslow == th->slow_cap) {
		th->slow_cap = th->slow_cap ? th->slow_cap * 2 : 16;
		th->slow = xreallocarray(th->slow, th->slow_cap, sizeof(*th->slow));
	}
	th->slow[th->nslow++] = (struct trc_xp_slow){
		m->slow.method, trc_xp_method_frame(s, m->slow.method), m->slow.depth, start, end,
	};
	return m->slow.depth == 0 ? replay_slow(s, th) : 0;
}

static int
on_gc(void *user, void *thread, const struct trc_message *m)
{
	struct trc_xp_source *s = user;

	flush_pending(s);
	saw(s, m->gc.start_ts);
	start_source(s);
	if (s->e->fmt->gc)
		s->e->fmt->gc(s->e, s, thread, m);
	return 0;
}

static int
on_mark(void *user, void *thread, const struct trc_message *m)
{
	struct trc_xp_source *s = user;

	flush_pending(s);
	saw(s, m->mark.ts);
	start_source(s);
	if (s->e->fmt->mark)
		s->e->fmt->mark(s->e, s, thread, m);
	return 0;
}

static int
on_lost(void *user, const struct trc_message *m)
{
	struct trc_xp_source *s = user;
	char tag[24] = "";

	if (s->e->opts.label_pids)
		snprintf(tag, sizeof(tag), "[%d] ", (int)s->pid);
	s->lost += m->lost.count;
	trc_output_note(s->e->out, "%s%" PRIu64 " events lost", tag, m->lost.count);
	return 0;
}

static const struct trc_replay_ops replay_ops = {
	.thread_size = sizeof(struct trc_xp_thread),
	.call_size = sizeof(struct trc_xp_call),
	.method = on_method,
	.name = on_name,
	.first = on_first,
	.call = on_call,
	.ret = on_return,
	.raise = on_raise,
	.expr = on_expr,
	.slow = on_slow,
	.lost = on_lost,
	.gc = on_gc,
	.mark = on_mark,
};

/* ---- the sink of one target ---- */

static int
source_feed(void *impl, const struct trc_message *m)
{
	struct trc_xp_source *s = impl;

	return s->ended ? 0 : trc_replay_feed(&s->replay, m);
}

static void
source_set_clock(void *impl, uint64_t mono_ns, uint64_t real_ns)
{
	(void)impl, (void)mono_ns, (void)real_ns;
}

static const char *
source_error(const void *impl)
{
	return ((const struct trc_xp_source *)impl)->replay.error;
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
	for (uint32_t i = 0; i < s->replay.nthreads; i++) {
		struct trc_xp_thread *th = trc_xp_thread(s, i);

		while (th->base.depth > 0)
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
	trc_replay_init(&s->replay, &replay_ops, s);
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
trc_export_app_dir(struct trc_export *e, const char *dir)
{
	for (size_t i = 0; i < e->napp_dirs; i++)
		if (strcmp(e->app_dirs[i], dir) == 0)
			return;
	e->app_dirs = xreallocarray(e->app_dirs, e->napp_dirs + 1, sizeof(*e->app_dirs));
	e->app_dirs[e->napp_dirs++] = xstrdup(dir);
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
	for (uint32_t i = 0; i < s->replay.nthreads; i++) {
		struct trc_xp_thread *th = trc_xp_thread(s, i);

		for (uint32_t k = 0; k < th->base.cap; k++)
			trc_buf_release(&trc_xp_calls(th)[k].args);
		free(th->slow);
		if (th->fmt != NULL && e->fmt->free_thread)
			e->fmt->free_thread(th->fmt);
	}
	trc_replay_release(&s->replay);
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
	for (size_t i = 0; i < e->napp_dirs; i++)
		free(e->app_dirs[i]);
	free(e->app_dirs);
	trc_intern_release(&e->strings);
	trc_intern_release(&e->frame_keys);
	free(e->frames);
	trc_buf_release(&e->line);
	free(e);
}
