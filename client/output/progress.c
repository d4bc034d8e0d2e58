/* progress.c: one line on the terminal while long work goes on in every process. */
#include "progress.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdwrite.h"
#include "tracer_protocol.h"
#include "xmalloc.h"

struct entry {
	pid_t pid;
	struct trc_progress_state st;
};

static struct {
	int fd;
	struct entry *entries;
	size_t n, cap;
	bool drawn;
} P = { .fd = -1 };

void
trc_progress_init(int fd)
{
	P.fd = fd >= 0 && isatty(fd) ? fd : -1;
}

/* n with a comma every three digits: 4,600. */
static void
thousands(char *out, size_t size, uint64_t n)
{
	char digits[24];
	int len = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)n), o = 0;

	for (int i = 0; i < len && (size_t)o + 2 < size; i++) {
		if (i > 0 && (len - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = digits[i];
	}
	out[o] = 0;
}

_Static_assert((int)TRC_PROGRESS_LOAD < (int)TRC_STEP_FIND && (int)TRC_STEP_REMOVE < (int)TRC_PROGRESS_DUMP &&
	       TRC_PROGRESS_DUMP < TRC_PROGRESS_MEMORY, "the steps' order is the line's");

/* What each step says; %s is the count of methods or wrappers, with its commas. */
static const char *const what[] = {
	[TRC_PROGRESS_LOAD + 1] = "loading tracer_agent into",
	[TRC_STEP_FIND + 1] = "finding the app's methods in",
	[TRC_STEP_WRAP + 1] = "wrapping %s methods in",
	[TRC_STEP_REMOVE + 1] = "removing %s wrappers from",
	[TRC_PROGRESS_DUMP + 1] = "writing the dump of",
	[TRC_PROGRESS_MEMORY + 1] = "walking the heap of",
};

char *
trc_progress_line(const struct trc_progress_state *states, size_t nstates, char *out, size_t n)
{
	int step = TRC_PROGRESS_MEMORY;
	uint64_t done = 0, total = 0, longest = 0;
	size_t procs = 0;
	char count[32], head[96], tail[48];

	/* The earliest step any process is at is the one shown: the rest wait for it. */
	for (size_t i = 0; i < nstates; i++)
		if (states[i].step < step && states[i].step >= TRC_PROGRESS_LOAD)
			step = states[i].step;
	for (size_t i = 0; i < nstates; i++) {
		if (states[i].step != step)
			continue;
		procs++;
		done += states[i].done < states[i].total || states[i].total == 0 ? states[i].done : states[i].total;
		total += states[i].total;
		if (states[i].done > longest)
			longest = states[i].done;
	}
	thousands(count, sizeof(count), total);
	snprintf(head, sizeof(head), what[step + 1], count);
	if (step == TRC_PROGRESS_DUMP)
		snprintf(tail, sizeof(tail), "%.1f MB", (double)done / 1e6);
	else if (step == TRC_PROGRESS_LOAD || step == TRC_PROGRESS_MEMORY)
		snprintf(tail, sizeof(tail), "%.1f s", (double)longest / 1e3);
	else
		snprintf(tail, sizeof(tail), "%llu%%", total ? (unsigned long long)(done * 100 / total) : 0ull);
	snprintf(out, n, "%s %zu process%s: %s", head, procs, procs == 1 ? "" : "es", tail);
	return out;
}

static void
draw(void)
{
	struct trc_progress_state *states;
	char line[160], buf[200];
	int len;

	if (P.fd < 0)
		return;
	if (P.n == 0) {
		trc_progress_clear();
		return;
	}
	states = xreallocarray(NULL, P.n, sizeof(*states));
	for (size_t i = 0; i < P.n; i++)
		states[i] = P.entries[i].st;
	trc_progress_line(states, P.n, line, sizeof(line));
	free(states);
	len = snprintf(buf, sizeof(buf), "\r\033[K%s", line);
	trc_write_all(P.fd, buf, (size_t)len);
	P.drawn = true;
}

static struct entry *
find(pid_t pid)
{
	for (size_t i = 0; i < P.n; i++)
		if (P.entries[i].pid == pid)
			return &P.entries[i];
	return NULL;
}

void
trc_progress_update(pid_t pid, int step, uint64_t done, uint64_t total)
{
	struct entry *e = find(pid);

	if (step < TRC_PROGRESS_LOAD || step > TRC_PROGRESS_MEMORY)
		return;
	if (e == NULL) {
		if (P.n == P.cap) {
			P.cap = P.cap ? P.cap * 2 : 8;
			P.entries = xreallocarray(P.entries, P.cap, sizeof(*P.entries));
		}
		e = &P.entries[P.n++];
		e->pid = pid;
	}
	e->st.step = step;
	e->st.done = done;
	e->st.total = total;
	draw();
}

void
trc_progress_end(pid_t pid)
{
	struct entry *e = find(pid);

	if (e == NULL)
		return;
	*e = P.entries[--P.n];
	draw();
}

void
trc_progress_clear(void)
{
	if (P.fd >= 0 && P.drawn)
		trc_write_all(P.fd, "\r\033[K", 4);
	P.drawn = false;
}
