/* command.h: the table of commands a client may send. */
#ifndef TRC_COMMAND_H
#define TRC_COMMAND_H

#include <msgpack.h>
#include <stdint.h>

#include "session.h"

/* GVL held, agent thread. Runs one message from the client; -1 after a protocol error. */
int trc_command_run(struct trc_session *s, const msgpack_object *msg);

/*
 * GVL held. Session `session` (its id) is over: its -i lines still running are interrupted
 * (nobody will read their answers), and its Binding, with the locals its lines made, let go.
 */
void trc_command_session_end(uint64_t session);
/* GC mark (GVL held): pins what eval jobs keep in C memory, which compaction cannot update. */
void trc_command_mark(void);

#endif
