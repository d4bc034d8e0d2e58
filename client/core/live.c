/* live.c: the running --top: every interval a table on the output, or a redrawn screen. */
#include "live.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "screen.h"
#include "top_json.h"
#include "top_text.h"
#include "xmalloc.h"

#define MIN_WIDTH 20
#define SCREEN_CHROME 6         /* screen lines that are not rows: header, blanks, titles, note */

struct trc_live {
	struct ev_loop *loop;
	struct trc_output *out;
	struct trc_top *top;
	struct trc_session *const *sessions;
	size_t nsessions;
	struct trc_live_opts o;
	struct trc_screen *screen;      /* the full-screen view, or NULL */
	ev_timer redraw_w, reset_w;
	ev_tstamp start, shown_at;      /* loop times of the start and of the latest table */
	uint64_t shown_events;          /* trc_top_events() at the latest table */
	struct trc_top_gc shown_gc;     /* trc_top_gc() at the latest table */
	bool shown;                     /* a table was printed */
	uint64_t shown_generation;      /* trc_top_generation() at the latest table printed */
	trc_live_quit_fn *quit;
	void *ctx;
};

/* What a table shows besides the rows, as of now. */
struct snap {
	struct trc_top_view v;
	pid_t *pids;
	const char **dirs;
};

/* The targets attached now; for the final table (all of them gone by then), every target. */
static void
snap_pids(struct trc_live *l, struct snap *s, bool final)
{
	s->pids = xcalloc(l->nsessions ? l->nsessions : 1, sizeof(*s->pids));
	for (size_t i = 0; i < l->nsessions; i++)
		if (final || !trc_session_finished(l->sessions[i]))
			s->pids[s->v.npids++] = trc_session_pid(l->sessions[i]);
	s->v.pids = s->pids;
}

/* --filter's prefixes, or the distinct working directories of the targets. */
static void
snap_filter(struct trc_live *l, struct snap *s)
{
	s->v.all = l->o.all;
	if (l->o.nfilters > 0) {
		s->v.filter = l->o.filters;
		s->v.nfilter = l->o.nfilters;
		return;
	}
	s->v.app_dirs = true;
	s->dirs = xcalloc(l->nsessions ? l->nsessions : 1, sizeof(*s->dirs));
	for (size_t i = 0; i < l->nsessions; i++) {
		const char *cwd = trc_session_cwd(l->sessions[i]);
		size_t k = 0;

		while (cwd != NULL && k < s->v.nfilter && strcmp(s->dirs[k], cwd) != 0)
			k++;
		if (cwd != NULL && k == s->v.nfilter)
			s->dirs[s->v.nfilter++] = cwd;
	}
	s->v.filter = s->dirs;
}

/* The rate counts the events since the previous table, or since the start for a final one. */
static void
snap_init(struct trc_live *l, struct snap *s, bool final)
{
	ev_tstamp now = ev_now(l->loop), since = final ? l->start : l->shown_at;
	uint64_t events = trc_top_events(l->top), before = final ? 0 : l->shown_events;
	struct trc_top_gc gc = trc_top_gc(l->top), gc_before = { 0, 0, 0 };
	/* A full last column would leave some terminals' cursor pending a wrap: keep one free. */
	unsigned width = trc_screen_columns(l->out->fd) - (l->screen != NULL);

	memset(s, 0, sizeof(*s));
	snap_pids(l, s, final);
	snap_filter(l, s);
	s->v.pids_column = l->nsessions > 1;
	s->v.elapsed = now - l->start;
	s->v.events_per_sec = now > since ? (double)(events - before) / (now - since) : 0;
	s->v.width = width > MIN_WIDTH ? width : MIN_WIDTH;
	s->v.rows = l->o.rows;
	if (!final)
		gc_before = l->shown_gc;
	s->v.gc = l->o.gc;
	s->v.sample = l->o.sample;
	s->v.sample_by_time = l->o.sample_by_time;
	s->v.profile = l->o.profile;
	s->v.hz = l->o.hz;
	s->v.gc_recent.count = gc.count - gc_before.count;
	s->v.gc_recent.major = gc.major - gc_before.major;
	s->v.gc_recent.pause_ns = gc.pause_ns - gc_before.pause_ns;
	s->v.gc_secs = now - since;
	l->shown_at = now;
	l->shown_events = events;
	l->shown_gc = gc;
}

static void
snap_release(struct snap *s)
{
	free(s->pids);
	free(s->dirs);
}

/* One table on its own lines, then a blank line; or one JSON line. */
static void
show_lines(struct trc_live *l, bool final)
{
	struct snap s;
	struct trc_buf b;

	snap_init(l, &s, final);
	trc_buf_init(&b);
	if (l->o.json) {
		trc_top_format_json(l->top, &s.v, &b);
	} else {
		trc_top_format_text(l->top, &s.v, &b);
		trc_buf_addc(&b, '\n');
	}
	trc_output_write(l->out, b.data, b.len);
	trc_buf_release(&b);
	snap_release(&s);
	l->shown_generation = trc_top_generation(l->top);
}

/* The latest note (or error) under the table: the screen hides stderr until it closes. */
static void
add_last_note(const struct trc_live *l, struct trc_buf *text)
{
	const struct trc_buf *err = &l->out->err;
	size_t end = err->len, start;

	if (end == 0)
		return;
	start = end - 1;
	while (start > 0 && err->data[start - 1] != '\n')
		start--;
	trc_buf_addc(text, '\n');
	trc_buf_add(text, err->data + start, end - start);
}

static void
show_screen(struct trc_live *l)
{
	unsigned lines = trc_screen_lines(l->out->fd);
	struct trc_buf text, frame;
	struct snap s;

	snap_init(l, &s, false);
	if (lines > SCREEN_CHROME + 1 && s.v.rows > lines - SCREEN_CHROME)
		s.v.rows = lines - SCREEN_CHROME;
	trc_buf_init(&text);
	trc_buf_init(&frame);
	trc_top_format_text(l->top, &s.v, &text);
	add_last_note(l, &text);
	trc_screen_frame(&frame, text.data, text.len);
	trc_output_write(l->out, frame.data, frame.len);
	trc_buf_release(&text);
	trc_buf_release(&frame);
	snap_release(&s);
}

/*
 * Without a screen, tables start once every first target counts: none misses the first
 * events. A target --ps finds later does not hold them up. Nor does a table come before
 * there is a target (--exec's program has yet to connect): it would show nobody.
 */
static void
on_redraw(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_live *l = w->data;

	(void)loop, (void)revents;
	if (l->screen != NULL) {
		show_screen(l);
	} else if (!l->o.final_only &&
		   (l->shown || (l->nsessions > 0 && trc_sessions_all_started(l->sessions, l->nsessions)))) {
		show_lines(l, false);
		l->shown = true;
	}
}

static void
on_reset(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_live *l = w->data;

	(void)loop, (void)revents;
	trc_top_reset(l->top);
}

static void
on_key(void *ctx, int key)
{
	struct trc_live *l = ctx;

	if (key == 'q' || key == 'Q')
		l->quit(l->ctx);
	else if (key == TRC_SCREEN_REDRAW)
		show_screen(l);
}

static void
start_timer(struct trc_live *l, ev_timer *w, void (*cb)(struct ev_loop *, ev_timer *, int),
	    double every)
{
	ev_timer_init(w, cb, every, every);
	w->data = l;
	if (every > 0)
		ev_timer_start(l->loop, w);
}

struct trc_live *
trc_live_start(struct ev_loop *loop, struct trc_output *out, struct trc_top *table,
	       struct trc_session *const *sessions, size_t nsessions,
	       const struct trc_live_opts *o, trc_live_quit_fn *quit, void *ctx)
{
	struct trc_live *l = xcalloc(1, sizeof(*l));

	l->loop = loop;
	l->out = out;
	l->top = table;
	l->sessions = sessions;
	l->nsessions = nsessions;
	l->o = *o;
	l->quit = quit;
	l->ctx = ctx;
	l->start = l->shown_at = ev_now(loop);
	start_timer(l, &l->redraw_w, on_redraw, o->interval);
	start_timer(l, &l->reset_w, on_reset, o->reset);
	if (o->full_screen) {
		/* Notes would scroll the screen: they wait in memory until it closes. */
		trc_output_flush(out);
		out->err_fd = -1;
		l->screen = trc_screen_open(loop, STDIN_FILENO, out->fd, on_key, l);
		show_screen(l);
	}
	return l;
}

void
trc_live_update(struct trc_live *l)
{
	if (l->screen != NULL)
		show_screen(l);
}

void
trc_live_counted(struct trc_live *l)
{
	if (l->screen != NULL) {
		trc_live_update(l);
		return;
	}
	if (l->o.final_only || l->shown || !trc_sessions_all_counted(l->sessions, l->nsessions))
		return;
	show_lines(l, false);
	l->shown = true;
	ev_timer_again(l->loop, &l->redraw_w);  /* the next table an interval from now */
}

void
trc_live_set_sessions(struct trc_live *l, struct trc_session *const *sessions, size_t nsessions)
{
	l->sessions = sessions;
	l->nsessions = nsessions;
}

/*
 * Whether any process counted for the table: one that refused (another client holds what
 * --top needs, or its Ruby cannot count so) leaves no table of nothing behind its error.
 */
static bool
any_traced(const struct trc_live *l)
{
	for (size_t i = 0; i < l->nsessions; i++)
		if (trc_session_traced(l->sessions[i]))
			return true;
	return false;
}

/* The screen goes first: what it hid is said on the terminal it gives back. */
void
trc_live_stop(struct trc_live *l)
{
	struct trc_output *out = l->out;

	ev_timer_stop(l->loop, &l->redraw_w);
	ev_timer_stop(l->loop, &l->reset_w);
	if (l->screen != NULL) {
		trc_output_flush(out);
		trc_screen_close(l->screen);
		l->screen = NULL;
		if (out->err.len > 0)
			fwrite(out->err.data, 1, out->err.len, stderr);
		out->err.len = 0;
		out->err_fd = STDERR_FILENO;
	}
	/*
	 * --exec's last table, unless the latest one printed holds the same counts: a program
	 * that ends within an interval sends its only counts as it ends, which printed them.
	 */
	if ((l->o.final_only && any_traced(l)) ||
	    (l->o.final && !(l->shown && trc_top_generation(l->top) == l->shown_generation)))
		show_lines(l, true);
	free(l);
}
