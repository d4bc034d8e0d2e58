/* eval.c: evals (-e, -i, dumps, backtraces, --fork, --memory), each in a Ruby thread of its own. */
#include "eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "encode.h"
#include "mem.h"
#include "names.h"
#include "tracer_protocol.h"
#include "wrap.h"

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
	return trc_wrap_agent();
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
	struct trc_session *s = trc_session_find(session);
	msgpack_packer *pk;

	/* The client that asked may be gone. */
	if (s == NULL)
		return;
	pk = trc_reply_begin(s);
	trc_encode_eval(pk, id, ok, RSTRING_PTR(text), (size_t)RSTRING_LEN(text));
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
 * Raises Interrupt in the session's evals still running, of the kinds wanted (a bit per kind);
 * returns how many. The threads are gathered first: Thread#raise does not switch threads, but a
 * job may end while Ruby runs.
 */
static int
interrupt_evals(uint64_t session, unsigned kinds)
{
	VALUE threads = rb_ary_new();
	int n = 0;

	for (struct eval_job *j = running; j != NULL; j = j->next)
		if (j->session == session && (kinds & (1u << j->kind)) && !NIL_P(j->thread))
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

static int
interrupt_lines(uint64_t session)
{
	return interrupt_evals(session, 1u << TRC_EVAL_REPL);
}

/*
 * Nobody will read what the session's evals find: they are interrupted, save those that must
 * see themselves through (a --fork copy stopped until it is reaped, a --memory copy walking the
 * heap), whose answers go nowhere.
 */
void
trc_eval_session_end(uint64_t session)
{
	interrupt_evals(session, ~((1u << TRC_EVAL_FORK) | (1u << TRC_EVAL_MEMORY)));
	if (repl_session == session)
		repl_binding = Qnil;
}

/* Refuses an eval with an error reply; closes the dump's file, which nothing will write. */
static void
refuse_eval(struct trc_session *s, int fd, int code, const char *why)
{
	if (fd >= 0)
		close(fd);
	trc_reply_error(s, code, "%s", why);
}

static int
takes_file(int kind)
{
	return kind == TRC_EVAL_HEAPDUMP || kind == TRC_EVAL_SHAPESDUMP;
}

static struct eval_job *
new_job(struct trc_session *s, uint64_t id, int kind, VALUE text, int fd, VALUE arg)
{
	struct eval_job *job = trc_malloc(sizeof(*job));

	if (job == NULL)
		return NULL;
	job->session = trc_session_id(s);
	job->id = id;
	job->kind = kind;
	job->fd = fd;
	job->thread = Qnil;
	job->next = NULL;
	job->ref = rb_ary_new_from_args(2, text, arg);
	rb_ary_push(pending, job->ref);
	return job;
}

void
trc_eval(struct trc_session *s, uint64_t id, int kind, VALUE text)
{
	/* Taken first, so that every way out below closes it. */
	int fd = takes_file(kind) ? trc_session_take_fd(s) : -1;
	VALUE allowed, th, arg = Qnil;
	char why[96];
	struct eval_job *job;
	int state = 0;

	allowed = rb_protect(eval_allowed, Qnil, &state);
	if (state) {
		/* Not a refusal: while require 'tracer_agent' is still loading, its Ruby is not there. */
		rb_set_errinfo(Qnil);
		snprintf(why, sizeof(why), "process %d cannot tell yet whether it allows evals: try again", (int)getpid());
		refuse_eval(s, fd, TRC_ERR_INTERNAL, why);
		return;
	}
	if (!RTEST(allowed)) {
		snprintf(why, sizeof(why), "eval is disabled in process %d", (int)getpid());
		refuse_eval(s, fd, TRC_ERR_EVAL_DISABLED, why);
		return;
	}
	if (takes_file(kind) && fd < 0) {
		refuse_eval(s, fd, TRC_ERR_PROTOCOL, "dump request without a file descriptor");
		return;
	}
	/* Nothing to run: it stops the session's lines, which may be stuck, from here. */
	if (kind == TRC_EVAL_INTERRUPT) {
		reply_eval(trc_session_id(s), id, 1, rb_sprintf("%d", interrupt_lines(trc_session_id(s))));
		return;
	}
	if (kind == TRC_EVAL_REPL && NIL_P(arg = session_binding(trc_session_id(s)))) {
		refuse_eval(s, fd, TRC_ERR_INTERNAL, "cannot make a Binding for -i");
		return;
	}
	if ((job = new_job(s, id, kind, text, fd, arg)) == NULL) {
		refuse_eval(s, fd, TRC_ERR_INTERNAL, "out of memory");
		return;
	}
	th = rb_thread_create(eval_main, job);
	/* Ignored before it can run: it needs the GVL, which this thread holds until it waits. */
	trc_thread_ignore(th, 1);
	/*
	 * Its turn now. A thread that waits for the GVL behind one that makes long C calls back to
	 * back can wait seconds on Ruby 3.3+ (measured: 1.7 s on 3.3, 3 s on 3.4, behind a loop of
	 * 0.2 s sorts); this runs on whatever thread had the GVL, so it hands it over here.
	 */
	rb_thread_schedule();
}

/*
 * A job keeps its ref (and, once it runs, its thread) in C memory, where GC.compact would not
 * update a moved object: the job then read a dead slot (a segfault in rb_ary_entry, under -e
 * while the app compacted). rb_gc_mark pins what it marks.
 */
void
trc_eval_mark(void)
{
	if (pending != 0)
		for (long i = 0; i < RARRAY_LEN(pending); i++)
			rb_gc_mark(RARRAY_AREF(pending, i));
	for (struct eval_job *job = running; job != NULL; job = job->next)
		rb_gc_mark(job->thread);
}

void
trc_eval_init(void)
{
	pending = rb_ary_new();
	rb_gc_register_address(&pending);
	rb_gc_register_address(&repl_binding);
}
