/* trace.c: the call-tree printer: open lines, leaves, indents, durations and labels per event. */
#define _GNU_SOURCE     /* memrchr */
#include "trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "escape.h"
#include "intern.h"
#include "replay.h"
#include "xmalloc.h"

#define TS_WIDTH 16     /* "HH:MM:SS.uuuuuu " */
/* With several targets, a block's lines are held for at most this long, or this much. */
#define HOLD_SECS TRC_TRACE_HOLD_SECS
#define HOLD_BYTES (64u << 10)

static const char spaces[] = "                                                                ";

/* A thread's record in the replay; its calls are plain struct trc_replay_call. */
struct thread {
	struct trc_replay_thread base;
	uint32_t label;         /* "[name] ", in names */
	uint32_t max_depth;     /* deepest since the stack was last empty */
};

struct trc_trace {
	struct trc_output *out;
	struct trc_trace_opts opts;
	const struct trc_spec *specs;
	size_t nspecs;
	char pid_label[24];
	size_t pid_label_len;
	struct trc_replay replay;       /* a method's value is its text in names */
	struct trc_intern names;        /* "Class#meth", "Class.meth" or "meth"; thread labels */
	/* The open line: a call of thread pending_thread at stack depth pending_depth, which
	 * becomes a one-line leaf if its return comes next. */
	bool pending;
	bool pending_paren;     /* an expression list "(..." is open on it */
	uint32_t pending_thread, pending_depth;
	uint64_t mono_ns, real_ns;
	int64_t clock_sec;      /* second of clock_text */
	char clock_text[10];    /* "HH:MM:SS." */
	uint64_t lost;
	struct trc_buf scratch;         /* put_str's escaped text */
	/*
	 * Several targets share the output: each printer holds the lines of a block (an outermost
	 * call and everything under it, on every thread of its target) until the block ends, so
	 * that another target's lines never land inside it; a block held too long or grown too
	 * big goes out by whole lines. The open line is then the printer's own, in block.
	 */
	bool hold;
	struct trc_buf block;
	uint32_t busy;                  /* threads with open calls */
	bool slow_open;                 /* the last slow call was nested: its outer one comes */
	double held_since;              /* trc_trace_idle's time the block was first seen; 0 */
};

static void
put(struct trc_trace *t, const char *p, size_t n)
{
	if (t->hold)
		trc_buf_add(&t->block, p, n);
	else
		trc_output_write(t->out, p, n);
}

/* Bytes from the target: escaped (escape.h) on their way out. */
static void
put_str(struct trc_trace *t, struct trc_str s)
{
	t->scratch.len = 0;
	trc_escape(&t->scratch, s.ptr, s.len);
	put(t, t->scratch.data, t->scratch.len);
}

static void
put_name(struct trc_trace *t, uint32_t id)
{
	size_t len;
	const char *s = trc_intern_str(&t->names, id, &len);

	put(t, s, len);
}

static void
put_spaces(struct trc_trace *t, size_t n)
{
	size_t chunk;

	for (; n > 0; n -= chunk) {
		chunk = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;
		put(t, spaces, chunk);
	}
}

/* Writes v in decimal just before end and returns where the digits start. */
static char *
fmt_u64(char *end, uint64_t v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	return end;
}

/* Writes v as exactly width digits, zero-padded. */
static void
fmt_fixed(char *p, uint64_t v, int width)
{
	for (int i = width - 1; i >= 0; i--, v /= 10)
		p[i] = (char)('0' + v % 10);
}

/*
 * " <S.NNNNNNNNN>": seconds to the nanosecond, what the clock measured. rbtrace's six decimals
 * showed every call under half a microsecond as <0.000000>, which read as a bug.
 */
static void
put_duration(struct trc_trace *t, uint64_t ns)
{
	char buf[40], *end = buf + sizeof(buf), *p;

	*--end = '>';
	end -= 9;
	fmt_fixed(end, ns % 1000000000, 9);
	*--end = '.';
	p = fmt_u64(end, ns / 1000000000);
	*--p = '<';
	*--p = ' ';
	put(t, p, (size_t)(buf + sizeof(buf) - p));
}

static void
put_uint(struct trc_trace *t, uint64_t v)
{
	char buf[24], *p = fmt_u64(buf + sizeof(buf), v);

	put(t, p, (size_t)(buf + sizeof(buf) - p));
}

static void
put_int(struct trc_trace *t, int64_t v)
{
	if (v < 0) {
		put(t, "-", 1);
		put_uint(t, (uint64_t)0 - (uint64_t)v);
	} else {
		put_uint(t, (uint64_t)v);
	}
}

/* "HH:MM:SS.uuuuuu " of the target's timestamp ts, in local time. */
static void
put_clock(struct trc_trace *t, uint64_t ts)
{
	/* Unsigned, so that an agent's absurd clock pair wraps instead of overflowing. */
	int64_t wall = (int64_t)(t->real_ns + (ts - t->mono_ns));
	int64_t sec = wall / 1000000000, usec = (wall % 1000000000) / 1000;
	char text[TS_WIDTH];

	if (usec < 0) {
		sec--;
		usec += 1000000;
	}
	if (sec != t->clock_sec) {
		time_t tt = (time_t)sec;
		struct tm tm;

		if (localtime_r(&tt, &tm) == NULL ||
		    strftime(t->clock_text, sizeof(t->clock_text), "%H:%M:%S.", &tm) != 9)
			memcpy(t->clock_text, "??:??:??.", 9);
		t->clock_sec = sec;
	}
	memcpy(text, t->clock_text, 9);
	fmt_fixed(text + 9, (uint64_t)usec, 6);
	text[15] = ' ';
	put(t, text, sizeof(text));
}

/* Ends the open line: the owner callback of output.h. */
static void
close_pending(void *owner)
{
	struct trc_trace *t = owner;

	if (t->pending_paren)
		put(t, ")", 1);
	put(t, "\n", 1);
	t->pending = false;
	t->pending_paren = false;
}

/* Ends whatever line is open: ours, or (without blocks) another target's. */
static void
end_open_line(struct trc_trace *t)
{
	if (!t->hold)
		trc_output_close_line(t->out);
	else if (t->pending)
		close_pending(t);
}

/* Whether the open line is this printer's, to extend. */
static bool
owns_line(const struct trc_trace *t)
{
	return t->pending && (t->hold || t->out->line_owner == t);
}

/*
 * Starts a line for thread th: ends whatever line is open (ours or another target's), then
 * "[pid] ", "[thread] " and, with -t, the clock of ts (or blanks when ts is NULL).
 */
static void
line_start(struct trc_trace *t, const struct thread *th, const uint64_t *ts)
{
	end_open_line(t);
	if (t->pid_label_len)
		put(t, t->pid_label, t->pid_label_len);
	if (t->replay.threads_seen > 1)  /* with 2 or more, every line names its thread */
		put_name(t, th->label);
	if (t->opts.start_time) {
		if (ts != NULL)
			put_clock(t, *ts);
		else
			put_spaces(t, TS_WIDTH);
	}
}

/*
 * A Rails stack is some 160 calls deep: indenting each line by its depth made 2 s of -f over
 * four workers 800 MB of mostly spaces. Past TRC_TRACE_MAX_INDENT the depth is a number.
 */
static void
put_indent(struct trc_trace *t, uint32_t depth)
{
	if (depth <= TRC_TRACE_MAX_INDENT) {
		put_spaces(t, (size_t)depth * t->opts.prefix);
		return;
	}
	put(t, "[depth ", 7);
	put_uint(t, depth);
	put(t, "] ", 2);
}

static void
put_method(struct trc_trace *t, uint32_t idx)
{
	uint32_t id;

	if (trc_replay_method(&t->replay, idx, &id))
		put_name(t, id);
	else
		put(t, "(unknown)", 9);
}

/* TRC_EV_METHOD: the text printed for the method, escaped once here: "Class#meth". */
static uint32_t
on_method(void *user, const struct trc_message *m)
{
	struct trc_trace *t = user;
	struct trc_buf text;
	uint32_t id;

	trc_buf_init(&text);
	trc_escape(&text, m->method.cls.ptr, m->method.cls.len);
	if (m->method.cls.len > 0)
		trc_escape(&text, m->method.sep.ptr, m->method.sep.len);
	trc_escape(&text, m->method.name.ptr, m->method.name.len);
	id = trc_intern_id(&t->names, text.data, text.len);
	trc_buf_release(&text);
	return id;
}

/* A thread's label, "[name] ", escaped once here. */
static void
on_name(void *user, void *thread, struct trc_str name)
{
	struct trc_trace *t = user;
	struct thread *th = thread;
	struct trc_buf label;

	trc_buf_init(&label);
	trc_buf_addc(&label, '[');
	trc_escape(&label, name.ptr, name.len);
	trc_buf_add(&label, "] ", 2);
	th->label = trc_intern_id(&t->names, label.data, label.len);
	trc_buf_release(&label);
}

/* Prints "Class#meth" and leaves the line open: the next event decides how it ends. */
static int
on_call(void *user, void *thread, const struct trc_message *m)
{
	struct trc_trace *t = user;
	struct thread *th = thread;

	line_start(t, th, &m->call.ts);
	put_indent(t, th->base.depth);
	put_method(t, m->call.method);
	t->busy += th->base.depth == 0;
	if (trc_replay_push(&t->replay, &th->base, m->call.method, m->call.ts) == NULL)
		return -1;
	if (th->base.depth > th->max_depth)
		th->max_depth = th->base.depth;
	t->pending = true;
	t->pending_paren = false;
	t->pending_thread = m->call.thread;
	t->pending_depth = th->base.depth;
	if (!t->hold)
		trc_output_open_line(t->out, t, close_pending);
	return 0;
}

static bool
is_open_leaf(const struct trc_trace *t, uint32_t thread, const struct thread *th, int64_t k)
{
	return owns_line(t) && t->pending_thread == thread && t->pending_depth == th->base.depth &&
	       k == (int64_t)th->base.depth - 1;
}

/* Ends the line of a call that returned: on the call's own line if it is a leaf. */
static void
print_return(struct trc_trace *t, uint32_t thread, struct thread *th, int64_t k, uint64_t ts)
{
	const struct trc_replay_call *f = (const struct trc_replay_call *)th->base.stack + k;

	if (is_open_leaf(t, thread, th, k)) {
		if (t->pending_paren)
			put(t, ")", 1);
		t->pending = false;
		if (!t->hold)
			t->out->line_owner = NULL;
	} else {
		line_start(t, th, NULL);
		put_indent(t, (uint32_t)k);
		put_method(t, f->method);
	}
	if (!t->opts.no_duration)
		put_duration(t, ts > f->start ? ts - f->start : 0);
	put(t, "\n", 1);
}

/*
 * A return whose call is not on top of the stack means events were lost or the trace began
 * inside the call: frames above it are dropped, and a return without its call is ignored.
 */
static int
on_return(void *user, void *thread, const struct trc_message *m)
{
	struct trc_trace *t = user;
	struct thread *th = thread;
	int64_t k = trc_replay_find(&t->replay, &th->base, m->call.method);

	if (k < 0)
		return 0;
	print_return(t, m->call.thread, th, k, m->call.ts);
	t->busy -= k == 0;
	th->base.depth = (uint32_t)k;
	if (th->base.depth == 0) {
		if (th->max_depth > 1)
			put(t, "\n", 1);
		th->max_depth = 0;
	}
	return 0;
}

static void
put_expr_name(struct trc_trace *t, uint32_t spec, uint32_t expr)
{
	if (spec < t->nspecs && expr < t->specs[spec].nexprs)
		put(t, t->specs[spec].exprs[expr], strlen(t->specs[spec].exprs[expr]));
	else
		put(t, "?", 1);
}

/* "expr=value" joins the open call line as "(a=1, b=2)"; elsewhere it gets its own line. */
static int
on_expr(void *user, void *thread, const struct trc_message *m)
{
	struct trc_trace *t = user;
	struct thread *th = thread;
	bool joins = owns_line(t) &&
		     t->pending_thread == m->expr.thread && t->pending_depth == th->base.depth;

	if (joins) {
		put(t, t->pending_paren ? ", " : "(", t->pending_paren ? 2 : 1);
		t->pending_paren = true;
	} else {
		line_start(t, th, NULL);
		put_indent(t, th->base.depth);
		put(t, "(", 1);
	}
	put_expr_name(t, m->expr.spec, m->expr.expr);
	put(t, "=", 1);
	put_str(t, m->expr.text);
	if (!joins)
		put(t, ")\n", 2);
	return 0;
}

/* Takes the first line of *rest off it (without its "\n" or "\r\n") and returns it. */
static struct trc_str
next_line(struct trc_str *rest)
{
	const char *nl = rest->len > 0 ? memchr(rest->ptr, '\n', rest->len) : NULL;
	struct trc_str line = *rest;

	if (nl == NULL) {
		rest->len = 0;
	} else {
		line.len = (uint32_t)(nl - rest->ptr);
		rest->len -= line.len + 1;
		rest->ptr = nl + 1;
	}
	if (line.len > 0 && line.ptr[line.len - 1] == '\r')
		line.len--;
	return line;
}

/*
 * The lines after the first of a multi-line message (a NameError's "Did you mean?", Ruby
 * 3.1's error_highlight): each on a line of the tree with the prefixes and indent of its
 * EXCEPTION line, its text under the class name. Blank lines are left out.
 */
static void
put_message_rest(struct trc_trace *t, const struct thread *th, struct trc_str rest)
{
	while (rest.len > 0) {
		struct trc_str line = next_line(&rest);

		if (line.len == 0)
			continue;
		line_start(t, th, NULL);
		put_indent(t, th->base.depth);
		put_spaces(t, sizeof("EXCEPTION ") - 1);
		put_str(t, line);
		put(t, "\n", 1);
	}
}

/*
 * "EXCEPTION Class: message (path:line)" at the thread's current depth; a message of several
 * lines continues below, the location staying with its first line.
 */
static int
on_raise(void *user, void *thread, const struct trc_message *m)
{
	struct trc_trace *t = user;
	struct thread *th = thread;
	struct trc_str rest = m->raise.message;

	line_start(t, th, &m->raise.ts);
	put_indent(t, th->base.depth);
	put(t, "EXCEPTION ", 10);
	put_str(t, m->raise.cls);
	put(t, ": ", 2);
	put_str(t, next_line(&rest));
	if (m->raise.path.len > 0) {
		put(t, " (", 2);
		put_str(t, m->raise.path);
		put(t, ":", 1);
		put_int(t, m->raise.line);
		put(t, ")", 1);
	}
	put(t, "\n", 1);
	put_message_rest(t, th, rest);
	return 0;
}

/* Slow calls arrive as they return, innermost first; a blank line follows each outermost. */
static int
on_slow(void *user, void *thread, const struct trc_message *m)
{
	struct trc_trace *t = user;
	struct thread *th = thread;

	line_start(t, th, &m->slow.start_ts);
	t->slow_open = m->slow.depth > 0;
	put_indent(t, m->slow.depth);
	put_method(t, m->slow.method);
	if (!t->opts.no_duration)
		put_duration(t, m->slow.duration_ns);
	put(t, m->slow.depth == 0 ? "\n\n" : "\n", m->slow.depth == 0 ? 2 : 1);
	return 0;
}

/*
 * "GC major (nofree) <0.012345>" where it happened: at the depth of the thread that ran it, or
 * at the left when it was no traced thread. The duration is the time it stopped the app.
 */
/* Starts the line of a moment at ts: at the depth of th, or at the left when th is NULL. */
static void
moment_start(struct trc_trace *t, const struct thread *th, uint64_t ts)
{
	end_open_line(t);
	if (th != NULL) {
		line_start(t, th, &ts);
		put_indent(t, th->base.depth);
	} else {
		if (t->pid_label_len)
			put(t, t->pid_label, t->pid_label_len);
		if (t->opts.start_time)
			put_clock(t, ts);
	}
}

static int
on_gc(void *user, void *thread, const struct trc_message *m)
{
	struct trc_trace *t = user;

	moment_start(t, thread, m->gc.start_ts);
	put(t, m->gc.major ? "GC major" : "GC minor", 8);
	if (m->gc.reason.len > 0) {
		put(t, " (", 2);
		put_str(t, m->gc.reason);
		put(t, ")", 1);
	}
	if (!t->opts.no_duration)
		put_duration(t, m->gc.pause_ns);
	put(t, "\n", 1);
	return 0;
}

/* "TITLE text" (TRC_MARKS) where it happened, as a collection is shown. */
static int
on_mark(void *user, void *thread, const struct trc_message *m)
{
	struct trc_trace *t = user;
	const struct trc_mark_type *k = trc_mark_type(m->type);

	moment_start(t, thread, m->mark.ts);
	put(t, k->title, strlen(k->title));
	if (m->mark.text.len > 0) {
		put(t, " ", 1);
		put_str(t, m->mark.text);
	}
	put(t, "\n", 1);
	return 0;
}

static int
on_lost(void *user, const struct trc_message *m)
{
	struct trc_trace *t = user;

	t->lost += m->lost.count;
	trc_output_note(t->out, "%.*s%" PRIu64 " events lost", (int)t->pid_label_len, t->pid_label,
			m->lost.count);
	return 0;
}

static const struct trc_replay_ops replay_ops = {
	.thread_size = sizeof(struct thread),
	.call_size = sizeof(struct trc_replay_call),
	.method = on_method,
	.name = on_name,
	.call = on_call,
	.ret = on_return,
	.raise = on_raise,
	.expr = on_expr,
	.slow = on_slow,
	.lost = on_lost,
	.gc = on_gc,
	.mark = on_mark,
};

/* n bytes of the held block go out, the shared output's open line ended first. */
static void
release(struct trc_trace *t, size_t n)
{
	if (n == 0)
		return;
	trc_output_close_line(t->out);
	trc_output_write(t->out, t->block.data, n);
	trc_buf_consume(&t->block, n);
	if (t->block.len == 0)
		t->held_since = 0;
}

/* The held block's whole lines (the open line stays). */
static void
release_lines(struct trc_trace *t)
{
	const char *nl = t->block.len > 0 ? memrchr(t->block.data, '\n', t->block.len) : NULL;

	if (nl != NULL)
		release(t, (size_t)(nl - t->block.data) + 1);
}

/* After each event: a block that ended goes out whole; one grown too big, by whole lines. */
static void
settle(struct trc_trace *t)
{
	if (!t->hold || t->block.len == 0)
		return;
	if (t->busy == 0 && !t->pending && !t->slow_open)
		release(t, t->block.len);
	else if (t->block.len >= HOLD_BYTES)
		release_lines(t);
}

int
trc_trace_feed(struct trc_trace *t, const struct trc_message *m)
{
	int rc = trc_replay_feed(&t->replay, m);

	settle(t);
	return rc;
}

bool
trc_trace_idle(struct trc_trace *t, double now)
{
	if (!t->hold || t->block.len == 0) {
		t->held_since = 0;
		return false;
	}
	if (t->held_since == 0) {
		t->held_since = now;
	} else if (now - t->held_since >= HOLD_SECS) {
		release_lines(t);
		t->held_since = t->block.len > 0 ? now : 0;
	}
	return t->block.len > 0;
}

struct trc_trace *
trc_trace_new(struct trc_output *out, const struct trc_trace_opts *opts,
	      const struct trc_spec *specs, size_t nspecs)
{
	struct trc_trace *t = xcalloc(1, sizeof(*t));

	t->out = out;
	t->opts = *opts;
	t->specs = specs;
	t->nspecs = nspecs;
	t->clock_sec = INT64_MIN;
	trc_replay_init(&t->replay, &replay_ops, t);
	t->hold = opts->pid > 0;
	if (opts->pid > 0)
		t->pid_label_len = (size_t)snprintf(t->pid_label, sizeof(t->pid_label), "[%d] ",
						    opts->pid);
	return t;
}

void
trc_trace_free(struct trc_trace *t)
{
	if (t->hold)
		end_open_line(t);
	else if (t->out->line_owner == t)
		trc_output_close_line(t->out);
	release(t, t->block.len);
	trc_buf_release(&t->block);
	trc_replay_release(&t->replay);
	trc_intern_release(&t->names);
	trc_buf_release(&t->scratch);
	free(t);
}

void
trc_trace_set_clock(struct trc_trace *t, uint64_t mono_ns, uint64_t real_ns)
{
	t->mono_ns = mono_ns;
	t->real_ns = real_ns;
	t->clock_sec = INT64_MIN;
}

const char *
trc_trace_error(const struct trc_trace *t)
{
	return t->replay.error;
}

uint64_t
trc_trace_lost(const struct trc_trace *t)
{
	return t->lost;
}

static int
sink_feed(void *impl, const struct trc_message *m)
{
	return trc_trace_feed(impl, m);
}

static void
sink_set_clock(void *impl, uint64_t mono_ns, uint64_t real_ns)
{
	trc_trace_set_clock(impl, mono_ns, real_ns);
}

static const char *
sink_error(const void *impl)
{
	return trc_trace_error(impl);
}

static uint64_t
sink_lost(const void *impl)
{
	return trc_trace_lost(impl);
}

static void
sink_close(void *impl)
{
	trc_trace_free(impl);
}

static bool
sink_idle(void *impl, double now)
{
	return trc_trace_idle(impl, now);
}

static const struct trc_sink_ops sink_ops = {
	.feed = sink_feed,
	.set_clock = sink_set_clock,
	.error = sink_error,
	.lost = sink_lost,
	.close = sink_close,
	.idle = sink_idle,
};

struct trc_sink
trc_trace_sink(struct trc_trace *t)
{
	return (struct trc_sink){ &sink_ops, t };
}
