/*
 * progress.h: one line on the terminal while long work goes on in every process: the agent
 * loading, wrappers going in place or coming away, a dump being written, --memory's walk.
 */
#ifndef TRC_PROGRESS_H
#define TRC_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Where the line goes: fd (stderr), drawn only when it is a terminal (-1 or not a terminal:
 * nothing is drawn). Main thread, as is everything here.
 */
void trc_progress_init(int fd);

/*
 * Besides the agent's steps (enum trc_step, from its TRC_MSG_PROGRESS), what the client
 * watches for itself. The line shows the earliest step any process is at, in this order.
 */
enum trc_progress_watch {
	TRC_PROGRESS_LOAD = -1,         /* loading the agent into it: done is ms so far */
	TRC_PROGRESS_DUMP = 3,          /* --heapdump, --shapesdump: done is the bytes written so far */
	TRC_PROGRESS_MEMORY = 4,        /* --memory: its copy walks the heap; done is ms so far */
};

/* Process pid is at step (enum trc_step or trc_progress_watch), done of total (0: none). */
void trc_progress_update(pid_t pid, int step, uint64_t done, uint64_t total);
/* Process pid is done with it (started, detached, or gone). */
void trc_progress_end(pid_t pid);
/* Takes the line off the terminal before something else is printed; the next update redraws. */
void trc_progress_clear(void);

/*
 * The line for the processes' states (pure, for tests): "wrapping 4,600 methods in 4
 * processes: 62%", "writing the dump of 1 process: 534.2 MB", "loading tracer_agent into 2
 * processes: 1.4 s" (the longest so far). Writes at most n bytes (NUL included) into out;
 * returns out.
 */
struct trc_progress_state {
	int step;
	uint64_t done, total;
};
char *trc_progress_line(const struct trc_progress_state *states, size_t nstates, char *out, size_t n);

#endif
