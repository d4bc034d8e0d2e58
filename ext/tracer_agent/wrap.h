/* wrap.h: tracing one C method by putting a wrapper in its place, instead of a global hook. */
#ifndef TRC_WRAP_H
#define TRC_WRAP_H

#include <ruby.h>
#include <stdint.h>

/*
 * GVL held. Replaces owner#mid (a C method) by a wrapper that reports its calls and returns
 * as method m, keeping the original under a hidden alias. -1 when it cannot (a frozen class,
 * too many wrapped methods): the caller then falls back to the global C call hook.
 */
int trc_wrap(VALUE owner, ID mid, uint32_t m);
/* GVL held. Puts every original back, with its visibility. */
void trc_unwrap_all(void);
/* How many methods are wrapped now. */
int trc_wrapped(void);
void trc_wrap_mark(void);

#endif
