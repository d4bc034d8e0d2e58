/* session.h: the transport: each attached client, its socket, and the I/O thread that serves it. */
#ifndef TRC_SESSION_H
#define TRC_SESSION_H

#include <msgpack.h>
#include <stdint.h>
#include <sys/types.h>

#include "ring.h"

/*
 * Two sides serve a session. The I/O thread is a plain native thread, never a Ruby one: it
 * moves replies and events to the client and the client's bytes in, keeps the timers, and
 * never needs the GVL, so a process that holds the GVL for long (a long C call, a busy loop)
 * cannot starve it. Everything that needs Ruby is asked for and done by trc_session_service(),
 * which runs with the GVL wherever control.c gets it first: a postponed job on the thread that
 * runs (a busy process), or the listener thread (an idle one). The service calls the ops the
 * session was opened with: the transport knows nothing of what the messages mean.
 */
struct trc_session;

enum trc_close {
	TRC_CLOSE_NONE = 0,
	TRC_CLOSE_DETACH,       /* the client asked: say goodbye, then close */
	TRC_CLOSE_GONE,         /* the client went away, or broke the protocol */
	TRC_CLOSE_EXIT,         /* the process is exiting: flush, then close */
};

#define TRC_SESSION_TIMERS 4

/* What the service calls, GVL held. */
struct trc_session_ops {
	/* A message from the client; -1 closes the session (a protocol error, replied already). */
	int (*message)(struct trc_session *s, const msgpack_object *msg);
	/* Timer id is due (trc_session_timer); several dues between two services are one call. */
	void (*timer)(struct trc_session *s, int id);
	/*
	 * The session closes (enum trc_close): stop what runs, and call trc_session_finish once
	 * nothing more will reach the ring, now or later. Called once.
	 */
	void (*close)(struct trc_session *s, int how);
	/* The I/O thread has ended: free what belongs to the session, which is freed next. */
	void (*end)(struct trc_session *s);
};

/*
 * Sessions served at once: each client its own. What their work may do beside each other is
 * work.c's to say; a client past this many is refused, told which pids hold the process.
 */
#define TRC_SESSIONS_MAX 4

/*
 * GVL held. Serves the client connected on fd with ops, and returns its session; or NULL when
 * it was refused (TRC_SESSIONS_MAX), or queued until a session that is closing has ended.
 * client_pid: its pid as the kernel says (0: in an outer pid namespace).
 */
struct trc_session *trc_session_open(int fd, pid_t client_pid, const struct trc_session_ops *ops);
/* GVL held (control.c's job or listener). Does the work the I/O threads asked for. */
void trc_session_service(void);
/* GVL held. The session in slot i (below TRC_SESSIONS_MAX), or NULL. */
struct trc_session *trc_session_at(int i);
/* GVL held. The session numbered id (trc_session_id), or NULL once it has ended. */
struct trc_session *trc_session_find(uint64_t id);
/* A session's number (tells late replies of an earlier session apart) and client. */
uint64_t trc_session_id(const struct trc_session *s);
pid_t trc_session_client(const struct trc_session *s);
/* GVL held. Asks for the session to close (enum trc_close). */
void trc_session_close(struct trc_session *s, int how);
/* GVL held. The client said hello: it is no more dropped for silence, and may say anything. */
void trc_session_greet(struct trc_session *s);
int trc_session_greeted(const struct trc_session *s);

/* GVL held. A reply message: begin locks the reply buffer, end unlocks and wakes. */
msgpack_packer *trc_reply_begin(struct trc_session *s);
void trc_reply_end(struct trc_session *s);
/* GVL held. A TRC_MSG_ERROR. */
void trc_reply_error(struct trc_session *s, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * GVL held. The descriptor the client passed (tracer_protocol.h), or -1 if none came: the
 * caller owns it from now on and must close it.
 */
int trc_session_take_fd(struct trc_session *s);
/* The eventfd that wakes the I/O thread: the trace's hooks write it when a burst fills a
 * quarter of the ring (trace.c's wake_consumer). */
int trc_session_wake_fd(const struct trc_session *s);

/*
 * GVL held, with STARTED just replied: the session has started, and from now on ring's
 * records (NULL: none) go to the client after it. The ring stays the caller's: it must outlive
 * the I/O thread (ops->end).
 */
void trc_session_started(struct trc_session *s, struct trc_ring *ring);
/*
 * GVL held. Timer id (below TRC_SESSION_TIMERS): from now on the I/O thread asks for
 * ops->timer every period_us; or, with gap, calls gap(arg) when the timer is set and at each
 * due time, on its own thread (no GVL, no Ruby), for the microseconds to the next due time.
 * period_us 0 without gap: the timer stops.
 */
void trc_session_timer(struct trc_session *s, int id, uint64_t period_us, uint64_t (*gap)(void *), void *arg);
/*
 * GVL held. The session's work writes nothing to the ring (--profile: its messages come from
 * its timer): the I/O thread then sleeps until a timer, a command or the end, not every
 * IDLE_MS, sparing a busy app's CPU the wake-ups (each some 60-90 us of CPU on a VM).
 */
void trc_session_quiet(struct trc_session *s);
/* GVL held. Timer id's work once more, as soon as the service can, whatever its period. */
void trc_session_again(struct trc_session *s, int id);
/*
 * GVL held, after ops->close: nothing more reaches the ring. The I/O thread delivers what is
 * left, then the goodbye (a detach), with these totals: events written and events lost (its
 * own losses are added), and the agent's allocations that failed since the session opened.
 */
void trc_session_finish(struct trc_session *s, uint64_t events, uint64_t lost);
/* GVL held, from ops->end: how the session closed (enum trc_close); its events and losses. */
int trc_session_how(const struct trc_session *s);
void trc_session_totals(const struct trc_session *s, uint64_t *events, uint64_t *lost);

/*
 * GVL held. Whether nothing keeps a program started by tracer --exec waiting any more: every
 * session has started, or is closing.
 */
int trc_session_settled(void);
/* GVL held. Times the service raised (near the process's memory limit, say). */
uint64_t trc_session_failures(void);
/* GVL held. Sessions served since the process started (or forked). */
uint64_t trc_session_count(void);

/* In a forked child, async-signal-safe: drops the inherited sessions' file descriptors. */
void trc_session_forked(void);
/* GVL held, in a forked child: frees what the inherited sessions held (ops->end is not called). */
void trc_session_forget(void);
/* GVL held, at process exit: closes each session (ops->close), flushes its events, and lets go. */
void trc_session_at_exit(void);

#endif
