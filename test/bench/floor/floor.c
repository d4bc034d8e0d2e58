/*
 * floor.c: what the VM's own hooks and the CPU's clock cost, with nothing of tracer in them, to
 * measure the floor under --top objects and under a traced call (test/bench/floor.rb).
 */
#include <ruby.h>
#include <ruby/debug.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static unsigned long seen;

/* A NEWOBJ hook that does nothing. */
static void
nothing(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	(void)ev;
	(void)data;
	(void)self;
	(void)mid;
	(void)klass;
	seen++;
}

/* A raw NEWOBJ hook that only asks which thread allocates (a thread-local lookup in libruby). */
static VALUE last_thread;

static void
thread(VALUE data, const rb_trace_arg_t *arg)
{
	VALUE th = rb_thread_current();

	(void)data;
	(void)arg;
	seen += th != last_thread;
	last_thread = th;
}

/* A NEWOBJ hook that finds the allocation's site, as any per-site count must. */
static void
site(VALUE data, const rb_trace_arg_t *arg)
{
	rb_trace_arg_t *ta = (rb_trace_arg_t *)arg;
	VALUE path = rb_tracearg_path(ta);

	(void)data;
	(void)rb_tracearg_lineno(ta);
	seen += RB_TYPE_P(path, T_STRING);
}

/* Floor.newobj_hook(:nothing, :thread or :site): turns that hook on for the rest of the process. */
static VALUE
newobj_hook(VALUE self, VALUE kind)
{
	(void)self;
	if (SYM2ID(kind) == rb_intern("thread"))
		rb_add_event_hook2((rb_event_hook_func_t)(void (*)(void))thread,
		    RUBY_INTERNAL_EVENT_NEWOBJ, Qnil, RUBY_EVENT_HOOK_FLAG_SAFE | RUBY_EVENT_HOOK_FLAG_RAW_ARG);
	else if (SYM2ID(kind) == rb_intern("site"))
		rb_add_event_hook2((rb_event_hook_func_t)(void (*)(void))site, RUBY_INTERNAL_EVENT_NEWOBJ,
		    Qnil, RUBY_EVENT_HOOK_FLAG_SAFE | RUBY_EVENT_HOOK_FLAG_RAW_ARG);
	else
		rb_add_event_hook(nothing, RUBY_INTERNAL_EVENT_NEWOBJ, Qnil);
	return Qnil;
}

static double
mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Floor.clock_ns(:tsc or :kernel): ns per read of the TSC, or of the kernel's CLOCK_MONOTONIC. */
static VALUE
clock_ns(VALUE self, VALUE kind)
{
	const long n = 20000000;
	volatile uint64_t sink = 0;
	int tsc = SYM2ID(kind) == rb_intern("tsc");
	double t0 = mono();

	(void)self;
#if !defined(__x86_64__)
	if (tsc)
		return Qnil;
#endif
	for (long i = 0; i < n; i++) {
#if defined(__x86_64__)
		if (tsc) {
			sink += __rdtsc();
			continue;
		}
#endif
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sink += (uint64_t)ts.tv_nsec;
	}
	(void)sink;
	return DBL2NUM((mono() - t0) * 1e9 / (double)n);
}

/* Floor.noop(x): a C method that does nothing, the shape of the agent's __enter and __leave. */
static VALUE
noop(VALUE self, VALUE x)
{
	(void)self;
	(void)x;
	return Qnil;
}

void
Init_floor(void)
{
	VALUE mod = rb_define_module("Floor");

	rb_define_module_function(mod, "newobj_hook", newobj_hook, 1);
	rb_define_module_function(mod, "clock_ns", clock_ns, 1);
	rb_define_singleton_method(mod, "noop", noop, 1);
}
