/* gc.c: one internal-event hook that turns the GC's steps into one event per collection. */
#include "gc.h"

#include <ruby.h>
#include <ruby/debug.h>

#include "clock.h"

#define GC_EVENTS (RUBY_INTERNAL_EVENT_GC_START | RUBY_INTERNAL_EVENT_GC_END_SWEEP | \
	RUBY_INTERNAL_EVENT_GC_ENTER | RUBY_INTERNAL_EVENT_GC_EXIT)

/*
 * A collection's work comes in steps (incremental marking, lazy sweeping) between which the
 * app runs: each step is a GC_ENTER ... GC_EXIT pair, the first of which holds GC_START, and
 * the collection is over at GC_END_SWEEP. Its pause is the sum of its steps. The hook runs
 * inside the GC: it reads GC.latest_gc_info through the C API with symbols made beforehand
 * (that allocates nothing) and otherwise only adds numbers.
 */
static struct {
	void (*ended)(const struct trc_gc *);   /* who watches; NULL: nobody */
	int in_collection;
	uint64_t entered;       /* the current step's GC_ENTER */
	struct trc_gc gc;
} watch;

static VALUE sym_major_by, sym_gc_by;
static VALUE reasons[TRC_GC_STRESS + 1];
static const char *const reason_names[TRC_GC_STRESS + 1] = {
	"", "nofree", "oldgen", "shady", "force", "oldmalloc", "newobj", "malloc", "method", "capi", "stress",
};

const char *
trc_gc_reason_name(int reason)
{
	return reason > 0 && reason <= TRC_GC_STRESS ? reason_names[reason] : "";
}

static int
reason_of(VALUE sym)
{
	for (int i = 1; i <= TRC_GC_STRESS; i++)
		if (reasons[i] == sym)
			return i;
	return TRC_GC_UNKNOWN;
}

static void
collection_ended(uint64_t now)
{
	VALUE major_by = rb_gc_latest_gc_info(sym_major_by);

	if (watch.entered != 0)
		watch.gc.pause += now - watch.entered;  /* the sweep ends inside a step: count it so far */
	watch.entered = 0;
	watch.gc.major = !NIL_P(major_by);
	watch.gc.reason = reason_of(watch.gc.major ? major_by : rb_gc_latest_gc_info(sym_gc_by));
	watch.in_collection = 0;
	if (watch.ended != NULL)
		watch.ended(&watch.gc);
}

static void
gc_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	uint64_t now = trc_clock_now();

	switch (ev) {
	case RUBY_INTERNAL_EVENT_GC_ENTER:
		watch.entered = now;
		break;
	case RUBY_INTERNAL_EVENT_GC_START:
		watch.in_collection = 1;
		watch.gc.start = watch.entered != 0 ? watch.entered : now;
		watch.gc.pause = 0;
		break;
	case RUBY_INTERNAL_EVENT_GC_EXIT:
		if (watch.in_collection && watch.entered != 0)
			watch.gc.pause += now - watch.entered;
		watch.entered = 0;
		break;
	case RUBY_INTERNAL_EVENT_GC_END_SWEEP:
		if (watch.in_collection)
			collection_ended(now);
		break;
	default:
		break;
	}
}

void
trc_gc_init(void)
{
	sym_major_by = ID2SYM(rb_intern("major_by"));
	sym_gc_by = ID2SYM(rb_intern("gc_by"));
	for (int i = 1; i <= TRC_GC_STRESS; i++)
		reasons[i] = ID2SYM(rb_intern(reason_names[i]));
	/* The GC's own symbols are made on its first call: make it now, outside any GC. */
	rb_gc_latest_gc_info(sym_major_by);
}

void
trc_gc_watch(void (*ended)(const struct trc_gc *))
{
	if (ended != NULL && watch.ended == NULL)
		rb_add_event_hook(gc_hook, GC_EVENTS, Qnil);
	else if (ended == NULL && watch.ended != NULL)
		rb_remove_event_hook(gc_hook);
	watch.ended = ended;
	watch.in_collection = 0;
	watch.entered = 0;
}

int
trc_gc_watching(void)
{
	return watch.ended != NULL;
}
