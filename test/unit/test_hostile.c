/* test_hostile.c: what a hostile target names, from the wire through every output: inert, bounded, distinct. */
#define _GNU_SOURCE     /* memrchr */
#include <stdbool.h>
#include <stdlib.h>

#include "decode.h"
#include "encode.h"
#include "export.h"
#include "metrics.h"
#include "output.h"
#include "pprof/profile.pb-c.h"
#include "test.h"
#include "top.h"
#include "top_json.h"
#include "top_pprof.h"
#include "top_text.h"
#include "trace.h"
#include "utf8.h"

#define BIG (1u << 20)          /* a 1 MB method name */
/* Far above what the hostile names need once bounded, far below one 1 MB name. */
#define OUTPUT_MAX (64u << 10)
#define FILE_NAME "/app/x.rb"

static const pid_t pids[] = { 100 };

/*
 * The names a target defines, all at the same file and line, so that only the name tells
 * them apart: escapes (OSC, CSI), a C1 CSI, the bidi controls, a line separator, an
 * ill-formed byte and the U+FFFD that would replace it, names that differ after a NUL, HTML
 * and quotes, and two 1 MB names that differ only in their middle.
 */
static struct {
	const char *p;
	size_t n;
} names[] = {
#define N(lit) { lit, sizeof(lit) - 1 }
	N("osc\x1b]0;pwned\x07\x1b[2J"),
	N("c1\xc2\x9b" "31m"),
	N("bidi\xe2\x80\xae" "cod.exe\xe2\x81\xa6" "a\xe2\x81\xa9\xe2\x80\x8f\xd8\x9c\xe2\x80\xaa"),
	N("ls\xe2\x80\xa8" "next"),
	N("bad\xff"),
	N("bad\xef\xbf\xbd"),
	N("nul\0one"),
	N("nul\0two"),
	N("<script>alert(\"x\")</script>'\\"),
	{ NULL, BIG },
	{ NULL, BIG },
#undef N
};
#define NNAMES (sizeof(names) / sizeof(names[0]))
#define THREAD_NAME "th\x1b[1m\xe2\x80\xae"

static struct trc_output out;

/* The message packed in b, decoded as the client receives it, fed to feed(ctx, m). */
static void
deliver(struct trc_buf *b, void (*feed)(void *, const struct trc_message *), void *ctx)
{
	struct trc_decoder d;
	struct trc_message m;
	size_t used;

	trc_decoder_init(&d);
	test_cond("decodes", trc_decode(&d, b->data, b->len, &m, &used) == TRC_DECODE_OK &&
		  used == b->len);
	if (used == b->len)
		feed(ctx, &m);
	trc_decoder_release(&d);
	b->len = 0;
}

static void
pack_method(struct trc_buf *b, uint32_t idx)
{
	trc_pack_array(b, TRC_EV_METHOD_FIELDS);
	trc_pack_uint(b, TRC_EV_METHOD);
	trc_pack_uint(b, idx);
	trc_pack_cstr(b, "Hostile");
	trc_pack_cstr(b, "#");
	trc_pack_bin(b, names[idx].p, names[idx].n);
	trc_pack_cstr(b, FILE_NAME);
	trc_pack_int(b, 1);
}

static void
pack_call(struct trc_buf *b, uint32_t type, uint32_t idx, uint64_t ts)
{
	trc_pack_array(b, 4);
	trc_pack_uint(b, type);
	trc_pack_uint(b, 0);
	trc_pack_uint(b, idx);
	trc_pack_uint(b, ts);
}

/* A thread with a hostile name calls each method three times. */
static void
play(void (*feed)(void *, const struct trc_message *), void *ctx)
{
	struct trc_buf b;
	uint64_t ts = 1000000;

	trc_buf_init(&b);
	trc_pack_array(&b, TRC_EV_THREAD_FIELDS);
	trc_pack_uint(&b, TRC_EV_THREAD);
	trc_pack_uint(&b, 0);
	trc_pack_cstr(&b, THREAD_NAME);
	deliver(&b, feed, ctx);
	for (uint32_t i = 0; i < NNAMES; i++) {
		pack_method(&b, i);
		deliver(&b, feed, ctx);
		for (int k = 0; k < 3; k++) {
			pack_call(&b, TRC_EV_CALL, i, ts += 1000);
			deliver(&b, feed, ctx);
			pack_call(&b, TRC_EV_RETURN, i, ts += 1000);
			deliver(&b, feed, ctx);
		}
	}
	trc_buf_release(&b);
}

/* ---- what every output must show ---- */

/* Whether the well-formed p[0..len) is a code point a terminal or a viewer would act on. */
static bool
acts(const unsigned char *p, size_t len)
{
	static const char *const bad[] = {
		"\xd8\x9c", "\xe2\x80\x8e", "\xe2\x80\x8f", "\xe2\x80\xa8", "\xe2\x80\xa9",
		"\xe2\x80\xaa", "\xe2\x80\xab", "\xe2\x80\xac", "\xe2\x80\xad", "\xe2\x80\xae",
		"\xe2\x81\xa6", "\xe2\x81\xa7", "\xe2\x81\xa8", "\xe2\x81\xa9",
	};

	if (trc_utf8_is_c1(p, len))
		return true;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (strlen(bad[i]) == len && memcmp(bad[i], p, len) == 0)
			return true;
	return false;
}

/* Valid UTF-8 with no control (newlines aside, where lines allows them), no bidi control. */
static bool
inert(const char *s, size_t n, bool lines)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, len, bad;

	while (i < n) {
		if (u[i] < 0x80) {
			if ((u[i] < 0x20 && !(lines && u[i] == '\n')) || u[i] == 0x7f)
				return false;
			i++;
			continue;
		}
		if ((len = trc_utf8_seq(u + i, n - i, &bad)) == 0 || acts(u + i, len))
			return false;
		i += len;
	}
	return true;
}

static void
check_text(const char *what, const char *s, size_t n)
{
	test_note("%s: a hostile target's names", what);
	test_cond("inert: valid UTF-8, no control, no bidi control", inert(s, n, true));
	test_cond("bounded: no 1 MB name copied out", n < OUTPUT_MAX);
}

/* How many distinct lines of s[0..n) start with prefix (*total: how many do), each taken up
 * to the last stop in it. */
static size_t
distinct_lines(const char *s, size_t n, const char *prefix, char stop, size_t *total)
{
	size_t count = 0, k = 0;
	struct {
		const char *p;
		size_t n;
	} seen[64];

	*total = 0;
	for (const char *p = s, *end = s + n; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl ? nl : end) - p);
		const char *cut;
		bool dup = false;

		if (len >= strlen(prefix) && memcmp(p, prefix, strlen(prefix)) == 0 && k < 64) {
			cut = memrchr(p + strlen(prefix), stop, len - strlen(prefix));
			len = cut ? (size_t)(cut - p) : len;
			for (size_t i = 0; i < k; i++)
				dup |= seen[i].n == len && memcmp(seen[i].p, p, len) == 0;
			seen[k].p = p;
			seen[k++].n = len;
			count += !dup;
			(*total)++;
		}
		p = nl ? nl + 1 : end;
	}
	return count;
}

/* ---- the outputs ---- */

static void
feed_sink(void *ctx, const struct trc_message *m)
{
	test_cond("event taken", trc_sink_feed(ctx, m) == 0);
}

static void
through_trace(void)
{
	struct trc_trace_opts o = { .prefix = 2, .no_duration = true };
	struct trc_trace *t;
	struct trc_sink k;

	trc_output_init(&out, -1, -1);
	t = trc_trace_new(&out, &o, NULL, 0);
	k = trc_trace_sink(t);
	play(feed_sink, &k);
	trc_sink_close(&k);
	check_text("text trace", out.out.data, out.out.len);
	trc_buf_addc(&out.out, '\0');
	test_cond("an OSC and a CSI as escapes", strstr(out.out.data, "Hostile#osc\\e]0;pwned\\a\\e[2J\n"));
	test_cond("bidi controls as the bytes they are", strstr(out.out.data,
		  "Hostile#bidi\\xe2\\x80\\xaecod.exe\\xe2\\x81\\xa6a\\xe2\\x81\\xa9\\xe2\\x80\\x8f"
		  "\\xd8\\x9c\\xe2\\x80\\xaa\n"));
	test_cond("an ill-formed byte apart from U+FFFD", strstr(out.out.data, "Hostile#bad\\xff\n") &&
		  strstr(out.out.data, "Hostile#bad\xef\xbf\xbd\n"));
	test_cond("names that differ after a NUL", strstr(out.out.data, "Hostile#nul\\x00one\n") &&
		  strstr(out.out.data, "Hostile#nul\\x00two\n"));
	test_cond("a long name cut in the middle, said so", strstr(out.out.data,
		  "AAAA[...1048576 bytes #") != NULL);
	trc_output_release(&out);
}

/* The whole file an exporter makes of play(). */
static void
export(enum trc_format f)
{
	struct trc_export_opts o = { .format = f, .tool = "tracer test" };
	struct trc_export *e;
	struct trc_sink k;

	trc_output_init(&out, -1, -1);
	e = trc_export_new(&out, &o);
	k = trc_export_sink(e, 42);
	play(feed_sink, &k);
	trc_sink_close(&k);
	trc_export_finish(e);
	trc_export_free(e);
}

static void
through_text_exports(void)
{
	static const enum trc_format formats[] = {
		TRC_FORMAT_CHROME, TRC_FORMAT_SPEEDSCOPE, TRC_FORMAT_COLLAPSED, TRC_FORMAT_JSONL,
	};
	size_t total;

	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		export(formats[i]);
		check_text(trc_format_name(formats[i]), out.out.data, out.out.len);
		if (formats[i] == TRC_FORMAT_COLLAPSED)
			test_cond("a stack per name, every name its own",
				  distinct_lines(out.out.data, out.out.len, "", ' ', &total) == NNAMES &&
				  total == NNAMES);
		trc_output_release(&out);
	}
}

/* Every string of the profile inert and bounded; the function names distinct, n of them. */
static void
check_profile(const char *what, const struct trc_buf *b, size_t n)
{
	Perftools__Profiles__Profile *p;
	bool ok = true, distinct = true;

	test_note("%s: a hostile target's names", what);
	test_cond("bounded", b->len < OUTPUT_MAX);
	p = perftools__profiles__profile__unpack(NULL, b->len, (const uint8_t *)b->data);
	test_cond("unpacks", p != NULL);
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->n_string_table; i++)
		ok &= inert(p->string_table[i], strlen(p->string_table[i]), false);
	test_cond("every string inert: valid UTF-8, no control, no bidi control", ok);
	for (size_t i = 0; i < p->n_function; i++)
		for (size_t k = 0; k < i; k++)
			distinct &= p->function[i]->name != p->function[k]->name;
	test_cond("a function per name, every name its own", p->n_function == n && distinct);
	perftools__profiles__profile__free_unpacked(p, NULL);
}

static void
through_pprof_export(void)
{
	export(TRC_FORMAT_PPROF);
	check_profile("pprof", &out.out, NNAMES);
	trc_output_release(&out);
}

/* ---- --top, from a TOP message whose rows are the same names ---- */

/* --metrics' processes, fed alongside the table when set. */
static struct trc_metrics *top_metrics;

static void
feed_top(void *ctx, const struct trc_message *m)
{
	trc_top_feed(ctx, pids[0], m);
	if (top_metrics != NULL)
		trc_metrics_feed(top_metrics, pids[0], m, 1.0);
}

/* The table of the names; with mo, --metrics' set over it (top_metrics), fed the same rows. */
static struct trc_top *
top_table(const struct trc_metrics_opts *mo)
{
	struct trc_top *t = trc_top_new(TRC_TOP_CALLS, pids, 1);

	if (mo != NULL) {
		top_metrics = trc_metrics_new(t, mo);
		trc_metrics_add(top_metrics, pids[0], 1.0);
	}
	struct trc_buf b, label;

	trc_buf_init(&b);
	trc_buf_init(&label);
	trc_pack_array(&b, TRC_MSG_TOP_FIELDS);
	trc_pack_uint(&b, TRC_MSG_TOP);
	for (int i = 0; i < 6; i++)
		trc_pack_uint(&b, 0);
	trc_pack_array(&b, NNAMES);
	for (uint32_t i = 0; i < NNAMES; i++) {
		label.len = 0;
		trc_buf_adds(&label, "Hostile#");
		trc_buf_add(&label, names[i].p, names[i].n);
		trc_pack_array(&b, 9);
		trc_pack_cstr(&b, FILE_NAME);
		trc_pack_int(&b, 1);
		trc_pack_bin(&b, label.data, label.len);
		trc_pack_uint(&b, 3);
		trc_pack_uint(&b, 0);
		trc_pack_uint(&b, 0);
		trc_pack_array(&b, 0);
		trc_pack_cstr(&b, "");
		trc_pack_int(&b, 0);
	}
	trc_pack_array(&b, 0);          /* no call paths */
	deliver(&b, feed_top, t);
	trc_buf_release(&label);
	trc_buf_release(&b);
	return t;
}

static void
through_top(void)
{
	struct trc_top *t;
	struct trc_top_view v = { .pids = pids, .npids = 1, .width = 100, .rows = 50, .all = true };
	struct trc_metrics_opts mo = { .mode = TRC_TOP_CALLS, .rows = 50 };
	struct trc_buf b;
	size_t total;

	t = top_table(&mo);

	test_note("--top: a row per name");
	test_cond("every name its own row", trc_top_size(t) == NNAMES);
	trc_buf_init(&b);
	trc_top_format_text(t, &v, &b);
	check_text("--top text", b.data, b.len);
	b.len = 0;
	trc_top_format_json(t, &v, &b);
	check_text("--top --json", b.data, b.len);
	for (int f = TRC_METRICS_TEXT; f <= TRC_METRICS_OPENMETRICS; f++) {
		const struct trc_buf *e;

		trc_metrics_expose(top_metrics, (enum trc_metrics_format)f, 1.0);
		e = trc_metrics_expose(top_metrics, (enum trc_metrics_format)f, 3.0);   /* past zero first */
		check_text(f == TRC_METRICS_TEXT ? "--metrics" : "--metrics (OpenMetrics)", e->data, e->len);
		test_cond("a series per name, every name its own",
			  distinct_lines(e->data, e->len, "tracer_method_calls_total{", '}', &total) == NNAMES &&
			  total == NNAMES);
	}
	trc_metrics_free(top_metrics);
	top_metrics = NULL;
	b.len = 0;
	trc_top_format_pprof(t, 1, "tracer test", &b);
	check_profile("--top --format pprof", &b, NNAMES);
	trc_buf_release(&b);
	trc_top_free(t);
}

void
test_hostile_outputs(void)
{
	char *a = malloc(BIG), *b = malloc(BIG);

	memset(a, 'A', BIG);
	memset(b, 'A', BIG);
	b[BIG / 2] = 'B';
	names[NNAMES - 2].p = a;
	names[NNAMES - 1].p = b;
	through_trace();
	through_text_exports();
	through_pprof_export();
	through_top();
	free(a);
	free(b);
}
