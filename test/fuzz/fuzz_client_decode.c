/* fuzz_client_decode.c: libFuzzer target for what an agent sends the client (decode, replay, trace). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode.h"
#include "escape.h"
#include "output.h"
#include "profile.h"
#include "spec.h"
#include "trace.h"
#include "utf8.h"

/*
 * The input is a 2-byte header then the byte stream of one connection.
 *   byte 0: printer options: bits 0-2 --prefix, 3 -t, 4 -n, 5 "[pid] " labels; 6: a profile
 *           by wall-clock time
 *   byte 1: seed of the read sizes (0: one read of everything, as a fast peer would)
 * The stream goes through conn.c's loop: bytes arrive in reads, whole messages are decoded as
 * soon as they are buffered, and each goes to the call-tree printer, as session.c does while
 * tracing. Each trc_decode() sees an exactly-sized copy of the buffered bytes, so a read past
 * them is an ASan report, not a silent read of the next chunk. Names past TRC_NAME_MAX come
 * out cut, and what the printer writes must be inert (escape.h) whatever came in.
 */

static struct trc_spec specs[2];
/* --top profile's store, which each PROFILE also goes through (one per input). */
static struct trc_profile profile;

static void
check(int ok)
{
	if (!ok)
		__builtin_trap();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *why;

	(void)argc, (void)argv;
	check(trc_spec_parse(&specs[0], "Foo::Bar#baz(self, @x, a.b)", &why) == 0);
	check(trc_spec_parse(&specs[1], "qux", &why) == 0);
	setenv("TZ", "UTC", 1);
	return 0;
}

/* Valid UTF-8, no control but the newline, no code point a terminal acts on (utf8.h). */
static bool
is_inert(const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0, len, bad;

	while (i < n) {
		if (s[i] < 0x80) {
			if ((s[i] < 0x20 && s[i] != '\n') || s[i] == 0x7f)
				return false;
			i++;
			continue;
		}
		len = trc_utf8_seq(s + i, n - i, &bad);
		if (len == 0 || trc_utf8_is_unsafe(s + i, len))
			return false;
		i += len;
	}
	return true;
}

/* Read sizes 1..4096, from a small deterministic generator. */
static size_t
next_read(uint32_t *state)
{
	if (*state == 0)
		return SIZE_MAX;
	*state ^= *state << 13;
	*state ^= *state >> 17;
	*state ^= *state << 5;
	return (*state % 8 == 0) ? 1 + *state % 4096 : 1 + *state % 64;
}

/* A decoded string must lie inside the bytes it was decoded from. */
static void
check_str(struct trc_str s, const uint8_t *buf, size_t used)
{
	if (s.len == 0)
		return;
	check((const uint8_t *)s.ptr >= buf && (const uint8_t *)s.ptr + s.len <= buf + used);
}

/* A name: there too, or cut (escape.h's TRC_NAME_MAX) into the decoder's buffer. */
static void
check_name(struct trc_str s, const struct trc_decoder *d, const uint8_t *buf, size_t used)
{
	if (s.len <= TRC_NAME_MAX) {
		check_str(s, buf, used);
		return;
	}
	check(s.len < TRC_NAME_MAX + 64 && s.ptr >= d->cut.data && s.ptr + s.len <= d->cut.data + d->cut.len);
}

static void
check_message(const struct trc_message *m, const struct trc_decoder *d, const uint8_t *buf,
	      size_t used)
{
	check(trc_msg_name(m->type) != NULL);
	switch (m->type) {
	case TRC_MSG_WELCOME:
		check_str(m->welcome.ruby_version, buf, used);
		check_str(m->welcome.cwd, buf, used);
		break;
	case TRC_MSG_TOP:
		for (size_t i = 0; i < m->top.nrows; i++) {
			check_name(m->top.rows[i].file, d, buf, used);
			check_name(m->top.rows[i].label, d, buf, used);
		}
		for (size_t i = 0; i < m->top.npaths; i++) {
			check_name(m->top.paths[i].file, d, buf, used);
			check_name(m->top.paths[i].label, d, buf, used);
			check(m->top.paths[i].parent < m->top.paths[i].id);
		}
		break;
	case TRC_MSG_PROFILE:
		for (size_t i = 0; i < m->profile.nframes; i++) {
			check_name(m->profile.frames[i].label, d, buf, used);
			check_name(m->profile.frames[i].file, d, buf, used);
		}
		for (size_t i = 0; i < m->profile.nthreads; i++)
			check_name(m->profile.threads[i].name, d, buf, used);
		for (size_t i = 0; i < m->profile.ntags; i++)
			check_name(m->profile.tags[i].text, d, buf, used);
		break;
	case TRC_EV_METHOD:
		check_name(m->method.cls, d, buf, used);
		check_str(m->method.sep, buf, used);
		check_name(m->method.name, d, buf, used);
		check_name(m->method.path, d, buf, used);
		break;
	case TRC_EV_THREAD:
		check_name(m->thread.name, d, buf, used);
		break;
	case TRC_EV_RAISE:
		check_name(m->raise.cls, d, buf, used);
		check_str(m->raise.message, buf, used);
		check_name(m->raise.path, d, buf, used);
		break;
	}
}

/* conn.c's dispatch(): decodes what is buffered; returns -1 once the session would end. */
static int
dispatch(struct trc_decoder *d, struct trc_trace *t, const uint8_t *stream, size_t *start,
	 size_t end, size_t *need)
{
	while (end - *start >= *need) {
		size_t len = end - *start, used = 0;
		uint8_t *copy = malloc(len);
		struct trc_message m;
		enum trc_decode_status st;
		int r = 0;

		memcpy(copy, stream + *start, len);
		st = trc_decode(d, copy, len, &m, &used);
		if (st == TRC_DECODE_OK) {
			check(used > 0 && used <= len);
			check_message(&m, d, copy, used);
			if (m.type == TRC_MSG_WELCOME)
				trc_trace_set_clock(t, m.welcome.mono_ns, m.welcome.real_ns);
			if (m.type == TRC_MSG_PROFILE) {
				struct trc_message rows;

				trc_profile_feed(&profile, 4242, &m, &rows);
				check(rows.type == TRC_MSG_TOP && rows.top.nrows <= profile.nframes);
			}
			r = trc_trace_feed(t, &m);
			if (r < 0)
				check(trc_trace_error(t)[0] != '\0');
			*start += used;
			*need = 1;
		} else if (st == TRC_DECODE_MORE) {
			check(d->need > len && d->need <= TRC_DECODE_MAX_MSG);
			*need = d->need;
		} else {
			check(st == TRC_DECODE_ERROR && d->error[0] != '\0');
			r = -1;
		}
		free(copy);
		if (r < 0)
			return -1;
		if (st == TRC_DECODE_MORE)
			return 0;
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trc_trace_opts opts = { 0 };
	struct trc_output out;
	struct trc_decoder dec;
	struct trc_trace *t;
	uint32_t seed;
	size_t start = 0, end = 0, need = 1;

	if (size < 2)
		return 0;
	opts.prefix = data[0] & 7;
	opts.start_time = data[0] & 8;
	opts.no_duration = data[0] & 16;
	opts.pid = (data[0] & 32) ? 4242 : 0;
	seed = data[1] ? 0x9e3779b9u * data[1] : 0;
	data += 2;
	size -= 2;

	trc_output_init(&out, -1, -1);        /* kept, to be checked */
	trc_decoder_init(&dec);
	trc_profile_init(&profile, data[-2] & 64, true);
	t = trc_trace_new(&out, &opts, specs, 2);
	while (end < size) {
		size_t n = next_read(&seed);

		end += n < size - end ? n : size - end;
		if (dispatch(&dec, t, data, &start, end, &need) < 0)
			break;
	}
	trc_trace_free(t);
	trc_profile_release(&profile);
	/* What the trace printed, notes too: nothing a terminal acts on, whatever the agent sent. */
	check(is_inert(out.out.data, out.out.len) && is_inert(out.err.data, out.err.len));
	trc_output_release(&out);
	trc_decoder_release(&dec);
	return 0;
}
