/* repl.h: -i: lines typed at a prompt (libedit) or read from a pipe, each run in one process. */
#ifndef TRC_REPL_H
#define TRC_REPL_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "output.h"
#include "session.h"

struct trc_repl;

/*
 * A REPL on stdin for process pid: values go to out ("=> inspect"), exceptions to stderr
 * ("Class: message"). On a terminal, lines are edited with libedit and remembered in
 * ~/.tracer_history; otherwise they are read as they come, without a prompt. Nothing is read
 * before trc_repl_start. The caller frees it. Main thread; one at a time (libedit has one state).
 */
struct trc_repl *trc_repl_new(struct ev_loop *loop, struct trc_output *out, pid_t pid);

/* The session is attached (its ready callback): the first prompt. */
void trc_repl_start(struct trc_repl *r, struct trc_session *s);

/* The session's answer to the question the REPL asked (its answer callback). */
void trc_repl_answer(struct trc_repl *r, bool ok, const char *text, size_t len);

/*
 * Ctrl+C: abandons the line being typed, or interrupts the lines running in the process.
 * Returns false when it did neither (not attached yet, input not from a terminal, or lines
 * interrupted already still running): the caller then stops as for any signal.
 */
bool trc_repl_interrupt(struct trc_repl *r);

/* Puts the terminal back as it was, saves the history, frees r. */
void trc_repl_free(struct trc_repl *r);

#endif
