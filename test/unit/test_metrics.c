/* test_metrics.c: the --top table as Prometheus and OpenMetrics text: families, "(other)", escaping. */
#include <stdlib.h>

#include "metrics.h"
#include "test.h"
#include "top.h"

#define MS 1000000ull

static const pid_t pids[] = { 100, 200 };

static struct trc_top_row
R(const char *file, int32_t line, const char *label, uint64_t count, uint64_t total, uint64_t self)
{
	return (struct trc_top_row){ { file, (uint32_t)strlen(file) }, line,
				     { label, (uint32_t)strlen(label) }, count, total, self, { "", 0 }, 0 };
}

static void
feed(struct trc_top *t, pid_t pid, const struct trc_top_row *rows, size_t n, uint64_t events,
     uint64_t lost)
{
	struct trc_message m = { .type = TRC_MSG_TOP };

	m.top.events = events;
	m.top.lost = lost;
	m.top.gcs = 5;
	m.top.major_gcs = 2;
	m.top.gc_ns = 1500 * MS;
	m.top.rows = rows;
	m.top.nrows = n;
	trc_top_feed(t, pid, &m);
}

/* The exposition (NUL-terminated; the caller frees it). */
static char *
expose(const struct trc_top *t, const struct trc_metrics_view *v, enum trc_metrics_format f)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_metrics_format(t, v, f, &b);
	trc_buf_addc(&b, '\0');
	return b.data;
}

static char *
label(const char *p, size_t n)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_metrics_label_value(&b, p, n);
	trc_buf_addc(&b, '\0');
	return b.data;
}

static void
check_label(const char *descr, const char *p, size_t n, const char *want)
{
	char *got = label(p, n);

	test_str(descr, got, want);
	free(got);
}

static void
test_escaping(void)
{
	test_note("label values: EXACT's text of the bytes, in the format's three escapes");
	check_label("plain", "Foo#bar", 7, "Foo#bar");
	check_label("quote; backslash and newline escaped twice: the value is \\\\ and \\n",
		    "a\"b\\c\nd", 7, "a\\\"b\\\\\\\\c\\\\nd");
	check_label("UTF-8 kept", "Caf\xc3\xa9#\xe2\x9c\x93", 9, "Caf\xc3\xa9#\xe2\x9c\x93");
	check_label("a lone continuation byte", "a\x80z", 3, "a\\\\x80z");
	check_label("a cut sequence at the end", "a\xe2\x9c", 3, "a\\\\xe2\\\\x9c");
	check_label("an overlong slash", "\xc0\xaf", 2, "\\\\xc0\\\\xaf");
	check_label("a surrogate", "\xed\xa0\x80", 3, "\\\\xed\\\\xa0\\\\x80");
	check_label("U+FFFD as it is: not the byte it once replaced", "bad\xef\xbf\xbd", 6,
		    "bad\xef\xbf\xbd");
	check_label("0xff: a value of its own", "bad\xff", 4, "bad\\\\xff");
	check_label("a NUL, and what follows it", "a\0b", 3, "a\\\\x00b");
	check_label("an escape and a bidi control", "\x1b[2J\xe2\x80\xae", 7,
		    "\\\\e[2J\\\\xe2\\\\x80\\\\xae");
}

static void
test_negotiation(void)
{
	test_note("Accept picks the dialect");
	test_cond("none: text", trc_metrics_negotiate(NULL) == TRC_METRICS_TEXT);
	test_cond("text", trc_metrics_negotiate("text/plain;version=0.0.4") == TRC_METRICS_TEXT);
	test_cond("Prometheus' own", trc_metrics_negotiate(
			  "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
			  "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1") ==
		  TRC_METRICS_OPENMETRICS);
	test_cond("case aside", trc_metrics_negotiate("Application/OpenMetrics-Text") ==
		  TRC_METRICS_OPENMETRICS);
	test_str("text type", trc_metrics_content_type(TRC_METRICS_TEXT),
		 "text/plain; version=0.0.4; charset=utf-8");
	test_str("openmetrics type", trc_metrics_content_type(TRC_METRICS_OPENMETRICS),
		 "application/openmetrics-text; version=1.0.0; charset=utf-8");
}

static const char time_text[] =
	"# HELP ruby_method_calls_total Calls of Ruby methods, by method and the file and line defining it.\n"
	"# TYPE ruby_method_calls_total counter\n"
	"ruby_method_calls_total{method=\"A#slow\",file=\"/app/a.rb\",line=\"3\"} 4\n"
	"ruby_method_calls_total{method=\"(other)\"} 9\n"
	"# HELP ruby_method_seconds_total Seconds spent in Ruby methods: kind=total with their callees, kind=self without.\n"
	"# TYPE ruby_method_seconds_total counter\n"
	"ruby_method_seconds_total{method=\"A#slow\",file=\"/app/a.rb\",line=\"3\",kind=\"total\"} 2.000000000\n"
	"ruby_method_seconds_total{method=\"A#slow\",file=\"/app/a.rb\",line=\"3\",kind=\"self\"} 1.500000000\n"
	"ruby_method_seconds_total{method=\"(other)\",kind=\"total\"} 0.000000030\n"
	"ruby_method_seconds_total{method=\"(other)\",kind=\"self\"} 0.000000011\n"
	"# HELP ruby_gc_collections_total Garbage collections, minor and major.\n"
	"# TYPE ruby_gc_collections_total counter\n"
	"ruby_gc_collections_total{kind=\"minor\"} 6\n"
	"ruby_gc_collections_total{kind=\"major\"} 4\n"
	"# HELP ruby_gc_pause_seconds_total Seconds garbage collections stopped the processes, summed over them.\n"
	"# TYPE ruby_gc_pause_seconds_total counter\n"
	"ruby_gc_pause_seconds_total 3.000000000\n"
	"# HELP tracer_events_total Events the agents counted.\n"
	"# TYPE tracer_events_total counter\n"
	"tracer_events_total 30\n"
	"# HELP tracer_events_lost_total Events lost: the agents' buffers were full, or the table was.\n"
	"# TYPE tracer_events_lost_total counter\n"
	"tracer_events_lost_total 2\n"
	"# HELP tracer_targets Processes tracer is attached to now.\n"
	"# TYPE tracer_targets gauge\n"
	"tracer_targets 2\n";

/* --top time from two processes, one row of its own: the others sum into "(other)". */
static void
test_time(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_TIME, pids, 2);
	struct trc_top_row a[] = { R("/app/a.rb", 3, "A#slow", 3, 1500 * MS, 1000 * MS),
				   R("/app/b.rb", 7, "B#fast", 5, 10, 5) };
	struct trc_top_row b[] = { R("/app/a.rb", 3, "A#slow", 1, 500 * MS, 500 * MS),
				   R("/app/c.rb", 1, "C#x", 4, 20, 6) };
	struct trc_metrics_view v = { .rows = 1, .gc = true, .targets = 2 };
	char *got;

	feed(t, 100, a, 2, 10, 1);
	feed(t, 200, b, 2, 20, 1);
	test_note("--top time: calls and seconds, the busiest by TOTAL first, --gc");
	got = expose(t, &v, TRC_METRICS_TEXT);
	test_str("text 0.0.4", got, time_text);
	free(got);

	test_note("OpenMetrics: families without _total, # EOF");
	v.gc = false;
	got = expose(t, &v, TRC_METRICS_OPENMETRICS);
	test_cond("family name", strstr(got, "# TYPE ruby_method_calls counter\n") != NULL);
	test_cond("help by family", strstr(got, "# HELP ruby_method_seconds Seconds") != NULL);
	test_cond("sample keeps _total", strstr(got, "\nruby_method_calls_total{method=\"A#slow\"") != NULL);
	test_cond("gauge", strstr(got, "# TYPE tracer_targets gauge\ntracer_targets 2\n") != NULL);
	test_cond("no gc without --gc", strstr(got, "ruby_gc") == NULL);
	test_cond("ends with # EOF", strlen(got) > 6 && strcmp(got + strlen(got) - 6, "# EOF\n") == 0);
	free(got);
	trc_top_free(t);
}

/* Counters: what was counted stays after the row drops out of the top (into "(other)"). */
static void
test_monotonic_sum(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, pids, 2);
	struct trc_top_row a[] = { R("/app/a.rb", 1, "A#a", 10, 0, 0) };
	struct trc_top_row b[] = { R("/app/b.rb", 2, "B#b", 30, 0, 0) };
	struct trc_metrics_view v = { .rows = 1, .targets = 1 };
	char *got;

	feed(t, 100, a, 1, 10, 0);
	feed(t, 200, b, 1, 30, 0);
	test_note("calls: no seconds family; every count in a series");
	got = expose(t, &v, TRC_METRICS_TEXT);
	test_cond("busiest own", strstr(got, "ruby_method_calls_total{method=\"B#b\",file=\"/app/b.rb\","
				       "line=\"2\"} 30\n") != NULL);
	test_cond("the rest summed", strstr(got, "ruby_method_calls_total{method=\"(other)\"} 10\n") != NULL);
	test_cond("no seconds", strstr(got, "ruby_method_seconds") == NULL);
	free(got);

	test_note("rows at most: no (other) when all fit");
	v.rows = 25;
	got = expose(t, &v, TRC_METRICS_TEXT);
	test_cond("no other", strstr(got, "(other)") == NULL);
	free(got);
	trc_top_free(t);
}

static void
test_hostile(void)
{
	static const char name[] = "Evil#a\"b\\c\nd\xff";
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, pids, 1);
	struct trc_top_row a[] = { R("/app/\"x\".rb", 1, name, 1, 0, 0) };
	struct trc_metrics_view v = { .rows = 5, .targets = 1 };
	char *got;

	feed(t, 100, a, 1, 1, 0);
	test_note("a method named to break the exposition stays on its line");
	got = expose(t, &v, TRC_METRICS_TEXT);
	test_cond("escaped", strstr(got, "ruby_method_calls_total{method=\"Evil#a\\\"b\\\\\\\\c\\\\nd\\\\xff\","
				    "file=\"/app/\\\"x\\\".rb\",line=\"1\"} 1\n") != NULL);
	free(got);
	trc_top_free(t);
}

/* The label each kind of mode uses, and its sites. */
static void
test_modes(void)
{
	static const struct {
		enum trc_top_mode mode;
		const char *label, *line;
	} cases[] = {
		{ TRC_TOP_OBJECTS, "class", "ruby_allocations_total{class=\"Widget\",file=\"/app/a.rb\",line=\"4\"} 7\n" },
		{ TRC_TOP_OBJECTS_TOTAL, "class", "ruby_allocations_total{class=\"Widget\"} 7\n" },
		{ TRC_TOP_STRINGS, "class", "ruby_allocations_total{class=\"String\",file=\"/app/a.rb\",line=\"4\"} 7\n" },
		{ TRC_TOP_ARRAYS, "class", "ruby_allocations_total{class=\"Array|Hash\",file=\"/app/a.rb\",line=\"4\"} 7\n" },
		{ TRC_TOP_EXCEPTIONS, "class", "ruby_exceptions_total{class=\"Widget\",file=\"/app/a.rb\",line=\"4\"} 7\n" },
		{ TRC_TOP_THREADS, "thread", "ruby_thread_gvl_wait_seconds_total{thread=\"Widget\"} 0.000000100\n" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct trc_top *t = trc_top_new(cases[i].mode, pids, 1);
		bool site = !(trc_top_mode_flags(cases[i].mode) & TRC_TOPM_NO_SITE);
		bool labelled = trc_top_mode_flags(cases[i].mode) & TRC_TOPM_CLASS ||
				cases[i].mode == TRC_TOP_THREADS;
		struct trc_top_row a[] = { R(site ? "/app/a.rb" : "", site ? 4 : 0,
					     labelled ? "Widget" : "", 7, 100, 50) };
		struct trc_metrics_view v = { .rows = 5, .targets = 1 };
		char *got;

		feed(t, 100, a, 1, 7, 0);
		test_note("--top %s", trc_top_mode_name(cases[i].mode));
		got = expose(t, &v, TRC_METRICS_TEXT);
		test_cond("its series", strstr(got, cases[i].line) != NULL);
		if (strstr(got, cases[i].line) == NULL)
			printf("%s", got);
		free(got);
		trc_top_free(t);
	}
}

/* Whether the cache's bytes are those trc_metrics_format() makes now. */
static bool
cache_true(struct trc_metrics_cache *c, const struct trc_top *t, const struct trc_metrics_view *v,
	   enum trc_metrics_format f)
{
	const struct trc_buf *b = trc_metrics_cached(c, t, v, f);
	char *want = expose(t, v, f);
	bool same = b->len == strlen(want) && memcmp(b->data, want, b->len) == 0;

	free(want);
	return same;
}

/*
 * The cache makes its exposition again only when the table, the view or the format changed.
 * Whether it did is seen through a byte the test scribbles over: kept, nothing was made.
 */
static void
test_cache(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, pids, 2);
	struct trc_top_row a[] = { R("/app/a.rb", 3, "A#f", 3, 0, 0) };
	struct trc_metrics_view v = { .rows = 5, .targets = 2 };
	struct trc_metrics_cache c;
	struct trc_message empty = { .type = TRC_MSG_TOP };    /* a tick with nothing counted */
	const struct trc_buf *b;

	test_note("a cached exposition: made once per change of the counts, view or format");
	trc_metrics_cache_init(&c);
	feed(t, 100, a, 1, 3, 0);
	test_cond("the first: made", cache_true(&c, t, &v, TRC_METRICS_TEXT));
	c.out.data[0] = '!';
	b = trc_metrics_cached(&c, t, &v, TRC_METRICS_TEXT);
	test_cond("nothing changed: the same bytes, not made again", b->data[0] == '!');
	trc_top_feed(t, 200, &empty);
	b = trc_metrics_cached(&c, t, &v, TRC_METRICS_TEXT);
	test_cond("a report with nothing in it: not made again", b->data[0] == '!');
	feed(t, 200, a, 1, 3, 0);
	test_cond("new counts: made again", cache_true(&c, t, &v, TRC_METRICS_TEXT));
	c.out.data[0] = '!';
	v.targets = 1;
	test_cond("a target gone: made again", cache_true(&c, t, &v, TRC_METRICS_TEXT));
	c.out.data[0] = '!';
	test_cond("the other format: made again", cache_true(&c, t, &v, TRC_METRICS_OPENMETRICS));
	c.out.data[0] = '!';
	trc_top_reset(t);
	test_cond("a reset: made again", cache_true(&c, t, &v, TRC_METRICS_OPENMETRICS));
	trc_metrics_cache_release(&c);
	trc_top_free(t);
}

void
test_metrics(void)
{
	test_escaping();
	test_negotiation();
	test_time();
	test_monotonic_sum();
	test_hostile();
	test_modes();
	test_cache();
}
