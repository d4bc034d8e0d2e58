/* export_format.h: what the exporter core (export.c) shares with its formats (export_*.c). */
#ifndef TRC_EXPORT_FORMAT_H
#define TRC_EXPORT_FORMAT_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "decode.h"
#include "export.h"
#include "intern.h"
#include "replay.h"

/*
 * The core turns one target's decoded events into calls and returns on per-thread stacks (a
 * replay.h replay) and tells the format through the hooks of struct trc_xp_format:
 *  - every call gets exactly one ret, innermost first, so the formats see proper nesting
 *    whatever the agent lost: a return whose call is not on top closes the calls above it at
 *    its own time, a return without a call is ignored, calls still open when the target ends
 *    close at its last timestamp;
 *  - call comes after the call's TRC_EV_EXPR values (collected in its args), before the
 *    hook of the target's next call, return, raise or slow call (process and thread hooks,
 *    which only name things, may come between);
 *  - slow calls go to the slow hook, or, for formats without one, are replayed as calls and
 *    returns in time order once their outermost call (depth 0) or the target ends.
 * Timestamps stay the agent's (CLOCK_MONOTONIC ns); trc_xp_rel() makes them relative to the
 * first event of the run.
 */

/* A method as the formats name it: one per distinct (name, file, line), shared by all targets. */
struct trc_xp_frame {
	uint32_t name, file;            /* ids in trc_export.strings */
	int32_t line;
};

/* A call on a thread's stack. */
struct trc_xp_call {
	struct trc_replay_call base;    /* its method index and start */
	uint32_t frame;                 /* the method's frame when called: returns match it */
	uint64_t end;                   /* while a slow replay runs: when it returns */
	uint64_t child_ns;              /* time in the calls it made, for its self time */
	struct trc_buf args;            /* its expressions: JSON members "expr":"value",... */
};

/* A slow call waiting to be replayed. */
struct trc_xp_slow {
	uint32_t method, frame, depth;
	uint64_t start, end;
};

struct trc_xp_thread {
	struct trc_replay_thread base;  /* idx; seen: the format was told; the stack of calls */
	uint32_t name;                  /* id in trc_export.strings */
	struct trc_xp_slow *slow;
	size_t nslow, slow_cap;
	void *fmt;                      /* the format's per-thread state, freed by free_thread */
};

/* One target. */
struct trc_xp_source {
	struct trc_export *e;
	pid_t pid;
	struct trc_replay replay;       /* a method's value is its frame; threads are trc_xp_thread */
	bool started, ended;            /* started: has had an event, the format was told */
	bool pending;                   /* a call whose hook waits for its expressions */
	uint32_t pending_thread;
	uint64_t last_ts;
	uint64_t lost;
};

/* A call that ends, as ret sees it (its frame is still on top of the stack then). */
struct trc_xp_span {
	uint32_t frame, depth;          /* depth: calls under it on the stack */
	uint64_t start, end, self_ns;
	bool returned;                  /* false: closed without its return (lost, or open at the end) */
	const struct trc_buf *args;
};

/* A format: hooks may be NULL except ret; each writes through trc_xp_emit(). */
struct trc_xp_format {
	void (*begin)(struct trc_export *e);                            /* sets e->fs */
	void (*process)(struct trc_export *e, struct trc_xp_source *s); /* its first event */
	void (*thread)(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th);
	void (*call)(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th);
	void (*ret)(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
		    const struct trc_xp_span *sp);
	void (*raise)(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
		      const struct trc_message *m);
	void (*slow)(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
		     const struct trc_message *m);
	/* A garbage collection; th NULL when it ran on no traced thread. */
	void (*gc)(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
		   const struct trc_message *m);
	/* A mark (TRC_MARKS, trc_mark_type() names it); th NULL when it names no traced thread. */
	void (*mark)(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
		     const struct trc_message *m);
	void (*end)(struct trc_export *e);                              /* after every target */
	void (*free_thread)(void *fmt);
	void (*free)(struct trc_export *e);                             /* frees e->fs */
};

struct trc_export {
	struct trc_output *out;
	const struct trc_xp_format *fmt;
	void *fs;                       /* the format's state */
	struct trc_export_opts opts;
	struct trc_xp_source **sources;
	size_t nsources;
	struct trc_intern strings;      /* frame names, file names, thread names */
	struct trc_intern frame_keys;   /* (name, file, line) -> frame id */
	struct trc_xp_frame *frames;
	uint32_t nframes, frames_cap;
	bool have_t0;
	uint64_t t0;                    /* the first event's timestamp */
	struct trc_buf line;            /* what the format is writing; trc_xp_emit() sends it */
	bool finished;
	char **app_dirs;                /* trc_export_app_dir() */
	size_t napp_dirs;
	char failed[256];               /* why the file cannot be made whole (trc_xp_fail), or "" */
};

/* The exporters of TRC_FORMATS, trc_xp_chrome...: one in each export_<name>.c. */
#define TRC_XP_DECL_0(name)
#define TRC_XP_DECL_1(name) extern const struct trc_xp_format trc_xp_##name;
#define TRC_X(NAME, name, exporter, document, profile) TRC_XP_DECL_##exporter(name)
TRC_FORMATS(TRC_X)
#undef TRC_X

/*
 * The stack formats' state (export_stacks.c): call paths as a tree of (parent, label) nodes,
 * each with the self time of its calls. A label is a frame id (struct trc_xp_frame), or a
 * group (a process or thread name, with TRC_XP_GROUP) or a collection (TRC_XP_GC, 1 major).
 * Nodes at the top have parent TRC_XP_NO_NODE; a child's id is larger than its parent's.
 */
#define TRC_XP_NO_NODE UINT32_MAX
#define TRC_XP_GROUP (1u << 31)
#define TRC_XP_GC (1u << 30)

struct trc_xp_stacks {
	struct trc_intern keys;         /* (parent + 1, label) -> node id */
	uint32_t *parent, *label;
	uint64_t *self_ns;
	uint32_t n, cap;
};

/* The hooks the stack formats share: e->fs is a struct trc_xp_stacks. */
void trc_xp_stacks_begin(struct trc_export *e);
void trc_xp_stacks_call(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th);
void trc_xp_stacks_ret(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
		       const struct trc_xp_span *sp);
void trc_xp_stacks_gc(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
		      const struct trc_message *m);
void trc_xp_stacks_free_thread(void *fmt);
void trc_xp_stacks_free(struct trc_export *e);
/* A label's text: the frame's name, the group's, "GC major" or "GC minor". */
const char *trc_xp_stacks_label(struct trc_export *e, uint32_t label, size_t *len);

/* ts relative to the first event of the run; negative for a slow call that began before it. */
static inline int64_t
trc_xp_rel(const struct trc_export *e, uint64_t ts)
{
	return (int64_t)(ts - e->t0);
}

/* th's open calls, outermost first: th->base.depth of them. */
static inline struct trc_xp_call *
trc_xp_calls(const struct trc_xp_thread *th)
{
	return th->base.stack;
}

/* Thread idx of s, below s->replay.nthreads (maybe never seen: base.seen says). */
static inline struct trc_xp_thread *
trc_xp_thread(const struct trc_xp_source *s, uint32_t idx)
{
	return trc_replay_thread(&s->replay, idx);
}

/*
 * The format cannot make its file whole (its scratch file failed): says why in a note, once,
 * and keeps the reason for trc_export_failed(). The format then writes no more than it must.
 */
void trc_xp_fail(struct trc_export *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes e->line to the output and empties it. */
void trc_xp_emit(struct trc_export *e);
/* The bytes of string id (see struct trc_export.strings). */
const char *trc_xp_str(const struct trc_export *e, uint32_t id, size_t *len);
/* Appends string id to e->line as a JSON string. */
void trc_xp_json(struct trc_export *e, uint32_t id);
/* The frame of s's method index idx ("(unknown)" if never defined). */
uint32_t trc_xp_method_frame(struct trc_xp_source *s, uint32_t idx);
/* The id of a string, added if new. */
uint32_t trc_xp_intern(struct trc_export *e, const char *p, size_t n);

#endif
