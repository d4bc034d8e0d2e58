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

/* ---- evals (-e, -i, dumps, backtraces, --fork, --memory): in a Ruby thread of their own ---- */

struct eval_job {
	uint64_t session;
	uint64_t id;
	int kind;
	VALUE ref;              /* [text, arg] in `pending`: what __eval gets, kept from the GC */
	int fd;                 /* a dump's file (the client passed it), or -1; ours to close */
	VALUE thread;           /* the thread running it, once it runs (on the thread's own stack) */
	struct eval_job *next;  /* in `running` */
};

static VALUE pending;                   /* the refs of the jobs not ended */
static struct eval_job *running;        /* the jobs whose thread runs; GVL held for any access */
static VALUE repl_binding = Qnil;       /* -i: the Binding of session repl_session's lines */
static uint64_t repl_session;

static VALUE
agent_module(void)
{
	return rb_const_get(rb_cObject, rb_intern("TracerAgent"));
}

static VALUE
eval_call(VALUE arg)
{
	struct eval_job *job = (struct eval_job *)arg;
	VALUE extra = job->fd >= 0 ? INT2FIX(job->fd) : rb_ary_entry(job->ref, 1);

	return rb_funcall(agent_module(), rb_intern("__eval"), 3, INT2FIX(job->kind),
			  rb_ary_entry(job->ref, 0), extra);
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

/* Drops ref from `pending`: by identity, as two jobs may hold equal texts. */
static void
forget_ref(VALUE ref)
{
	for (long i = RARRAY_LEN(pending) - 1; i >= 0; i--) {
		if (RARRAY_AREF(pending, i) == ref) {
			rb_ary_delete_at(pending, i);
			return;
		}
	}
}

static void
unlink_job(struct eval_job *job)
{
	struct eval_job **p = &running;

	/* Not there in a forked child whose copy of the list lost it: nothing to do then. */
	while (*p != NULL && *p != job)
		p = &(*p)->next;
	if (*p != NULL)
		*p = job->next;
}

static VALUE
eval_main(void *arg)
{
	struct eval_job *job = arg;
	VALUE self = rb_thread_current(), result;
	int state = 0;

	trc_thread_ignore(self, 1);
	rb_funcall(self, rb_intern("name="), 1, rb_str_new_cstr("tracer-eval"));
	job->thread = self;
	job->next = running;
	running = job;
	result = rb_protect(eval_call, (VALUE)job, &state);
	unlink_job(job);
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
	forget_ref(job->ref);
	trc_thread_ignore(self, 0);
	free(job);
	return Qnil;
}

static VALUE
eval_allowed(VALUE unused)
{
	return rb_funcall(agent_module(), rb_intern("eval_allowed?"), 0);
}

static VALUE
new_binding(VALUE unused)
{
	return rb_funcall(agent_module(), rb_intern("__binding"), 0);
}

/* -i: the session's Binding, made at its first line; Qnil if Ruby failed to make one. */
static VALUE
session_binding(uint64_t session)
{
	int state = 0;
	VALUE b;

	if (repl_session == session && !NIL_P(repl_binding))
		return repl_binding;
	b = rb_protect(new_binding, Qnil, &state);
	if (state) {
		rb_set_errinfo(Qnil);
		return Qnil;
	}
	repl_binding = b;
	repl_session = session;
	return b;
}

static VALUE
raise_interrupt(VALUE th)
{
	VALUE exc = rb_exc_new_cstr(rb_eInterrupt, "interrupted by tracer");

	return rb_funcall(th, rb_intern("raise"), 1, exc);
}

/*
 * Raises Interrupt in the session's -i lines still running; returns how many. The threads are
 * gathered first: Thread#raise does not switch threads, but a job may end while Ruby runs.
 */
static int
interrupt_lines(uint64_t session)
{
	VALUE threads = rb_ary_new();
	int n = 0;

	for (struct eval_job *j = running; j != NULL; j = j->next)
		if (j->session == session && j->kind == TRC_EVAL_REPL)
			rb_ary_push(threads, j->thread);
	for (long i = 0; i < RARRAY_LEN(threads); i++) {
		int state = 0;

		rb_protect(raise_interrupt, RARRAY_AREF(threads, i), &state);
		if (state)
			rb_set_errinfo(Qnil);
		else
			n++;
	}
	return n;
}

void
trc_command_session_end(uint64_t session)
{
	interrupt_lines(session);
	if (repl_session == session)
		repl_binding = Qnil;
}

/* Refuses an eval with an error reply; closes the dump's file, which nothing will write. */
static int
refuse_eval(struct trc_session *s, int fd, int code, const char *why)
{
	if (fd >= 0)
		close(fd);
	trc_reply_error(s, code, "%s", why);
	return 0;
}

static int
takes_file(int kind)
{
	return kind == TRC_EVAL_HEAPDUMP || kind == TRC_EVAL_SHAPESDUMP;
}

static struct eval_job *
new_job(struct trc_session *s, const msgpack_object *argv, int fd, VALUE arg)
{
	struct eval_job *job = malloc(sizeof(*job));

	if (job == NULL)
		return NULL;
	job->session = s->id;
	job->id = argv[1].via.u64;
	job->kind = (int)argv[2].via.u64;
	job->fd = fd;
	job->thread = Qnil;
	job->next = NULL;
	job->ref = rb_ary_new_from_args(2, str_value(&argv[3]), arg);
	rb_ary_push(pending, job->ref);
	return job;
}

static int
cmd_eval(struct trc_session *s, const msgpack_object *argv)
{
	int kind = (int)argv[2].via.u64;
	/* Taken first, so that every way out below closes it. */
	int fd = takes_file(kind) ? trc_session_take_fd(s) : -1;
	VALUE allowed, th, arg = Qnil;
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
	if (takes_file(kind) && fd < 0)
		return refuse_eval(s, fd, TRC_ERR_PROTOCOL, "dump request without a file descriptor");
	/* Nothing to run: it stops the session's lines, which may be stuck, from here. */
	if (kind == TRC_EVAL_INTERRUPT) {
		reply_eval(s->id, argv[1].via.u64, 1, rb_sprintf("%d", interrupt_lines(s->id)));
		return 0;
	}
	if (kind == TRC_EVAL_REPL && NIL_P(arg = session_binding(s->id)))
		return refuse_eval(s, fd, TRC_ERR_INTERNAL, "cannot make a Binding for -i");
	if ((job = new_job(s, argv, fd, arg)) == NULL)
		return refuse_eval(s, fd, TRC_ERR_INTERNAL, "out of memory");
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
	    trc_top_start((int)argv[1].via.u64, (int)argv[3].via.u64, (uint32_t)argv[5].via.u64,
		&scope) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "out of memory");
		return 0;
	}
	if (trc_top_by_time())
		trc_session_windows(s, (uint32_t)argv[5].via.u64);
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

/*
 * A job keeps its ref (and, once it runs, its thread) in C memory, where GC.compact would not
 * update a moved object: the job then read a dead slot (a segfault in rb_ary_entry, under -e
 * while the app compacted). rb_gc_mark pins what it marks.
 */
void
trc_command_mark(void)
{
	if (pending != 0)
		for (long i = 0; i < RARRAY_LEN(pending); i++)
			rb_gc_mark(RARRAY_AREF(pending, i));
	for (struct eval_job *job = running; job != NULL; job = job->next)
		rb_gc_mark(job->thread);
}

int
trc_command_run(struct trc_session *s, const msgpack_object *msg)
{
	int type = trc_wire_command(msg);

	if (pending == 0) {
		pending = rb_ary_new();
		rb_gc_register_address(&pending);
		rb_gc_register_address(&repl_binding);
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
