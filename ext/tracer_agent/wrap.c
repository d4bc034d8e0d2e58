/* wrap.c: per-method wrappers for C methods, which leave nothing behind once removed. */
#include "wrap.h"

#include <stdio.h>

#include "hook.h"

/*
 * Why: a C method can only be seen by the VM's C call hook, and enabling that hook rewrites
 * every instruction sequence in the process for good (the VM never takes it back), so an app
 * stays up to 2.4x slower after the client has gone (measured: ruby-internals.md §2.3). A
 * wrapper costs only the calls of the one method, and removing it restores the original
 * method entry exactly: the alias shares the original's definition.
 *
 * While installed, the wrapper is visible: Class#instance_method(:m).arity is -1, a backtrace
 * through the method shows one more frame (__tracer_m), and method_added runs twice.
 */
#define MAX_WRAPS 64

enum visibility { VIS_PUBLIC, VIS_PROTECTED, VIS_PRIVATE };

struct wrap {
	VALUE owner;
	ID mid;
	ID alias;
	uint32_t method;
	enum visibility vis;
};

static struct wrap wraps[MAX_WRAPS];
static int nwraps;

struct call {
	const struct wrap *w;
	int argc;
	const VALUE *argv;
	VALUE self;
};

static const struct wrap *
find(void)
{
	ID mid;
	VALUE owner;

	if (!rb_frame_method_id_and_class(&mid, &owner))
		return NULL;
	for (int i = 0; i < nwraps; i++)
		if (wraps[i].mid == mid && wraps[i].owner == owner)
			return &wraps[i];
	return NULL;
}

static VALUE
call_original(VALUE arg)
{
	const struct call *c = (const struct call *)arg;
	return rb_funcall_passing_block_kw(c->self, c->w->alias, c->argc, c->argv, RB_PASS_CALLED_KEYWORDS);
}

static VALUE
call_ended(VALUE arg)
{
	trc_hook_leave(((const struct wrap *)arg)->method);
	return Qnil;
}

/* Every wrapped method's body: the call and return around the original, whatever way it ends. */
static VALUE
wrapper(int argc, VALUE *argv, VALUE self)
{
	const struct wrap *w = find();
	struct call c = { w, argc, argv, self };

	if (w == NULL)
		rb_raise(rb_eNotImpError, "tracer_agent: lost track of a wrapped method");
	trc_hook_enter(w->method, self);
	return rb_ensure(call_original, (VALUE)&c, call_ended, (VALUE)w);
}

static VALUE
visibility_check(VALUE owner, const char *predicate, ID mid)
{
	return rb_funcall(owner, rb_intern(predicate), 1, ID2SYM(mid));
}

static enum visibility
visibility_of(VALUE owner, ID mid)
{
	if (RTEST(visibility_check(owner, "private_method_defined?", mid)))
		return VIS_PRIVATE;
	if (RTEST(visibility_check(owner, "protected_method_defined?", mid)))
		return VIS_PROTECTED;
	return VIS_PUBLIC;
}

static void
set_visibility(VALUE owner, ID mid, enum visibility vis)
{
	static const char *const names[] = { "public", "protected", "private" };
	VALUE sym = ID2SYM(mid);
	rb_funcallv(owner, rb_intern(names[vis]), 1, &sym);
}

static VALUE
install(VALUE arg)
{
	struct wrap *w = (struct wrap *)arg;

	rb_alias(w->owner, w->alias, w->mid);
	set_visibility(w->owner, w->alias, VIS_PUBLIC);  /* the wrapper calls it as a public method */
	rb_define_method_id(w->owner, w->mid, wrapper, -1);
	set_visibility(w->owner, w->mid, w->vis);
	return Qnil;
}

int
trc_wrap(VALUE owner, ID mid, uint32_t m)
{
	struct wrap *w;
	char name[256];
	int state = 0;

	if (nwraps >= MAX_WRAPS || OBJ_FROZEN(owner))
		return -1;
	w = &wraps[nwraps];
	snprintf(name, sizeof(name), "__tracer_%s", rb_id2name(mid));
	w->owner = owner;
	w->mid = mid;
	w->alias = rb_intern(name);
	w->method = m;
	w->vis = visibility_of(owner, mid);
	/* Registered first: the wrapper may run as soon as it is defined. */
	nwraps++;
	rb_protect(install, (VALUE)w, &state);
	if (state) {
		rb_set_errinfo(Qnil);
		nwraps--;
		return -1;
	}
	return 0;
}

static VALUE
uninstall(VALUE arg)
{
	const struct wrap *w = (const struct wrap *)arg;

	rb_alias(w->owner, w->mid, w->alias);
	set_visibility(w->owner, w->mid, w->vis);
	rb_remove_method_id(w->owner, w->alias);
	return Qnil;
}

void
trc_unwrap_all(void)
{
	while (nwraps > 0) {
		int state = 0;
		rb_protect(uninstall, (VALUE)&wraps[nwraps - 1], &state);
		if (state)
			rb_set_errinfo(Qnil);
		nwraps--;
	}
}

int
trc_wrapped(void)
{
	return nwraps;
}

void
trc_wrap_mark(void)
{
	for (int i = 0; i < nwraps; i++)
		rb_gc_mark(wraps[i].owner);
}
