/* wrap.h: tracing a method by putting a wrapper in its place (lib/tracer_agent/wrap.rb). */
#ifndef TRC_WRAP_H
#define TRC_WRAP_H

#include <ruby.h>
#include <stdint.h>

#include "scope.h"

/* From Init_: TracerAgent.__enter, __leave, __watching, __defined, __bind. */
void trc_wrap_init(VALUE mod);

/*
 * GVL held. Puts a wrapper around owner's method mid, which reports its calls as method m of
 * the tracing that started as generation gen (through its slot: trc_hook_bind), with the -m
 * expressions exprs (an Array of Strings, may be empty) shown at each call. A method already
 * wrapped is left as it is. A wrapper made by an earlier session for the same method,
 * parameters and expressions is put back rather than made again (wrap.rb: kept_name).
 * Returns 0, or -1 with *why set to the reason (a String).
 */
int trc_wrap(VALUE owner, ID mid, uint32_t m, uint64_t gen, VALUE exprs, VALUE *why);
/*
 * GVL held. Traces um, a method no module's table holds any more (a Sinatra route), with a
 * TracePoint targeted at it, as method m of generation gen: owner and mid name it. Undone with
 * the wrappers. Returns 0, or -1 with *why set.
 */
int trc_wrap_detached(VALUE um, VALUE owner, ID mid, uint32_t m, uint64_t gen, VALUE *why);
/*
 * GVL held. Wraps every Ruby method of the app the scope names (not scope->all): those defined
 * in files under its prefixes, less the ignored; their calls report as generation gen's.
 * Returns how many were wrapped.
 */
int trc_wrap_scope(const struct trc_scope *scope, uint64_t gen);
/* GVL held. The same for owner's method mid, just defined: 1 if it was the app's and wrapped. */
int trc_wrap_scope_one(const struct trc_scope *scope, uint64_t gen, VALUE owner, ID mid);
/*
 * GVL held. Removes every wrapper and puts the originals back. The private aliases the
 * wrappers call the originals by stay: a wrapper the app took hold of while traced (a Method
 * object) must go on working.
 */
void trc_unwrap_all(void);
/* GVL held. How many wrappers are in place. */
int trc_wrapped(void);
void trc_wrap_mark(void);

#endif
