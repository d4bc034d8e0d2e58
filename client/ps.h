/* ps.h: the processes --ps names: the user's own, matching a regex, with tracer_agent loaded. */
#ifndef TRC_PS_H
#define TRC_PS_H

#include <regex.h>
#include <stddef.h>
#include <sys/types.h>

/* The agent's file name, as it appears in /proc/PID/maps of a process that loaded it. */
#define TRC_PS_AGENT "tracer_agent.so"

/*
 * Lists, in ascending order, every process other than the caller whose real uid is the caller's
 * (any process when the caller is root), whose /proc/PID/cmdline (NULs read as spaces) matches
 * re, and whose /proc/PID/maps mentions TRC_PS_AGENT. Processes that vanish or cannot be read
 * meanwhile are skipped. Returns 0 with *pids (the caller frees it) and *npids set, or -1 with
 * errno when /proc cannot be listed. Main thread.
 */
int trc_ps_find(const regex_t *re, pid_t **pids, size_t *npids);

#endif
