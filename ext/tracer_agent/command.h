/* command.h: the table of commands a client may send. */
#ifndef TRC_COMMAND_H
#define TRC_COMMAND_H

#include <msgpack.h>

#include "session.h"

/* GVL held, agent thread. Runs one message from the client; -1 after a protocol error. */
int trc_command_run(struct trc_session *s, const msgpack_object *msg);

#endif
