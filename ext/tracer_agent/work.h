/* work.h: what a session does, from its start to its stop, and everything it holds meanwhile. */
#ifndef TRC_WORK_H
#define TRC_WORK_H

#include <stdint.h>
#include <sys/types.h>

#include "scope.h"
#include "session.h"
#include "trace.h"

/*
 * What sessions set up in the process is held by facilities (work.c says which), each taken by
 * one session at a time, and this module holds all they need: the event ring, the trace's
 * configuration, the --top table, the plan of wrappers, the sampler, and the session's timers.
 * A session asking for a facility another holds is refused, told who holds it and what runs
 * beside it. What trc_work_trace and trc_work_top start, trc_work_close stops and
 * trc_work_end frees, in the same order backwards; the transport (session.c) calls the last
 * two, and trc_work_timer, through the ops command.c gives it.
 */

/* GVL held. Whether session s traces or counts already (or is setting up to). */
int trc_work_busy(const struct trc_session *s);
/*
 * GVL held. Traces for session s what cfg says (copied; its scope is taken over, and released
 * at the end). Replies a TRC_MSG_SPEC for each spec at once, and TRC_MSG_STARTED once every
 * wrapper is in place; until then, a TRC_MSG_PROGRESS now and then. -1 after replying an error
 * when it cannot begin (memory): the session goes on.
 */
int trc_work_trace(struct trc_session *s, const struct trc_trace_cfg *cfg);
/*
 * GVL held. Counts for session s, in mode (enum trc_top_mode) with flags (enum trc_top_flag),
 * and sends the table every interval_ms; sample and cap: as TRC_CMD_TOP's. The scope is taken
 * over. The profile mode runs the sampler (sample.h) instead of hooks.
 * Replies TRC_MSG_STARTED once the counting runs; -1 after replying an error when it cannot.
 */
int trc_work_top(struct trc_session *s, int mode, uint64_t interval_ms, int flags, uint32_t sample,
    uint32_t cap, struct trc_scope *scope);
/* GVL held. The program waits for session s (tracer --exec): wrappers go in place without pauses. */
void trc_work_hurry(struct trc_session *s);

/* The session's ops (session.h), GVL held. */
void trc_work_timer(struct trc_session *s, int id);
void trc_work_close(struct trc_session *s, int how);
void trc_work_end(struct trc_session *s);

/* In a forked child, async-signal-safe: nothing inherited records anything from now on. */
void trc_work_forked(void);
/* GVL held, in a forked child: everything the parent's session had in place goes. */
void trc_work_forget(void);

/* GVL held. Hooks and wrappers in place now, of every session. */
int trc_work_hooks(void);
/* What the agent knows of its last session, for TracerAgent.stats. */
struct trc_work_record {
	pid_t client_pid;       /* 0: no session has ended */
	int how;                /* enum trc_close */
	uint64_t events, lost;
	int hooks_left;         /* hooks still installed after it ended: 0 */
};
const struct trc_work_record *trc_work_last(void);
/* From the GC's mark phase. */
void trc_work_mark(void);

#endif
