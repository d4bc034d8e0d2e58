/* attach.h: the attach handshake of tracer_protocol.h: abstract socket, SysV hello, SIGURG. */
#ifndef TRC_ATTACH_H
#define TRC_ATTACH_H

#include <ev.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "ns.h"
#include "tracer_protocol.h"

enum trc_attach_failure {
	TRC_ATTACH_FAILED = 1,  /* a system call failed: error says which */
	TRC_ATTACH_GONE = 2,    /* the target exited before it connected */
	TRC_ATTACH_DENIED = 3,  /* not allowed to signal the target or enter its namespaces */
};

struct trc_attach;

/*
 * Called from the loop once the attach ends: fd >= 0 is the accepted connection from the
 * target (non-blocking; the callee owns it); fd == -1 means a failure, see a->failure and
 * a->error. Either way the queue and the listening socket are gone by then.
 */
typedef void trc_attach_done_fn(struct trc_attach *a, int fd, void *ctx);

/* Caller-allocated; fields are private to attach.c except failure and error. */
struct trc_attach {
	struct ev_loop *loop;
	pid_t pid;              /* the target, as the client sees it */
	pid_t own_pid;          /* the target, as it sees itself: its queue's key */
	uid_t uid;              /* the target's effective ids, for a root client */
	gid_t gid;
	bool give_away;         /* root client, other user's target: chown the queue */
	struct trc_ns ns;       /* the target's namespaces that are not ours */
	char addr[sizeof(((struct trc_hello *)0)->addr)];      /* "@name" */
	int lfd;                /* listening socket, or -1 */
	int qid;                /* message queue holding our hello, or -1 */
	bool hello_queued;
	ev_io accept_w;
	ev_timer resignal_w;
	trc_attach_done_fn *done;
	void *ctx;
	enum trc_attach_failure failure;
	char error[PATH_MAX + 128];
};

/*
 * What trc_attach_start would refuse before it rings pid (its user namespace does not map
 * ours; its network or IPC namespace cannot be entered), asked before tracer loads the agent
 * into it. Returns 0, or -1 with why set to one line and *denied (exit code 4). Main thread.
 */
int trc_attach_check(pid_t pid, bool *denied, char *why, size_t whylen);

/*
 * Starts attaching to pid: makes the listener in the target's network namespace, queues the
 * hello in its IPC namespace and signals the target, then keeps re-signalling every TRC_RESIGNAL_MS from the loop until the
 * target connects. Returns 0, or -1 with a->failure/a->error set and nothing left behind.
 * There is no timeout here: the caller stops a slow attach with trc_attach_stop(). Main thread.
 */
int trc_attach_start(struct trc_attach *a, struct ev_loop *loop, pid_t pid,
		     trc_attach_done_fn *done, void *ctx);

/*
 * Binds the socket fd to a fresh random abstract name for target (TRC_SOCK_NAME_FMT; 0: none
 * yet), written into addr (size bytes) as "@name", and listens on it. Returns 0, or -1 with
 * errno.
 */
int trc_attach_listen(int fd, pid_t target, char *addr, size_t size);

/* Stops attaching, closes the listener and removes the queue. Safe to repeat. */
void trc_attach_stop(struct trc_attach *a);

#endif
