/* session.h: one attached client: its socket, the I/O thread that serves it, its buffers. */
#ifndef TRC_SESSION_H
#define TRC_SESSION_H

#include <msgpack.h>
#include <pthread.h>
#include <ruby.h>
#include <stdint.h>
#include <sys/types.h>

#include "hook.h"
#include "ring.h"

/*
 * Two sides serve a session. The I/O thread is a plain native thread, never a Ruby one: it
 * moves events and replies to the client and the client's bytes in, and never needs the GVL,
 * so a process that holds the GVL for long (a long C call, a busy loop) cannot starve it.
 * Everything that needs Ruby (commands, --top snapshots, hooks on and off, the end of the
 * session) is asked for in `want` and done by trc_session_service(), which runs with the GVL
 * wherever control.c gets it first: a postponed job on the thread that runs (a busy process),
 * or the listener thread (an idle one).
 */
struct trc_session {
	int fd;                 /* the client's socket, non-blocking */
	int wake_fd;            /* eventfd that wakes the I/O thread */
	pid_t client_pid;       /* its listener's, as the kernel says (0: in an outer pid namespace) */
	uint64_t id;            /* tells late eval replies of an earlier session apart */
	uint64_t opened_ms;
	pthread_t io;

	/* I/O thread only. */
	msgpack_sbuffer out;
	size_t out_off;
	uint64_t top_next_ms;
	uint64_t window_next_us;        /* TRC_TOP_BY_TIME: the next window edge */
	uint64_t window_seed;

	uint64_t step_next_ms;          /* when to ask for the next install or removal step */

	/* GVL side only. */
	msgpack_unpacker in;
	int hello;              /* the client's hello was accepted (the I/O thread reads it too) */
	int stopped;            /* hooks removed: nothing more reaches the ring */
	void (*installed)(struct trc_session *); /* what to do once the wrappers are in place */
	uint64_t install_start, install_ns;     /* CLOCK_MONOTONIC ns */
	uint64_t progress_at;   /* when the next TRC_MSG_PROGRESS is due */
	uint64_t top_ms;        /* --top: the interval asked for */
	int cfg_read;           /* cfg holds a scope of its own (a trace command came) */
	struct trc_ring ring;
	struct trc_trace_cfg cfg;

	/* Shared, under lock: replies (GVL side -> I/O), the client's bytes (I/O -> GVL side). */
	pthread_mutex_t lock;
	msgpack_sbuffer ctl;
	msgpack_sbuffer inbox;
	int passed_fd;          /* a descriptor the client sent (SCM_RIGHTS) no command took, or -1 */
	int tracing;            /* set with STARTED queued: from then on the ring is sent */

	/* Atomics. */
	unsigned want;          /* enum trc_want: work for the GVL side */
	int counting;           /* --top: snapshots every top_every_ms */
	uint64_t top_every_ms;
	uint32_t window_duty;   /* TRC_TOP_BY_TIME: windows about 1/window_duty of the time; 0: none */
	int window_want;        /* the window the I/O thread last asked for: open (1) or closed;
				 * only the I/O thread writes it */
	int closing;            /* enum trc_close */
	int ending;             /* the GVL side is done: the I/O thread delivers the rest and ends */
	int stepping;           /* wrappers are being put in place or taken away (plan.c) */
	int eager;              /* ... as fast as can be: the program waits for it (tracer --exec) */
	int io_done;            /* the I/O thread has ended */
};

enum trc_close {
	TRC_CLOSE_NONE = 0,
	TRC_CLOSE_DETACH,       /* the client asked: say goodbye, then close */
	TRC_CLOSE_GONE,         /* the client went away, or broke the protocol */
	TRC_CLOSE_EXIT,         /* the process is exiting: flush, then close */
};

enum trc_want {
	TRC_WANT_COMMANDS = 1 << 0,     /* the inbox has bytes */
	TRC_WANT_TOP = 1 << 1,          /* a --top interval is over */
	TRC_WANT_CLOSE = 1 << 2,        /* closing was set */
	TRC_WANT_END = 1 << 3,          /* the I/O thread has ended: free the session */
	TRC_WANT_WINDOW = 1 << 4,       /* a sampling window opens or closes (window_want) */
	TRC_WANT_STEP = 1 << 5,         /* time for the next step of putting wrappers in place */
};

/* GVL held. Serves the client connected on fd (or queues it behind a session that is ending). */
void trc_session_open(int fd, pid_t client_pid);
/* GVL held (control.c's job or listener). Does the work the I/O thread asked for. */
void trc_session_service(void);
/*
 * GVL held. Whether nothing keeps a program started by tracer --exec waiting any more: no
 * session, or its hooks are on (trace or top started), or it is ending.
 */
int trc_session_settled(void);
/* The current session, or NULL. GVL held. */
struct trc_session *trc_session_current(void);
/* GVL held. Asks for the session to close (enum trc_close). */
void trc_session_close(struct trc_session *s, int how);

/*
 * GVL held. The descriptor the client passed (tracer_protocol.h), or -1 if none came: the
 * caller owns it from now on and must close it.
 */
int trc_session_take_fd(struct trc_session *s);

/* GVL held. Sends the --top counts every ms milliseconds from now on. */
void trc_session_count_every(struct trc_session *s, uint64_t ms);
/* GVL held, before trc_session_count_every: allocation windows about 1/duty of the time. */
void trc_session_windows(struct trc_session *s, uint32_t duty);
/* GVL held. STARTED is queued: events may go to the client from now on. */
void trc_session_started(struct trc_session *s);
/*
 * GVL held. The plan (plan.c) has begun: its steps run from now on, paced so that the app keeps
 * the GVL most of the time, and with progress sent to the client; once everything is in
 * place, installed(s) runs. Also when there is nothing to wrap (at once, then).
 */
void trc_session_install(struct trc_session *s, void (*installed)(struct trc_session *));
/* GVL held. The program waits for this session: its wrappers go in place without pauses. */
void trc_session_hurry(struct trc_session *s);
/* GVL held. Whether the wrappers are still being put in place; how long it took, once done. */
int trc_session_installing(const struct trc_session *s);
uint64_t trc_session_install_ns(const struct trc_session *s);

/* GVL held. A reply message: begin locks the control buffer, end unlocks and wakes. */
msgpack_packer *trc_reply_begin(struct trc_session *s);
void trc_reply_end(struct trc_session *s);
void trc_reply_error(struct trc_session *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* What the agent knows of its last session, for TracerAgent.stats. */
struct trc_session_record {
	pid_t client_pid;
	int how;                /* enum trc_close */
	uint64_t events, lost;
	int hooks_left;         /* hooks still installed after it ended: 0 */
};
/* GVL held. The last session that ended; client_pid 0 when none has. */
const struct trc_session_record *trc_session_last(void);
/* GVL held. Times the session's work raised (near the process's memory limit, say). */
uint64_t trc_session_failures(void);
/* GVL held. Sessions served since the process started (or forked). */
uint64_t trc_session_count(void);

/* In a forked child, async-signal-safe: drops the inherited session's file descriptors. */
void trc_session_forked(void);
/* GVL held, in a forked child: frees what the inherited session held. */
void trc_session_forget(void);
/* GVL held, at process exit: flushes the events so far and closes. */
void trc_session_at_exit(void);

#endif
