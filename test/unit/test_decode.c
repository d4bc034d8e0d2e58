/* test_decode.c: decode round trips with encode, truncation, garbage, wrong types, huge lengths. */
#include <stdint.h>
#include <stdlib.h>

#include "decode.h"
#include "encode.h"
#include "escape.h"
#include "test.h"

static int
streq(struct trc_str s, const char *c)
{
	return s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0;
}

/* Decodes from an exact-size heap copy, so the sanitizers catch any read past len. */
static enum trc_decode_status
decode_exact(struct trc_decoder *d, const void *p, size_t len, struct trc_message *m, size_t *used,
	     char **copy)
{
	*copy = malloc(len ? len : 1);
	memcpy(*copy, p, len);
	return trc_decode(d, *copy, len, m, used);
}

static char long_cwd[301], big_text[70001];

static void
build_welcome(struct trc_buf *b)
{
	trc_pack_array(b, 9);
	trc_pack_uint(b, TRC_MSG_WELCOME);
	trc_pack_uint(b, TRC_PROTOCOL_VERSION);
	trc_pack_int(b, 4242);
	trc_pack_cstr(b, "3.1.2");
	trc_pack_cstr(b, long_cwd);
	trc_pack_uint(b, UINT64_MAX - 15);
	trc_pack_uint(b, 1700000000123456789ull);
	trc_pack_bool(b, true);
	trc_pack_uint(b, 3);
}

static int
check_welcome(const struct trc_message *m)
{
	return m->welcome.version == TRC_PROTOCOL_VERSION && m->welcome.pid == 4242 &&
	       streq(m->welcome.ruby_version, "3.1.2") && streq(m->welcome.cwd, long_cwd) &&
	       m->welcome.mono_ns == UINT64_MAX - 15 && m->welcome.real_ns == 1700000000123456789ull &&
	       m->welcome.yjit && m->welcome.ractors == 3;
}

static void
build_error(struct trc_buf *b)
{
	const char *msg = "process 1 is already traced by pid 2";

	trc_pack_array(b, 3);
	trc_pack_uint(b, TRC_MSG_ERROR);
	trc_pack_uint(b, TRC_ERR_BUSY);
	trc_pack_bin(b, msg, strlen(msg));
}

static int
check_error(const struct trc_message *m)
{
	return m->error.code == TRC_ERR_BUSY &&
	       streq(m->error.message, "process 1 is already traced by pid 2");
}

static void
build_spec(struct trc_buf *b)
{
	trc_pack_array(b, 6);
	trc_pack_uint(b, TRC_MSG_SPEC);
	trc_pack_uint(b, 3);
	trc_pack_uint(b, 0);
	trc_pack_bool(b, true);
	trc_pack_nil(b);
	trc_pack_str(b, "binding (why)", 13);
}

static int
check_spec(const struct trc_message *m)
{
	return m->spec.index == 3 && m->spec.matched == 0 && m->spec.pending && m->spec.message.len == 0 &&
	       streq(m->spec.skipped, "binding (why)");
}

static void
build_started(struct trc_buf *b)
{
	trc_pack_array(b, 3);
	trc_pack_uint(b, TRC_MSG_STARTED);
	trc_pack_uint(b, 4600);
	trc_pack_uint(b, 812000000);
}

static int
check_started(const struct trc_message *m)
{
	return m->type == TRC_MSG_STARTED && m->started.wrapped == 4600 && m->started.install_ns == 812000000;
}

static void
build_progress(struct trc_buf *b)
{
	trc_pack_array(b, 4);
	trc_pack_uint(b, TRC_MSG_PROGRESS);
	trc_pack_uint(b, TRC_STEP_WRAP);
	trc_pack_uint(b, 62);
	trc_pack_uint(b, 100);
}

static int
check_progress(const struct trc_message *m)
{
	return m->progress.step == TRC_STEP_WRAP && m->progress.done == 62 && m->progress.total == 100;
}

static void
build_eval(struct trc_buf *b)
{
	trc_pack_array(b, 4);
	trc_pack_uint(b, TRC_MSG_EVAL);
	trc_pack_uint(b, 7);
	trc_pack_bool(b, true);
	trc_pack_cstr(b, big_text);
}

static int
check_eval(const struct trc_message *m)
{
	return m->eval.id == 7 && m->eval.ok && streq(m->eval.text, big_text);
}

static void
build_eval_fail(struct trc_buf *b)
{
	trc_pack_array(b, 4);
	trc_pack_uint(b, TRC_MSG_EVAL);
	trc_pack_uint(b, 8);
	trc_pack_bool(b, false);
	trc_pack_cstr(b, "NameError: undefined local variable or method `x'");
}

static int
check_eval_fail(const struct trc_message *m)
{
	return m->eval.id == 8 && !m->eval.ok &&
	       streq(m->eval.text, "NameError: undefined local variable or method `x'");
}

static void
build_detached(struct trc_buf *b)
{
	trc_pack_array(b, 4);
	trc_pack_uint(b, TRC_MSG_DETACHED);
	trc_pack_uint(b, 1ull << 32);
	trc_pack_uint(b, 5);
	trc_pack_uint(b, 2);
}

static int
check_detached(const struct trc_message *m)
{
	return m->detached.events == 1ull << 32 && m->detached.lost == 5 && m->detached.nomem == 2;
}

/* A row; with nbuckets TRC_TOP_BUCKETS (--top time), bucket i holds i * n. */
static void
build_row(struct trc_buf *b, const char *file, int32_t line, const char *label, uint64_t n,
	  uint32_t nbuckets)
{
	trc_pack_array(b, 9);
	trc_pack_cstr(b, file);
	trc_pack_int(b, line);
	trc_pack_cstr(b, label);
	trc_pack_uint(b, n);
	trc_pack_uint(b, n * 100);
	trc_pack_uint(b, n * 10);
	trc_pack_array(b, nbuckets);
	for (uint32_t i = 0; i < nbuckets; i++)
		trc_pack_uint(b, i * n);
	trc_pack_cstr(b, n == 3 ? "/app/c.rb" : "");     /* an exception's app frame */
	trc_pack_int(b, n == 3 ? 42 : 0);
}

static void
build_path(struct trc_buf *b, uint32_t id, uint32_t parent, const char *file, const char *label,
	   uint64_t n)
{
	trc_pack_array(b, 7);
	trc_pack_uint(b, id);
	trc_pack_uint(b, parent);
	trc_pack_cstr(b, file);
	trc_pack_int(b, 7);
	trc_pack_cstr(b, label);
	trc_pack_uint(b, n);
	trc_pack_uint(b, n * 10);
}

static void
build_top(struct trc_buf *b)
{
	trc_pack_array(b, 9);
	trc_pack_uint(b, TRC_MSG_TOP);
	trc_pack_uint(b, 1000000000);
	trc_pack_uint(b, 99);
	trc_pack_uint(b, 1);
	trc_pack_uint(b, 7);
	trc_pack_uint(b, 2);
	trc_pack_uint(b, 12345678);
	trc_pack_array(b, 2);
	build_row(b, "app.rb", 12, "Foo#bar", 3, TRC_TOP_BUCKETS);
	build_row(b, "", -1, "Integer#+", 70000, 0);
	trc_pack_array(b, 2);
	build_path(b, 1, 0, "/app.rb", "Foo#bar", 3);
	build_path(b, 2, 1, "", "Integer#+", 5);
}

static int
check_top(const struct trc_message *m)
{
	const struct trc_top_row *r = m->top.rows;

	return m->top.elapsed_ns == 1000000000 && m->top.events == 99 && m->top.lost == 1 &&
	       m->top.gcs == 7 && m->top.major_gcs == 2 && m->top.gc_ns == 12345678 &&
	       m->top.nrows == 2 && streq(r[0].file, "app.rb") && r[0].line == 12 &&
	       streq(r[0].label, "Foo#bar") && r[0].count == 3 && r[0].total_ns == 300 &&
	       r[0].self_ns == 30 && r[0].nbuckets == TRC_TOP_BUCKETS && r[0].buckets[0] == 0 &&
	       r[0].buckets[TRC_TOP_BUCKETS - 1] == 3 * (TRC_TOP_BUCKETS - 1) && r[1].nbuckets == 0 &&
	       streq(r[0].app_file, "/app/c.rb") && r[0].app_line == 42 &&
	       streq(r[1].app_file, "") && r[1].app_line == 0 && streq(r[1].file, "") && r[1].line == -1 &&
	       r[1].count == 70000 && r[1].self_ns == 700000 && m->top.npaths == 2 &&
	       m->top.paths[0].id == 1 && m->top.paths[0].parent == 0 &&
	       streq(m->top.paths[0].file, "/app.rb") && m->top.paths[0].line == 7 &&
	       streq(m->top.paths[0].label, "Foo#bar") && m->top.paths[0].count == 3 &&
	       m->top.paths[0].self_ns == 30 && m->top.paths[1].id == 2 && m->top.paths[1].parent == 1 &&
	       streq(m->top.paths[1].label, "Integer#+") && m->top.paths[1].self_ns == 50;
}

static void
build_method(struct trc_buf *b)
{
	trc_pack_array(b, 7);
	trc_pack_uint(b, TRC_EV_METHOD);
	trc_pack_uint(b, 300);
	trc_pack_cstr(b, "Foo::Bar");
	trc_pack_cstr(b, "#");
	trc_pack_cstr(b, "baz?");
	trc_pack_cstr(b, "/srv/app/lib/foo/bar.rb");
	trc_pack_int(b, -1);
}

static int
check_method(const struct trc_message *m)
{
	return m->method.idx == 300 && streq(m->method.cls, "Foo::Bar") &&
	       streq(m->method.sep, "#") && streq(m->method.name, "baz?") &&
	       streq(m->method.path, "/srv/app/lib/foo/bar.rb") && m->method.line == -1;
}

static void
build_thread(struct trc_buf *b)
{
	trc_pack_array(b, 3);
	trc_pack_uint(b, TRC_EV_THREAD);
	trc_pack_uint(b, 65535);
	trc_pack_cstr(b, "worker-1");
}

static int
check_thread(const struct trc_message *m)
{
	return m->thread.idx == 65535 && streq(m->thread.name, "worker-1");
}

static void
build_call(struct trc_buf *b)
{
	trc_pack_array(b, 4);
	trc_pack_uint(b, TRC_EV_CALL);
	trc_pack_uint(b, 0);
	trc_pack_uint(b, 127);
	trc_pack_uint(b, 1ull << 40);
}

static int
check_call(const struct trc_message *m)
{
	return m->type == TRC_EV_CALL && m->call.thread == 0 && m->call.method == 127 &&
	       m->call.ts == 1ull << 40;
}

static void
build_return(struct trc_buf *b)
{
	trc_pack_array(b, 4);
	trc_pack_uint(b, TRC_EV_RETURN);
	trc_pack_uint(b, UINT32_MAX);
	trc_pack_uint(b, 128);
	trc_pack_uint(b, UINT64_MAX);
}

static int
check_return(const struct trc_message *m)
{
	return m->type == TRC_EV_RETURN && m->call.thread == UINT32_MAX &&
	       m->call.method == 128 && m->call.ts == UINT64_MAX;
}

static void
build_raise(struct trc_buf *b)
{
	trc_pack_array(b, 7);
	trc_pack_uint(b, TRC_EV_RAISE);
	trc_pack_uint(b, 1);
	trc_pack_uint(b, 123456789);
	trc_pack_cstr(b, "RuntimeError");
	trc_pack_cstr(b, "boom");
	trc_pack_cstr(b, "x.rb");
	trc_pack_int(b, INT32_MIN);
}

static int
check_raise(const struct trc_message *m)
{
	return m->raise.thread == 1 && m->raise.ts == 123456789 &&
	       streq(m->raise.cls, "RuntimeError") && streq(m->raise.message, "boom") &&
	       streq(m->raise.path, "x.rb") && m->raise.line == INT32_MIN;
}

static void
build_expr(struct trc_buf *b)
{
	trc_pack_array(b, 5);
	trc_pack_uint(b, TRC_EV_EXPR);
	trc_pack_uint(b, 1);
	trc_pack_uint(b, 0);
	trc_pack_uint(b, 2);
	trc_pack_cstr(b, "\"x.rb:3\"");
}

static int
check_expr(const struct trc_message *m)
{
	return m->expr.thread == 1 && m->expr.spec == 0 && m->expr.expr == 2 &&
	       streq(m->expr.text, "\"x.rb:3\"");
}

static void
build_slow(struct trc_buf *b)
{
	trc_pack_array(b, 6);
	trc_pack_uint(b, TRC_EV_SLOW);
	trc_pack_uint(b, 1);
	trc_pack_uint(b, 2);
	trc_pack_uint(b, 1000);
	trc_pack_uint(b, 250000000);
	trc_pack_uint(b, 3);
}

static int
check_slow(const struct trc_message *m)
{
	return m->slow.thread == 1 && m->slow.method == 2 && m->slow.start_ts == 1000 &&
	       m->slow.duration_ns == 250000000 && m->slow.depth == 3;
}

static void
build_lost(struct trc_buf *b)
{
	trc_pack_array(b, 2);
	trc_pack_uint(b, TRC_EV_LOST);
	trc_pack_uint(b, 12345);
}

static int
check_lost(const struct trc_message *m)
{
	return m->lost.count == 12345;
}

static void
build_gc(struct trc_buf *b)
{
	trc_pack_array(b, 6);
	trc_pack_uint(b, TRC_EV_GC);
	trc_pack_uint(b, TRC_GC_NO_THREAD);
	trc_pack_uint(b, 5000000000ull);
	trc_pack_uint(b, 1234567);
	trc_pack_bool(b, true);
	trc_pack_str(b, "nofree", 6);
}

static int
check_gc(const struct trc_message *m)
{
	return m->gc.thread == TRC_GC_NO_THREAD && m->gc.start_ts == 5000000000ull &&
	       m->gc.pause_ns == 1234567 && m->gc.major && streq(m->gc.reason, "nofree");
}

static void
build_mark(struct trc_buf *b)
{
	trc_pack_array(b, 4);
	trc_pack_uint(b, TRC_EV_THREAD_END);
	trc_pack_uint(b, 3);
	trc_pack_uint(b, 6000000000ull);
	trc_pack_str(b, "#<Thread:0x1@job-1 a.rb:2 run>", 30);
}

static int
check_mark(const struct trc_message *m)
{
	return m->mark.thread == 3 && m->mark.ts == 6000000000ull &&
	       streq(m->mark.text, "#<Thread:0x1@job-1 a.rb:2 run>");
}

static const struct sample {
	const char *name;
	uint32_t type;
	void (*build)(struct trc_buf *);
	int (*check)(const struct trc_message *);
} samples[] = {
	{ "WELCOME", TRC_MSG_WELCOME, build_welcome, check_welcome },
	{ "ERROR", TRC_MSG_ERROR, build_error, check_error },
	{ "SPEC", TRC_MSG_SPEC, build_spec, check_spec },
	{ "STARTED", TRC_MSG_STARTED, build_started, check_started },
	{ "PROGRESS", TRC_MSG_PROGRESS, build_progress, check_progress },
	{ "EVAL", TRC_MSG_EVAL, build_eval, check_eval },
	{ "EVAL failed", TRC_MSG_EVAL, build_eval_fail, check_eval_fail },
	{ "DETACHED", TRC_MSG_DETACHED, build_detached, check_detached },
	{ "TOP", TRC_MSG_TOP, build_top, check_top },
	{ "METHOD", TRC_EV_METHOD, build_method, check_method },
	{ "THREAD", TRC_EV_THREAD, build_thread, check_thread },
	{ "CALL", TRC_EV_CALL, build_call, check_call },
	{ "RETURN", TRC_EV_RETURN, build_return, check_return },
	{ "RAISE", TRC_EV_RAISE, build_raise, check_raise },
	{ "EXPR", TRC_EV_EXPR, build_expr, check_expr },
	{ "SLOW", TRC_EV_SLOW, build_slow, check_slow },
	{ "GC", TRC_EV_GC, build_gc, check_gc },
	{ "LOST", TRC_EV_LOST, build_lost, check_lost },
	{ "THREAD_END", TRC_EV_THREAD_END, build_mark, check_mark },
};
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

static void
test_round_trips(void)
{
	struct trc_decoder d;

	trc_decoder_init(&d);
	for (size_t i = 0; i < NSAMPLES; i++) {
		struct trc_buf b;
		struct trc_message m;
		size_t used = 0;
		char *copy;
		enum trc_decode_status st;

		trc_buf_init(&b);
		samples[i].build(&b);
		st = decode_exact(&d, b.data, b.len, &m, &used, &copy);
		test_note("round trip %s", samples[i].name);
		test_cond("decodes", st == TRC_DECODE_OK);
		test_cond("uses every byte", used == b.len);
		test_cond("has its type", m.type == samples[i].type);
		test_cond("fields survive", st == TRC_DECODE_OK && samples[i].check(&m));
		test_cond("names its type", trc_msg_name(m.type) != NULL);
		free(copy);
		trc_buf_release(&b);
	}
	trc_decoder_release(&d);
}

/* All samples back to back, decoded one after the other as the connection does. */
static void
test_stream(void)
{
	struct trc_decoder d;
	struct trc_buf b;
	struct trc_message m;
	size_t off = 0, used, n = 0;
	int all_ok = 1;

	trc_decoder_init(&d);
	trc_buf_init(&b);
	for (size_t i = 0; i < NSAMPLES; i++)
		samples[i].build(&b);
	while (off < b.len && trc_decode(&d, b.data + off, b.len - off, &m, &used) == TRC_DECODE_OK) {
		all_ok &= samples[n].check(&m);
		off += used;
		n++;
	}
	test_cond("stream: every message decodes in turn", n == NSAMPLES && off == b.len);
	test_cond("stream: fields survive", all_ok);
	trc_buf_release(&b);
	trc_decoder_release(&d);
}

/* Every proper prefix of every sample asks for more bytes, and says how many at least. */
static void
test_truncation(void)
{
	struct trc_decoder d;
	int more = 1, need_ok = 1, total = 0;

	trc_decoder_init(&d);
	for (size_t i = 0; i < NSAMPLES; i++) {
		struct trc_buf b;

		trc_buf_init(&b);
		samples[i].build(&b);
		for (size_t cut = 0; cut < b.len; cut++) {
			struct trc_message m;
			size_t used;
			char *copy;

			d.need = 0;
			more &= decode_exact(&d, b.data, cut, &m, &used, &copy) == TRC_DECODE_MORE;
			need_ok &= d.need > cut && d.need <= b.len;
			free(copy);
			total++;
		}
		trc_buf_release(&b);
	}
	test_note("%d truncated messages", total);
	test_cond("truncated at every byte: MORE", more);
	test_cond("truncated at every byte: need is past the cut, within the message", need_ok);
	trc_decoder_release(&d);
}

static enum trc_decode_status
decode_bytes(const uint8_t *p, size_t len, struct trc_message *m, struct trc_decoder *d)
{
	size_t used;
	char *copy;
	enum trc_decode_status st = decode_exact(d, p, len, m, &used, &copy);

	free(copy);
	return st;
}

static void
test_integer_encodings(void)
{
	/* CALL with thread as int8 5, method as int16 7, ts as int64 9: signed forms of positives */
	static const uint8_t signed_ok[] = { 0x94, 0xcc, 130, 0xd0, 5, 0xd1, 0, 7,
					     0xd3, 0, 0, 0, 0, 0, 0, 0, 9 };
	static const uint8_t negative[] = { 0x94, 0xcc, 130, 0xff, 0, 0 };
	static const uint8_t neg_int64[] = { 0x94, 0xcc, 130, 0, 0, 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0 };
	static const uint8_t u32_over[] = { 0x94, 0xcc, 130, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
	static const uint8_t u32_max[] = { 0x94, 0xcc, 130, 0xce, 0xff, 0xff, 0xff, 0xff, 0, 0 };
	/* RAISE line: int32 min is fine, one below is not, 2^31 is not */
	static const uint8_t line_min[] = { 0x97, 0xcc, 132, 0, 0, 0xa0, 0xa0, 0xa0,
					    0xd2, 0x80, 0, 0, 0 };
	static const uint8_t line_low[] = { 0x97, 0xcc, 132, 0, 0, 0xa0, 0xa0, 0xa0,
					    0xd3, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff };
	static const uint8_t line_high[] = { 0x97, 0xcc, 132, 0, 0, 0xa0, 0xa0, 0xa0,
					     0xce, 0x80, 0, 0, 0 };
	static const uint8_t line_neg[] = { 0x97, 0xcc, 132, 0, 0, 0xa0, 0xa0, 0xa0, 0xe0 };
	/* EVAL ok as an integer; type itself as a uint16 */
	static const uint8_t ok_int[] = { 0x94, 0xcd, 0, 68, 1, 1, 0xa0 };
	struct trc_decoder d;
	struct trc_message m;

	trc_decoder_init(&d);
	test_cond("signed encodings of positive values",
		  decode_bytes(signed_ok, sizeof(signed_ok), &m, &d) == TRC_DECODE_OK &&
		  m.call.thread == 5 && m.call.method == 7 && m.call.ts == 9);
	test_cond("negative fixint for unsigned field",
		  decode_bytes(negative, sizeof(negative), &m, &d) == TRC_DECODE_ERROR);
	test_cond("negative int64 for unsigned field",
		  decode_bytes(neg_int64, sizeof(neg_int64), &m, &d) == TRC_DECODE_ERROR);
	test_cond("2^32 for a 32-bit field",
		  decode_bytes(u32_over, sizeof(u32_over), &m, &d) == TRC_DECODE_ERROR);
	test_cond("error names message and element", strstr(d.error, "CALL element 1") != NULL);
	test_cond("2^32-1 for a 32-bit field",
		  decode_bytes(u32_max, sizeof(u32_max), &m, &d) == TRC_DECODE_OK &&
		  m.call.thread == UINT32_MAX);
	test_cond("int32 min line",
		  decode_bytes(line_min, sizeof(line_min), &m, &d) == TRC_DECODE_OK &&
		  m.raise.line == INT32_MIN);
	test_cond("line below int32",
		  decode_bytes(line_low, sizeof(line_low), &m, &d) == TRC_DECODE_ERROR);
	test_cond("line above int32",
		  decode_bytes(line_high, sizeof(line_high), &m, &d) == TRC_DECODE_ERROR);
	test_cond("negative fixint line",
		  decode_bytes(line_neg, sizeof(line_neg), &m, &d) == TRC_DECODE_OK &&
		  m.raise.line == -32);
	test_cond("integer bool, uint16 type",
		  decode_bytes(ok_int, sizeof(ok_int), &m, &d) == TRC_DECODE_OK && m.eval.ok);
	trc_decoder_release(&d);
}

/* Values at each encoding boundary survive a round trip through CALL's ts. */
static void
test_integer_widths(void)
{
	static const uint64_t values[] = { 0, 1, 127, 128, 255, 256, 65535, 65536, 0xffffffffull,
					   0x100000000ull, UINT64_MAX };
	struct trc_decoder d;
	int ok = 1;

	trc_decoder_init(&d);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		struct trc_buf b;
		struct trc_message m;

		trc_buf_init(&b);
		trc_pack_array(&b, 4);
		trc_pack_uint(&b, TRC_EV_CALL);
		trc_pack_uint(&b, 1);
		trc_pack_uint(&b, 2);
		trc_pack_uint(&b, values[i]);
		ok &= decode_bytes((uint8_t *)b.data, b.len, &m, &d) == TRC_DECODE_OK &&
		      m.call.ts == values[i];
		trc_buf_release(&b);
	}
	test_cond("integers at every width boundary", ok);
	/* Calls and returns have a quick reader: thread and method at every width, both types. */
	ok = 1;
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]) && values[i] <= UINT32_MAX; i++) {
		for (uint32_t type = TRC_EV_CALL; type <= TRC_EV_RETURN; type++) {
			struct trc_buf b;
			struct trc_message m;
			size_t used = 0;

			trc_buf_init(&b);
			trc_pack_array(&b, 4);
			trc_pack_uint(&b, type);
			trc_pack_uint(&b, values[i]);
			trc_pack_uint(&b, values[(i + 3) % 9]);
			trc_pack_uint(&b, 1ull << 40);
			trc_buf_add(&b, "\x90", 1);     /* the next message's first byte */
			ok &= trc_decode(&d, b.data, b.len, &m, &used) == TRC_DECODE_OK && used == b.len - 1 &&
			      m.type == type && m.call.thread == values[i] &&
			      m.call.method == values[(i + 3) % 9] && m.call.ts == 1ull << 40;
			trc_buf_release(&b);
		}
	}
	test_cond("calls and returns: thread and method at every width", ok);
	trc_decoder_release(&d);
}

/*
 * A spooling reader skips calls and returns without decoding them: it must find the same ends
 * as the decoder, and leave anything else, or anything cut short, to it.
 */
static void
test_skip_calls(void)
{
	static const uint64_t values[] = { 0, 1, 127, 128, 255, 256, 65535, 65536, 0xffffffffull,
					   0x100000000ull, UINT64_MAX };
	struct trc_decoder d;
	struct trc_buf b, one;
	struct trc_message m;
	size_t off = 0, used, skipped;
	uint64_t count = 7, calls = 0;
	int ok = 1;

	trc_decoder_init(&d);
	trc_buf_init(&b);
	for (size_t i = 0; i < 9; i++)
		for (size_t j = 0; j < 9; j++)
			for (size_t k = 0; k < 11; k += 2, calls++) {
				trc_pack_array(&b, 4);
				trc_pack_uint(&b, calls % 2 ? TRC_EV_RETURN : TRC_EV_CALL);
				trc_pack_uint(&b, values[i]);
				trc_pack_uint(&b, values[j]);
				trc_pack_uint(&b, values[k]);
			}
	trc_buf_init(&one);
	trc_pack_array(&one, 2);
	trc_pack_uint(&one, TRC_EV_LOST);
	trc_pack_uint(&one, 5);
	trc_buf_add(&b, one.data, one.len);
	skipped = trc_decode_skip_calls(b.data, b.len, &count);
	while (off < b.len && trc_decode(&d, b.data + off, b.len - off, &m, &used) == TRC_DECODE_OK &&
	       (m.type == TRC_EV_CALL || m.type == TRC_EV_RETURN))
		off += used;
	test_cond("skipping calls: the decoder's ends, at every width, up to the next message",
		  skipped == off && skipped == b.len - one.len && count == 7 + calls);

	/* The first call alone, cut at every length: nothing skipped, nothing counted. */
	trc_buf_release(&one);
	trc_buf_init(&one);
	trc_pack_array(&one, 4);
	trc_pack_uint(&one, TRC_EV_CALL);
	trc_pack_uint(&one, 70000);
	trc_pack_uint(&one, 300);
	trc_pack_uint(&one, UINT64_MAX);
	for (size_t cut = 0; cut < one.len; cut++) {
		uint8_t *p = malloc(cut ? cut : 1);

		memcpy(p, one.data, cut);
		count = 0;
		ok &= trc_decode_skip_calls(p, cut, &count) == 0 && count == 0;
		free(p);
	}
	test_cond("skipping calls: a call cut short is left whole", ok);

	/* A thread or method wider than 32 bits is the decoder's to refuse. */
	ok = 1;
	for (int which = 0; which < 2; which++) {
		trc_buf_release(&one);
		trc_buf_init(&one);
		trc_pack_array(&one, 4);
		trc_pack_uint(&one, TRC_EV_RETURN);
		trc_pack_uint(&one, which == 0 ? 0x100000000ull : 1);
		trc_pack_uint(&one, which == 1 ? 0x100000000ull : 1);
		trc_pack_uint(&one, 1);
		count = 0;
		ok &= trc_decode_skip_calls(one.data, one.len, &count) == 0 && count == 0 &&
		      trc_decode(&d, one.data, one.len, &m, &used) == TRC_DECODE_ERROR;
	}
	test_cond("skipping calls: a thread or method over 32 bits is not skipped", ok);
	trc_buf_release(&one);
	trc_buf_release(&b);
	trc_decoder_release(&d);
}

/* Strings of every header size, as str and bin (an error's text: names are bounded, below). */
static void
test_string_widths(void)
{
	static const size_t lens[] = { 0, 1, 31, 32, 255, 256, 65535, 65536 };
	struct trc_decoder d;
	char *text = malloc(65536);
	int ok = 1;

	memset(text, 'q', 65536);
	trc_decoder_init(&d);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (int bin = 0; bin < 2; bin++) {
			struct trc_buf b;
			struct trc_message m;
			size_t used;
			char *copy;

			trc_buf_init(&b);
			trc_pack_array(&b, 3);
			trc_pack_uint(&b, TRC_MSG_ERROR);
			trc_pack_uint(&b, 1);
			if (bin)
				trc_pack_bin(&b, text, lens[i]);
			else
				trc_pack_str(&b, text, lens[i]);
			ok &= decode_exact(&d, b.data, b.len, &m, &used, &copy) == TRC_DECODE_OK &&
			      m.error.message.len == lens[i] &&
			      memcmp(m.error.message.ptr, text, lens[i]) == 0;
			free(copy);
			trc_buf_release(&b);
		}
	}
	test_cond("strings at every width boundary, str and bin", ok);
	trc_decoder_release(&d);
	free(text);
}

/* A TOP message of two rows: a long file and label, then short ones. */
static void
build_top_long(struct trc_buf *b, const char *text, size_t len)
{
	trc_pack_array(b, TRC_MSG_TOP_FIELDS);
	trc_pack_uint(b, TRC_MSG_TOP);
	for (int i = 0; i < 6; i++)
		trc_pack_uint(b, 0);
	trc_pack_array(b, 2);
	for (int i = 0; i < 2; i++) {
		trc_pack_array(b, 9);
		trc_pack_str(b, text, i == 0 ? len : 4);
		trc_pack_int(b, 1);
		trc_pack_bin(b, text, i == 0 ? len - 1 : 3);
		trc_pack_uint(b, 1);
		trc_pack_uint(b, 0);
		trc_pack_uint(b, 0);
		trc_pack_array(b, 0);
		trc_pack_cstr(b, "");
		trc_pack_int(b, 0);
	}
	/* a call path named alike (--top time --format flamegraph) */
	trc_pack_array(b, 1);
	trc_pack_array(b, 7);
	trc_pack_uint(b, 1);
	trc_pack_uint(b, 0);
	trc_pack_str(b, text, len);
	trc_pack_int(b, 1);
	trc_pack_bin(b, text, len - 1);
	trc_pack_uint(b, 1);
	trc_pack_uint(b, 0);
}

/* Whether s is text[0..len) bounded as escape.h says. */
static int
is_bounded(struct trc_str s, const char *text, size_t len)
{
	struct trc_buf want;
	int ok;

	trc_buf_init(&want);
	trc_name_bound(&want, text, len);
	ok = s.len == want.len && memcmp(s.ptr, want.data, want.len) == 0;
	trc_buf_release(&want);
	return ok;
}

/* Names past TRC_NAME_MAX arrive cut, once, for every output; the other strings whole. */
static void
test_names_bounded(void)
{
	enum { LEN = 1 << 20 };
	char *text = malloc(LEN), *copy;
	struct trc_decoder d;
	struct trc_message m;
	struct trc_buf b;
	size_t used;

	memset(text, 'n', LEN);
	text[LEN / 2] = 'm';
	trc_decoder_init(&d);
	trc_buf_init(&b);
	test_note("a method, a thread, TOP rows named with a megabyte");
	trc_pack_array(&b, TRC_EV_METHOD_FIELDS);
	trc_pack_uint(&b, TRC_EV_METHOD);
	trc_pack_uint(&b, 3);
	trc_pack_str(&b, text, TRC_NAME_MAX + 1);
	trc_pack_cstr(&b, "#");
	trc_pack_bin(&b, text, LEN);
	trc_pack_str(&b, text, TRC_NAME_MAX);
	trc_pack_int(&b, 7);
	test_cond("METHOD decodes", decode_exact(&d, b.data, b.len, &m, &used, &copy) == TRC_DECODE_OK &&
		  used == b.len);
	test_cond("a class one byte too long: cut", is_bounded(m.method.cls, text, TRC_NAME_MAX + 1) &&
		  m.method.cls.len > TRC_NAME_MAX);
	test_cond("a megabyte name: cut, in the decoder", is_bounded(m.method.name, text, LEN) &&
		  m.method.name.len < TRC_NAME_MAX + 64 &&
		  (m.method.name.ptr < copy || m.method.name.ptr >= copy + b.len));
	test_cond("a file of TRC_NAME_MAX bytes: whole, in place",
		  m.method.path.len == TRC_NAME_MAX && m.method.path.ptr >= copy &&
		  m.method.path.ptr < copy + b.len);
	test_cond("the rest as it was", m.method.idx == 3 && m.method.line == 7 &&
		  m.method.sep.len == 1 && m.method.sep.ptr[0] == '#');
	free(copy);

	b.len = 0;
	trc_pack_array(&b, TRC_EV_THREAD_FIELDS);
	trc_pack_uint(&b, TRC_EV_THREAD);
	trc_pack_uint(&b, 1);
	trc_pack_str(&b, text, LEN);
	test_cond("a thread: cut", decode_exact(&d, b.data, b.len, &m, &used, &copy) == TRC_DECODE_OK &&
		  is_bounded(m.thread.name, text, LEN));
	free(copy);

	b.len = 0;
	build_top_long(&b, text, LEN);
	test_cond("TOP rows: long file and label cut, short ones kept",
		  decode_exact(&d, b.data, b.len, &m, &used, &copy) == TRC_DECODE_OK && m.top.nrows == 2 &&
		  is_bounded(m.top.rows[0].file, text, LEN) &&
		  is_bounded(m.top.rows[0].label, text, LEN - 1) &&
		  m.top.rows[1].file.len == 4 && m.top.rows[1].label.len == 3 && m.top.npaths == 1 &&
		  is_bounded(m.top.paths[0].file, text, LEN) && is_bounded(m.top.paths[0].label, text, LEN - 1));
	free(copy);

	b.len = 0;
	trc_pack_array(&b, TRC_EV_RAISE_FIELDS);
	trc_pack_uint(&b, TRC_EV_RAISE);
	trc_pack_uint(&b, 0);
	trc_pack_uint(&b, 5);
	trc_pack_str(&b, text, LEN);
	trc_pack_str(&b, text, 70000);
	trc_pack_str(&b, text, LEN);
	trc_pack_int(&b, 2);
	test_cond("RAISE: class and file cut, the message not (the agent bounds it)",
		  decode_exact(&d, b.data, b.len, &m, &used, &copy) == TRC_DECODE_OK &&
		  is_bounded(m.raise.cls, text, LEN) && is_bounded(m.raise.path, text, LEN) &&
		  m.raise.message.len == 70000);
	free(copy);
	trc_buf_release(&b);
	trc_decoder_release(&d);
	free(text);
}

static void
test_wrong_shapes(void)
{
	static const struct {
		const char *descr;
		uint8_t bytes[24];
		size_t len;
	} cases[] = {
		{ "not an array", { 0x05 }, 1 },
		{ "a map", { 0x81, 0x01, 0x02 }, 3 },
		{ "empty array", { 0x90 }, 1 },
		{ "type is a string", { 0x91, 0xa1, 'a' }, 3 },
		{ "type is nil", { 0x91, 0xc0 }, 2 },
		{ "unknown type 99", { 0x91, 99 }, 2 },
		{ "client command type", { 0x91, 1 }, 2 },
		{ "type 0", { 0x91, 0 }, 2 },
		{ "type past the table", { 0x91, 0xcc, 200 }, 3 },
		{ "CALL with 3 elements", { 0x93, 0xcc, 130, 1, 2 }, 5 },
		{ "STARTED with 2 elements", { 0x92, 67, 1 }, 3 },
		{ "CALL thread is a string", { 0x94, 0xcc, 130, 0xa1, 'x', 1, 2 }, 7 },
		{ "CALL method is nil", { 0x94, 0xcc, 130, 1, 0xc0, 2 }, 6 },
		{ "CALL ts is a float", { 0x94, 0xcc, 130, 1, 2, 0xca, 0, 0, 0, 0 }, 10 },
		{ "CALL ts is a bool", { 0x94, 0xcc, 130, 1, 2, 0xc3 }, 6 },
		{ "THREAD name is an int", { 0x93, 0xcc, 129, 1, 2 }, 5 },
		{ "THREAD name is an array", { 0x93, 0xcc, 129, 1, 0x90 }, 5 },
		{ "EVAL ok is a string", { 0x94, 68, 1, 0xa1, 't', 0xa0 }, 6 },
		{ "TOP rows is an int", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0, 0x90 }, 10 },
		{ "TOP row of 5", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x91, 0x95, 0xa0, 0, 0xa0, 0, 0, 0, 0x90 }, 17 },
		{ "TOP row of 6 (before buckets)", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x91, 0x96, 0xa0, 0, 0xa0, 0, 0, 0,
						     0x90 }, 17 },
		{ "TOP row of 3 buckets", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x91, 0x97, 0xa0, 0, 0xa0, 0, 0, 0,
					    0x93, 1, 2, 3, 0x90 }, 21 },
		{ "TOP of 5", { 0x95, 70, 0, 0, 0, 0x90 }, 6 },
		{ "TOP of 8 (protocol 11)", { 0x98, 70, 0, 0, 0, 0, 0, 0, 0x90 }, 9 },
		{ "TOP gcs is a string", { 0x99, 70, 0, 0, 0, 0xa0, 0, 0, 0x90, 0x90 }, 10 },
		{ "TOP row file is an int", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x91, 0x97, 1, 0, 0xa0, 0, 0, 0, 0x90, 0x90 }, 18 },
		{ "TOP paths is an int", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x90, 0 }, 10 },
		{ "TOP path of 6", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x90, 0x91, 0x96, 1, 0, 0xa1, 0x78, 0, 0xa0, 0 }, 18 },
		{ "TOP path id 0", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x90, 0x91, 0x97, 0, 0, 0xa0, 0, 0xa0, 0, 0 }, 18 },
		{ "TOP path its own parent", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x90, 0x91, 0x97, 3, 3, 0xa0, 0, 0xa0, 0, 0 }, 18 },
		{ "TOP path id past the most", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x90, 0x91, 0x97, 0xce, 0, 1, 0, 1, 0, 0xa0, 0, 0xa0, 0, 0 }, 22 },
		{ "TOP path label is an int", { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x90, 0x91, 0x97, 1, 0, 0xa0, 0, 1, 0, 0 }, 18 },
		{ "ext type", { 0x92, 0xcc, 135, 0xd4, 1, 1 }, 6 },
		{ "reserved byte 0xc1", { 0x92, 0xcc, 135, 0xc1 }, 4 },
		{ "THREAD_BEGIN of 3", { 0x93, 0xcc, 137, 1, 2 }, 5 },
		{ "THREAD_END text is an int", { 0x94, 0xcc, 138, 1, 2, 3 }, 6 },
		{ "a type past the marks", { 0x94, 0xcc, 139, 1, 2, 0xa0 }, 6 },
	};
	struct trc_decoder d;

	trc_decoder_init(&d);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct trc_message m;

		d.error[0] = '\0';
		test_cond(cases[i].descr,
			  decode_bytes(cases[i].bytes, cases[i].len, &m, &d) == TRC_DECODE_ERROR &&
			  d.error[0] != '\0');
	}
	trc_decoder_release(&d);
}

/* Marks are named by their own line of TRC_MARKS, in errors too. */
static void
test_mark_names(void)
{
	static const uint8_t short_end[] = { 0x93, 0xcc, 138, 1, 2 };
	const struct trc_mark_type *k = trc_mark_type(TRC_EV_THREAD_BEGIN);
	struct trc_decoder d;
	struct trc_message m;

	test_cond("THREAD_BEGIN is a mark", k != NULL && strcmp(k->name, "thread_begin") == 0 &&
		  strcmp(k->title, "THREAD BEGIN") == 0);
	test_cond("GC is none", trc_mark_type(TRC_EV_GC) == NULL);
	test_cond("nor a reply", trc_mark_type(TRC_MSG_TOP) == NULL);
	test_str("its protocol name", trc_msg_name(TRC_EV_THREAD_END), "THREAD_END");
	trc_decoder_init(&d);
	decode_bytes(short_end, sizeof(short_end), &m, &d);
	test_str("an error names it", d.error, "THREAD_END has 3 elements, not 4");
	trc_decoder_release(&d);
}

static void
test_huge_lengths(void)
{
	static const uint8_t outer[] = { 0xdd, 0xff, 0xff, 0xff, 0xff, 0xcc, 130 };
	static const uint8_t outer_short[] = { 0xdd, 0xff, 0xff, 0xff, 0xff };
	static const uint8_t str32[] = { 0x93, 0xcc, 129, 1, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a' };
	static const uint8_t bin32[] = { 0x93, 0xcc, 129, 1, 0xc6, 0x04, 0x00, 0x00, 0x01 };
	static const uint8_t str_60m[] = { 0x93, 0xcc, 129, 1, 0xdb, 0x03, 0xc0, 0x00, 0x00, 'a' };
	static const uint8_t rows_huge[] = { 0x99, 70, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff };
	static const uint8_t rows_max1[] = { 0x99, 70, 0, 0, 0, 0, 0, 0, 0xdd, 0x00, 0x01, 0x00, 0x01 };
	static const uint8_t rows_1000[] = { 0x99, 70, 0, 0, 0, 0, 0, 0, 0xdc, 0x03, 0xe8, 0x97 };
	static const uint8_t paths_huge[] = { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x90, 0xdd, 0xff, 0xff, 0xff, 0xff };
	static const uint8_t paths_max1[] = { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x90, 0xdd, 0x00, 0x01, 0x00, 0x01 };
	static const uint8_t paths_1000[] = { 0x99, 70, 0, 0, 0, 0, 0, 0, 0x90, 0xdc, 0x03, 0xe8, 0x97 };
	static const uint8_t array16[] = { 0xdc, 0xff, 0xff };
	struct trc_decoder d;
	struct trc_message m;

	trc_decoder_init(&d);
	test_cond("4G-element message",
		  decode_bytes(outer, sizeof(outer), &m, &d) == TRC_DECODE_ERROR);
	test_cond("4G-element header alone waits for the type",
		  decode_bytes(outer_short, sizeof(outer_short), &m, &d) == TRC_DECODE_MORE);
	test_cond("4 GiB string", decode_bytes(str32, sizeof(str32), &m, &d) == TRC_DECODE_ERROR);
	test_cond("says too large", strstr(d.error, "too large") != NULL);
	test_cond("64 MiB bin", decode_bytes(bin32, sizeof(bin32), &m, &d) == TRC_DECODE_ERROR);
	test_cond("60 MiB string is waited for",
		  decode_bytes(str_60m, sizeof(str_60m), &m, &d) == TRC_DECODE_MORE &&
		  d.need == 9 + (60u << 20));
	test_cond("4G TOP rows", decode_bytes(rows_huge, sizeof(rows_huge), &m, &d) ==
				 TRC_DECODE_ERROR);
	test_cond("one row over the limit",
		  decode_bytes(rows_max1, sizeof(rows_max1), &m, &d) == TRC_DECODE_ERROR);
	test_cond("1000 rows not yet here: no allocation, MORE",
		  decode_bytes(rows_1000, sizeof(rows_1000), &m, &d) == TRC_DECODE_MORE &&
		  d.rows_cap == 0 && d.need == 11 + 8000);
	test_cond("4G TOP paths", decode_bytes(paths_huge, sizeof(paths_huge), &m, &d) ==
				  TRC_DECODE_ERROR);
	test_cond("one path over the limit",
		  decode_bytes(paths_max1, sizeof(paths_max1), &m, &d) == TRC_DECODE_ERROR);
	test_cond("1000 paths not yet here: no allocation, MORE",
		  decode_bytes(paths_1000, sizeof(paths_1000), &m, &d) == TRC_DECODE_MORE &&
		  d.paths_cap == 0 && d.need == 12 + 8000);
	test_cond("array16 header alone",
		  decode_bytes(array16, sizeof(array16), &m, &d) == TRC_DECODE_MORE);
	trc_decoder_release(&d);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t
next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* Decodes buf as a stream until it stops; checks the decoder's promises on the way. */
static int
decode_all(struct trc_decoder *d, const uint8_t *buf, size_t len)
{
	size_t off = 0, used;
	struct trc_message m;

	for (;;) {
		enum trc_decode_status st = trc_decode(d, buf + off, len - off, &m, &used);

		if (st == TRC_DECODE_ERROR)
			return d->error[0] != '\0';
		if (st == TRC_DECODE_MORE)
			return d->need > len - off && d->need <= TRC_DECODE_MAX_MSG;
		if (used == 0 || used > len - off)
			return 0;
		off += used;
	}
}

static void
test_garbage(void)
{
	struct trc_decoder d;
	struct trc_buf valid;
	int ok = 1;

	trc_decoder_init(&d);
	for (int i = 0; i < 200000; i++) {
		size_t len = next_random() % 48;
		uint8_t *p = malloc(len ? len : 1);

		for (size_t j = 0; j < len; j++)
			p[j] = (uint8_t)next_random();
		/* Make most of them look like a message so decoding goes deeper. */
		if (len > 2 && i % 2)
			p[0] = (uint8_t)(0x90 | (next_random() % 8)), p[1] = (uint8_t)(64 + next_random() % 72);
		ok &= decode_all(&d, p, len);
		free(p);
	}
	test_cond("random bytes: never crashes, keeps its promises", ok);

	trc_buf_init(&valid);
	for (size_t i = 0; i < NSAMPLES; i++)
		if (samples[i].type != TRC_MSG_EVAL)   /* keep it small: fuzz faster */
			samples[i].build(&valid);
	for (int i = 0; i < 20000; i++) {
		size_t cut = next_random() % valid.len + 1;
		uint8_t *p = malloc(cut);

		memcpy(p, valid.data, cut);
		for (uint32_t k = next_random() % 4 + 1; k > 0; k--)
			p[next_random() % cut] = (uint8_t)next_random();
		ok &= decode_all(&d, p, cut);
		free(p);
	}
	test_cond("mutated messages: never crashes, keeps its promises", ok);
	trc_buf_release(&valid);
	trc_decoder_release(&d);
}

void
test_decode(void)
{
	memset(long_cwd, 'c', sizeof(long_cwd) - 1);
	memset(big_text, 't', sizeof(big_text) - 1);
	test_round_trips();
	test_stream();
	test_truncation();
	test_integer_encodings();
	test_integer_widths();
	test_skip_calls();
	test_string_widths();
	test_names_bounded();
	test_wrong_shapes();
	test_mark_names();
	test_huge_lengths();
	test_garbage();
}
