/* control.h: how a client gets the agent's attention: SIGURG, the message queue, a postponed job. */
#ifndef TRC_CONTROL_H
#define TRC_CONTROL_H

#include <ruby.h>

/*
 * From Init_, GVL held: installs the SIGURG handler, the fork and exit handlers, and mod's
 * private __service, where the postponed job serves (control.c says why).
 */
void trc_control_init(VALUE mod);
/* GVL held: puts our SIGURG handler back in front after the app trapped URG itself. */
void trc_control_rearm(void);
/*
 * GVL held, as the agent loads (tracer --exec, tracer_protocol.h): connects to the client
 * listening on addr ("@name"), and serves it here until its trace or top command has put the
 * hooks in place, the session has ended, or TRC_CONNECT_WAIT_MS have passed: the program runs
 * no line before. Returns 0, or -1 with errno when there was nobody to connect to.
 */
int trc_control_connect(const char *addr);
/* Queue messages ignored because they were not a well-formed hello. */
unsigned long trc_control_ignored(void);

#endif
