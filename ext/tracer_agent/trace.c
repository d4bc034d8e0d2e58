/* trace.c: the traced threads' side of the ring: wrapped calls, VM event hooks, exceptions, threads. */
#include "trace.h"

#include <ruby/debug.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "extconf.h"
#include "clock.h"
#include "gc.h"
#include "names.h"
#include "vm.h"
#include "wrap.h"


static struct {
	volatile int armed;     /* hooks may write; cleared at stop and in a forked child */
	uint64_t started;       /* the generation traced: see still_tracing() */
	const struct trc_trace_cfg *cfg;
	struct trc_ring *ring;
	int wake_fd;
	uint64_t wake_at;       /* ring position at which to look whether to wake the consumer */
	rb_event_flag_t global; /* events of the global hook, 0 when none */
	int raise_hook;
	int thread_hook;        /* threads beginning and ending */
	uint64_t events, lost, lost_pending;
	uint64_t slow_ticks;    /* cfg->slow_ns on the traced threads' clock */
} trace;

/*
 * The I/O thread drains the ring every 50 ms while events flow, and every 100 ms after a quiet
 * spell (EVENTS_MS, IDLE_MS in session.c: each wake-up costs CPU); a burst that fills a quarter
 * of it before then wakes it early. One compare per event: the check runs only when the write
 * position passes wake_at.
 */
static void
wake_consumer(void)
{
	uint64_t one = 1;
	size_t quarter = (trace.ring->mask + 1) / 4;

	if (trc_ring_used(trace.ring) >= quarter && write(trace.wake_fd, &one, sizeof(one)) < 0)
		(void)0;        /* a full eventfd already says "wake up" */
	trace.wake_at = trace.ring->head + quarter;
}

static inline void
maybe_wake(void)
{
	if (trace.ring->head >= trace.wake_at)
		wake_consumer();
}

/*
 * Room for one record of n bytes. Events dropped while the ring was full are announced by a
 * LOST record before the next event that fits, so the client sees where the gap is.
 */
static struct trc_rec *
rec_new(size_t n)
{
	struct trc_rec *r;

	if (trace.lost_pending != 0) {
		r = trc_ring_reserve(trace.ring, TRC_REC_SHORT);
		if (r == NULL)
			goto lost;
		memset(r, 0, TRC_REC_SHORT);
		r->type = TRC_REC_LOST;
		r->size = TRC_REC_SHORT;
		r->ts = trace.lost_pending;
		trc_ring_commit(trace.ring, r);
		trace.lost_pending = 0;
	}
	r = trc_ring_reserve(trace.ring, n);
	if (r != NULL)
		return r;
lost:
	trace.lost++;
	trace.lost_pending++;
	maybe_wake();
	return NULL;
}

static inline void
rec_commit(struct trc_rec *r)
{
	trc_ring_commit(trace.ring, r);
	trace.events++;     /* read by the I/O thread only once the hooks are off */
	maybe_wake();
}

static inline void
put_event(uint8_t type, const struct trc_thread *t, uint32_t m, uint64_t ts)
{
	struct trc_rec *r = rec_new(TRC_REC_SHORT);
	if (r == NULL)
		return;
	r->type = type;
	r->nstr = 0;
	r->size = TRC_REC_SHORT;
	r->thread = t->idx;
	r->method = m;
	r->aux = 0;
	r->ts = ts;
	rec_commit(r);
}

/* A record followed by n strings (total bytes: len[0] + ... ), truncated to fit TRC_REC_MAX. */
static void
put_strings(struct trc_rec *head, int n, const char **s, long *len)
{
	size_t room = TRC_REC_MAX - sizeof(struct trc_rec) - (size_t)n * 4, size;
	struct trc_rec *r;
	unsigned char *p;

	for (int i = 0; i < n; i++) {
		if ((size_t)len[i] > room / (size_t)n)
			len[i] = (long)(room / (size_t)n);
	}
	size = sizeof(struct trc_rec) + (size_t)n * 4;
	for (int i = 0; i < n; i++)
		size += (size_t)len[i];
	size = trc_rec_align(size);
	if ((r = rec_new(size)) == NULL)
		return;
	*r = *head;
	r->size = (uint16_t)size;
	r->nstr = (uint8_t)n;
	p = (unsigned char *)(r + 1);
	for (int i = 0; i < n; i++)
		p = trc_rec_put_str(p, s[i], (uint32_t)len[i]);
	rec_commit(r);
}

/* ---- method identity (rare path: the first time a method is seen) ---- */

static int
spec_selects(const struct trc_spec *sp, VALUE klass, ID mid)
{
	if (sp->kind == TRC_SPEC_ANY)
		return sp->mid == mid;
	if (sp->mid != 0 && sp->mid != mid)
		return 0;
	if (sp->kind == TRC_SPEC_SINGLETON)
		return FL_TEST(klass, FL_SINGLETON) && trc_attached_object(klass) == sp->klass;
	return klass == sp->klass;
}

/* The spec that selects (klass, mid) under the global hook: -1 none, -2 all (no spec). */
static int
select_method(VALUE klass, ID mid)
{
	const struct trc_trace_cfg *cfg = trace.cfg;
	if (cfg->flags & TRC_TRACE_FIREHOSE || cfg->nspecs == 0)
		return -2;
	/* Without the global call hook, every selected method was entered by select_one. */
	if (!(trace.global & RUBY_EVENT_CALL))
		return -1;
	for (int i = 0; i < cfg->nspecs; i++)
		if (spec_selects(&cfg->specs[i], klass, mid))
			return i;
	return -1;
}

/* Index of a method seen by the global hook; interning runs once per (class, method). */
static inline uint32_t
method_index(rb_event_flag_t ev, VALUE klass, ID mid)
{
	uint32_t idx = trc_method_find(klass, mid);
	VALUE path = Qnil;
	int line = 0;

	if (idx != UINT32_MAX)
		return idx;
	if (ev & (RUBY_EVENT_CALL | RUBY_EVENT_RETURN)) {
		rb_trace_arg_t *ta = rb_tracearg_from_tracepoint(Qnil);
		path = rb_tracearg_path(ta);
		line = FIX2INT(rb_tracearg_lineno(ta));
	}
	return trc_method_intern(klass, mid, path, line, select_method(klass, mid));
}

/* ---- expressions shown at call time ---- */

/*
 * After a hook ran Ruby (which may switch threads), whether the tracing it began under still
 * runs. Another thread may have detached the client meanwhile: hooks off, and the cfg, the ring
 * and the thread table freed; or even attached a new one. Then the hook must touch none of them.
 */
static inline int
still_tracing(uint64_t started)
{
	return trace.armed && trace.started == started;
}

static VALUE
eval_values(VALUE arg)
{
	return trc_wrap_eval_exprs((const struct trc_wrap_exprs *)arg);
}

static VALUE
inspect_value(VALUE v)
{
	return rb_inspect(v);
}

/*
 * A String the app's Ruby makes for a record (an exception's #message, a thread's #inspect):
 * fn(arg), rescued, with the thread yielded meanwhile; fallback when it raised or gave no
 * String. Qundef when tracing stopped meanwhile, as it may have (see still_tracing()): then the
 * caller touches nothing of it.
 */
static VALUE
text_of(VALUE (*fn)(VALUE), VALUE arg, const char *fallback)
{
	uint64_t started = trace.started;
	int state = 0;
	VALUE text;

	trc_vm_yield_begin();
	text = rb_protect(fn, arg, &state);
	trc_vm_yield_end();
	if (state || !RB_TYPE_P(text, T_STRING)) {
		rb_set_errinfo(Qnil);
		text = rb_str_new_cstr(fallback);
	}
	return still_tracing(started) ? text : Qundef;
}

/*
 * The -m expressions' values, as inspected Strings in values[] (the helper wrap.rb compiled
 * gives them, each rescued): how many, or -1 when tracing stopped meanwhile (still_tracing).
 * The thread is quiet while the helper and #inspect run: the calls they make are not the
 * app's, and are not traced. This must happen before the CALL record, so that the CALL and its
 * EXPR records stay adjacent.
 */
static int
eval_exprs(struct trc_thread *t, const struct trc_wrap_exprs *e, VALUE *values)
{
	uint64_t started = trace.started;
	int state = 0, n = 0;
	VALUE list;

	t->quiet = 1;
	trc_vm_yield_begin();
	list = rb_protect(eval_values, (VALUE)e, &state);
	for (long i = 0; !state && RB_TYPE_P(list, T_ARRAY) && i < RARRAY_LEN(list) && n < TRC_MAX_EXPRS; i++) {
		VALUE v = rb_protect(inspect_value, RARRAY_AREF(list, i), &state);
		if (state) {
			rb_set_errinfo(Qnil);
			state = 0;
			v = rb_str_new_cstr("#<inspect raised>");
		}
		values[n++] = RB_TYPE_P(v, T_STRING) ? v : rb_str_new_cstr("#<inspect gave no String>");
	}
	trc_vm_yield_end();
	if (state)
		rb_set_errinfo(Qnil);
	RB_GC_GUARD(list);
	if (!still_tracing(started))
		return -1;      /* t may be gone with the rest: not touched again */
	t->quiet = 0;
	return n;
}

static void
put_exprs(const struct trc_thread *t, int spec, const VALUE *values, int n)
{
	for (int i = 0; i < n; i++) {
		struct trc_rec head = { .type = TRC_REC_EXPR, .thread = t->idx, .method = (uint32_t)spec, .aux = (uint32_t)i };
		const char *s = RSTRING_PTR(values[i]);
		long len = RSTRING_LEN(values[i]) > TRC_MAX_EXPR_TEXT ? TRC_MAX_EXPR_TEXT : RSTRING_LEN(values[i]);
		put_strings(&head, 1, &s, &len);
	}
}

/* ---- the event paths ---- */

/*
 * The CPU time of the calling thread: a system call (no vDSO for it), paid only by
 * --slowcpu. Under M:N threads a Ruby thread may change native threads in a call, and
 * then its figure is that of the native ones.
 */
static uint64_t
thread_cpu_ns(void)
{
	return trc_clock_read(CLOCK_THREAD_CPUTIME_ID);
}

static void
slow_push(struct trc_thread *t, uint64_t ts)
{
	struct trc_frame *f = trc_thread_frame(t, t->depth);
	if (f != NULL) {
		f->start = ts;
		if (trace.cfg->flags & TRC_TRACE_SLOWCPU)
			f->cpu = thread_cpu_ns();
	}
}

static void
slow_pop(struct trc_thread *t, uint32_t m, uint64_t ts)
{
	struct trc_rec *r;
	uint64_t start, dur;

	if (t->depth >= t->frames_cap)
		return;
	start = t->frames[t->depth].start;
	if (trace.cfg->flags & TRC_TRACE_SLOWCPU) {
		uint64_t cpu = thread_cpu_ns() - t->frames[t->depth].cpu;

		if (cpu < trace.cfg->slow_ns)
			return;
		dur = trc_clock_ticks(cpu);
	} else {
		dur = ts - start;
		if (dur < trace.slow_ticks)
			return;
	}
	if ((r = rec_new(sizeof(struct trc_rec))) == NULL)
		return;
	memset(r, 0, sizeof(*r));
	r->type = TRC_REC_SLOW;
	r->size = sizeof(struct trc_rec);
	r->thread = t->idx;
	r->method = m;
	r->aux = t->depth;
	r->ts = start;
	r->dur = dur;
	rec_commit(r);
}

/* A call of method m begins; exprs: its -m expressions, to show with it (or NULL). */
static inline void
on_call(struct trc_thread *t, uint32_t m, const struct trc_wrap_exprs *exprs)
{
	VALUE values[TRC_MAX_EXPRS];

	if (trace.cfg->flags & TRC_TRACE_SLOW) {
		slow_push(t, trc_clock_now());
	} else if (exprs != NULL) {
		int n = eval_exprs(t, exprs, values);

		if (n < 0)
			return;         /* detached meanwhile: t may be gone with the rest */
		put_event(TRC_REC_CALL, t, m, trc_clock_now());
		put_exprs(t, trc_method_at(m)->spec, values, n);
		RB_GC_GUARD(values[0]);
	} else {
		put_event(TRC_REC_CALL, t, m, trc_clock_now());
	}
	t->depth++;
}

static inline void
on_return(struct trc_thread *t, uint32_t m)
{
	uint64_t ts = trc_clock_now();

	/* A return without its call: the call began before we attached. */
	if (t->depth == 0)
		return;
	t->depth--;
	if (trace.cfg->flags & TRC_TRACE_SLOW)
		slow_pop(t, m, ts);
	else
		put_event(TRC_REC_RETURN, t, m, ts);
}

/* The trace's sink for wrapped calls (wrap.h): on the thread t of the main Ractor. */
static void
sink_enter(struct trc_thread *t, uint32_t m, const struct trc_wrap_exprs *exprs)
{
	if (trace.armed)
		on_call(t, m, exprs);
}

static void
sink_leave(struct trc_thread *t, uint32_t m)
{
	if (trace.armed)
		on_return(t, m);
}

static const struct trc_wrap_sink sink = { sink_enter, sink_leave };

static void
global_event(rb_event_flag_t ev, VALUE self, ID mid, VALUE klass)
{
	struct trc_thread *t;
	uint32_t m;

	if (!trace.armed || (t = trc_thread_current()) == NULL)
		return;
	if (mid == 0 && !rb_frame_method_id_and_class(&mid, &klass))
		return;
	m = method_index(ev, klass, mid);
	if (m == UINT32_MAX || !trc_method_at(m)->selected)
		return;
	if (ev & (RUBY_EVENT_CALL | RUBY_EVENT_C_CALL))
		on_call(t, m, NULL);
	else
		on_return(t, m);
}

static void
global_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	trc_vm_hook_in();
	global_event(ev, self, mid, klass);
	trc_vm_hook_out();
}

/*
 * The text of a raised exception. On Ruby 3.1, did_you_mean and error_highlight decorate
 * NameError's #to_s, and so its #message: the first call runs a spell check over the
 * receiver's methods, reads and parses the file the raise came from, and keeps @corrections on
 * the exception, which the app then sees (#instance_variables). Under -f, every NoMethodError
 * the app raises and rescues paid that in its own thread. Their #original_message is the text
 * without either. From 3.2 on, both decorate #detailed_message instead, and #message is plain.
 */
static ID id_message, id_original_message;
static int decorated_messages;  /* Ruby 3.1: no Exception#detailed_message */

void
trc_trace_init(void)
{
	id_message = rb_intern("message");
	id_original_message = rb_intern("original_message");
	decorated_messages = !rb_method_boundp(rb_eException, rb_intern("detailed_message"), 0);
}

static VALUE
exception_message(VALUE exc)
{
	if (decorated_messages && rb_respond_to(exc, id_original_message))
		return rb_funcall(exc, id_original_message, 0);
	return rb_funcall(exc, id_message, 0);
}

static void
raise_event(void)
{
	struct trc_thread *t;
	rb_trace_arg_t *ta;
	VALUE exc, cname, msg, path;

	if (!trace.armed || (t = trc_thread_current()) == NULL)
		return;
	/* Outside firehose only exceptions that happen inside a traced call are in the tree. */
	if (!(trace.cfg->flags & TRC_TRACE_FIREHOSE) && t->depth == 0)
		return;
	ta = rb_tracearg_from_tracepoint(Qnil);
	exc = rb_tracearg_raised_exception(ta);
	cname = rb_class_name(rb_obj_class(exc));
	if ((msg = text_of(exception_message, exc, "(message raised)")) == Qundef)
		return;
	path = rb_tracearg_path(ta);
	if (!RB_TYPE_P(path, T_STRING))
		path = rb_str_new_cstr("?");
	{
		struct trc_rec head = { .type = TRC_REC_RAISE, .thread = t->idx, .ts = trc_clock_now(),
		    .dur = (uint64_t)FIX2INT(rb_tracearg_lineno(ta)) };
		const char *s[3] = { RSTRING_PTR(cname), RSTRING_PTR(msg), RSTRING_PTR(path) };
		long len[3] = { RSTRING_LEN(cname), RSTRING_LEN(msg), RSTRING_LEN(path) };
		put_strings(&head, 3, s, len);
	}
}

static void
raise_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	trc_vm_hook_in();
	raise_event();
	trc_vm_hook_out();
}

/* ---- threads beginning and ending (the VM's THREAD_BEGIN and THREAD_END: Ruby allowed) ---- */

static void
put_mark(uint8_t type, uint32_t thread, VALUE text)
{
	struct trc_rec head = { .type = TRC_REC_MARK, .thread = thread, .aux = type, .ts = trc_clock_now() };
	const char *s = RSTRING_PTR(text);
	long len = RSTRING_LEN(text);

	put_strings(&head, 1, &s, &len);
}

/*
 * The text is the thread's #inspect: its address (the same at both ends), name, and the file
 * and line of the block it runs, where it was made. The beginning names no thread of the trace:
 * a thread that names itself in its block has no name yet, and its entry would keep that
 * (names.h), as its label on every line. At its end the name is final, and the thread's entry
 * is made then if its calls did not make it.
 */
static void
thread_event(rb_event_flag_t ev)
{
	VALUE th = rb_thread_current(), text;
	struct trc_thread *t = NULL;  /* the end's thread; the beginning names none */

	if (!trace.armed || trc_thread_is_agent(th))
		return;
	if (ev == RUBY_EVENT_THREAD_END && (t = trc_thread_current()) == NULL)
		return;
	if ((text = text_of(inspect_value, th, "(inspect raised)")) == Qundef)
		return;
	if (t != NULL)
		put_mark(TRC_EV_THREAD_END, t->idx, text);
	else
		put_mark(TRC_EV_THREAD_BEGIN, TRC_NO_THREAD, text);
	RB_GC_GUARD(text);
}

static void
thread_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	trc_vm_hook_in();
	thread_event(ev);
	trc_vm_hook_out();
}

/* ---- garbage collections (from gc.c's hook, inside the GC: no allocation, no Ruby) ---- */

static void
gc_ended(const struct trc_gc *g)
{
	const struct trc_thread *t;
	struct trc_rec *r;

	if (!trace.armed || !(trace.cfg->flags & TRC_TRACE_GC) || (r = rec_new(sizeof(struct trc_rec))) == NULL)
		return;
	t = trc_thread_find(rb_thread_current());
	memset(r, 0, sizeof(*r));
	r->type = TRC_REC_GC;
	r->size = sizeof(struct trc_rec);
	r->thread = t != NULL && !t->ignored ? t->idx : TRC_GC_NO_THREAD;
	r->aux = (uint32_t)(g->major << 8 | g->reason);
	r->ts = g->start;
	r->dur = g->pause;
	rec_commit(r);
}

/* ---- installing ---- */

uint64_t
trc_trace_prepare(const struct trc_trace_cfg *cfg, struct trc_ring *ring, int wake_fd)
{
	trace.cfg = cfg;
	trace.started = trc_wrap_generation();
	trace.ring = ring;
	trace.wake_fd = wake_fd;
	trace.wake_at = (ring->mask + 1) / 4;
	trace.events = trace.lost = trace.lost_pending = 0;
	trace.armed = 0;
	return trace.started;
}

void
trc_trace_go(void)
{
	const struct trc_trace_cfg *cfg = trace.cfg;
	/* Firehose, and slow calls of any method, over everything: only the VM's hook sees that. */
	int global = ((cfg->flags & TRC_TRACE_FIREHOSE) || cfg->nspecs == 0) && cfg->scope.all;

	trc_clock_calibrate();
	trace.slow_ticks = trc_clock_ticks(cfg->slow_ns);
	trace.armed = 1;
	trc_wrap_live(trace.started, &sink);
	trace.global = global ? RUBY_EVENT_CALL | RUBY_EVENT_RETURN | RUBY_EVENT_C_CALL | RUBY_EVENT_C_RETURN : 0;
	if (trace.global)
		rb_add_event_hook(global_hook, trace.global, Qnil);
	if (cfg->flags & TRC_TRACE_RAISE) {
		rb_add_event_hook(raise_hook, RUBY_EVENT_RAISE, Qnil);
		trace.raise_hook = 1;
	}
	if (cfg->flags & TRC_TRACE_GC)
		trc_gc_watch(gc_ended);
	/* Slow calls alone are what -s shows: threads only where calls are (-f, -m). */
	if (!(cfg->flags & TRC_TRACE_SLOW)) {
		rb_add_event_hook(thread_hook, RUBY_EVENT_THREAD_BEGIN | RUBY_EVENT_THREAD_END, Qnil);
		trace.thread_hook = 1;
	}
}

void
trc_trace_stop(void)
{
	trace.armed = 0;
	trc_wrap_live(0, NULL);
	if (trace.cfg != NULL && (trace.cfg->flags & TRC_TRACE_GC))
		trc_gc_watch(NULL);
	if (trace.global)
		rb_remove_event_hook(global_hook);
	if (trace.raise_hook)
		rb_remove_event_hook(raise_hook);
	if (trace.thread_hook)
		rb_remove_event_hook(thread_hook);
	trace.global = 0;
	trace.raise_hook = 0;
	trace.thread_hook = 0;
	trace.cfg = NULL;
}

int
trc_trace_hooks(void)
{
	return (trace.global != 0) + trace.raise_hook + trace.thread_hook + (trace.armed && trc_gc_watching());
}

void
trc_trace_disarm(void)
{
	trace.armed = 0;
}

void
trc_trace_counts(uint64_t *events, uint64_t *lost)
{
	*events = trace.events;
	*lost = trace.lost;
}
