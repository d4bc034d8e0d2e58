/* trace.h: the call-tree printer: turns decoded trace events into rbtrace-style text. */
#ifndef TRC_TRACE_H
#define TRC_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "output.h"
#include "sink.h"
#include "spec.h"

/*
 * Calls nested deeper than this are not indented any further: their lines start with
 * "[depth N] " instead, so that the output grows with the events, not with depth x events.
 */
#define TRC_TRACE_MAX_INDENT 40

struct trc_trace_opts {
	unsigned prefix;        /* spaces of indent per call level (-r), up to TRC_TRACE_MAX_INDENT */
	bool start_time;        /* -t: wall-clock start time before each call */
	bool no_duration;       /* -n: no <seconds> */
	int pid;                /* > 0: start every line with "[pid] " (several targets) */
};

struct trc_trace;

/*
 * A printer for one target's events, writing to out (which it shares with others: see the
 * open line in output.h). specs are the -m specs sent to that target, in order: TRC_EV_EXPR
 * names its expression by their indexes. The caller keeps out and specs alive longer than the
 * printer, and frees it with trc_trace_free(). Main thread.
 */
struct trc_trace *trc_trace_new(struct trc_output *out, const struct trc_trace_opts *opts,
				const struct trc_spec *specs, size_t nspecs);
/* Ends the printer's open line, if any, and frees it. */
void trc_trace_free(struct trc_trace *t);

/* The target's CLOCK_MONOTONIC/CLOCK_REALTIME pair from TRC_MSG_WELCOME, for -t. */
void trc_trace_set_clock(struct trc_trace *t, uint64_t mono_ns, uint64_t real_ns);

/*
 * Prints one message. Trace events (TRC_EV_*) are printed; other types are ignored. Strings in
 * m are copied where kept. Returns 0, or -1 if the event breaks a bound of replay.h
 * (trc_trace_error() says which).
 */
int trc_trace_feed(struct trc_trace *t, const struct trc_message *m);
const char *trc_trace_error(const struct trc_trace *t);

/*
 * With several targets (opts->pid > 0) the printer holds each block's lines (an outermost call
 * and all under it) until the block ends, then writes them at once, so that targets never
 * interleave inside a block. Called when the loop idles (now: a clock in seconds), it lets a
 * block held for 0.1 s go by whole lines; it returns whether lines are still held (call it
 * again within 0.1 s). Main thread.
 */
#define TRC_TRACE_HOLD_SECS 0.1
bool trc_trace_idle(struct trc_trace *t, double now);

/* Events reported lost by TRC_EV_LOST so far. */
uint64_t trc_trace_lost(const struct trc_trace *t);

/* The printer as a session's sink (sink.h): the functions above; closing it frees t. */
struct trc_sink trc_trace_sink(struct trc_trace *t);

#endif
