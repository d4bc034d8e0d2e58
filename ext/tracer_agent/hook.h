/* hook.h: the VM event hooks that turn calls, returns and raises into ring records. */
#ifndef TRC_HOOK_H
#define TRC_HOOK_H

#include <ruby.h>
#include <stdint.h>

#include "ring.h"
#include "scope.h"
#include "wire.h"

/* One -m spec, resolved in the target. */
struct trc_spec {
	VALUE klass;            /* the class or module named; Qnil for TRC_SPEC_ANY, or not (yet) defined */
	VALUE name;             /* its name as given (a String), Qnil for TRC_SPEC_ANY */
	int kind;               /* enum trc_spec_kind */
	ID mid;                 /* 0: every method of klass */
	int nexpr;
	VALUE exprs[TRC_MAX_EXPRS];     /* frozen Strings */
};

struct trc_trace_cfg {
	unsigned flags;         /* enum trc_trace_flag */
	uint64_t slow_ns;
	int nspecs;
	struct trc_spec specs[TRC_MAX_SPECS];
	struct trc_scope scope; /* firehose and slow calls without specs: which calls */
};

/*
 * GVL held (the session's service). Installs what cfg needs and nothing more: a wrapper around
 * each method a spec names (wrap.c); for firehose and slow calls without specs, a wrapper around
 * each method in the scope, or the VM's global call hook when the scope is everything. matched[i] gets how many methods spec i selected, and why[i] a
 * String when something could not be wrapped (else nil). Events go into ring; wake_fd is
 * written when a quarter of it fills between two drains.
 */
int trc_hook_start(const struct trc_trace_cfg *cfg, struct trc_ring *ring, int wake_fd,
    int *matched, VALUE *why);
/*
 * GVL held, from TracerAgent.__defined: the app defined method mid in mod (or again over a
 * wrapper). Wraps it if the tracing or counting running now wants it: a spec names it (a class
 * defined or reloaded after attach is matched by name), or it is an app method of the scope.
 */
void trc_hook_defined(VALUE mod, ID mid);
/* Whether definitions matter now (trc_hook_defined could wrap something). */
int trc_hook_watching(void);
/* GVL held. Makes the app's method definitions reach trc_hook_defined from now on. */
void trc_hook_watch(void);
/* GVL held. Removes every hook and TracePoint; after it no record is written. */
void trc_hook_stop(void);
/*
 * GVL held. A new generation of wrappers, for a session that traces or counts: wrappers of an
 * earlier one, which the app may still call through an alias of its own, then count nowhere.
 */
uint64_t trc_hook_generation(void);
/* The token a TracePoint on method m, put in place by generation gen, reports its calls with. */
uint64_t trc_hook_token(uint64_t gen, uint32_t m);
/*
 * GVL held. Binds *slot (0: a new one, then set) to method m of generation gen: a wrapper that
 * reports with token -slot counts as that method until the slot is bound again. Returns 0, or
 * -1 when there is no memory or no slot left.
 */
int trc_hook_bind(uint32_t *slot, uint64_t gen, uint32_t m);
/*
 * From Init_ (wrap.c, between rb_ext_ractor_safe calls): the wrappers' calls into the agent,
 * TracerAgent.__enter(token), __enter_with(token) { [expression values] } and __leave(token).
 * A stale token does nothing.
 */
void trc_hook_define(VALUE mod);
/* GVL held. How many hooks and TracePoints are installed now. */
int trc_hook_installed(void);
struct trc_gc;
/* From gc.c's hook, inside the GC (no allocation, no Ruby): a collection, for the trace. */
void trc_hook_gc(const struct trc_gc *g);
/* Async-signal-safe: after fork, in the child, makes every hook a no-op at once. */
void trc_hook_disarm(void);
/*
 * GVL held. Hooks and the session's service never interleave: a hook that calls Ruby (to name
 * a thread, say) can meet an interrupt check, where a postponed job or a thread switch could
 * run trc_session_service, which frees the tables the hook is using. So every hook runs
 * between trc_hook_in and trc_hook_out; trc_hook_defer says whether service must wait, and
 * remembers to ask again (trc_control_poke) when the last hook leaves.
 */
void trc_hook_in(void);
void trc_hook_out(void);
int trc_hook_defer(void);
/* Any thread: a wrapped call made in another Ractor was left out; how many were, so far. */
void trc_hook_other_ractor(void);
uint64_t trc_hook_other_ractor_calls(void);

/* Totals for the session: records written and events dropped because the ring was full. */
void trc_hook_counts(uint64_t *events, uint64_t *lost);
/* From the GC's mark phase. */
void trc_hook_mark(void);

#endif
