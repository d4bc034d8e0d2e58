/* plan.h: which methods a session wraps, put in place and taken away a slice at a time. */
#ifndef TRC_PLAN_H
#define TRC_PLAN_H

#include <ruby.h>
#include <stdint.h>

#include "scope.h"
#include "tracer_protocol.h"

/* One -m spec, resolved in the target. */
struct trc_spec {
	VALUE klass;            /* the class or module named; Qnil for TRC_SPEC_ANY, or not (yet) defined */
	VALUE name;             /* its name as given (a String), Qnil for TRC_SPEC_ANY */
	int kind;               /* enum trc_spec_kind */
	ID mid;                 /* 0: every method of klass */
	int nexpr;
	VALUE exprs[TRC_MAX_EXPRS];     /* frozen Strings */
};

/* What a spec came to, for its TRC_MSG_SPEC. */
struct trc_spec_result {
	int matched;            /* methods wrapped */
	int pending;            /* its class is not defined yet */
	VALUE why;              /* a String when nothing could be wrapped, else Qnil */
	VALUE skipped;          /* a String naming what was left out and why, or Qnil */
	VALUE note;             /* a String saying where what it names comes from, or Qnil */
};

/*
 * GVL held. Begins a plan for generation gen: the methods specs name (resolved and wrapped
 * here, at once: they are few), and, when scope is not NULL, the app's methods in it (found
 * and wrapped by trc_plan_step, a slice at a time). results[i] gets what spec i came to.
 * The plan keeps pointers to specs and scope until trc_plan_end.
 */
void trc_plan_begin(const struct trc_spec *specs, int nspecs, const struct trc_scope *scope, uint64_t gen,
    struct trc_spec_result *results);
/*
 * GVL held. Does the plan's next piece of work until now_ns() passes deadline. Returns 1 once
 * everything is in place (or taken away, after trc_plan_end), else 0.
 */
int trc_plan_step(uint64_t deadline);
/*
 * What the plan is doing: TRC_STEP_FIND (method entries looked at, or modules where the find
 * goes by modules), TRC_STEP_WRAP (methods wrapped) or TRC_STEP_REMOVE (wrappers taken away),
 * with done out of total.
 */
void trc_plan_progress(int *step, uint64_t *done, uint64_t *total);
/* The longest a step of this session's plan held the GVL, in ns (TracerAgent.stats). */
uint64_t trc_plan_longest_step(void);
/* How the last find of the app's methods went: "entries" (the heap's method entries, the
 * way it goes), "modules" (wrap.rb asked about each module: the entries could not be read, or
 * TRACER_AGENT_FIND=modules), or NULL (none yet); *count, what it found. */
const char *trc_plan_found_by(long *count);
/* How many methods the plan has wrapped. */
uint32_t trc_plan_wrapped(void);
/* GVL held. Ends the plan: trc_plan_step takes every wrapper away from now on. */
void trc_plan_end(void);
/* CLOCK_MONOTONIC now, in ns: what deadlines are in. */
uint64_t trc_plan_now(void);
void trc_plan_mark(void);
/*
 * From Init_. While a plan is under way or in place, the app's definitions come to it
 * (trc_wrap_watch): a method it wants is wrapped, now or in a step.
 */
void trc_plan_init(void);

#endif
