/* test_top.c: the --top table: deltas summed across pids, sorted, laid out and printed exactly. */
#include <stdlib.h>

#include "export.h"
#include "output.h"
#include "test.h"
#include "top.h"
#include "top_json.h"
#include "top_text.h"

#define MS 1000000ull

static const pid_t two_pids[] = { 100, 200 };

static struct trc_top_row
R(const char *file, int32_t line, const char *label, uint64_t count)
{
	return (struct trc_top_row){ { file, (uint32_t)strlen(file) }, line,
				     { label, (uint32_t)strlen(label) }, count, 0, 0, 0, { 0 }, { "", 0 }, 0 };
}

/* An exception's row, raised at file:line with the app at app:app_line ("": none). */
static struct trc_top_row
X(const char *file, int32_t line, const char *label, const char *app, int32_t app_line, uint64_t count)
{
	return (struct trc_top_row){ { file, (uint32_t)strlen(file) }, line,
				     { label, (uint32_t)strlen(label) }, count, 0, 0, 0, { 0 },
				     { app, (uint32_t)strlen(app) }, app_line };
}

static struct trc_top_row
T(const char *file, int32_t line, const char *label, uint64_t count, uint64_t total,
  uint64_t self)
{
	struct trc_top_row r = R(file, line, label, count);

	r.total_ns = total;
	r.self_ns = self;
	return r;
}

static void
feed(struct trc_top *t, pid_t pid, const struct trc_top_row *rows, size_t n, uint64_t events,
     uint64_t lost)
{
	struct trc_message m = { .type = TRC_MSG_TOP };

	m.top.events = events;
	m.top.lost = lost;
	m.top.rows = rows;
	m.top.nrows = n;
	trc_top_feed(t, pid, &m);
}

static struct trc_top_view
view(unsigned width, unsigned rows)
{
	static const char *const dirs[] = { "/srv/app" };

	return (struct trc_top_view){ .pids = two_pids, .npids = 1, .elapsed = 12.2,
				      .events_per_sec = 45678, .filter = dirs, .nfilter = 1,
				      .app_dirs = true, .width = width, .rows = rows };
}

/* The snapshot as text (NUL-terminated; the caller frees it). */
static char *
text(const struct trc_top *t, const struct trc_top_view *v)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_top_format_text(t, v, &b);
	trc_buf_addc(&b, '\0');
	return b.data;
}

static char *
json(const struct trc_top *t, const struct trc_top_view *v)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_top_format_json(t, v, &b);
	trc_buf_addc(&b, '\0');
	return b.data;
}

/* Whether out, which this frees, holds needle. */
static int
holds(char *out, const char *needle)
{
	int found = strstr(out, needle) != NULL;

	free(out);
	return found;
}

/* The table without its header line and blank line. */
static const char *
table_of(const char *s)
{
	const char *p = strstr(s, "\n\n");

	return p ? p + 2 : s;
}

static void
check_text(const char *descr, const struct trc_top *t, const struct trc_top_view *v,
	   const char *want_table)
{
	char *s = text(t, v);

	test_str(descr, table_of(s), want_table);
	free(s);
}

static bool
lines_fit(const char *s, size_t width)
{
	for (const char *p = s; *p;) {
		const char *nl = strchr(p, '\n');
		size_t cols = 0;

		for (const char *q = p; q < nl; q++)
			cols += ((unsigned char)*q & 0xc0) != 0x80;
		if (cols > width)
			return false;
		p = nl + 1;
	}
	return true;
}

static void
test_modes(void)
{
	enum trc_top_mode m;

	test_cond("calls parses", trc_top_mode_parse("calls", &m) == 0 && m == TRC_TOP_CALLS);
	test_cond("objects-total parses",
		  trc_top_mode_parse("objects-total", &m) == 0 && m == TRC_TOP_OBJECTS_TOTAL);
	test_cond("exceptions parses",
		  trc_top_mode_parse("exceptions", &m) == 0 && m == TRC_TOP_EXCEPTIONS);
	test_cond("unknown mode", trc_top_mode_parse("object", &m) < 0);
	for (int i = TRC_TOP_CALLS; i <= TRC_TOP_EXCEPTIONS; i++)
		test_cond("name round trip", trc_top_mode_parse(trc_top_mode_name(i), &m) == 0 &&
			  (int)m == i);
	test_cond("no name out of range", trc_top_mode_name((enum trc_top_mode)99) == NULL);
}

static void
test_aggregate(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 2);
	struct trc_top_row a[] = { R("/a.rb", 3, "A#x", 5), R("/a.rb", 9, "A#y", 3) };
	struct trc_top_row b[] = { R("/a.rb", 3, "A#x", 7), R("/b.rb", 1, "B#z", 1) };
	struct trc_top_row again[] = { R("/a.rb", 9, "A#y", 1), R("/a.rb", 9, "A#y", 1) };
	struct trc_top_view v = view(80, 25);

	feed(t, 100, a, 2, 50, 1);
	feed(t, 200, b, 2, 40, 2);
	feed(t, 100, again, 2, 10, 0);
	v.pids_column = true;
	v.npids = 2;
	test_cond("three keys", trc_top_size(t) == 3);
	test_cond("events summed", trc_top_events(t) == 100);
	test_cond("lost summed", trc_top_lost(t) == 3);
	check_text("summed across pids", t, &v,
		   "FILENAME  LINE  METHOD  CALLS  PIDS\n"
		   "/a.rb        3  A#x        12     2\n"
		   "/a.rb        9  A#y         5     1\n"
		   "/b.rb        1  B#z         1     1\n");
	v.npids = 1;
	check_text("PIDS counts the targets shown (200 exited): the rows stay", t, &v,
		   "FILENAME  LINE  METHOD  CALLS  PIDS\n"
		   "/a.rb        3  A#x        12     1\n"
		   "/a.rb        9  A#y         5     1\n"
		   "/b.rb        1  B#z         1     0\n");
	v.npids = 2;
	trc_top_reset(t);
	test_cond("reset empties", trc_top_size(t) == 0);
	test_cond("reset keeps the events", trc_top_events(t) == 100);
	feed(t, 200, a, 1, 0, 0);
	check_text("after reset", t, &v,
		   "FILENAME  LINE  METHOD  CALLS  PIDS\n"
		   "/a.rb        3  A#x         5     1\n");
	trc_top_free(t);
}

static void
test_unknown_pid(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 2);
	struct trc_top_row a[] = { R("/a.rb", 3, "A#x", 5) };
	struct trc_top_view v = view(80, 25);

	feed(t, 999, a, 1, 0, 0);
	v.pids_column = true;
	check_text("unknown pid counts, without a pid", t, &v,
		   "FILENAME  LINE  METHOD  CALLS  PIDS\n"
		   "/a.rb        3  A#x         5     0\n");
	trc_top_free(t);
}

static void
test_sorting(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 1);
	struct trc_top_row rows[] = {
		R("/b.rb", 2, "B#b", 7), R("/a.rb", 20, "A#b", 7), R("/a.rb", 3, "A#a", 7),
		R("/z.rb", 1, "Z#z", 100), R("/a.rb", 3, "A#0", 7), R("/c.rb", 1, "C#c", 1),
	};
	struct trc_top_view v = view(80, 4);

	feed(t, 100, rows, 6, 0, 0);
	check_text("count desc, then file, line, label; --rows", t, &v,
		   "FILENAME  LINE  METHOD  CALLS\n"
		   "/z.rb        1  Z#z       100\n"
		   "/a.rb        3  A#0         7\n"
		   "/a.rb        3  A#a         7\n"
		   "/a.rb       20  A#b         7\n");
	trc_top_free(t);
}

static void
test_time(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_TIME, two_pids, 1);
	struct trc_top_row rows[] = {
		T("/a.rb", 1, "A#many", 1000, 50 * MS, 40 * MS),
		T("/a.rb", 5, "A#slow", 3, 900 * MS, 300 * MS),
		T("/a.rb", 9, "A#none", 0, 0, 0),
		T("/a.rb", 7, "A#tiny", 1000, 412000, 411999),
	};
	struct trc_top_view v = view(100, 25);
	char *s;

	feed(t, 100, rows, 4, 0, 0);
	check_text("time: sorted by TOTAL, ms to the ns, AVG = TOTAL/CALLS", t, &v,
		   "FILENAME  LINE  METHOD  CALLS       TOTAL        SELF         AVG\n"
		   "/a.rb        5  A#slow      3  900.000000  300.000000  300.000000\n"
		   "/a.rb        1  A#many   1000   50.000000   40.000000    0.050000\n"
		   "/a.rb        7  A#tiny   1000    0.412000    0.411999    0.000412\n"
		   "/a.rb        9  A#none      0    0.000000    0.000000    0.000000\n");
	v.rows = 1;
	s = json(t, &v);
	test_str("time JSON", s,
		 "{\"mode\":\"time\",\"pids\":[100],\"elapsed\":12.200,\"events\":0,"
		 "\"events_per_sec\":45678.0,\"lost\":0,\"filter\":[\"/srv/app\"],\"all\":false,"
		 "\"rows\":[{\"file\":\"/a.rb\",\"line\":5,\"method\":\"A#slow\",\"count\":3,"
		 "\"total_ms\":900.000000,\"self_ms\":300.000000,\"avg_ms\":300.000000,\"pids\":1}]}\n");
	free(s);
	trc_top_free(t);
}

/* Every mode's columns, with and without PIDS. */
static void
test_columns(void)
{
	static const struct {
		enum trc_top_mode mode;
		const char *titles;
	} want[] = {
		{ TRC_TOP_CALLS, "FILENAME  LINE  METHOD  CALLS" },
		{ TRC_TOP_TIME, "FILENAME  LINE  METHOD  CALLS  TOTAL  SELF  AVG" },
		{ TRC_TOP_OBJECTS_TOTAL, "OBJECT  COUNT" },
		{ TRC_TOP_OBJECTS, "FILENAME  LINE  OBJECT  COUNT" },
		{ TRC_TOP_ARRAYS, "FILENAME  LINE  COUNT" },
		{ TRC_TOP_STRINGS, "FILENAME  LINE  COUNT" },
		{ TRC_TOP_EXCEPTIONS, "FILENAME  LINE  EXCEPTION  COUNT" },
	};
	char wanted[128];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct trc_top *t = trc_top_new(want[i].mode, two_pids, 2);
		struct trc_top_view v = view(80, 25);

		snprintf(wanted, sizeof(wanted), "%s\n", want[i].titles);
		check_text(want[i].titles, t, &v, wanted);
		v.pids_column = true;
		snprintf(wanted, sizeof(wanted), "%s  PIDS\n", want[i].titles);
		check_text("with PIDS", t, &v, wanted);
		trc_top_free(t);
	}
}

static void
test_object_modes(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_OBJECTS_TOTAL, two_pids, 1);
	struct trc_top_row total[] = { R("", 0, "Widget", 1000), R("", 0, "String", 20),
				       R("", 0, "Widget", 1) };
	struct trc_top_row arrays[] = { R("/app/x.rb", 7, "", 1000), R("/app/x.rb", 8, "", 999) };
	struct trc_top_view v = view(80, 25);
	char *s;

	feed(t, 100, total, 3, 0, 0);
	check_text("objects-total: one row per class", t, &v,
		   "OBJECT  COUNT\n"
		   "Widget   1001\n"
		   "String     20\n");
	trc_top_free(t);
	t = trc_top_new(TRC_TOP_ARRAYS, two_pids, 1);
	feed(t, 100, arrays, 2, 0, 0);
	check_text("arrays: no label column", t, &v,
		   "FILENAME   LINE  COUNT\n"
		   "/app/x.rb     7   1000\n"
		   "/app/x.rb     8    999\n");
	v.rows = 1;
	s = json(t, &v);
	test_cond("arrays JSON has no label key", strstr(s, "\"rows\":[{\"file\":\"/app/x.rb\","
		  "\"line\":7,\"count\":1000,\"pids\":1}]}") != NULL);
	free(s);
	trc_top_free(t);
}

static void
test_header(void)
{
	static const char *const prefixes[] = { "/a", "/b" };
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 2);
	struct trc_top_row lost[] = { R("/a.rb", 1, "X", 1) };
	struct trc_top_view v = view(200, 25);
	char *s;

	feed(t, 100, lost, 1, 5, 7);
	v.npids = 2;
	s = text(t, &v);
	test_str("header with app dir", s,
		 "tracer --top calls  pids: 100,200  elapsed: 12s  events/s: 45678  lost: 7  "
		 "app dir: /srv/app\n\n"
		 "FILENAME  LINE  METHOD  CALLS\n"
		 "/a.rb        1  X           1\n");
	free(s);
	v.filter = prefixes;
	v.nfilter = 2;
	v.app_dirs = false;
	s = text(t, &v);
	test_cond("header with filters", strstr(s, "lost: 7  filter: /a, /b\n") != NULL);
	free(s);
	v.all = true;
	s = text(t, &v);
	test_cond("header with all files", strstr(s, "lost: 7  all files\n") != NULL);
	free(s);
	v.all = false;
	v.app_dirs = true;
	v.nfilter = 0;
	v.npids = 0;
	v.width = 40;
	s = text(t, &v);
	test_cond("header cut to the width",
		  strncmp(s, "tracer --top calls  pids: -  elapsed: 12\n", 41) == 0);
	free(s);
	trc_top_free(t);
}

/* --gc: the collections since the previous table, and in all, under the header; JSON's totals. */
static void
test_gc(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 2);
	struct trc_top_row rows[] = { R("/srv/app/a.rb", 1, "X", 1) };
	struct trc_message m = { .type = TRC_MSG_TOP };
	struct trc_top_view v = view(200, 25);
	struct trc_top_gc g;
	char *s;

	m.top.rows = rows;
	m.top.nrows = 1;
	m.top.gcs = 30;
	m.top.major_gcs = 2;
	m.top.gc_ns = 400000000;
	trc_top_feed(t, 100, &m);
	m.top.gcs = 10;
	m.top.major_gcs = 0;
	m.top.gc_ns = 100000000;
	trc_top_feed(t, 200, &m);
	g = trc_top_gc(t);
	test_cond("collections add up over targets", g.count == 40 && g.major == 2 &&
		  g.pause_ns == 500000000);
	v.npids = 2;
	v.gc = true;
	v.gc_recent = (struct trc_top_gc){ 12, 1, 50000000 };
	v.gc_secs = 1.0;
	s = text(t, &v);
	test_str("GC line", s,
		 "tracer --top calls  pids: 100,200  elapsed: 12s  events/s: 45678  lost: 0  "
		 "app dir: /srv/app\n"
		 "GC: 12 in 1.0s (1 major), 50 ms paused (2.5%)  since the start: 40 (2 major), "
		 "0.50s paused\n\n"
		 "FILENAME       LINE  METHOD  CALLS\n"
		 "/srv/app/a.rb     1  X           2\n");
	free(s);
	s = json(t, &v);
	test_cond("JSON totals", strstr(s, ",\"all\":false,\"gc\":{\"count\":40,\"major\":2,"
		  "\"pause_ms\":500.000},\"rows\":") != NULL);
	free(s);
	v.gc = false;
	s = text(t, &v);
	test_cond("no GC line without --gc", strstr(s, "GC:") == NULL);
	free(s);
	trc_top_free(t);
}

/* Checks the exact layout at a width where FILENAME takes what is left. */
static void
test_width_fitting(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 1);
	struct trc_top_row rows[] = {
		R("/very/long/path/to/some/deeply/nested/app/models/user.rb", 12, "User#save", 5),
		R("/short.rb", 1, "S#s", 1),
	};
	struct trc_top_view v = view(50, 25);
	char *s;

	feed(t, 100, rows, 2, 0, 0);
	s = text(t, &v);
	/* 50 - LINE(4) - METHOD(9) - CALLS(5) - 3 gaps(6) = 26 for FILENAME. */
	test_str("FILENAME gets the rest", table_of(s),
		 "FILENAME                    LINE  METHOD     CALLS\n"
		 "...sted/app/models/user.rb    12  User#save      5\n"
		 "/short.rb                      1  S#s            1\n");
	test_cond("every line fits", lines_fit(s, 50));
	free(s);
	v.width = 200;
	s = text(t, &v);
	test_cond("wide: nothing cut", strstr(s, "/very/long/path/to/some/deeply/nested/app/models"
					      "/user.rb  ") != NULL);
	test_cond("wide: no trailing padding", strstr(s, " \n") == NULL);
	free(s);
	trc_top_free(t);
}

static void
test_label_cut(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 1);
	struct trc_top_row rows[] = {
		R("/app/some/file/name.rb", 1,
		  "Deeply::Nested::Module::With::AVeryLongClassName#and_a_long_method_name", 5),
	};
	struct trc_top_view v = view(46, 25);
	char *s;

	feed(t, 100, rows, 1, 0, 0);
	s = text(t, &v);
	/* FILENAME down to 16 first, then METHOD takes 46 - 16 - 4 - 5 - 6 = 15. */
	test_str("METHOD cut from the left too", table_of(s),
		 "FILENAME          LINE  METHOD           CALLS\n"
		 ".../file/name.rb     1  ..._method_name      5\n");
	free(s);
	v.width = 30;
	s = text(t, &v);
	/* Both at their minimums would need 43: both go on shrinking, FILENAME first. */
	test_str("a narrow terminal still fits", table_of(s),
		 "FILE  LINE  METHOD       CALLS\n"
		 "...b     1  ...hod_name      5\n");
	test_cond("30 columns", lines_fit(s, 30));
	free(s);
	v.width = 10;
	s = text(t, &v);
	test_str("numbers never shrink", table_of(s),
		 "FILE  LINE  METH  CALLS\n"
		 "...b     1  ...e      5\n");
	free(s);
	trc_top_free(t);
}

static void
test_utf8_and_controls(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_EXCEPTIONS, two_pids, 1);
	struct trc_top_row rows[] = {
		R("/app/\xc3\xa9t\xc3\xa9/caf\xc3\xa9/na\xc3\xafve/r\xc3\xa9sum\xc3\xa9.rb", 1, "E", 2),
		R("/app/x\ny.rb", 2, "Bad\x1b[2J", 1),
		R("/c1.rb", 3, "\xc2\x9b" "2J\x9b", 1),
		{ { "/n.rb", 5 }, 4, { "K#a\0b", 5 }, 1, 0, 0, 0, { 0 }, { "", 0 }, 0 },
	};
	struct trc_top_view v = view(40, 25);
	char *s;

	feed(t, 100, rows, 4, 0, 0);
	s = text(t, &v);
	test_str("cut on a character boundary, controls escaped", table_of(s),
		 "FILENAME       LINE  EXCEPTION     COUNT\n"
		 ".../r\xc3\xa9sum\xc3\xa9.rb     1  E                 2\n"
		 "/app/x\\ny.rb      2  Bad\\e[2J          1\n"
		 "/c1.rb            3  ...x9b2J\\x9b      1\n"
		 "/n.rb             4  K#a\\x00b          1\n");
	test_cond("no escape reaches the terminal", strchr(s, '\x1b') == NULL);
	test_cond("no C1 control either", strstr(s, "\xc2\x9b") == NULL);
	free(s);
	trc_top_free(t);
}

static void
test_json_escaping(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_OBJECTS, two_pids, 2);
	struct trc_top_row rows[] = {
		R("/a \"q\" \\b\n\t\x01\x7f.rb", 1, "Caf\xc3\xa9", 2),
		R("/bad\xff\xc3(\xed\xa0\x80\xf0\x9f\x98\x80.rb", 2, "X", 1),
	};
	struct trc_top_view v = view(80, 25);
	static const char *const prefixes[] = { "/p\"" };
	char *s;

	feed(t, 100, rows, 2, 9, 0);
	feed(t, 200, rows, 1, 1, 0);
	v.npids = 2;
	v.filter = prefixes;
	v.app_dirs = false;
	s = json(t, &v);
	test_str("JSON escapes", s,
		 "{\"mode\":\"objects\",\"pids\":[100,200],\"elapsed\":12.200,\"events\":10,"
		 "\"events_per_sec\":45678.0,\"lost\":0,\"filter\":[\"/p\\\"\"],\"all\":false,"
		 "\"rows\":[{\"file\":\"/a \\\"q\\\" \\\\b\\n\\t\\u0001\\u007f.rb\",\"line\":1,"
		 "\"object\":\"Caf\xc3\xa9\",\"count\":4,\"pids\":2},"
		 "{\"file\":\"/bad\\ufffd\\ufffd(\\ufffd\\ufffd\\ufffd\xf0\x9f\x98\x80.rb\",\"line\":2,"
		 "\"object\":\"X\",\"count\":1,\"pids\":1}]}\n");
	free(s);
	v.all = true;
	s = json(t, &v);
	test_cond("all: no filter", strstr(s, "\"filter\":[],\"all\":true") != NULL);
	free(s);
	trc_top_free(t);
}

/* Bytes that need escaping or repair, and how every JSON the client writes shows them. */
#define ODD_LABEL "A\x01\x1b\n\t\"\\\x7f \xe2\x82x \xc0\xaf \xed\xa0\x80 \xc3\xa9 \xf0\x9f\x98"
#define ODD_JSON "\"A\\u0001\\u001b\\n\\t\\\"\\\\\\u007f \\ufffdx \\ufffd\\ufffd " \
		 "\\ufffd\\ufffd\\ufffd \xc3\xa9 \\ufffd\""

/* The "method" of the jsonl exporter's first line for a method named label (NUL-terminated;
 * the caller frees it). */
static char *
jsonl_method(const char *label)
{
	struct trc_export_opts o = { .format = TRC_FORMAT_JSONL, .tool = "tracer test" };
	struct trc_message m = { .type = TRC_EV_METHOD };
	struct trc_output out;
	struct trc_export *e;
	struct trc_sink k;
	char *s, *end;

	trc_output_init(&out, -1, -1);
	e = trc_export_new(&out, &o);
	k = trc_export_sink(e, 100);
	m.method.name = (struct trc_str){ label, (uint32_t)strlen(label) };
	trc_sink_feed(&k, &m);
	m = (struct trc_message){ .type = TRC_EV_CALL };
	trc_sink_feed(&k, &m);
	trc_sink_close(&k);
	trc_export_finish(e);
	trc_export_free(e);
	trc_buf_addc(&out.out, '\0');
	s = strstr(out.out.data, "\"method\":");
	end = s != NULL ? strstr(s, ",\"ts\":") : NULL;
	s = s != NULL && end != NULL ? strndup(s, (size_t)(end - s)) : NULL;
	trc_output_release(&out);
	return s;
}

/* A --top label comes out byte for byte as the exporters write the same name. */
static void
test_json_like_exporters(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 1);
	struct trc_top_row row = R("/a.rb", 1, ODD_LABEL, 1);
	struct trc_top_view v = view(80, 25);
	char *s, *x;

	feed(t, 100, &row, 1, 1, 0);
	s = json(t, &v);
	test_cond("--top label escaped and repaired",
		  strstr(s, ",\"method\":" ODD_JSON ",\"count\":1,") != NULL);
	x = jsonl_method(ODD_LABEL);
	test_str("jsonl method: the same bytes", x, "\"method\":" ODD_JSON);
	free(x);
	free(s);
	trc_top_free(t);
}

static void
test_ignore(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 1);
	struct trc_top_row rows[] = {
		R("/a.rb", 1, "Foo#bar", 9), R("/a.rb", 2, "Foo.baz", 8), R("/a.rb", 3, "FooBar#x", 7),
		R("/a.rb", 4, "Foo", 6), R("/a.rb", 5, "Mod::Foo#y", 5), R("/a.rb", 6, "puts", 4),
		R("/a.rb", 7, "#<Class:0x1>#z", 3),
	};
	struct trc_top_view v = view(80, 25);
	char why[128];

	test_cond("bad regex", trc_top_ignore(t, "(", why, sizeof(why)) < 0 && why[0] != '\0');
	test_cond("^Foo$", trc_top_ignore(t, "^Foo$", why, sizeof(why)) == 0);
	test_cond("Class:", trc_top_ignore(t, "^#<Class:", why, sizeof(why)) == 0);
	feed(t, 100, rows, 7, 0, 0);
	feed(t, 100, rows, 1, 0, 0);
	check_text("--ignore matches the class part", t, &v,
		   "FILENAME  LINE  METHOD      CALLS\n"
		   "/a.rb        3  FooBar#x        7\n"
		   "/a.rb        5  Mod::Foo#y      5\n"
		   "/a.rb        6  puts            4\n");
	trc_top_free(t);
}

/* A table with no row says why under its header, in text and JSON. */
static void
test_empty_notes(void)
{
	static const char *const prefixes[] = { "/nowhere/", "/x" };
	struct trc_top *t = trc_top_new(TRC_TOP_OBJECTS, two_pids, 1);
	struct trc_top_row rows[] = { R("/srv/app/a.rb", 1, "String", 3) };
	struct trc_top_view v = view(200, 25);
	char why[128], *s;

	s = text(t, &v);
	test_str("nothing yet", s,
		 "tracer --top objects  pids: 100  elapsed: 12s  events/s: 45678  lost: 0  "
		 "app dir: /srv/app\n"
		 "no row: nothing counted under the app dir /srv/app so far\n\n"
		 "FILENAME  LINE  OBJECT  COUNT\n");
	free(s);
	feed(t, 100, rows, 0, 40, 0);
	v.filter = prefixes;
	v.nfilter = 2;
	v.app_dirs = false;
	s = text(t, &v);
	test_cond("events outside the filter",
		  strstr(s, "filter: /nowhere/, /x\nno row: everything counted is outside "
			 "--filter /nowhere/, /x\n\nFILENAME") != NULL);
	free(s);
	s = json(t, &v);
	test_cond("JSON note", strstr(s, ",\"note\":\"no row: everything counted is outside "
				 "--filter /nowhere/, /x\",\"rows\":[]}") != NULL);
	free(s);
	trc_top_reset(t);
	s = text(t, &v);
	test_cond("after a reset, the events before it do not count",
		  strstr(s, "no row: nothing counted under --filter /nowhere/, /x so far\n") != NULL);
	free(s);
	v.all = true;
	s = text(t, &v);
	test_cond("all files", strstr(s, "all files\nno row: nothing counted so far\n") != NULL);
	free(s);
	trc_top_ignore(t, "String", why, sizeof(why));
	feed(t, 100, rows, 1, 3, 0);
	s = text(t, &v);
	test_cond("--ignore hides all", strstr(s, "\nno row: --ignore hides all 1 counted\n") != NULL);
	free(s);
	trc_top_free(t);
	t = trc_top_new(TRC_TOP_OBJECTS, two_pids, 1);
	feed(t, 100, rows, 1, 3, 0);
	test_cond("a table with rows has no note", !holds(json(t, &v), "note"));
	test_cond("nor a note line", !holds(text(t, &v), "no row"));
	trc_top_free(t);
}

/* --sample N, --sample-time N: the header and the JSON say the counts are estimates, and how
 * they were sampled; without either, nothing. */
static void
test_sampled(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_OBJECTS, two_pids, 1);
	struct trc_top_row rows[] = { R("/srv/app/a.rb", 1, "String", 48) };
	struct trc_top_view v = view(200, 25);

	feed(t, 100, rows, 1, 50, 0);
	test_cond("exact: no sampled in the header", !holds(text(t, &v), "sampled"));
	test_cond("exact: no sample in JSON", !holds(json(t, &v), "sample"));
	v.sample = 16;
	test_cond("sampled header",
		  holds(text(t, &v), "  lost: 0  sampled: 1 in 16  app dir: /srv/app\n"));
	test_cond("sampled JSON",
		  holds(json(t, &v), ",\"all\":false,\"sample\":16,\"sample_by\":\"allocations\","));
	v.sample_by_time = true;
	test_cond("sampled by time: header",
		  holds(text(t, &v), "  lost: 0  sampled: 1/16 of the time  app dir: /srv/app\n"));
	test_cond("sampled by time: JSON",
		  holds(json(t, &v), ",\"all\":false,\"sample\":16,\"sample_by\":\"time\","));
	trc_top_free(t);
}

/* Targets --ps finds later: the bitmaps of the rows widen past 64 and keep their bits. */
static void
test_added_pids(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 2);
	struct trc_top_row a[] = { R("/a.rb", 3, "A#x", 5) }, b[] = { R("/b.rb", 1, "B#y", 1) };
	struct trc_top_view v = view(80, 25);
	pid_t pids[130];

	for (int i = 0; i < 130; i++)
		pids[i] = 1000 + i;
	feed(t, 100, a, 1, 0, 0);
	feed(t, 200, a, 1, 0, 0);
	for (int i = 0; i < 130; i++)
		trc_top_add_pid(t, pids[i]);
	trc_top_add_pid(t, 100);
	feed(t, 1129, a, 1, 0, 0);
	feed(t, 1064, b, 1, 0, 0);
	v.pids_column = true;
	v.pids = pids;
	v.npids = 130;
	check_text("a later pid counts; the first ones are not shown", t, &v,
		   "FILENAME  LINE  METHOD  CALLS  PIDS\n"
		   "/a.rb        3  A#x        15     1\n"
		   "/b.rb        1  B#y         1     1\n");
	v.pids = two_pids;
	v.npids = 2;
	check_text("the first ones kept their bits", t, &v,
		   "FILENAME  LINE  METHOD  CALLS  PIDS\n"
		   "/a.rb        3  A#x        15     2\n"
		   "/b.rb        1  B#y         1     0\n");
	trc_top_free(t);
}

/* Enough keys to grow the hash table several times; every one keeps its count. */
static void
test_many_rows(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_STRINGS, two_pids, 2);
	struct trc_top_row rows[500];
	struct trc_top_view v = view(80, 1);
	char *s;

	for (int i = 0; i < 500; i++)
		rows[i] = R("/s.rb", i + 1, "", (uint64_t)i + 1);
	for (int k = 0; k < 4; k++)
		feed(t, two_pids[k % 2], rows, 500, 0, 0);
	test_cond("500 keys", trc_top_size(t) == 500);
	v.pids_column = true;
	v.npids = 2;
	s = text(t, &v);
	test_str("largest summed", table_of(s),
		 "FILENAME  LINE  COUNT  PIDS\n"
		 "/s.rb      500   2000     2\n");
	free(s);
	trc_top_free(t);
}

/* A target that sends new rows with long names is bounded in bytes, not only in rows. */
static void
test_bytes_bound(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 1);
	static char name[60000];
	struct trc_top_row row;
	int32_t line = 0;

	memset(name, 'x', sizeof(name) - 1);
	row = R(name, 0, "K#m", 1);
	while (trc_top_lost(t) == 0 && line < 10000) {
		row.line = ++line;
		feed(t, 100, &row, 1, 1, 0);
	}
	test_cond("rows stop at the bound in bytes",
		  trc_top_size(t) == TRC_TOP_MAX_BYTES / (sizeof(name) - 1 + 3 + 2) &&
		  trc_top_lost(t) == 1);
	row.line = 1;
	feed(t, 100, &row, 1, 1, 0);
	test_cond("a row held still counts", trc_top_lost(t) == 1);
	trc_top_reset(t);
	feed(t, 100, &row, 1, 1, 0);
	test_cond("a reset makes room", trc_top_size(t) == 1 && trc_top_lost(t) == 1);
	trc_top_free(t);
}

/*
 * One very long label (an ERB template's generated method) gives way alone: the file names,
 * which would fit beside every other label, are not cut to stubs for it.
 */
static void
test_one_long_label(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 1);
	static const char long_label[] = "ActionView::Base#_app_views_orders_index_html_erb___"
		"1234567890123456789_47000000000000_and_some_more_of_it_to_be_very_long";
	struct trc_top_row rows[] = {
		R("/srv/app/app/models/order_item.rb", 10, "OrderItem#total", 9),
		R("/srv/app/app/views/orders/index.html.erb", 1, long_label, 8),
		R("/srv/app/app/models/order.rb", 20, "Order#total", 7),
	};
	struct trc_top_view v = view(100, 25);
	char *s;

	feed(t, 100, rows, 3, 0, 0);
	s = text(t, &v);
	test_str("the long label is cut, the file names are whole", table_of(s),
		 "FILENAME                                  LINE  METHOD                                         CALLS\n"
		 "/srv/app/app/models/order_item.rb           10  OrderItem#total                                    9\n"
		 "/srv/app/app/views/orders/index.html.erb     1  ...000000_and_some_more_of_it_to_be_very_long      8\n"
		 "/srv/app/app/models/order.rb                20  Order#total                                        7\n");
	free(s);
	trc_top_free(t);
}

/*
 * A Rails app's rows: long paths under one root, long labels. Each file's own name stays whole
 * (".../issues_controller.rb"), the labels giving way first; never cut to a 16-column stub.
 */
static void
test_file_names_stay_whole(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, two_pids, 1);
	struct trc_top_row rows[] = {
		R("/usr/share/redmine/app/controllers/issues_controller.rb", 10, "IssuesController#index", 9),
		R("/usr/share/redmine/app/views/issues/index.html.erb", 0, "#<Class>#_app_views_issues_index_html_erb", 8),
		R("/usr/share/redmine/app/helpers/application_helper.rb", 300,
		  "ApplicationHelper#link_to_project_with_a_long_name", 7),
	};
	struct trc_top_view v = view(80, 25);
	char *s;

	feed(t, 100, rows, 3, 0, 0);
	s = text(t, &v);
	test_str("80 columns: the long labels, then the paths' starts give way", table_of(s),
		 "FILENAME                   LINE  METHOD                                    CALLS\n"
		 "...s/issues_controller.rb    10  IssuesController#index                        9\n"
		 ".../issues/index.html.erb     0  ...ass>#_app_views_issues_index_html_erb      8\n"
		 ".../application_helper.rb   300  ...lper#link_to_project_with_a_long_name      7\n");
	test_cond("80 columns fit", lines_fit(s, 80));
	free(s);
	v.width = 60;
	s = text(t, &v);
	test_str("60 columns: the labels give way, every file name whole", table_of(s),
		 "FILENAME                   LINE  METHOD                CALLS\n"
		 "...s/issues_controller.rb    10  ...sController#index      9\n"
		 ".../issues/index.html.erb     0  ...es_index_html_erb      8\n"
		 ".../application_helper.rb   300  ..._with_a_long_name      7\n");
	test_cond("60 columns fit", lines_fit(s, 60));
	free(s);
	trc_top_free(t);
}

/*
 * Exceptions raised in gems on the app's behalf: a row per raise site, class and app frame,
 * summed across processes; APP FRAME says where the app was ("" when its stack had no frame
 * of the app).
 */
static void
test_exceptions_app_frame(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_EXCEPTIONS, two_pids, 2);
	struct trc_top_row rows[] = {
		X("/gems/ar/core.rb", 5, "ActiveRecord::RecordNotFound", "/srv/app/app/controllers/issues_controller.rb", 45, 3),
		X("/gems/ad/static.rb", 9, "Errno::ENOENT", "", 0, 54),
		X("/gems/ar/core.rb", 5, "ActiveRecord::RecordNotFound", "/srv/app/app/models/issue.rb", 7, 1),
	};
	struct trc_top_view v = view(120, 25);
	char *s;

	feed(t, 100, rows, 3, 58, 0);
	feed(t, 200, rows, 1, 3, 0);
	test_cond("a row per app frame", trc_top_size(t) == 3);
	s = text(t, &v);
	test_str("APP FRAME after the class, empty without one", table_of(s),
		 "FILENAME            LINE  EXCEPTION                     APP FRAME                                         COUNT\n"
		 "/gems/ad/static.rb     9  Errno::ENOENT                                                                      54\n"
		 "/gems/ar/core.rb       5  ActiveRecord::RecordNotFound  /srv/app/app/controllers/issues_controller.rb:45      6\n"
		 "/gems/ar/core.rb       5  ActiveRecord::RecordNotFound  /srv/app/app/models/issue.rb:7                        1\n");
	free(s);
	s = json(t, &v);
	test_cond("JSON: app_file and app_line", strstr(s, "\"exception\":\"ActiveRecord::RecordNotFound\","
		  "\"app_file\":\"/srv/app/app/controllers/issues_controller.rb\",\"app_line\":45,\"count\":6") != NULL);
	test_cond("JSON: none without an app frame", strstr(s, "\"exception\":\"Errno::ENOENT\",\"count\":54") != NULL);
	free(s);
	trc_top_free(t);
}

static struct trc_top_path
P(uint32_t id, uint32_t parent, const char *file, const char *label, uint64_t self)
{
	return (struct trc_top_path){ id, parent, { file, (uint32_t)strlen(file) }, 3,
				      { label, (uint32_t)strlen(label) }, 1, self };
}

static void
feed_paths(struct trc_top *t, pid_t pid, const struct trc_top_path *paths, size_t n)
{
	struct trc_message m = { .type = TRC_MSG_TOP };

	m.top.paths = paths;
	m.top.npaths = n;
	trc_top_feed(t, pid, &m);
}

/* The value of the frame whose title starts with name in doc, or -1. */
static long long
flame_value(const char *doc, const char *name, int nth)
{
	char key[128];
	const char *t = doc, *g;

	snprintf(key, sizeof(key), "<title>%s\n", name);
	for (int i = 0; i <= nth; i++)
		if ((t = strstr(i ? t + 1 : t, key)) == NULL)
			return -1;
	for (g = t; g > doc && strncmp(g, "<g class=", 9) != 0; g--)
		;
	g = strstr(g, "data-v=\"");
	return atoll(g + 8);
}

static char *
flame_of(const struct trc_top *t, bool by_process)
{
	const char *dirs[] = { "/srv/app" };
	struct trc_flame_scope scope = { dirs, 1 };
	struct trc_flame *f = trc_flame_new("ns");
	struct trc_flame_opts o = { TRC_FLAME_SVG, "t", NULL, 0 };
	struct trc_output out;
	char *doc;

	trc_top_paths_flame(trc_top_paths(t), f, by_process, &scope);
	trc_output_init(&out, -1, -1);
	trc_flame_write(f, &o, &out);
	trc_buf_addc(&out.out, '\0');
	doc = strdup(out.out.data);
	trc_output_release(&out);
	trc_flame_free(f);
	return doc;
}

static void
test_paths(void)
{
	struct trc_top *t = trc_top_new(TRC_TOP_TIME, two_pids, 2);
	const struct trc_top_path first[] = {
		P(1, 0, "/srv/app/a.rb", "A#run", 100),
		P(2, 1, "/srv/app/b.rb", "B#step", 50),
		P(3, 1, "", "Kernel#sleep", 700),
	};
	const struct trc_top_path later[] = {
		P(4, 2, "/gems/x/lib/x.rb", "X#y", 10),
		P(2, 1, "/srv/app/b.rb", "B#step", 25),
	};
	const struct trc_top_path bad[] = {
		P(9, 0, "/a.rb", "gap", 1),             /* id 5 never came */
		P(2, 0, "/a.rb", "B#step", 1),          /* another parent */
		P(5, 8, "/a.rb", "orphan", 1),          /* its parent is not known */
	};
	const struct trc_top_path other[] = { P(1, 0, "/srv/app/a.rb", "A#run", 1000) };
	char *doc;

	test_note("--top time's paths: ids the agent's, figures summed, a flame graph");
	trc_top_keep_paths(t);
	feed_paths(t, 100, first, 3);
	feed_paths(t, 100, later, 2);
	feed_paths(t, 100, bad, 3);
	feed_paths(t, 200, other, 1);
	test_cond("malformed paths left out", trc_top_paths_bad(trc_top_paths(t)) == 3);
	doc = flame_of(t, false);
	test_cond("all", flame_value(doc, "all", 0) == 1885);
	test_cond("A#run of both processes, merged", flame_value(doc, "A#run", 0) == 1885);
	test_cond("B#step summed over two tables, with X#y", flame_value(doc, "B#step", 0) == 85);
	test_cond("a gem under it", flame_value(doc, "X#y", 0) == 10 && strstr(doc, "data-k=\"1\"><title>X#y") != NULL);
	test_cond("waiting", strstr(doc, "data-k=\"5\"><title>Kernel#sleep") != NULL);
	test_cond("the app's", strstr(doc, "data-k=\"0\"><title>A#run") != NULL);
	test_cond("nothing of the bad ones", strstr(doc, "<title>orphan") == NULL && strstr(doc, "<title>gap") == NULL);
	free(doc);
	doc = flame_of(t, true);
	test_cond("by process: a group each", flame_value(doc, "ruby 100", 0) == 885 &&
		  flame_value(doc, "ruby 200", 0) == 1000);
	test_cond("by process: A#run under each", flame_value(doc, "A#run", 1) >= 0);
	free(doc);
	trc_top_free(t);

	test_note("a table that keeps no paths ignores them");
	t = trc_top_new(TRC_TOP_TIME, two_pids, 2);
	feed_paths(t, 100, first, 3);
	test_cond("none kept", trc_top_paths(t) == NULL);
	trc_top_free(t);
}

void
test_top(void)
{
	test_modes();
	test_aggregate();
	test_unknown_pid();
	test_sorting();
	test_time();
	test_columns();
	test_object_modes();
	test_header();
	test_gc();
	test_width_fitting();
	test_file_names_stay_whole();
	test_exceptions_app_frame();
	test_label_cut();
	test_one_long_label();
	test_utf8_and_controls();
	test_json_escaping();
	test_json_like_exporters();
	test_ignore();
	test_empty_notes();
	test_sampled();
	test_added_pids();
	test_many_rows();
	test_bytes_bound();
	test_paths();
}
