/* ps.h: the processes --ps names: matching a regex, the user's with tracer_agent or a Ruby to load it into, others' with it. */
#ifndef TRC_PS_H
#define TRC_PS_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * The processes --ps names as they come and go (Puma and Passenger spawn, recycle and restart
 * workers): every process other than the caller whose /proc/PID/cmdline (NULs read as spaces)
 * matches the regex and
 *   - that is the user's (its real uid is ps->user: the caller's, or --user's), and whose
 *     /proc/PID/maps mentions TRC_PS_AGENT or, unless --no-inject, that runs Ruby (a libruby,
 *     or an executable named ruby*): the agent is loaded into those (inject.h); or,
 *   - when the caller is root and no --user was given, that is another user's and loaded the
 *     agent itself. Another user's process without it is left alone (counted in left_alone):
 *     root loads the agent only into the processes of the user it names.
 */
struct trc_ps {
	regex_t re;
	uid_t user;             /* whose processes may get the agent */
	bool only_user;         /* --user: that user's processes, no other's */
	pid_t *known;           /* returned by a scan and not gone since, ascending */
	size_t nknown;
	unsigned scans;         /* done so far: the first takes a process without the agent at any age */
	size_t left_alone;      /* the last scan's: other users' matching processes without the agent */
	pid_t left_alone_pid;   /* ...the first of them */
};

/*
 * Compiles the POSIX extended regex, for the processes of user (only_user: no other user's;
 * else, as root, other users' processes that have the agent too). Returns 0, or the regcomp()
 * error (nothing to release).
 */
int trc_ps_init(struct trc_ps *ps, const char *regex, uid_t user, bool only_user);
void trc_ps_release(struct trc_ps *ps);

/*
 * Scans /proc for the matching processes that no earlier scan returned, in ascending order: a
 * pid comes back only once the process that had it is gone and a new one has it. Processes
 * that vanish or cannot be read meanwhile are skipped. Returns 0 with *fresh (the caller frees
 * it) and *nfresh set, or -1 with errno when /proc cannot be listed. Main thread.
 */
int trc_ps_scan(struct trc_ps *ps, pid_t **fresh, size_t *nfresh);

#endif
