/* agent.c: Init_tracer_agent, the TracerAgent module's C methods, and GC marking. */
#include <ruby.h>

#include "control.h"
#include "hook.h"
#include "names.h"
#include "session.h"
#include "top.h"
#include "wrap.h"

/* Everything the agent keeps in C that the GC must not collect: classes, threads, TracePoints. */
static void
mark_all(void *unused)
{
	trc_names_mark();
	trc_hook_mark();
	trc_session_mark();
	trc_top_mark();
	trc_wrap_mark();
}

static const rb_data_type_t roots_type = {
	.wrap_struct_name = "tracer_agent_roots",
	.function = { .dmark = mark_all },
	.flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

static VALUE
rearm_signal(VALUE self)
{
	trc_control_rearm();
	return Qnil;
}

static VALUE
ignored_messages(VALUE self)
{
	return ULONG2NUM(trc_control_ignored());
}

static VALUE
attached_p(VALUE self)
{
	return trc_session_current() != NULL ? Qtrue : Qfalse;
}

/* What the agent is doing now, for operators and tests: {attached:, client_pid:, hooks:, ignored_messages:}. */
static VALUE
stats(VALUE self)
{
	struct trc_session *s = trc_session_current();
	VALUE h = rb_hash_new();

	rb_hash_aset(h, ID2SYM(rb_intern("attached")), s != NULL ? Qtrue : Qfalse);
	rb_hash_aset(h, ID2SYM(rb_intern("client_pid")), s != NULL ? INT2NUM(s->client_pid) : Qnil);
	rb_hash_aset(h, ID2SYM(rb_intern("hooks")), INT2NUM(trc_hook_installed() + trc_top_installed()));
	rb_hash_aset(h, ID2SYM(rb_intern("ignored_messages")), ULONG2NUM(trc_control_ignored()));
	return h;
}

RUBY_FUNC_EXPORTED void
Init_tracer_agent(void)
{
	VALUE mod = rb_define_module("TracerAgent");
	static int roots_data;  /* dmark only runs for a non-NULL data pointer */
	VALUE roots = TypedData_Wrap_Struct(rb_cObject, &roots_type, &roots_data);

	rb_gc_register_mark_object(roots);
	rb_define_singleton_method(mod, "__rearm_signal", rearm_signal, 0);
	rb_define_singleton_method(mod, "ignored_messages", ignored_messages, 0);
	rb_define_singleton_method(mod, "attached?", attached_p, 0);
	rb_define_singleton_method(mod, "stats", stats, 0);
	trc_control_init();
}
