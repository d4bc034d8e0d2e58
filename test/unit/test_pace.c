/* test_pace.c: the install's pacing: /proc/loadavg's runnable count, and the gap it gives. */
#include "pace.h"
#include "test.h"

#define LONG TRC_PACE_BURST_US   /* steps past their burst */

static int
runnable(const char *s)
{
	return trc_pace_runnable(s, strlen(s));
}

void
test_pace(void)
{
	test_note("reads the fourth field of /proc/loadavg");
	test_cond("typical line", runnable("0.52 0.58 0.59 3/412 8512\n") == 3);
	test_cond("several digits", runnable("12.00 9.10 8.00 137/2048 1\n") == 137);
	test_cond("zero", runnable("0.00 0.00 0.00 0/88 2900\n") == 0);
	test_cond("without the pid after it", runnable("0.00 0.00 0.00 5/88") == 5);

	test_note("anything else reads as unknown");
	test_cond("empty", runnable("") == -1);
	test_cond("three fields only", runnable("0.52 0.58 0.59") == -1);
	test_cond("three fields and a space", runnable("0.52 0.58 0.59 ") == -1);
	test_cond("no slash", runnable("0.52 0.58 0.59 3 412") == -1);
	test_cond("not a number", runnable("0.52 0.58 0.59 x/412 1") == -1);
	test_cond("a sign", runnable("0.52 0.58 0.59 -3/412 1") == -1);
	test_cond("absurdly large", runnable("0.52 0.58 0.59 99999999999999999999/412 1") == -1);
	test_cond("cut before the slash", trc_pace_runnable("0.52 0.58 0.59 3/412", 16) == -1);

	test_note("the gap: idle, busy, or sharing a busy machine");
	test_cond("idle app, free CPU", trc_pace_gap_us(1, 2, 2, LONG) == TRC_PACE_IDLE_US);
	test_cond("busy app, free CPU", trc_pace_gap_us(0, 2, 2, LONG) == TRC_PACE_BUSY_US);
	test_cond("others take both CPUs", trc_pace_gap_us(1, 3, 2, LONG) == TRC_PACE_SHARE_US);
	test_cond("others take both CPUs, app busy", trc_pace_gap_us(0, 5, 2, LONG) == TRC_PACE_SHARE_US);
	test_cond("one CPU, one other", trc_pace_gap_us(1, 2, 1, LONG) == TRC_PACE_SHARE_US);
	test_cond("many CPUs, few others", trc_pace_gap_us(0, 8, 16, LONG) == TRC_PACE_BUSY_US);
	test_cond("unknown count", trc_pace_gap_us(1, -1, 2, LONG) == TRC_PACE_IDLE_US);
	test_cond("unknown CPUs", trc_pace_gap_us(0, 9, 0, LONG) == TRC_PACE_BUSY_US);

	test_note("a short install keeps its pace on a busy machine");
	test_cond("no CPU spent yet", trc_pace_gap_us(1, 3, 2, 0) == TRC_PACE_IDLE_US);
	test_cond("just under the burst", trc_pace_gap_us(0, 5, 2, TRC_PACE_BURST_US - 1) == TRC_PACE_BUSY_US);
	test_cond("the gaps grow", TRC_PACE_IDLE_US < TRC_PACE_BUSY_US && TRC_PACE_BUSY_US < TRC_PACE_SHARE_US);
}
