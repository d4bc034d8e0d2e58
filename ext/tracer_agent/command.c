/* command.c: what the agent does for each command a client sends. */
#include "command.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "encode.h"
#include "names.h"
#include "top.h"
#include "tracer_protocol.h"

#define RING_SIZE (16u << 20)

struct trc_command {
	int type;
	const char *name;
	int (*run)(struct trc_session *s, const msgpack_object *argv);  /* argv checked by wire.c */
	int before_hello;       /* allowed before the hello */
};

/* ---- reading fields ---- */

/* The String of a msgpack str, or nil for nil (shapes were checked by trc_wire_command). */
static VALUE
str_value(const msgpack_object *o)
{
	if (o->type != MSGPACK_OBJECT_STR)
		return Qnil;
	return rb_str_new(o->via.str.ptr, o->via.str.size);
}

static uint64_t
clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- hello ---- */

static VALUE
agent_query(VALUE name)
{
	VALUE mod = rb_const_get(rb_cObject, rb_intern("TracerAgent"));
	return rb_funcall(mod, SYM2ID(name), 0);
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

	if (version != TRC_PROTOCOL_VERSION) {
		trc_reply_error(s, TRC_ERR_VERSION, "protocol version %d expected, client speaks %d",
		    TRC_PROTOCOL_VERSION, (int)version);
		trc_session_close(s, TRC_CLOSE_DETACH);
		return 0;
	}
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		strcpy(cwd, "?");
	s->hello = 1;
	yjit = query("__yjit?", Qfalse);
	ractors = query("__ractors", INT2FIX(1));
	pk = trc_reply_begin(s);
	msgpack_pack_array(pk, 9);
	msgpack_pack_uint8(pk, TRC_MSG_WELCOME);
	msgpack_pack_uint32(pk, TRC_PROTOCOL_VERSION);
	msgpack_pack_int(pk, (int)getpid());
	trc_pack_str(pk, RSTRING_PTR(ruby), (size_t)RSTRING_LEN(ruby));
	trc_pack_cstr(pk, cwd);
	msgpack_pack_uint64(pk, clock_ns(CLOCK_MONOTONIC));
	msgpack_pack_uint64(pk, clock_ns(CLOCK_REALTIME));
	if (RTEST(yjit))
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
	msgpack_pack_uint32(pk, FIXNUM_P(ractors) ? (uint32_t)FIX2LONG(ractors) : 1);
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
			sp->klass = Qnil;   /* not defined (yet): hook.c matches it by name when it is */
		}
	}
}

static void
reply_spec(struct trc_session *s, int i, int matched, int pending, VALUE why)
{
	msgpack_packer *pk = trc_reply_begin(s);

	msgpack_pack_array(pk, 5);
	msgpack_pack_uint8(pk, TRC_MSG_SPEC);
	msgpack_pack_int(pk, i);
	msgpack_pack_int(pk, matched);
	if (pending)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
	if (NIL_P(why))
		trc_pack_cstr(pk, matched > 0 ? "" : "matched no method");
	else
		trc_pack_str(pk, RSTRING_PTR(why), (size_t)RSTRING_LEN(why));
	trc_reply_end(s);
}

static void
reply_started(struct trc_session *s)
{
	msgpack_packer *pk = trc_reply_begin(s);
	msgpack_pack_array(pk, 1);
	msgpack_pack_uint8(pk, TRC_MSG_STARTED);
	trc_reply_end(s);
}

static int
cmd_trace(struct trc_session *s, const msgpack_object *argv)
{
	struct trc_trace_cfg *cfg = &s->cfg;
	const msgpack_object *specs = &argv[3];
	VALUE wrap_why[TRC_MAX_SPECS];
	int matched[TRC_MAX_SPECS], n = 0;

	if (s->tracing || s->counting) {
		trc_reply_error(s, TRC_ERR_PROTOCOL, "already tracing");
		return 0;
	}
	memset(cfg, 0, sizeof(*cfg));
	if (trc_scope_read(&cfg->scope, &argv[4]) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "out of memory");
		return -1;
	}
	cfg->flags = (unsigned)argv[1].via.u64;
	cfg->slow_ns = argv[2].via.u64 * 1000000u;
	for (uint32_t i = 0; i < specs->via.array.size; i++)
		read_spec(&specs->via.array.ptr[i], &cfg->specs[n++]);
	cfg->nspecs = n;
	if (trc_ring_init(&s->ring, RING_SIZE) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "cannot map the event buffer");
		return -1;
	}
	trc_hook_start(cfg, &s->ring, s->wake_fd, matched, wrap_why);
	for (int i = 0; i < n; i++) {
		const struct trc_spec *sp = &cfg->specs[i];
		int pending = sp->kind != TRC_SPEC_ANY && NIL_P(sp->klass);

		/* What could not be wrapped is said only when nothing of the spec could. */
		reply_spec(s, i, matched[i], pending, matched[i] > 0 ? Qnil : wrap_why[i]);
	}
	reply_started(s);
	trc_session_started(s);
	return 0;
}

/* ---- eval, heap dump, backtraces: in a Ruby thread of their own ---- */

struct eval_job {
	uint64_t session;
	uint64_t id;
	int kind;
	VALUE text;
	int fd;                 /* the heap dump's file (the client passed it), or -1; ours to close */
};

static VALUE pending;   /* the texts of running evals, kept from the GC */

static VALUE
eval_call(VALUE arg)
{
	struct eval_job *job = (struct eval_job *)arg;
	VALUE mod = rb_const_get(rb_cObject, rb_intern("TracerAgent"));
	VALUE fd = job->fd >= 0 ? INT2FIX(job->fd) : Qnil;

	return rb_funcall(mod, rb_intern("__eval"), 3, INT2FIX(job->kind), job->text, fd);
}

static VALUE
describe_error(VALUE exc)
{
	return rb_sprintf("%"PRIsVALUE": %"PRIsVALUE, rb_obj_class(exc), rb_funcall(exc, rb_intern("message"), 0));
}

static void
reply_eval(uint64_t session, uint64_t id, int ok, VALUE text)
{
	struct trc_session *s = trc_session_current();
	msgpack_packer *pk;

	/* The client that asked may be gone, and another one attached since. */
	if (s == NULL || s->id != session)
		return;
	pk = trc_reply_begin(s);
	msgpack_pack_array(pk, 4);
	msgpack_pack_uint8(pk, TRC_MSG_EVAL);
	msgpack_pack_uint64(pk, id);
	if (ok)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
	trc_pack_str(pk, RSTRING_PTR(text), (size_t)RSTRING_LEN(text));
	trc_reply_end(s);
}

static VALUE
eval_main(void *arg)
{
	struct eval_job *job = arg;
	VALUE self = rb_thread_current(), result;
	int state = 0;

	trc_thread_ignore(self, 1);
	rb_funcall(self, rb_intern("name="), 1, rb_str_new_cstr("tracer-eval"));
	result = rb_protect(eval_call, (VALUE)job, &state);
	/* Whatever Ruby did, the file is complete (it flushed) or abandoned: closed before the
	 * client hears, which then renames it into place. */
	if (job->fd >= 0)
		close(job->fd);
	if (state) {
		VALUE exc = rb_errinfo();
		rb_set_errinfo(Qnil);
		result = rb_protect(describe_error, exc, &state);
		if (state) {
			rb_set_errinfo(Qnil);
			result = rb_str_new_cstr("exception (its message raised too)");
		}
		reply_eval(job->session, job->id, 0, result);
	} else {
		reply_eval(job->session, job->id, 1, StringValue(result));
	}
	rb_ary_delete(pending, job->text);
	trc_thread_ignore(self, 0);
	free(job);
	return Qnil;
}

static VALUE
eval_allowed(VALUE unused)
{
	VALUE mod = rb_const_get(rb_cObject, rb_intern("TracerAgent"));
	return rb_funcall(mod, rb_intern("eval_allowed?"), 0);
}

/* Refuses an eval with an error reply; closes the heap dump's file, which nothing will write. */
static int
refuse_eval(struct trc_session *s, int fd, int code, const char *why)
{
	if (fd >= 0)
		close(fd);
	trc_reply_error(s, code, "%s", why);
	return 0;
}

static int
cmd_eval(struct trc_session *s, const msgpack_object *argv)
{
	VALUE text = str_value(&argv[3]), allowed, th;
	int kind = (int)argv[2].via.u64;
	/* Taken first, so that every way out below closes it. */
	int fd = kind == TRC_EVAL_HEAPDUMP ? trc_session_take_fd(s) : -1;
	char why[64];
	struct eval_job *job;
	int state = 0;

	allowed = rb_protect(eval_allowed, Qnil, &state);
	if (state)
		rb_set_errinfo(Qnil);
	if (!RTEST(allowed)) {
		snprintf(why, sizeof(why), "eval is disabled in process %d", (int)getpid());
		return refuse_eval(s, fd, TRC_ERR_EVAL_DISABLED, why);
	}
	if (kind == TRC_EVAL_HEAPDUMP && fd < 0)
		return refuse_eval(s, fd, TRC_ERR_PROTOCOL, "heap dump request without a file descriptor");
	if ((job = malloc(sizeof(*job))) == NULL)
		return refuse_eval(s, fd, TRC_ERR_INTERNAL, "out of memory");
	job->session = s->id;
	job->id = argv[1].via.u64;
	job->kind = kind;
	job->fd = fd;
	job->text = text;
	rb_ary_push(pending, text);
	th = rb_thread_create(eval_main, job);
	/* Ignored before it can run: it needs the GVL, which this thread holds until it waits. */
	trc_thread_ignore(th, 1);
	/*
	 * Its turn now. A thread that waits for the GVL behind one that makes long C calls back to
	 * back can wait seconds on Ruby 3.3+ (measured: 1.7 s on 3.3, 3 s on 3.4, behind a loop of
	 * 0.2 s sorts); this runs on whatever thread had the GVL, so it hands it over here.
	 */
	rb_thread_schedule();
	return 0;
}

static int
cmd_top(struct trc_session *s, const msgpack_object *argv)
{
	struct trc_scope scope;

	if (s->tracing || s->counting) {
		trc_reply_error(s, TRC_ERR_PROTOCOL, "already tracing");
		return 0;
	}
	if (trc_scope_read(&scope, &argv[4]) < 0 ||
	    trc_top_start((int)argv[1].via.u64, (int)argv[3].via.u64, &scope) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "out of memory");
		return 0;
	}
	trc_session_count_every(s, argv[2].via.u64);
	reply_started(s);
	return 0;
}

static int
cmd_detach(struct trc_session *s, const msgpack_object *argv)
{
	trc_session_close(s, TRC_CLOSE_DETACH);
	return 0;
}

static const struct trc_command commands[] = {
	{ TRC_CMD_HELLO, "hello", cmd_hello, 1 },
	{ TRC_CMD_TRACE, "trace", cmd_trace, 0 },
	{ TRC_CMD_EVAL, "eval", cmd_eval, 0 },
	{ TRC_CMD_DETACH, "detach", cmd_detach, 1 },
	{ TRC_CMD_TOP, "top", cmd_top, 0 },
};

int
trc_command_run(struct trc_session *s, const msgpack_object *msg)
{
	int type = trc_wire_command(msg);

	if (pending == 0) {
		pending = rb_ary_new();
		rb_gc_register_address(&pending);
	}
	for (size_t i = 0; type >= 0 && i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct trc_command *c = &commands[i];
		if (c->type != type)
			continue;
		if (!s->hello && !c->before_hello)
			break;
		return c->run(s, msg->via.array.ptr);
	}
	trc_reply_error(s, TRC_ERR_PROTOCOL, "malformed or unexpected message");
	return -1;
}
