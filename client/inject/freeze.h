/* freeze.h: every thread of a process held still with ptrace, for a read-modify-write, then let go. */
#ifndef TRC_FREEZE_H
#define TRC_FREEZE_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

struct trc_frozen_thread {
	pid_t tid;
	int sig;                /* a signal that arrived while it stopped: delivered at thaw */
	bool held;              /* seized (false: it exited meanwhile) */
	bool stopped;           /* its stop was reported: it can be let go */
};

/* Caller-allocated; fields are read-only outside freeze.c. */
struct trc_freeze {
	pid_t pid;
	struct trc_frozen_thread *t;
	size_t n, cap;
	uint64_t stop_ns;       /* CLOCK_MONOTONIC when the first thread was seen stopped */
	uint64_t frozen_ns;     /* from then until the last one was let go (set by trc_thaw) */
	sigset_t old_mask;      /* while SIGCHLD is blocked (it reports the stops) */
	bool sigchld_blocked;
};

/*
 * Stops every thread of pid: PTRACE_SEIZE and PTRACE_INTERRUPT each one in /proc/PID/task, then
 * again for any it started meanwhile, until none is new. No signal is sent and none is lost: a
 * signal that reaches a thread while it stops is delivered when it is let go. Returns 0 with
 * every thread stopped; or -1 with errno, and nothing held: EPERM (not allowed, or another
 * tracer holds it), ESRCH (gone), ETIMEDOUT (a thread did not stop within timeout_ms: in
 * uninterruptible I/O, say). Main thread of the client: ptrace belongs to the thread that
 * attached.
 */
int trc_freeze(struct trc_freeze *f, pid_t pid, int timeout_ms);

/* The instruction pointer of thread i (x86-64: rip). Returns 0, or -1 with errno. */
int trc_freeze_pc(const struct trc_freeze *f, size_t i, uint64_t *pc);

/* Lets every thread go (PTRACE_DETACH, with its pending signal), sets frozen_ns, frees f->t. */
void trc_thaw(struct trc_freeze *f);

#endif
