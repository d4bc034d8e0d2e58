/* spec.h: parses -m method specs ("Mod::Class#meth(self, @ivar)") into their protocol parts. */
#ifndef TRC_SPEC_H
#define TRC_SPEC_H

#include <stddef.h>

#include "tracer_protocol.h"

/* All strings are owned by the spec and freed by trc_spec_release(). */
struct trc_spec {
	char *text;             /* the spec as given */
	char *cls;              /* constant path, or NULL for any receiver (TRC_SPEC_ANY) */
	char *method;           /* method name, or NULL for all methods of cls */
	enum trc_spec_kind kind;
	char **exprs;           /* expressions to evaluate at each call, trimmed */
	size_t nexprs;
};

/*
 * Parses text into *s. Returns 0, or -1 with *reason set to a static description of what is
 * wrong (s is then left empty). Accepts Class#meth, Class.meth, A::B#meth, a bare meth, Class#
 * and Class. (all methods), operator names ([] <=> + ...), and an optional trailing
 * "(expr, expr...)" split on top-level commas. Pure.
 */
int trc_spec_parse(struct trc_spec *s, const char *text, const char **reason);
void trc_spec_release(struct trc_spec *s);

#endif
