/* command.h: the commands a client may send, and what serves a session's client. */
#ifndef TRC_COMMAND_H
#define TRC_COMMAND_H

#include "session.h"

/*
 * What a session is opened with (control.c): its messages are commands, checked by wire.c and
 * run here (work.c traces and counts, eval.c evaluates), and its timers, close and end are
 * work.c's and eval.c's.
 */
extern const struct trc_session_ops trc_command_ops;

#endif
