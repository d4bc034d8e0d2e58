/* top.h: counting calls, time, allocations and exceptions in the agent, for the live tables. */
#ifndef TRC_TOP_H
#define TRC_TOP_H

#include <msgpack.h>
#include <ruby.h>
#include <stdint.h>

#include "names.h"
#include "scope.h"

/* The next number of a xorshift64 sequence (*state: not 0); what the sampled tables draw from. */
static inline uint64_t
trc_xorshift(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

/*
 * GVL held (the session's service). Makes ready to count what mode (enum trc_top_mode) counts;
 * nothing is counted before trc_top_go. Rows whose file is out of the scope are not counted.
 * sample > 1 (the allocation modes): the site of about one allocation in sample is looked up
 * and counted as the allocations since the previous one. Takes the scope over (trc_top_stop
 * releases it). -1 with *why set (a static string) when it cannot (memory); -2 when this
 * Ruby has not what the mode needs of the VM (its thread events).
 */
int trc_top_start(int mode, int flags, uint32_t sample, const struct trc_scope *scope, const char **why);
/* The address space a table takes (mapped at trc_top_start). */
size_t trc_top_table_bytes(void);
/*
 * GVL held. For calls and time of the app's methods, the scope whose methods must be wrapped
 * (plan.c), as generation *gen; NULL when the counting needs no wrapper.
 */
const struct trc_scope *trc_top_wrapped(uint64_t *gen);
/*
 * GVL held, once the wrappers are in place: counting begins. Adds the hooks the mode needs:
 * the VM's call hooks when the scope is everything; allocation and raise hooks for the rest.
 */
void trc_top_go(void);
/* GVL held. Removes the hooks and frees the table. */
void trc_top_stop(void);

/*
 * TRC_TOP_BY_TIME: whether this counting samples by time. Its windows' edges are timed by
 * trc_top_window_edge, on the I/O thread (no GVL, no Ruby), which returns the microseconds to
 * the next edge; trc_top_window (GVL held) opens or closes the window as the last edge said.
 */
int trc_top_by_time(void);
uint64_t trc_top_window_edge(void *unused);
void trc_top_window(void);
/* GVL held. Packs one TRC_MSG_TOP with what was counted since the last one, then clears it. */
void trc_top_pack(msgpack_packer *pk);
/* GVL held. How many hooks are installed now. */
int trc_top_installed(void);
/* From the GC's mark phase. */
void trc_top_mark(void);

#endif
