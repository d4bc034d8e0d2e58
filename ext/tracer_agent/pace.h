/* pace.h: how far apart the steps of putting wrappers in place (or taking them away) go. */
#ifndef TRC_PACE_H
#define TRC_PACE_H

#include <stddef.h>
#include <stdint.h>

/*
 * A step holds the GVL for at most 2 ms. The gap from one step's start to the next's:
 * - TRC_PACE_SHARE_US when the machine's CPUs are all taken by other threads (other workers'
 *   requests, most often) and the steps have had their TRC_PACE_BURST_US: a step there takes a
 *   CPU from a request somewhere, so a long install (a worker's first, which finds the app's
 *   methods among all: Redmine's, 0.3-0.5 s of CPU) takes no more than a tenth of a CPU per
 *   process and waits for the machine, while a short one (a later session's, some 80 ms)
 *   is over before that matters;
 * - TRC_PACE_IDLE_US when the app's own threads left the CPU alone since the last step: the
 *   steps run nearly back to back, leaving the GVL free 1 ms in 3 for a thread that wakes;
 * - TRC_PACE_BUSY_US otherwise: the app keeps the GVL three quarters of the time.
 */
#define TRC_PACE_IDLE_US 3000
#define TRC_PACE_BUSY_US 8000
#define TRC_PACE_SHARE_US 20000
#define TRC_PACE_BURST_US 100000

/*
 * The number of threads the kernel is running or has ready to run, machine-wide: the fourth
 * field of /proc/loadavg ("0.52 0.58 0.59 3/412 8512"), whose n bytes are in buf; -1 when it
 * does not read as one.
 */
int trc_pace_runnable(const char *buf, size_t n);

/*
 * The gap, in microseconds, before the next step: idle says the app's threads left the CPU
 * alone since the last step; runnable is trc_pace_runnable's count read by a thread of our own
 * that is itself running (-1: unknown), cpus the CPUs this process may run on, spent_us the
 * CPU time the steps have taken so far.
 */
uint64_t trc_pace_gap_us(int idle, int runnable, int cpus, uint64_t spent_us);

#endif
