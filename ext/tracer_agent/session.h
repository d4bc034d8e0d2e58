/* session.h: one attached client: its socket, the agent thread that serves it, its buffers. */
#ifndef TRC_SESSION_H
#define TRC_SESSION_H

#include <msgpack.h>
#include <pthread.h>
#include <ruby.h>
#include <sys/types.h>

#include "hook.h"
#include "ring.h"

struct trc_session {
	int fd;                 /* the client's socket, non-blocking */
	int wake_fd;            /* eventfd that wakes the agent thread's poll */
	pid_t client_pid;
	uint64_t id;            /* tells late eval replies of an earlier session apart */
	VALUE thread;           /* the agent thread */

	/* Agent thread only. */
	msgpack_unpacker in;
	msgpack_sbuffer out;
	size_t out_off;
	int hello;              /* the client's hello was accepted */
	int tracing;
	int counting;           /* --top: snapshots every top_every_ms */
	uint64_t top_every_ms, top_next_ms;
	struct trc_ring ring;
	struct trc_trace_cfg cfg;

	/* Replies, from any thread holding the GVL; the agent thread sends them without it. */
	pthread_mutex_t lock;
	msgpack_sbuffer ctl;

	volatile int stop_io;   /* set by the unblocking function */
	volatile int closing;   /* TRC_CLOSE_* */
};

enum trc_close {
	TRC_CLOSE_NONE = 0,
	TRC_CLOSE_DETACH,       /* the client asked: say goodbye, then close */
	TRC_CLOSE_GONE,         /* the client went away, or broke the protocol */
	TRC_CLOSE_EXIT,         /* the process is exiting: flush, then close */
};

/* GVL held (postponed job). Serves the client connected on fd; closes fd when busy. */
void trc_session_open(int fd, pid_t client_pid);
/* The current session, or NULL. GVL held. */
struct trc_session *trc_session_current(void);
/* GVL held. Asks the agent thread to close the session (enum trc_close). */
void trc_session_close(struct trc_session *s, int how);

/* GVL held. Sends the --top counts every ms milliseconds from now on. */
void trc_session_count_every(struct trc_session *s, uint64_t ms);

/* GVL held. A reply message: begin locks the control buffer, end unlocks and wakes. */
msgpack_packer *trc_reply_begin(struct trc_session *s);
void trc_reply_end(struct trc_session *s);
void trc_reply_error(struct trc_session *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* In a forked child, async-signal-safe: drops the inherited session's file descriptors. */
void trc_session_forked(void);
/* GVL held, in a forked child: frees what the inherited session held. */
void trc_session_forget(void);
/* GVL held, at process exit: flushes the events so far and closes. */
void trc_session_at_exit(void);
void trc_session_mark(void);

#endif
