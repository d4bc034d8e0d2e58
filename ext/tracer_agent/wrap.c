/* wrap.c: tracing a method with a C wrapper, in a module prepended to the method's owner. */
#include "wrap.h"

#include <stdlib.h>
#include <string.h>

#include "extconf.h"
#include "mem.h"
#include "names.h"
#include "vm.h"

/*
 * Why this shape. A wrapper is a C function defined, under the method's own name, in a module
 * of the agent's prepended to the method's owner (one module per owner, made the first time and
 * kept: TracerAgent::Wrappers). It tells the agent a call begins, passes the call on with
 * super (rb_call_super_kw: the same arguments, keywords and block, nothing copied), and tells
 * it the call ended, however it ended. Putting one in place is defining one C method (about a
 * microsecond: nothing is compiled), and taking it away is removing it: the owner's own method
 * table is never touched, so no alias is left behind, the app's method_added hooks never run,
 * and a redefinition by the app while traced stays traced. What the app can see: while traced,
 * instance_method(name) is the wrapper (arity -1, no source_location) and backtraces through
 * the method show one more frame, at the caller's line; for good, the module in the owner's
 * ancestors (empty once the session ends).
 *
 * A wrapper knows which method it stands for from its own frame: the owner of its method
 * entry is the Wrappers module and its id the method's (rb_frame_method_id_and_class). A slot
 * per (module, id), kept across sessions, says which method of the session's table that is,
 * and for which generation: wrappers report only while their generation is the live one, so
 * that a session's wrappers say nothing while they are being put in place (the trace starts
 * when all of them are) and nothing once it has ended (a wrapper the app took hold of, as a
 * Method or an alias, goes on working: it only passes the call on).
 */
struct slot {
	VALUE w;                /* key: the Wrappers module */
	ID mid;                 /* key */
	VALUE owner;            /* what w is prepended to */
	VALUE reaches;          /* a class whose instances reach w by super (see pass_on); marked */
	uint32_t m;             /* the session's method index */
	uint64_t gen;           /* the generation it was bound for */
	VALUE exprs;            /* the -m expressions' UnboundMethod (wrap.rb), or Qnil */
	uint8_t defined;        /* the wrapper is in w now */
	uint8_t module;         /* owner is a module (see reaches) */
	ID ivar;                /* an attr_reader's instance variable (see read_ivar); 0 for any other method */
};

static struct {
	struct slot *slots;
	uint32_t n, cap;
	uint32_t *index;        /* open addressing, slot + 1; 0 is free */
	uint32_t mask;
	uint32_t *installed;    /* slots whose wrapper is defined, in order */
	uint32_t ninstalled, installed_cap;
	st_table *owners;       /* owner -> its Wrappers module */
	uint64_t live;          /* the generation whose wrappers report; 0: none */
	const struct trc_wrap_sink *sink;       /* where they report */
	uint64_t generation;    /* the latest made (trc_wrap_generation) */
	void (*defined)(VALUE mod, ID mid);     /* the app's definitions go there ... */
	int (*watching)(void);  /* ... when this says they matter */
	int defining;           /* our own definitions are not the app's */
	VALUE wrappers_class;   /* TracerAgent::Wrappers */
	VALUE anchor;           /* TracerAgent::Wrappers::Anchor: see prepend() */
	VALUE wrap_module;      /* TracerAgent::Wrap */
	uint64_t alloc_failures;
	uint64_t definitions;   /* methods the app defined since DefinitionWatch is in place */
	int boxes;              /* Ruby::Box is on (4.0, RUBY_BOX=1): see trc_wrap_box_copy */
} wraps;

static ID id_bind_call, id_private, id_protected, id_expressions, id_box_copy;

/*
 * TracerAgent, as Init_ made it. Under Ruby::Box (4.0) it is a constant of the agent's box
 * only, and the service may run where the current box is another: in a postponed job on an
 * app's thread inside a builtin's Ruby code (ConditionVariable#wait is the root box's), where
 * Object has no TracerAgent. So the agent never looks itself up by name.
 */
static VALUE agent_mod = Qnil;

VALUE
trc_wrap_agent(void)
{
	return agent_mod;
}

/* The Ruby half (lib/tracer_agent/wrap.rb), loaded after this extension: looked up at first use. */
static void
ruby_side(void)
{
	VALUE agent;

	if (wraps.wrap_module != 0)
		return;
	agent = agent_mod;
	wraps.wrappers_class = rb_const_get(agent, rb_intern("Wrappers"));
	wraps.anchor = rb_define_class_under(wraps.wrappers_class, "Anchor", rb_cObject);
	wraps.wrap_module = rb_const_get(agent, rb_intern("Wrap"));
}

/* ---- slots ---- */

static inline uint32_t
slot_hash(VALUE w, ID mid)
{
	uint64_t h = ((uint64_t)w >> 3) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)mid * 0xC2B2AE3D27D4EB4Full);
	return (uint32_t)(h >> 32);
}

static inline struct slot *
slot_find(VALUE w, ID mid)
{
	if (wraps.index == NULL)
		return NULL;
	for (uint32_t i = slot_hash(w, mid) & wraps.mask;; i = (i + 1) & wraps.mask) {
		uint32_t s = wraps.index[i];
		if (s == 0)
			return NULL;
		if (wraps.slots[s - 1].w == w && wraps.slots[s - 1].mid == mid)
			return &wraps.slots[s - 1];
	}
}

static void
index_put(uint32_t *index, uint32_t mask, uint32_t hash, uint32_t value)
{
	uint32_t i = hash & mask;
	while (index[i] != 0)
		i = (i + 1) & mask;
	index[i] = value;
}

/* Room for one more slot, the index kept under half full; -1 when memory runs out. */
static int
slots_grow(void)
{
	if (wraps.n == wraps.cap) {
		uint32_t cap = wraps.cap ? wraps.cap * 2 : 256;
		struct slot *s = trc_realloc(wraps.slots, (size_t)cap * sizeof(*s));
		if (s == NULL)
			return -1;
		wraps.slots = s;
		wraps.cap = cap;
	}
	if (wraps.index == NULL || (wraps.n + 1) * 2 > wraps.mask + 1) {
		uint32_t size = wraps.index == NULL ? 512 : (wraps.mask + 1) * 2;
		uint32_t *index = trc_calloc(size, sizeof(*index));
		if (index == NULL)
			return -1;
		for (uint32_t i = 0; i < wraps.n; i++)
			index_put(index, size - 1, slot_hash(wraps.slots[i].w, wraps.slots[i].mid), i + 1);
		free(wraps.index);
		wraps.index = index;
		wraps.mask = size - 1;
	}
	return 0;
}

static struct slot *
slot_get(VALUE w, VALUE owner, ID mid)
{
	struct slot *s = slot_find(w, mid);

	if (s != NULL)
		return s;
	if (slots_grow() < 0)
		return NULL;
	s = &wraps.slots[wraps.n];
	memset(s, 0, sizeof(*s));
	s->w = w;
	s->mid = mid;
	s->exprs = Qnil;
	s->reaches = Qnil;
	s->owner = owner;
	s->module = RB_TYPE_P(owner, T_MODULE);
	index_put(wraps.index, wraps.mask, slot_hash(w, mid), ++wraps.n);
	return s;
}

static int
remember_installed(const struct slot *s)
{
	if (wraps.ninstalled == wraps.installed_cap) {
		uint32_t cap = wraps.installed_cap ? wraps.installed_cap * 2 : 256;
		uint32_t *p = trc_realloc(wraps.installed, (size_t)cap * sizeof(*p));
		if (p == NULL)
			return -1;
		wraps.installed = p;
		wraps.installed_cap = cap;
	}
	wraps.installed[wraps.ninstalled++] = (uint32_t)(s - wraps.slots);
	return 0;
}

/* ---- passing a call on ---- */

struct call {
	int argc;
	const VALUE *argv;
	VALUE self;
	VALUE original;         /* Qundef: super reaches it */
	uint32_t slot;
	uint64_t gen;
};

/*
 * With the wrapper in place, the owner's method is what comes after it (super_method). The app
 * may also call a wrapper it took hold of (instance_method) before the session removed it: the
 * owner's method is then the one its instance_method finds.
 */
static VALUE
find_original(VALUE arg)
{
	const struct slot *s = (const struct slot *)arg;
	VALUE um = rb_funcall(rb_const_get(wraps.wrap_module, rb_intern("INSTANCE_METHOD")), id_bind_call, 2, s->owner,
	    ID2SYM(s->mid));

	if (rb_funcall(um, rb_intern("owner"), 0) != s->w)
		return um;
	return rb_funcall(um, rb_intern("super_method"), 0);
}

/* The method as its owner has it, under the wrapper (an UnboundMethod); Qundef if Ruby fails. */
static VALUE
original_of(const struct slot *s)
{
	int state = 0;
	VALUE um = rb_protect(find_original, (VALUE)s, &state);

	if (state || NIL_P(um)) {
		rb_set_errinfo(Qnil);
		return Qundef;
	}
	return um;
}

/*
 * Passes the call on, to what comes after the wrapper: super, as a rule. A module's method may
 * also be called on an object whose class never included the module
 * (Kernel.instance_method(:inspect).bind_call(a_basic_object)): then super would search that
 * object's class, and miss the method or find another. The original is then called as the
 * app asked (bind_call), which is slow, and rare.
 */
static VALUE
pass_on(const struct call *c)
{
	VALUE stack[8], *argv = stack, heap = 0, v;

	if (c->original == Qundef)
		return rb_call_super_kw(c->argc, c->argv, RB_PASS_CALLED_KEYWORDS);
	if (c->argc + 1 > (int)(sizeof(stack) / sizeof(stack[0])))
		argv = ALLOCV_N(VALUE, heap, c->argc + 1);
	argv[0] = c->self;
	memcpy(argv + 1, c->argv, sizeof(VALUE) * (size_t)c->argc);
	v = rb_funcall_passing_block_kw(c->original, id_bind_call, c->argc + 1, argv, RB_PASS_CALLED_KEYWORDS);
	if (heap)
		ALLOCV_END(heap);
	return v;
}

static VALUE
call_on(VALUE arg)
{
	return pass_on((const struct call *)arg);
}

/*
 * Whether super from slot s's wrapper, called on self, reaches the method: always for a
 * class's (bind_call checks that self is one of its instances), for a module's only when self
 * includes it. The last class that did is remembered, which spares the walk up its ancestors
 * on most calls (and keeps it alive: its address then stands for no other class).
 */
static int
reaches(struct slot *s, VALUE self)
{
	VALUE klass;

	/* Most wrapped methods are a class's: then not even self's class is read. */
	if (!s->module || (klass = rb_obj_class(self)) == s->reaches)
		return 1;
	if (!rb_obj_is_kind_of(self, s->w))
		return 0;
	s->reaches = klass;
	return 1;
}

/* ---- reporting: to the live generation's sink ---- */

/*
 * The slow path: a thread not seen last, or expressions to evaluate. Both may run Ruby (to
 * name the thread, to evaluate), hence the hook guard; and the thread may belong to another
 * Ractor, which must not touch the agent's tables at all.
 */
static void
report_slow(uint32_t m, int begins, const struct trc_wrap_exprs *exprs)
{
	const struct trc_wrap_sink *sink = wraps.sink;
	struct trc_thread *t;

	if (!trc_vm_main_ractor()) {
		trc_vm_other_ractor();
		return;
	}
	trc_vm_hook_in();
	if ((t = trc_thread_current()) != NULL && !t->quiet && sink == wraps.sink) {
		if (begins)
			sink->enter(t, m, exprs);
		else if (sink->leave != NULL)
			sink->leave(t, m);
	}
	trc_vm_hook_out();
}

/*
 * Every wrapped call passes here twice, so the common case takes no lock and no call but the
 * sink's: on the thread seen last (which is then of the main Ractor, and has an entry), no
 * expression. Nothing in it can run Ruby, so the session's service cannot run in the middle
 * of it either: no hook guard is needed. The caller made sure a generation is live, and
 * gives the current thread (th), which it may have needed too: one lookup of it, not two.
 */
static inline void
report(VALUE th, uint32_t m, int begins, const struct trc_wrap_exprs *exprs)
{
	struct trc_thread *t;

	if (th == trc_names_last_thread && (t = trc_names_last_entry) != NULL && !t->quiet && exprs == NULL) {
		if (begins)
			wraps.sink->enter(t, m, NULL);
		else if (wraps.sink->leave != NULL)
			wraps.sink->leave(t, m);
		return;
	}
	report_slow(m, begins, exprs);
}

/*
 * A token says which method a call into the agent is of (TracerAgent.__enter and __leave, from
 * the TracePoints on methods no table holds): the method index and the generation of the
 * session that put it in place. A TracePoint the app still reaches after its session then
 * carries an old generation and is not counted as some other method of a later session.
 */
#define TOKEN_METHOD_BITS 21    /* TRC_MAX_METHODS is 1 << 20 */

uint64_t
trc_wrap_generation(void)
{
	return ++wraps.generation;
}

uint64_t
trc_wrap_token(uint64_t gen, uint32_t m)
{
	return (gen << TOKEN_METHOD_BITS) | m;
}

/* Method m of a token of the live generation; 0 for a stale or foreign token. */
static inline int
token_method(VALUE token, uint32_t *m)
{
	uint64_t tok;

	if (!FIXNUM_P(token) || FIX2LONG(token) < 0)
		return 0;
	tok = (uint64_t)FIX2LONG(token);
	*m = (uint32_t)(tok & ((1u << TOKEN_METHOD_BITS) - 1));
	return wraps.live != 0 && tok >> TOKEN_METHOD_BITS == wraps.live;
}

/* TracerAgent.__enter(token): a call of a method a TracePoint watches begins. */
static VALUE
agent_enter(VALUE self, VALUE token)
{
	uint32_t m;

	if (token_method(token, &m))
		report(rb_thread_current(), m, 1, NULL);
	return Qnil;
}

/* TracerAgent.__leave(token): it ended, however it ended. */
static VALUE
agent_leave(VALUE self, VALUE token)
{
	uint32_t m;

	if (token_method(token, &m))
		report(rb_thread_current(), m, 0, NULL);
	return Qnil;
}

void
trc_wrap_live(uint64_t gen, const struct trc_wrap_sink *sink)
{
	wraps.live = sink != NULL ? gen : 0;
	wraps.sink = sink;
}

/* ---- the wrapper ---- */

static VALUE
call_ended(VALUE arg)
{
	const struct call *c = (const struct call *)arg;

	/* Not if the session ended meanwhile: its tables may be gone. */
	if (wraps.live == c->gen)
		report(rb_thread_current(), wraps.slots[c->slot].m, 0, NULL);
	return Qnil;
}

/*
 * The slot of the wrapper running now, on the main Ractor (the agent's tables are its own; a
 * call on another Ractor is passed on with super, and counted as left out); NULL otherwise.
 */
static inline struct slot *
running_slot(VALUE th)
{
	ID mid;
	VALUE w;

	if (!rb_frame_method_id_and_class(&mid, &w))
		return NULL;
	if (th != trc_names_last_thread && !trc_vm_main_ractor()) {
		if (wraps.live != 0)
			trc_vm_other_ractor();
		return NULL;
	}
	return slot_find(w, mid);
}

/*
 * An attr_reader's wrapper reads the variable itself, as the VM's reader does (nil when it is
 * not set, no warning), rather than pass the call on: the reader takes some 15 ns, and a call
 * passed on costs 80 ns more in a loop and some 350 ns in a big app (super's method search has
 * no inline cache, and its tables are out of the CPU's caches: docs/performance.md). Readers
 * are the app's most frequent calls (in Redmine, 45% of the wrapped calls of an issue list).
 * The read runs no Ruby and cannot raise, so the call needs no ensure.
 */
static VALUE
read_ivar(VALUE th, const struct slot *s, VALUE self)
{
	uint64_t gen = s->gen;
	uint32_t m = s->m;
	VALUE v;

	if (wraps.live == 0 || gen != wraps.live)
		return rb_attr_get(self, s->ivar);
	report(th, m, 1, NULL);
	v = rb_attr_get(self, s->ivar);
	if (wraps.live == gen && wraps.sink->leave != NULL)
		report(th, m, 0, NULL);
	return v;
}

/*
 * Every wrapper comes here. The VM does not check the machine stack before the call passes on
 * (rb_call_super_kw), and each wrapped frame adds one C recursion: near the end of the stack
 * it raises SystemStackError, as Ruby's own calls from C do, rather than let the guard page
 * turn it into one that nothing can rescue.
 */
static VALUE
wrapped_call(int argc, const VALUE *argv, VALUE self)
{
	VALUE th = rb_thread_current();
	struct slot *s;
	struct call c;

	if (ruby_stack_check())
		rb_raise(rb_eSysStackError, "stack level too deep");
	if ((s = running_slot(th)) == NULL)
		return rb_call_super_kw(argc, argv, RB_PASS_CALLED_KEYWORDS);
	c.argc = argc;
	c.argv = argv;
	c.self = self;
	c.original = reaches(s, self) ? Qundef : original_of(s);
	if (s->ivar != 0 && c.original == Qundef)
		return read_ivar(th, s, self);
	if (wraps.live == 0 || s->gen != wraps.live)
		return pass_on(&c);
	c.slot = (uint32_t)(s - wraps.slots);
	c.gen = s->gen;
	if (NIL_P(s->exprs)) {
		report(th, s->m, 1, NULL);
	} else {
		struct trc_wrap_exprs e = { s->exprs, self, argc, argv };
		report(th, s->m, 1, &e);
	}
	/* A sink that only counts has nothing to do at the return. (Expressions may have run Ruby,
	 * and the session ended meanwhile: the sink is read again.) */
	if (wraps.live == c.gen && wraps.sink->leave == NULL)
		return pass_on(&c);
	return rb_ensure(call_on, (VALUE)&c, call_ended, (VALUE)&c);
}

/*
 * The wrappers themselves, by arity: a method whose parameters are all required ones keeps its
 * arity while wrapped (an app that asks a Method how many arguments it takes, to call it with
 * as many, gets the same answer); any other has the wrapper that takes anything (-1).
 */
static VALUE
wrapper(int argc, VALUE *argv, VALUE self)
{
	return wrapped_call(argc, argv, self);
}

static VALUE
wrapper0(VALUE self)
{
	return wrapped_call(0, NULL, self);
}

/* clang-format off */
static VALUE wrapper1(VALUE s, VALUE a) { const VALUE v[] = { a }; return wrapped_call(1, v, s); }
static VALUE wrapper2(VALUE s, VALUE a, VALUE b) { const VALUE v[] = { a, b }; return wrapped_call(2, v, s); }
static VALUE wrapper3(VALUE s, VALUE a, VALUE b, VALUE c) { const VALUE v[] = { a, b, c }; return wrapped_call(3, v, s); }
static VALUE wrapper4(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d) { const VALUE v[] = { a, b, c, d }; return wrapped_call(4, v, s); }
static VALUE wrapper5(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e) { const VALUE v[] = { a, b, c, d, e }; return wrapped_call(5, v, s); }
static VALUE wrapper6(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e, VALUE f) { const VALUE v[] = { a, b, c, d, e, f }; return wrapped_call(6, v, s); }
static VALUE wrapper7(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e, VALUE f, VALUE g) { const VALUE v[] = { a, b, c, d, e, f, g }; return wrapped_call(7, v, s); }
static VALUE wrapper8(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e, VALUE f, VALUE g, VALUE h) { const VALUE v[] = { a, b, c, d, e, f, g, h }; return wrapped_call(8, v, s); }
static VALUE wrapper9(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e, VALUE f, VALUE g, VALUE h, VALUE i) { const VALUE v[] = { a, b, c, d, e, f, g, h, i }; return wrapped_call(9, v, s); }
static VALUE wrapper10(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e, VALUE f, VALUE g, VALUE h, VALUE i, VALUE j) { const VALUE v[] = { a, b, c, d, e, f, g, h, i, j }; return wrapped_call(10, v, s); }
static VALUE wrapper11(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e, VALUE f, VALUE g, VALUE h, VALUE i, VALUE j, VALUE k) { const VALUE v[] = { a, b, c, d, e, f, g, h, i, j, k }; return wrapped_call(11, v, s); }
static VALUE wrapper12(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e, VALUE f, VALUE g, VALUE h, VALUE i, VALUE j, VALUE k, VALUE l) { const VALUE v[] = { a, b, c, d, e, f, g, h, i, j, k, l }; return wrapped_call(12, v, s); }
static VALUE wrapper13(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e, VALUE f, VALUE g, VALUE h, VALUE i, VALUE j, VALUE k, VALUE l, VALUE m) { const VALUE v[] = { a, b, c, d, e, f, g, h, i, j, k, l, m }; return wrapped_call(13, v, s); }
static VALUE wrapper14(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e, VALUE f, VALUE g, VALUE h, VALUE i, VALUE j, VALUE k, VALUE l, VALUE m, VALUE n) { const VALUE v[] = { a, b, c, d, e, f, g, h, i, j, k, l, m, n }; return wrapped_call(14, v, s); }
static VALUE wrapper15(VALUE s, VALUE a, VALUE b, VALUE c, VALUE d, VALUE e, VALUE f, VALUE g, VALUE h, VALUE i, VALUE j, VALUE k, VALUE l, VALUE m, VALUE n, VALUE o) { const VALUE v[] = { a, b, c, d, e, f, g, h, i, j, k, l, m, n, o }; return wrapped_call(15, v, s); }
/* clang-format on */

#define TRC_MAX_FIXED_ARITY 15

/* The wrapper for a method of this arity. */
/* cppcheck-suppress unknownMacro ; ANYARGS is Ruby's, an empty parameter list */
static VALUE (*wrapper_for(int arity, int *argc))(ANYARGS)
{
	static VALUE (*const fixed[TRC_MAX_FIXED_ARITY + 1])(ANYARGS) = {
		RUBY_METHOD_FUNC(wrapper0), RUBY_METHOD_FUNC(wrapper1), RUBY_METHOD_FUNC(wrapper2),
		RUBY_METHOD_FUNC(wrapper3), RUBY_METHOD_FUNC(wrapper4), RUBY_METHOD_FUNC(wrapper5),
		RUBY_METHOD_FUNC(wrapper6), RUBY_METHOD_FUNC(wrapper7), RUBY_METHOD_FUNC(wrapper8),
		RUBY_METHOD_FUNC(wrapper9), RUBY_METHOD_FUNC(wrapper10), RUBY_METHOD_FUNC(wrapper11),
		RUBY_METHOD_FUNC(wrapper12), RUBY_METHOD_FUNC(wrapper13), RUBY_METHOD_FUNC(wrapper14),
		RUBY_METHOD_FUNC(wrapper15),
	};

	if (arity >= 0 && arity <= TRC_MAX_FIXED_ARITY) {
		*argc = arity;
		return fixed[arity];
	}
	*argc = -1;
	return RUBY_METHOD_FUNC(wrapper);
}

VALUE
trc_wrap_eval_exprs(const struct trc_wrap_exprs *e)
{
	VALUE stack[8], *argv = stack;
	VALUE v, heap = 0;

	if (e->argc + 1 > (int)(sizeof(stack) / sizeof(stack[0])))
		argv = ALLOCV_N(VALUE, heap, e->argc + 1);
	argv[0] = e->self;
	memcpy(argv + 1, e->argv, sizeof(VALUE) * (size_t)e->argc);
	/* The wrapper's own frame is the current one: its block goes along. */
	v = rb_funcall_passing_block_kw(e->um, id_bind_call, e->argc + 1, argv, RB_PASS_CALLED_KEYWORDS);
	if (heap)
		ALLOCV_END(heap);
	return v;
}

/* ---- putting wrappers in place ---- */

/*
 * Methods a wrapper must never stand in front of, and why. The frame readers are C methods that
 * look at their caller's frame or block, or change it: a wrapper's frame in between would be
 * what they see (block_given? would say false, binding would have no locals, caller would
 * start at the wrapper, raise would show one more frame). The rest Ruby itself treats apart.
 * Found by reading Ruby's source for what looks at the previous frame (prev_frame_func,
 * vm_get_ruby_level_caller_cfp, rb_vm_cref...), checked by test/apps/kernel_methods.rb.
 */
enum refusal {
	FRAME,                  /* C methods only: a Ruby method named so is the app's own */
	DISPATCH,
	BASIC,
	WARNS,
};

static const char *const refusals[] = {
	[FRAME] = "it reads its caller's frame, which a wrapper would hide",
	[DISPATCH] = "Ruby dispatches calls through it",
	[BASIC] = "the VM looks for Ruby's own definition of it",
	[WARNS] = "Ruby warns against redefining it",
};

static const struct {
	const char *name;
	enum refusal why;
} unwrappable[] = {
	{ "block_given?", FRAME }, { "iterator?", FRAME }, { "binding", FRAME },
	{ "local_variables", FRAME }, { "__method__", FRAME }, { "__callee__", FRAME },
	{ "__dir__", FRAME }, { "caller", FRAME }, { "caller_locations", FRAME }, { "eval", FRAME },
	{ "instance_eval", FRAME }, { "instance_exec", FRAME }, { "class_eval", FRAME },
	{ "module_eval", FRAME }, { "class_exec", FRAME }, { "module_exec", FRAME },
	{ "require_relative", FRAME }, { "proc", FRAME }, { "lambda", FRAME }, { "raise", FRAME },
	{ "fail", FRAME }, { "warn", FRAME }, { "private", FRAME }, { "public", FRAME },
	{ "protected", FRAME }, { "module_function", FRAME }, { "using", FRAME }, { "refine", FRAME },
	{ "autoload", FRAME }, { "autoload?", FRAME }, { "nesting", FRAME }, { "constants", FRAME },
	{ "used_modules", FRAME }, { "new", FRAME } /* Proc.new only: see refusal_of() */,
	{ "send", DISPATCH }, { "public_send", DISPATCH },
	{ "respond_to?", BASIC }, { "respond_to_missing?", BASIC }, { "method_missing", BASIC },
	{ "object_id", WARNS }, { "__send__", WARNS }, { "__id__", WARNS },
};

static ID unwrappable_ids[sizeof(unwrappable) / sizeof(unwrappable[0])];
static ID id_new;

/* Why owner's method mid must not be wrapped, or -1. */
static int
refusal_of(VALUE owner, ID mid, int native)
{
	for (size_t i = 0; i < sizeof(unwrappable) / sizeof(unwrappable[0]); i++) {
		if (unwrappable_ids[i] != mid)
			continue;
		if (unwrappable[i].why == FRAME && !native)
			return -1;
		if (mid == id_new)
			return FL_TEST(owner, FL_SINGLETON) && trc_attached_object(owner) == rb_cProc ? FRAME : -1;
		return (int)unwrappable[i].why;
	}
	return -1;
}

const char *
trc_wrap_refusal(VALUE owner, ID mid, int native)
{
	int why = refusal_of(owner, mid, native);

	ruby_side();
	if (why >= 0)
		return refusals[why];
	if (rb_obj_is_kind_of(owner, wraps.wrappers_class) || OBJ_FROZEN(owner))
		return OBJ_FROZEN(owner) ? "its class is frozen" : "it is tracer's own";
	return NULL;
}

struct prepend_args {
	VALUE owner, w;
};

/*
 * Under Ruby::Box (4.0.2, RUBY_BOX=1) a module the box still shares with the root box (Kernel,
 * Enumerable: the builtins) takes a module prepended to it into its own ancestry but not into
 * that of the classes that include it (Object.ancestors: [Object, Kernel, W]): nothing would
 * call what is prepended. Once the box has a copy of its own of the module, which writing a
 * field of it makes, a prepend reaches them; a module prepended before cannot be set right.
 * So the first prepend into a module is preceded by this. The field, which no Ruby code can
 * name (no '@'), stays.
 */
void
trc_wrap_box_copy(VALUE mod)
{
	if (wraps.boxes && RB_TYPE_P(mod, T_MODULE) && !OBJ_FROZEN(mod))
		rb_ivar_set(mod, id_box_copy, Qtrue);
}

/* TracerAgent.__box_copy(mod): the same, for the agent's own prepends (lib/tracer_agent.rb). */
static VALUE
agent_box_copy(VALUE self, VALUE mod)
{
	(void)self;
	trc_wrap_box_copy(mod);
	return Qnil;
}

static VALUE
prepend_now(VALUE arg)
{
	struct prepend_args *a = (struct prepend_args *)arg;

	if (RB_TYPE_P(a->owner, T_MODULE))
		rb_include_module(wraps.anchor, a->owner);
	trc_wrap_box_copy(a->owner);
	rb_prepend_module(a->owner, a->w);
	return Qnil;
}

static VALUE
gc_back(VALUE was_disabled)
{
	if (!RTEST(was_disabled))
		rb_gc_enable();
	return Qnil;
}

/*
 * The Wrappers module for owner, made with Class#new called as any method is (rb_funcall), never
 * with rb_class_new_instance: that one hands initialize the block of the frame it is called
 * from, and Module#initialize runs a block it is given. The install often runs as a postponed
 * job on the app's own thread (control.c), where that frame is the app's: on Redmine, the block
 * ActiveRecord's #[] gives LazyAttributeSet#fetch_value ran so (issue 23). A block that sets a
 * local its method then reads (Delegator's `__getobj__ { r = false }`) changes what the app
 * does next; one that raises left the owner unwrapped.
 */
static VALUE
wrappers_new(VALUE owner)
{
	return rb_funcall(wraps.wrappers_class, id_new, 1, owner);
}

/*
 * Prepending to a module that was included somewhere walks the classes it was included in.
 * Ruby 3.1 (fixed in 3.3) crashes there when all of them have been collected (it takes the
 * list's empty head for one: seen on Redmine, whose helper modules go into view classes that
 * come and go) or touches those not yet swept. So the GC finishes its sweep and waits
 * (rb_gc_disable), and the module is first included into a class of the agent's that lives on
 * (TracerAgent::Wrappers::Anchor; rb_include_module runs none of the module's hooks). For a
 * class, the walk does not happen.
 */
static VALUE
prepend(VALUE arg)
{
	struct prepend_args *a = (struct prepend_args *)arg;
	VALUE was_disabled;

	a->w = wrappers_new(a->owner);
	if (!RB_TYPE_P(a->owner, T_MODULE)) {
		rb_prepend_module(a->owner, a->w);
		return Qnil;
	}
	was_disabled = rb_gc_disable();
	return rb_ensure(prepend_now, arg, gc_back, was_disabled);
}

/* owner's Wrappers module, made and prepended the first time; Qnil if Ruby refused. */
static VALUE
wrappers_of(VALUE owner)
{
	st_data_t w;
	struct prepend_args a = { owner, Qnil };
	int state = 0;

	if (wraps.owners == NULL)
		wraps.owners = st_init_numtable();
	if (st_lookup(wraps.owners, (st_data_t)owner, &w))
		return (VALUE)w;
	rb_protect(prepend, (VALUE)&a, &state);
	if (state) {
		rb_set_errinfo(Qnil);
		return Qnil;
	}
	st_insert(wraps.owners, (st_data_t)owner, (st_data_t)a.w);
	return a.w;
}

/*
 * mid's name as a C string that names mid alone, or NULL. Ruby defines a private or protected
 * C method only by such a name; by its ID, a method is defined public and then made private,
 * so that it is public for an instant and Ruby invalidates the caches below the Wrappers
 * module twice: for a module's, in each class the module is included in (Redmine: 660 of its
 * 4,648 methods are private or protected). A name that is not plain ASCII, or holds a NUL,
 * goes that long way.
 */
static const char *
plain_name(ID mid)
{
	VALUE s = rb_id2str(mid);
	const char *p;
	long n;

	if (NIL_P(s))
		return NULL;
	p = RSTRING_PTR(s);
	n = RSTRING_LEN(s);
	for (long i = 0; i < n; i++) {
		if (p[i] == '\0' || (unsigned char)p[i] >= 0x80)
			return NULL;
	}
	return rb_intern2(p, n) == mid ? p : NULL;
}

struct define_args {
	VALUE w;
	ID mid;
	int visibility;
	int arity;
};

static VALUE
define(VALUE arg)
{
	const struct define_args *a = (const struct define_args *)arg;

	/* Safe to call on any Ractor: it touches the agent's tables only on the main one. */
#ifdef HAVE_RB_EXT_RACTOR_SAFE
	rb_ext_ractor_safe(true);
#endif
	int argc;
	VALUE (*f)(ANYARGS) = wrapper_for(a->arity, &argc);

	const char *name = a->visibility == TRC_VISI_PUBLIC ? NULL : plain_name(a->mid);

	if (name != NULL && a->visibility == TRC_VISI_PRIVATE)
		(rb_define_private_method)(a->w, name, f, argc);
	else if (name != NULL)
		(rb_define_protected_method)(a->w, name, f, argc);
	else
		(rb_define_method_id)(a->w, a->mid, f, argc);
#ifdef HAVE_RB_EXT_RACTOR_SAFE
	rb_ext_ractor_safe(false);
#endif
	/* The long way: public for an instant, never private, so that no caller gets NoMethodError. */
	if (name == NULL && a->visibility == TRC_VISI_PRIVATE)
		rb_funcall(a->w, id_private, 1, ID2SYM(a->mid));
	else if (name == NULL && a->visibility == TRC_VISI_PROTECTED)
		rb_funcall(a->w, id_protected, 1, ID2SYM(a->mid));
	return Qnil;
}

static VALUE
describe(VALUE exc)
{
	return rb_sprintf("%"PRIsVALUE": %"PRIsVALUE, rb_obj_class(exc), rb_funcall(exc, rb_intern("message"), 0));
}

/* The message of the exception Ruby just raised, which is then cleared. */
static VALUE
raised(void)
{
	VALUE exc = rb_errinfo(), desc;
	int state = 0;

	rb_set_errinfo(Qnil);
	desc = rb_protect(describe, exc, &state);
	if (state) {
		rb_set_errinfo(Qnil);
		return rb_str_new_cstr("it raised");
	}
	return desc;
}

/* The instance variable attr_reader :name reads: @name. */
static ID
reader_ivar(ID mid)
{
	VALUE name = rb_id2str(mid);

	return NIL_P(name) ? 0 : rb_intern_str(rb_str_concat(rb_str_new_cstr("@"), name));
}

int
trc_wrap_put(VALUE owner, ID mid, int visibility, int arity, uint32_t m, uint64_t gen, VALUE exprs, VALUE *why)
{
	VALUE w;
	struct define_args a;
	struct slot *s;
	int state = 0;

	ruby_side();
	if (NIL_P(w = wrappers_of(owner))) {
		*why = rb_str_new_cstr("cannot wrap it: Ruby would not prepend a module to its owner");
		return -1;
	}
	if ((s = slot_get(w, owner, mid)) == NULL) {
		wraps.alloc_failures++;
		*why = rb_str_new_cstr("cannot wrap it: out of memory");
		return -1;
	}
	s->m = m;
	s->gen = gen;
	s->exprs = exprs;
	/* Redefined since as something else, or with expressions to show: passed on, as a rule. */
	s->ivar = arity == TRC_WRAP_READER && NIL_P(exprs) ? reader_ivar(mid) : 0;
	if (arity == TRC_WRAP_READER)
		arity = 0;
	if (s->defined)
		return 0;
	if (remember_installed(s) < 0) {
		wraps.alloc_failures++;
		*why = rb_str_new_cstr("cannot wrap it: out of memory");
		return -1;
	}
	a.w = w;
	a.mid = mid;
	a.visibility = visibility;
	a.arity = arity;
	wraps.defining++;
	rb_protect(define, (VALUE)&a, &state);
	wraps.defining--;
	if (state) {
		*why = rb_sprintf("cannot wrap it: %"PRIsVALUE, raised());
		wraps.ninstalled--;
		return -1;
	}
	s->defined = 1;
	return 0;
}

struct exprs_args {
	VALUE owner, home, name, exprs;
};

static VALUE
compile_exprs(VALUE arg)
{
	const struct exprs_args *a = (const struct exprs_args *)arg;
	VALUE argv[4] = { a->owner, a->home, a->name, a->exprs };

	return rb_funcallv(wraps.wrap_module, id_expressions, 4, argv);
}

VALUE
trc_wrap_expressions(VALUE owner, ID mid, VALUE exprs, VALUE *why)
{
	struct exprs_args a = { owner, Qnil, ID2SYM(mid), exprs };
	int state = 0;
	VALUE um;

	ruby_side();
	if (FL_TEST(owner, FL_SINGLETON))
		a.home = trc_attached_object(owner);
	um = rb_protect(compile_exprs, (VALUE)&a, &state);
	if (state) {
		*why = rb_sprintf("cannot show its expressions: %"PRIsVALUE, raised());
		return Qnil;
	}
	return um;
}

/* ---- taking them away ---- */

struct remove_args {
	VALUE w;
	ID mid;
};

static VALUE
remove_wrapper(VALUE arg)
{
	const struct remove_args *a = (const struct remove_args *)arg;
	VALUE verbose = ruby_verbose;

	/* Ruby warns "removing `initialize' may cause serious problems": not of ours. */
	ruby_verbose = Qnil;
	rb_remove_method_id(a->w, a->mid);
	ruby_verbose = verbose;
	return Qnil;
}

int
trc_wrap_remove_some(int (*more)(void *), void *arg)
{
	trc_wrap_live(0, NULL);
	wraps.defining++;
	while (wraps.ninstalled > 0 && more(arg)) {
		struct slot *s = &wraps.slots[wraps.installed[--wraps.ninstalled]];
		struct remove_args a = { s->w, s->mid };
		int state = 0;

		s->defined = 0;
		s->exprs = Qnil;
		rb_protect(remove_wrapper, (VALUE)&a, &state);
		if (state)
			rb_set_errinfo(Qnil);
	}
	wraps.defining--;
	return (int)wraps.ninstalled;
}

int
trc_wrapped(void)
{
	return (int)wraps.ninstalled;
}

uint64_t
trc_wrap_alloc_failures(void)
{
	return wraps.alloc_failures;
}

static int
mark_owner(st_data_t owner, st_data_t w, st_data_t unused)
{
	rb_gc_mark((VALUE)owner);
	rb_gc_mark((VALUE)w);
	return ST_CONTINUE;
}

void
trc_wrap_mark(void)
{
	rb_gc_mark(wraps.wrappers_class);
	rb_gc_mark(wraps.anchor);
	rb_gc_mark(wraps.wrap_module);
	if (wraps.owners != NULL)
		st_foreach(wraps.owners, mark_owner, 0);
	for (uint32_t i = 0; i < wraps.n; i++) {
		rb_gc_mark(wraps.slots[i].exprs);
		rb_gc_mark(wraps.slots[i].reaches);
	}
}

/* ---- the app's definitions ---- */

/*
 * TracerAgent.__watching, from Module#method_added once a session has put DefinitionWatch in
 * place: whether this definition matters now (a session wants to know). Every definition but
 * the agent's own is counted, session or not: what was found of the app's methods holds only as
 * long as the count stays (plan.c).
 */
static VALUE
agent_watching(VALUE self)
{
	if (wraps.defining)
		return Qfalse;
	__atomic_fetch_add(&wraps.definitions, 1, __ATOMIC_RELAXED);
	return wraps.watching != NULL && wraps.watching() && trc_vm_main_ractor() ? Qtrue : Qfalse;
}

uint64_t
trc_wrap_definitions(void)
{
	return __atomic_load_n(&wraps.definitions, __ATOMIC_RELAXED);
}

/* TracerAgent.__defined(mod, name): the app defined a method while a session wants to know. */
static VALUE
agent_defined(VALUE self, VALUE mod, VALUE name)
{
	if (wraps.defining || !SYMBOL_P(name))
		return Qnil;
	ruby_side();
	if (rb_obj_is_kind_of(mod, wraps.wrappers_class) || wraps.defined == NULL)
		return Qnil;
	trc_vm_hook_in();       /* Ruby runs below: the session's service must wait */
	wraps.defined(mod, SYM2ID(name));
	trc_vm_hook_out();
	return Qnil;
}

/*
 * TracerAgent.__changed(mod, name), from Module#method_added, #method_removed and
 * #method_undefined: a reader wrapped for mod's method name reads the variable no more, and
 * passes the call on (to the new definition, or to NoMethodError), as any wrapper does. Until
 * the next session, which looks at the method afresh.
 */
static VALUE
agent_changed(VALUE self, VALUE mod, VALUE name)
{
	st_data_t w;
	struct slot *s;

	if (wraps.defining || !SYMBOL_P(name) || wraps.owners == NULL || !trc_vm_main_ractor())
		return Qnil;
	if (st_lookup(wraps.owners, (st_data_t)mod, &w) && (s = slot_find((VALUE)w, SYM2ID(name))) != NULL)
		s->ivar = 0;
	return Qnil;
}

void
trc_wrap_definitions_to(void (*defined)(VALUE mod, ID mid), int (*watching)(void))
{
	wraps.defined = defined;
	wraps.watching = watching;
}

static VALUE
watch_definitions(VALUE unused)
{
	ruby_side();
	return rb_funcall(wraps.wrap_module, rb_intern("watch"), 0);
}

void
trc_wrap_watch(void)
{
	int state = 0;

	rb_protect(watch_definitions, Qnil, &state);
	if (state)
		rb_set_errinfo(Qnil);
}

static VALUE
boxes_enabled_p(VALUE unused)
{
	VALUE ruby;

	(void)unused;
	if (!rb_const_defined(rb_cObject, rb_intern("Ruby")))
		return Qfalse;
	ruby = rb_const_get(rb_cObject, rb_intern("Ruby"));
	if (!rb_const_defined(ruby, rb_intern("Box")))
		return Qfalse;
	return rb_funcall(rb_const_get(ruby, rb_intern("Box")), rb_intern("enabled?"), 0);
}

/* Whether Ruby::Box is on (Ruby 4.0 with RUBY_BOX=1): fixed for the life of the process. */
static int
boxes_enabled(void)
{
	int state = 0;
	VALUE on = rb_protect(boxes_enabled_p, Qnil, &state);

	if (state) {
		rb_set_errinfo(Qnil);
		return 0;
	}
	return RTEST(on);
}

void
trc_wrap_init(VALUE mod)
{
	id_bind_call = rb_intern("bind_call");
	id_private = rb_intern("private");
	id_protected = rb_intern("protected");
	id_expressions = rb_intern("expressions");
	id_new = rb_intern("new");
	for (size_t i = 0; i < sizeof(unwrappable) / sizeof(unwrappable[0]); i++)
		unwrappable_ids[i] = rb_intern(unwrappable[i].name);
	id_box_copy = rb_intern("__tracer_box_copy");
	agent_mod = mod;
	rb_gc_register_address(&agent_mod);
	wraps.boxes = boxes_enabled();
#ifdef HAVE_RB_EXT_RACTOR_SAFE
	rb_ext_ractor_safe(true);
#endif
	/* The TracePoints' calls into the agent: a stale token does nothing. */
	rb_define_singleton_method(mod, "__enter", agent_enter, 1);
	rb_define_singleton_method(mod, "__leave", agent_leave, 1);
	rb_define_singleton_method(mod, "__watching", agent_watching, 0);
#ifdef HAVE_RB_EXT_RACTOR_SAFE
	rb_ext_ractor_safe(false);
#endif
	rb_define_singleton_method(mod, "__defined", agent_defined, 2);
	rb_define_singleton_method(mod, "__changed", agent_changed, 2);
	rb_define_singleton_method(mod, "__box_copy", agent_box_copy, 1);
}

