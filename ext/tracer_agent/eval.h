/* eval.h: evals (-e, -i, dumps, backtraces, --fork, --memory), each in a Ruby thread of its own. */
#ifndef TRC_EVAL_H
#define TRC_EVAL_H

#include <ruby.h>
#include <stdint.h>

#include "session.h"

/* From Init_: what evals keep from the GC. */
void trc_eval_init(void);
/*
 * GVL held. Runs eval id of kind (enum trc_eval_kind) for session s, text its argument, in a
 * thread of its own, which replies TRC_MSG_EVAL when done; a dump's file is the descriptor the
 * client passed. A refusal (evals disabled, no file) is replied at once.
 */
void trc_eval(struct trc_session *s, uint64_t id, int kind, VALUE text);
/*
 * GVL held. Session `session` (its id) is over: its evals still running are interrupted (nobody
 * will read their answers; a --fork or --memory copy is seen through), and its -i Binding, with
 * the locals its lines made, let go.
 */
void trc_eval_session_end(uint64_t session);
/* GC mark (GVL held): pins what eval jobs keep in C memory, which compaction cannot update. */
void trc_eval_mark(void);

#endif
