/* session.c: the agent thread: moves events and replies to the client, and runs its commands. */
#include "session.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <ruby/thread.h>

#include "command.h"
#include "encode.h"
#include "names.h"
#include "top.h"
#include "tracer_protocol.h"

#define POLL_MS 10              /* how long events may wait in the ring */
#define OUT_HIGH (1u << 20)     /* encode no further ahead of the socket than this */
#define IN_MAX (64u << 20)      /* largest command a client may send */
#define GOODBYE_MS 2000         /* how long a closing session tries to deliver the rest */

static struct trc_session *current;
static uint64_t next_id = 1;

struct trc_session *
trc_session_current(void)
{
	return current;
}

static void
wake(struct trc_session *s)
{
	uint64_t one = 1;
	if (s->wake_fd >= 0 && write(s->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		s->closing = TRC_CLOSE_GONE;
}

void
trc_session_close(struct trc_session *s, int how)
{
	if (s->closing == TRC_CLOSE_NONE || how == TRC_CLOSE_GONE)
		s->closing = how;
	wake(s);
}

msgpack_packer *
trc_reply_begin(struct trc_session *s)
{
	static msgpack_packer pk;       /* GVL held: one reply is built at a time */
	pthread_mutex_lock(&s->lock);
	msgpack_packer_init(&pk, &s->ctl, msgpack_sbuffer_write);
	return &pk;
}

void
trc_reply_end(struct trc_session *s)
{
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
	msgpack_pack_array(pk, 3);
	msgpack_pack_uint8(pk, TRC_MSG_ERROR);
	msgpack_pack_int(pk, code);
	trc_pack_cstr(pk, msg);
	trc_reply_end(s);
}

/* ---- without the GVL ---- */

static uint64_t
ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}


/* Moves replies, then events, into the output buffer. Returns 1 if events remain. */
static int
fill(struct trc_session *s)
{
	msgpack_packer pk;
	const unsigned char *p;
	size_t n;

	pthread_mutex_lock(&s->lock);
	if (s->ctl.size != 0) {
		msgpack_sbuffer_write(&s->out, s->ctl.data, s->ctl.size);
		s->ctl.size = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (!s->tracing)
		return 0;
	msgpack_packer_init(&pk, &s->out, msgpack_sbuffer_write);
	while (s->out.size < OUT_HIGH && (n = trc_ring_peek(&s->ring, &p)) != 0)
		trc_ring_consume(&s->ring, trc_encode_records(&pk, p, n));
	return trc_ring_used(&s->ring) != 0;
}

/* Writes what it can; -1 when the client is gone. */
static int
flush(struct trc_session *s)
{
	while (s->out_off < s->out.size) {
		ssize_t n = write(s->fd, s->out.data + s->out_off, s->out.size - s->out_off);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		s->out_off += (size_t)n;
	}
	s->out.size = 0;
	s->out_off = 0;
	return 0;
}

/* Reads what the client sent; 1 if there is something, 0 if not, -1 at EOF or error. */
static int
receive(struct trc_session *s)
{
	ssize_t n;

	if (msgpack_unpacker_message_size(&s->in) > IN_MAX)
		return -1;
	if (msgpack_unpacker_buffer_capacity(&s->in) < 65536 &&
	    !msgpack_unpacker_reserve_buffer(&s->in, 65536))
		return -1;
	n = read(s->fd, msgpack_unpacker_buffer(&s->in), msgpack_unpacker_buffer_capacity(&s->in));
	if (n == 0)
		return -1;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	msgpack_unpacker_buffer_consumed(&s->in, (size_t)n);
	return 1;
}

/*
 * The agent thread's wait, without the GVL: sends events and replies as they come and returns
 * when the client sent something, went away, or the thread is wanted (stop_io or closing).
 */
static void *
io_step(void *arg)
{
	struct trc_session *s = arg;

	while (!s->stop_io && s->closing == TRC_CLOSE_NONE) {
		int more = fill(s), r;
		uint64_t junk;
		struct pollfd fds[2] = {
			{ .fd = s->fd, .events = POLLIN },
			{ .fd = s->wake_fd, .events = POLLIN },
		};

		if (flush(s) < 0)
			break;
		if (more && s->out.size == 0)
			continue;
		if (s->out.size != 0)
			fds[0].events |= POLLOUT;
		if (s->counting && ms_now() >= s->top_next_ms)
			return NULL;
		if (poll(fds, 2, POLL_MS) < 0 && errno != EINTR)
			break;
		if (fds[1].revents & POLLIN && read(s->wake_fd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
			break;
		if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			if ((r = receive(s)) < 0)
				break;
			if (r > 0)
				return NULL;
		}
	}
	if (!s->stop_io && s->closing == TRC_CLOSE_NONE)
		s->closing = TRC_CLOSE_GONE;
	return NULL;
}

static void
io_unblock(void *arg)
{
	struct trc_session *s = arg;
	s->stop_io = 1;
	wake(s);
}

/* Without the GVL and with the hooks off: delivers everything left, for at most GOODBYE_MS. */
static void *
drain(void *arg)
{
	struct trc_session *s = arg;
	uint64_t deadline = ms_now() + GOODBYE_MS;

	for (;;) {
		int more = fill(s);
		struct pollfd pfd = { .fd = s->fd, .events = POLLOUT };
		if (flush(s) < 0 || (!more && s->out.size == 0) || ms_now() >= deadline)
			break;
		if (s->out.size != 0)
			poll(&pfd, 1, (int)(deadline - ms_now()));
	}
	return NULL;
}

/* ---- with the GVL ---- */

static void
run_commands(struct trc_session *s)
{
	msgpack_unpacked msg;
	msgpack_unpack_return ret;

	msgpack_unpacked_init(&msg);
	while ((ret = msgpack_unpacker_next(&s->in, &msg)) == MSGPACK_UNPACK_SUCCESS) {
		if (trc_command_run(s, &msg.data) < 0) {
			trc_session_close(s, TRC_CLOSE_DETACH);
			break;
		}
	}
	if (ret == MSGPACK_UNPACK_PARSE_ERROR || ret == MSGPACK_UNPACK_NOMEM_ERROR) {
		trc_reply_error(s, TRC_ERR_PROTOCOL, "malformed message");
		trc_session_close(s, TRC_CLOSE_DETACH);
	}
	msgpack_unpacked_destroy(&msg);
}

static void
send_counts(struct trc_session *s)
{
	msgpack_packer *pk = trc_reply_begin(s);
	trc_top_pack(pk);
	trc_reply_end(s);
	s->top_next_ms = ms_now() + s->top_every_ms;
}

void
trc_session_count_every(struct trc_session *s, uint64_t ms)
{
	s->counting = 1;
	s->top_every_ms = ms;
	s->top_next_ms = ms_now() + ms;
}

static VALUE
agent_loop(VALUE arg)
{
	struct trc_session *s = (struct trc_session *)arg;

	while (s->closing == TRC_CLOSE_NONE) {
		s->stop_io = 0;
		rb_thread_call_without_gvl(io_step, s, io_unblock, s);
		run_commands(s);
		if (s->counting && ms_now() >= s->top_next_ms)
			send_counts(s);
	}
	return Qnil;
}

static void
session_free(struct trc_session *s)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	msgpack_unpacker_destroy(&s->in);
	msgpack_sbuffer_destroy(&s->out);
	msgpack_sbuffer_destroy(&s->ctl);
	pthread_mutex_destroy(&s->lock);
	trc_ring_release(&s->ring);
	free(s);
}

static void
say_detached(struct trc_session *s)
{
	uint64_t events = 0, lost = 0;
	msgpack_packer *pk;

	if (s->tracing)
		trc_hook_counts(&events, &lost);
	pk = trc_reply_begin(s);
	msgpack_pack_array(pk, 3);
	msgpack_pack_uint8(pk, TRC_MSG_DETACHED);
	msgpack_pack_uint64(pk, events);
	msgpack_pack_uint64(pk, lost);
	trc_reply_end(s);
}

/* Runs however the loop ended (a command, EOF, an exception, Thread#kill, VM exit). */
static VALUE
agent_finish(VALUE arg)
{
	struct trc_session *s = (struct trc_session *)arg;

	if (s->tracing)
		trc_hook_stop();
	/* The counts of the last, partial interval, then the hooks off. */
	if (s->counting && s->closing == TRC_CLOSE_DETACH)
		send_counts(s);
	if (s->counting)
		trc_top_stop();
	/* Events first, then the goodbye: the client must see every event before DETACHED. */
	if (s->closing != TRC_CLOSE_GONE)
		rb_thread_call_without_gvl(drain, s, RUBY_UBF_IO, NULL);
	if (s->closing == TRC_CLOSE_DETACH) {
		say_detached(s);
		rb_thread_call_without_gvl(drain, s, RUBY_UBF_IO, NULL);
	}
	trc_names_reset();
	if (current == s)
		current = NULL;
	trc_thread_ignore(rb_thread_current(), 0);
	session_free(s);
	return Qnil;
}

static VALUE
agent_main(void *arg)
{
	struct trc_session *s = arg;

	rb_funcall(rb_thread_current(), rb_intern("name="), 1, rb_str_new_cstr("tracer-agent"));
	return rb_ensure(agent_loop, (VALUE)s, agent_finish, (VALUE)s);
}

static struct trc_session *
session_new(int fd, pid_t client_pid)
{
	struct trc_session *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->fd = fd;
	s->client_pid = client_pid;
	s->id = next_id++;
	s->thread = Qnil;
	s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	pthread_mutex_init(&s->lock, NULL);
	msgpack_sbuffer_init(&s->out);
	msgpack_sbuffer_init(&s->ctl);
	if (s->wake_fd < 0 || !msgpack_unpacker_init(&s->in, 65536)) {
		if (s->wake_fd >= 0)
			close(s->wake_fd);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return NULL;
	}
	return s;
}

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
	msgpack_pack_array(&pk, 3);
	msgpack_pack_uint8(&pk, TRC_MSG_ERROR);
	msgpack_pack_int(&pk, TRC_ERR_BUSY);
	trc_pack_cstr(&pk, msg);
	/* Best effort and never blocking: the socket is non-blocking and the message small. */
	if (write(fd, sb.data, sb.size) < 0)
		(void)0;
	msgpack_sbuffer_destroy(&sb);
	close(fd);
}

void
trc_session_open(int fd, pid_t client_pid)
{
	struct trc_session *s;

	if (current != NULL) {
		refuse(fd, "process %d is already traced by pid %d", (int)getpid(), (int)current->client_pid);
		return;
	}
	if ((s = session_new(fd, client_pid)) == NULL) {
		close(fd);
		return;
	}
	current = s;
	/* The new thread cannot run before this job returns the GVL, so it is ignored in time. */
	s->thread = rb_thread_create(agent_main, s);
	trc_thread_ignore(s->thread, 1);
}

void
trc_session_forked(void)
{
	/* The agent thread does not exist in the child; the client must not see our copies. */
	if (current == NULL)
		return;
	close(current->fd);
	close(current->wake_fd);
	current->fd = -1;
	current->wake_fd = -1;
}

void
trc_session_forget(void)
{
	struct trc_session *s = current;

	if (s == NULL)
		return;
	current = NULL;
	if (s->tracing)
		trc_hook_stop();
	if (s->counting)
		trc_top_stop();
	trc_names_reset();
	trc_thread_ignore(s->thread, 0);
	/* The lock may have been held by the parent's agent thread at fork time: never touch it. */
	msgpack_unpacker_destroy(&s->in);
	msgpack_sbuffer_destroy(&s->out);
	msgpack_sbuffer_destroy(&s->ctl);
	trc_ring_release(&s->ring);
	free(s);
}

static VALUE
join_agent(VALUE thread)
{
	VALUE limit = rb_float_new(GOODBYE_MS / 1000.0);
	return rb_funcallv(thread, rb_intern("join"), 1, &limit);
}

void
trc_session_at_exit(void)
{
	struct trc_session *s = current;
	int state = 0;

	if (s == NULL)
		return;
	trc_session_close(s, TRC_CLOSE_EXIT);
	rb_protect(join_agent, s->thread, &state);
	if (state)
		rb_set_errinfo(Qnil);
}

void
trc_session_mark(void)
{
	if (current != NULL)
		rb_gc_mark(current->thread);
}
