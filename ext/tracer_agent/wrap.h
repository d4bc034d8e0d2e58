/* wrap.h: tracing a method with a C wrapper, in a module prepended to the method's owner. */
#ifndef TRC_WRAP_H
#define TRC_WRAP_H

#include <ruby.h>
#include <stdint.h>

/* A method's visibility, as wrap.rb lists it. */
enum trc_visibility {
	TRC_VISI_PUBLIC = 0,
	TRC_VISI_PROTECTED = 1,
	TRC_VISI_PRIVATE = 2,
};

struct trc_thread;

/* From Init_: TracerAgent.__enter, __leave, __watching, __defined, __changed. */
void trc_wrap_init(VALUE mod);

/*
 * GVL held. Why a method must not be wrapped (a static string), or NULL when it may be. native:
 * it is a C method (or one of Ruby's own, <internal:...>), for which the frame readers count.
 */
const char *trc_wrap_refusal(VALUE owner, ID mid, int native);

/* An arity no method has: wrap.rb's Wrap::READER. */
#define TRC_WRAP_READER (-(1 << 24))

/*
 * GVL held. Puts a wrapper in front of owner's method mid (visibility: enum trc_visibility;
 * arity: the method's, which the wrapper keeps when it is 0 to 15, or TRC_WRAP_READER for an
 * attr_reader, whose wrapper reads the variable itself), which reports its calls as
 * method m once generation gen is live (trc_wrap_live), with the -m expressions' helper exprs
 * (trc_wrap_expressions; Qnil for none). A method wrapped already is bound to m and gen anew.
 * Returns 0, or -1 with *why set to the reason (a String).
 */
int trc_wrap_put(VALUE owner, ID mid, int visibility, int arity, uint32_t m, uint64_t gen, VALUE exprs,
    VALUE *why);

/*
 * GVL held. The -m expressions exprs (an Array of Strings) of owner's method mid, compiled into
 * a method with its parameters (lib/tracer_agent/wrap.rb): its UnboundMethod, or Qnil with
 * *why set.
 */
VALUE trc_wrap_expressions(VALUE owner, ID mid, VALUE exprs, VALUE *why);

/* A wrapped call with -m expressions: what a sink needs to evaluate them (trc_wrap_eval_exprs). */
struct trc_wrap_exprs {
	VALUE um;
	VALUE self;
	int argc;
	const VALUE *argv;
};
/* GVL held, in the wrapper's frame: the expressions' values, an Array; may raise. */
VALUE trc_wrap_eval_exprs(const struct trc_wrap_exprs *e);

/*
 * Where the live generation's calls go: a trace (trace.c) or a table (top.c). GVL held, on the
 * main Ractor, with the calling thread's entry t (names.h), never quiet. enter gets the -m
 * expressions to show (NULL: none), and may run Ruby to evaluate them; nothing else may.
 */
struct trc_wrap_sink {
	void (*enter)(struct trc_thread *t, uint32_t m, const struct trc_wrap_exprs *exprs);
	/* NULL for a sink that only counts calls: the wrapper then has nothing to do once the call
	 * it passed on returns or raises, and sets up no rb_ensure for it. */
	void (*leave)(struct trc_thread *t, uint32_t m);
};

/*
 * GVL held. A new generation, for a session that traces or counts: wrappers and TracePoints of
 * an earlier one, which the app may still reach through an alias of its own, report nowhere.
 */
uint64_t trc_wrap_generation(void);
/* The token a TracePoint on method m, put in place for generation gen, reports its calls with. */
uint64_t trc_wrap_token(uint64_t gen, uint32_t m);
/* GVL held. The wrappers of generation gen report to sink from now on (gen 0: none does). */
void trc_wrap_live(uint64_t gen, const struct trc_wrap_sink *sink);

/*
 * GVL held. Makes the app's method definitions reach defined(mod, mid) from now on, whenever
 * watching() says they matter (plan.c gives both, at Init_). defined runs inside the hook guard
 * (vm.h): the session's service waits for it.
 */
void trc_wrap_watch(void);
void trc_wrap_definitions_to(void (*defined)(VALUE mod, ID mid), int (*watching)(void));

/*
 * GVL held. Stops every wrapper from reporting, then removes them while more(arg) says there
 * is time. Returns how many are left.
 */
int trc_wrap_remove_some(int (*more)(void *), void *arg);

/* Methods the app has defined since a session first watched definitions (lib/tracer_agent/wrap.rb). */
uint64_t trc_wrap_definitions(void);
/* GVL held. How many wrappers are in place. */
int trc_wrapped(void);
/* Memory the wrappers' tables could not get, so far. */
uint64_t trc_wrap_alloc_failures(void);
void trc_wrap_mark(void);
/* GVL held. Under Ruby::Box, gives the app's box a copy of its own of module mod, which a
 * prepend into mod then reaches the includers of (wrap.c says why); else nothing. */
void trc_wrap_box_copy(VALUE mod);
/* The TracerAgent module, as Init_ made it (never looked up by name: wrap.c says why). */
VALUE trc_wrap_agent(void);

#endif
