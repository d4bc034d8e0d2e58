/* permit.h: whether this client may ptrace a process, and if not, why and what to do instead. */
#ifndef TRC_PERMIT_H
#define TRC_PERMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The one line every refusal ends with: the way that needs no ptrace. */
#define TRC_PERMIT_INSTEAD "or have the app load the agent itself (require 'tracer_agent')"

/* Writes a refusal's reason into why (n bytes) and returns -1: `return trc_permit_say(...)`. */
int trc_permit_say(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Checks, before touching pid, what the kernel would refuse for PTRACE_MODE_ATTACH: another
 * user's process, a process that is not dumpable, Yama's ptrace_scope. Returns 0 when nothing
 * forbids it as far as can be known, else -1 with why set (one line, what to do instead). pid's
 * owner must be readable (/proc/PID/status). Any thread.
 */
int trc_permit_check(pid_t pid, char *why, size_t whylen);

/*
 * After ptrace or process_vm_readv failed with err on pid: the likeliest reason, from what
 * this process is (root without CAP_SYS_PTRACE, under seccomp) and what pid is (traced by
 * another process). Sets why to one line; returns whether it is a matter of privileges (exit
 * code 4) rather than of the process's state. Any thread.
 */
bool trc_permit_explain(pid_t pid, int err, char *why, size_t whylen);

/* The pid that ptraces pid now (TracerPid), 0 for none, -1 when unknown. */
pid_t trc_permit_tracer(pid_t pid);

/* Whether what ptraces pid now is another tracer (loading the agent too: for milliseconds). */
bool trc_permit_held_by_tracer(pid_t pid);

#endif
