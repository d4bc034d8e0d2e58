/* replay.c: method and thread tables, per-thread call stacks, the handler of each event type. */
#include "replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

static int
fail(struct trc_replay *r, const char *what, uint64_t value)
{
	snprintf(r->error, sizeof(r->error), "%s %" PRIu64 " is out of range", what, value);
	return -1;
}

void *
trc_replay_thread(const struct trc_replay *r, uint32_t idx)
{
	return (char *)r->threads + (size_t)idx * r->ops->thread_size;
}

static struct trc_replay_call *
call_at(const struct trc_replay *r, const struct trc_replay_thread *th, uint32_t i)
{
	return (struct trc_replay_call *)((char *)th->stack + (size_t)i * r->ops->call_size);
}

/* The record of thread idx, made if new; NULL (and r->error) if idx is absurd. */
static struct trc_replay_thread *
thread_make(struct trc_replay *r, uint32_t idx)
{
	struct trc_replay_thread *th;

	if (idx >= TRC_REPLAY_MAX_THREADS) {
		fail(r, "thread index", idx);
		return NULL;
	}
	if (idx >= r->nthreads)
		r->threads = xgrowzero(r->threads, &r->nthreads, idx, r->ops->thread_size);
	th = trc_replay_thread(r, idx);
	th->idx = idx;
	return th;
}

/* Names th name, or "thread N" if name is empty. */
static void
name_thread(struct trc_replay *r, struct trc_replay_thread *th, struct trc_str name)
{
	char dflt[24];

	if (name.len == 0) {
		snprintf(dflt, sizeof(dflt), "thread %" PRIu32, th->idx);
		name = (struct trc_str){ dflt, (uint32_t)strlen(dflt) };
	}
	r->ops->name(r->user, th, name);
	th->named = true;
}

/* The thread an event names: named if it never was, and seen, which its user hears of. */
static struct trc_replay_thread *
thread_get(struct trc_replay *r, uint32_t idx)
{
	struct trc_replay_thread *th = thread_make(r, idx);

	if (th == NULL)
		return NULL;
	if (!th->named)
		name_thread(r, th, (struct trc_str){ "", 0 });
	if (!th->seen) {
		th->seen = true;
		r->threads_seen++;
		if (r->ops->first != NULL)
			r->ops->first(r->user, th);
	}
	return th;
}

/* Counts n more bytes of names; false (r->error set) past TRC_REPLAY_MAX_NAME_BYTES. */
static bool
take_names(struct trc_replay *r, size_t n)
{
	if (n > TRC_REPLAY_MAX_NAME_BYTES - r->name_bytes) {
		snprintf(r->error, sizeof(r->error), "method and thread names past %u MiB",
			 TRC_REPLAY_MAX_NAME_BYTES >> 20);
		return false;
	}
	r->name_bytes += n;
	return true;
}

static int
on_method(struct trc_replay *r, const struct trc_message *m)
{
	uint32_t idx = m->method.idx;
	const struct trc_str *f[] = { &m->method.cls, &m->method.sep, &m->method.name, &m->method.path };

	if (idx >= TRC_REPLAY_MAX_METHODS)
		return fail(r, "method index", idx);
	if (!take_names(r, (size_t)f[0]->len + f[1]->len + f[2]->len + f[3]->len))
		return -1;
	if (idx >= r->nmethods)
		r->methods = xgrowzero(r->methods, &r->nmethods, idx, sizeof(*r->methods));
	r->methods[idx] = r->ops->method(r->user, m) + 1;
	return 0;
}

static int
on_thread(struct trc_replay *r, const struct trc_message *m)
{
	struct trc_replay_thread *th = thread_make(r, m->thread.idx);

	if (th == NULL || !take_names(r, m->thread.name.len))
		return -1;
	name_thread(r, th, m->thread.name);
	return 0;
}

static int
on_call(struct trc_replay *r, const struct trc_message *m)
{
	struct trc_replay_thread *th = thread_get(r, m->call.thread);

	return th == NULL ? -1 : r->ops->call(r->user, th, m);
}

static int
on_return(struct trc_replay *r, const struct trc_message *m)
{
	struct trc_replay_thread *th = thread_get(r, m->call.thread);

	return th == NULL ? -1 : r->ops->ret(r->user, th, m);
}

static int
on_raise(struct trc_replay *r, const struct trc_message *m)
{
	struct trc_replay_thread *th = thread_get(r, m->raise.thread);

	return th == NULL ? -1 : r->ops->raise(r->user, th, m);
}

static int
on_expr(struct trc_replay *r, const struct trc_message *m)
{
	struct trc_replay_thread *th = thread_get(r, m->expr.thread);

	return th == NULL ? -1 : r->ops->expr(r->user, th, m);
}

/* The depth places the call: bound it as calls are, or one event could indent by gigabytes. */
static int
on_slow(struct trc_replay *r, const struct trc_message *m)
{
	struct trc_replay_thread *th = thread_get(r, m->slow.thread);

	if (th == NULL)
		return -1;
	if (m->slow.depth >= TRC_REPLAY_MAX_DEPTH)
		return fail(r, "call depth", m->slow.depth);
	return r->ops->slow(r->user, th, m);
}

static int
on_lost(struct trc_replay *r, const struct trc_message *m)
{
	return r->ops->lost(r->user, m);
}

static int
on_gc(struct trc_replay *r, const struct trc_message *m)
{
	struct trc_replay_thread *th = NULL;

	if (r->ops->gc == NULL)
		return 0;
	if (m->gc.thread != TRC_GC_NO_THREAD && (th = thread_get(r, m->gc.thread)) == NULL)
		return -1;
	return r->ops->gc(r->user, th, m);
}

/* Every mark alike: its type is the user's to tell apart. */
static int
on_mark(struct trc_replay *r, const struct trc_message *m)
{
	struct trc_replay_thread *th = NULL;

	if (r->ops->mark == NULL)
		return 0;
	if (m->mark.thread != TRC_NO_THREAD && (th = thread_get(r, m->mark.thread)) == NULL)
		return -1;
	return r->ops->mark(r->user, th, m);
}

/* Handlers of the trace events, indexed by type - TRC_EV_METHOD. */
static int (*const handlers[])(struct trc_replay *, const struct trc_message *) = {
	[TRC_EV_METHOD - TRC_EV_METHOD] = on_method,
	[TRC_EV_THREAD - TRC_EV_METHOD] = on_thread,
	[TRC_EV_CALL - TRC_EV_METHOD] = on_call,
	[TRC_EV_RETURN - TRC_EV_METHOD] = on_return,
	[TRC_EV_RAISE - TRC_EV_METHOD] = on_raise,
	[TRC_EV_EXPR - TRC_EV_METHOD] = on_expr,
	[TRC_EV_SLOW - TRC_EV_METHOD] = on_slow,
	[TRC_EV_LOST - TRC_EV_METHOD] = on_lost,
	[TRC_EV_GC - TRC_EV_METHOD] = on_gc,
};
#define TRC_X(NAME, name, type, fields) + 1 /* NOLINT(bugprone-macro-parentheses): a sum */
_Static_assert(sizeof(handlers) / sizeof(handlers[0]) == 0 TRC_EVENTS(TRC_X), "a handler per TRC_EVENTS");
#undef TRC_X

int
trc_replay_feed(struct trc_replay *r, const struct trc_message *m)
{
	uint32_t i = m->type - TRC_EV_METHOD;

	if (trc_mark_type(m->type) != NULL)
		return on_mark(r, m);
	if (m->type < TRC_EV_METHOD || i >= sizeof(handlers) / sizeof(handlers[0]))
		return 0;
	return handlers[i](r, m);
}

bool
trc_replay_method(const struct trc_replay *r, uint32_t idx, uint32_t *value)
{
	if (idx >= r->nmethods || r->methods[idx] == 0)
		return false;
	*value = r->methods[idx] - 1;
	return true;
}

void *
trc_replay_push(struct trc_replay *r, struct trc_replay_thread *th, uint32_t method,
		uint64_t start)
{
	size_t size = r->ops->call_size;
	struct trc_replay_call *c;

	if (th->depth == th->cap) {
		uint32_t cap = th->cap ? th->cap * 2 : 64;

		if (th->cap >= TRC_REPLAY_MAX_DEPTH) {
			fail(r, "call depth", th->cap);
			return NULL;
		}
		if ((size_t)(cap - th->cap) * size > TRC_REPLAY_MAX_STACK_BYTES - r->stack_bytes) {
			snprintf(r->error, sizeof(r->error), "open calls past %u MiB",
				 TRC_REPLAY_MAX_STACK_BYTES >> 20);
			return NULL;
		}
		r->stack_bytes += (size_t)(cap - th->cap) * size;
		th->stack = xreallocarray(th->stack, cap, size);
		memset((char *)th->stack + th->cap * size, 0, (cap - th->cap) * size);
		th->cap = cap;
	}
	c = call_at(r, th, th->depth++);
	c->method = method;
	c->start = start;
	return c;
}

int64_t
trc_replay_find(const struct trc_replay *r, const struct trc_replay_thread *th, uint32_t method)
{
	for (int64_t i = (int64_t)th->depth - 1; i >= 0; i--)
		if (call_at(r, th, (uint32_t)i)->method == method)
			return i;
	return -1;
}

void
trc_replay_init(struct trc_replay *r, const struct trc_replay_ops *ops, void *user)
{
	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->user = user;
}

void
trc_replay_release(struct trc_replay *r)
{
	for (uint32_t i = 0; i < r->nthreads; i++)
		free(((struct trc_replay_thread *)trc_replay_thread(r, i))->stack);
	free(r->threads);
	free(r->methods);
	memset(r, 0, sizeof(*r));
}
