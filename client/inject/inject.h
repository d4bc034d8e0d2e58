/* inject.h: loads the agent into a Ruby process that never required it, with data only (issue 27). */
#ifndef TRC_INJECT_H
#define TRC_INJECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agentfile.h"
#include "rubyproc.h"

/* The agent's file name, as it appears in /proc/PID/maps of a process that loaded it. */
#define TRC_INJECT_AGENT "tracer_agent.so"

enum trc_inject_phase {
	TRC_INJECT_QUEUED = 0,  /* the job that loads the agent waits for the VM to run it */
	TRC_INJECT_RAN = 1,     /* the VM ran it: the agent is loading, in a thread of its own */
	TRC_INJECT_LOADED = 2,  /* the agent is in the process: attach as to any */
	TRC_INJECT_FAILED = 3,  /* error says why; nothing was left behind */
};

/*
 * One load, from the first look to the agent in the maps. Caller-allocated, and not moved
 * once started (it holds pointers into itself); fields read-only outside inject.c.
 */
struct trc_inject {
	enum trc_inject_phase phase;
	bool denied;            /* FAILED for want of privileges (exit code 4) */
	bool written;           /* this client wrote the job (and cleans it up) */
	char error[1024];
	struct trc_rubyproc ruby;
	struct trc_agentfile agent;
	char code[PATH_MAX + 32];       /* the job's argument: the loader's path */
	size_t code_len;                /* with its NUL */
	uint64_t code_at;               /* where it is written: libruby's spare bytes */
	int slot;                       /* the job's entry: queue slot, or buffer index */
	int attempts;                   /* jobs written: one more if the VM dropped one */
	int retries;                    /* freezes given up: a thread was inside the job functions */
	int slow_freezes;               /* freezes given up: a thread took too long to stop */
	uint64_t written_ns, ran_ns, woken_ns, retry_ns;
	int wakes;
	bool idle_untouched;    /* idle, but tracer would not wake it: error says why */
	bool busy_in_c;         /* its main thread ran (a long C call?) when last looked at */
	bool starting;          /* its VM was not made yet when last looked at (a young process) */
	bool restart;           /* the retry looks for its Ruby again (it was starting) */
	bool checked;           /* its agent's files and confinement were checked */
	uid_t owner;
	char lib[PATH_MAX];     /* where the agent is (TRACER_AGENT_LIB, or beside tracer) */
	uint64_t frozen_ns;     /* the longest the process was held still, writing the job */
	uint64_t cleanup_ns;    /* and taking it back out */
};

/* --no-inject: only processes that loaded the agent themselves are attached to. */
void trc_inject_set_enabled(bool on);
bool trc_inject_enabled(void);

/* Whether pid has the agent loaded already. Any thread. */
bool trc_inject_loaded(pid_t pid);

/* Whether pid maps a libruby, or runs an executable named ruby*: worth a look for --ps. */
bool trc_inject_candidate(pid_t pid);

/*
 * Starts loading the agent (lib: the directory of tracer_agent.rb; NULL when none was found)
 * into pid: checks the process, its Ruby, the agent's files, then holds every thread still for
 * as long as it takes to write a postponed job that evaluates
 * `Thread.new { require "LIB/tracer_agent" }` and to flag it to the VM. Nothing is written when
 * anything is off. in->phase tells what happened: LOADED (it had the agent already), QUEUED,
 * or FAILED with in->error. Main thread (ptrace).
 */
void trc_inject_start(struct trc_inject *in, pid_t pid, const char *lib);

/*
 * Looks again, every few milliseconds while QUEUED or RAN: whether the job ran, whether the
 * agent is mapped (then takes the job's entry back out), and wakes an idle process the way
 * its Ruby wakes itself. Returns the phase. Main thread.
 */
enum trc_inject_phase trc_inject_poll(struct trc_inject *in);

/* Why a load that is still QUEUED or RAN after secs has not finished: one line, into in->error. */
const char *trc_inject_stalled(struct trc_inject *in, double secs);

#endif
