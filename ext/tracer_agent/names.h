/* names.h: the tables that turn classes, method ids and threads into small numbers. */
#ifndef TRC_NAMES_H
#define TRC_NAMES_H

#include <ruby.h>
#include <stdint.h>

#include "tracer_protocol.h"

/*
 * Entries are appended by traced threads (GVL held) and never move or change afterwards, so the
 * I/O thread may read any entry below trc_*_count() without the GVL: the count is published
 * with release ordering after the entry is filled. Storage is chunked for that reason: growing
 * never reallocates an entry another thread may be reading.
 */
struct trc_method {
	VALUE klass;            /* key, kept alive by trc_names_mark */
	ID mid;                 /* key */
	char *klass_name;       /* "" when unknown */
	char *name;
	uint32_t klass_name_len, name_len;      /* bytes: a name may hold a NUL */
	char *path;             /* definition of a Ruby method; "" for C methods */
	int line;
	char sep;               /* '#', '.' or 0 (no class) */
	int8_t spec;            /* -m spec that selected it, or -1 */
	uint8_t selected;       /* traced under the current filter */
};

struct trc_thread {
	VALUE thread;           /* key, kept alive by trc_names_mark */
	uint32_t idx;
	uint8_t ignored;        /* one of the agent's own threads */
	uint8_t quiet;          /* evaluating -m expressions: its calls are not traced */
	char *name;
	uint32_t depth;         /* open traced calls */
	uint32_t frames_cap;
	struct trc_frame *frames;       /* open calls, for -s and --top time; NULL until needed */
};

/* An open call, as far as slow mode and the time table need to know it. */
struct trc_frame {
	uint64_t start;
	uint64_t cpu;           /* -s by CPU time: the thread's CPU time at the call, in ns */
	uint64_t child;         /* time spent in traced callees */
	uint32_t method;
	int line;               /* call site, C methods only */
	const char *path;
	uint32_t node;          /* --top time's call path (paths.h), 0 without */
};

/* GVL held. Frame depth of t, made on first use; NULL if memory runs out. */
struct trc_frame *trc_thread_frame(struct trc_thread *t, uint32_t depth);

/* Either table holds at most this many entries: what the protocol lets a session define. */
#define TRC_NAMES_MAX TRC_MAX_METHODS
_Static_assert(TRC_MAX_METHODS == TRC_MAX_THREADS, "one limit for both name tables");

/* The object a singleton class belongs to. */
VALUE trc_attached_object(VALUE klass);

/* GVL held. How klass shows in a method's label ("Foo", sep '#'; "Foo", sep '.' for Foo's singleton). */
VALUE trc_module_label(VALUE klass, char *sep);
/* GVL held. Returns the index of (klass, mid), or UINT32_MAX when it is not there yet. */
uint32_t trc_method_find(VALUE klass, ID mid);
/*
 * GVL held, not from an internal event (it may allocate). The index of (klass, mid), entered
 * on first sight with its printable names, path and line, and selected by spec (-1: not
 * selected, -2: selected by no spec in particular). UINT32_MAX when the table is full.
 */
uint32_t trc_method_intern(VALUE klass, ID mid, VALUE path, int line, int spec);
struct trc_method *trc_method_at(uint32_t idx);

/* GVL held. The entry of thread th, made on first sight; NULL when the table is full. */
struct trc_thread *trc_thread_get(VALUE th);
/*
 * GVL held. Thread#name now, or Qnil: none, empty, or a Thread#name of the app's own, which is
 * not asked. An entry keeps the name its thread had at first sight, often none yet: a thread
 * names itself in its block, after its first turn.
 */
VALUE trc_thread_name_now(VALUE th);
/* Whether th is one of the agent's threads; allocates nothing (allocation hooks use it). */
int trc_thread_is_agent(VALUE th);
/* How many of the agent's threads there are now: none, and no thread need be asked about. */
int trc_agent_threads(void);
/* Any context, allocates nothing (a GC hook may ask): th's entry if it has one, else NULL. */
struct trc_thread *trc_thread_find(VALUE th);
/* GVL held. The current thread's entry, or NULL for the agent's own threads. */
struct trc_thread *trc_thread_current(void);
/*
 * trc_thread_current's one-entry cache, for the wrappers' fast path: when the current thread
 * is trc_names_last_thread, its entry is trc_names_last_entry (NULL: one of the agent's).
 */
extern VALUE trc_names_last_thread;
extern struct trc_thread *trc_names_last_entry;
struct trc_thread *trc_thread_at(uint32_t idx);

/* GVL held. Marks th as one of the agent's threads (on) or not: hooks skip its events. */
void trc_thread_ignore(VALUE th, int on);

/* GVL held, with no traced event in flight: forget everything (at detach). */
void trc_names_reset(void);
/* From the GC's mark phase. */
void trc_names_mark(void);

#endif
