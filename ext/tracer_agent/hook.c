/* hook.c: the traced threads' side of the ring: wrapped calls, VM event hooks, exceptions. */
#include "hook.h"

#include <ruby/debug.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "extconf.h"
#include "clock.h"
#include "control.h"
#include "gc.h"
#include "names.h"
#include "plan.h"
#include "top.h"
#include "vm.h"
#include "wrap.h"
#include "tracer_protocol.h"

#define EXPR_MAX 1024

static struct {
	volatile int armed;     /* hooks may write; cleared at stop and in a forked child */
	uint64_t started;       /* counts trc_hook_start: see still_tracing() */
	const struct trc_trace_cfg *cfg;
	struct trc_ring *ring;
	int wake_fd;
	uint64_t wake_at;       /* ring position at which to look whether to wake the consumer */
	rb_event_flag_t global; /* events of the global hook, 0 when none */
	int raise_hook;
	uint64_t events, lost, lost_pending;
	uint64_t slow_ticks;    /* cfg->slow_ns on the traced threads' clock */
} H;

/*
 * The agent thread drains the ring every few milliseconds anyway; a burst that fills a quarter
 * of it before then wakes it early. One compare per event: the check runs only when the write
 * position passes wake_at.
 */
static void
wake_consumer(void)
{
	uint64_t one = 1;
	size_t quarter = (H.ring->mask + 1) / 4;

	if (trc_ring_used(H.ring) >= quarter && write(H.wake_fd, &one, sizeof(one)) < 0)
		(void)0;        /* a full eventfd already says "wake up" */
	H.wake_at = H.ring->head + quarter;
}

static inline void
maybe_wake(void)
{
	if (H.ring->head >= H.wake_at)
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

	if (H.lost_pending != 0) {
		r = trc_ring_reserve(H.ring, TRC_REC_SHORT);
		if (r == NULL)
			goto lost;
		memset(r, 0, TRC_REC_SHORT);
		r->type = TRC_REC_LOST;
		r->size = TRC_REC_SHORT;
		r->ts = H.lost_pending;
		trc_ring_commit(H.ring, r);
		H.lost_pending = 0;
	}
	r = trc_ring_reserve(H.ring, n);
	if (r != NULL)
		return r;
lost:
	H.lost++;
	H.lost_pending++;
	maybe_wake();
	return NULL;
}

static inline void
rec_commit(struct trc_rec *r)
{
	trc_ring_commit(H.ring, r);
	H.events++;     /* read by the I/O thread only once the hooks are off */
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
	const struct trc_trace_cfg *cfg = H.cfg;
	if (cfg->flags & TRC_TRACE_FIREHOSE || cfg->nspecs == 0)
		return -2;
	/* Without the global call hook, every selected method was entered by select_one. */
	if (!(H.global & RUBY_EVENT_CALL))
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
	return H.armed && H.started == started;
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
 * The -m expressions' values, as inspected Strings in values[] (the helper wrap.rb compiled
 * gives them, each rescued): how many, or -1 when tracing stopped meanwhile (still_tracing).
 * The thread is quiet while the helper and #inspect run: the calls they make are not the
 * app's, and are not traced. This must happen before the CALL record, so that the CALL and its
 * EXPR records stay adjacent.
 */
static int
eval_exprs(struct trc_thread *t, const struct trc_wrap_exprs *e, VALUE *values)
{
	uint64_t started = H.started;
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
		long len = RSTRING_LEN(values[i]) > EXPR_MAX ? EXPR_MAX : RSTRING_LEN(values[i]);
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
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
slow_push(struct trc_thread *t, uint64_t ts)
{
	struct trc_frame *f = trc_thread_frame(t, t->depth);
	if (f != NULL) {
		f->start = ts;
		if (H.cfg->flags & TRC_TRACE_SLOWCPU)
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
	if (H.cfg->flags & TRC_TRACE_SLOWCPU) {
		uint64_t cpu = thread_cpu_ns() - t->frames[t->depth].cpu;

		if (cpu < H.cfg->slow_ns)
			return;
		dur = trc_clock_ticks(cpu);
	} else {
		dur = ts - start;
		if (dur < H.slow_ticks)
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

	if (H.cfg->flags & TRC_TRACE_SLOW) {
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
	if (H.cfg->flags & TRC_TRACE_SLOW)
		slow_pop(t, m, ts);
	else
		put_event(TRC_REC_RETURN, t, m, ts);
}

/*
 * A token says which method a call into the agent is of (TracerAgent.__enter and __leave, from
 * the TracePoints on methods no table holds): the method index and the generation of the
 * tracing that put it in place. A TracePoint the app still reaches after its session then
 * carries an old generation and is not counted as some other method of a later session.
 */
#define TOKEN_METHOD_BITS 21    /* TRC_NAMES_MAX is 1 << 20 */

static uint64_t generation;

uint64_t
trc_hook_generation(void)
{
	return ++generation;
}

uint64_t
trc_hook_token(uint64_t gen, uint32_t m)
{
	return (gen << TOKEN_METHOD_BITS) | m;
}

/* Method m of a token of this generation; 0 for a stale or foreign token. */
static inline int
token_method(VALUE token, uint32_t *m)
{
	uint64_t tok;

	if (!FIXNUM_P(token) || FIX2LONG(token) < 0)
		return 0;
	tok = (uint64_t)FIX2LONG(token);
	*m = (uint32_t)(tok & ((1u << TOKEN_METHOD_BITS) - 1));
	return tok >> TOKEN_METHOD_BITS == generation;
}

/* A wrapped call on thread t begins (or ends): to the trace, or to the tables. */
static inline void
wrapped(struct trc_thread *t, uint32_t m, int begins, const struct trc_wrap_exprs *exprs)
{
	if (H.armed) {
		if (begins)
			on_call(t, m, exprs);
		else
			on_return(t, m);
	} else if (begins) {
		trc_top_enter(t, m);
	} else {
		trc_top_leave(t, m);
	}
}

/*
 * The slow path: a thread not seen last, or expressions to evaluate. Both may run Ruby (to
 * name the thread, to evaluate), hence the hook guard; and the thread may belong to another
 * Ractor, which must not touch the agent's tables at all.
 */
static void
wrapped_slow(uint32_t m, int begins, const struct trc_wrap_exprs *exprs)
{
	struct trc_thread *t;

	if (!trc_vm_main_ractor()) {
		trc_vm_other_ractor();
		return;
	}
	trc_vm_hook_in();
	if ((t = trc_thread_current()) != NULL && !t->quiet)
		wrapped(t, m, begins, exprs);
	trc_vm_hook_out();
}

/*
 * Every wrapped call passes here twice, so the common case takes no call and no lock: on the
 * thread seen last (which is then of the main Ractor, and has an entry), no expression. Nothing
 * in it can run Ruby, so the session's service cannot run in the middle of it either: no hook
 * guard is needed.
 */
static inline void
wrapped_event(uint32_t m, int begins, const struct trc_wrap_exprs *exprs)
{
	struct trc_thread *t;

	if (rb_thread_current() == trc_names_last_thread && (t = trc_names_last_entry) != NULL &&
	    !t->quiet && exprs == NULL) {
		wrapped(t, m, begins, NULL);
		return;
	}
	wrapped_slow(m, begins, exprs);
}

void
trc_hook_wrapped_enter(uint32_t m, const struct trc_wrap_exprs *exprs)
{
	wrapped_event(m, 1, exprs);
}

void
trc_hook_wrapped_leave(uint32_t m)
{
	wrapped_event(m, 0, NULL);
}

/* TracerAgent.__enter(token): a call of a method a TracePoint watches begins. */
static VALUE
agent_enter(VALUE self, VALUE token)
{
	uint32_t m;

	if (token_method(token, &m))
		wrapped_event(m, 1, NULL);
	return Qnil;
}

/* TracerAgent.__leave(token): it ended, however it ended. */
static VALUE
agent_leave(VALUE self, VALUE token)
{
	uint32_t m;

	if (token_method(token, &m))
		wrapped_event(m, 0, NULL);
	return Qnil;
}

void
trc_hook_define(VALUE mod)
{
	rb_define_singleton_method(mod, "__enter", agent_enter, 1);
	rb_define_singleton_method(mod, "__leave", agent_leave, 1);
}

static void
global_event(rb_event_flag_t ev, VALUE self, ID mid, VALUE klass)
{
	struct trc_thread *t;
	uint32_t m;

	if (!H.armed || (t = trc_thread_current()) == NULL)
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

static VALUE
exception_message(VALUE exc)
{
	return rb_funcall(exc, rb_intern("message"), 0);
}

static void
raise_event(void)
{
	struct trc_thread *t;
	rb_trace_arg_t *ta;
	VALUE exc, cname, msg, path;
	int state = 0;
	uint64_t started = H.started;

	if (!H.armed || (t = trc_thread_current()) == NULL)
		return;
	/* Outside firehose only exceptions that happen inside a traced call are in the tree. */
	if (!(H.cfg->flags & TRC_TRACE_FIREHOSE) && t->depth == 0)
		return;
	ta = rb_tracearg_from_tracepoint(Qnil);
	exc = rb_tracearg_raised_exception(ta);
	cname = rb_class_name(rb_obj_class(exc));
	trc_vm_yield_begin();
	msg = rb_protect(exception_message, exc, &state);
	trc_vm_yield_end();
	if (state || !RB_TYPE_P(msg, T_STRING)) {
		rb_set_errinfo(Qnil);
		msg = rb_str_new_cstr("(message raised)");
	}
	if (!still_tracing(started))
		return;         /* #message ran Ruby: see still_tracing() */
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

/* ---- garbage collections (from gc.c's hook, inside the GC: no allocation, no Ruby) ---- */

void
trc_hook_gc(const struct trc_gc *g)
{
	const struct trc_thread *t;
	struct trc_rec *r;

	if (!H.armed || !(H.cfg->flags & TRC_TRACE_GC) || (r = rec_new(sizeof(struct trc_rec))) == NULL)
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

void
trc_hook_defined(VALUE mod, ID mid)
{
	trc_vm_hook_in();  /* Ruby runs below: the session's service must wait */
	trc_plan_defined(mod, mid);
	trc_vm_hook_out();
}

int
trc_hook_watching(void)
{
	return trc_plan_active();
}

static VALUE
watch_definitions(VALUE unused)
{
	VALUE agent = rb_const_get(rb_cObject, rb_intern("TracerAgent"));
	return rb_funcall(rb_const_get(agent, rb_intern("Wrap")), rb_intern("watch"), 0);
}

/* From now on the app's definitions come to trc_hook_defined (Module#method_added). */
void
trc_hook_watch(void)
{
	int state = 0;

	rb_protect(watch_definitions, Qnil, &state);
	if (state)
		rb_set_errinfo(Qnil);
}

void
trc_hook_prepare(const struct trc_trace_cfg *cfg, struct trc_ring *ring, int wake_fd)
{
	H.cfg = cfg;
	H.started = trc_hook_generation();
	H.ring = ring;
	H.wake_fd = wake_fd;
	H.wake_at = (ring->mask + 1) / 4;
	H.events = H.lost = H.lost_pending = 0;
	H.armed = 0;
}

uint64_t
trc_hook_prepared_generation(void)
{
	return H.started;
}

void
trc_hook_go(void)
{
	const struct trc_trace_cfg *cfg = H.cfg;
	/* Firehose, and slow calls of any method, over everything: only the VM's hook sees that. */
	int global = ((cfg->flags & TRC_TRACE_FIREHOSE) || cfg->nspecs == 0) && cfg->scope.all;

	trc_clock_calibrate();
	H.slow_ticks = trc_clock_ticks(cfg->slow_ns);
	H.armed = 1;
	trc_wrap_live(H.started);
	H.global = global ? RUBY_EVENT_CALL | RUBY_EVENT_RETURN | RUBY_EVENT_C_CALL | RUBY_EVENT_C_RETURN : 0;
	if (H.global)
		rb_add_event_hook(global_hook, H.global, Qnil);
	if (cfg->flags & TRC_TRACE_RAISE) {
		rb_add_event_hook(raise_hook, RUBY_EVENT_RAISE, Qnil);
		H.raise_hook = 1;
	}
	if (cfg->flags & TRC_TRACE_GC)
		trc_gc_watch(1);
}

void
trc_hook_stop(void)
{
	H.armed = 0;
	trc_wrap_live(0);
	if (H.cfg != NULL && (H.cfg->flags & TRC_TRACE_GC))
		trc_gc_watch(0);
	if (H.global)
		rb_remove_event_hook(global_hook);
	if (H.raise_hook)
		rb_remove_event_hook(raise_hook);
	H.global = 0;
	H.raise_hook = 0;
	H.cfg = NULL;
}

int
trc_hook_installed(void)
{
	return (H.global != 0) + H.raise_hook + (H.armed && trc_gc_watching());
}

void
trc_hook_disarm(void)
{
	H.armed = 0;
}

void
trc_hook_counts(uint64_t *events, uint64_t *lost)
{
	*events = H.events;
	*lost = H.lost;
}

void
trc_hook_mark(void)
{
	if (H.cfg == NULL)
		return;
	trc_scope_mark(&H.cfg->scope);
	for (int i = 0; i < H.cfg->nspecs; i++) {
		rb_gc_mark(H.cfg->specs[i].klass);
		rb_gc_mark(H.cfg->specs[i].name);
		for (int j = 0; j < H.cfg->specs[i].nexpr; j++)
			rb_gc_mark(H.cfg->specs[i].exprs[j]);
	}
}
