/* hook.h: the VM event hooks that turn calls, returns and raises into ring records. */
#ifndef TRC_HOOK_H
#define TRC_HOOK_H

#include <ruby.h>
#include <stdint.h>

#include "plan.h"
#include "ring.h"
#include "scope.h"
#include "wire.h"
#include "wrap.h"

struct trc_trace_cfg {
	unsigned flags;         /* enum trc_trace_flag */
	uint64_t slow_ns;
	int nspecs;
	struct trc_spec specs[TRC_MAX_SPECS];
	struct trc_scope scope; /* firehose and slow calls without specs: which calls */
};

/*
 * GVL held (the session's service). Makes ready to trace what cfg says into ring (wake_fd is
 * written when a quarter of it fills between two drains), as a new generation
 * (trc_hook_prepared_generation, for the wrappers the plan puts in place meanwhile); nothing is
 * recorded before trc_hook_go, which arms the recording, makes the generation's wrappers live
 * and adds the VM hooks cfg needs: the global call hook when the scope is everything, raises,
 * garbage collections.
 */
void trc_hook_prepare(const struct trc_trace_cfg *cfg, struct trc_ring *ring, int wake_fd);
uint64_t trc_hook_prepared_generation(void);
void trc_hook_go(void);
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
 * GVL held. A new generation, for a session that traces or counts: wrappers and TracePoints of
 * an earlier one, which the app may still reach through an alias of its own, count nowhere.
 */
uint64_t trc_hook_generation(void);
/* The token a TracePoint on method m, put in place by generation gen, reports its calls with. */
uint64_t trc_hook_token(uint64_t gen, uint32_t m);
/*
 * From Init_ (wrap.c, between rb_ext_ractor_safe calls): the TracePoints' calls into the
 * agent, TracerAgent.__enter(token) and __leave(token). A stale token does nothing.
 */
void trc_hook_define(VALUE mod);
/*
 * GVL held, from a wrapper (wrap.c): a call of method m begins, with its -m expressions to
 * show (NULL: none), or ends. To the trace, or to the tables, whichever is on.
 */
void trc_hook_wrapped_enter(uint32_t m, const struct trc_wrap_exprs *exprs);
void trc_hook_wrapped_leave(uint32_t m);
/* GVL held. How many hooks and TracePoints are installed now. */
int trc_hook_installed(void);
struct trc_gc;
/* From gc.c's hook, inside the GC (no allocation, no Ruby): a collection, for the trace. */
void trc_hook_gc(const struct trc_gc *g);
/* Async-signal-safe: after fork, in the child, makes every hook a no-op at once. */
void trc_hook_disarm(void);
/* Totals for the session: records written and events dropped because the ring was full. */
void trc_hook_counts(uint64_t *events, uint64_t *lost);
/* From the GC's mark phase. */
void trc_hook_mark(void);

#endif
