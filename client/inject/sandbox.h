/* sandbox.h: what confines a process and would break the agent in it, read before tracer touches it. */
#ifndef TRC_SANDBOX_H
#define TRC_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum trc_sandbox_for {
	TRC_SANDBOX_LOAD,       /* tracer loads the agent, then attaches */
	TRC_SANDBOX_ATTACH,     /* the process loaded the agent itself: tracer rings it */
};

/*
 * Whether the agent can do its work in pid without breaking it: its threads' seccomp filters
 * (each thread's chain, read with PTRACE_SECCOMP_GET_FILTER while the process is held still,
 * and run on every call the agent makes: seccomp.c), strict seccomp, its user's process limit
 * (RLIMIT_NPROC: the agent's threads) and its descriptor limit (RLIMIT_NOFILE). A filter that
 * cannot be read (tracer is no root with CAP_SYS_ADMIN) refuses the process. Returns 0, or -1
 * with why set to one line and *denied true when tracer's privileges are what is missing (exit
 * code 4). *held_ns: how long the process was held still to read its filters (0: not held).
 * Main thread (ptrace).
 */
int trc_sandbox_check(pid_t pid, enum trc_sandbox_for what, uint64_t *held_ns, bool *denied, char *why,
		      size_t whylen);

/*
 * After a load or an attach that did not finish: whether a limit reached since the check
 * explains it (the process's threads or descriptors), as one line into why; or -1 when none
 * does. Any thread.
 */
int trc_sandbox_explain(pid_t pid, char *why, size_t whylen);

#endif
