/* freeze.c: PTRACE_SEIZE + PTRACE_INTERRUPT of every thread, waited for; PTRACE_DETACH with their signals. */
#define _GNU_SOURCE
#include "freeze.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#include "xmalloc.h"

#define LAST_WAIT_NS 1000000000u        /* at thaw, for a thread seized but not stopped yet */
#define SIGCHLD_WAIT_NS 1000000         /* between looks, at most: a stop's SIGCHLD ends it */

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The stops are reported with SIGCHLD, waited for with sigtimedwait: blocked meanwhile. What
 * arrives for tracer's own children stays pending and reaches the loop's handler once
 * unblocked: sigtimedwait takes only the instances it wakes on, which only the stops send
 * while a freeze holds SIGCHLD (tracer injects into -p processes only, none its children).
 */
static void
block_sigchld(struct trc_freeze *f)
{
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	f->sigchld_blocked = sigprocmask(SIG_BLOCK, &chld, &f->old_mask) == 0;
}

static void
restore_sigchld(struct trc_freeze *f)
{
	if (f->sigchld_blocked)
		sigprocmask(SIG_SETMASK, &f->old_mask, NULL);
	f->sigchld_blocked = false;
}

static bool
known(const struct trc_freeze *f, pid_t tid)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->t[i].tid == tid)
			return true;
	return false;
}

static void
add(struct trc_freeze *f, pid_t tid)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 16;
		f->t = xreallocarray(f->t, f->cap, sizeof(*f->t));
	}
	f->t[f->n++] = (struct trc_frozen_thread){ .tid = tid };
}

/*
 * Seizes and interrupts the threads of /proc/PID/task not seen yet. Returns how many were new,
 * or -1 with errno. A thread that exits first is skipped (ESRCH); EPERM is an answer.
 */
static int
seize_new(struct trc_freeze *f)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int fresh = 0;
	pid_t tid;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)f->pid);
	if ((d = opendir(path)) == NULL) {
		if (errno == ENOENT)
			errno = ESRCH;
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		tid = (pid_t)strtol(de->d_name, NULL, 10);
		if (tid <= 0 || known(f, tid))
			continue;
		if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0) {
			if (errno == ESRCH)
				continue;
			closedir(d);
			return -1;
		}
		add(f, tid);
		f->t[f->n - 1].held = true;
		if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0 && errno != ESRCH) {
			closedir(d);
			return -1;
		}
		fresh++;
	}
	closedir(d);
	return fresh;
}

/*
 * Waits until thread i reports its stop: the interrupt's (PTRACE_EVENT_STOP), or a signal's,
 * which is kept for the thaw. Returns 1 stopped, 0 gone, -1 with errno.
 */
static int
await_stop(struct trc_freeze *f, size_t i, uint64_t deadline)
{
	struct timespec pause = { 0, SIGCHLD_WAIT_NS };
	sigset_t chld;
	int st;
	pid_t r;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (;;) {
		r = waitpid(f->t[i].tid, &st, __WALL | WNOHANG);
		if (r < 0)
			return errno == ECHILD ? 0 : -1;
		if (r == 0) {
			if (now_ns() > deadline) {
				errno = ETIMEDOUT;
				return -1;
			}
			/*
			 * Asleep until a stop is reported (SIGCHLD, blocked by trc_freeze): the threads
			 * still to stop need a CPU to get there, and on a busy machine polling would take
			 * one from them.
			 */
			(void)sigtimedwait(&chld, NULL, &pause);
			continue;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return 0;
		if (!WIFSTOPPED(st))
			continue;
		/* A signal-delivery-stop: the signal was taken from the thread; it gets it back. */
		if ((st >> 16) == 0 && WSTOPSIG(st) != SIGTRAP)
			f->t[i].sig = WSTOPSIG(st);
		return 1;
	}
}

int
trc_freeze(struct trc_freeze *f, pid_t pid, int timeout_ms)
{
	uint64_t deadline;
	size_t waited = 0;
	int fresh, saved, r;

	memset(f, 0, sizeof(*f));
	f->pid = pid;
	block_sigchld(f);
	deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
	/* Until a pass finds no thread it has not stopped: a stopped thread starts no other. */
	while ((fresh = seize_new(f)) != 0) {
		if (fresh < 0)
			goto fail;
		for (; waited < f->n; waited++) {
			if ((r = await_stop(f, waited, deadline)) < 0)
				goto fail;
			f->t[waited].held = f->t[waited].stopped = r == 1;
			/* Held still from the first stop on (before, every thread ran). */
			if (r == 1 && f->stop_ns == 0)
				f->stop_ns = now_ns();
		}
	}
	if (f->n == 0) {
		errno = ESRCH;
		goto fail;
	}
	restore_sigchld(f);
	return 0;
fail:
	saved = errno;
	trc_thaw(f);
	errno = saved;
	return -1;
}

int
trc_freeze_pc(const struct trc_freeze *f, size_t i, uint64_t *pc)
{
#if defined(__x86_64__)
	struct user_regs_struct regs;

	if (ptrace(PTRACE_GETREGS, f->t[i].tid, NULL, &regs) < 0)
		return -1;
	*pc = regs.rip;
	return 0;
#else
	(void)f, (void)i, (void)pc;
	errno = ENOSYS;
	return -1;
#endif
}

void
trc_thaw(struct trc_freeze *f)
{
	uint64_t deadline = now_ns() + LAST_WAIT_NS;

	block_sigchld(f);
	for (size_t i = 0; i < f->n; i++) {
		/*
		 * Seized, interrupted, not stopped yet (a failure cut the wait short): only a stopped
		 * thread can be let go, and the interrupt cannot be taken back. Its stop comes once
		 * it returns to user space; a thread still in uninterruptible I/O after a second is
		 * let go by the kernel when tracer exits.
		 */
		if (f->t[i].held && !f->t[i].stopped)
			f->t[i].stopped = await_stop(f, i, deadline) == 1;
		if (f->t[i].stopped && ptrace(PTRACE_DETACH, f->t[i].tid, NULL, (void *)(long)f->t[i].sig) < 0)
			(void)0;        /* ESRCH: it exited while held; nothing to let go */
	}
	f->frozen_ns = f->stop_ns ? now_ns() - f->stop_ns : 0;
	restore_sigchld(f);
	free(f->t);
	f->t = NULL;
	f->n = f->cap = 0;
}
