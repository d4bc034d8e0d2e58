/* command.c: the commands a client may send: each read, and handed to what does it. */
#include "command.h"

#include <limits.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "encode.h"
#include "eval.h"
#include "scope.h"
#include "tracer_protocol.h"
#include "wire.h"
#include "work.h"
#include "wrap.h"

/* ---- reading fields ---- */

/* The String of a msgpack str, or nil for nil (shapes were checked by trc_wire_command). */
static VALUE
str_value(const msgpack_object *o)
{
	if (o->type != MSGPACK_OBJECT_STR)
		return Qnil;
	return rb_str_new(o->via.str.ptr, o->via.str.size);
}

/* ---- hello ---- */

static VALUE
agent_query(VALUE name)
{
	return rb_funcall(trc_wrap_agent(), SYM2ID(name), 0);
}

/* TracerAgent.__yjit? or __ractors, or fallback if the app has broken them. */
static VALUE
query(const char *name, VALUE fallback)
{
	int state = 0;
	VALUE v = rb_protect(agent_query, ID2SYM(rb_intern(name)), &state);

	if (state) {
		rb_set_errinfo(Qnil);
		return fallback;
	}
	return v;
}

static int
cmd_hello(struct trc_session *s, const msgpack_object *argv)
{
	uint64_t version = argv[1].via.u64;
	char cwd[PATH_MAX];
	msgpack_packer *pk;
	VALUE ruby = rb_const_get(rb_cObject, rb_intern("RUBY_VERSION")), yjit, ractors;
	struct trc_welcome w;

	if (version != TRC_PROTOCOL_VERSION) {
		trc_reply_error(s, TRC_ERR_VERSION, "protocol version %d expected, client speaks %d",
		    TRC_PROTOCOL_VERSION, (int)version);
		trc_session_close(s, TRC_CLOSE_DETACH);
		return 0;
	}
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		strcpy(cwd, "?");
	trc_session_greet(s);
	yjit = query("__yjit?", Qfalse);
	ractors = query("__ractors", INT2FIX(1));
	w = (struct trc_welcome){
		.pid = getpid(), .ruby = RSTRING_PTR(ruby), .ruby_len = (size_t)RSTRING_LEN(ruby), .cwd = cwd,
		.mono_ns = trc_clock_read(CLOCK_MONOTONIC), .real_ns = trc_clock_read(CLOCK_REALTIME), .yjit = RTEST(yjit),
		.ractors = FIXNUM_P(ractors) ? (uint32_t)FIX2LONG(ractors) : 1,
	};
	pk = trc_reply_begin(s);
	trc_encode_welcome(pk, &w);
	trc_reply_end(s);
	return 0;
}

/* ---- trace ---- */

static VALUE
path_to_class(VALUE name)
{
	return rb_path_to_class(name);
}

/* Fills sp from [class|nil, kind, method|nil, [expr...]] (shape checked by trc_wire_command);
 * a class not defined (yet) leaves klass nil, to be matched by its name once it is. */
static void
read_spec(const msgpack_object *o, struct trc_spec *sp)
{
	const msgpack_object *f = o->via.array.ptr;
	VALUE klass = str_value(&f[0]), method = str_value(&f[2]);
	int state = 0;

	sp->kind = (int)f[1].via.u64;
	sp->mid = NIL_P(method) ? 0 : rb_intern_str(method);
	sp->nexpr = 0;
	for (uint32_t i = 0; i < f[3].via.array.size; i++) {
		sp->exprs[i] = rb_obj_freeze(str_value(&f[3].via.array.ptr[i]));
		sp->nexpr++;
	}
	sp->klass = Qnil;
	sp->name = NIL_P(klass) ? Qnil : rb_obj_freeze(klass);
	if (!NIL_P(klass)) {
		sp->klass = rb_protect(path_to_class, klass, &state);
		if (state) {
			rb_set_errinfo(Qnil);
			sp->klass = Qnil;   /* not defined (yet): plan.c matches it by name when it is */
		}
	}
}

static int
cmd_trace(struct trc_session *s, const msgpack_object *argv)
{
	/* On the stack, which the GC scans: the specs' Strings are made while it is read. */
	struct trc_trace_cfg cfg;
	const msgpack_object *specs = &argv[3];
	int n = 0;

	if (trc_work_busy(s)) {
		trc_reply_error(s, TRC_ERR_PROTOCOL, "already tracing");
		return 0;
	}
	memset(&cfg, 0, sizeof(cfg));
	if (trc_scope_read(&cfg.scope, &argv[4]) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "out of memory");
		return -1;
	}
	cfg.flags = (unsigned)argv[1].via.u64;
	cfg.slow_ns = argv[2].via.u64 * 1000000u;
	for (uint32_t i = 0; i < specs->via.array.size; i++)
		read_spec(&specs->via.array.ptr[i], &cfg.specs[n++]);
	cfg.nspecs = n;
	return trc_work_trace(s, &cfg);
}

static int
cmd_eval(struct trc_session *s, const msgpack_object *argv)
{
	trc_eval(s, argv[1].via.u64, (int)argv[2].via.u64, str_value(&argv[3]));
	return 0;
}

static int
cmd_top(struct trc_session *s, const msgpack_object *argv)
{
	struct trc_scope scope;

	if (trc_work_busy(s)) {
		trc_reply_error(s, TRC_ERR_PROTOCOL, "already tracing");
		return 0;
	}
	if (trc_scope_read(&scope, &argv[4]) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "process %d: out of memory for the table", (int)getpid());
		return 0;
	}
	trc_work_top(s, (int)argv[1].via.u64, argv[2].via.u64, (int)argv[3].via.u64, (uint32_t)argv[5].via.u64,
	    (uint32_t)argv[6].via.u64, &scope);
	return 0;
}

static int
cmd_detach(struct trc_session *s, const msgpack_object *argv)
{
	trc_session_close(s, TRC_CLOSE_DETACH);
	return 0;
}

/* The table, from the protocol's list: a command there and not here does not compile. */
static const struct {
	int type;
	int (*run)(struct trc_session *s, const msgpack_object *argv);  /* argv checked by wire.c */
	int before_hello;       /* allowed before the hello */
} commands[] = {
#define TRC_X(NAME, name, type, fields, before_hello) { TRC_CMD_##NAME, cmd_##name, before_hello },
	TRC_COMMANDS(TRC_X)
#undef TRC_X
};

static int
run(struct trc_session *s, const msgpack_object *msg)
{
	int type = trc_wire_command(msg);

	for (size_t i = 0; type >= 0 && i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (commands[i].type != type)
			continue;
		if (!trc_session_greeted(s) && !commands[i].before_hello)
			break;
		return commands[i].run(s, msg->via.array.ptr);
	}
	trc_reply_error(s, TRC_ERR_PROTOCOL, "malformed or unexpected message");
	return -1;
}

/* The session is over: its work is freed, and its evals interrupted. */
static void
end(struct trc_session *s)
{
	uint64_t id = trc_session_id(s);

	trc_work_end(s);
	trc_eval_session_end(id);
}

const struct trc_session_ops trc_command_ops = {
	.message = run,
	.timer = trc_work_timer,
	.close = trc_work_close,
	.end = end,
};
