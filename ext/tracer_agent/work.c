/* work.c: a session's work, from start to stop: the ring, the hooks, the tables, the wrappers. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* sched_getaffinity, CPU_COUNT */
#endif
#include "work.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "encode.h"
#include "mem.h"
#include "names.h"
#include "pace.h"
#include "plan.h"
#include "sample.h"
#include "top.h"
#include "wrap.h"

#define RING_SIZE (16u << 20)
#define RING_MIN (1u << 20)
/*
 * Putting wrappers in place (plan.c): steps of at most STEP_NS, as far apart as pace.h says, so
 * that no request waits more than a step for the GVL. A program that waits for its tracer
 * before its first line (tracer --exec) gets no pause.
 */
#define STEP_NS (2ull * 1000 * 1000)
#define EAGER_STEP_NS (50ull * 1000 * 1000)
/*
 * --top's first counts go FIRST_TOP_US after the wrappers are in place, the next ones every
 * interval after that: an operator sees the first rows a quarter of a second after tracing
 * starts rather than an interval after (the tables add up from the start either way).
 */
#define FIRST_TOP_US 250000

/* The session's timers (trc_session_timer). */
enum {
	TIMER_STEP,             /* the next step of putting wrappers in place, or taking them away */
	TIMER_TOP,              /* --top: an interval is over */
	TIMER_WINDOW,           /* --top, sampled by time: a window opens or closes */
};

enum kind {
	KIND_NONE,
	KIND_TRACE,
	KIND_TOP,
	KIND_PROFILE,           /* --top profile: the sampler, and no wrapper */
};

/*
 * Several sessions run at once (session.h), but what they set up in the process is one of a
 * kind: a facility, taken by one session at a time, which the others are refused while it is
 * held. The wrappers facility is the plan's wrappers, the trace's and --top's hooks (the VM's
 * call, return, raise, allocation, GC and thread hooks), the method and thread tables, the
 * ring and the encoder's state: -m, -f, -s and every --top mode but profile, all built on the
 * same tables and one generation of wrappers. The sampler facility is sample.c's (--profile):
 * its own timers, signal and stacks, none of the above, so it runs beside the wrappers. What
 * takes no facility (-e, -i, backtraces, dumps: eval.c) runs beside anything.
 */
enum facility {
	FAC_WRAP,
	FAC_SAMPLE,
	FACILITIES,
};

struct work {
	struct trc_session *owner;      /* NULL: free */
	pid_t client_pid;       /* the owner's client, for a refusal */
	char what[48];          /* what it runs, for a refusal: "tracer --top calls" */
	int kind;               /* enum kind: what the session does */
	int running;            /* the hooks are on: STARTED was sent */
	int stepping;           /* wrappers are being put in place or taken away */
	int stopped;            /* trc_work_close ran: nothing more reaches the ring */
	int eager;              /* steps without pauses (tracer --exec) */
	int top_first;          /* the next --top interval is the first (top_gap) */
	uint64_t install_start, install_ns;     /* CLOCK_MONOTONIC ns (trc_plan_now) */
	uint64_t progress_at;   /* when the next TRC_MSG_PROGRESS is due */
	uint64_t top_ms;        /* --top: the interval */
	int has_ring;
	struct trc_ring ring;
	int has_cfg;            /* cfg holds a scope of its own */
	struct trc_trace_cfg cfg;
};

static struct work facilities[FACILITIES];
static struct trc_session *hurried;     /* trc_work_hurry's session */

static struct trc_work_record last;

/*
 * Pacing the steps (pace.h). At the end of each step the GVL side works out whether the app's
 * threads used the CPU since the end of the step before: the process's CPU time, less the
 * step's own and the I/O thread's (which the I/O thread reads for itself at each gap). Between
 * two step ends lies exactly one step, so the step in progress never counts as the app's. The
 * first version left a 1 ms gap to an idle app: the steps then ran back to back, the app's
 * threads never got the GVL, looked idle, and stayed starved.
 */
static struct {
	int idle;               /* the app left the CPU alone between the last two steps */
	int cpus;               /* the CPUs this process may run on */
	uint64_t spent_ns;      /* the steps' CPU time, this install or removal */
	uint64_t io_ns;         /* the I/O thread's CPU time, as it last read it */
	uint64_t end_wall, end_process, end_io;         /* GVL side: at the last step's end */
} pace;

/* I/O thread: the threads the machine runs or has ready right now, this one among them. */
static int
runnable(void)
{
	char buf[128];
	int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n > 0 ? trc_pace_runnable(buf, (size_t)n) : -1;
}

/* TIMER_STEP's gap, on the I/O thread. */
static uint64_t
step_gap(void *unused)
{
	(void)unused;
	__atomic_store_n(&pace.io_ns, trc_clock_read(CLOCK_THREAD_CPUTIME_ID), __ATOMIC_RELAXED);
	return trc_pace_gap_us(__atomic_load_n(&pace.idle, __ATOMIC_RELAXED), runnable(), pace.cpus,
	    __atomic_load_n(&pace.spent_ns, __ATOMIC_RELAXED) / 1000);
}

/* The plan's steps from now on, paced by step_gap. */
static void
pace_steps(struct trc_session *s)
{
	cpu_set_t set;

	pace.end_wall = 0;
	__atomic_store_n(&pace.spent_ns, 0, __ATOMIC_RELAXED);
	pace.cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
	__atomic_store_n(&pace.idle, 0, __ATOMIC_RELAXED);
	trc_session_timer(s, TIMER_STEP, 0, step_gap, NULL);
}

/* One step of the plan, until deadline (ns), and whether the app was idle since the last. */
static int
plan_step(uint64_t deadline)
{
	uint64_t cpu = trc_clock_read(CLOCK_THREAD_CPUTIME_ID);
	int done = trc_plan_step(deadline);
	uint64_t wall = trc_plan_now(), process = trc_clock_read(CLOCK_PROCESS_CPUTIME_ID);
	uint64_t io = __atomic_load_n(&pace.io_ns, __ATOMIC_RELAXED);

	cpu = trc_clock_read(CLOCK_THREAD_CPUTIME_ID) - cpu;
	__atomic_store_n(&pace.spent_ns, pace.spent_ns + cpu, __ATOMIC_RELAXED);
	if (pace.end_wall != 0) {
		int64_t app = (int64_t)(process - pace.end_process - cpu - (io - pace.end_io));
		__atomic_store_n(&pace.idle, app * 20 < (int64_t)(wall - pace.end_wall), __ATOMIC_RELAXED);
	}
	pace.end_wall = wall;
	pace.end_process = process;
	pace.end_io = io;
	return done;
}

/* The facility session s holds, or NULL. */
static struct work *
work_of(const struct trc_session *s)
{
	for (int i = 0; i < FACILITIES; i++)
		if (facilities[i].owner == s)
			return &facilities[i];
	return NULL;
}

int
trc_work_busy(const struct trc_session *s)
{
	return work_of(s) != NULL;
}

void
trc_work_hurry(struct trc_session *s)
{
	hurried = s;
}

/* What the other sessions may still do beside the holder of each facility. */
static const char *const beside[FACILITIES] = {
	[FAC_WRAP] = "--profile, -e, -i, backtraces and heap dumps",
	[FAC_SAMPLE] = "-m, -f, -s, --top, --metrics, -e, -i, backtraces and heap dumps",
};
static const char *const facility_name[FACILITIES] = {
	[FAC_WRAP] = "method wrappers and hooks are",
	[FAC_SAMPLE] = "sampler is",
};

/*
 * Facility f for session s, which runs what ("tracer -m"); NULL after replying an error when
 * another session holds it. Its state starts from nothing.
 */
static struct work *
take(struct trc_session *s, int f, const char *what)
{
	struct work *w = &facilities[f];
	char by[48];

	if (w->owner != NULL) {
		if (w->client_pid > 0)
			snprintf(by, sizeof(by), "pid %d", (int)w->client_pid);
		else
			snprintf(by, sizeof(by), "a client in another pid namespace");
		trc_reply_error(s, TRC_ERR_BUSY, "process %d: its %s in use by %s (%s); tracer can run %s beside it",
		    (int)getpid(), facility_name[f], by, w->what, beside[f]);
		return NULL;
	}
	memset(w, 0, sizeof(*w));
	w->owner = s;
	w->client_pid = trc_session_client(s);
	snprintf(w->what, sizeof(w->what), "%s", what);
	w->eager = hurried == s;
	return w;
}

static void
reply_started(struct trc_session *s, const struct work *w)
{
	msgpack_packer *pk = trc_reply_begin(s);
	trc_encode_started(pk, w->kind == KIND_PROFILE ? 0 : trc_plan_wrapped(), w->install_ns);
	trc_reply_end(s);
}

/* ---- putting wrappers in place, in steps ---- */

/*
 * The gap to --top's next counts, asked by the I/O thread (once as the timer is set, then after
 * each): the first is the shorter of FIRST_TOP_US and the interval.
 */
static uint64_t
top_gap(void *arg)
{
	struct work *w = arg;
	uint64_t every = w->top_ms * 1000;

	if (__atomic_exchange_n(&w->top_first, 0, __ATOMIC_RELAXED) && every > FIRST_TOP_US)
		return FIRST_TOP_US;
	return every;
}

/* The hooks go on: every wrapper is in place. */
static void
go(struct trc_session *s, struct work *w)
{
	w->running = 1;
	if (w->kind == KIND_TRACE) {
		trc_trace_go();
		reply_started(s, w);
		trc_session_started(s, &w->ring);
		return;
	}
	trc_top_go();
	__atomic_store_n(&w->top_first, 1, __ATOMIC_RELAXED);
	trc_session_timer(s, TIMER_TOP, 0, top_gap, w);
	if (trc_top_by_time())
		trc_session_timer(s, TIMER_WINDOW, 0, trc_top_window_edge, NULL);
	reply_started(s, w);
	trc_session_started(s, NULL);
}

/* Says how far the plan has come, every TRC_PROGRESS_MS. */
static void
progress(struct trc_session *s, struct work *w, int done)
{
	uint64_t now = trc_plan_now(), n, total;
	msgpack_packer *pk;
	int step;

	if (done || now < w->progress_at)
		return;
	w->progress_at = now + TRC_PROGRESS_MS * 1000000ull;
	trc_plan_progress(&step, &n, &total);
	pk = trc_reply_begin(s);
	trc_encode_progress(pk, step, n, total);
	trc_reply_end(s);
}

/* The end of trc_work_close, once every wrapper is gone: the I/O thread delivers the rest. */
static void
stopped(struct trc_session *s, struct work *w)
{
	uint64_t events = 0, lost = 0;

	if (w->has_cfg)
		trc_scope_release(&w->cfg.scope);
	w->has_cfg = 0;
	if (w->kind == KIND_TRACE && w->running)
		trc_trace_counts(&events, &lost);
	trc_session_finish(s, events, lost);
}

/* The next step of putting wrappers in place, or of taking them away. */
static void
step(struct trc_session *s, struct work *w)
{
	int eager = w->eager && !w->stopped;
	int done = plan_step(trc_plan_now() + (eager ? EAGER_STEP_NS : STEP_NS));

	progress(s, w, done);
	if (!done) {
		if (eager)
			trc_session_again(s, TIMER_STEP);
		return;
	}
	w->stepping = 0;
	trc_session_timer(s, TIMER_STEP, 0, NULL, NULL);
	if (w->stopped) {
		stopped(s, w);
	} else if (!w->running) {
		w->install_ns = trc_plan_now() - w->install_start;
		go(s, w);
	}
}

/* The plan has begun: its steps run from now on, then the hooks go on. */
static void
install(struct trc_session *s, struct work *w)
{
	w->install_start = trc_plan_now();
	w->progress_at = w->install_start + TRC_PROGRESS_MS * 1000000ull;
	w->stepping = 1;
	pace_steps(s);
	step(s, w);
}

/* ---- starting ---- */

/*
 * The event ring: 16 MiB, or as much as fits under the process's address-space limit (ulimit
 * -v), down to 1 MiB (a flood then loses more events, which the trace says); when not even that
 * fits, the session is refused and the app runs on as it was.
 */
static int
ring_init(struct trc_session *s, struct work *w)
{
	size_t room = trc_mem_room(), size = RING_SIZE;

	while (size > room && size > RING_MIN)
		size /= 2;
	if (size > room) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "process %d is %s its address-space limit (ulimit -v): "
		    "not tracing it, its own allocations come first", (int)getpid(), room == 0 ? "at" : "near");
		return -1;
	}
	if (trc_ring_init(&w->ring, size) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "process %d: cannot map a %zu MiB event buffer: %s",
		    (int)getpid(), size >> 20, strerror(errno));
		return -1;
	}
	w->has_ring = 1;
	return 0;
}

static void
reply_spec(struct trc_session *s, int i, const struct trc_spec_result *r)
{
	/* What could not be wrapped is said only when nothing of the spec could. */
	VALUE msg = r->matched > 0 ? r->note : r->why, skipped = r->skipped;
	const char *none = r->matched > 0 ? "" : "matched no method";
	msgpack_packer *pk = trc_reply_begin(s);

	trc_encode_spec(pk, i, r->matched, r->pending, NIL_P(msg) ? none : RSTRING_PTR(msg),
	    NIL_P(msg) ? strlen(none) : (size_t)RSTRING_LEN(msg), NIL_P(skipped) ? "" : RSTRING_PTR(skipped),
	    NIL_P(skipped) ? 0 : (size_t)RSTRING_LEN(skipped));
	trc_reply_end(s);
}

/* What a trace runs, as its tracer's options: for a refusal. */
static const char *
trace_what(const struct trc_trace_cfg *c)
{
	if (c->flags & TRC_TRACE_FIREHOSE)
		return "tracer -f";
	if (c->flags & TRC_TRACE_SLOW)
		return "tracer -s";
	return "tracer -m";
}

static void clear(struct work *w);

int
trc_work_trace(struct trc_session *s, const struct trc_trace_cfg *cfg)
{
	struct work *w = take(s, FAC_WRAP, trace_what(cfg));
	struct trc_trace_cfg *c;
	struct trc_spec_result results[TRC_MAX_SPECS];
	uint64_t gen;
	int scoped;

	if (w == NULL) {
		struct trc_scope scope = cfg->scope;
		trc_scope_release(&scope);
		return 0;
	}
	c = &w->cfg;
	*c = *cfg;
	w->has_cfg = 1;
	w->kind = KIND_TRACE;
	if (ring_init(s, w) < 0) {
		clear(w);
		return -1;
	}
	/* Firehose, and slow calls without specs: the app's methods, unless every call is wanted. */
	scoped = ((c->flags & TRC_TRACE_FIREHOSE) || c->nspecs == 0) && !c->scope.all;
	gen = trc_trace_prepare(c, &w->ring, trc_session_wake_fd(s));
	trc_plan_begin(c->specs, c->nspecs, scoped ? &c->scope : NULL, gen, results);
	for (int i = 0; i < c->nspecs; i++)
		reply_spec(s, i, &results[i]);
	RB_GC_GUARD(results[0].why);
	install(s, w);
	return 0;
}

/* --top profile: the sampler runs at once; nothing is put in place. */
static int
profile(struct trc_session *s, uint64_t interval_ms, int flags, uint32_t hz, uint32_t cap)
{
	struct work *w = take(s, FAC_SAMPLE, "tracer --profile");
	const char *why;

	if (w == NULL)
		return -1;
	if (trc_sample_start(flags & TRC_TOP_WALL ? TRC_SAMPLE_WALL : TRC_SAMPLE_CPU, hz, interval_ms, cap,
	    &why) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "process %d: %s", (int)getpid(), why);
		clear(w);
		return -1;
	}
	w->kind = KIND_PROFILE;
	w->top_ms = interval_ms;
	w->running = 1;
	__atomic_store_n(&w->top_first, 1, __ATOMIC_RELAXED);
	trc_session_timer(s, TIMER_TOP, 0, top_gap, w);
	trc_session_quiet(s);
	reply_started(s, w);
	trc_session_started(s, NULL);
	return 0;
}

/* --top MODE's name, for a refusal. */
static const char *
top_what(int mode)
{
	switch (mode) {
#define TRC_X(NAME, value, name, flags, label, key, count, total, self, help) \
	case TRC_TOP_##NAME: return "tracer --top " name;
	TRC_TOP_MODES(TRC_X)
#undef TRC_X
	default: return "tracer --top";
	}
}

int
trc_work_top(struct trc_session *s, int mode, uint64_t interval_ms, int flags, uint32_t sample,
    uint32_t cap, struct trc_scope *scope)
{
	const struct trc_scope *wrapped;
	const char *why;
	struct work *w;
	uint64_t gen;
	int rc;

	if (mode == TRC_TOP_PROFILE) {
		trc_scope_release(scope);
		return profile(s, interval_ms, flags, sample, cap);
	}
	if ((w = take(s, FAC_WRAP, top_what(mode))) == NULL) {
		trc_scope_release(scope);
		return -1;
	}
	if (trc_mem_room() < trc_top_table_bytes()) {
		trc_scope_release(scope);
		clear(w);
		trc_reply_error(s, TRC_ERR_INTERNAL, "process %d is near its address-space limit (ulimit -v): "
		    "not counting in it, its own allocations come first", (int)getpid());
		return -1;
	}
	if ((rc = trc_top_start(mode, flags, sample, scope, &why)) < 0) {
		clear(w);
		trc_reply_error(s, rc == -2 ? TRC_ERR_UNSUPPORTED : TRC_ERR_INTERNAL, "process %d: %s", (int)getpid(), why);
		return -1;
	}
	w->kind = KIND_TOP;
	w->top_ms = interval_ms;
	if ((wrapped = trc_top_wrapped(&gen)) != NULL)
		trc_plan_begin(NULL, 0, wrapped, gen, NULL);
	install(s, w);
	return 0;
}

/* ---- stopping ---- */

static void
send_counts(struct trc_session *s, const struct work *w)
{
	msgpack_packer *pk;

	if (w->kind == KIND_PROFILE) {
		/* An interval a message; at least one, so that the client hears every interval. */
		do {
			pk = trc_reply_begin(s);
			trc_sample_pack(pk);
			trc_reply_end(s);
		} while (trc_sample_more());
		return;
	}
	pk = trc_reply_begin(s);
	trc_top_pack(pk);
	trc_reply_end(s);
}

void
trc_work_timer(struct trc_session *s, int id)
{
	struct work *w = work_of(s);

	if (w == NULL)
		return;
	switch (id) {
	case TIMER_STEP:
		if (w->stepping)
			step(s, w);
		break;
	case TIMER_TOP:
		if ((w->kind == KIND_TOP || w->kind == KIND_PROFILE) && w->running && !w->stopped)
			send_counts(s, w);
		break;
	case TIMER_WINDOW:
		if (w->kind == KIND_TOP && w->running && !w->stopped)
			trc_top_window();
		break;
	default:
		break;
	}
}

/*
 * Removes the hooks; after it the ring gets nothing more. The wrappers stop reporting at once,
 * and are taken away in steps, after which the I/O thread delivers the rest; a process that
 * exits leaves them as they are, reporting nothing (and is told so even in the middle of a
 * detach's steps).
 */
void
trc_work_close(struct trc_session *s, int how)
{
	struct work *w = work_of(s);

	/* Nothing of its own in place (evals, dumps): the I/O thread may deliver the rest now. */
	if (w == NULL) {
		trc_session_finish(s, 0, 0);
		return;
	}
	if (w->stopped && how != TRC_CLOSE_EXIT)
		return;
	if (!w->stopped) {
		w->stopped = 1;
		if (w->kind == KIND_TRACE)
			trc_trace_stop();
		if (w->kind == KIND_PROFILE) {
			/* The sampler stops first: the last message then holds every sample taken. */
			trc_sample_stop();
			if (how == TRC_CLOSE_DETACH || how == TRC_CLOSE_EXIT)
				send_counts(s, w);
			trc_sample_release();
			trc_session_timer(s, TIMER_TOP, 0, NULL, NULL);
			/* No wrapper of its own: the other facility's are not its to take away. */
			stopped(s, w);
			return;
		}
		if (w->kind == KIND_TOP) {
			/*
			 * The counts of the last, partial interval, then the hooks off; also as the
			 * process exits, which is how a program tracer --exec started ends its counting.
			 */
			if (w->running && (how == TRC_CLOSE_DETACH || how == TRC_CLOSE_EXIT))
				send_counts(s, w);
			trc_top_stop();
			trc_session_timer(s, TIMER_TOP, 0, NULL, NULL);
			trc_session_timer(s, TIMER_WINDOW, 0, NULL, NULL);
		}
		trc_plan_end();
	}
	if (w->kind == KIND_PROFILE || how == TRC_CLOSE_EXIT || plan_step(trc_plan_now() + STEP_NS)) {
		w->stepping = 0;
		trc_session_timer(s, TIMER_STEP, 0, NULL, NULL);
		stopped(s, w);
		return;
	}
	w->stepping = 1;
	pace_steps(s);
}

int
trc_work_hooks(void)
{
	return trc_trace_hooks() + trc_top_installed() + trc_wrapped() + trc_sample_running();
}

/* Everything the facility held goes, and it is free: the next session starts from nothing. */
static void
clear(struct work *w)
{
	if (w->has_cfg)
		trc_scope_release(&w->cfg.scope);
	if (w->has_ring)
		trc_ring_release(&w->ring);
	/* The tables are the wrappers': the sampler's stacks and names are its own. */
	if (w == &facilities[FAC_WRAP])
		trc_names_reset();
	memset(w, 0, sizeof(*w));
}

/* What is still in place of what facility w put in place. */
static int
hooks_of(const struct work *w)
{
	if (w == NULL)
		return 0;
	if (w == &facilities[FAC_SAMPLE])
		return trc_sample_running();
	return trc_trace_hooks() + trc_top_installed() + trc_wrapped();
}

void
trc_work_end(struct trc_session *s)
{
	struct work *w = work_of(s);

	last.client_pid = trc_session_client(s);
	last.how = trc_session_how(s);
	trc_session_totals(s, &last.events, &last.lost);
	if (hurried == s)
		hurried = NULL;
	if (w != NULL)
		clear(w);
	last.hooks_left = hooks_of(w);
}

const struct trc_work_record *
trc_work_last(void)
{
	return &last;
}

void
trc_work_forked(void)
{
	trc_sample_forked();
	trc_trace_disarm();
	trc_wrap_live(0, NULL); /* the parent's wrappers, this child's too, report nothing */
}

void
trc_work_forget(void)
{
	struct work *wrap = &facilities[FAC_WRAP], *sample = &facilities[FAC_SAMPLE];

	if (wrap->kind == KIND_TRACE)
		trc_trace_stop();
	if (wrap->kind == KIND_TOP)
		trc_top_stop();
	if (sample->kind == KIND_PROFILE) {
		trc_sample_stop();
		trc_sample_release();
	}
	/* The parent's wrappers are this child's too: all of them go now. */
	trc_plan_end();
	while (!trc_plan_step(trc_plan_now() + STEP_NS))
		;
	clear(wrap);
	clear(sample);
	hurried = NULL;
}

void
trc_work_mark(void)
{
	const struct work *w = &facilities[FAC_WRAP];
	const struct trc_trace_cfg *c = &w->cfg;

	trc_sample_mark();
	if (!w->has_cfg)
		return;
	trc_scope_mark(&c->scope);
	for (int i = 0; i < c->nspecs; i++) {
		rb_gc_mark(c->specs[i].klass);
		rb_gc_mark(c->specs[i].name);
		for (int j = 0; j < c->specs[i].nexpr; j++)
			rb_gc_mark(c->specs[i].exprs[j]);
	}
}
