/* ps.h: the processes --ps names: the user's own, matching a regex, with tracer_agent or a Ruby to load it into. */
#ifndef TRC_PS_H
#define TRC_PS_H

#include <regex.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * The processes --ps names as they come and go (Puma and Passenger spawn, recycle and restart
 * workers): every process other than the caller whose real uid is the caller's (any process
 * when the caller is root), whose /proc/PID/cmdline (NULs read as spaces) matches the regex,
 * and whose /proc/PID/maps mentions TRC_PS_AGENT, or, unless --no-inject, a libruby (or whose
 * executable is named ruby*): the agent is loaded into those (inject.h).
 */
struct trc_ps {
	regex_t re;
	pid_t *known;           /* returned by a scan and not gone since, ascending */
	size_t nknown;
	unsigned scans;         /* done so far: the first takes a process without the agent at any age */
};

/* Compiles the POSIX extended regex. Returns 0, or the regcomp() error (nothing to release). */
int trc_ps_init(struct trc_ps *ps, const char *regex);
void trc_ps_release(struct trc_ps *ps);

/*
 * Scans /proc for the matching processes that no earlier scan returned, in ascending order: a
 * pid comes back only once the process that had it is gone and a new one has it. Processes
 * that vanish or cannot be read meanwhile are skipped. Returns 0 with *fresh (the caller frees
 * it) and *nfresh set, or -1 with errno when /proc cannot be listed. Main thread.
 */
int trc_ps_scan(struct trc_ps *ps, pid_t **fresh, size_t *nfresh);

#endif
