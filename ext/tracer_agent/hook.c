/* hook.c: VM event hooks and targeted TracePoints; the traced threads' side of the ring. */
#include "hook.h"

#include <ruby/debug.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "extconf.h"
#include "control.h"
#include "names.h"
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
	VALUE tracepoints;      /* Array of the targeted TracePoints */
	uint64_t events, lost, lost_pending;
} H;

static int hook_depth;          /* hooks running now, all threads together */
static int hook_yielding;       /* of those, hooks running the app's code (an -m expression) */
static int service_waits;       /* trc_session_service was put off by a running hook */

static void
service_may_run(void)
{
	if (hook_depth == hook_yielding && service_waits) {
		service_waits = 0;
		trc_control_poke();
	}
}

void
trc_hook_in(void)
{
	hook_depth++;
}

void
trc_hook_out(void)
{
	hook_depth--;
	service_may_run();
}

int
trc_hook_defer(void)
{
	if (hook_depth == hook_yielding)
		return 0;
	service_waits = 1;
	return 1;
}

/*
 * Around the app's own code run from a hook (an expression, an exception's #message), which may
 * take as long as it likes: service runs meanwhile, and the hook checks still_tracing() after.
 */
static void
yield_begin(void)
{
	hook_yielding++;
	service_may_run();
}

static void
yield_end(void)
{
	hook_yielding--;
}

static inline uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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
	__atomic_store_n(&H.events, H.events + 1, __ATOMIC_RELAXED);
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
 * For wrap.c's C-method wrappers, which run outside any VM hook: expressions they show may
 * call Ruby that is traced too, so a flag keeps them from recursing into themselves.
 */
static int in_wrapper_exprs;

static VALUE
expr_eval(VALUE arg)
{
	VALUE *a = (VALUE *)arg;        /* self, code */
	const char *code = RSTRING_PTR(a[1]);
	VALUE v;

	if (strcmp(code, "self") == 0)
		v = a[0];
	else if (strcmp(code, "__source__") == 0)
		return rb_sprintf("\"%s:%d\"", rb_sourcefile() ? rb_sourcefile() : "?", rb_sourceline());
	else if (code[0] == '@' && code[1] != '@' && rb_is_instance_id(rb_intern(code)))
		v = rb_ivar_get(a[0], rb_intern(code));
	else if (in_wrapper_exprs)
		return rb_str_new_cstr("(needs a Ruby method: not shown for a wrapped C method)");
	else
		v = rb_funcall(rb_tracearg_binding(rb_tracearg_from_tracepoint(Qnil)), rb_intern("eval"), 1, a[1]);
	return rb_inspect(v);
}

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
expr_error(VALUE exc)
{
	return rb_sprintf("#<%"PRIsVALUE": %"PRIsVALUE">", rb_obj_class(exc), rb_funcall(exc, rb_intern("message"), 0));
}

/*
 * Evaluates spec's expressions into values[]: returns how many, or -1 when tracing stopped
 * meanwhile (still_tracing). This runs Ruby, which may switch threads: it must happen before
 * the CALL record, so that the CALL and its EXPR records stay adjacent.
 */
static int
eval_exprs(int spec, VALUE self, VALUE *values)
{
	uint64_t started = H.started;
	int n = H.cfg->specs[spec].nexpr;

	for (int i = 0; i < n; i++) {
		VALUE arg[2] = { self, H.cfg->specs[spec].exprs[i] };
		int state = 0;
		VALUE v;

		yield_begin();
		v = rb_protect(expr_eval, (VALUE)arg, &state);
		yield_end();

		if (state) {
			v = rb_errinfo();
			rb_set_errinfo(Qnil);
			/* #message is Ruby too, and may raise: nothing may escape into the app. */
			v = rb_protect(expr_error, v, &state);
			if (state) {
				rb_set_errinfo(Qnil);
				v = rb_str_new_cstr("#<exception (its message raised too)>");
			}
		}
		if (!still_tracing(started))
			return -1;
		values[i] = v;
	}
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

static void
slow_push(struct trc_thread *t, uint64_t ts)
{
	struct trc_frame *f = trc_thread_frame(t, t->depth);
	if (f != NULL)
		f->start = ts;
}

static void
slow_pop(struct trc_thread *t, uint32_t m, uint64_t ts)
{
	struct trc_rec *r;
	uint64_t start;

	if (t->depth >= t->frames_cap)
		return;
	start = t->frames[t->depth].start;
	if (ts - start < H.cfg->slow_ns || (r = rec_new(sizeof(struct trc_rec))) == NULL)
		return;
	memset(r, 0, sizeof(*r));
	r->type = TRC_REC_SLOW;
	r->size = sizeof(struct trc_rec);
	r->thread = t->idx;
	r->method = m;
	r->aux = t->depth;
	r->ts = start;
	r->dur = ts - start;
	rec_commit(r);
}

static inline void
on_call(struct trc_thread *t, uint32_t m, VALUE self)
{
	const struct trc_method *me = trc_method_at(m);
	int spec = me->spec;
	VALUE values[TRC_MAX_EXPRS];
	uint64_t ts;

	if (H.cfg->flags & TRC_TRACE_SLOW) {
		slow_push(t, now_ns());
	} else if (spec >= 0 && H.cfg->specs[spec].nexpr > 0) {
		int n = eval_exprs(spec, self, values);

		if (n < 0)
			return;         /* detached meanwhile: t may be gone with the rest */
		ts = now_ns();
		put_event(TRC_REC_CALL, t, m, ts);
		put_exprs(t, spec, values, n);
		RB_GC_GUARD(values[0]);
	} else {
		put_event(TRC_REC_CALL, t, m, now_ns());
	}
	t->depth++;
}

static inline void
on_return(struct trc_thread *t, uint32_t m)
{
	uint64_t ts = now_ns();

	/* A return without its call: the call began before we attached. */
	if (t->depth == 0)
		return;
	t->depth--;
	if (H.cfg->flags & TRC_TRACE_SLOW)
		slow_pop(t, m, ts);
	else
		put_event(TRC_REC_RETURN, t, m, ts);
}

static void
wrapper_enter(uint32_t m, VALUE self)
{
	struct trc_thread *t;

	if (!H.armed || in_wrapper_exprs || (t = trc_thread_current()) == NULL)
		return;
	in_wrapper_exprs = 1;
	on_call(t, m, self);
	in_wrapper_exprs = 0;
}

void
trc_hook_enter(uint32_t m, VALUE self)
{
	trc_hook_in();
	wrapper_enter(m, self);
	trc_hook_out();
}

void
trc_hook_leave(uint32_t m)
{
	struct trc_thread *t;

	trc_hook_in();
	if (H.armed && !in_wrapper_exprs && (t = trc_thread_current()) != NULL)
		on_return(t, m);
	trc_hook_out();
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
		on_call(t, m, self);
	else
		on_return(t, m);
}

static void
global_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	trc_hook_in();
	global_event(ev, self, mid, klass);
	trc_hook_out();
}

static void
tracepoint_event(VALUE tpval, uint32_t m)
{
	rb_trace_arg_t *ta;
	struct trc_thread *t;

	if (!H.armed || (t = trc_thread_current()) == NULL)
		return;
	ta = rb_tracearg_from_tracepoint(tpval);
	if (rb_tracearg_event_flag(ta) == RUBY_EVENT_CALL)
		on_call(t, m, rb_tracearg_self(ta));
	else
		on_return(t, m);
}

static void
tracepoint_hook(VALUE tpval, void *data)
{
	trc_hook_in();
	tracepoint_event(tpval, (uint32_t)(uintptr_t)data);
	trc_hook_out();
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
	yield_begin();
	msg = rb_protect(exception_message, exc, &state);
	yield_end();
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
		struct trc_rec head = { .type = TRC_REC_RAISE, .thread = t->idx, .ts = now_ns(),
		    .dur = (uint64_t)FIX2INT(rb_tracearg_lineno(ta)) };
		const char *s[3] = { RSTRING_PTR(cname), RSTRING_PTR(msg), RSTRING_PTR(path) };
		long len[3] = { RSTRING_LEN(cname), RSTRING_LEN(msg), RSTRING_LEN(path) };
		put_strings(&head, 3, s, len);
	}
}

static void
raise_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	trc_hook_in();
	raise_event();
	trc_hook_out();
}

/* ---- installing ---- */

struct resolve {
	VALUE mod;      /* where to look the method up */
	ID mid;
};

static VALUE
instance_method(VALUE arg)
{
	struct resolve *r = (struct resolve *)arg;
	return rb_funcall(r->mod, rb_intern("instance_method"), 1, ID2SYM(r->mid));
}

static VALUE
enable_for(VALUE arg)
{
	VALUE *a = (VALUE *)arg;        /* tracepoint, method */
	VALUE kw = rb_hash_new();
	rb_hash_aset(kw, ID2SYM(rb_intern("target")), a[1]);
	return rb_funcallv_kw(a[0], rb_intern("enable"), 1, &kw, RB_PASS_KEYWORDS);
}

/*
 * Selects one method for spec. A Ruby method gets a TracePoint on its own ISeq, so nothing else
 * in the process is instrumented; a C method is entered in the method table as selected, for
 * the global C call hook. Returns 1 if selected, 0 if not (*is_c tells which hook it needs).
 */
static int
select_one(VALUE um, int spec, int targeted, int *is_c)
{
	VALUE loc = rb_funcall(um, rb_intern("source_location"), 0);
	VALUE owner = rb_funcall(um, rb_intern("owner"), 0);
	ID mid = SYM2ID(rb_funcall(um, rb_intern("name"), 0));
	uint32_t m;
	int state = 0;

	*is_c = NIL_P(loc);
	m = *is_c ? trc_method_intern(owner, mid, Qnil, 0, spec) :
	    trc_method_intern(owner, mid, RARRAY_AREF(loc, 0), NUM2INT(RARRAY_AREF(loc, 1)), spec);
	if (m == UINT32_MAX)
		return 0;
	if (!targeted)
		return 1;
	if (*is_c) {
		/* A wrapper around this one method; only if that fails, the global C call hook. */
		*is_c = trc_wrap(owner, mid, m) < 0;
		return 1;
	}
	{
		VALUE tp = rb_tracepoint_new(Qnil, RUBY_EVENT_CALL | RUBY_EVENT_RETURN, tracepoint_hook, (void *)(uintptr_t)m);
		VALUE arg[2] = { tp, um };
		rb_ary_push(H.tracepoints, tp);
		rb_protect(enable_for, (VALUE)arg, &state);
		if (state) {
			rb_set_errinfo(Qnil);
			return 0;
		}
	}
	return 1;
}

static VALUE
method_names(VALUE mod)
{
	VALUE all = rb_funcall(mod, rb_intern("instance_methods"), 1, Qfalse);
	rb_ary_concat(all, rb_funcall(mod, rb_intern("private_instance_methods"), 1, Qfalse));
	return all;
}

/* Selects what spec i names; returns how many methods, and sets *need_c if one is a C method. */
static int
select_spec(int i, int targeted, int *need_c)
{
	const struct trc_spec *sp = &H.cfg->specs[i];
	VALUE mod = sp->kind == TRC_SPEC_SINGLETON ? rb_singleton_class(sp->klass) : sp->klass;
	VALUE names = sp->mid ? rb_ary_new_from_args(1, ID2SYM(sp->mid)) : method_names(mod);
	int n = 0;

	for (long j = 0; j < RARRAY_LEN(names); j++) {
		struct resolve r = { mod, SYM2ID(RARRAY_AREF(names, j)) };
		int state = 0, is_c = 0;
		VALUE um = rb_protect(instance_method, (VALUE)&r, &state);
		if (state) {
			rb_set_errinfo(Qnil);
			continue;
		}
		n += select_one(um, i, targeted, &is_c);
		*need_c |= is_c;
	}
	return n;
}

int
trc_hook_start(const struct trc_trace_cfg *cfg, struct trc_ring *ring, int wake_fd, int *matched)
{
	int global = (cfg->flags & TRC_TRACE_FIREHOSE) || cfg->nspecs == 0, need_c = 0;

	for (int i = 0; i < cfg->nspecs; i++)
		global |= cfg->specs[i].kind == TRC_SPEC_ANY;
	H.cfg = cfg;
	H.started++;
	H.ring = ring;
	H.wake_fd = wake_fd;
	H.wake_at = (ring->mask + 1) / 4;
	H.events = H.lost = H.lost_pending = 0;
	H.tracepoints = rb_ary_new();
	/* Armed before anything is enabled: a TracePoint fires as soon as it is on. */
	H.armed = 1;
	for (int i = 0; i < cfg->nspecs; i++)
		matched[i] = cfg->specs[i].kind == TRC_SPEC_ANY ? 1 : select_spec(i, !global, &need_c);
	H.global = global ? RUBY_EVENT_CALL | RUBY_EVENT_RETURN | RUBY_EVENT_C_CALL | RUBY_EVENT_C_RETURN :
	    need_c ? RUBY_EVENT_C_CALL | RUBY_EVENT_C_RETURN : 0;
	if (H.global)
		rb_add_event_hook(global_hook, H.global, Qnil);
	if (cfg->flags & TRC_TRACE_RAISE) {
		rb_add_event_hook(raise_hook, RUBY_EVENT_RAISE, Qnil);
		H.raise_hook = 1;
	}
	return 0;
}

void
trc_hook_stop(void)
{
	H.armed = 0;
	trc_unwrap_all();
	if (H.global)
		rb_remove_event_hook(global_hook);
	if (H.raise_hook)
		rb_remove_event_hook(raise_hook);
	H.global = 0;
	H.raise_hook = 0;
	if (RB_TYPE_P(H.tracepoints, T_ARRAY)) {
		for (long i = 0; i < RARRAY_LEN(H.tracepoints); i++)
			rb_tracepoint_disable(RARRAY_AREF(H.tracepoints, i));
	}
	H.tracepoints = Qnil;
	H.cfg = NULL;
}

int
trc_hook_installed(void)
{
	return (H.global != 0) + H.raise_hook + trc_wrapped() +
	    (RB_TYPE_P(H.tracepoints, T_ARRAY) ? (int)RARRAY_LEN(H.tracepoints) : 0);
}

void
trc_hook_disarm(void)
{
	H.armed = 0;
}

void
trc_hook_counts(uint64_t *events, uint64_t *lost)
{
	*events = __atomic_load_n(&H.events, __ATOMIC_RELAXED);
	*lost = H.lost;
}

void
trc_hook_mark(void)
{
	rb_gc_mark(H.tracepoints);
	if (H.cfg == NULL)
		return;
	for (int i = 0; i < H.cfg->nspecs; i++) {
		rb_gc_mark(H.cfg->specs[i].klass);
		for (int j = 0; j < H.cfg->specs[i].nexpr; j++)
			rb_gc_mark(H.cfg->specs[i].exprs[j]);
	}
}
