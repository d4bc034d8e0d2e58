/* clock.c: choosing and calibrating the traced threads' clock. */
#include "clock.h"

#include <stdio.h>
#include <string.h>

#define MIN_BASELINE_NS 50000000u       /* 50 ms: below, the rate would be off by ~1e-6 */

struct trc_clock trc_clock;
static int tsc_usable;

/* The kernel keeps time with the TSC only when it found it constant and in step on every CPU. */
static int
kernel_uses_tsc(void)
{
	char name[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");

	if (f == NULL)
		return 0;
	if (fgets(name, sizeof(name), f) == NULL)
		name[0] = 0;
	fclose(f);
	return strncmp(name, "tsc", 3) == 0 && (name[3] == '\n' || name[3] == 0);
}

void
trc_clock_init(void)
{
#if defined(__x86_64__)
	tsc_usable = kernel_uses_tsc();
	trc_clock.tsc0 = __rdtsc();
#endif
	trc_clock.ns0 = trc_clock_mono_ns();
}

void
trc_clock_calibrate(void)
{
#if defined(__x86_64__)
	uint64_t tsc = __rdtsc(), ns = trc_clock_mono_ns();

	trc_clock.tsc = tsc_usable && ns - trc_clock.ns0 >= MIN_BASELINE_NS && tsc > trc_clock.tsc0;
	if (trc_clock.tsc)
		trc_clock.mult = (uint64_t)((((unsigned __int128)(ns - trc_clock.ns0)) << 32) / (tsc - trc_clock.tsc0));
#endif
}

uint64_t
trc_clock_ticks(uint64_t ns)
{
	if (!trc_clock.tsc || trc_clock.mult == 0)
		return ns;
	return (uint64_t)((((unsigned __int128)ns) << 32) / trc_clock.mult);
}
