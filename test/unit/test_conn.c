/* test_conn.c: a connection's reads, fed through a socketpair a few bytes at a time. */
#include <ev.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "test.h"
#include "tracer_protocol.h"

struct seen {
	int msgs, detached, ends;
	enum trc_conn_end why;
	uint64_t events;
};

static int
on_msg(void *ctx, const struct trc_message *m)
{
	struct seen *s = ctx;

	s->msgs++;
	if (m->type == TRC_MSG_DETACHED) {
		s->detached++;
		s->events = m->detached.events;
	}
	return 0;
}

static void
on_end(void *ctx, enum trc_conn_end why, const char *detail)
{
	struct seen *s = ctx;

	(void)detail;
	s->ends++;
	s->why = why;
}

/* Writes n bytes to fd, then lets the loop read them (one read per wakeup, as in tracer). */
static void
feed(struct ev_loop *loop, int fd, const void *p, size_t n)
{
	if (n > 0 && write(fd, p, n) != (ssize_t)n)
		abort();
	ev_run(loop, EVRUN_NOWAIT);
}

/*
 * Spooling, calls are skipped, not decoded. A call split across two reads leaves the decoder
 * waiting for a call's 14 bytes; once the rest of it comes and is skipped, the DETACHED read
 * next (8 bytes) must be decoded, not left waiting until the end reads as "inside a message".
 */
static void
test_skipped_call_then_short_message(void)
{
	static const uint8_t call[] = { 0x94, 0xcc, TRC_EV_CALL, 0x01, 0x02, 0xcf,
					0, 0, 0, 0, 0, 0, 0x30, 0x39 };
	static const uint8_t detached[] = { 0x94, 0x45, 0xce, 0x00, 0x2c, 0x92, 0x02, 0x00, 0x00 };
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct trc_conn c;
	struct seen s = { 0 };
	uint64_t skipped = 0;
	int sv[2];

	if (loop == NULL || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		abort();
	trc_conn_init(&c, loop, sv[0], on_msg, on_end, &s);
	trc_conn_skip_calls(&c, &skipped);
	feed(loop, sv[1], call, 10);
	test_cond("part of a call: nothing yet", skipped == 0 && s.msgs == 0);
	feed(loop, sv[1], call + 10, sizeof(call) - 10);
	test_cond("the rest of it: the call counted", skipped == 1 && s.msgs == 0);
	feed(loop, sv[1], detached, sizeof(detached));
	test_cond("a short message after it is decoded", s.detached == 1 && s.events == 2920962);
	close(sv[1]);
	ev_run(loop, EVRUN_NOWAIT);
	test_cond("then the end is a plain end of file", s.ends == 1 && s.why == TRC_CONN_EOF);
	trc_conn_close(&c);
	ev_loop_destroy(loop);
}

void
test_conn(void)
{
	test_skipped_call_then_short_message();
}
