/* progress.h: one line on the terminal while wrappers go in place, or come away, in every process. */
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

/* Process pid is at step (enum trc_step), done of total (its TRC_MSG_PROGRESS). */
void trc_progress_update(pid_t pid, int step, uint64_t done, uint64_t total);
/* Process pid is done with it (started, detached, or gone). */
void trc_progress_end(pid_t pid);
/* Takes the line off the terminal before something else is printed; the next update redraws. */
void trc_progress_clear(void);

/*
 * The line for the processes' states (pure, for tests): "wrapping 4,600 methods in 4
 * processes: 62%". Writes at most n bytes (NUL included) into out; returns out.
 */
struct trc_progress_state {
	int step;
	uint64_t done, total;
};
char *trc_progress_line(const struct trc_progress_state *states, size_t nstates, char *out, size_t n);

#endif
