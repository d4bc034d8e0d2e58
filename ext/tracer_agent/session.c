/* session.c: the transport: a client's socket, the native I/O thread, and the work it hands the GVL side. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* POLLRDHUP, pthread_timedjoin_np, pthread_setname_np */
#endif
#include "session.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ruby.h>
#include <ruby/thread.h>

#include "encode.h"
#include "mem.h"
#include "vm.h"
#include "tracer_protocol.h"

/*
 * How long the I/O thread sleeps when nothing wakes it: a command, a reply, a timer, the end,
 * or a quarter of the ring filled by a burst (trace.c) wakes it at once. A wake-up costs some
 * 60 us of CPU on an idle VM, and the client wakes for each batch too: at 10 ms, the I/O
 * threads of four Redmine workers under -f took 171-204 ms of CPU in 5 s, 62-76 ms at 50 ms
 * (docs/performance.md). So events wait in the ring up to EVENTS_MS while they flow, and an
 * idle session sleeps IDLE_MS; only work the GVL side was asked for and has not done yet is
 * asked for again every POLL_MS (the thread a postponed job went to may have gone to sleep).
 */
#define POLL_MS 10
#define EVENTS_MS 50
#define IDLE_MS 100
#define QUIET_MS 1000           /* a session whose work uses no ring (trc_session_quiet) */
#define OUT_HIGH (1u << 20)     /* encode no further ahead of the socket than this */
#define ENCODE_SLICE (64u << 10) /* ring bytes encoded before they are handed back */
#define IN_MAX TRC_MAX_MESSAGE   /* largest command a client may send */
#define GOODBYE_MS 2000         /* how long an exiting process waits for the rest to go out */
#define GOODBYE_EVENTS_MS (TRC_DETACH_MS / 2) /* how long a detach delivers events; then they
					       * count as lost */
#define GOODBYE_STALL_MS 5000   /* how long a detach waits on a client that reads nothing */
#define READ_CHUNK 65536
#define IO_STACK (256u << 10)
#define PASS_MAX 4              /* descriptors one read takes in (all but one are closed) */

/* A timer (trc_session_timer): set on the GVL side, under the lock; kept by the I/O thread. */
struct timer {
	uint64_t period_us;
	uint64_t (*gap)(void *);
	void *arg;
	unsigned set;           /* bumped at each change */
	/* I/O thread only. */
	unsigned seen;          /* the last change it took in */
	int on;
	uint64_t (*io_gap)(void *);
	void *io_arg;
	uint64_t io_period_us;
	uint64_t due_us;
};

struct trc_session {
	int fd;                 /* the client's socket, non-blocking */
	int wake_fd;            /* eventfd that wakes the I/O thread */
	pid_t client_pid;       /* its listener's, as the kernel says (0: in an outer pid namespace) */
	uint64_t id;            /* tells late replies of an earlier session apart */
	uint64_t opened_ms;
	const struct trc_session_ops *ops;
	pthread_t io;

	/* I/O thread only. */
	msgpack_sbuffer out;
	size_t out_off;
	int flowing;            /* events were encoded since the thread last slept */
	int quiet;              /* nothing reaches the ring: sleep until a timer (trc_session_quiet) */

	/* GVL side only. */
	msgpack_unpacker in;
	int close_told;         /* ops->close was called */

	/* Shared, under lock. */
	pthread_mutex_t lock;
	msgpack_sbuffer ctl;    /* replies (GVL side -> I/O) */
	size_t reply_start;     /* where the reply being built began in ctl */
	int reply_failed;       /* ... and whether a write of it failed */
	msgpack_sbuffer inbox;  /* the client's bytes (I/O -> GVL side) */
	int passed_fd;          /* a descriptor the client sent (SCM_RIGHTS) no command took, or -1 */
	int started;            /* STARTED is queued: from then on ring's records go out */
	struct trc_ring *ring;
	struct timer timers[TRC_SESSION_TIMERS];

	/* Written before ending is set, read after. */
	uint64_t events, lost;
	uint64_t nomem_at_open;         /* trc_mem_failures() then */

	/* Atomics. */
	unsigned want;          /* enum want: work for the GVL side */
	int hello;              /* the client's hello was accepted */
	int closing;            /* enum trc_close */
	int ending;             /* the GVL side is done: the I/O thread delivers the rest and ends */
	int io_done;            /* the I/O thread has ended */
};

enum want {
	WANT_COMMANDS = 1 << 0,         /* the inbox has bytes */
	WANT_CLOSE = 1 << 1,            /* closing was set */
	WANT_END = 1 << 2,              /* the I/O thread has ended: free the session */
	WANT_TIMER = 1 << 8,            /* timer i is due: WANT_TIMER << i */
};

/*
 * The sessions served now, each with its own socket, I/O thread, buffers and timers: what they
 * may do beside each other is work.c's to say (its facilities). A slot is freed once the
 * session has ended (end()).
 */
static struct trc_session *sessions[TRC_SESSIONS_MAX];
/*
 * Clients that came while a session was closing: each waits until no session is closing, so
 * that what the closing one held (wrappers being taken away) is free for it, as a client that
 * attaches right after another detached expects.
 */
static struct {
	int fd;
	pid_t pid;
	const struct trc_session_ops *ops;
} waiting[TRC_SESSIONS_MAX];
static int nwaiting;
static struct trc_session *serving;     /* the session service_loop works for */
static uint64_t next_id = 1;
static uint64_t served;
static uint64_t service_failures;       /* service raised (trc_session_service) */

static struct trc_session *session_start(int fd, pid_t client_pid, const struct trc_session_ops *ops);

struct trc_session *
trc_session_at(int i)
{
	return i >= 0 && i < TRC_SESSIONS_MAX ? sessions[i] : NULL;
}

struct trc_session *
trc_session_find(uint64_t id)
{
	for (int i = 0; i < TRC_SESSIONS_MAX; i++)
		if (sessions[i] != NULL && sessions[i]->id == id)
			return sessions[i];
	return NULL;
}

uint64_t
trc_session_id(const struct trc_session *s)
{
	return s->id;
}

pid_t
trc_session_client(const struct trc_session *s)
{
	return s->client_pid;
}

int
trc_session_wake_fd(const struct trc_session *s)
{
	return s->wake_fd;
}

uint64_t
trc_session_count(void)
{
	return served;
}

static uint64_t
us_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint64_t
ms_now(void)
{
	return us_now() / 1000;
}

static int
load(const int *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void
wake(struct trc_session *s)
{
	uint64_t one = 1;
	if (s->wake_fd >= 0 && write(s->wake_fd, &one, sizeof(one)) < 0)
		(void)0;        /* EAGAIN: the counter is full, the thread will look anyway */
}

/* Any thread: asks the GVL side for work (enum trc_want). */
static void
ask(struct trc_session *s, unsigned what)
{
	__atomic_fetch_or(&s->want, what, __ATOMIC_ACQ_REL);
	trc_vm_poke();
}

void
trc_session_close(struct trc_session *s, int how)
{
	int was = TRC_CLOSE_NONE;

	/* The first reason stands, except GONE: with nobody left to talk to, nothing is delivered. */
	if (!__atomic_compare_exchange_n(&s->closing, &was, how, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
	    how == TRC_CLOSE_GONE)
		__atomic_store_n(&s->closing, how, __ATOMIC_RELEASE);
	ask(s, WANT_CLOSE);
}

/*
 * A reply's bytes go into ctl whole or not at all: a write that fails for want of memory
 * (msgpack-c's realloc) would otherwise leave half a message in the stream. The reply is then
 * dropped and counted (mem.h).
 */
static int
reply_write(void *data, const char *buf, size_t len)
{
	struct trc_session *s = data;

	if (s->reply_failed || msgpack_sbuffer_write(&s->ctl, buf, len) != 0) {
		s->reply_failed = 1;
		return -1;
	}
	return 0;
}

msgpack_packer *
trc_reply_begin(struct trc_session *s)
{
	static msgpack_packer pk;       /* GVL held: one reply is built at a time */
	pthread_mutex_lock(&s->lock);
	s->reply_start = s->ctl.size;
	s->reply_failed = 0;
	msgpack_packer_init(&pk, s, reply_write);
	return &pk;
}

void
trc_reply_end(struct trc_session *s)
{
	if (s->reply_failed) {
		s->ctl.size = s->reply_start;
		trc_mem_failed();
	}
	pthread_mutex_unlock(&s->lock);
	wake(s);
}

void
trc_reply_error(struct trc_session *s, int code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	msgpack_packer *pk;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pk = trc_reply_begin(s);
	trc_encode_error(pk, code, msg);
	trc_reply_end(s);
}

void
trc_session_greet(struct trc_session *s)
{
	__atomic_store_n(&s->hello, 1, __ATOMIC_RELEASE);
}

int
trc_session_greeted(const struct trc_session *s)
{
	return load(&s->hello);
}

void
trc_session_started(struct trc_session *s, struct trc_ring *ring)
{
	pthread_mutex_lock(&s->lock);
	s->started = 1;
	s->ring = ring;
	pthread_mutex_unlock(&s->lock);
	wake(s);
}

void
trc_session_timer(struct trc_session *s, int id, uint64_t period_us, uint64_t (*gap)(void *), void *arg)
{
	struct timer *t = &s->timers[id];

	pthread_mutex_lock(&s->lock);
	t->period_us = period_us;
	t->gap = gap;
	t->arg = arg;
	t->set++;
	pthread_mutex_unlock(&s->lock);
	wake(s);
}

void
trc_session_again(struct trc_session *s, int id)
{
	ask(s, WANT_TIMER << id);
}

void
trc_session_finish(struct trc_session *s, uint64_t events, uint64_t lost)
{
	if (load(&s->ending))
		return;
	s->events = events;
	s->lost = lost;
	__atomic_store_n(&s->ending, 1, __ATOMIC_RELEASE);
	wake(s);
}

int
trc_session_how(const struct trc_session *s)
{
	return load(&s->closing);
}

void
trc_session_totals(const struct trc_session *s, uint64_t *events, uint64_t *lost)
{
	*events = s->events;
	*lost = s->lost;
}

/* ---- the I/O thread: no GVL, no Ruby ---- */

/*
 * Moves replies, then events, into the output buffer; with drop, the events are counted as lost
 * instead. Returns 1 if events remain.
 */
static int
fill(struct trc_session *s, int drop)
{
	msgpack_packer pk;
	const unsigned char *p;
	size_t n;
	struct trc_ring *ring;

	pthread_mutex_lock(&s->lock);
	/* Whole replies, or none: without the memory, they are dropped, and counted. */
	if (s->ctl.size != 0) {
		if (msgpack_sbuffer_write(&s->out, s->ctl.data, s->ctl.size) != 0)
			trc_mem_failed();
		s->ctl.size = 0;
	}
	/* Read under the lock that queued STARTED: no event reaches the client before it. */
	ring = s->started ? s->ring : NULL;
	pthread_mutex_unlock(&s->lock);
	if (ring == NULL)
		return 0;
	msgpack_packer_init(&pk, &s->out, trc_encode_write);
	/*
	 * A slice at a time: the traced threads get the room back as it is encoded, not once the
	 * whole backlog is (up to the ring's 16 MiB, tens of milliseconds during which a flood
	 * found the ring full).
	 */
	while ((drop || s->out.size < OUT_HIGH) && (n = trc_ring_peek(ring, &p)) != 0) {
		if (n > ENCODE_SLICE)
			n = ENCODE_SLICE;
		trc_ring_consume(ring, drop ? trc_encode_drop(p, n) : trc_encode_records(&pk, p, n));
		s->flowing = 1;
	}
	return trc_ring_used(ring) != 0;
}

/* Writes what it can; -1 when the client is gone, else the number of bytes written. */
static ssize_t
flush(struct trc_session *s)
{
	size_t from = s->out_off, sent;

	while (s->out_off < s->out.size) {
		ssize_t n = send(s->fd, s->out.data + s->out_off, s->out.size - s->out_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return (ssize_t)(s->out_off - from);
			return -1;
		}
		s->out_off += (size_t)n;
	}
	sent = s->out_off - from;
	s->out.size = 0;
	s->out_off = 0;
	return (ssize_t)sent;
}

/* Keeps fd as the session's passed descriptor if it has none yet; closes it otherwise. */
static void
keep_fd(struct trc_session *s, int fd)
{
	pthread_mutex_lock(&s->lock);
	if (s->passed_fd < 0) {
		s->passed_fd = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&s->lock);
	if (fd >= 0)
		close(fd);
}

/* Every descriptor that came with the bytes just read (SCM_RIGHTS): one is kept, the rest closed. */
static void
take_fds(struct trc_session *s, struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			keep_fd(s, fd);
		}
	}
}

/*
 * Reads what the client sent into the inbox; 1 if there is something, 0 if not, -1 at EOF.
 * recvmsg, not read: a descriptor passed with the bytes would otherwise be dropped by the
 * kernel. It arrives with the first byte of its message, so it is kept before the GVL side can
 * see that message. Descriptors beyond PASS_MAX in one read are closed by the kernel
 * (MSG_CTRUNC); MSG_CMSG_CLOEXEC keeps them out of anything the app execs meanwhile.
 */
static int
receive(struct trc_session *s)
{
	char buf[READ_CHUNK];
	union {
		struct cmsghdr align;
		char bytes[CMSG_SPACE(PASS_MAX * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.bytes,
			     .msg_controllen = sizeof(ctl.bytes) };
	ssize_t n = recvmsg(s->fd, &mh, MSG_CMSG_CLOEXEC);
	int ok;

	if (n > 0)
		take_fds(s, &mh);
	if (n == 0)
		return -1;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	pthread_mutex_lock(&s->lock);
	/* A command cut for want of memory would be misread: the session ends instead. */
	ok = s->inbox.size + (size_t)n <= IN_MAX;
	if (ok && msgpack_sbuffer_write(&s->inbox, buf, (size_t)n) != 0) {
		trc_mem_failed();
		ok = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return ok ? 1 : -1;
}

static void
drain_wake(struct trc_session *s)
{
	uint64_t junk;
	if (read(s->wake_fd, &junk, sizeof(junk)) < 0)
		(void)0;        /* EAGAIN: nothing was pending */
}

/*
 * The timers: takes in what the GVL side changed, asks for the work of those that are due, and
 * returns the microseconds until the next one is (-1: none is on).
 */
static int64_t
timers_tick(struct trc_session *s)
{
	uint64_t now = us_now();
	int64_t wait = -1;

	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < TRC_SESSION_TIMERS; i++) {
		struct timer *t = &s->timers[i];

		if (t->seen == t->set)
			continue;
		t->seen = t->set;
		t->io_gap = t->gap;
		t->io_arg = t->arg;
		t->io_period_us = t->period_us;
		t->on = t->gap != NULL || t->period_us != 0;
		if (t->on)
			t->due_us = now + (t->io_gap != NULL ? t->io_gap(t->io_arg) : t->io_period_us);
	}
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < TRC_SESSION_TIMERS; i++) {
		struct timer *t = &s->timers[i];

		if (!t->on)
			continue;
		if (now >= t->due_us) {
			ask(s, WANT_TIMER << i);
			t->due_us = now + (t->io_gap != NULL ? t->io_gap(t->io_arg) : t->io_period_us);
		}
		if (wait < 0 || (int64_t)(t->due_us - now) < wait)
			wait = (int64_t)(t->due_us - now);
	}
	return wait;
}

/*
 * Delivers everything left, then the goodbye for a detach. The client gets it all as long as
 * it reads: the ring is bounded, and delivery stops only when nothing could be written for
 * GOODBYE_STALL_MS (a client that stopped reading, even in the middle of a message). Events
 * still waiting after GOODBYE_EVENTS_MS are counted as lost instead, so that what remains is
 * the messages already encoded, and the goodbye with the count. As the process exits, whose
 * main thread waits GOODBYE_MS for this thread, both limits are shorter.
 */
/* The goodbye's bytes, packed where no allocation can fail them (a process at its limit). */
struct bye {
	char buf[32];           /* [69, u64, u64, u64]: 28 bytes at most */
	size_t n, off;
};

static int
bye_write(void *data, const char *p, size_t n)
{
	struct bye *b = data;

	if (b->n + n > sizeof(b->buf))
		return -1;
	memcpy(b->buf + b->n, p, n);
	b->n += n;
	return 0;
}

/*
 * Whether the session's events go through the encoder, whose state (definitions sent, records
 * lost) is one: only a session with a ring uses it, and only one session at a time has a ring
 * (work.c's wrappers facility).
 */
static int
encodes(struct trc_session *s)
{
	int r;

	pthread_mutex_lock(&s->lock);
	r = s->ring != NULL;
	pthread_mutex_unlock(&s->lock);
	return r;
}

static void
bye_pack(struct trc_session *s, struct bye *b)
{
	msgpack_packer pk;

	msgpack_packer_init(&pk, b, bye_write);
	trc_encode_detached(&pk, s->events, s->lost + (encodes(s) ? trc_encode_lost() : 0),
	    trc_mem_failures() - s->nomem_at_open);
}

/* Sends what is left of the goodbye; -1 when the client is gone, else the bytes sent. */
static ssize_t
bye_send(struct trc_session *s, struct bye *b)
{
	ssize_t n = send(s->fd, b->buf + b->off, b->n - b->off, MSG_NOSIGNAL);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	b->off += (size_t)n;
	return n;
}

static void
goodbye(struct trc_session *s)
{
	int exiting = load(&s->closing) == TRC_CLOSE_EXIT;
	uint64_t now = ms_now(), moved = now;
	uint64_t drop_at = now + (exiting ? GOODBYE_MS / 2 : GOODBYE_EVENTS_MS);
	uint64_t stall = exiting ? GOODBYE_MS / 2 : GOODBYE_STALL_MS;
	struct bye bye = { .n = 0 };
	int say = load(&s->closing) == TRC_CLOSE_DETACH, said = !say;

	for (;;) {
		int more = fill(s, now >= drop_at);
		struct pollfd pfd = { .fd = s->fd, .events = POLLOUT };
		ssize_t sent;

		if (!more && !said) {
			bye_pack(s, &bye);
			said = 1;
		}
		if ((sent = flush(s)) < 0)
			break;
		if (s->out.size == 0 && said && bye.off < bye.n) {
			ssize_t n = bye_send(s, &bye);
			if (n < 0)
				break;
			sent += n;
		}
		if (!more && said && s->out.size == 0 && bye.off == bye.n)
			break;
		now = ms_now();
		if (sent > 0)
			moved = now;
		if (now - moved >= stall)
			break;
		poll(&pfd, 1, (int)(moved + stall - now) < 10 ? (int)(moved + stall - now) : 10);
	}
}

void
trc_session_quiet(struct trc_session *s)
{
	__atomic_store_n(&s->quiet, 1, __ATOMIC_RELEASE);
}

static void *
io_main(void *arg)
{
	struct trc_session *s = arg;
	int gone = 0;

	/* What top -H, ps -L and perf call it, apart from the app's threads (15 bytes at most). */
	pthread_setname_np(pthread_self(), "tracer-io");
	while (!load(&s->ending)) {
		int more = fill(s, 0);

		/* A peer that connected and says nothing holds the process for nobody: dropped. */
		if (!gone && !load(&s->hello) && ms_now() - s->opened_ms > TRC_HELLO_WAIT_MS) {
			gone = 1;
			trc_session_close(s, TRC_CLOSE_GONE);
		}
		int64_t wait_us, due;
		struct timespec ts;
		struct pollfd fds[2] = {
			{ .fd = s->wake_fd, .events = POLLIN },
			{ .fd = s->fd, .events = POLLIN },
		};

		if (!gone && flush(s) < 0) {
			gone = 1;
			trc_session_close(s, TRC_CLOSE_GONE);
		}
		if (more && s->out.size == 0 && !gone)
			continue;
		/*
		 * Work still waiting: ask again. A postponed job is given to the thread that ran last,
		 * which may have gone to sleep since (Ruby 3.3+); each new trigger picks again.
		 */
		if (__atomic_load_n(&s->want, __ATOMIC_ACQUIRE) != 0) {
			trc_vm_poke();
			wait_us = (int64_t)POLL_MS * 1000;
		} else {
			wait_us = (int64_t)(s->flowing ? EVENTS_MS : load(&s->quiet) ? QUIET_MS : IDLE_MS) * 1000;
		}
		s->flowing = 0;
		if ((due = timers_tick(s)) >= 0 && due < wait_us)
			wait_us = due;
		ts.tv_sec = (time_t)(wait_us / 1000000);
		ts.tv_nsec = (long)(wait_us % 1000000) * 1000;
		if (s->out.size != 0)
			fds[1].events |= POLLOUT;
		/* Once the client is gone, only a wake-up or a timer matters: the GVL side ends it. */
		if (ppoll(fds, gone ? 1 : 2, gone && due < 0 ? NULL : &ts, NULL) < 0 && errno != EINTR)
			break;
		if (fds[0].revents & POLLIN)
			drain_wake(s);
		if (!gone && fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			int r = receive(s);
			if (r > 0)
				ask(s, WANT_COMMANDS);
			if (r < 0) {
				gone = 1;
				trc_session_close(s, TRC_CLOSE_GONE);
			}
		}
	}
	if (load(&s->closing) != TRC_CLOSE_GONE && !gone)
		goodbye(s);
	/* The client sees the end now; the descriptor itself is closed by the GVL side. */
	shutdown(s->fd, SHUT_RDWR);
	__atomic_store_n(&s->io_done, 1, __ATOMIC_RELEASE);
	ask(s, WANT_END);
	return NULL;
}

/* ---- the GVL side ---- */

static void
run_commands(struct trc_session *s)
{
	msgpack_unpacked msg;
	msgpack_unpack_return ret;
	int ok;

	pthread_mutex_lock(&s->lock);
	ok = msgpack_unpacker_buffer_capacity(&s->in) >= s->inbox.size ||
	    msgpack_unpacker_reserve_buffer(&s->in, s->inbox.size);
	if (ok && s->inbox.size != 0) {
		memcpy(msgpack_unpacker_buffer(&s->in), s->inbox.data, s->inbox.size);
		msgpack_unpacker_buffer_consumed(&s->in, s->inbox.size);
	}
	s->inbox.size = 0;
	pthread_mutex_unlock(&s->lock);
	if (!ok || msgpack_unpacker_message_size(&s->in) > IN_MAX) {
		trc_session_close(s, TRC_CLOSE_GONE);
		return;
	}
	msgpack_unpacked_init(&msg);
	while (load(&s->closing) == TRC_CLOSE_NONE &&
	    (ret = msgpack_unpacker_next(&s->in, &msg)) != MSGPACK_UNPACK_CONTINUE) {
		if (ret != MSGPACK_UNPACK_SUCCESS) {
			trc_reply_error(s, TRC_ERR_PROTOCOL, "malformed message");
			trc_session_close(s, TRC_CLOSE_DETACH);
			break;
		}
		if (s->ops->message(s, &msg.data) < 0)
			trc_session_close(s, TRC_CLOSE_DETACH);
	}
	msgpack_unpacked_destroy(&msg);
}

int
trc_session_take_fd(struct trc_session *s)
{
	int fd;

	pthread_mutex_lock(&s->lock);
	fd = s->passed_fd;
	s->passed_fd = -1;
	pthread_mutex_unlock(&s->lock);
	return fd;
}

static void
session_free(struct trc_session *s)
{
	if (s->fd >= 0)
		close(s->fd);
	/* A descriptor the client passed and no command took: ours to close (the I/O thread is gone). */
	if (s->passed_fd >= 0)
		close(s->passed_fd);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	msgpack_unpacker_destroy(&s->in);
	msgpack_sbuffer_destroy(&s->out);
	msgpack_sbuffer_destroy(&s->ctl);
	msgpack_sbuffer_destroy(&s->inbox);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int
slot_of(const struct trc_session *s)
{
	for (int i = 0; i < TRC_SESSIONS_MAX; i++)
		if (sessions[i] == s)
			return i;
	return -1;
}

static int
any_closing(void)
{
	for (int i = 0; i < TRC_SESSIONS_MAX; i++)
		if (sessions[i] != NULL && load(&sessions[i]->closing) != TRC_CLOSE_NONE)
			return 1;
	return 0;
}

/* The clients that waited, in the order they came, once no session is closing. */
static void
start_waiting(void)
{
	while (nwaiting > 0 && !any_closing() && slot_of(NULL) >= 0) {
		int fd = waiting[0].fd;
		pid_t pid = waiting[0].pid;
		const struct trc_session_ops *ops = waiting[0].ops;

		memmove(&waiting[0], &waiting[1], sizeof(waiting[0]) * (size_t)(nwaiting - 1));
		nwaiting--;
		session_start(fd, pid, ops);
	}
}

/* The I/O thread has ended: forget the session, and serve the clients that waited for it. */
static void
end(struct trc_session *s)
{
	int ring = s->ring != NULL;     /* the I/O thread is gone: no lock needed */

	pthread_join(s->io, NULL);      /* it has returned already, or is about to */
	if (ring)
		s->lost += trc_encode_lost();
	s->ops->end(s);
	if (ring)
		trc_encode_reset();
	sessions[slot_of(s)] = NULL;
	if (serving == s)
		serving = NULL;
	session_free(s);
	start_waiting();
}

/* ops->close, once: as soon as the session closes. */
static void
tell_close(struct trc_session *s)
{
	if (s->close_told)
		return;
	s->close_told = 1;
	s->ops->close(s, load(&s->closing));
}

/* What session s asked for; 1 if it asked for anything. */
static int
service_one(struct trc_session *s)
{
	unsigned w = __atomic_exchange_n(&s->want, 0, __ATOMIC_ACQ_REL);

	if (w == 0)
		return 0;
	serving = s;
	if (w & WANT_COMMANDS)
		run_commands(s);
	for (int i = 0; i < TRC_SESSION_TIMERS; i++)
		if (w & (WANT_TIMER << i))
			s->ops->timer(s, i);
	if (load(&s->closing) != TRC_CLOSE_NONE)
		tell_close(s);
	if (load(&s->io_done))
		end(s);
	serving = NULL;
	return 1;
}

/* Each session in turn, until none asks for more: one client's flood does not starve another's. */
static VALUE
service_loop(VALUE unused)
{
	int again = 1;

	while (again) {
		again = 0;
		for (int i = 0; i < TRC_SESSIONS_MAX; i++)
			if (sessions[i] != NULL && service_one(sessions[i]))
				again = 1;
	}
	return Qnil;
}

/*
 * What the work may raise (NoMemoryError, near the process's limits) is caught here, where the
 * job or the listener would otherwise have taken it: the listener's thread would die with it
 * (and the next idle client would never be answered), and a job's exception lands in the app.
 * The session that raised is let go.
 */
void
trc_session_service(void)
{
	static int busy;        /* Ruby called from a command may run this job again: not nested */
	int state = 0;

	if (busy || trc_vm_defer())
		return;
	busy = 1;
	rb_protect(service_loop, Qnil, &state);
	busy = 0;
	if (state) {
		rb_set_errinfo(Qnil);
		service_failures++;
		if (serving != NULL)
			trc_session_close(serving, TRC_CLOSE_GONE);
		serving = NULL;
	}
}

uint64_t
trc_session_failures(void)
{
	return service_failures;
}

int
trc_session_settled(void)
{
	for (int i = 0; i < TRC_SESSIONS_MAX; i++) {
		struct trc_session *s = sessions[i];
		int started;

		if (s == NULL || load(&s->closing) != TRC_CLOSE_NONE)
			continue;
		pthread_mutex_lock(&s->lock);
		started = s->started;
		pthread_mutex_unlock(&s->lock);
		if (!started)
			return 0;
	}
	return 1;
}

/* ---- opening ---- */

/*
 * An empty buffer with room already made by this thread. Why: the I/O thread then only grows
 * memory that came from the main malloc arena (realloc stays in a chunk's arena), and never
 * makes glibc give it an arena of its own, which a new thread per session would leave behind,
 * half used, each time (RSS grew by ~1 KiB per attach on Ruby 3.3 before this).
 */
static int
sbuffer_prealloc(msgpack_sbuffer *sb, size_t n)
{
	msgpack_sbuffer_init(sb);
	if ((sb->data = trc_malloc(n)) == NULL)
		return -1;
	sb->alloc = n;
	return 0;
}

static struct trc_session *
session_new(int fd, pid_t client_pid, const struct trc_session_ops *ops)
{
	struct trc_session *s = trc_calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	if (sbuffer_prealloc(&s->out, READ_CHUNK) < 0 || sbuffer_prealloc(&s->inbox, READ_CHUNK) < 0) {
		free(s->out.data);
		free(s);
		return NULL;
	}
	s->fd = fd;
	s->ops = ops;
	s->nomem_at_open = trc_mem_failures();
	s->passed_fd = -1;
	s->client_pid = client_pid;
	s->opened_ms = ms_now();
	s->id = next_id++;
	s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	pthread_mutex_init(&s->lock, NULL);
	msgpack_sbuffer_init(&s->ctl);
	if (s->wake_fd < 0 || !msgpack_unpacker_init(&s->in, READ_CHUNK)) {
		if (s->wake_fd >= 0)
			close(s->wake_fd);
		pthread_mutex_destroy(&s->lock);
		msgpack_sbuffer_destroy(&s->out);
		msgpack_sbuffer_destroy(&s->inbox);
		free(s);
		return NULL;
	}
	return s;
}

/* The I/O thread takes no signal: the app's handlers run on the app's threads, as before. */
static int
start_io(struct trc_session *s)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, IO_STACK);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&s->io, &attr, io_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return err == 0 ? 0 : -1;
}

static void
refuse(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
refuse(int fd, const char *fmt, ...)
{
	char msg[256];
	msgpack_sbuffer sb;
	msgpack_packer pk;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	trc_encode_error(&pk, TRC_ERR_BUSY, msg);
	/* Best effort and never blocking: the socket is non-blocking and the message small. */
	if (send(fd, sb.data, sb.size, MSG_NOSIGNAL) < 0)
		(void)0;
	msgpack_sbuffer_destroy(&sb);
	close(fd);
}

/* In a free slot (the caller found one). */
static struct trc_session *
session_start(int fd, pid_t client_pid, const struct trc_session_ops *ops)
{
	struct trc_session *s = session_new(fd, client_pid, ops);
	int slot = slot_of(NULL);

	if (s == NULL || slot < 0) {
		if (s != NULL)
			session_free(s);
		else
			close(fd);
		return NULL;
	}
	if (start_io(s) < 0) {
		session_free(s);
		return NULL;
	}
	sessions[slot] = s;
	served++;
	return s;
}

/* Whether the session still has a client: not closing, and its socket not hung up. */
static int
session_live(struct trc_session *s)
{
	struct pollfd pfd = { .fd = s->fd, .events = POLLRDHUP };

	if (load(&s->closing) != TRC_CLOSE_NONE)
		return 0;
	if (poll(&pfd, 1, 0) > 0 && pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) {
		trc_session_close(s, TRC_CLOSE_GONE);
		return 0;
	}
	return 1;
}

/* The pids of the live sessions' clients, for a refusal: "a, b, c, d". */
static void
client_pids(char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = 0;
	for (int i = 0; i < TRC_SESSIONS_MAX && n < size; i++) {
		struct trc_session *s = sessions[i];
		int w;

		if (s == NULL || load(&s->closing) != TRC_CLOSE_NONE)
			continue;
		if (s->client_pid > 0)
			w = snprintf(buf + n, size - n, "%s%d", n ? ", " : "", (int)s->client_pid);
		else
			w = snprintf(buf + n, size - n, "%sone in another pid namespace", n ? ", " : "");
		if (w < 0)
			break;
		n += (size_t)w;
	}
}

struct trc_session *
trc_session_open(int fd, pid_t client_pid, const struct trc_session_ops *ops)
{
	int live = 0;
	char pids[128];

	for (int i = 0; i < TRC_SESSIONS_MAX; i++)
		if (sessions[i] != NULL && session_live(sessions[i]))
			live++;
	if (live + nwaiting >= TRC_SESSIONS_MAX) {
		client_pids(pids, sizeof(pids));
		refuse(fd, "process %d already has %d tracer sessions (pids %s): one of them must end "
		    "before another can attach", (int)getpid(), TRC_SESSIONS_MAX, pids);
		return NULL;
	}
	if (nwaiting == 0 && !any_closing() && slot_of(NULL) >= 0)
		return session_start(fd, client_pid, ops);
	/* A session is closing: this one starts as soon as it has ended (start_waiting). */
	waiting[nwaiting].fd = fd;
	waiting[nwaiting].pid = client_pid;
	waiting[nwaiting].ops = ops;
	nwaiting++;
	return NULL;
}

/* ---- fork and exit ---- */

/* The clients still waiting are told nothing: their sockets close (a fork's child, an exit). */
static void
drop_waiting(void)
{
	for (int i = 0; i < nwaiting; i++)
		close(waiting[i].fd);
	nwaiting = 0;
}

void
trc_session_forked(void)
{
	/* The I/O threads do not exist in the child; the clients must not see our copies. */
	drop_waiting();
	for (int i = 0; i < TRC_SESSIONS_MAX; i++) {
		struct trc_session *s = sessions[i];

		if (s == NULL)
			continue;
		close(s->fd);
		close(s->wake_fd);
		s->fd = -1;
		s->wake_fd = -1;
		/* Read without the lock, which the parent's I/O thread may have held: it is gone here. */
		if (s->passed_fd >= 0)
			close(s->passed_fd);
		s->passed_fd = -1;
	}
}

void
trc_session_forget(void)
{
	int any = 0;

	for (int i = 0; i < TRC_SESSIONS_MAX; i++) {
		struct trc_session *s = sessions[i];

		if (s == NULL)
			continue;
		sessions[i] = NULL;
		any = 1;
		/*
		 * The parent's I/O thread may have been inside the lock or a buffer's realloc at fork
		 * time: what it touched (lock, out, ctl, inbox) is left alone, a small leak once per fork.
		 */
		msgpack_unpacker_destroy(&s->in);
		free(s);
	}
	serving = NULL;
	if (any)
		trc_encode_forget();
}

/* Every I/O thread given, within GOODBYE_MS for all of them together. */
struct exiting {
	struct trc_session *s[TRC_SESSIONS_MAX];
	int n;
};

static void *
join_io(void *arg)
{
	struct exiting *e = arg;
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += GOODBYE_MS / 1000;
	for (int i = 0; i < e->n; i++)
		if (pthread_timedjoin_np(e->s[i]->io, NULL, &until) != 0)
			(void)0;        /* still delivering after GOODBYE_MS: the process exits anyway */
	return NULL;
}

void
trc_session_at_exit(void)
{
	struct exiting e = { .n = 0 };

	drop_waiting();
	for (int i = 0; i < TRC_SESSIONS_MAX; i++) {
		struct trc_session *s = sessions[i];

		if (s == NULL)
			continue;
		trc_session_close(s, TRC_CLOSE_EXIT);
		/* Told even when a detach was under way: it need not take its wrappers away any more. */
		s->close_told = 1;
		s->ops->close(s, TRC_CLOSE_EXIT);
		/* Ours alone from now on: service, run by any thread meanwhile, must not join it too. */
		sessions[i] = NULL;
		e.s[e.n++] = s;
	}
	if (e.n == 0)
		return;
	/* Without the GVL: the I/O threads need none, but other threads may still want it. */
	rb_thread_call_without_gvl(join_io, &e, RUBY_UBF_IO, NULL);
}
