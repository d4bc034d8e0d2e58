/* top.c: the counting hooks behind --top, and the fixed-size table they count into. */
#include "top.h"

#include <errno.h>
#include <ruby/debug.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "encode.h"
#include "gc.h"
#include "names.h"
#include "paths.h"
#include "threads.h"
#include "vm.h"
#include "tracer_protocol.h"
#include "wrap.h"

/*
 * A row is keyed by (what, file, line): what is a method index + 1 (calls, time), a class
 * (objects, exceptions) or 0 (arrays, strings); file is the address of the path string Ruby
 * keeps for the code (compared by address, so a lookup costs no strcmp), copied on insert.
 * The table never grows: allocation hooks may not allocate Ruby memory, so it is sized at start
 * and a full table counts the event as lost until the next snapshot empties it.
 */
#define SLOTS (2 * TRC_TOP_MAX_ROWS)

/* Each mode's flags (enum trc_top_mode_flag), from the protocol's list. */
static const int modes[] = {
#define TRC_X(NAME, value, name, flags, label, key, count, total, self, help) [TRC_TOP_##NAME] = (flags),
	TRC_TOP_MODES(TRC_X)
#undef TRC_X
};

struct row {
	uintptr_t what;
	const char *file;       /* key: Ruby's own path string */
	char *path;             /* our copy, for the snapshot */
	int line;
	const char *app;        /* key (exceptions): the app's frame nearest the raise, NULL: none */
	int app_line;
	char *app_path;         /* our copy of it, absolute */
	uint8_t used;
	uint8_t excluded;       /* outside the prefixes: looked up, never reported */
	uint8_t nomem;          /* excluded for want of memory for its path: its events are lost */
	uint64_t count, total, self;
};

/* A wrapped method's calls and time this interval (--top time of the app), in clock ticks. */
struct timed {
	uint64_t count, total, self;
};

/* A row's or a wrapped method's outermost calls by duration (tracer_protocol.h's buckets). */
struct hist {
	uint64_t n[TRC_TOP_BUCKETS];
};

#define BOUND_NS(ns) (ns),
static const uint64_t bound_ns[] = { TRC_TOP_BUCKET_BOUNDS(BOUND_NS) };
#undef BOUND_NS
_Static_assert(sizeof(bound_ns) / sizeof(bound_ns[0]) + 1 == TRC_TOP_BUCKETS,
    "TRC_TOP_BUCKETS is the bounds and one more");

static struct {
	int mode;
	int flags;              /* enum trc_top_flag */
	struct trc_scope scope;
	int wrapped;            /* calls and time of the app's methods: through wrappers */
	uint64_t gen;           /* their generation */
	struct row *rows;
	uint32_t *used;         /* slots in use, to empty the table without a sweep */
	uint32_t nused;
	uint64_t events, lost, since;
	uint64_t gcs, major_gcs, gc_ticks;      /* collections this interval (TRC_TOP_GC) */
	int gc;
	rb_event_flag_t global;
	int newobj;             /* the NEWOBJ hook is on */
	uint32_t sample;        /* allocations: about one in sample is looked up (1: all) */
	uint32_t countdown;     /* counted allocations until the next one looked up */
	uint32_t weight;        /* what that one counts for: the gap drawn before it */
	uint64_t seed;
	int by_time;            /* TRC_TOP_BY_TIME: the hook is on only in windows */
	size_t alloc_base;      /* the VM's allocation count at the interval's start */
	size_t alloc_mark;      /* ... when the open window opened */
	size_t alloc_seen;      /* allocations made inside windows this interval */
	int raise_hook;
	/*
	 * Calls of wrapped methods (--top calls of the app): a count per method, this interval, and
	 * the methods counted, folded into rows by trc_top_pack. A wrapped call then adds one to
	 * one counter instead of finding its row: Redmine makes some 13,000 such calls a request.
	 * Mapped, as rows are: only the pages of the methods called are touched.
	 */
	uint32_t *calls;
	struct timed *timed;    /* --top time of the app: the same, with the times */
	/*
	 * --top time: the rows' (by slot) and the wrapped methods' (by index) durations, mapped
	 * apart from them so that no other mode pays for them; NULL in other modes. A return
	 * adds one to one counter of a fixed array: nothing is allocated.
	 */
	struct hist *row_hist, *timed_hist;
	uint64_t bound_ticks[TRC_TOP_BUCKETS - 1];      /* bound_ns in clock ticks (trc_top_go) */
	uint32_t *called;
	uint32_t ncalled;
	int threads;            /* the VM's thread events are watched */
	int paths;              /* TRC_TOP_PATHS: time is counted per call path too (paths.h) */
	volatile int armed;
} table;

/*
 * TRC_TOP_BY_TIME's windows: open is the edge the I/O thread last timed (it alone writes it,
 * from trc_top_window_edge); the service follows it (trc_top_window). The first edge closes a
 * window that never opened.
 */
static struct {
	int open;
	uint32_t duty;
	uint64_t seed;
} windows;



/* Where the app was when an exception was raised (exceptions only; else app is NULL). */
struct app_site {
	const char *app;        /* Ruby's own path string */
	int line;
};

static inline uint32_t
row_hash(uintptr_t what, const char *file, int line, const struct app_site *a)
{
	uint64_t h = (uint64_t)what * 0x9E3779B97F4A7C15ull ^ ((uint64_t)(uintptr_t)file >> 3) * 0xC2B2AE3D27D4EB4Full ^
	    (uint64_t)line * 0x165667B19E3779F9ull;

	if (a != NULL)
		h ^= ((uint64_t)(uintptr_t)a->app >> 3) * 0x27D4EB2F165667C5ull ^ (uint64_t)a->line * 0x94D049BB133111EBull;
	return (uint32_t)(h >> 40);
}

/* Rows of exceptions are counted wherever the raise was: Rails raises inside its gems. */
static int
scoped(void)
{
	return !(modes[table.mode] & TRC_TOPM_RAISE);
}

/*
 * The row of a key, made on first sight; NULL when excluded or when the table is full. May be
 * called from an allocation hook: it uses plain malloc only, never the Ruby heap.
 */
static struct row *
row_get_at(uintptr_t what, const char *file, int line, const char *path, const struct app_site *a)
{
	uint32_t i = row_hash(what, file, line, a) & (SLOTS - 1);
	const char *app = a != NULL ? a->app : NULL;
	int app_line = a != NULL ? a->line : 0;
	struct row *r;

	for (;; i = (i + 1) & (SLOTS - 1)) {
		r = &table.rows[i];
		if (!r->used)
			break;
		if (r->what == what && r->file == file && r->line == line && r->app == app && r->app_line == app_line) {
			if (r->nomem)
				table.lost++;
			return r->excluded ? NULL : r;
		}
	}
	if (table.nused >= TRC_TOP_MAX_ROWS) {
		table.lost++;
		return NULL;
	}
	r->what = what;
	r->file = file;
	r->line = line;
	r->app = app;
	r->app_line = app_line;
	r->used = 1;
	/* Without a path (a thread), no scope applies. */
	r->excluded = path != NULL && scoped() && !trc_scope_wanted(&table.scope, path);
	/* Shown as an absolute path: a script run as `ruby app.rb` has relative ones. */
	r->path = r->excluded || path == NULL ? NULL : trc_scope_absolute(&table.scope, path);
	r->app_path = r->excluded || app == NULL ? NULL : trc_scope_absolute(&table.scope, app);
	r->nomem = !r->excluded && ((path != NULL && r->path == NULL) || (app != NULL && r->app_path == NULL));
	r->excluded |= r->nomem;
	r->count = r->total = r->self = 0;
	table.used[table.nused++] = i;
	table.lost += r->nomem;
	return r->excluded ? NULL : r;
}

static struct row *
row_get(uintptr_t what, const char *file, int line, const char *path)
{
	return row_get_at(what, file, line, path, NULL);
}

/* ---- calls and time ---- */

/* The bucket of a duration in clock ticks: most calls are short, so the search starts low. */
static inline unsigned
bucket_of(uint64_t ticks)
{
	unsigned i = 0;

	while (i < TRC_TOP_BUCKETS - 1 && ticks > table.bound_ticks[i])
		i++;
	return i;
}

struct site {
	uint32_t method;
	const char *file;       /* the caller's, for a C method; NULL for a Ruby method */
	int line;
	const char *path;       /* what the prefixes are matched against */
};

static int
call_site(rb_event_flag_t ev, VALUE klass, ID mid, struct site *s)
{
	const struct trc_method *m;
	VALUE path = Qnil;
	int line = 0;

	if (mid == 0 && !rb_frame_method_id_and_class(&mid, &klass))
		return -1;
	if ((s->method = trc_method_find(klass, mid)) == UINT32_MAX) {
		if (ev & (RUBY_EVENT_CALL | RUBY_EVENT_RETURN)) {
			rb_trace_arg_t *ta = rb_tracearg_from_tracepoint(Qnil);
			path = rb_tracearg_path(ta);
			line = FIX2INT(rb_tracearg_lineno(ta));
		}
		if ((s->method = trc_method_intern(klass, mid, path, line, -2)) == UINT32_MAX)
			return -1;
	}
	m = trc_method_at(s->method);
	if (m->path[0] != 0) {
		s->file = NULL;
		s->line = m->line;
		s->path = m->path;
	} else {
		/* A C method is counted where its Ruby caller is. */
		s->file = rb_sourcefile();
		s->line = rb_sourceline();
		s->path = s->file ? s->file : "";
	}
	return 0;
}

static void
count_call(rb_event_flag_t ev, VALUE klass, ID mid)
{
	struct site s;
	struct row *r;

	if (!table.armed || trc_thread_current() == NULL || call_site(ev, klass, mid, &s) < 0)
		return;
	table.events++;
	if ((r = row_get(s.method + 1, s.file, s.line, s.path)) != NULL)
		r->count++;
}

static void
calls_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	trc_vm_hook_in();
	count_call(ev, klass, mid);
	trc_vm_hook_out();
}

static int
same_site(const struct trc_frame *f, const struct site *s)
{
	return f->method == s->method && f->path == s->file && f->line == s->line;
}

static void
time_call(struct trc_thread *t, const struct site *s)
{
	struct trc_frame *f = trc_thread_frame(t, t->depth);

	if (f == NULL)
		return;
	f->start = trc_clock_now();
	f->child = 0;
	f->method = s->method;
	f->path = s->file;
	f->line = s->line;
	/* The caller's frame is read after trc_thread_frame, which may have moved the frames. */
	f->node = table.paths ? trc_paths_enter(t->depth > 0 ? t->frames[t->depth - 1].node : 0, s->method) : 0;
	t->depth++;
}

/*
 * Pops the frame of site s's call: its time in ticks, its self time, and whether no call of
 * the same site is open below it (only the outermost of a recursion adds to the total). 0 when
 * no frame is the site's.
 */
static int
pop_frame(struct trc_thread *t, const struct site *s, uint64_t *total, uint64_t *self, int *outermost)
{
	struct trc_frame *f;
	uint32_t d = t->depth;

	/* Find the call; frames above it lost their return (none is expected, but never trust). */
	while (d > 0 && !same_site(&t->frames[d - 1], s))
		d--;
	if (d == 0)
		return 0;       /* its call came before we attached */
	t->depth = d - 1;
	f = &t->frames[t->depth];
	*total = trc_clock_now() - f->start;
	*self = *total > f->child ? *total - f->child : 0;
	if (table.paths)
		trc_paths_add(f->node, *self);
	if (t->depth > 0)
		t->frames[t->depth - 1].child += *total;
	*outermost = 1;
	for (uint32_t i = 0; i < t->depth && *outermost; i++)
		*outermost = !same_site(&t->frames[i], s);
	return 1;
}

static void
time_return(struct trc_thread *t, const struct site *s)
{
	uint64_t total, self;
	int outermost;
	struct row *r;

	if (!pop_frame(t, s, &total, &self, &outermost))
		return;
	if ((r = row_get(s->method + 1, s->file, s->line, s->path)) == NULL)
		return;
	r->count++;
	r->self += self;
	if (!outermost)
		return;
	r->total += total;
	if (table.row_hist != NULL)
		table.row_hist[r - table.rows].n[bucket_of(total)]++;
}

static void
time_event(rb_event_flag_t ev, VALUE klass, ID mid)
{
	struct trc_thread *t;
	struct site s;

	if (!table.armed || (t = trc_thread_current()) == NULL || call_site(ev, klass, mid, &s) < 0)
		return;
	table.events++;
	if (ev & (RUBY_EVENT_CALL | RUBY_EVENT_C_CALL))
		time_call(t, &s);
	else
		time_return(t, &s);
}

static void
time_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	trc_vm_hook_in();
	time_event(ev, klass, mid);
	trc_vm_hook_out();
}

/* ---- calls and time of the app's methods, through wrappers (wrap.c's sink) ---- */

static void
site_of(uint32_t m, struct site *s)
{
	const struct trc_method *me = trc_method_at(m);

	s->method = m;
	s->file = NULL;
	s->line = me->line;
	s->path = me->path;
}

/*
 * A wrapped method's frame is its index alone (no file, line 0): its site is looked up only
 * when the interval's figures are folded into rows, and a wrapped call touches no row, and not
 * even the method's entry in the names table. (A session wraps the app's methods or hooks
 * calls, never both: a hook's frame of the same method is never compared with this one.)
 */
static void
sink_enter(struct trc_thread *t, uint32_t m, const struct trc_wrap_exprs *exprs)
{
	struct site s = { .method = m };
	struct row *r;

	if (!table.armed || !table.wrapped)
		return;
	table.events++;
	if (table.timed != NULL) {
		time_call(t, &s);
	} else if (table.calls != NULL && m < TRC_MAX_METHODS) {
		if (table.calls[m]++ == 0)
			table.called[table.ncalled++] = m;
	} else {
		site_of(m, &s);
		if ((r = row_get(s.method + 1, s.file, s.line, s.path)) != NULL)
			r->count++;
	}
}

/* A wrapped method's return: as time_return, into the method's figures rather than a row. */
static void
sink_leave(struct trc_thread *t, uint32_t m)
{
	const struct site s = { .method = m };
	uint64_t total, self;
	int outermost;
	struct timed *x;

	if (!table.armed || table.timed == NULL || m >= TRC_MAX_METHODS)
		return;
	table.events++;
	if (!pop_frame(t, &s, &total, &self, &outermost))
		return;
	x = &table.timed[m];
	if (x->count++ == 0)
		table.called[table.ncalled++] = m;
	x->self += self;
	if (!outermost)
		return;
	x->total += total;
	if (table.timed_hist != NULL)
		table.timed_hist[m].n[bucket_of(total)]++;
}

/* A wrapped method's durations this interval into its row's, and cleared. */
static void
fold_hist(const struct row *r, uint32_t m)
{
	struct hist *h;

	if (table.timed_hist == NULL || table.row_hist == NULL)
		return;
	h = &table.row_hist[r - table.rows];
	for (unsigned i = 0; i < TRC_TOP_BUCKETS; i++)
		h->n[i] += table.timed_hist[m].n[i];
	table.timed_hist[m] = (struct hist){ { 0 } };
}

/*
 * The interval's calls (and times) of wrapped methods, into their rows: as if each call had
 * found its row. A full table loses each call, not only the first.
 */
static void
fold_calls(void)
{
	struct site s;
	struct row *r;

	for (uint32_t i = 0; i < table.ncalled; i++) {
		uint32_t m = table.called[i];
		struct timed x = { 0 };
		uint64_t lost = table.lost;

		if (table.timed != NULL) {
			x = table.timed[m];
			table.timed[m] = (struct timed){ 0 };
		} else {
			x.count = table.calls[m];
			table.calls[m] = 0;
		}
		site_of(m, &s);
		if ((r = row_get(s.method + 1, s.file, s.line, s.path)) != NULL) {
			r->count += x.count;
			r->total += x.total;
			r->self += x.self;
			fold_hist(r, m);
		} else if (table.lost != lost) {
			table.lost += x.count - 1;
		}
		if (table.timed_hist != NULL)
			table.timed_hist[m] = (struct hist){ { 0 } };
	}
	table.ncalled = 0;
}

static const struct trc_wrap_sink timing = { sink_enter, sink_leave };
static const struct trc_wrap_sink counting = { sink_enter, NULL };

/* From gc.c's hook, inside the GC: no allocation, no Ruby. */
static void
gc_ended(const struct trc_gc *g)
{
	if (!table.armed || !table.gc)
		return;
	table.gcs++;
	table.major_gcs += g->major != 0;
	table.gc_ticks += g->pause;
}

/* ---- allocations: internal event, so no Ruby calls and no Ruby allocation in here ---- */

/* Objects an app makes; not the VM's own (call caches, iseqs, internal hidden objects). */
static int
counted_type(VALUE obj)
{
	if (RBASIC_CLASS(obj) == 0)
		return 0;       /* hidden: the VM's scratch strings, arrays and hashes */
	switch (table.mode) {
	case TRC_TOP_ARRAYS:
		return RB_TYPE_P(obj, T_ARRAY) || RB_TYPE_P(obj, T_HASH);
	case TRC_TOP_STRINGS:
		return RB_TYPE_P(obj, T_STRING);
	default:
		switch (RB_BUILTIN_TYPE(obj)) {
		case T_IMEMO:
		case T_NODE:
		case T_ICLASS:
		case T_ZOMBIE:
		case T_MOVED:
			return 0;
		default:
			return 1;
		}
	}
}

/*
 * Sampling: the gap to the next allocation looked up is drawn uniformly from 1..2*sample-1
 * (mean: sample), so that a loop allocating in a fixed pattern is not seen at the same step of
 * it every time; the one looked up counts for the gap. Summed over a site, that estimates its
 * allocations without bias.
 */
static uint32_t
next_gap(void)
{
	if (table.sample <= 1)
		return 1;
	return 1 + (uint32_t)(trc_xorshift(&table.seed) % (2 * (uint64_t)table.sample - 1));
}

/*
 * A raw event hook, not a TracePoint: the VM calls it with the event's argument directly,
 * which saves some 0.1x of the allocation loop's time (a hook doing nothing costs that loop
 * 1.37-1.39x this way, 1.43-1.46x as a TracePoint, on Ruby 3.1). Finding the allocation's
 * file and line costs as much again: with sampling, only the allocations drawn pay it.
 */
static void
newobj_hook(VALUE data, const rb_trace_arg_t *arg)
{
	rb_trace_arg_t *ta = (rb_trace_arg_t *)arg;     /* the rb_tracearg_ accessors take it so */
	VALUE obj, path;
	struct row *r;
	uint32_t weight;

	(void)data;
	if (!table.armed)
		return;
	obj = rb_tracearg_object(ta);
	/* Which thread costs a thread-local lookup in libruby: only asked while the agent has
	 * threads of its own (an eval still running); none in a --top session otherwise. */
	if (!counted_type(obj) || (trc_agent_threads() && trc_thread_is_agent(rb_thread_current())))
		return;
	table.events++;
	/* Unsampled, every gap is 1. */
	if (--table.countdown > 0)
		return;
	weight = table.weight;
	table.countdown = table.weight = next_gap();
	path = rb_tracearg_path(ta);
	if (!RB_TYPE_P(path, T_STRING))
		return;
	r = row_get(modes[table.mode] & TRC_TOPM_CLASS ? RBASIC_CLASS(obj) : 0,
	    RSTRING_PTR(path), FIX2INT(rb_tracearg_lineno(ta)), RSTRING_PTR(path));
	if (r != NULL)
		r->count += weight;
}

/* ---- exceptions ---- */

/* Frames of the raising thread's stack looked at for the app's: Rails raises some 100 deep. */
#define APP_FRAMES 256

/*
 * The innermost frame of this thread's stack in a file under the scope's prefixes: where the
 * app was when a gem raised on its behalf. 0 when none is (a raise in a middleware before the
 * app's code ran, or --all). rb_profile_frames allocates nothing; a C frame has no path.
 */
static int
app_frame(struct app_site *a)
{
	VALUE frames[APP_FRAMES];
	int lines[APP_FRAMES];
	int n;

	if (table.scope.all)
		return 0;
	n = rb_profile_frames(0, APP_FRAMES, frames, lines);
	for (int i = 0; i < n; i++) {
		VALUE path = rb_profile_frame_path(frames[i]);

		if (RB_TYPE_P(path, T_STRING) && trc_scope_wanted(&table.scope, RSTRING_PTR(path))) {
			a->app = RSTRING_PTR(path);
			a->line = lines[i];
			return 1;
		}
	}
	return 0;
}

static void
count_raise(void)
{
	rb_trace_arg_t *ta;
	VALUE path;
	struct row *r;
	struct app_site a = { NULL, 0 };

	if (!table.armed || trc_thread_current() == NULL)
		return;
	table.events++;
	ta = rb_tracearg_from_tracepoint(Qnil);
	path = rb_tracearg_path(ta);
	if (!RB_TYPE_P(path, T_STRING))
		return;
	/* Raised by the app itself: its own site says where the app was. */
	if (app_frame(&a) && a.line == FIX2INT(rb_tracearg_lineno(ta)) && strcmp(a.app, RSTRING_PTR(path)) == 0)
		a.app = NULL, a.line = 0;
	r = row_get_at(rb_obj_class(rb_tracearg_raised_exception(ta)), RSTRING_PTR(path),
	    FIX2INT(rb_tracearg_lineno(ta)), RSTRING_PTR(path), &a);
	if (r != NULL)
		r->count++;
}

static void
raise_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	trc_vm_hook_in();
	count_raise();
	trc_vm_hook_out();
}

/* ---- threads: their GVL turns, from the VM's thread events (threads.c) ---- */

static void
thread_row(VALUE th, uint64_t switches, uint64_t wait, uint64_t held, void *unused)
{
	struct row *r = row_get((uintptr_t)th, NULL, 0, NULL);

	if (r == NULL)
		return;
	r->count += switches;
	r->total += wait;
	r->self += held;
}

static void
thread_discard(VALUE th, uint64_t switches, uint64_t wait, uint64_t held, void *unused)
{
}

/* ---- start, stop, snapshot ---- */


static void
clear_rows(void)
{
	for (uint32_t i = 0; i < table.nused; i++) {
		struct row *r = &table.rows[table.used[i]];
		free(r->path);
		free(r->app_path);
		memset(r, 0, sizeof(*r));
		if (table.row_hist != NULL)
			table.row_hist[table.used[i]] = (struct hist){ { 0 } };
	}
	table.nused = 0;
	table.events = table.lost = 0;
	table.gcs = table.major_gcs = table.gc_ticks = 0;
	table.since = trc_clock_now();
}

/*
 * The table's memory: mapped, not malloc'd. Its 8 MiB would come from the heap once glibc has
 * raised its mmap threshold (after the first session freed one), calloc would then touch every
 * page, and the heap would keep them after the session: RSS grew by the table's size, for good.
 * Mapped pages are zero, touched only as rows are used, and all of them go back at the end.
 */
static void *
table_map(size_t n)
{
	/* cppcheck's posix.cfg wants fd >= 0, but MAP_ANONYMOUS takes -1 (and portably needs it). */
	/* cppcheck-suppress invalidFunctionArg */
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* cppcheck-suppress memleak ; the caller keeps it, and unmaps it (table_unmap) */
	return p == MAP_FAILED ? NULL : p;
}

static void
table_unmap(void *p, size_t n)
{
	if (p != NULL)
		munmap(p, n);
}

size_t
trc_top_table_bytes(void)
{
	/* A session maps calls or timed (and their durations), not both: the larger counts. */
	return (size_t)SLOTS * (sizeof(struct row) + sizeof(struct hist)) + TRC_TOP_MAX_ROWS * sizeof(uint32_t) +
	    (size_t)TRC_MAX_METHODS * (sizeof(uint32_t) + sizeof(struct timed) + sizeof(struct hist)) +
	    trc_paths_bytes();
}

/* The VM's own count of the objects it has made, every kind included. */
static size_t
allocations(void)
{
	static VALUE key;

	if (key == 0)
		key = ID2SYM(rb_intern("total_allocated_objects"));
	return rb_gc_stat(key);
}

/* The NEWOBJ hook on or off. */
static void
newobj_on(int on)
{
	if (on && !table.newobj) {
		/* A raw hook's type differs from rb_event_hook_func_t; the flag tells the VM. */
		rb_add_event_hook2((rb_event_hook_func_t)(void (*)(void))newobj_hook,
		    RUBY_INTERNAL_EVENT_NEWOBJ, Qnil, RUBY_EVENT_HOOK_FLAG_SAFE | RUBY_EVENT_HOOK_FLAG_RAW_ARG);
		table.newobj = 1;
	} else if (!on && table.newobj) {
		rb_remove_event_hook((rb_event_hook_func_t)(void (*)(void))newobj_hook);
		table.newobj = 0;
	}
}

/*
 * Sampling by time: the I/O thread opens and closes windows, and each edge runs here, at a
 * safe point. A hook that is off costs the VM nothing: allocations take their fast path again.
 * The VM counts every allocation itself, so the windows' share of the interval's allocations
 * is known exactly: the counts are scaled by it, not by the windows' share of the time, which
 * would undercount by as much as the hook slows allocation while it is on (a third, measured).
 */
void
trc_top_window(void)
{
	int open = __atomic_load_n(&windows.open, __ATOMIC_ACQUIRE);

	if (!table.armed || !table.by_time || open == table.newobj)
		return;
	if (open)
		table.alloc_mark = allocations();
	else
		table.alloc_seen += allocations() - table.alloc_mark;
	newobj_on(open);
}

/*
 * The I/O thread's side: windows of TRC_TOP_WINDOW_US, each after a gap drawn from
 * 0..2*(duty-1) windows (on average duty-1: the hook is on about 1/duty of the time), so that
 * they fall at no fixed phase of the app's own cycles. Each call is an edge: it flips the
 * window and says how long until the next one.
 */
uint64_t
trc_top_window_edge(void *unused)
{
	int open = !__atomic_load_n(&windows.open, __ATOMIC_ACQUIRE);

	(void)unused;
	__atomic_store_n(&windows.open, open, __ATOMIC_RELEASE);
	return open ? TRC_TOP_WINDOW_US : trc_xorshift(&windows.seed) % (2 * (uint64_t)(windows.duty - 1) *
	    TRC_TOP_WINDOW_US + 1);
}

int
trc_top_by_time(void)
{
	return table.by_time;
}

/*
 * This interval's allocations over those made inside its windows: what a count from the windows
 * is multiplied by (0: no window saw any). A window open now is split at this point. The
 * windows stand for the whole interval: a burst between two windows counts as their mix did.
 */
static double
interval_scale(void)
{
	size_t now = allocations(), all = now - table.alloc_base;
	double scale;

	if (table.newobj) {
		table.alloc_seen += now - table.alloc_mark;
		table.alloc_mark = now;
	}
	scale = table.alloc_seen ? (double)all / (double)table.alloc_seen : 0;
	table.alloc_base = now;
	table.alloc_seen = 0;
	return scale;
}

int
trc_top_start(int mode, int flags, uint32_t sample, const struct trc_scope *scope, const char **why)
{
	table.nused = 0;    /* before any failure: trc_top_stop() empties the first nused rows */
	table.armed = 0;
	table.scope = *scope;
	table.rows = table_map((size_t)SLOTS * sizeof(*table.rows));
	table.used = table_map(TRC_TOP_MAX_ROWS * sizeof(*table.used));
	*why = "out of memory for the table";
	if (table.rows == NULL || table.used == NULL)
		goto fail;
	table.mode = mode;
	table.flags = flags;
	table.by_time = (flags & TRC_TOP_BY_TIME) && sample > 1 && (modes[mode] & TRC_TOPM_ALLOC);
	table.sample = table.by_time ? 1 : sample;      /* only the allocation hook reads it */
	windows.open = 1;
	windows.duty = sample;
	windows.seed = (trc_clock_now() ^ 0x9E3779B97F4A7C15ull) | 1;
	table.seed = (trc_clock_now() ^ ((uint64_t)getpid() << 32) ^ 0x9E3779B97F4A7C15ull) | 1;
	table.countdown = table.weight = next_gap();
	table.wrapped = (modes[mode] & TRC_TOPM_METHOD) && !scope->all;
	table.gen = table.wrapped ? trc_wrap_generation() : 0;
	table.ncalled = 0;
	if (table.wrapped) {
		if (modes[mode] & TRC_TOPM_TIMED) {
			table.timed = table_map(TRC_MAX_METHODS * sizeof(*table.timed));
			table.timed_hist = table_map(TRC_MAX_METHODS * sizeof(*table.timed_hist));
		} else {
			table.calls = table_map(TRC_MAX_METHODS * sizeof(*table.calls));
		}
		table.called = table_map(TRC_MAX_METHODS * sizeof(*table.called));
		if ((table.calls == NULL && (table.timed == NULL || table.timed_hist == NULL)) || table.called == NULL)
			goto fail;
	}
	if ((modes[mode] & TRC_TOPM_METHOD) && (modes[mode] & TRC_TOPM_TIMED) &&
	    (table.row_hist = table_map((size_t)SLOTS * sizeof(*table.row_hist))) == NULL)
		goto fail;
	if ((flags & TRC_TOP_PATHS) && (modes[mode] & TRC_TOPM_METHOD) && (modes[mode] & TRC_TOPM_TIMED)) {
		*why = "out of memory for the table of call paths";
		if (trc_paths_start() < 0)
			goto fail;
		table.paths = 1;
	}
	if (modes[mode] & TRC_TOPM_THREAD) {
		if (trc_threads_watch(1) < 0) {
			if (errno != ENOSYS) {
				*why = "out of memory for the table";
				goto fail;
			}
			*why = "its Ruby has no thread events to count (Ruby 3.3 and later have them)";
			trc_top_stop();
			return -2;
		}
		table.threads = 1;
	}
	return 0;
fail:
	trc_top_stop();
	return -1;
}

const struct trc_scope *
trc_top_wrapped(uint64_t *gen)
{
	*gen = table.gen;
	return table.wrapped ? &table.scope : NULL;
}

void
trc_top_go(void)
{
	trc_clock_calibrate();
	for (unsigned i = 0; i < TRC_TOP_BUCKETS - 1; i++)
		table.bound_ticks[i] = trc_clock_ticks(bound_ns[i]);
	clear_rows();
	table.armed = 1;
	table.gc = (table.flags & TRC_TOP_GC) != 0;
	if (table.gc)
		trc_gc_watch(gc_ended);
	if (table.wrapped) {
		trc_wrap_live(table.gen, modes[table.mode] & TRC_TOPM_TIMED ? &timing : &counting);
		return;
	}
	if (modes[table.mode] & TRC_TOPM_METHOD) {
		if (modes[table.mode] & TRC_TOPM_TIMED) {
			table.global = RUBY_EVENT_CALL | RUBY_EVENT_C_CALL | RUBY_EVENT_RETURN | RUBY_EVENT_C_RETURN;
			rb_add_event_hook(time_hook, table.global, Qnil);
		} else {
			table.global = RUBY_EVENT_CALL | RUBY_EVENT_C_CALL;
			rb_add_event_hook(calls_hook, table.global, Qnil);
		}
	} else if (table.threads) {
		/* What came before the table was clear does not count. */
		trc_threads_fold(thread_discard, NULL);
		trc_threads_events();
	} else if (modes[table.mode] & TRC_TOPM_RAISE) {
		rb_add_event_hook(raise_hook, RUBY_EVENT_RAISE, Qnil);
		table.raise_hook = 1;
	} else if (table.by_time) {
		table.alloc_base = allocations();
		table.alloc_seen = 0;
	} else {
		newobj_on(1);
	}
}

void
trc_top_stop(void)
{
	table.armed = 0;
	if (table.threads)
		trc_threads_watch(0);
	table.threads = 0;
	if (table.paths)
		trc_paths_stop();
	table.paths = 0;
	if (table.gc)
		trc_gc_watch(NULL);
	table.gc = 0;
	if (table.wrapped)
		trc_wrap_live(0, NULL);
	table.wrapped = 0;
	if (table.global == (RUBY_EVENT_CALL | RUBY_EVENT_C_CALL))
		rb_remove_event_hook(calls_hook);
	else if (table.global)
		rb_remove_event_hook(time_hook);
	if (table.raise_hook)
		rb_remove_event_hook(raise_hook);
	newobj_on(0);
	table.by_time = 0;
	table.global = 0;
	table.raise_hook = 0;
	if (table.rows != NULL)
		clear_rows();
	table_unmap(table.rows, (size_t)SLOTS * sizeof(*table.rows));
	table_unmap(table.used, TRC_TOP_MAX_ROWS * sizeof(*table.used));
	table.rows = NULL;
	table.used = NULL;
	table_unmap(table.row_hist, (size_t)SLOTS * sizeof(*table.row_hist));
	table_unmap(table.timed_hist, TRC_MAX_METHODS * sizeof(*table.timed_hist));
	table.row_hist = NULL;
	table.timed_hist = NULL;
	table_unmap(table.calls, TRC_MAX_METHODS * sizeof(*table.calls));
	table_unmap(table.timed, TRC_MAX_METHODS * sizeof(*table.timed));
	table_unmap(table.called, TRC_MAX_METHODS * sizeof(*table.called));
	table.calls = NULL;
	table.timed = NULL;
	table.called = NULL;
	table.ncalled = 0;
	trc_scope_release(&table.scope);
}

/* A row's label: "Class#method" from the names table (no Ruby string per row), or a class's name. */
static void
label_of(const struct row *r, struct trc_label *l, VALUE *keep)
{
	const struct trc_method *m;

	*l = (struct trc_label){ .a = "", .na = 0 };
	if (modes[table.mode] & TRC_TOPM_METHOD) {
		m = trc_method_at((uint32_t)(r->what - 1));
		if (m->sep == 0) {
			l->a = m->name;
			l->na = m->name_len;
		} else {
			*l = (struct trc_label){ .a = m->klass_name, .na = m->klass_name_len, .sep = m->sep,
				.b = m->name, .nb = m->name_len };
		}
	} else if (modes[table.mode] & TRC_TOPM_THREAD) {
		/* The name it has now: one given after the first table would be lost in the entry's. */
		*keep = trc_thread_name_now((VALUE)r->what);
		if (*keep != Qnil) {
			l->a = RSTRING_PTR(*keep);
			l->na = (size_t)RSTRING_LEN(*keep);
		} else {
			const struct trc_thread *t = trc_thread_get((VALUE)r->what);

			l->a = t != NULL ? t->name : "?";
			l->na = strlen(l->a);
		}
	} else if (modes[table.mode] & TRC_TOPM_CLASS) {
		*keep = rb_class_path((VALUE)r->what);
		l->a = RSTRING_PTR(*keep);
		l->na = (size_t)RSTRING_LEN(*keep);
	}
}

static void
pack_row(msgpack_packer *pk, const struct row *r, double scale)
{
	int no_site = (modes[table.mode] & TRC_TOPM_NO_SITE) != 0;
	struct trc_label label;
	VALUE keep = Qnil;

	label_of(r, &label, &keep);
	trc_encode_top_row(pk, no_site ? "" : r->path, no_site ? 0 : r->line, &label,
	    scale < 0 ? r->count : (uint64_t)((double)r->count * scale + 0.5), trc_clock_dur_ns(r->total),
	    trc_clock_dur_ns(r->self), table.row_hist != NULL ? table.row_hist[r - table.rows].n : NULL, r->app_path,
	    r->app_line);
	RB_GC_GUARD(keep);
}

void
trc_top_pack(msgpack_packer *pk)
{
	uint32_t n = 0;
	/* Labels are made with the GVL held: the hooks cannot run, but they could allocate. */
	int was = table.armed;
	/* Sampled by time, each count stands for its share of all the interval's allocations. */
	uint64_t now = trc_clock_now();
	double scale = table.by_time ? interval_scale() : -1;
	struct trc_top_head head = {
		.elapsed_ns = trc_clock_dur_ns(now - table.since), .events = table.events, .lost = table.lost, .gcs = table.gcs,
		.major_gcs = table.major_gcs, .gc_ns = trc_clock_dur_ns(table.gc_ticks),
	};

	table.armed = 0;
	fold_calls();
	head.lost = table.lost;
	if (table.threads) {
		head.lost += trc_threads_fold(thread_row, NULL);
		head.events += trc_threads_events();
	}
	for (uint32_t i = 0; i < table.nused; i++)
		n += !table.rows[table.used[i]].excluded && table.rows[table.used[i]].count != 0;
	trc_encode_top(pk, &head, n);
	for (uint32_t i = 0; i < table.nused; i++) {
		const struct row *r = &table.rows[table.used[i]];
		if (!r->excluded && r->count != 0)
			pack_row(pk, r, scale);
	}
	if (table.paths)
		trc_paths_pack(pk, &table.scope);
	else
		msgpack_pack_array(pk, 0);
	clear_rows();
	table.armed = was;
}

int
trc_top_installed(void)
{
	return (table.global != 0) + table.raise_hook + table.newobj + table.threads + (table.gc && trc_gc_watching());
}

void
trc_top_mark(void)
{
	trc_scope_mark(&table.scope);
	trc_threads_mark();
	if (table.rows == NULL || !(modes[table.mode] & (TRC_TOPM_CLASS | TRC_TOPM_THREAD)))
		return;
	for (uint32_t i = 0; i < table.nused; i++)
		rb_gc_mark((VALUE)table.rows[table.used[i]].what);
}
