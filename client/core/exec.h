/* exec.h: tracer --exec: starts the program with the agent preloaded and takes its connections. */
#ifndef TRC_EXEC_H
#define TRC_EXEC_H

#include <ev.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "tracer_protocol.h"

struct trc_exec;

/*
 * The program, or a process it started, connected (tracer_protocol.h, "Starting the target"):
 * pid is who; fd is non-blocking, and the callee's to keep or close.
 */
typedef void trc_exec_connected_fn(struct trc_exec *x, int fd, pid_t pid, void *ctx);
/* The program has ended: x->status holds its wait status. */
typedef void trc_exec_exited_fn(struct trc_exec *x, void *ctx);

/* Caller-allocated; fields are private to exec.c except pid, exec_failed, exited, status and
 * error. */
struct trc_exec {
	struct ev_loop *loop;
	pid_t pid;              /* the program, once started */
	int lfd;                /* listening socket, or -1 */
	char addr[sizeof(((struct trc_hello *)0)->addr)];      /* "@name" */
	sigset_t mask;          /* tracer's signal mask before libev changed it: the program's */
	ev_io accept_w;
	ev_child child_w;
	bool exec_failed;       /* the program could not be run: error says why */
	bool exited;
	int status;             /* as waitpid() gives it, once exited */
	trc_exec_connected_fn *connected;
	trc_exec_exited_fn *on_exit;
	void *ctx;
	char error[512];
};

/* Before the event loop exists (libev may block signals for its own use). Main thread. */
void trc_exec_init(struct trc_exec *x);

/*
 * Starts argv[0] (looked up in PATH) with argv, on the default loop, with the agent preloaded:
 * RUBYLIB gains agent_lib (NULL: none, Ruby finds an installed tracer_agent gem) and RUBYOPT
 * -rtracer_agent. With connect, the program also finds the address to connect to as it loads
 * (TRC_CONNECT_ENV); its connections come to connected, and its end to on_exit. Returns 0, or
 * -1 with errno and x->error when the program could not be run (ENOENT: no such command).
 * Main thread.
 */
int trc_exec_start(struct trc_exec *x, struct ev_loop *loop, char *const argv[],
		   const char *agent_lib, bool connect, trc_exec_connected_fn *connected,
		   trc_exec_exited_fn *on_exit, void *ctx);

/* Takes no more connections: the name is freed, and a program that connects now runs on
 * untraced. Safe to repeat. */
void trc_exec_stop_listening(struct trc_exec *x);

/* Sends sig to the program, unless it has ended. */
void trc_exec_signal(struct trc_exec *x, int sig);

/* The program's end as a shell's $? says it: its exit status, or 128 + the signal that killed
 * it. */
int trc_exec_code(const struct trc_exec *x);

/*
 * Where the agent's Ruby files are: $TRACER_AGENT_LIB, else the first of these that holds
 * tracer_agent.rb, from the directory of tracer's own binary: ../lib (the source tree:
 * client/tracer and lib/), ../lib/tracer (make install's PREFIX/bin/tracer and
 * PREFIX/lib/tracer); else NULL (an installed gem, if any). The caller frees it.
 */
char *trc_exec_agent_lib(void);

#endif
