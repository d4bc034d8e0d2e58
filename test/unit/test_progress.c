/* test_progress.c: the progress line, for every step, one process and several. */
#include "progress.h"
#include "test.h"
#include "tracer_protocol.h"

static const char *
line(const struct trc_progress_state *st, size_t n)
{
	static char out[160];

	return trc_progress_line(st, n, out, sizeof(out));
}

void
test_progress(void)
{
	test_note("the agent's steps: a share of the whole");
	struct trc_progress_state wrap[] = {
		{ TRC_STEP_WRAP, 1000, 4000 }, { TRC_STEP_WRAP, 600, 600 }, { TRC_STEP_REMOVE, 1, 2 },
	};
	test_str("wrapping in two", line(wrap, 2), "wrapping 4,600 methods in 2 processes: 34%");
	test_str("the earliest step shown", line(wrap, 3), "wrapping 4,600 methods in 2 processes: 34%");
	test_str("removing", line(&wrap[2], 1), "removing 2 wrappers from 1 process: 50%");
	struct trc_progress_state find = { TRC_STEP_FIND, 3, 0 };
	test_str("no total yet", line(&find, 1), "finding the app's methods in 1 process: 0%");

	test_note("the client's own: bytes written, seconds so far");
	struct trc_progress_state dump[] = { { TRC_PROGRESS_DUMP, 534200000, 0 }, { TRC_PROGRESS_DUMP, 100000, 0 } };
	test_str("a dump: the bytes of all", line(dump, 2), "writing the dump of 2 processes: 534.3 MB");
	struct trc_progress_state load[] = {
		{ TRC_PROGRESS_LOAD, 1400, 0 }, { TRC_PROGRESS_LOAD, 200, 0 }, { TRC_STEP_WRAP, 1, 10 },
	};
	test_str("loading: the longest, before wrapping", line(load, 3), "loading tracer_agent into 2 processes: 1.4 s");
	struct trc_progress_state memory = { TRC_PROGRESS_MEMORY, 2345, 0 };
	test_str("--memory", line(&memory, 1), "walking the heap of 1 process: 2.3 s");
}
