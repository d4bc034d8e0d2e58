/* test_trace.c: the call-tree printer, event sequences in, exact text out. */
#include <stdlib.h>
#include <time.h>

#include "output.h"
#include "replay.h"
#include "spec.h"
#include "test.h"
#include "trace.h"

#define US 1000ull
#define MS 1000000ull

static struct trc_output out;

static struct trc_str
S(const char *s)
{
	return (struct trc_str){ s, (uint32_t)strlen(s) };
}

static int
feed(struct trc_trace *t, struct trc_message m)
{
	return trc_trace_feed(t, &m);
}

static void
method(struct trc_trace *t, uint32_t idx, const char *cls, const char *sep, const char *name)
{
	struct trc_message m = { .type = TRC_EV_METHOD };

	m.method.idx = idx;
	m.method.cls = S(cls);
	m.method.sep = S(sep);
	m.method.name = S(name);
	m.method.path = S("x.rb");
	feed(t, m);
}

static void
thread(struct trc_trace *t, uint32_t idx, const char *name)
{
	struct trc_message m = { .type = TRC_EV_THREAD };

	m.thread.idx = idx;
	m.thread.name = S(name);
	feed(t, m);
}

static int
event(struct trc_trace *t, uint32_t type, uint32_t th, uint32_t meth, uint64_t ts)
{
	struct trc_message m = { .type = type };

	m.call.thread = th;
	m.call.method = meth;
	m.call.ts = ts;
	return feed(t, m);
}

static void
call(struct trc_trace *t, uint32_t th, uint32_t meth, uint64_t ts)
{
	event(t, TRC_EV_CALL, th, meth, ts);
}

static void
ret(struct trc_trace *t, uint32_t th, uint32_t meth, uint64_t ts)
{
	event(t, TRC_EV_RETURN, th, meth, ts);
}

static void
expr(struct trc_trace *t, uint32_t th, uint32_t spec, uint32_t e, const char *text)
{
	struct trc_message m = { .type = TRC_EV_EXPR };

	m.expr.thread = th;
	m.expr.spec = spec;
	m.expr.expr = e;
	m.expr.text = S(text);
	feed(t, m);
}

static void
slow(struct trc_trace *t, uint32_t meth, uint64_t dur, uint32_t depth)
{
	struct trc_message m = { .type = TRC_EV_SLOW };

	m.slow.thread = 0;
	m.slow.method = meth;
	m.slow.start_ts = 5 * MS;
	m.slow.duration_ns = dur;
	m.slow.depth = depth;
	feed(t, m);
}

static void
raise_ev(struct trc_trace *t, uint32_t th, const char *cls, const char *msg, const char *path)
{
	struct trc_message m = { .type = TRC_EV_RAISE };

	m.raise.thread = th;
	m.raise.ts = 7 * MS;
	m.raise.cls = S(cls);
	m.raise.message = S(msg);
	m.raise.path = S(path);
	m.raise.line = 3;
	feed(t, m);
}

/* The trace text so far, NUL-terminated in place. */
static const char *
text(void)
{
	trc_buf_addc(&out.out, '\0');
	out.out.len--;
	return out.out.data;
}

static const char *
notes(void)
{
	trc_buf_addc(&out.err, '\0');
	out.err.len--;
	return out.err.data;
}

static struct trc_trace *
start(unsigned prefix, bool start_time, bool no_duration)
{
	struct trc_trace_opts o = { .prefix = prefix, .start_time = start_time,
				    .no_duration = no_duration };

	trc_output_release(&out);
	trc_output_init(&out, -1, -1);
	return trc_trace_new(&out, &o, NULL, 0);
}

/* The rbtrace README's firehose tree, timings included. */
static void
define_tree(struct trc_trace *t)
{
	method(t, 0, "Proc", "#", "call");
	method(t, 1, "Dir", ".", "chdir");
	method(t, 2, "Dir", ".", "pwd");
	method(t, 3, "String", "#", "gsub");
	method(t, 4, "String", "#", "*");
}

static void
play_tree(struct trc_trace *t)
{
	call(t, 0, 0, 0);
	call(t, 0, 1, 10 * US);
	call(t, 0, 2, 20 * US);
	ret(t, 0, 2, 80 * US);
	call(t, 0, 3, 100 * US);
	call(t, 0, 4, 110 * US);
	ret(t, 0, 4, 133 * US);
	ret(t, 0, 3, 227 * US);
	ret(t, 0, 1, 300 * US);
	ret(t, 0, 0, 1500 * MS);
}

static void
test_tree(void)
{
	struct trc_trace *t = start(2, false, false);

	define_tree(t);
	play_tree(t);
	test_str("tree with leaves on one line, blank line after it", text(),
		 "Proc#call\n"
		 "  Dir.chdir\n"
		 "    Dir.pwd <0.000060000>\n"
		 "    String#gsub\n"
		 "      String#* <0.000023000>\n"
		 "    String#gsub <0.000127000>\n"
		 "  Dir.chdir <0.000290000>\n"
		 "Proc#call <1.500000000>\n"
		 "\n");
	trc_trace_free(t);
}

static void
test_no_duration_prefix(void)
{
	struct trc_trace *t = start(4, false, true);

	define_tree(t);
	play_tree(t);
	test_str("-n -r 4", text(),
		 "Proc#call\n"
		 "    Dir.chdir\n"
		 "        Dir.pwd\n"
		 "        String#gsub\n"
		 "            String#*\n"
		 "        String#gsub\n"
		 "    Dir.chdir\n"
		 "Proc#call\n"
		 "\n");
	trc_trace_free(t);
}

static void
test_leaf_at_top(void)
{
	struct trc_trace *t = start(2, false, false);

	method(t, 0, "Kernel", "#", "sleep");
	method(t, 1, "", "", "puts");
	call(t, 0, 0, 1 * MS);
	ret(t, 0, 0, 501 * MS);
	call(t, 0, 1, 600 * MS);
	ret(t, 0, 1, 600 * MS + 1499);
	call(t, 0, 7, 0);
	ret(t, 0, 7, 499);
	call(t, 0, 1, 900 * MS);
	ret(t, 0, 1, 800 * MS);
	call(t, 0, 0, 0);
	ret(t, 0, 0, 3661500 * MS);
	test_str("top-level leaves: no blank line; bare names; every nanosecond shown", text(),
		 "Kernel#sleep <0.500000000>\n"
		 "puts <0.000001499>\n"
		 "(unknown) <0.000000499>\n"
		 "puts <0.000000000>\n"
		 "Kernel#sleep <3661.500000000>\n");
	trc_trace_free(t);
}

static void
test_start_time(void)
{
	struct trc_trace *t = start(2, true, false);

	setenv("TZ", "UTC", 1);
	tzset();
	/* realtime 1700000000 s is 22:13:20 UTC */
	trc_trace_set_clock(t, 1000, 1700000000ull * 1000000000ull);
	method(t, 0, "Foo", "#", "a");
	method(t, 1, "Foo", "#", "b");
	call(t, 0, 0, 1000 + 1500 * US);
	call(t, 0, 1, 1000 + 1 * 1000 * MS + 2 * US);
	ret(t, 0, 1, 1000 + 1 * 1000 * MS + 5 * US);
	ret(t, 0, 0, 1000 + 2 * 1000 * MS);
	test_str("-t: start times, closing lines padded", text(),
		 "22:13:20.001500 Foo#a\n"
		 "22:13:21.000002   Foo#b <0.000003000>\n"
		 "                Foo#a <1.998500000>\n"
		 "\n");
	trc_trace_free(t);
}

static void
test_threads(void)
{
	struct trc_trace *t = start(2, false, false);

	thread(t, 0, "main");
	thread(t, 1, "worker");
	method(t, 0, "Foo", "#", "a");
	method(t, 1, "Bar", "#", "b");
	call(t, 0, 0, 0);
	call(t, 1, 1, 1 * US);
	ret(t, 1, 1, 6 * US);
	ret(t, 0, 0, 10 * US);
	call(t, 2, 1, 20 * US);
	ret(t, 2, 1, 21 * US);
	test_str("a second thread turns labels on; open lines end first", text(),
		 "Foo#a\n"
		 "[worker] Bar#b <0.000005000>\n"
		 "[main] Foo#a <0.000010000>\n"
		 "[thread 2] Bar#b <0.000001000>\n");
	trc_trace_free(t);
}

static void
test_exprs(void)
{
	struct trc_trace_opts o = { .prefix = 2 };
	struct trc_spec spec;
	const char *why;
	struct trc_trace *t;

	trc_output_release(&out);
	trc_output_init(&out, -1, -1);
	trc_spec_parse(&spec, "Kernel#sleep(self, __source__)", &why);
	t = trc_trace_new(&out, &o, &spec, 1);
	method(t, 0, "Kernel", "#", "sleep");
	method(t, 1, "IO", ".", "select");
	call(t, 0, 0, 0);
	expr(t, 0, 0, 0, "main");
	expr(t, 0, 0, 1, "\"x.rb:3\"");
	ret(t, 0, 0, 100 * MS);
	call(t, 0, 0, 0);
	expr(t, 0, 0, 0, "main");
	call(t, 0, 1, 1 * MS);
	ret(t, 0, 1, 2 * MS);
	expr(t, 0, 0, 1, "late");
	expr(t, 0, 5, 0, "bad spec");
	ret(t, 0, 0, 3 * MS);
	test_str("expressions join their call line", text(),
		 "Kernel#sleep(self=main, __source__=\"x.rb:3\") <0.100000000>\n"
		 "Kernel#sleep(self=main)\n"
		 "  IO.select <0.001000000>\n"
		 "  (__source__=late)\n"
		 "  (?=bad spec)\n"
		 "Kernel#sleep <0.003000000>\n"
		 "\n");
	trc_trace_free(t);
	trc_spec_release(&spec);
}

static void
test_raise(void)
{
	struct trc_trace *t = start(2, false, false);

	method(t, 0, "Foo", "#", "a");
	call(t, 0, 0, 0);
	raise_ev(t, 0, "RuntimeError", "boom", "x.rb");
	ret(t, 0, 0, 1 * MS);
	raise_ev(t, 0, "IOError", "closed stream", "");
	test_str("exceptions at the current depth", text(),
		 "Foo#a\n"
		 "  EXCEPTION RuntimeError: boom (x.rb:3)\n"
		 "Foo#a <0.001000000>\n"
		 "EXCEPTION IOError: closed stream\n");
	trc_trace_free(t);
}

/* A NameError as Ruby 3.1 words it: every line keeps the [pid] and [thread] prefixes and the
 * indent; the location stays on the first line; blank lines go. */
static void
test_multiline_raise(void)
{
	struct trc_trace_opts o = { .prefix = 2, .pid = 42 };
	struct trc_trace *t;

	trc_output_release(&out);
	trc_output_init(&out, -1, -1);
	t = trc_trace_new(&out, &o, NULL, 0);
	thread(t, 0, "main");
	thread(t, 1, "worker");
	method(t, 0, "Worker", "#", "go");
	call(t, 1, 0, 0);
	call(t, 0, 0, 0);
	raise_ev(t, 0, "NameError", "undefined local variable or method `helpr' for #<Worker>\n"
		 "\n  go = helpr\r\n       ^^^^^\nDid you mean?  helper\n", "w.rb");
	ret(t, 0, 0, 1 * MS);
	raise_ev(t, 1, "RuntimeError", "two\nlines", "");
	trc_trace_free(t);      /* with a [pid], the worker's open call holds its block till then */
	test_str("multi-line message", text(),
		 "[42] Worker#go\n"
		 "[42] [main] Worker#go\n"
		 "[42] [main]   EXCEPTION NameError: undefined local variable or method `helpr' "
		 "for #<Worker> (w.rb:3)\n"
		 "[42] [main]               go = helpr\n"
		 "[42] [main]                    ^^^^^\n"
		 "[42] [main]             Did you mean?  helper\n"
		 "[42] [main] Worker#go <0.001000000>\n"
		 "[42] [worker]   EXCEPTION RuntimeError: two\n"
		 "[42] [worker]             lines\n");
}

static void
gc_ev(struct trc_trace *t, uint32_t th, bool major, const char *reason, uint64_t pause)
{
	struct trc_message m = { .type = TRC_EV_GC };

	m.gc.thread = th;
	m.gc.start_ts = 8 * MS;
	m.gc.pause_ns = pause;
	m.gc.major = major;
	m.gc.reason = S(reason);
	feed(t, m);
}

static void
test_gc(void)
{
	struct trc_trace *t = start(2, false, false);

	thread(t, 0, "main");
	method(t, 0, "Foo", "#", "a");
	call(t, 0, 0, 0);
	gc_ev(t, 0, false, "newobj", 1500 * US);
	ret(t, 0, 0, 3 * MS);
	gc_ev(t, TRC_GC_NO_THREAD, true, "nofree", 12 * MS);
	gc_ev(t, 0, true, "", 2 * US);
	test_str("collections where they ran, with their pauses", text(),
		 "Foo#a\n"
		 "  GC minor (newobj) <0.001500000>\n"
		 "Foo#a <0.003000000>\n"
		 "GC major (nofree) <0.012000000>\n"
		 "GC major <0.000002000>\n");
	trc_trace_free(t);
	t = start(2, false, true);
	gc_ev(t, TRC_GC_NO_THREAD, false, "malloc", 1 * MS);
	test_str("-n: no pause", text(), "GC minor (malloc)\n");
	trc_trace_free(t);
}

static void
mark_ev(struct trc_trace *t, uint32_t type, uint32_t th, uint64_t ts, const char *text)
{
	struct trc_message m = { .type = type };

	m.mark.thread = th;
	m.mark.ts = ts;
	m.mark.text = S(text);
	feed(t, m);
}

/* A thread begins (no thread of the trace names it yet), calls, ends under its name. */
static void
test_marks(void)
{
	struct trc_trace *t = start(2, false, false);

	thread(t, 0, "main");
	thread(t, 1, "job");
	method(t, 0, "Foo", "#", "a");
	call(t, 0, 0, 0);
	mark_ev(t, TRC_EV_THREAD_BEGIN, TRC_NO_THREAD, 1 * MS, "#<Thread:0x1 a.rb:2 run>");
	call(t, 1, 0, 2 * MS);
	ret(t, 1, 0, 3 * MS);
	mark_ev(t, TRC_EV_THREAD_END, 1, 4 * MS, "#<Thread:0x1@job a.rb:2 run>");
	ret(t, 0, 0, 5 * MS);
	mark_ev(t, TRC_EV_THREAD_END, 0, 6 * MS, "");
	test_str("marks at the left, or at their thread's depth", text(),
		 "Foo#a\n"
		 "THREAD BEGIN #<Thread:0x1 a.rb:2 run>\n"
		 "[job] Foo#a <0.001000000>\n"
		 "[job] THREAD END #<Thread:0x1@job a.rb:2 run>\n"
		 "[main] Foo#a <0.005000000>\n"
		 "[main] THREAD END\n");
	trc_trace_free(t);
}

static void
test_slow(void)
{
	struct trc_trace *t = start(2, false, false);

	method(t, 0, "Proc", "#", "call");
	method(t, 1, "Dir", ".", "chdir");
	method(t, 2, "Kernel", "#", "sleep");
	slow(t, 2, 459628 * US, 2);
	slow(t, 1, 459828 * US, 1);
	slow(t, 0, 459849 * US, 0);
	slow(t, 2, 300 * MS, 0);
	test_str("slow calls innermost first, blank line after depth 0", text(),
		 "    Kernel#sleep <0.459628000>\n"
		 "  Dir.chdir <0.459828000>\n"
		 "Proc#call <0.459849000>\n"
		 "\n"
		 "Kernel#sleep <0.300000000>\n"
		 "\n");
	trc_trace_free(t);
}

static void
test_lost(void)
{
	struct trc_trace *t = start(2, false, false);
	struct trc_message m = { .type = TRC_EV_LOST };

	method(t, 0, "Foo", "#", "a");
	call(t, 0, 0, 0);
	m.lost.count = 5;
	feed(t, m);
	ret(t, 0, 0, 1 * US);
	test_str("a lost note ends the open line", text(), "Foo#a\nFoo#a <0.000001000>\n");
	test_str("lost note", notes(), "*** 5 events lost\n");
	test_cond("lost counted", trc_trace_lost(t) == 5);
	trc_trace_free(t);
}

static void
test_unmatched_returns(void)
{
	struct trc_trace *t = start(2, false, false);

	method(t, 0, "A", "#", "a");
	method(t, 1, "B", "#", "b");
	method(t, 2, "C", "#", "c");
	call(t, 0, 0, 0);
	call(t, 0, 1, 1 * US);
	call(t, 0, 2, 2 * US);
	ret(t, 0, 0, 10 * US);
	ret(t, 0, 1, 11 * US);
	call(t, 0, 2, 20 * US);
	ret(t, 0, 2, 21 * US);
	test_str("a return pops down to its call; a return without call is ignored", text(),
		 "A#a\n"
		 "  B#b\n"
		 "    C#c\n"
		 "A#a <0.000010000>\n"
		 "\n"
		 "C#c <0.000001000>\n");
	trc_trace_free(t);
}

static void
test_shared_output(void)
{
	struct trc_trace_opts oa = { .prefix = 2, .pid = 100 }, ob = { .prefix = 2, .pid = 200 };
	struct trc_trace *a, *b;
	struct trc_message started = { .type = TRC_MSG_STARTED };

	trc_output_release(&out);
	trc_output_init(&out, -1, -1);
	a = trc_trace_new(&out, &oa, NULL, 0);
	b = trc_trace_new(&out, &ob, NULL, 0);
	method(a, 0, "Foo", "#", "a");
	method(b, 0, "Bar", "#", "b");
	call(a, 0, 0, 0);
	call(b, 0, 0, 0);
	ret(a, 0, 0, 10 * US);
	ret(b, 0, 0, 10 * US);
	call(b, 0, 0, 20 * US);
	test_cond("other messages are ignored", trc_trace_feed(a, &started) == 0);
	trc_trace_free(b);
	test_str("several targets: [pid] prefixes, each call tree whole, leaves on one line", text(),
		 "[100] Foo#a <0.000010000>\n"
		 "[200] Bar#b <0.000010000>\n"
		 "[200] Bar#b\n");
	trc_trace_free(a);
}

static void
test_limits(void)
{
	struct trc_trace *t = start(2, false, false);
	struct trc_message m = { .type = TRC_EV_METHOD };

	m.method.idx = TRC_REPLAY_MAX_METHODS;
	test_cond("method index past the limit", trc_trace_feed(t, &m) == -1 &&
						  strstr(trc_trace_error(t), "method") != NULL);
	test_cond("thread index past the limit",
		  event(t, TRC_EV_CALL, TRC_REPLAY_MAX_THREADS, 0, 0) == -1);
	m.type = TRC_EV_THREAD;
	m.thread.idx = UINT32_MAX;
	test_cond("thread definition past the limit", trc_trace_feed(t, &m) == -1);
	test_cond("call on a sane thread", event(t, TRC_EV_CALL, 3, 0, 0) == 0);
	trc_trace_free(t);
	test_str("free ends the open line", text(), "(unknown)\n");
}

/* The lines of calls 39 to 42 deep, as -r 2 prints them: the indent stops at 40 levels. */
static void
test_depth_number(void)
{
	struct trc_trace *t = start(2, false, true);
	const char *all, *tail;
	char want[512];
	int n;

	method(t, 0, "A", "#", "a");
	method(t, 1, "B", "#", "b");
	for (uint32_t d = 0; d < 42; d++)
		call(t, 0, 0, d);
	call(t, 0, 1, 100);
	ret(t, 0, 1, 101);
	ret(t, 0, 0, 102);
	ret(t, 0, 0, 103);
	n = snprintf(want, sizeof(want), "%*sA#a\n%*sA#a\n[depth 41] A#a\n[depth 42] B#b\n"
		     "[depth 41] A#a\n%*sA#a\n", 78, "", 80, "", 80, "");
	all = text();
	tail = all + strlen(all) - (n > 0 && (size_t)n < strlen(all) ? (size_t)n : 0);
	test_cond("want fits", n > 0 && (size_t)n < sizeof(want));
	test_str("past depth 40, [depth N] instead of the indent", tail, want);
	trc_trace_free(t);
}

/* A firehose 1000 calls deep: every line stays short, whatever the depth. */
static void
test_deep_output_is_bounded(void)
{
	struct trc_trace *t = start(2, true, false);
	const uint32_t depth = 1000, rounds = 3;
	size_t events = 0, longest = 0, line = 0, bound;
	const char *s, *longer = "ActiveSupport::Callbacks::CallTemplate#invoke_before";

	thread(t, 0, "main");
	thread(t, 1, "worker");
	method(t, 0, "ApplicationController", "#", "process_action");
	method(t, 1, "ActiveSupport::Callbacks::CallTemplate", "#", "invoke_before");
	for (uint32_t r = 0; r < rounds; r++) {
		for (uint32_t d = 0; d < depth; d++, events++)
			call(t, r % 2, d % 2, d * US);
		for (uint32_t d = depth; d-- > 0; events++)
			ret(t, r % 2, d % 2, (2 * depth - d) * US);
	}
	for (s = text(); *s != '\0'; s++) {
		line = *s == '\n' ? 0 : line + 1;
		if (line > longest)
			longest = line;
	}
	/* "[worker] ", the clock, the indent, the longer name, " <0.001999000>" */
	bound = 9 + 16 + 2 * TRC_TRACE_MAX_INDENT + strlen(longer) + 14;
	test_cond("no line longer than the deepest indent, a name and a duration", longest <= bound);
	/* Indenting by depth would average 1000 bytes of spaces per event. */
	test_cond("output per event bounded by the same, not by the depth",
		  out.out.len <= events * (bound + 1));
	trc_trace_free(t);
}

/* Empty writes into a fresh output, as an eval with an empty answer makes. */
static void
test_empty_writes(void)
{
	struct trc_output o;

	trc_output_init(&o, -1, -1);
	trc_output_write(&o, "", 0);
	trc_output_close_line(&o);
	test_cond("an empty write into a fresh output", o.out.len == 0);
	trc_output_note(&o, "%s", "");
	test_cond("an empty note", o.err.len == 5 && memcmp(o.err.data, "*** \n", 5) == 0);
	trc_output_release(&o);
}

/*
 * What a hostile or broken target names reaches the trace escaped (escape.h): a newline in a
 * method name forges no line, an escape sequence drives no terminal, a NUL cuts no name.
 */
static void
test_hostile_names(void)
{
	struct trc_trace *t = start(2, false, true);
	struct trc_message m = { .type = TRC_EV_METHOD };

	m.method.idx = 0;
	m.method.cls = S("K\x1b]52;c;QQ==\a");
	m.method.sep = S("#");
	m.method.name = (struct trc_str){ "a\0b\nEXCEPTION x", 15 };
	m.method.path = S("x.rb");
	feed(t, m);
	thread(t, 0, "main");
	thread(t, 1, "w\r\x9b" "2J");
	call(t, 0, 0, 0);
	ret(t, 0, 0, 1 * US);
	call(t, 1, 0, 2 * US);
	raise_ev(t, 1, "E\x1b[2J", "bad \xc2\x9b\xff\x1b[31m\nsecond\tline", "/a\nb.rb");
	ret(t, 1, 0, 3 * US);
	test_str("every byte from the target escaped", text(),
		 "K\\e]52;c;QQ==\\a#a\\x00b\\nEXCEPTION x\n"
		 "[w\\r\\x9b2J] K\\e]52;c;QQ==\\a#a\\x00b\\nEXCEPTION x\n"
		 "[w\\r\\x9b2J]   EXCEPTION E\\e[2J: bad \\xc2\\x9b\\xff\\e[31m (/a\\nb.rb:3)\n"
		 "[w\\r\\x9b2J]             second\\tline\n"
		 "[w\\r\\x9b2J] K\\e]52;c;QQ==\\a#a\\x00b\\nEXCEPTION x\n");
	trc_trace_free(t);
}

/*
 * Several targets: each holds a block (an outermost call and all under it) until it ends, so
 * that another's lines never land inside it; a block held 0.1 s goes out by whole lines.
 */
static void
test_blocks(void)
{
	struct trc_output o;
	struct trc_trace_opts oa = { .prefix = 2, .no_duration = true, .pid = 11 };
	struct trc_trace_opts ob = { .prefix = 2, .no_duration = true, .pid = 22 };
	struct trc_trace *a, *b;

	trc_output_init(&o, -1, -1);
	a = trc_trace_new(&o, &oa, NULL, 0);
	b = trc_trace_new(&o, &ob, NULL, 0);
	method(a, 0, "A", "#", "outer");
	method(a, 1, "A", "#", "inner");
	method(b, 0, "B", "#", "x");
	call(a, 0, 0, 0);
	call(b, 0, 0, 0);
	call(a, 0, 1, US);
	ret(b, 0, 0, US);
	trc_buf_addc(&o.out, '\0');
	test_str("the block that ended goes out whole; the other waits", o.out.data, "[22] B#x\n");
	o.out.len = 0;
	ret(a, 0, 1, 2 * US);
	call(b, 0, 0, 3 * US);
	ret(a, 0, 0, 4 * US);
	trc_buf_addc(&o.out, '\0');
	test_str("then the other, whole", o.out.data,
		 "[11] A#outer\n[11]   A#inner\n[11] A#outer\n\n");
	o.out.len = 0;
	test_cond("an open block is held", trc_trace_idle(b, 1.0) && o.out.len == 0);
	test_cond("for a while", trc_trace_idle(b, 1.05) && o.out.len == 0);
	call(b, 0, 0, 5 * US);  /* nested: the first call's line is whole now */
	trc_trace_idle(b, 1.2);
	trc_buf_addc(&o.out, '\0');
	test_str("then its whole lines go, not its open one", o.out.data, "[22] B#x\n");
	o.out.len = 0;
	trc_trace_free(b);
	trc_buf_addc(&o.out, '\0');
	test_str("the end lets the rest go", o.out.data, "[22]   B#x\n");
	trc_trace_free(a);
	trc_output_release(&o);
}

void
test_trace(void)
{
	trc_output_init(&out, -1, -1);
	test_tree();
	test_no_duration_prefix();
	test_leaf_at_top();
	test_start_time();
	test_threads();
	test_exprs();
	test_raise();
	test_multiline_raise();
	test_slow();
	test_gc();
	test_marks();
	test_lost();
	test_unmatched_returns();
	test_shared_output();
	test_limits();
	test_depth_number();
	test_deep_output_is_bounded();
	test_empty_writes();
	test_hostile_names();
	test_blocks();
	trc_output_release(&out);
}
