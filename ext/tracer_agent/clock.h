/* clock.h: the traced threads' clock: the CPU's time-stamp counter where the kernel trusts it. */
#ifndef TRC_CLOCK_H
#define TRC_CLOCK_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/*
 * Why: a traced call takes two timestamps, and clock_gettime costs ~20 ns each even through the
 * vDSO, more than the rest of the agent's work per call. The TSC costs a few ns. It is used
 * only where the kernel itself keeps time with it (its clocksource is "tsc": constant, in step
 * across CPUs), and converted to CLOCK_MONOTONIC nanoseconds off the traced thread: by the I/O
 * thread for events, when a table is packed for --top time. Elsewhere, ticks are nanoseconds.
 */
struct trc_clock {
	int tsc;                /* ticks are TSC cycles; else CLOCK_MONOTONIC ns */
	uint64_t tsc0, ns0;     /* a pair read together at process start */
	uint64_t mult;          /* ns per tick, 32.32 fixed point */
};

extern struct trc_clock trc_clock;

/* Any thread: clock id's time in ns (0 if the kernel has no such clock for us). */
static inline uint64_t
trc_clock_read(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t
trc_clock_mono_ns(void)
{
	return trc_clock_read(CLOCK_MONOTONIC);
}

/* Any thread, async-signal-safe: now, in ticks. */
static inline uint64_t
trc_clock_now(void)
{
#if defined(__x86_64__)
	if (trc_clock.tsc)
		return __rdtsc();
#endif
	return trc_clock_mono_ns();
}

/* Any thread: ticks as CLOCK_MONOTONIC ns, a tick count as a duration in ns. */
static inline uint64_t
trc_clock_dur_ns(uint64_t ticks)
{
	if (!trc_clock.tsc)
		return ticks;
	return (uint64_t)(((unsigned __int128)ticks * trc_clock.mult) >> 32);
}

static inline uint64_t
trc_clock_ns(uint64_t ticks)
{
	if (!trc_clock.tsc)
		return ticks;
	return trc_clock.ns0 + trc_clock_dur_ns(ticks - trc_clock.tsc0);
}

/* From Init_: the pair of process start, and whether the TSC can be used at all. */
void trc_clock_init(void);
/*
 * GVL held, when a session starts tracing or counting (no traced call in flight): measures the
 * TSC's rate since process start, or falls back to clock_gettime when too little time has
 * passed to measure it well. ns converts to ticks for thresholds (slow calls).
 */
void trc_clock_calibrate(void);
uint64_t trc_clock_ticks(uint64_t ns);

#endif
