/* trace.h: a trace: wrapped calls, VM call hooks, raises and collections, as ring records. */
#ifndef TRC_TRACE_H
#define TRC_TRACE_H

#include <ruby.h>
#include <stdint.h>

#include "plan.h"
#include "ring.h"
#include "scope.h"
#include "tracer_protocol.h"

struct trc_trace_cfg {
	unsigned flags;         /* enum trc_trace_flag */
	uint64_t slow_ns;
	int nspecs;
	struct trc_spec specs[TRC_MAX_SPECS];
	struct trc_scope scope; /* firehose and slow calls without specs: which calls */
};

/* From Init: the method names and the Ruby's traits a trace looks up once. */
void trc_trace_init(void);
/*
 * GVL held. Makes ready to trace what cfg says into ring (wake_fd is written when a quarter of
 * it fills between two drains), as a new generation of wrappers, which it returns (the plan
 * puts them in place meanwhile). Nothing is recorded before trc_trace_go, which arms the
 * recording, makes the generation's wrappers live and adds the VM hooks cfg needs: the global
 * call hook when the scope is everything, raises, garbage collections. cfg and ring stay the
 * caller's, and must outlive trc_trace_stop.
 */
uint64_t trc_trace_prepare(const struct trc_trace_cfg *cfg, struct trc_ring *ring, int wake_fd);
void trc_trace_go(void);
/* GVL held. Removes every hook; after it no record is written. */
void trc_trace_stop(void);
/* GVL held. How many hooks are installed now. */
int trc_trace_hooks(void);
/* Totals so far: records written, and events dropped because the ring was full. */
void trc_trace_counts(uint64_t *events, uint64_t *lost);
/* Async-signal-safe: after fork, in the child, makes every hook a no-op at once. */
void trc_trace_disarm(void);

#endif
