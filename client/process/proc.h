/* proc.h: what kill() and /proc say about a process: alive, gone, or someone else's. */
#ifndef TRC_PROC_H
#define TRC_PROC_H

#include <stdbool.h>
#include <sys/types.h>

enum trc_proc_status {
	TRC_PROC_ALIVE = 0,     /* exists, and this client may signal it */
	TRC_PROC_GONE = 1,      /* does not exist, or is a zombie */
	TRC_PROC_DENIED = 2,    /* belongs to another user and the client is not root */
};

/* Checks pid with kill(pid, 0), its /proc state and its owner. Any thread. */
enum trc_proc_status trc_proc_check(pid_t pid);

/* The effective uid and gid of pid (from /proc/PID/status). Returns 0, or -1 with errno. */
int trc_proc_owner(pid_t pid, uid_t *uid, gid_t *gid);

/*
 * pid as the process sees itself (*inner, the last NSpid field of /proc/PID/status) and how
 * many pid namespaces it is seen in from ours (*levels: 1 in ours, more in a nested one, a
 * container's). Returns 0, or -1 with errno when pid does not exist.
 */
int trc_proc_nspid(pid_t pid, pid_t *inner, int *levels);

/* What /proc/PID/maps shows of the code a process runs. */
enum trc_proc_runtime {
	TRC_PROC_AGENT = 0,     /* the agent's library (TRC_PROC_AGENT_FILE) is mapped */
	TRC_PROC_RUBY = 1,      /* Ruby (libruby, or a ruby executable), without the agent */
	TRC_PROC_OTHER = 2,     /* neither: not a Ruby program */
	TRC_PROC_UNSEEN = 3,    /* the maps cannot be read (gone, or no right to) */
};

/* The agent's file name, as it appears in /proc/PID/maps of a process that loaded it. */
#define TRC_PROC_AGENT_FILE "tracer_agent.so"

/* Reads pid's maps: whether it loaded the agent, or runs Ruby at all. Main thread. */
enum trc_proc_runtime trc_proc_runtime(pid_t pid);

/* Whether pid is a descendant of ancestor (its child, their child...), by /proc's parent pids. */
bool trc_proc_descends(pid_t pid, pid_t ancestor);

/*
 * The child of parent that sees itself as pid inner (the last NSpid field: a process in a
 * container knows its children by their pids in there), as this client sees it; or 0 when
 * parent has no such child. Main thread.
 */
pid_t trc_proc_child(pid_t parent, pid_t inner);

/*
 * The directory of tracer's own binary (/proc/self/exe), made canonical, with rel ("/../lib",
 * "/tracers") after it. Returns a string the caller frees, or NULL when it does not exist.
 */
char *trc_proc_self_path(const char *rel);

#endif
