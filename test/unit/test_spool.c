/* test_spool.c: the agent's bytes kept as they came, then decoded into a sink, in any chunks. */
#include <errno.h>
#include <msgpack.h>
#include <stdlib.h>
#include <unistd.h>

#include "spool.h"
#include "test.h"

/* A sink that remembers what it got. */
struct seen {
	uint64_t calls, returns, methods, others, last_ts, clock;
	uint32_t last_method;
	bool closed;
	bool fail_at_return;
};

static int
seen_feed(void *impl, const struct trc_message *m)
{
	struct seen *s = impl;

	switch (m->type) {
	case TRC_EV_CALL:
		s->calls++;
		s->last_ts = m->call.ts;
		s->last_method = m->call.method;
		break;
	case TRC_EV_RETURN:
		s->returns++;
		return s->fail_at_return ? -1 : 0;
	case TRC_EV_METHOD:
		s->methods++;
		break;
	default:
		s->others++;
	}
	return 0;
}

static void
seen_clock(void *impl, uint64_t mono, uint64_t real)
{
	((struct seen *)impl)->clock = mono + real;
}

static const char *
seen_error(const void *impl)
{
	(void)impl;
	return "the sink said no";
}

static uint64_t
seen_lost(const void *impl)
{
	(void)impl;
	return 0;
}

static void
seen_close(void *impl)
{
	((struct seen *)impl)->closed = true;
}

static const struct trc_sink_ops seen_ops = {
	.feed = seen_feed, .set_clock = seen_clock, .error = seen_error, .lost = seen_lost,
	.close = seen_close,
};

static int
scratch(void)
{
	char path[] = "/tmp/test-spool-XXXXXX";
	int fd = mkstemp(path);

	unlink(path);
	return fd;
}

/* The bytes of a session: STARTED, a method, n calls and returns, a LOST, DETACHED. */
static void
session_bytes(msgpack_sbuffer *sb, uint64_t n)
{
	msgpack_packer pk;

	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 3);
	msgpack_pack_uint8(&pk, TRC_MSG_STARTED);
	msgpack_pack_uint32(&pk, 1);
	msgpack_pack_uint64(&pk, 1000);
	msgpack_pack_array(&pk, 7);
	msgpack_pack_uint8(&pk, TRC_EV_METHOD);
	msgpack_pack_uint32(&pk, 0);
	msgpack_pack_str_with_body(&pk, "Object", 6);
	msgpack_pack_str_with_body(&pk, "#", 1);
	msgpack_pack_str_with_body(&pk, "f", 1);
	msgpack_pack_str_with_body(&pk, "x.rb", 4);
	msgpack_pack_int32(&pk, 3);
	for (uint64_t i = 0; i < n; i++) {
		for (int ret = 0; ret < 2; ret++) {
			msgpack_pack_array(&pk, 4);
			msgpack_pack_uint8(&pk, ret ? TRC_EV_RETURN : TRC_EV_CALL);
			msgpack_pack_uint32(&pk, 0);
			msgpack_pack_uint32(&pk, 0);
			msgpack_pack_uint64(&pk, 1000000000000ull + 2 * i + (uint64_t)ret);
		}
	}
	msgpack_pack_array(&pk, 2);
	msgpack_pack_uint8(&pk, TRC_EV_LOST);
	msgpack_pack_uint64(&pk, 7);
	msgpack_pack_array(&pk, 4);
	msgpack_pack_uint8(&pk, TRC_MSG_DETACHED);
	msgpack_pack_uint64(&pk, 2 * n);
	msgpack_pack_uint64(&pk, 7);
	msgpack_pack_uint64(&pk, 0);
}

static struct trc_output out;

static struct trc_spool *
spool_for(struct seen *seen)
{
	return trc_spool_new_fd(scratch(), (struct trc_sink){ &seen_ops, seen }, &out);
}

static void
whole_session_in_odd_chunks(void)
{
	struct seen seen = { 0 };
	struct trc_spool *sp = spool_for(&seen);
	struct trc_sink live = trc_spool_sink(sp);
	struct trc_message lost = { .type = TRC_EV_LOST };
	msgpack_sbuffer sb;
	const uint64_t n = 150000;      /* about 4 MB: several writes and reads */
	size_t at = 0, step = 1;
	int64_t messages = 0, r;

	msgpack_sbuffer_init(&sb);
	session_bytes(&sb, n);
	trc_sink_set_clock(&live, 5, 6);
	test_cond("the clock reaches the sink at once", seen.clock == 11);
	test_cond("nothing kept, nothing behind", !trc_spool_behind(sp) && trc_spool_pump(sp, 10) == 0);
	/* Chunks of 1, 3, 7, ... 4095 bytes and again: messages cut anywhere; a pump between. */
	while (at < sb.size) {
		size_t k = sb.size - at < step ? sb.size - at : step;

		trc_spool_put(sp, sb.data + at, k);
		at += k;
		step = step >= 4096 ? 1 : step * 2 + 1;
		if (step == 1) {
			r = trc_spool_pump(sp, 1000);
			test_cond("a pump reads at most what it is asked", r >= 0 && r <= 1000);
			messages += r;
		}
	}
	test_cond("the pumps fed the sink on the way", seen.calls > 0 && seen.calls < n);
	test_cond("every byte is kept", trc_spool_size(sp) == sb.size);
	test_cond("and some are behind", trc_spool_behind(sp));
	lost.lost.count = 7;
	test_cond("the live sink takes events", trc_sink_feed(&live, &lost) == 0);
	test_cond("the live sink counts what was lost", trc_sink_lost(&live) == 7);
	while ((r = trc_spool_pump(sp, 50000)) > 0)
		messages += r;
	test_cond("every message is read", r == 0 && messages == (int64_t)(2 * n + 4));
	test_cond("nothing behind after", !trc_spool_behind(sp));
	test_cond("every call and return reaches the sink", seen.calls == n && seen.returns == n);
	test_cond("in order", seen.last_ts == 1000000000000ull + 2 * (n - 1) && seen.last_method == 0);
	test_cond("the method definition too", seen.methods == 1);
	test_cond("events only, and the LOST: not the session's own messages", seen.others == 1);
	test_cond("the sink is still open", !seen.closed);
	trc_sink_close(&live);
	test_cond("closing the live sink closes the sink", seen.closed);
	msgpack_sbuffer_destroy(&sb);
}

static void
closing_feeds_the_rest(void)
{
	struct seen seen = { 0 };
	struct trc_spool *sp = spool_for(&seen);
	struct trc_sink live = trc_spool_sink(sp);
	msgpack_sbuffer sb;

	msgpack_sbuffer_init(&sb);
	session_bytes(&sb, 20000);
	trc_spool_put(sp, sb.data, sb.size - 2);        /* DETACHED cut short */
	test_cond("a few", trc_spool_pump(sp, 5) == 5);
	trc_sink_close(&live);
	test_cond("then all the calls, and the end", seen.calls == 20000 && seen.closed);
	msgpack_sbuffer_destroy(&sb);
}

static void
a_cut_message_is_not_behind(void)
{
	struct seen seen = { 0 };
	struct trc_spool *sp = spool_for(&seen);
	struct trc_sink live = trc_spool_sink(sp);
	msgpack_sbuffer sb;

	msgpack_sbuffer_init(&sb);
	session_bytes(&sb, 3);
	trc_spool_put(sp, sb.data, sb.size - 2);
	test_cond("the messages before it", trc_spool_pump(sp, 100) == 3 * 2 + 3);
	test_cond("then none", trc_spool_pump(sp, 100) == 0);
	test_cond("and nothing behind: the rest is not a message yet", !trc_spool_behind(sp));
	trc_spool_put(sp, sb.data + sb.size - 2, 2);
	test_cond("now it is", trc_spool_behind(sp) && trc_spool_pump(sp, 100) == 1);
	trc_sink_close(&live);
	test_cond("all the calls", seen.calls == 3 && seen.closed);
	msgpack_sbuffer_destroy(&sb);
}

static void
bad_bytes_and_a_failing_sink_are_errors(void)
{
	struct seen seen = { 0 }, failing = { .fail_at_return = true };
	struct trc_spool *sp = spool_for(&seen);
	msgpack_sbuffer sb;

	msgpack_sbuffer_init(&sb);
	session_bytes(&sb, 2);
	trc_spool_put(sp, sb.data, sb.size);
	trc_spool_put(sp, "\xc1", 1);   /* never used in msgpack */
	test_cond("bad bytes: -1", trc_spool_pump(sp, 100) == -1);
	test_cond("with what came before", seen.calls == 2);
	test_cond("and why", strlen(trc_spool_error(sp)) > 0);
	test_cond("then nothing behind, and -1 again", !trc_spool_behind(sp) && trc_spool_pump(sp, 1) == -1);
	out.err.len = 0;
	{
		struct trc_sink live = trc_spool_sink(sp);

		trc_sink_close(&live);
	}
	trc_buf_addc(&out.err, '\0');
	test_cond("closing says so", strstr(out.err.data, "the trace is cut short") != NULL);
	test_cond("and closes the sink", seen.closed);

	sp = spool_for(&failing);
	trc_spool_put(sp, sb.data, sb.size);
	test_cond("a sink that fails: -1", trc_spool_pump(sp, 100) == -1);
	test_str("with the sink's reason", trc_spool_error(sp), "the sink said no");
	test_cond("stopped there", failing.calls == 1 && failing.returns == 1);
	{
		struct trc_sink live = trc_spool_sink(sp);

		trc_sink_close(&live);
	}
	test_cond("closed", failing.closed);
	msgpack_sbuffer_destroy(&sb);
}

static void
scratch_files_go_in_the_directory(void)
{
	struct seen a = { 0 };
	struct trc_spool *sp = trc_spool_new("/tmp", (struct trc_sink){ &seen_ops, &a }, &out);
	struct trc_sink live;

	test_cond("made", sp != NULL);
	live = trc_spool_sink(sp);
	trc_sink_close(&live);
	test_cond("closed", a.closed);
	errno = 0;
	test_cond("no directory: no spool", trc_spool_new("/nonexistent/dir", (struct trc_sink){ &seen_ops, &a }, &out) == NULL);
	test_cond("and why", errno == ENOENT);
}

void
test_spool(void)
{
	trc_output_init(&out, -1, -1);
	whole_session_in_odd_chunks();
	closing_feeds_the_rest();
	a_cut_message_is_not_behind();
	bad_bytes_and_a_failing_sink_are_errors();
	scratch_files_go_in_the_directory();
	trc_output_release(&out);
}
