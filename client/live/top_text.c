/* top_text.c: the --top table as text: columns by mode, widths that fit the terminal, the header. */
#include "top_text.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "utf8.h"
#include "xmalloc.h"

#define GAP 2                   /* spaces between columns */
#define MAX_COLS 10
#define NS_PER_MS 1e6

static double
ms(uint64_t ns)
{
	return (double)ns / NS_PER_MS;
}

static void
put_spaces(struct trc_buf *out, size_t n)
{
	while (n-- > 0)
		trc_buf_addc(out, ' ');
}

/*
 * s (escaped text) in exactly w columns: cut from the left behind "..." if longer, padded on
 * the right if pad.
 */
static void
put_left_cut(struct trc_buf *out, const char *s, size_t len, size_t w, bool pad)
{
	size_t have = trc_utf8_width(s, len), start;

	if (have <= w) {
		trc_buf_add(out, s, len);
		if (pad)
			put_spaces(out, w - have);
		return;
	}
	if (w <= 3) {
		trc_buf_add(out, "...", w);
		return;
	}
	start = trc_utf8_tail(s, len, w - 3);
	trc_buf_adds(out, "...");
	trc_buf_add(out, s + start, len - start);
}

/* Columns. */

enum col { C_FILE, C_LINE, C_LABEL, C_APP, C_COUNT, C_TOTAL, C_SELF, C_AVG, C_PIDS, C_SELF_PCT, C_TOTAL_PCT };

static const struct col_def {
	const char *title;      /* NULL: the mode's */
	bool left;              /* left-aligned, cut from the left when narrowed */
} cols[] = {
	[C_FILE] = { "FILENAME", true },
	[C_LINE] = { "LINE", false },
	[C_LABEL] = { NULL, true },
	[C_APP] = { "APP FRAME", true },
	[C_COUNT] = { NULL, false },
	[C_TOTAL] = { "TOTAL", false },
	[C_SELF] = { "SELF", false },
	[C_AVG] = { "AVG", false },
	[C_PIDS] = { "PIDS", false },
	[C_SELF_PCT] = { "SELF%", false },
	[C_TOTAL_PCT] = { "TOTAL%", false },
};

struct layout {
	enum col col[MAX_COLS];
	size_t width[MAX_COLS];
	size_t typical[MAX_COLS];       /* what nine rows in ten need (title included) */
	size_t names;                   /* FILENAME: what keeps every file's own name whole */
	size_t app_names;               /* APP FRAME: the same */
	size_t n;
};

/* A cell's text, safe to print: points into a row's escaped names, or into buf. */
struct cell {
	const char *p;
	size_t len;
};

/* A row with its names escaped (escape.h), which widths are then measured on. */
struct text_row {
	const struct trc_top_shown *shown;
	struct cell file, label;
	struct cell app;        /* exceptions: "file:line" of the app's frame nearest the raise */
	uint64_t whole;         /* a profile: every row's self time, which the shares are of */
};

static const char *
col_title(const struct trc_top_mode_def *d, enum col c)
{
	if (c == C_LABEL)
		return d->label;
	if (c == C_TOTAL || c == C_SELF)
		return c == C_TOTAL ? d->total : d->self;
	return c == C_COUNT ? d->count : cols[c].title;
}

static struct cell
num_cell(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static struct cell
num_cell(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return (struct cell){ buf, n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1 };
}

/* Milliseconds to the nanosecond, as measured: "0.000412" (no float, no rounding). */
static struct cell
ms_cell(char *buf, size_t size, uint64_t ns)
{
	return num_cell(buf, size, "%" PRIu64 ".%06" PRIu64, ns / 1000000, ns % 1000000);
}

static struct cell
get_cell(const struct text_row *row, enum col c, char *buf, size_t size)
{
	const struct trc_top_entry *e = row->shown->e;

	switch (c) {
	case C_FILE:
		return row->file;
	case C_LINE:
		if (e->file_len == 0 && e->line == 0)
			return (struct cell){ "", 0 };  /* a C method, a pseudo-frame: nowhere */
		return num_cell(buf, size, "%" PRId32, e->line);
	case C_LABEL:
		return row->label;
	case C_APP:
		return row->app;
	case C_COUNT:
		return num_cell(buf, size, "%" PRIu64, e->count);
	case C_TOTAL:
		return ms_cell(buf, size, e->total_ns);
	case C_SELF:
		return ms_cell(buf, size, e->self_ns);
	case C_AVG:
		return ms_cell(buf, size, e->count ? e->total_ns / e->count : 0);
	case C_PIDS:
		return num_cell(buf, size, "%" PRIu32, row->shown->npids);
	case C_SELF_PCT:
		return num_cell(buf, size, "%.1f", row->whole ? 100.0 * (double)e->self_ns / (double)row->whole : 0);
	case C_TOTAL_PCT:
		return num_cell(buf, size, "%.1f", row->whole ? 100.0 * (double)e->total_ns / (double)row->whole : 0);
	}
	return (struct cell){ "", 0 };
}

/* APP FRAME: exceptions, when a row has one (none has, under --all). */
static bool
any_app(const struct text_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (rows[i].app.len > 0)
			return true;
	return false;
}

static void
choose_cols(struct layout *l, const struct trc_top_mode_def *d, bool pids, bool app)
{
	l->n = 0;
	if (d->file) {
		l->col[l->n++] = C_FILE;
		l->col[l->n++] = C_LINE;
	}
	if (d->label)
		l->col[l->n++] = C_LABEL;
	if ((d->flags & TRC_TOPM_RAISE) && app)
		l->col[l->n++] = C_APP;
	if (d->flags & TRC_TOPM_PROFILE) {
		/* Shares first: what a profile is read for. */
		l->col[l->n++] = C_SELF_PCT;
		l->col[l->n++] = C_TOTAL_PCT;
		l->col[l->n++] = C_SELF;
		l->col[l->n++] = C_TOTAL;
		l->col[l->n++] = C_COUNT;
		if (pids)
			l->col[l->n++] = C_PIDS;
		return;
	}
	l->col[l->n++] = C_COUNT;
	if (d->timed) {
		l->col[l->n++] = C_TOTAL;
		l->col[l->n++] = C_SELF;
		l->col[l->n++] = C_AVG;
	}
	if (pids)
		l->col[l->n++] = C_PIDS;
}

static int
cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return (x > y) - (x < y);
}

/*
 * What a path needs for its file's own name to stay whole once its start is cut: ".../name.rb",
 * or the whole path when that is shorter.
 */
static size_t
name_width(struct cell c)
{
	size_t slash = c.len, whole = trc_utf8_width(c.p, c.len), name;

	while (slash > 0 && c.p[slash - 1] != '/')
		slash--;
	if (slash == 0)
		return whole;
	name = 4 + trc_utf8_width(c.p + slash, c.len - slash);
	return name < whole ? name : whole;
}

/* The widest name_width of the rows' files (app: of their app frames). */
static size_t
names_width(const struct text_row *rows, size_t n, bool app)
{
	size_t w = 0;

	for (size_t r = 0; r < n; r++) {
		size_t x = name_width(app ? rows[r].app : rows[r].file);

		w = x > w ? x : w;
	}
	return w;
}

/* Each column's widest cell, and the width nine cells in ten fit in (for fit()). */
static void
natural_widths(struct layout *l, const struct trc_top_mode_def *d, const struct text_row *rows,
	       size_t n)
{
	size_t *w = xcalloc(n ? n : 1, sizeof(*w));
	char buf[32];

	for (size_t i = 0; i < l->n; i++) {
		size_t title = strlen(col_title(d, l->col[i]));

		for (size_t r = 0; r < n; r++) {
			struct cell c = get_cell(&rows[r], l->col[i], buf, sizeof(buf));

			w[r] = trc_utf8_width(c.p, c.len);
		}
		qsort(w, n, sizeof(*w), cmp_size);
		l->width[i] = n > 0 && w[n - 1] > title ? w[n - 1] : title;
		l->typical[i] = n > 0 && w[(n - 1) * 9 / 10] > title ? w[(n - 1) * 9 / 10] : title;
	}
	free(w);
}

/* Takes up to *over columns from column col, down to min; returns what is still over. */
static size_t
shrink(struct layout *l, enum col col, size_t min, size_t over)
{
	for (size_t i = 0; i < l->n && over > 0; i++) {
		size_t take;

		if (l->col[i] != col || l->width[i] <= min)
			continue;
		take = l->width[i] - min < over ? l->width[i] - min : over;
		l->width[i] -= take;
		over -= take;
	}
	return over;
}

/* The typical width of column col, at least min. */
static size_t
typical(const struct layout *l, enum col col, size_t min)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->col[i] == col)
			return l->typical[i] > min ? l->typical[i] : min;
	return min;
}

/*
 * The few names far longer than the rest give way first (one ERB template's generated method
 * must not cut every file name to a stub): each name column shrinks to what nine rows in ten
 * need. Then FILENAME gives up the start of its paths, down to what keeps every file's own
 * name whole (".../issues_controller.rb": a Rails app's paths are long, and its file names
 * say which file it is), then the label, each down to a readable minimum; on a very narrow
 * terminal both go on down to "...x". Numbers never shrink.
 */
static void
fit(struct layout *l, size_t width)
{
	size_t over = GAP * (l->n - 1);

	for (size_t i = 0; i < l->n; i++)
		over += l->width[i];
	if (over <= width)
		return;
	over -= width;
	over = shrink(l, C_LABEL, typical(l, C_LABEL, TRC_TOP_MIN_LABEL), over);
	over = shrink(l, C_FILE, typical(l, C_FILE, TRC_TOP_MIN_FILE), over);
	over = shrink(l, C_APP, typical(l, C_APP, TRC_TOP_MIN_FILE), over);
	over = shrink(l, C_FILE, l->names > TRC_TOP_MIN_FILE ? l->names : TRC_TOP_MIN_FILE, over);
	over = shrink(l, C_APP, l->app_names > TRC_TOP_MIN_FILE ? l->app_names : TRC_TOP_MIN_FILE, over);
	over = shrink(l, C_LABEL, TRC_TOP_MIN_LABEL, over);
	over = shrink(l, C_FILE, TRC_TOP_MIN_FILE, over);
	over = shrink(l, C_APP, TRC_TOP_MIN_FILE, over);
	over = shrink(l, C_APP, TRC_TOP_MIN_CUT, over);
	over = shrink(l, C_LABEL, TRC_TOP_MIN_LABEL, over);
	over = shrink(l, C_FILE, TRC_TOP_MIN_CUT, over);
	shrink(l, C_LABEL, TRC_TOP_MIN_CUT, over);
}

static void
put_cell(struct trc_buf *out, const struct layout *l, size_t i, struct cell c)
{
	bool last = i + 1 == l->n;
	size_t w;

	if (i > 0)
		put_spaces(out, GAP);
	if (cols[l->col[i]].left) {
		put_left_cut(out, c.p, c.len, l->width[i], !last);
		return;
	}
	w = trc_utf8_width(c.p, c.len);
	put_spaces(out, w < l->width[i] ? l->width[i] - w : 0);
	trc_buf_add(out, c.p, c.len);
}

/* Titles are ASCII, and keep their start when narrowed: FILENAME -> FILE. */
static void
put_titles(struct trc_buf *out, const struct layout *l, const struct trc_top_mode_def *d)
{
	for (size_t i = 0; i < l->n; i++) {
		const char *title = col_title(d, l->col[i]);
		size_t len = strlen(title);

		put_cell(out, l, i, (struct cell){ title, len < l->width[i] ? len : l->width[i] });
	}
	trc_buf_addc(out, '\n');
}

static void
put_row(struct trc_buf *out, const struct layout *l, const struct text_row *row)
{
	char buf[32];

	for (size_t i = 0; i < l->n; i++)
		put_cell(out, l, i, get_cell(row, l->col[i], buf, sizeof(buf)));
	trc_buf_addc(out, '\n');
}

/* The header line. */

static void
add_list(struct trc_buf *b, const char *const *items, size_t n, const char *sep)
{
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			trc_buf_adds(b, sep);
		trc_buf_adds(b, items[i]);
	}
}

static void
add_filter(struct trc_buf *b, const struct trc_top_view *v)
{
	if (v->all) {
		trc_buf_adds(b, "all files");
		return;
	}
	trc_buf_adds(b, v->app_dirs ? "app dir: " : "filter: ");
	if (v->nfilter == 0)
		trc_buf_adds(b, "?");
	add_list(b, v->filter, v->nfilter, ", ");
}

/* A line of text (the targets' directories in it too) escaped, then cut to the view's width. */
static void
put_line(struct trc_buf *out, const struct trc_buf *line, const struct trc_top_view *v)
{
	struct trc_buf safe;

	trc_buf_init(&safe);
	trc_escape(&safe, line->data, line->len);
	trc_buf_add(out, safe.data, trc_utf8_head(safe.data, safe.len, v->width));
	trc_buf_addc(out, '\n');
	trc_buf_release(&safe);
}

/*
 * "GC: 12 in 1.0s (2 major), 31 ms paused (3.1%)  since the start: 340 (25 major), 0.92s":
 * the pauses summed over the targets, as a share of the interval times the targets.
 */
static void
put_gc(struct trc_buf *h, const struct trc_top *t, const struct trc_top_view *v)
{
	const struct trc_top_gc *r = &v->gc_recent;
	struct trc_top_gc all = trc_top_gc(t);
	double span = v->gc_secs * (double)(v->npids ? v->npids : 1);

	trc_buf_addf(h, "GC: %" PRIu64 " in %.1fs (%" PRIu64 " major), %.0f ms paused", r->count,
		     v->gc_secs, r->major, ms(r->pause_ns));
	if (span > 0)
		trc_buf_addf(h, " (%.1f%%)", 100.0 * (double)r->pause_ns / 1e9 / span);
	trc_buf_addf(h, "  since the start: %" PRIu64 " (%" PRIu64 " major), %.2fs paused",
		     all.count, all.major, (double)all.pause_ns / 1e9);
}

/*
 * "cpu 100 Hz, tracer 0.04%": the clock and rate a profile samples at, and the profiler's own
 * time in the targets as a share of their elapsed time; the rate the cap brought it down to,
 * when it did.
 */
static void
put_profile(struct trc_buf *h, const struct trc_top_view *v)
{
	const struct trc_profile *p = v->profile;

	trc_buf_addf(h, "%s %u Hz", p->wall ? "wall" : "cpu", v->hz);
	if (p->hz != 0 && p->hz < v->hz)
		trc_buf_addf(h, " (held at %" PRIu64 " Hz by --cap)", p->hz);
	if (p->elapsed_ns > 0)
		trc_buf_addf(h, ", tracer %.2f%%", 100.0 * (double)p->own_ns / (double)p->elapsed_ns);
}

/* The header line, and under it why there is no row, if there is none. */
static void
put_header(struct trc_buf *out, const struct trc_top *t, const struct trc_top_view *v,
	   size_t shown)
{
	struct trc_buf h;

	trc_buf_init(&h);
	trc_buf_addf(&h, "tracer --top %s  pids: ", trc_top_def(t)->name);
	for (size_t i = 0; i < v->npids; i++)
		trc_buf_addf(&h, "%s%d", i ? "," : "", (int)v->pids[i]);
	if (v->npids == 0)
		trc_buf_adds(&h, "-");
	trc_buf_addf(&h, "  elapsed: %.0fs  %s/s: %.0f  lost: %" PRIu64 "  ", v->elapsed,
		     v->profile != NULL ? "samples" : "events", v->events_per_sec, trc_top_lost(t));
	if (v->profile != NULL)
		put_profile(&h, v);     /* every frame: no filter to say */
	else if (v->sample > 1 && v->sample_by_time)
		trc_buf_addf(&h, "sampled: 1/%u of the time  ", v->sample);
	else if (v->sample > 1)
		trc_buf_addf(&h, "sampled: 1 in %u  ", v->sample);
	if (v->profile == NULL)
		add_filter(&h, v);
	put_line(out, &h, v);
	h.len = 0;
	if (v->gc) {
		put_gc(&h, t, v);
		put_line(out, &h, v);
		h.len = 0;
	}
	if (trc_top_empty_note(t, v, shown, &h))
		put_line(out, &h, v);
	trc_buf_release(&h);
}

/*
 * The rows' file names and labels escaped into names (one buffer, so the cells point into it
 * only once it is complete). The caller frees the array and releases names.
 */
static struct text_row *
escape_rows(const struct trc_top_shown *shown, size_t n, struct trc_buf *names)
{
	struct text_row *rows = xcalloc(n ? n : 1, sizeof(*rows));
	size_t *offs = xcalloc(3 * n + 1, sizeof(*offs));
	const char *base;

	for (size_t i = 0; i < n; i++) {
		const struct trc_top_entry *e = shown[i].e;

		offs[3 * i] = names->len;
		trc_escape(names, e->file, e->file_len);
		offs[3 * i + 1] = names->len;
		trc_escape(names, e->label, e->label_len);
		offs[3 * i + 2] = names->len;
		if (e->app_len > 0) {
			trc_escape(names, e->app, e->app_len);
			trc_buf_addf(names, ":%" PRId32, e->app_line);
		}
	}
	offs[3 * n] = names->len;
	base = names->data != NULL ? names->data : "";
	for (size_t i = 0; i < n; i++) {
		rows[i].shown = &shown[i];
		rows[i].file = (struct cell){ base + offs[3 * i], offs[3 * i + 1] - offs[3 * i] };
		rows[i].label = (struct cell){ base + offs[3 * i + 1], offs[3 * i + 2] - offs[3 * i + 1] };
		rows[i].app = (struct cell){ base + offs[3 * i + 2], offs[3 * i + 3] - offs[3 * i + 2] };
	}
	free(offs);
	return rows;
}

void
trc_top_format_text(const struct trc_top *t, const struct trc_top_view *v, struct trc_buf *out)
{
	struct layout l;
	size_t n;
	struct trc_top_shown *shown = trc_top_rows(t, v, &n);
	struct trc_buf names;
	struct text_row *rows;

	trc_buf_init(&names);
	rows = escape_rows(shown, n, &names);
	if (trc_top_def(t)->flags & TRC_TOPM_PROFILE) {
		uint64_t whole = 0;

		for (size_t i = 0; i < trc_top_size(t); i++)
			whole += trc_top_entry(t, i)->hidden ? 0 : trc_top_entry(t, i)->self_ns;
		for (size_t i = 0; i < n; i++)
			rows[i].whole = whole;
	}
	put_header(out, t, v, n);
	trc_buf_addc(out, '\n');
	choose_cols(&l, trc_top_def(t), v->pids_column, any_app(rows, n));
	natural_widths(&l, trc_top_def(t), rows, n);
	l.names = names_width(rows, n, false);
	l.app_names = names_width(rows, n, true);
	fit(&l, v->width);
	put_titles(out, &l, trc_top_def(t));
	for (size_t i = 0; i < n; i++)
		put_row(out, &l, &rows[i]);
	free(rows);
	free(shown);
	trc_buf_release(&names);
}

