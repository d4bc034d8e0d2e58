/* test_export.c: the exporters and their JSON escaping: event sequences in, exact files out. */
#include <stdio.h>
#include <stdlib.h>

#include "export.h"
#include "intern.h"
#include "json.h"
#include "output.h"
#include "pprof/profile.pb-c.h"
#include "spec.h"
#include "test.h"

#define BASE 1000000000ull      /* the agent's clock at the first event, in ns */
#define PID 42

static struct trc_output out;
static struct trc_spec spec;

static struct trc_str
S(const char *s)
{
	return (struct trc_str){ s, (uint32_t)strlen(s) };
}

static void
feed(struct trc_sink *k, struct trc_message m)
{
	test_cond("event accepted", trc_sink_feed(k, &m) == 0);
}

static void
method(struct trc_sink *k, uint32_t idx, const char *name, int32_t line)
{
	struct trc_message m = { .type = TRC_EV_METHOD };

	m.method.idx = idx;
	m.method.cls = S("Worker");
	m.method.sep = S("#");
	m.method.name = S(name);
	m.method.path = S("app.rb");
	m.method.line = line;
	feed(k, m);
}

static void
thread(struct trc_sink *k, uint32_t idx, const char *name)
{
	struct trc_message m = { .type = TRC_EV_THREAD };

	m.thread.idx = idx;
	m.thread.name = S(name);
	feed(k, m);
}

static void
event(struct trc_sink *k, uint32_t type, uint32_t meth, uint64_t ts)
{
	struct trc_message m = { .type = type };

	m.call.thread = 0;
	m.call.method = meth;
	m.call.ts = BASE + ts;
	feed(k, m);
}

static void
call(struct trc_sink *k, uint32_t meth, uint64_t ts)
{
	event(k, TRC_EV_CALL, meth, ts);
}

static void
ret(struct trc_sink *k, uint32_t meth, uint64_t ts)
{
	event(k, TRC_EV_RETURN, meth, ts);
}

static void
expr(struct trc_sink *k, const char *text)
{
	struct trc_message m = { .type = TRC_EV_EXPR };

	m.expr.thread = 0;
	m.expr.spec = 0;
	m.expr.expr = 0;
	m.expr.text = S(text);
	feed(k, m);
}

static void
raise_ev(struct trc_sink *k, uint64_t ts)
{
	struct trc_message m = { .type = TRC_EV_RAISE };

	m.raise.thread = 0;
	m.raise.ts = BASE + ts;
	m.raise.cls = S("ArgumentError");
	m.raise.message = S("bad \"x\"");
	m.raise.path = S("app.rb");
	m.raise.line = 9;
	feed(k, m);
}

static void
slow(struct trc_sink *k, uint32_t meth, uint64_t start, uint64_t dur, uint32_t depth)
{
	struct trc_message m = { .type = TRC_EV_SLOW };

	m.slow.thread = 0;
	m.slow.method = meth;
	m.slow.start_ts = BASE + start;
	m.slow.duration_ns = dur;
	m.slow.depth = depth;
	feed(k, m);
}

static struct trc_export *
start_split(enum trc_format f, bool label_pids, enum trc_split split)
{
	struct trc_export_opts o = { .format = f, .tool = "tracer test", .specs = &spec,
				     .nspecs = 1, .label_pids = label_pids, .split = split,
				     .min_share = 0.001, .title = "tracer test" };

	trc_output_release(&out);
	trc_output_init(&out, -1, -1);
	return trc_export_new(&out, &o);
}

static struct trc_export *
start(enum trc_format f, bool label_pids)
{
	return start_split(f, label_pids, TRC_SPLIT_NONE);
}

/* The file so far, NUL-terminated in place. */
static const char *
sofar(void)
{
	trc_buf_addc(&out.out, '\0');
	out.out.len--;
	return out.out.data;
}

/* Finishes e and returns the whole file, NUL-terminated in place. */
static const char *
finish(struct trc_export *e)
{
	trc_export_finish(e);
	trc_buf_addc(&out.out, '\0');
	out.out.len--;
	return out.out.data;
}

/* Worker#work (with self=#<Worker>) calls Worker#helper, then raises; times in ns from BASE. */
static void
play_basic(struct trc_export *e, pid_t pid)
{
	struct trc_sink k = trc_export_sink(e, pid);

	method(&k, 0, "work", 7);
	method(&k, 1, "helper", 8);
	thread(&k, 0, "main");
	call(&k, 0, 0);
	expr(&k, "#<Worker>");
	call(&k, 1, 2000);
	ret(&k, 1, 3500);
	raise_ev(&k, 4000);
	ret(&k, 0, 10000);
	trc_sink_close(&k);
}

static void
test_chrome(void)
{
	struct trc_export *e = start(TRC_FORMAT_CHROME, false);

	test_str("chrome header is out before any event", sofar(), "{\"traceEvents\":[");
	play_basic(e, PID);
	test_str("chrome: metadata, X events as calls return, the exception as an instant",
		 finish(e),
		 "{\"traceEvents\":[\n"
		 "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":42,\"args\":{\"name\":\"ruby 42\"}},\n"
		 "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":42,\"tid\":1,\"args\":{\"name\":\"main\"}},\n"
		 "{\"name\":\"Worker#helper\",\"cat\":\"ruby\",\"ph\":\"X\",\"pid\":42,\"tid\":1,"
		 "\"ts\":2.000,\"dur\":1.500},\n"
		 "{\"name\":\"EXCEPTION ArgumentError: bad \\\"x\\\"\",\"cat\":\"ruby\",\"ph\":\"i\","
		 "\"s\":\"t\",\"pid\":42,\"tid\":1,\"ts\":4.000,\"args\":{\"file\":\"app.rb\",\"line\":9}},\n"
		 "{\"name\":\"Worker#work\",\"cat\":\"ruby\",\"ph\":\"X\",\"pid\":42,\"tid\":1,"
		 "\"ts\":0.000,\"dur\":10.000,\"args\":{\"self\":\"#<Worker>\"}}\n"
		 "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"tracer test\"}}\n");
	trc_export_free(e);
}

static void
test_chrome_empty(void)
{
	struct trc_export *e = start(TRC_FORMAT_CHROME, false);
	struct trc_sink k = trc_export_sink(e, PID);

	trc_sink_close(&k);
	test_str("chrome without events is still a document", finish(e),
		 "{\"traceEvents\":[\n"
		 "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"tracer test\"}}\n");
	trc_export_free(e);
}

static void
test_speedscope(void)
{
	struct trc_export *e = start(TRC_FORMAT_SPEEDSCOPE, false);

	play_basic(e, PID);
	test_str("speedscope: frames, then one evented profile per thread", finish(e),
		 "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":"
		 "{\"frames\":[{\"name\":\"Worker#work\",\"file\":\"app.rb\",\"line\":7},"
		 "{\"name\":\"Worker#helper\",\"file\":\"app.rb\",\"line\":8}]},\"profiles\":[\n"
		 "{\"type\":\"evented\",\"name\":\"main (pid 42)\",\"unit\":\"nanoseconds\","
		 "\"startValue\":0,\"endValue\":10000,\"events\":["
		 "{\"type\":\"O\",\"frame\":0,\"at\":0},{\"type\":\"O\",\"frame\":1,\"at\":2000},"
		 "{\"type\":\"C\",\"frame\":1,\"at\":3500},{\"type\":\"C\",\"frame\":0,\"at\":10000}]}],"
		 "\"name\":\"tracer 42\",\"activeProfileIndex\":0,\"exporter\":\"tracer test\"}\n");
	trc_export_free(e);
}

static void
test_collapsed(void)
{
	struct trc_export *e = start(TRC_FORMAT_COLLAPSED, false);

	play_basic(e, PID);
	/* work: 10 us in all, 1.5 of them in helper: 8.5 rounds to 9; helper 1.5 to 2. */
	test_str("collapsed: self time in ns, sorted, threads merged", finish(e),
		 "Worker#work 8500\n"
		 "Worker#work;Worker#helper 1500\n");
	trc_export_free(e);

	e = start_split(TRC_FORMAT_COLLAPSED, false, TRC_SPLIT_THREAD);
	play_basic(e, PID);
	test_str("collapsed --split thread: the thread at the top", finish(e),
		 "main;Worker#work 8500\n"
		 "main;Worker#work;Worker#helper 1500\n");
	trc_export_free(e);

	e = start_split(TRC_FORMAT_COLLAPSED, false, TRC_SPLIT_PROCESS);
	play_basic(e, PID);
	test_str("collapsed --split process: the process at the top, with one target too", finish(e),
		 "ruby 42;Worker#work 8500\n"
		 "ruby 42;Worker#work;Worker#helper 1500\n");
	trc_export_free(e);
}

/*
 * Opens and closes of the events in s[0..n), and whether their times never go back. A plain
 * scan: strstr over a document this big is quadratic under ASan, which measures the haystack
 * on every call.
 */
static void
count_events(const char *s, size_t n, size_t *opens, size_t *closes, bool *ordered)
{
	static const char ev[] = "{\"type\":\"";
	long long last = -1;

	*opens = *closes = 0;
	*ordered = true;
	for (size_t i = 0; i + sizeof(ev) < n; i++) {
		const char *q = s + i, *at;
		long long t;

		if (q[0] != '{' || memcmp(q, ev, sizeof(ev) - 1) != 0 || (q[9] != 'O' && q[9] != 'C'))
			continue;
		*opens += q[9] == 'O';
		*closes += q[9] == 'C';
		for (at = q; at + 5 <= s + n && memcmp(at, "\"at\":", 5) != 0; at++)
			;
		t = atoll(at + 5);
		*ordered &= t >= last;
		last = t;
		i = (size_t)(at - s);
	}
}

/*
 * More events than speedscope keeps in memory (4 MiB of them): they go to a scratch file and
 * come back in order, each thread's apart.
 */
static void
test_speedscope_spill(void)
{
	struct trc_export_opts o = { .format = TRC_FORMAT_SPEEDSCOPE, .tool = "tracer test", .specs = &spec,
				     .nspecs = 1, .scratch_dir = "/tmp" };
	struct trc_export *e;
	struct trc_sink k;
	struct trc_message m = { .type = TRC_EV_THREAD };
	const char *s, *main_p, *other_p;
	size_t opens, closes;
	bool ordered;
	int bad = 0;

	trc_output_release(&out);
	trc_output_init(&out, -1, -1);
	e = trc_export_new(&out, &o);
	k = trc_export_sink(e, PID);
	method(&k, 0, "work", 7);
	method(&k, 1, "helper", 8);
	thread(&k, 0, "main");
	m.thread.idx = 1;
	m.thread.name = S("other");
	feed(&k, m);
	/* 150000 calls on each of two threads: 600000 events, 9.6 MB. */
	for (uint64_t i = 0; i < 150000; i++) {
		for (uint32_t th = 0; th < 2; th++) {
			m = (struct trc_message){ .type = TRC_EV_CALL };
			m.call.thread = th;
			m.call.method = th;
			m.call.ts = BASE + i * 10 + th;
			bad += trc_sink_feed(&k, &m) != 0;
			m.type = TRC_EV_RETURN;
			m.call.ts += 5;
			bad += trc_sink_feed(&k, &m) != 0;
		}
	}
	trc_sink_close(&k);
	s = finish(e);
	test_note("speedscope: events past what memory keeps, through a scratch file");
	test_cond("every event taken", bad == 0);
	test_cond("not failed", trc_export_failed(e) == NULL);
	main_p = strstr(s, "\"name\":\"main (pid 42)\"");
	other_p = main_p ? strstr(main_p, "\"name\":\"other (pid 42)\"") : NULL;
	test_cond("main's profile, then other's", main_p != NULL && other_p != NULL);
	if (other_p == NULL)
		return;
	count_events(main_p, (size_t)(other_p - main_p), &opens, &closes, &ordered);
	test_cond("main: every call and return, in order", opens == 150000 && closes == 150000 && ordered);
	test_cond("main: its frame only", strstr(strstr(s, "\"events\":["), "\"frame\":1,") > other_p);
	count_events(other_p, strlen(other_p), &opens, &closes, &ordered);
	test_cond("other: every call and return, in order", opens == 150000 && closes == 150000 && ordered);
	test_cond("other: its frame only", strstr(other_p, "\"frame\":0,") == NULL);
	test_cond("the document ends", strstr(other_p, "],\"name\":\"tracer 42\"") != NULL);
	trc_export_free(e);

	test_note("speedscope: a scratch file that cannot be made fails the file, saying why");
	o.scratch_dir = "/nonexistent/dir";
	trc_output_release(&out);
	trc_output_init(&out, -1, -1);
	e = trc_export_new(&out, &o);
	k = trc_export_sink(e, PID);
	method(&k, 0, "work", 7);
	thread(&k, 0, "main");
	m = (struct trc_message){ .type = TRC_EV_CALL };
	for (uint64_t i = 0; i < 300000; i++) {
		m.type = TRC_EV_CALL;
		m.call.ts = BASE + i * 10;
		bad += trc_sink_feed(&k, &m) != 0;
		m.type = TRC_EV_RETURN;
		m.call.ts += 5;
		bad += trc_sink_feed(&k, &m) != 0;
	}
	trc_sink_close(&k);
	trc_export_finish(e);
	test_cond("failed", trc_export_failed(e) != NULL &&
		  strstr(trc_export_failed(e), "cannot make its scratch file in '/nonexistent/dir'") != NULL);
	test_cond("no document at all", out.out.len == 0);
	trc_buf_addc(&out.err, '\0');
	test_cond("a note says so", strstr(out.err.data, "the speedscope file cannot be made whole") != NULL);
	trc_export_free(e);
}

/* Two methods of one name (defined again elsewhere) on two threads: one line, summed. */
static void
test_collapsed_merge(void)
{
	struct trc_export *e = start(TRC_FORMAT_COLLAPSED, false);
	struct trc_sink k = trc_export_sink(e, PID);
	struct trc_message m = { .type = TRC_EV_METHOD };

	method(&k, 0, "work", 7);
	m.method.idx = 1;
	m.method.cls = S("Worker");
	m.method.sep = S("#");
	m.method.name = S("work");
	m.method.path = S("other.rb");
	m.method.line = 70;
	feed(&k, m);
	thread(&k, 0, "main");
	call(&k, 0, 0);
	ret(&k, 0, 1000);
	call(&k, 1, 2000);
	ret(&k, 1, 2500);
	trc_sink_close(&k);
	test_str("collapsed: one line for one name", finish(e), "Worker#work 1500\n");
	trc_export_free(e);
}

/* A pprof profile as text: "types: stack (leaf first) = values [labels]; ..." */
static const char *
pprof_text(const char *data, size_t len)
{
	static char text[1024];
	Perftools__Profiles__Profile *p =
		perftools__profiles__profile__unpack(NULL, len, (const uint8_t *)data);
	size_t n = 0;

	if (p == NULL)
		return "(does not unpack)";
	for (size_t i = 0; i < p->n_sample_type; i++)
		n += snprintf(text + n, sizeof(text) - n, "%s/%s ",
			      p->string_table[p->sample_type[i]->type],
			      p->string_table[p->sample_type[i]->unit]);
	for (size_t i = 0; i < p->n_sample && n < sizeof(text); i++) {
		const Perftools__Profiles__Sample *x = p->sample[i];

		n += snprintf(text + n, sizeof(text) - n, "|");
		for (size_t k = 0; k < x->n_location_id && n < sizeof(text); k++) {
			const Perftools__Profiles__Location *l = p->location[x->location_id[k] - 1];
			const Perftools__Profiles__Function *f = p->function[l->line[0]->function_id - 1];

			n += snprintf(text + n, sizeof(text) - n, "%s%s@%s:%lld", k ? "<" : "",
				      p->string_table[f->name], p->string_table[f->filename],
				      (long long)l->line[0]->line);
		}
		for (size_t k = 0; k < x->n_value && n < sizeof(text); k++)
			n += snprintf(text + n, sizeof(text) - n, " %lld", (long long)x->value[k]);
		for (size_t k = 0; k < x->n_label && n < sizeof(text); k++) {
			const Perftools__Profiles__Label *l = x->label[k];

			if (l->str != 0)
				n += snprintf(text + n, sizeof(text) - n, " %s=%s",
					      p->string_table[l->key], p->string_table[l->str]);
			else
				n += snprintf(text + n, sizeof(text) - n, " %s=%lld",
					      p->string_table[l->key], (long long)l->num);
		}
	}
	perftools__profiles__profile__free_unpacked(p, NULL);
	return text;
}

static void
test_pprof_export(void)
{
	struct trc_export *e = start(TRC_FORMAT_PPROF, false);

	play_basic(e, PID);
	finish(e);
	/* work: 10 us in all, 1.5 of them in helper. */
	test_str("pprof: a sample per call path, leaf first, calls and self time",
		 pprof_text(out.out.data, out.out.len),
		 "calls/count wall/nanoseconds "
		 "|Worker#work@app.rb:7 1 8500 thread=main pid=42"
		 "|Worker#helper@app.rb:8<Worker#work@app.rb:7 1 1500 thread=main pid=42");
	trc_export_free(e);
}

static void
test_collapsed_pids(void)
{
	struct trc_export *e = start(TRC_FORMAT_COLLAPSED, true);

	play_basic(e, 43);
	play_basic(e, PID);
	test_str("collapsed with several targets: merged", finish(e),
		 "Worker#work 17000\n"
		 "Worker#work;Worker#helper 3000\n");
	trc_export_free(e);

	e = start_split(TRC_FORMAT_COLLAPSED, true, TRC_SPLIT_THREAD);
	play_basic(e, 43);
	play_basic(e, PID);
	test_str("collapsed --split thread with several targets: the process above the thread",
		 finish(e),
		 "ruby 42;main;Worker#work 8500\n"
		 "ruby 42;main;Worker#work;Worker#helper 1500\n"
		 "ruby 43;main;Worker#work 8500\n"
		 "ruby 43;main;Worker#work;Worker#helper 1500\n");
	trc_export_free(e);

	e = start_split(TRC_FORMAT_COLLAPSED, true, TRC_SPLIT_PROCESS);
	play_basic(e, 43);
	play_basic(e, PID);
	test_str("collapsed --split process", finish(e),
		 "ruby 42;Worker#work 8500\n"
		 "ruby 42;Worker#work;Worker#helper 1500\n"
		 "ruby 43;Worker#work 8500\n"
		 "ruby 43;Worker#work;Worker#helper 1500\n");
	trc_export_free(e);
}

static void
test_jsonl(void)
{
	struct trc_export *e = start(TRC_FORMAT_JSONL, false);

	play_basic(e, PID);
	test_str("jsonl: one object per event", finish(e),
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"call\",\"method\":\"Worker#work\","
		 "\"ts\":0,\"depth\":0,\"expr\":{\"self\":\"#<Worker>\"}}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"call\",\"method\":\"Worker#helper\","
		 "\"ts\":2000,\"depth\":1}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"return\",\"method\":\"Worker#helper\","
		 "\"ts\":3500,\"depth\":1,\"duration_ns\":1500}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"raise\",\"ts\":4000,\"depth\":1,"
		 "\"exception\":\"ArgumentError\",\"message\":\"bad \\\"x\\\"\",\"file\":\"app.rb\","
		 "\"line\":9}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"return\",\"method\":\"Worker#work\","
		 "\"ts\":10000,\"depth\":0,\"duration_ns\":10000}\n");
	trc_export_free(e);
}

/*
 * work calls helper, whose return is lost; work's return closes both. A return without its
 * call is ignored. work and helper are called again and still run at the end: they close at
 * the last timestamp seen (the raise).
 */
static void
play_broken(struct trc_export *e)
{
	struct trc_sink k = trc_export_sink(e, PID);

	method(&k, 0, "work", 7);
	method(&k, 1, "helper", 8);
	thread(&k, 0, "main");
	call(&k, 0, 0);
	call(&k, 1, 1000);
	ret(&k, 0, 5000);
	ret(&k, 1, 6000);
	call(&k, 0, 7000);
	call(&k, 1, 8000);
	raise_ev(&k, 9000);
	trc_sink_close(&k);
}

static void
test_repair(void)
{
	struct trc_export *e = start(TRC_FORMAT_SPEEDSCOPE, false);
	const char *s;

	play_broken(e);
	s = finish(e);
	test_cond("speedscope: nested events despite lost returns", strstr(s,
		"\"startValue\":0,\"endValue\":9000,\"events\":["
		"{\"type\":\"O\",\"frame\":0,\"at\":0},{\"type\":\"O\",\"frame\":1,\"at\":1000},"
		"{\"type\":\"C\",\"frame\":1,\"at\":5000},{\"type\":\"C\",\"frame\":0,\"at\":5000},"
		"{\"type\":\"O\",\"frame\":0,\"at\":7000},{\"type\":\"O\",\"frame\":1,\"at\":8000},"
		"{\"type\":\"C\",\"frame\":1,\"at\":9000},{\"type\":\"C\",\"frame\":0,\"at\":9000}]}")
		  != NULL);
	trc_export_free(e);

	e = start(TRC_FORMAT_JSONL, false);
	play_broken(e);
	test_str("jsonl: only the returns that were seen", finish(e),
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"call\",\"method\":\"Worker#work\","
		 "\"ts\":0,\"depth\":0}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"call\",\"method\":\"Worker#helper\","
		 "\"ts\":1000,\"depth\":1}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"return\",\"method\":\"Worker#work\","
		 "\"ts\":5000,\"depth\":0,\"duration_ns\":5000}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"call\",\"method\":\"Worker#work\","
		 "\"ts\":7000,\"depth\":0}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"call\",\"method\":\"Worker#helper\","
		 "\"ts\":8000,\"depth\":1}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"raise\",\"ts\":9000,\"depth\":2,"
		 "\"exception\":\"ArgumentError\",\"message\":\"bad \\\"x\\\"\",\"file\":\"app.rb\","
		 "\"line\":9}\n");
	trc_export_free(e);

	e = start(TRC_FORMAT_CHROME, false);
	play_broken(e);
	s = finish(e);
	test_cond("chrome: the lost return's call ends with its caller",
		  strstr(s, "\"name\":\"Worker#helper\",\"cat\":\"ruby\",\"ph\":\"X\",\"pid\":42,"
			 "\"tid\":1,\"ts\":1.000,\"dur\":4.000}") != NULL);
	test_cond("chrome: calls open at the end close at the last timestamp",
		  strstr(s, "\"name\":\"Worker#work\",\"cat\":\"ruby\",\"ph\":\"X\",\"pid\":42,"
			 "\"tid\":1,\"ts\":7.000,\"dur\":2.000}\n]") != NULL);
	trc_export_free(e);

	e = start(TRC_FORMAT_COLLAPSED, false);
	play_broken(e);
	/* work: 5 us - 4 in helper, then 2 - 1: 2 us; helper: 4 + 1. */
	test_str("collapsed: repaired calls count", finish(e),
		 "Worker#work 2000\n"
		 "Worker#work;Worker#helper 5000\n");
	trc_export_free(e);
}

/* -s: helper (depth 1) arrives before work (depth 0), which began 1 us before the first event. */
static void
play_slow(struct trc_export *e)
{
	struct trc_sink k = trc_export_sink(e, PID);

	method(&k, 0, "work", 7);
	method(&k, 1, "helper", 8);
	thread(&k, 0, "main");
	slow(&k, 1, 2000, 1000, 1);
	slow(&k, 0, 1000, 5000, 0);
	trc_sink_close(&k);
}

static void
test_slow(void)
{
	struct trc_export *e = start(TRC_FORMAT_SPEEDSCOPE, false);
	const char *s;

	play_slow(e);
	s = finish(e);
	test_cond("speedscope: slow calls replayed in order and nested", strstr(s,
		"\"startValue\":-1000,\"endValue\":4000,\"events\":["
		"{\"type\":\"O\",\"frame\":0,\"at\":-1000},{\"type\":\"O\",\"frame\":1,\"at\":0},"
		"{\"type\":\"C\",\"frame\":1,\"at\":1000},{\"type\":\"C\",\"frame\":0,\"at\":4000}]}")
		  != NULL);
	trc_export_free(e);

	e = start(TRC_FORMAT_COLLAPSED, false);
	play_slow(e);
	test_str("collapsed: slow calls nested", finish(e),
		 "Worker#work 4000\n"
		 "Worker#work;Worker#helper 1000\n");
	trc_export_free(e);

	e = start(TRC_FORMAT_CHROME, false);
	play_slow(e);
	s = finish(e);
	test_cond("chrome: slow call as it comes", strstr(s, "\"name\":\"Worker#helper\",\"cat\":"
		  "\"ruby\",\"ph\":\"X\",\"pid\":42,\"tid\":1,\"ts\":0.000,\"dur\":1.000}") != NULL);
	test_cond("chrome: no negative timestamp: cut at the first event", strstr(s,
		  "\"name\":\"Worker#work\",\"cat\":\"ruby\",\"ph\":\"X\",\"pid\":42,\"tid\":1,"
		  "\"ts\":0.000,\"dur\":4.000}") != NULL);
	trc_export_free(e);

	e = start(TRC_FORMAT_JSONL, false);
	play_slow(e);
	test_str("jsonl: slow calls as they come", finish(e),
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"slow\",\"method\":\"Worker#helper\","
		 "\"ts\":0,\"depth\":1,\"duration_ns\":1000}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"slow\",\"method\":\"Worker#work\","
		 "\"ts\":-1000,\"depth\":0,\"duration_ns\":5000}\n");
	trc_export_free(e);
}

/* Names from the agent are bytes: they must come out as valid JSON and valid folded lines. */
static void
test_odd_names(void)
{
	struct trc_export *e = start_split(TRC_FORMAT_COLLAPSED, false, TRC_SPLIT_THREAD);
	struct trc_sink k = trc_export_sink(e, PID);

	method(&k, 0, "a;b\nc", 1);
	thread(&k, 0, "w\xff");
	call(&k, 0, 0);
	call(&k, 7, 10);        /* never defined */
	ret(&k, 7, 1010);
	ret(&k, 0, 3000);
	trc_sink_close(&k);
	test_str("collapsed: ';' replaced, newlines and bad UTF-8 escaped", finish(e),
		 "w\\xff;Worker#a,b\\nc 2000\n"
		 "w\\xff;Worker#a,b\\nc;(unknown) 1000\n");
	trc_export_free(e);

	e = start(TRC_FORMAT_JSONL, false);
	k = trc_export_sink(e, PID);
	method(&k, 0, "a;b\nc", 1);
	thread(&k, 0, "w\xff");
	call(&k, 0, 0);
	trc_sink_close(&k);
	test_str("jsonl: escaped, invalid UTF-8 replaced", finish(e),
		 "{\"pid\":42,\"thread\":\"w\\ufffd\",\"event\":\"call\",\"method\":\"Worker#a;b\\nc\","
		 "\"ts\":0,\"depth\":0}\n");
	trc_export_free(e);
}

static void
test_bounds(void)
{
	struct trc_export *e = start(TRC_FORMAT_JSONL, false);
	struct trc_sink k = trc_export_sink(e, PID);
	struct trc_message m = { .type = TRC_EV_CALL };

	m.call.thread = 1u << 20;
	test_cond("absurd thread index refused", trc_sink_feed(&k, &m) < 0);
	test_str("and named", trc_sink_error(&k), "thread index 1048576 is out of range");
	m = (struct trc_message){ .type = TRC_EV_LOST };
	m.lost.count = 5;
	test_cond("lost events counted", trc_sink_feed(&k, &m) == 0 && trc_sink_lost(&k) == 5);
	trc_buf_addc(&out.err, '\0');
	test_str("and noted", out.err.data, "*** 5 events lost\n");
	trc_sink_close(&k);
	trc_export_finish(e);
	trc_export_free(e);
}

static const char *
json(const char *s, size_t n)
{
	static struct trc_buf b;

	trc_buf_release(&b);
	trc_json_str(&b, s, n);
	trc_buf_addc(&b, '\0');
	return b.data;
}
#define JSON(lit) json((lit), sizeof(lit) - 1)

static void
test_json_escaping(void)
{
	test_str("plain", JSON("Worker#work"), "\"Worker#work\"");
	test_str("empty", JSON(""), "\"\"");
	test_str("quotes, backslash, controls, DEL", JSON("a\"b\\c\n\t\r\b\f\x01\x1f\x7f"),
		 "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f\\u007f\"");
	test_str("NUL inside", JSON("a\0b"), "\"a\\u0000b\"");
	test_str("C1 controls as \\u escapes, U+00A0 kept", JSON("\xc2\x80\xc2\x9b\xc2\xa0"),
		 "\"\\u0080\\u009b\xc2\xa0\"");
	test_str("valid UTF-8 kept", JSON("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
		 "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
	test_str("stray bytes", JSON("a\xff" "b\x80"), "\"a\\ufffdb\\ufffd\"");
	test_str("truncated at the end", JSON("x\xe2\x82"), "\"x\\ufffd\"");
	test_str("truncated in the middle: one U+FFFD", JSON("\xe2\x82x"), "\"\\ufffdx\"");
	test_str("overlong", JSON("\xc0\xaf"), "\"\\ufffd\\ufffd\"");
	test_str("overlong 3-byte", JSON("\xe0\x80\xaf"), "\"\\ufffd\\ufffd\\ufffd\"");
	test_str("surrogate", JSON("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
	test_str("past U+10FFFF", JSON("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
	test_str("last code point", JSON("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"");
	test_str("4-byte lead then ASCII", JSON("\xf0\x9f\x98Z"), "\"\\ufffdZ\"");
}

static const char *
micros(int64_t ns)
{
	static struct trc_buf b;

	trc_buf_release(&b);
	trc_json_micros(&b, ns);
	trc_buf_addc(&b, '\0');
	return b.data;
}

static void
test_json_numbers(void)
{
	struct trc_buf b;

	test_str("0 us", micros(0), "0.000");
	test_str("1 ns", micros(1), "0.001");
	test_str("1.5 us", micros(1500), "1.500");
	test_str("negative", micros(-1500), "-1.500");
	test_str("big", micros(123456789012), "123456789.012");
	trc_buf_init(&b);
	trc_json_int(&b, INT64_MIN);
	trc_buf_addc(&b, ' ');
	trc_json_uint(&b, UINT64_MAX);
	trc_buf_addc(&b, '\0');
	test_str("extremes", b.data, "-9223372036854775808 18446744073709551615");
	trc_buf_release(&b);
}

static void
test_intern(void)
{
	struct trc_intern t = { 0 };
	char key[16];
	size_t len;
	int ok = 1;

	test_cond("first id 0", trc_intern_id(&t, "a", 1) == 0);
	test_cond("new string, next id", trc_intern_id(&t, "b", 1) == 1);
	test_cond("same bytes, same id", trc_intern_id(&t, "a", 1) == 0);
	test_cond("empty string", trc_intern_id(&t, "", 0) == 2 && trc_intern_id(&t, NULL, 0) == 2);
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ok &= trc_intern_id(&t, key, strlen(key)) == (uint32_t)i + 3;
	}
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ok &= trc_intern_id(&t, key, strlen(key)) == (uint32_t)i + 3;
		ok &= strcmp(trc_intern_str(&t, (uint32_t)i + 3, &len), key) == 0 && len == strlen(key);
	}
	test_cond("1000 strings through the rehashes", ok);
	trc_intern_release(&t);
}

static void
gc_ev(struct trc_sink *k, uint32_t th, uint64_t ts, bool major, const char *reason)
{
	struct trc_message m = { .type = TRC_EV_GC };

	m.gc.thread = th;
	m.gc.start_ts = BASE + ts;
	m.gc.pause_ns = 700;
	m.gc.major = major;
	m.gc.reason = S(reason);
	feed(k, m);
}

/* A collection during a call, one on no traced thread first: chrome gives them a track of
 * their own, jsonl a line each (thread null for the second). */
static void
play_gc(struct trc_export *e)
{
	struct trc_sink k = trc_export_sink(e, PID);

	method(&k, 0, "work", 7);
	thread(&k, 0, "main");
	gc_ev(&k, TRC_GC_NO_THREAD, 0, true, "nofree");
	call(&k, 0, 1000);
	gc_ev(&k, 0, 1500, false, "newobj");
	ret(&k, 0, 3000);
	trc_sink_close(&k);
}

static void
test_gc(void)
{
	struct trc_export *e = start(TRC_FORMAT_CHROME, false);
	const char *s;

	play_gc(e);
	test_str("chrome: collections on a GC track", finish(e),
		 "{\"traceEvents\":[\n"
		 "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":42,\"args\":{\"name\":\"ruby 42\"}},\n"
		 "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":42,\"tid\":999999,\"args\":{\"name\":\"GC\"}},\n"
		 "{\"name\":\"GC major (nofree)\",\"cat\":\"gc\",\"ph\":\"X\",\"pid\":42,\"tid\":999999,"
		 "\"ts\":0.000,\"dur\":0.700},\n"
		 "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":42,\"tid\":1,\"args\":{\"name\":\"main\"}},\n"
		 "{\"name\":\"GC minor (newobj)\",\"cat\":\"gc\",\"ph\":\"X\",\"pid\":42,\"tid\":999999,"
		 "\"ts\":1.500,\"dur\":0.700,\"args\":{\"thread\":\"main\"}},\n"
		 "{\"name\":\"Worker#work\",\"cat\":\"ruby\",\"ph\":\"X\",\"pid\":42,\"tid\":1,"
		 "\"ts\":1.000,\"dur\":2.000}\n"
		 "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"tracer test\"}}\n");
	trc_export_free(e);
	e = start(TRC_FORMAT_JSONL, false);
	play_gc(e);
	test_str("jsonl: a gc line each", finish(e),
		 "{\"pid\":42,\"thread\":null,\"event\":\"gc\",\"ts\":0,\"depth\":0,\"major\":true,"
		 "\"reason\":\"nofree\",\"duration_ns\":700}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"call\",\"method\":\"Worker#work\","
		 "\"ts\":1000,\"depth\":0}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"gc\",\"ts\":1500,\"depth\":1,\"major\":false,"
		 "\"reason\":\"newobj\",\"duration_ns\":700}\n"
		 "{\"pid\":42,\"thread\":\"main\",\"event\":\"return\",\"method\":\"Worker#work\","
		 "\"ts\":3000,\"depth\":0,\"duration_ns\":2000}\n");
	trc_export_free(e);
	e = start(TRC_FORMAT_COLLAPSED, false);
	play_gc(e);
	test_str("collapsed: no collections", finish(e), "Worker#work 2000\n");
	trc_export_free(e);

	e = start(TRC_FORMAT_FLAMEGRAPH, false);
	play_gc(e);
	s = finish(e);
	/* work: 2 us, 0.7 of them stopped by a minor collection; a major one outside any call. */
	test_cond("flamegraph: the whole", strstr(s, "data-x=\"0\" data-v=\"2700\" data-k=\"6\"><title>all\n") != NULL);
	test_cond("flamegraph: a collection outside calls at the top", strstr(s,
		  "data-x=\"0\" data-v=\"700\" data-k=\"4\"><title>GC major\n") != NULL);
	test_cond("flamegraph: the call, its collection taken from its own time", strstr(s,
		  "data-x=\"700\" data-v=\"2000\" data-k=\"6\"><title>Worker#work\napp.rb:7\n"
		  "2.00 \xc2\xb5s (74.07% of all), self 1.30 \xc2\xb5s</title>") != NULL);
	test_cond("flamegraph: the collection inside", strstr(s,
		  "data-x=\"700\" data-v=\"700\" data-k=\"4\"><title>GC minor\n") != NULL);
	trc_export_free(e);
}

static void
mark_ev(struct trc_sink *k, uint32_t type, uint32_t th, uint64_t ts, const char *text)
{
	struct trc_message m = { .type = type };

	m.mark.thread = th;
	m.mark.ts = BASE + ts;
	m.mark.text = S(text);
	feed(k, m);
}

/* A thread's beginning (on no thread of the trace), a call, its end. */
static void
play_marks(struct trc_export *e)
{
	struct trc_sink k = trc_export_sink(e, PID);

	method(&k, 0, "work", 7);
	thread(&k, 0, "job");
	mark_ev(&k, TRC_EV_THREAD_BEGIN, TRC_NO_THREAD, 0, "#<Thread:0x1 a.rb:2 run>");
	call(&k, 0, 1000);
	ret(&k, 0, 3000);
	mark_ev(&k, TRC_EV_THREAD_END, 0, 4000, "#<Thread:0x1@job a.rb:2 run>");
	trc_sink_close(&k);
}

static void
test_marks(void)
{
	struct trc_export *e = start(TRC_FORMAT_CHROME, false);

	play_marks(e);
	test_str("chrome: marks are instant events", finish(e),
		 "{\"traceEvents\":[\n"
		 "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":42,\"args\":{\"name\":\"ruby 42\"}},\n"
		 "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":42,\"tid\":999998,\"args\":{\"name\":\"threads\"}},\n"
		 "{\"name\":\"THREAD BEGIN #<Thread:0x1 a.rb:2 run>\",\"cat\":\"ruby\",\"ph\":\"i\",\"s\":\"t\","
		 "\"pid\":42,\"tid\":999998,\"ts\":0.000},\n"
		 "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":42,\"tid\":1,\"args\":{\"name\":\"job\"}},\n"
		 "{\"name\":\"Worker#work\",\"cat\":\"ruby\",\"ph\":\"X\",\"pid\":42,\"tid\":1,"
		 "\"ts\":1.000,\"dur\":2.000},\n"
		 "{\"name\":\"THREAD END #<Thread:0x1@job a.rb:2 run>\",\"cat\":\"ruby\",\"ph\":\"i\",\"s\":\"t\","
		 "\"pid\":42,\"tid\":1,\"ts\":4.000}\n"
		 "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"tracer test\"}}\n");
	trc_export_free(e);
	e = start(TRC_FORMAT_JSONL, false);
	play_marks(e);
	test_str("jsonl: a line each, named by the mark", finish(e),
		 "{\"pid\":42,\"thread\":null,\"event\":\"thread_begin\",\"ts\":0,\"depth\":0,"
		 "\"text\":\"#<Thread:0x1 a.rb:2 run>\"}\n"
		 "{\"pid\":42,\"thread\":\"job\",\"event\":\"call\",\"method\":\"Worker#work\","
		 "\"ts\":1000,\"depth\":0}\n"
		 "{\"pid\":42,\"thread\":\"job\",\"event\":\"return\",\"method\":\"Worker#work\","
		 "\"ts\":3000,\"depth\":0,\"duration_ns\":2000}\n"
		 "{\"pid\":42,\"thread\":\"job\",\"event\":\"thread_end\",\"ts\":4000,\"depth\":0,"
		 "\"text\":\"#<Thread:0x1@job a.rb:2 run>\"}\n");
	trc_export_free(e);
	e = start(TRC_FORMAT_COLLAPSED, false);
	play_marks(e);
	test_str("collapsed: no marks", finish(e), "Worker#work 2000\n");
	trc_export_free(e);
}

static void
test_format_names(void)
{
	enum trc_format f;

	test_cond("chrome", trc_format_parse("chrome", &f) == 0 && f == TRC_FORMAT_CHROME);
	test_cond("jsonl", trc_format_parse("jsonl", &f) == 0 && f == TRC_FORMAT_JSONL);
	test_cond("text", trc_format_parse("text", &f) == 0 && f == TRC_FORMAT_TEXT);
	test_cond("unknown", trc_format_parse("json", &f) < 0);
	test_cond("pprof", trc_format_parse("pprof", &f) == 0 && f == TRC_FORMAT_PPROF);
	test_str("documents", trc_format_document(TRC_FORMAT_SPEEDSCOPE), "JSON document");
	test_str("a profile", trc_format_document(TRC_FORMAT_PPROF), "profile");
	test_cond("no document", trc_format_document(TRC_FORMAT_COLLAPSED) == NULL);
	test_str("name", trc_format_name(TRC_FORMAT_COLLAPSED), "collapsed");
}

void
test_export(void)
{
	const char *why;

	trc_output_init(&out, -1, -1);
	if (trc_spec_parse(&spec, "Worker#work(self)", &why) < 0)
		test_cond("spec parses", 0);
	test_chrome();
	test_chrome_empty();
	test_pprof_export();
	test_speedscope();
	test_collapsed();
	test_collapsed_merge();
	test_speedscope_spill();
	test_collapsed_pids();
	test_jsonl();
	test_repair();
	test_slow();
	test_odd_names();
	test_bounds();
	test_json_escaping();
	test_json_numbers();
	test_intern();
	test_gc();
	test_marks();
	test_format_names();
	trc_spec_release(&spec);
	trc_output_release(&out);
}
