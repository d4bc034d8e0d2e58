/* paths.h: --top time's call paths: a fixed table of (caller's path, method) nodes and their self time. */
#ifndef TRC_PATHS_H
#define TRC_PATHS_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "scope.h"

/*
 * A path is a method called from a path (0: from none counted). Its id is its place in the
 * table (1 on), for the session: the client keeps each path once and adds up its figures.
 * The table never grows (the hooks may not allocate): TRC_TOP_MAX_PATHS at most; a call whose
 * path finds no room is its caller's path, so its time still counts, one level up.
 * Everything here runs with the GVL held.
 */

/* Maps the table. -1 with errno (ENOMEM) when it cannot. */
int trc_paths_start(void);
/* Unmaps it; safe when never started. */
void trc_paths_stop(void);
/* The address space the table takes. */
size_t trc_paths_bytes(void);
/* The path of a call of method from parent; parent itself when the table is full. No allocation. */
uint32_t trc_paths_enter(uint32_t parent, uint32_t method);
/* A call on path returned: one more call, and ticks (clock.h) of self time. */
void trc_paths_add(uint32_t path, uint64_t ticks);
/*
 * Packs the paths to report since the last call (tracer_protocol.h: new ones in id order, then
 * those whose figures changed), and clears their figures. scope makes files absolute.
 */
void trc_paths_pack(msgpack_packer *pk, const struct trc_scope *scope);

#endif
