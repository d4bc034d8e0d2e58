/* pace.c: how far apart the steps of putting wrappers in place go (pure: no I/O, no Ruby). */
#include "pace.h"

int
trc_pace_runnable(const char *buf, size_t n)
{
	size_t i = 0;
	long v = 0;
	int field = 0, digits = 0;

	/* Skip three fields and the spaces after each. */
	while (i < n && field < 3) {
		while (i < n && buf[i] != ' ')
			i++;
		while (i < n && buf[i] == ' ')
			i++;
		field++;
	}
	if (field < 3)
		return -1;
	for (; i < n && buf[i] >= '0' && buf[i] <= '9'; i++, digits++) {
		v = v * 10 + (buf[i] - '0');
		if (v > 1000000)
			return -1;
	}
	if (digits == 0 || i >= n || buf[i] != '/')
		return -1;
	return (int)v;
}

uint64_t
trc_pace_gap_us(int idle, int runnable, int cpus, uint64_t spent_us)
{
	/* The reader is one of the runnable: the others want every CPU there is. */
	if (spent_us >= TRC_PACE_BURST_US && runnable > 0 && cpus > 0 && runnable - 1 >= cpus)
		return TRC_PACE_SHARE_US;
	return idle ? TRC_PACE_IDLE_US : TRC_PACE_BUSY_US;
}
