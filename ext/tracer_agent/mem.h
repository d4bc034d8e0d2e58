/* mem.h: the agent's memory: allocations whose failure is counted, and room under RLIMIT_AS. */
#ifndef TRC_MEM_H
#define TRC_MEM_H

#include <stddef.h>
#include <stdint.h>

/*
 * The agent's allocation policy: every allocation is checked, and a failure is never the host's
 * crash. What cannot get memory does without (an event, a method, a session), counts it here,
 * and says so to the client where it can (the session is refused, an event counts as lost).
 * Any thread, async-signal-unsafe (they call malloc).
 */
void *trc_malloc(size_t n);
void *trc_calloc(size_t count, size_t size);
void *trc_realloc(void *p, size_t n);
char *trc_strdup(const char *s);
char *trc_strndup(const char *s, size_t n);
/* The n bytes at s, NULs and all, and a NUL after them. */
char *trc_memdup(const char *s, size_t n);
/* Allocations that failed since the process started (TracerAgent.stats). */
uint64_t trc_mem_failures(void);
/* One more, made by a library on our behalf (msgpack-c's buffers). */
void trc_mem_failed(void);

/*
 * How many bytes of address space the process may still map under its RLIMIT_AS (ulimit -v),
 * less a reserve the app keeps for itself (TRC_MEM_RESERVE); SIZE_MAX without a limit. What
 * a session maps (its event ring, its table) must fit in it: a process near its limit would
 * otherwise fail its own next allocation, which Ruby cannot always raise (it dies).
 */
#define TRC_MEM_RESERVE (32u << 20)
size_t trc_mem_room(void);

#endif
