/* spec.h: parses -m method specs ("Mod::Class#meth(self, @ivar)") into their protocol parts. */
#ifndef TRC_SPEC_H
#define TRC_SPEC_H

#include <stdbool.h>
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
	bool optional;          /* from a tracer file (-c): matching nothing is no error */
};

/*
 * Parses text into *s. Returns 0, or -1 with *reason set to a static description of what is
 * wrong (s is then left empty). Accepts Class#meth, Class.meth, A::B#meth, a bare meth, Class#
 * and Class. (all methods), operator names ([] <=> + ...), and an optional trailing
 * "(expr, expr...)" split on top-level commas. Pure.
 */
int trc_spec_parse(struct trc_spec *s, const char *text, const char **reason);
void trc_spec_release(struct trc_spec *s);

/*
 * A tracer file (-c): one method spec per line, as -m takes them; blank lines and lines whose
 * first non-blank character is '#' are skipped, and the blanks around a spec are trimmed.
 * Finds the next spec in text[0..len) from *pos on: *start and *n say where it is, *line its
 * line number (*pos 0 and *line 0 to begin). Returns false when there is none left. Pure.
 */
bool trc_spec_next_line(const char *text, size_t len, size_t *pos, unsigned *line,
			const char **start, size_t *n);

/*
 * Whether the spec names an operation Ruby's VM runs without a method call while nobody has
 * redefined it (Integer#+, Array#[], Hash#[]=...): wrapping one makes the VM take the slow
 * path for it for the life of the process. A bare name or Class# counts if it covers one.
 */
bool trc_spec_basic_op(const struct trc_spec *sp);

#endif
