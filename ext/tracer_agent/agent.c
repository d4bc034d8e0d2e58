/* agent.c: Init_tracer_agent, the TracerAgent module's C methods, and GC marking. */
#include <ruby.h>

#include "clock.h"
#include "control.h"
#include "eval.h"
#include "gc.h"
#include "mem.h"
#include "names.h"
#include "plan.h"
#include "sample.h"
#include "session.h"
#include "top.h"
#include "trace.h"
#include "vm.h"
#include "tracer_protocol.h"
#include "work.h"
#include "wrap.h"

/* Everything the agent keeps in C that the GC must not collect: classes, threads, TracePoints. */
static void
mark_all(void *unused)
{
	trc_names_mark();
	trc_work_mark();
	trc_top_mark();
	trc_wrap_mark();
	trc_plan_mark();
	trc_eval_mark();
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

/*
 * TracerAgent.__connect("@name"): tracer --exec's client listens there; connects and serves it
 * until tracing has begun (control.c). True if connected, false when nobody listens there.
 */
static VALUE
connect_now(VALUE self, VALUE addr)
{
	return trc_control_connect(StringValueCStr(addr)) == 0 ? Qtrue : Qfalse;
}

static VALUE
ignored_messages(VALUE self)
{
	return ULONG2NUM(trc_control_ignored());
}

static VALUE
attached_p(VALUE self)
{
	for (int i = 0; i < TRC_SESSIONS_MAX; i++)
		if (trc_session_at(i) != NULL)
			return Qtrue;
	return Qfalse;
}

static void
set(VALUE h, const char *key, VALUE v)
{
	rb_hash_aset(h, ID2SYM(rb_intern(key)), v);
}

static VALUE
last_session(void)
{
	static const char *const how[] = { "open", "detached", "gone", "exit" };
	const struct trc_work_record *r = trc_work_last();
	VALUE h;

	if (r->client_pid == 0)
		return Qnil;
	h = rb_hash_new();
	set(h, "client_pid", INT2NUM(r->client_pid));
	set(h, "ended", ID2SYM(rb_intern(how[r->how])));
	set(h, "events", ULL2NUM(r->events));
	set(h, "lost", ULL2NUM(r->lost));
	set(h, "hooks_left", INT2NUM(r->hooks_left));
	return h;
}

/*
 * What the agent is doing now, for operators and tests: {attached:, client_pid: (the oldest
 * session's), client_pids: (every session's, in slot order), hooks:,
 * ignored_messages:, sessions:, other_ractor_calls: (wrapped calls left out, made in another
 * Ractor), wrapped: (wrappers in place), longest_step_ms: (the longest the last session's
 * putting wrappers in place or taking them away held the GVL at once), failed_allocations:
 * (the agent's, since the process started: what needed them did without), found_by: (how
 * the last find of the app's methods went: "entries" or "modules", plan.c), found: (how many
 * it found), last_session:
 * {client_pid:, ended:, events:, lost:, hooks_left:}}.
 */
static VALUE
stats(VALUE self)
{
	struct trc_session *s = NULL;
	VALUE h = rb_hash_new(), pids = rb_ary_new();
	const char *by;
	long found;

	for (int i = 0; i < TRC_SESSIONS_MAX; i++) {
		struct trc_session *t = trc_session_at(i);
		if (t == NULL)
			continue;
		if (s == NULL || trc_session_id(t) < trc_session_id(s))
			s = t;
		rb_ary_push(pids, INT2NUM(trc_session_client(t)));
	}
	set(h, "attached", s != NULL ? Qtrue : Qfalse);
	set(h, "client_pid", s != NULL ? INT2NUM(trc_session_client(s)) : Qnil);
	set(h, "client_pids", pids);
	set(h, "hooks", INT2NUM(trc_work_hooks()));
	set(h, "ignored_messages", ULONG2NUM(trc_control_ignored()));
	set(h, "sessions", ULL2NUM(trc_session_count()));
	set(h, "other_ractor_calls", ULL2NUM(trc_vm_other_ractor_calls()));
	set(h, "wrapped", INT2NUM(trc_wrapped()));
	set(h, "longest_step_ms", DBL2NUM((double)trc_plan_longest_step() / 1e6));
	set(h, "failed_allocations", ULL2NUM(trc_mem_failures()));
	by = trc_plan_found_by(&found);
	set(h, "found_by", by != NULL ? rb_str_new_cstr(by) : Qnil);
	set(h, "found", by != NULL ? LONG2NUM(found) : Qnil);
	set(h, "last_session", last_session());
	return h;
}

/*
 * TracerAgent.__tag_push(text) and __tag_pop: --top profile's samples of the current thread
 * carry text (a request's controller#action, a job's class) until the pop (lib/tracer_agent.rb
 * calls them from ActiveSupport::Notifications while a profile runs).
 */
static VALUE
tag_push(VALUE self, VALUE text)
{
	trc_sample_tag_push(text);
	return Qnil;
}

static VALUE
tag_pop(VALUE self)
{
	trc_sample_tag_pop();
	return Qnil;
}

/* --memory, in the forked copy that walks the heap: where obj lives, for the page it is on. */
static VALUE
address(VALUE self, VALUE obj)
{
	return ULL2NUM((unsigned long long)obj);
}

/* --memory: obj's class, whatever obj is (a BasicObject has no #class, a proxy forwards it). */
static VALUE
class_of(VALUE self, VALUE obj)
{
	return rb_obj_class(obj);
}

/*
 * wrap.rb's --ignore: mod's label ("Foo" for Foo and its singleton class), made in C. Ruby's
 * own Module#inspect of a singleton class calls the attached class's #inspect, which a Rails
 * model overrides with one that may query the database, in the middle of a request.
 */
static VALUE
module_label(VALUE self, VALUE mod)
{
	char sep;

	if (!RB_TYPE_P(mod, T_CLASS) && !RB_TYPE_P(mod, T_MODULE))
		rb_raise(rb_eTypeError, "not a module");
	return trc_module_label(mod, &sep);
}

/* The kinds of TRC_CMD_EVAL (tracer_protocol.h), for TracerAgent.__eval: one list, the header's. */
static void
define_eval_kinds(VALUE mod)
{
	static const struct { const char *name; int kind; } kinds[] = {
#define TRC_X(NAME, value) { "EVAL_" #NAME, TRC_EVAL_##NAME },
		TRC_EVAL_KINDS(TRC_X)
#undef TRC_X
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		rb_define_const(mod, kinds[i].name, INT2FIX(kinds[i].kind));
}

RUBY_FUNC_EXPORTED void
Init_tracer_agent(void)
{
	VALUE mod = rb_define_module("TracerAgent");
	static int roots_data;  /* dmark only runs for a non-NULL data pointer */
	VALUE roots = TypedData_Wrap_Struct(rb_cObject, &roots_type, &roots_data);

	rb_gc_register_mark_object(roots);
	rb_define_singleton_method(mod, "__rearm_signal", rearm_signal, 0);
	rb_define_singleton_method(mod, "__connect", connect_now, 1);
	rb_define_singleton_method(mod, "ignored_messages", ignored_messages, 0);
	rb_define_singleton_method(mod, "attached?", attached_p, 0);
	rb_define_singleton_method(mod, "stats", stats, 0);
	rb_define_singleton_method(mod, "__address", address, 1);
	rb_define_singleton_method(mod, "__class_of", class_of, 1);
	rb_define_singleton_method(mod, "__label", module_label, 1);
	rb_define_singleton_method(mod, "__tag_push", tag_push, 1);
	rb_define_singleton_method(mod, "__tag_pop", tag_pop, 0);
	define_eval_kinds(mod);
	trc_wrap_init(mod);
	trc_plan_init();
	trc_eval_init();
	trc_clock_init();
	trc_gc_init();
	trc_trace_init();
	trc_control_init(mod);
}
