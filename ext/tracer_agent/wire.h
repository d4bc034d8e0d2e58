/* wire.h: checks that a message from a client has the shape the protocol gives it; no Ruby. */
#ifndef TRC_WIRE_H
#define TRC_WIRE_H

#include <msgpack.h>
#include <stddef.h>

#include "tracer_protocol.h"

/*
 * The command type of msg (enum trc_cmd) when msg is a well-formed command: the right array
 * length, and every field of the right msgpack type and range. -1 otherwise. Handlers run only
 * on messages that passed, so they read fields without checking them again.
 */
int trc_wire_command(const msgpack_object *msg);

/* Whether the n bytes at buf (the body of a queue message, mtype excluded) are a valid hello. */
int trc_wire_hello(const void *buf, size_t n);

#endif
