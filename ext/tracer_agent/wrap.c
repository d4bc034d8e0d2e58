/* wrap.c: the agent's side of -m's wrappers: installing and removing them, and their calls in. */
#include "wrap.h"

#include <stdlib.h>

#include "extconf.h"
#include "control.h"
#include "hook.h"
#include "names.h"

/*
 * Why wrappers: an enabled TracePoint, even one targeted at a single method, and any global
 * call hook leave a YJIT process slower for good after they are removed (measured on Ruby 3.4:
 * 6x and 9x on a loop of small calls), and a global call hook rewrites every method's bytecode
 * on any Ruby. A wrapper is a plain method put in the traced method's place: it costs only the
 * calls of that method, and once the original entry is back nothing of it remains. The
 * wrappers themselves are written in Ruby (lib/tracer_agent/wrap.rb): generated source with
 * the original's own parameters, compiled where the method lives.
 *
 * While installed, a wrapper is visible: a backtrace through the method shows one more frame,
 * at (tracer wrapper):N, and method_added runs for the aliases made.
 */
struct wrap {
	VALUE handle;           /* Wrap.install's answer, for Wrap.uninstall */
	VALUE owner;
	ID mid;
};

static struct wrap *wraps;
static int nwraps, cap;
static int installing;          /* our own aliases and definitions are not the app's */
static ID id_install, id_uninstall, id_wrapper_index, id_app_methods, id_app_method;
static VALUE wrap_module = Qnil;

struct install_args {
	VALUE owner;
	ID mid;
	VALUE exprs;
};

/* The method being wrapped, while Wrap.install runs: what TracerAgent.__bind binds a slot to. */
static struct {
	int on;
	uint64_t gen;
	uint32_t m;
} binding;

static VALUE
wrap_mod(void)
{
	if (NIL_P(wrap_module)) {
		VALUE agent = rb_const_get(rb_cObject, rb_intern("TracerAgent"));
		wrap_module = rb_const_get(agent, rb_intern("Wrap"));
	}
	return wrap_module;
}

static VALUE
install(VALUE arg)
{
	struct install_args *a = (struct install_args *)arg;
	VALUE argv[3] = { a->owner, ID2SYM(a->mid), a->exprs };
	return rb_funcallv(wrap_mod(), id_install, 3, argv);
}

static VALUE
describe(VALUE exc)
{
	return rb_sprintf("%"PRIsVALUE": %"PRIsVALUE, rb_obj_class(exc), rb_funcall(exc, rb_intern("message"), 0));
}

static int
grow(void)
{
	struct wrap *w;
	int n = cap ? cap * 2 : 64;

	if (nwraps < cap)
		return 0;
	if ((w = realloc(wraps, (size_t)n * sizeof(*w))) == NULL)
		return -1;
	wraps = w;
	cap = n;
	return 0;
}

static VALUE
wrapper_index(VALUE arg);

struct defined_args {
	VALUE mod, name;
};

/* Whether w's method has been defined again since (its name holds no wrapper of ours now). */
static int
replaced(const struct wrap *w)
{
	struct defined_args a = { w->owner, ID2SYM(w->mid) };
	int state = 0;
	VALUE index = rb_protect(wrapper_index, (VALUE)&a, &state);

	if (state) {
		rb_set_errinfo(Qnil);
		return 0;
	}
	return !FIXNUM_P(index);
}

/*
 * Registers owner's mid, then puts it in place with put(arg) (a wrapper, a TracePoint), whose
 * answer is the handle Wrap.uninstall takes. Registered first: what is put may run at once.
 * what names the action for *why ("wrap", "trace").
 */
static int
put_in_place(VALUE owner, ID mid, VALUE (*put)(VALUE), VALUE arg, const char *what, VALUE *why)
{
	struct wrap *w;
	int state = 0;
	VALUE handle;

	if (grow() < 0) {
		*why = rb_sprintf("cannot %s it: out of memory", what);
		return -1;
	}
	w = &wraps[nwraps++];
	w->owner = owner;
	w->mid = mid;
	w->handle = Qnil;
	installing++;
	handle = rb_protect(put, arg, &state);
	installing--;
	if (state) {
		VALUE exc = rb_errinfo(), desc;

		rb_set_errinfo(Qnil);
		desc = rb_protect(describe, exc, &state);
		if (state)
			rb_set_errinfo(Qnil);
		*why = state ? rb_sprintf("cannot %s it", what) : rb_sprintf("cannot %s it: %"PRIsVALUE, what, desc);
		nwraps--;
		return -1;
	}
	w->handle = handle;
	return 0;
}

int
trc_wrap(VALUE owner, ID mid, uint32_t m, uint64_t gen, VALUE exprs, VALUE *why)
{
	struct install_args a = { owner, mid, exprs };
	int r;

	/* Wrapped already, unless the app has put a new definition in the wrapper's place since. */
	for (int i = nwraps - 1; i >= 0; i--)
		if (wraps[i].owner == owner && wraps[i].mid == mid && !replaced(&wraps[i]))
			return 0;
	binding.on = 1;
	binding.gen = gen;
	binding.m = m;
	r = put_in_place(owner, mid, install, (VALUE)&a, "wrap", why);
	binding.on = 0;
	return r;
}

static VALUE
app_methods(VALUE arg)
{
	const struct trc_scope *sc = (const struct trc_scope *)arg;
	VALUE cwd = sc->cwd ? rb_str_new_cstr(sc->cwd) : Qnil;

	return rb_funcall(wrap_mod(), id_app_methods, 3, sc->prefix_list, cwd, sc->ignore_list);
}

int
trc_wrap_scope(const struct trc_scope *scope, uint64_t gen)
{
	int state = 0, n = 0;
	VALUE list = rb_protect(app_methods, (VALUE)scope, &state), none = rb_ary_new(), why;

	if (state || !RB_TYPE_P(list, T_ARRAY)) {
		rb_set_errinfo(Qnil);
		return 0;
	}
	/* [owner, name, path, line, ...]; an UnboundMethod in owner's place is a method no table
	 * holds (a Sinatra route), traced where it is. */
	for (long i = 0; i + 3 < RARRAY_LEN(list); i += 4) {
		VALUE owner = RARRAY_AREF(list, i), um = Qnil;
		ID mid = SYM2ID(RARRAY_AREF(list, i + 1));
		uint32_t m;

		if (rb_obj_is_kind_of(owner, rb_cUnboundMethod)) {
			um = owner;
			owner = rb_funcall(um, rb_intern("owner"), 0);
		}
		m = trc_method_intern(owner, mid, RARRAY_AREF(list, i + 2), NUM2INT(RARRAY_AREF(list, i + 3)), -2);
		if (m == UINT32_MAX)
			continue;
		if (NIL_P(um) ? trc_wrap(owner, mid, m, gen, none, &why) == 0 :
		    trc_wrap_detached(um, owner, mid, m, gen, &why) == 0)
			n++;
	}
	RB_GC_GUARD(list);
	return n;
}

struct app_method_args {
	const struct trc_scope *scope;
	VALUE owner;
	ID mid;
};

static VALUE
app_method(VALUE arg)
{
	const struct app_method_args *a = (const struct app_method_args *)arg;
	VALUE cwd = a->scope->cwd ? rb_str_new_cstr(a->scope->cwd) : Qnil;
	VALUE argv[5] = { a->owner, ID2SYM(a->mid), a->scope->prefix_list, cwd, a->scope->ignore_list };

	return rb_funcallv(wrap_mod(), id_app_method, 5, argv);
}

int
trc_wrap_scope_one(const struct trc_scope *scope, uint64_t gen, VALUE owner, ID mid)
{
	struct app_method_args a = { scope, owner, mid };
	int state = 0;
	VALUE where = rb_protect(app_method, (VALUE)&a, &state), why;
	uint32_t m;

	if (state) {
		rb_set_errinfo(Qnil);
		return 0;
	}
	if (!RB_TYPE_P(where, T_ARRAY) || RARRAY_LEN(where) != 2)
		return 0;
	m = trc_method_intern(owner, mid, RARRAY_AREF(where, 0), NUM2INT(RARRAY_AREF(where, 1)), -2);
	return m != UINT32_MAX && trc_wrap(owner, mid, m, gen, rb_ary_new(), &why) == 0;
}

struct detached_args {
	VALUE um, token;
};

static VALUE
trace_detached(VALUE arg)
{
	struct detached_args *a = (struct detached_args *)arg;
	return rb_funcall(wrap_mod(), rb_intern("trace_detached"), 2, a->um, a->token);
}

int
trc_wrap_detached(VALUE um, VALUE owner, ID mid, uint32_t m, uint64_t gen, VALUE *why)
{
	struct detached_args a = { um, ULL2NUM(trc_hook_token(gen, m)) };

	return put_in_place(owner, mid, trace_detached, (VALUE)&a, "trace", why);
}

static VALUE
uninstall(VALUE arg)
{
	const struct wrap *w = (const struct wrap *)arg;
	return rb_funcall(wrap_mod(), id_uninstall, 1, w->handle);
}

void
trc_unwrap_all(void)
{
	if (nwraps == 0)
		return;
	installing++;
	while (nwraps > 0) {
		int state = 0;
		rb_protect(uninstall, (VALUE)&wraps[nwraps - 1], &state);
		if (state)
			rb_set_errinfo(Qnil);
		nwraps--;
	}
	installing--;
}

int
trc_wrapped(void)
{
	return nwraps;
}

void
trc_wrap_mark(void)
{
	rb_gc_mark(wrap_module);
	for (int i = 0; i < nwraps; i++) {
		rb_gc_mark(wraps[i].handle);
		rb_gc_mark(wraps[i].owner);
	}
}

/* ---- the wrappers' calls into the agent ---- */

/*
 * Wrappers are methods: another Ractor may call them. The agent's tables are the main Ractor's
 * (its hooks are too: the VM keeps them per Ractor), and other Ractors run in parallel with it,
 * so their calls are left out (hook.c counts them). The entry points are declared Ractor-safe,
 * or the VM would raise into the app's Ractor instead.
 */

/* TracerAgent.__watching: whether method definitions matter now (Module#method_added). */
static VALUE
agent_watching(VALUE self)
{
	return (nwraps > 0 || trc_hook_watching()) && !installing && trc_control_main_ractor() ? Qtrue : Qfalse;
}

static VALUE
wrapper_index(VALUE arg)
{
	struct defined_args *a = (struct defined_args *)arg;
	return rb_funcall(wrap_mod(), id_wrapper_index, 2, a->mod, a->name);
}

/*
 * TracerAgent.__defined(mod, name): the app defined or aliased a method while tracing or
 * counting. An alias of a wrapper is left as it is: it calls the saved original, which stays
 * (wrap.rb's saved_name). Any other definition may be one to trace: a method a spec names defined late (a class loaded,
 * or reloaded, after attach), or redefined over its wrapper, or an app method (hook.c).
 */
static VALUE
agent_defined(VALUE self, VALUE mod, VALUE name)
{
	struct defined_args a = { mod, name };
	int state = 0;
	VALUE index;

	if (installing || !SYMBOL_P(name))
		return Qnil;
	index = rb_protect(wrapper_index, (VALUE)&a, &state);
	if (state) {
		rb_set_errinfo(Qnil);
		return Qnil;
	}
	if (!FIXNUM_P(index))
		trc_hook_defined(mod, SYM2ID(name));
	return Qnil;
}

/*
 * TracerAgent.__bind(slot): from Wrap.install only. Binds the wrapper's slot (0: a new one) to
 * the method being wrapped, and returns it; nil at any other time, or when none is left.
 */
static VALUE
agent_bind(VALUE self, VALUE slot)
{
	uint32_t s;

	if (!binding.on || !FIXNUM_P(slot) || FIX2LONG(slot) < 0 || FIX2LONG(slot) > UINT32_MAX)
		return Qnil;
	s = (uint32_t)FIX2LONG(slot);
	return trc_hook_bind(&s, binding.gen, binding.m) == 0 ? UINT2NUM(s) : Qnil;
}

void
trc_wrap_init(VALUE mod)
{
	id_install = rb_intern("install");
	id_uninstall = rb_intern("uninstall");
	id_wrapper_index = rb_intern("wrapper_index");
	id_app_methods = rb_intern("app_methods");
	id_app_method = rb_intern("app_method");
#ifdef HAVE_RB_EXT_RACTOR_SAFE
	rb_ext_ractor_safe(true);
#endif
	trc_hook_define(mod);
	rb_define_singleton_method(mod, "__watching", agent_watching, 0);
#ifdef HAVE_RB_EXT_RACTOR_SAFE
	rb_ext_ractor_safe(false);
#endif
	rb_define_singleton_method(mod, "__defined", agent_defined, 2);
	rb_define_singleton_method(mod, "__bind", agent_bind, 1);
}
