/* gc.h: garbage collections as events: their kind, reason and pause, for traces and tables. */
#ifndef TRC_GC_H
#define TRC_GC_H

#include <stdint.h>

/* Why a collection ran: its major_by when major, else its gc_by (GC.latest_gc_info). */
enum trc_gc_reason {
	TRC_GC_UNKNOWN = 0,
	TRC_GC_NOFREE, TRC_GC_OLDGEN, TRC_GC_SHADY, TRC_GC_FORCE, TRC_GC_OLDMALLOC,
	TRC_GC_NEWOBJ, TRC_GC_MALLOC, TRC_GC_METHOD, TRC_GC_CAPI, TRC_GC_STRESS,
};

/* One collection, from its start to the end of its sweep. */
struct trc_gc {
	uint64_t start;         /* ticks (clock.h) when it began */
	uint64_t pause;         /* ticks the app stood still in it: every step, marking and sweeping */
	int major;
	int reason;             /* enum trc_gc_reason */
};

/* The reason's name ("nofree", "newobj", ...; "" when unknown). Any thread. */
const char *trc_gc_reason_name(int reason);

/* From Init_: makes what the GC hook needs beforehand (it may allocate nothing). */
void trc_gc_init(void);
/*
 * GVL held. Watches collections: each one ends in a call of ended (a trace's or a table's),
 * from the GC hook itself: no allocation, no Ruby. NULL: stops.
 */
void trc_gc_watch(void (*ended)(const struct trc_gc *));
int trc_gc_watching(void);

#endif
