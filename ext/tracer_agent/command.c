/* command.c: what the agent does for each command a client sends. */
#include "command.h"

#include <limits.h>
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
	uint32_t nargs;         /* array length, type included */
	int (*run)(struct trc_session *s, const msgpack_object *argv);
	int before_hello;       /* allowed before the hello */
};

/* ---- reading fields ---- */

static int
get_uint(const msgpack_object *o, uint64_t *v)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return -1;
	*v = o->via.u64;
	return 0;
}

/* A String for a str (or nil when nil_ok and the field is nil). */
static int
get_str(const msgpack_object *o, VALUE *v, int nil_ok)
{
	if (nil_ok && o->type == MSGPACK_OBJECT_NIL) {
		*v = Qnil;
		return 0;
	}
	if (o->type != MSGPACK_OBJECT_STR)
		return -1;
	*v = rb_str_new(o->via.str.ptr, o->via.str.size);
	return 0;
}

static uint64_t
clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- hello ---- */

static int
cmd_hello(struct trc_session *s, const msgpack_object *argv)
{
	uint64_t version, pid;
	char cwd[PATH_MAX];
	msgpack_packer *pk;
	VALUE ruby = rb_const_get(rb_cObject, rb_intern("RUBY_VERSION"));

	if (get_uint(&argv[1], &version) < 0 || get_uint(&argv[2], &pid) < 0)
		return -1;
	if (version != TRC_PROTOCOL_VERSION) {
		trc_reply_error(s, TRC_ERR_VERSION, "protocol version %d expected, client speaks %d",
		    TRC_PROTOCOL_VERSION, (int)version);
		trc_session_close(s, TRC_CLOSE_DETACH);
		return 0;
	}
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		strcpy(cwd, "?");
	s->hello = 1;
	pk = trc_reply_begin(s);
	msgpack_pack_array(pk, 7);
	msgpack_pack_uint8(pk, TRC_MSG_WELCOME);
	msgpack_pack_uint32(pk, TRC_PROTOCOL_VERSION);
	msgpack_pack_int(pk, (int)getpid());
	trc_pack_str(pk, RSTRING_PTR(ruby), (size_t)RSTRING_LEN(ruby));
	trc_pack_cstr(pk, cwd);
	msgpack_pack_uint64(pk, clock_ns(CLOCK_MONOTONIC));
	msgpack_pack_uint64(pk, clock_ns(CLOCK_REALTIME));
	trc_reply_end(s);
	return 0;
}

/* ---- trace ---- */

static VALUE
path_to_class(VALUE name)
{
	return rb_path_to_class(name);
}

/* Fills sp from [class|nil, kind, method|nil, [expr...]]; on a bad class, *why says so. */
static int
read_spec(const msgpack_object *o, struct trc_spec *sp, VALUE *why)
{
	const msgpack_object *f;
	VALUE klass, method;
	uint64_t kind;
	int state = 0;

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 4)
		return -1;
	f = o->via.array.ptr;
	if (get_str(&f[0], &klass, 1) < 0 || get_uint(&f[1], &kind) < 0 || kind > TRC_SPEC_ANY ||
	    get_str(&f[2], &method, 1) < 0 || f[3].type != MSGPACK_OBJECT_ARRAY ||
	    f[3].via.array.size > TRC_MAX_EXPRS || (kind == TRC_SPEC_ANY) != NIL_P(klass) ||
	    (kind == TRC_SPEC_ANY && NIL_P(method)))
		return -1;
	sp->kind = (int)kind;
	sp->mid = NIL_P(method) ? 0 : rb_intern_str(method);
	sp->nexpr = 0;
	for (uint32_t i = 0; i < f[3].via.array.size; i++) {
		if (get_str(&f[3].via.array.ptr[i], &sp->exprs[i], 0) < 0)
			return -1;
		rb_obj_freeze(sp->exprs[i]);
		sp->nexpr++;
	}
	sp->klass = Qnil;
	if (!NIL_P(klass)) {
		sp->klass = rb_protect(path_to_class, klass, &state);
		if (state) {
			rb_set_errinfo(Qnil);
			sp->klass = Qnil;
			*why = rb_sprintf("no class or module named %"PRIsVALUE, klass);
		}
	}
	return 0;
}

static void
reply_spec(struct trc_session *s, int i, int matched, VALUE why)
{
	msgpack_packer *pk = trc_reply_begin(s);

	msgpack_pack_array(pk, 4);
	msgpack_pack_uint8(pk, TRC_MSG_SPEC);
	msgpack_pack_int(pk, i);
	msgpack_pack_int(pk, matched);
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
	VALUE why[TRC_MAX_SPECS];
	int matched[TRC_MAX_SPECS], n = 0;
	uint64_t flags, slow_ms;

	if (s->tracing || s->counting) {
		trc_reply_error(s, TRC_ERR_PROTOCOL, "already tracing");
		return 0;
	}
	if (get_uint(&argv[1], &flags) < 0 || get_uint(&argv[2], &slow_ms) < 0 ||
	    specs->type != MSGPACK_OBJECT_ARRAY || specs->via.array.size > TRC_MAX_SPECS)
		return -1;
	memset(cfg, 0, sizeof(*cfg));
	cfg->flags = (unsigned)flags;
	cfg->slow_ns = slow_ms * 1000000u;
	for (uint32_t i = 0; i < specs->via.array.size; i++) {
		why[i] = Qnil;
		if (read_spec(&specs->via.array.ptr[i], &cfg->specs[n], &why[i]) < 0)
			return -1;
		/* A spec whose class is missing stays out of the config, but gets its answer. */
		if (cfg->specs[n].kind == TRC_SPEC_ANY || !NIL_P(cfg->specs[n].klass))
			n++;
	}
	cfg->nspecs = n;
	if (trc_ring_init(&s->ring, RING_SIZE) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "cannot map the event buffer");
		return -1;
	}
	trc_hook_start(cfg, &s->ring, s->wake_fd, matched);
	s->tracing = 1;
	for (uint32_t i = 0, j = 0; i < specs->via.array.size; i++)
		reply_spec(s, (int)i, NIL_P(why[i]) ? matched[j++] : 0, why[i]);
	reply_started(s);
	return 0;
}

/* ---- eval, heap dump, backtraces: in a Ruby thread of their own ---- */

struct eval_job {
	uint64_t session;
	uint64_t id;
	int kind;
	VALUE text;
};

static VALUE pending;   /* the texts of running evals, kept from the GC */

static VALUE
eval_call(VALUE arg)
{
	struct eval_job *job = (struct eval_job *)arg;
	VALUE mod = rb_const_get(rb_cObject, rb_intern("TracerAgent"));
	return rb_funcall(mod, rb_intern("__eval"), 2, INT2FIX(job->kind), job->text);
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

static int
cmd_eval(struct trc_session *s, const msgpack_object *argv)
{
	uint64_t id, kind;
	VALUE text, allowed, th;
	struct eval_job *job;
	int state = 0;

	if (get_uint(&argv[1], &id) < 0 || get_uint(&argv[2], &kind) < 0 || kind > TRC_EVAL_BACKTRACES ||
	    get_str(&argv[3], &text, 0) < 0)
		return -1;
	allowed = rb_protect(eval_allowed, Qnil, &state);
	if (state)
		rb_set_errinfo(Qnil);
	if (!RTEST(allowed)) {
		trc_reply_error(s, TRC_ERR_EVAL_DISABLED, "eval is disabled in process %d", (int)getpid());
		return 0;
	}
	if ((job = malloc(sizeof(*job))) == NULL) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "out of memory");
		return 0;
	}
	job->session = s->id;
	job->id = id;
	job->kind = (int)kind;
	job->text = text;
	rb_ary_push(pending, text);
	th = rb_thread_create(eval_main, job);
	/* Ignored before it can run: it needs the GVL, which this thread holds until it waits. */
	trc_thread_ignore(th, 1);
	return 0;
}

#define TOP_MAX_PREFIXES 64

static int
cmd_top(struct trc_session *s, const msgpack_object *argv)
{
	const msgpack_object *list = &argv[4];
	char cwd[PATH_MAX];
	const char *prefixes[TOP_MAX_PREFIXES];
	VALUE keep = rb_ary_new();
	uint64_t mode, every;
	int n = 0;

	if (s->tracing || s->counting) {
		trc_reply_error(s, TRC_ERR_PROTOCOL, "already tracing");
		return 0;
	}
	if (get_uint(&argv[1], &mode) < 0 || mode > TRC_TOP_EXCEPTIONS || get_uint(&argv[2], &every) < 0 ||
	    every < 10 || argv[3].type != MSGPACK_OBJECT_BOOLEAN || list->type != MSGPACK_OBJECT_ARRAY ||
	    list->via.array.size > TOP_MAX_PREFIXES)
		return -1;
	for (uint32_t i = 0; i < list->via.array.size; i++) {
		VALUE p;
		if (get_str(&list->via.array.ptr[i], &p, 0) < 0)
			return -1;
		rb_ary_push(keep, p);
		prefixes[n++] = StringValueCStr(p);
	}
	/* By default only the application's own files count: those under its working directory. */
	if (n == 0 && getcwd(cwd, sizeof(cwd) - 1) != NULL) {
		strcat(cwd, cwd[strlen(cwd) - 1] == '/' ? "" : "/");
		prefixes[n++] = cwd;
	}
	if (trc_top_start((int)mode, argv[3].via.boolean, prefixes, n) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "out of memory");
		return 0;
	}
	RB_GC_GUARD(keep);
	trc_session_count_every(s, every);
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
	{ TRC_CMD_HELLO, "hello", 3, cmd_hello, 1 },
	{ TRC_CMD_TRACE, "trace", 4, cmd_trace, 0 },
	{ TRC_CMD_EVAL, "eval", 4, cmd_eval, 0 },
	{ TRC_CMD_DETACH, "detach", 1, cmd_detach, 1 },
	{ TRC_CMD_TOP, "top", 5, cmd_top, 0 },
};

int
trc_command_run(struct trc_session *s, const msgpack_object *msg)
{
	const msgpack_object *argv;
	uint64_t type;

	if (pending == 0) {
		pending = rb_ary_new();
		rb_gc_register_address(&pending);
	}
	if (msg->type != MSGPACK_OBJECT_ARRAY || msg->via.array.size == 0)
		goto bad;
	argv = msg->via.array.ptr;
	if (get_uint(&argv[0], &type) < 0)
		goto bad;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct trc_command *c = &commands[i];
		if ((uint64_t)c->type != type)
			continue;
		if (msg->via.array.size != c->nargs || (!s->hello && !c->before_hello))
			goto bad;
		if (c->run(s, argv) < 0)
			goto bad;
		return 0;
	}
bad:
	trc_reply_error(s, TRC_ERR_PROTOCOL, "malformed or unexpected message");
	return -1;
}
