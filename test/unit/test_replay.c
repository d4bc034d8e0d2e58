/* test_replay.c: the event stream as state: tables, thread names, stacks, bounds, dispatch. */
#include <stdlib.h>

#include "buf.h"
#include "replay.h"
#include "test.h"

struct rec_thread {
	struct trc_replay_thread base;
	uint32_t names;         /* times named */
};

struct rec_call {
	struct trc_replay_call base;
	uint32_t mark;          /* the user's part, kept by the replay between calls */
};

/* A user that logs each hook it hears, one line each. */
struct user {
	struct trc_replay r;
	struct trc_buf log;
};

static uint32_t
on_method(void *user, const struct trc_message *m)
{
	struct user *u = user;

	trc_buf_addf(&u->log, "method %u\n", m->method.idx);
	return 100 + m->method.idx;
}

static void
on_name(void *user, void *thread, struct trc_str name)
{
	struct user *u = user;
	struct rec_thread *th = thread;

	th->names++;
	trc_buf_addf(&u->log, "name %u %.*s%s\n", th->base.idx, (int)name.len, name.ptr,
		     th->base.seen ? " (seen)" : "");
}

static void
on_first(void *user, void *thread)
{
	struct user *u = user;
	struct rec_thread *th = thread;

	trc_buf_addf(&u->log, "first %u\n", th->base.idx);
}

static int
on_call(void *user, void *thread, const struct trc_message *m)
{
	struct user *u = user;
	struct rec_thread *th = thread;

	trc_buf_addf(&u->log, "call %u\n", th->base.idx);
	return trc_replay_push(&u->r, &th->base, m->call.method, m->call.ts) == NULL ? -1 : 0;
}

static int
on_event(void *user, void *thread, const struct trc_message *m)
{
	struct user *u = user;
	struct rec_thread *th = thread;

	trc_buf_addf(&u->log, "event %u on %u\n", m->type, th->base.idx);
	return 0;
}

static int
on_lost(void *user, const struct trc_message *m)
{
	struct user *u = user;

	trc_buf_addf(&u->log, "lost %llu\n", (unsigned long long)m->lost.count);
	return 0;
}

static const struct trc_replay_ops ops = {
	.thread_size = sizeof(struct rec_thread),
	.call_size = sizeof(struct rec_call),
	.method = on_method,
	.name = on_name,
	.first = on_first,
	.call = on_call,
	.ret = on_event,
	.raise = on_event,
	.expr = on_event,
	.slow = on_event,
	.lost = on_lost,
};

static void
start(struct user *u)
{
	trc_replay_init(&u->r, &ops, u);
	trc_buf_init(&u->log);
}

static void
finish(struct user *u)
{
	trc_replay_release(&u->r);
	trc_buf_release(&u->log);
}

/* The log so far, NUL-terminated in place, then emptied for the next check. */
static const char *
log_of(struct user *u)
{
	static char text[512];
	size_t n = u->log.len < sizeof(text) - 1 ? u->log.len : sizeof(text) - 1;

	if (n > 0)
		memcpy(text, u->log.data, n);
	text[n] = '\0';
	u->log.len = 0;
	return text;
}

static int
feed(struct user *u, struct trc_message m)
{
	return trc_replay_feed(&u->r, &m);
}

static int
call(struct user *u, uint32_t thread, uint32_t method)
{
	struct trc_message m = { .type = TRC_EV_CALL };

	m.call.thread = thread;
	m.call.method = method;
	return feed(u, m);
}

static void
test_methods(void)
{
	struct user u;
	struct trc_message m = { .type = TRC_EV_METHOD };
	uint32_t v = 0;

	start(&u);
	m.method.idx = 3;
	test_cond("a definition", feed(&u, m) == 0);
	test_str("goes to the user", log_of(&u), "method 3\n");
	test_cond("its value kept", trc_replay_method(&u.r, 3, &v) && v == 103);
	test_cond("below it: undefined", !trc_replay_method(&u.r, 2, &v));
	test_cond("above the table: undefined", !trc_replay_method(&u.r, 9999, &v));
	m.method.idx = TRC_REPLAY_MAX_METHODS;
	test_cond("index past the bound", feed(&u, m) == -1);
	test_str("refused", u.r.error, "method index 4194304 is out of range");
	test_str("before the user hears of it", log_of(&u), "");
	m = (struct trc_message){ .type = TRC_MSG_WELCOME };
	test_cond("not an event: ignored", feed(&u, m) == 0 && u.log.len == 0);
	finish(&u);
}

static void
test_threads(void)
{
	struct user u;
	struct trc_message m = { .type = TRC_EV_THREAD };
	struct rec_thread *th;

	start(&u);
	test_cond("an event on a new thread", call(&u, 2, 0) == 0);
	test_str("names it, then says it is seen", log_of(&u), "name 2 thread 2\nfirst 2\ncall 2\n");
	test_cond("one seen", u.r.threads_seen == 1);
	call(&u, 2, 0);
	test_str("once", log_of(&u), "call 2\n");
	m.thread.idx = 2;
	m.thread.name = (struct trc_str){ "worker", 6 };
	feed(&u, m);
	test_str("renamed", log_of(&u), "name 2 worker (seen)\n");
	m.thread.idx = 0;
	feed(&u, m);
	call(&u, 0, 0);
	test_str("named before its first event", log_of(&u), "name 0 worker\nfirst 0\ncall 0\n");
	m.thread.name = (struct trc_str){ "", 0 };
	feed(&u, m);
	test_str("no name: its number", log_of(&u), "name 0 thread 0 (seen)\n");
	th = trc_replay_thread(&u.r, 1);
	test_cond("a thread between, never seen", u.r.nthreads > 2 && !th->base.seen &&
							 th->names == 0 && u.r.threads_seen == 2);
	test_cond("index past the bound", call(&u, TRC_REPLAY_MAX_THREADS, 0) == -1);
	test_str("refused", u.r.error, "thread index 65536 is out of range");
	m.thread.idx = UINT32_MAX;
	test_cond("and its definition", feed(&u, m) == -1 && u.log.len == 0);
	finish(&u);
}

static void
test_dispatch(void)
{
	struct user u;
	struct trc_message m = { .type = TRC_EV_SLOW };

	start(&u);
	m.slow.thread = 1;
	m.slow.depth = 7;
	test_cond("a slow call", feed(&u, m) == 0);
	test_str("with its thread", log_of(&u), "name 1 thread 1\nfirst 1\nevent 134 on 1\n");
	m.slow.depth = TRC_REPLAY_MAX_DEPTH;
	test_cond("too deep", feed(&u, m) == -1);
	test_str("refused", u.r.error, "call depth 1048576 is out of range");
	m = (struct trc_message){ .type = TRC_EV_RAISE };
	m.raise.thread = 1;
	feed(&u, m);
	m = (struct trc_message){ .type = TRC_EV_EXPR };
	m.expr.thread = 1;
	feed(&u, m);
	m = (struct trc_message){ .type = TRC_EV_RETURN };
	m.call.thread = 1;
	feed(&u, m);
	m = (struct trc_message){ .type = TRC_EV_LOST };
	m.lost.count = 5;
	feed(&u, m);
	test_str("each to its handler", log_of(&u),
		 "event 132 on 1\nevent 133 on 1\nevent 131 on 1\nlost 5\n");
	finish(&u);
}

static void
test_stack(void)
{
	struct user u;
	struct rec_thread *th;
	struct rec_call *c;
	int ok = 1;

	start(&u);
	call(&u, 0, 5);
	call(&u, 0, 6);
	call(&u, 0, 5);
	th = trc_replay_thread(&u.r, 0);
	c = th->base.stack;
	test_cond("three open", th->base.depth == 3 && c[0].base.method == 5 && c[1].base.method == 6);
	test_cond("innermost of a method", trc_replay_find(&u.r, &th->base, 5) == 2);
	test_cond("below", trc_replay_find(&u.r, &th->base, 6) == 1);
	test_cond("none", trc_replay_find(&u.r, &th->base, 7) == -1);
	c[0].mark = 42;
	th->base.depth = 0;
	test_cond("closed: not found", trc_replay_find(&u.r, &th->base, 5) == -1);
	c = trc_replay_push(&u.r, &th->base, 8, 99);
	test_cond("a record reused as the user left it", c->base.method == 8 &&
							c->base.start == 99 && c->mark == 42);
	while (th->base.depth < TRC_REPLAY_MAX_DEPTH && ok)
		ok = (c = trc_replay_push(&u.r, &th->base, 1, 0)) != NULL && c->mark == 0;
	test_cond("new records are zero, up to the bound", ok);
	test_cond("one more is refused", trc_replay_push(&u.r, &th->base, 1, 0) == NULL &&
						 th->base.depth == TRC_REPLAY_MAX_DEPTH);
	test_str("and named", u.r.error, "call depth 1048576 is out of range");
	finish(&u);
}

/* An agent that keeps defining methods with long names, or opening calls, is stopped in bytes. */
static void
test_bytes(void)
{
	static char name[60000];
	struct user u;
	struct trc_message m = { .type = TRC_EV_METHOD };
	uint32_t i = 0;
	int rc = 0, ok = 1;
	struct rec_thread *th;

	memset(name, 'n', sizeof(name));
	start(&u);
	m.method.name = (struct trc_str){ name, sizeof(name) };
	while (rc == 0 && i < 10000) {
		m.method.idx = i++ % 3;         /* redefinitions count too */
		rc = feed(&u, m);
		u.log.len = 0;
	}
	test_cond("names stop at the bound", rc == -1 && i - 1 == TRC_REPLAY_MAX_NAME_BYTES / sizeof(name));
	test_str("said so", u.r.error, "method and thread names past 32 MiB");
	m = (struct trc_message){ .type = TRC_EV_THREAD };
	m.thread.name = (struct trc_str){ name, sizeof(name) };
	test_cond("thread names count with them", feed(&u, m) == -1);
	finish(&u);

	start(&u);
	for (uint32_t t = 0; ok && t < 8; t++) {
		call(&u, t, 0);
		th = trc_replay_thread(&u.r, t);
		while (ok && th->base.depth < TRC_REPLAY_MAX_DEPTH)
			ok = trc_replay_push(&u.r, &th->base, 1, 0) != NULL;
		th = trc_replay_thread(&u.r, t);
	}
	test_cond("open calls stop at the bound, over several threads", !ok &&
		  u.r.stack_bytes <= TRC_REPLAY_MAX_STACK_BYTES);
	test_str("said so", u.r.error, "open calls past 64 MiB");
	finish(&u);
}

void
test_replay(void)
{
	test_methods();
	test_threads();
	test_dispatch();
	test_stack();
	test_bytes();
}
