/* sample.h: the sampling profiler: every thread's stack, taken where it is, at a set rate. */
#ifndef TRC_SAMPLE_H
#define TRC_SAMPLE_H

#include <msgpack.h>
#include <ruby.h>
#include <signal.h>
#include <stdint.h>

/*
 * How a sample is taken. A native thread of the profiler's own, the sampler, ticks at the
 * rate asked. At each tick it looks at every Ruby thread of the main Ractor:
 *  - the one that holds the GVL (the VM's thread events say which, from Ruby 3.2; before, the
 *    kernel's view of the thread: running) is sent a SIGURG with a value of the profiler's
 *    own (sigqueue), and its handler takes the stack right there with rb_profile_frames: no
 *    safe point, so a long C method gets its own time;
 *  - one without it gets, in wall-clock mode, the stack it had when it let the GVL go (taken
 *    by the thread itself in the VM's SUSPENDED event, at most once a tick), under a
 *    pseudo-frame that says whether it waits for the GVL or is blocked outside Ruby. Such a
 *    thread is never signalled: a blocking system call in a C extension would see EINTR.
 * In CPU mode a thread is sampled when its CPU clock advanced by a tick since its last sample,
 * weighing the CPU time it used. SIGURG, not SIGPROF: the agent's own signal already (its
 * default action, unlike SIGPROF's or a real-time signal's, is to do nothing, so one still on
 * its way when the process execs is harmless), and an app's own profiler keeps SIGPROF.
 *
 * Samples land in a tree of numbered stacks (stacks.h) that the sampler swaps for an empty one
 * every interval, packs (trc_sample_take), and clears; frames are numbered by frames.h and
 * named on the GVL side. The profiler's own time (the handlers', the sampler's, the hooks')
 * is measured, and the rate halved while it exceeds the cap.
 */

enum trc_sample_clock {
	TRC_SAMPLE_CPU = 0,     /* each thread's CPU time */
	TRC_SAMPLE_WALL = 1,    /* every thread at every tick, running or not */
};

/*
 * GVL held. Starts sampling at hz, on clock, packing every interval_ms; cap: the most of the
 * wall time the profiler's own work may take, in millionths (0: no cap). -1 with why set to a
 * sentence when this process cannot be profiled (no memory, YJIT before Ruby 3.3...).
 */
int trc_sample_start(int clock, uint32_t hz, uint64_t interval_ms, uint32_t cap_ppm, const char **why);
/* GVL held. Stops: no signal, hook or thread of the profiler runs after it returns. */
void trc_sample_stop(void);
int trc_sample_running(void);

/*
 * Async-signal-safe: a SIGURG's siginfo. Returns 1 if it was the sampler's tick (handled:
 * nothing else is to be done for it), 0 for any other SIGURG.
 */
int trc_sample_signal(const siginfo_t *info);

/*
 * GVL held. One TRC_MSG_PROFILE: the frames and threads to name since the last one, then the
 * oldest interval the sampler packed (or an empty one); every interval, and at the end
 * (after stop). trc_sample_more says whether another interval waits for a message.
 */
void trc_sample_pack(msgpack_packer *pk);
int trc_sample_more(void);
/* GVL held, after stop and the last pack: the tables go. */
void trc_sample_release(void);

/*
 * GVL held, on the thread it is about: its samples are tagged with text (the request or job
 * it serves) until the matching pop, which gives back the tag before. Nothing while no
 * profile runs.
 */
void trc_sample_tag_push(VALUE text);
void trc_sample_tag_pop(void);

/* From the GC's mark phase. */
void trc_sample_mark(void);
/* In a forked child, async-signal-safe: the parent's sampler does not exist here. */
void trc_sample_forked(void);

#endif
