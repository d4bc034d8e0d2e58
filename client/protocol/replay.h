/* replay.h: one target's event stream as state (methods, threads, open calls), fed to handlers. */
#ifndef TRC_REPLAY_H
#define TRC_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decode.h"

/*
 * The call-tree printer (trace.c) and the exporters (export.c) read the same stream the same
 * way: TRC_EV_METHOD and TRC_EV_THREAD define methods and threads by index, the other events
 * name a thread, and calls nest on per-thread stacks. The replay keeps those tables, within
 * bounds, and hands each event to its user's handler with the thread it names. What a user
 * keeps per thread and per call is its own record, which begins with the replay's part
 * (struct trc_replay_thread, struct trc_replay_call), so one allocation holds both.
 */

/*
 * Bounds on what an agent may make a replay hold; beyond them an event is a protocol error. In
 * bytes too, or an agent that keeps defining methods with long names (or opening calls on many
 * threads) would grow the client without end: names are counted as they come (a redefinition
 * counts again: its users keep every text they were given, each at most 4 times as long once
 * escaped), open calls by the records their stacks hold.
 */
#define TRC_REPLAY_MAX_METHODS (1u << 22)
#define TRC_REPLAY_MAX_THREADS (1u << 16)
#define TRC_REPLAY_MAX_DEPTH (1u << 20)
#define TRC_REPLAY_MAX_NAME_BYTES (32u << 20)   /* method and thread definitions */
#define TRC_REPLAY_MAX_STACK_BYTES (64u << 20)  /* call records of every thread */

/* An open call: the start of the user's call record. */
struct trc_replay_call {
	uint32_t method;        /* its method index */
	uint64_t start;         /* its timestamp (the agent's CLOCK_MONOTONIC ns) */
};

/* A thread: the start of the user's thread record. */
struct trc_replay_thread {
	uint32_t idx;
	bool named;             /* ops->name has named it */
	bool seen;              /* has had an event */
	void *stack;            /* call records, outermost first */
	uint32_t depth;         /* open calls; the user closes calls by lowering it */
	uint32_t cap;           /* records allocated; those above depth keep what they hold */
};

/*
 * What the user does with the stream. Every hook gets the user pointer of trc_replay_init()
 * and, where it has one, the user's thread record; handlers return 0, or -1 when a replay
 * function they called failed. Main thread.
 */
struct trc_replay_ops {
	size_t thread_size;     /* of the user's thread record, at least a struct trc_replay_thread */
	size_t call_size;       /* of the user's call record, at least a struct trc_replay_call */
	/* TRC_EV_METHOD: the value to keep for method m->method.idx (below UINT32_MAX). */
	uint32_t (*method)(void *user, const struct trc_message *m);
	/* Names a thread: on TRC_EV_THREAD, and before the first event of one never named; name
	 * is "thread N" when the agent sent none. */
	void (*name)(void *user, void *thread, struct trc_str name);
	/* The thread's first event comes next. May be NULL. */
	void (*first)(void *user, void *thread);
	int (*call)(void *user, void *thread, const struct trc_message *m);
	int (*ret)(void *user, void *thread, const struct trc_message *m);
	int (*raise)(void *user, void *thread, const struct trc_message *m);
	int (*expr)(void *user, void *thread, const struct trc_message *m);
	/* m->slow.depth is below TRC_REPLAY_MAX_DEPTH. */
	int (*slow)(void *user, void *thread, const struct trc_message *m);
	int (*lost)(void *user, const struct trc_message *m);
	/* A garbage collection; thread NULL when the agent traced none that ran it. May be NULL. */
	int (*gc)(void *user, void *thread, const struct trc_message *m);
	/* A mark (TRC_MARKS: trc_mark_type() says which); thread NULL when the agent named none.
	 * May be NULL. */
	int (*mark)(void *user, void *thread, const struct trc_message *m);
};

struct trc_replay {
	const struct trc_replay_ops *ops;
	void *user;
	uint32_t *methods;      /* method index -> value + 1; 0: never defined */
	uint32_t nmethods;
	void *threads;          /* thread records by index, made up to the highest index seen */
	uint32_t nthreads;
	uint32_t threads_seen;  /* threads that have had an event */
	size_t name_bytes;      /* of the definitions taken in (TRC_REPLAY_MAX_NAME_BYTES) */
	size_t stack_bytes;     /* of the threads' call records (TRC_REPLAY_MAX_STACK_BYTES) */
	char error[96];         /* why trc_replay_feed() last returned -1 */
};

/* ops and user must outlive r. Pure. */
void trc_replay_init(struct trc_replay *r, const struct trc_replay_ops *ops, void *user);
/* Frees the tables and stacks; the user first frees what its records point to. */
void trc_replay_release(struct trc_replay *r);

/*
 * Applies one message: a definition to the tables, any other trace event to its handler.
 * Messages that are not trace events are ignored. Returns 0, or -1 with r->error set when
 * the event breaks a bound above (or its handler returns -1).
 */
int trc_replay_feed(struct trc_replay *r, const struct trc_message *m);

/* The value ops->method gave method idx: true, or false if it was never defined. */
bool trc_replay_method(const struct trc_replay *r, uint32_t idx, uint32_t *value);

/* The record of thread idx, below r->nthreads (maybe never named nor seen). r owns it; the
 * pointer, like those the hooks get, is valid until an event makes a new thread. */
void *trc_replay_thread(const struct trc_replay *r, uint32_t idx);

/*
 * Opens a call on th and returns its record: the replay's part set, the user's part as the
 * last call at that depth left it (zero the first time). th owns the record; the pointer is
 * valid until the next push on th. Returns NULL with r->error set beyond TRC_REPLAY_MAX_DEPTH.
 */
void *trc_replay_push(struct trc_replay *r, struct trc_replay_thread *th, uint32_t method,
		      uint64_t start);

/* Where th's innermost open call of method is on its stack (0: outermost), or -1 if none. */
int64_t trc_replay_find(const struct trc_replay *r, const struct trc_replay_thread *th,
			uint32_t method);

#endif
