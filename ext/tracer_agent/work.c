/* work.c: a session's work, from start to stop: the ring, the hooks, the tables, the wrappers. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* sched_getaffinity, CPU_COUNT */
#endif
#include "work.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
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

static struct {
	int kind;               /* enum kind: what the session does */
	int running;            /* the hooks are on: STARTED was sent */
	int stepping;           /* wrappers are being put in place or taken away */
	int stopped;            /* trc_work_close ran: nothing more reaches the ring */
	int eager;              /* steps without pauses (tracer --exec) */
	uint64_t install_start, install_ns;     /* CLOCK_MONOTONIC ns (trc_plan_now) */
	uint64_t progress_at;   /* when the next TRC_MSG_PROGRESS is due */
	uint64_t top_ms;        /* --top: the interval */
	int has_ring;
	struct trc_ring ring;
	int has_cfg;            /* cfg holds a scope of its own */
	struct trc_trace_cfg cfg;
} work;

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

int
trc_work_busy(void)
{
	return work.kind != KIND_NONE;
}

void
trc_work_hurry(void)
{
	work.eager = 1;
}

static void
reply_started(struct trc_session *s)
{
	msgpack_packer *pk = trc_reply_begin(s);
	trc_encode_started(pk, trc_plan_wrapped(), work.install_ns);
	trc_reply_end(s);
}

/* ---- putting wrappers in place, in steps ---- */

/*
 * The gap to --top's next counts, asked by the I/O thread (once as the timer is set, then after
 * each): the first is the shorter of FIRST_TOP_US and the interval.
 */
static int top_first;

static uint64_t
top_gap(void *unused)
{
	uint64_t every = work.top_ms * 1000;

	(void)unused;
	if (__atomic_exchange_n(&top_first, 0, __ATOMIC_RELAXED) && every > FIRST_TOP_US)
		return FIRST_TOP_US;
	return every;
}

/* The hooks go on: every wrapper is in place. */
static void
go(struct trc_session *s)
{
	work.running = 1;
	if (work.kind == KIND_TRACE) {
		trc_trace_go();
		reply_started(s);
		trc_session_started(s, &work.ring);
		return;
	}
	trc_top_go();
	__atomic_store_n(&top_first, 1, __ATOMIC_RELAXED);
	trc_session_timer(s, TIMER_TOP, 0, top_gap, NULL);
	if (trc_top_by_time())
		trc_session_timer(s, TIMER_WINDOW, 0, trc_top_window_edge, NULL);
	reply_started(s);
	trc_session_started(s, NULL);
}

/* Says how far the plan has come, every TRC_PROGRESS_MS. */
static void
progress(struct trc_session *s, int done)
{
	uint64_t now = trc_plan_now(), n, total;
	msgpack_packer *pk;
	int step;

	if (done || now < work.progress_at)
		return;
	work.progress_at = now + TRC_PROGRESS_MS * 1000000ull;
	trc_plan_progress(&step, &n, &total);
	pk = trc_reply_begin(s);
	trc_encode_progress(pk, step, n, total);
	trc_reply_end(s);
}

/* The end of trc_work_close, once every wrapper is gone: the I/O thread delivers the rest. */
static void
stopped(struct trc_session *s)
{
	uint64_t events = 0, lost = 0;

	if (work.has_cfg)
		trc_scope_release(&work.cfg.scope);
	work.has_cfg = 0;
	if (work.kind == KIND_TRACE && work.running)
		trc_trace_counts(&events, &lost);
	trc_session_finish(s, events, lost);
}

/* The next step of putting wrappers in place, or of taking them away. */
static void
step(struct trc_session *s)
{
	int eager = work.eager && !work.stopped;
	int done = plan_step(trc_plan_now() + (eager ? EAGER_STEP_NS : STEP_NS));

	progress(s, done);
	if (!done) {
		if (eager)
			trc_session_again(s, TIMER_STEP);
		return;
	}
	work.stepping = 0;
	trc_session_timer(s, TIMER_STEP, 0, NULL, NULL);
	if (work.stopped) {
		stopped(s);
	} else if (!work.running) {
		work.install_ns = trc_plan_now() - work.install_start;
		go(s);
	}
}

/* The plan has begun: its steps run from now on, then the hooks go on. */
static void
install(struct trc_session *s)
{
	work.install_start = trc_plan_now();
	work.progress_at = work.install_start + TRC_PROGRESS_MS * 1000000ull;
	work.stepping = 1;
	pace_steps(s);
	step(s);
}

/* ---- starting ---- */

/*
 * The event ring: 16 MiB, or as much as fits under the process's address-space limit (ulimit
 * -v), down to 1 MiB (a flood then loses more events, which the trace says); when not even that
 * fits, the session is refused and the app runs on as it was.
 */
static int
ring_init(struct trc_session *s)
{
	size_t room = trc_mem_room(), size = RING_SIZE;

	while (size > room && size > RING_MIN)
		size /= 2;
	if (size > room) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "process %d is %s its address-space limit (ulimit -v): "
		    "not tracing it, its own allocations come first", (int)getpid(), room == 0 ? "at" : "near");
		return -1;
	}
	if (trc_ring_init(&work.ring, size) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "process %d: cannot map a %zu MiB event buffer: %s",
		    (int)getpid(), size >> 20, strerror(errno));
		return -1;
	}
	work.has_ring = 1;
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

int
trc_work_trace(struct trc_session *s, const struct trc_trace_cfg *cfg)
{
	struct trc_trace_cfg *c = &work.cfg;
	struct trc_spec_result results[TRC_MAX_SPECS];
	uint64_t gen;
	int scoped;

	*c = *cfg;
	work.has_cfg = 1;
	work.kind = KIND_TRACE;
	if (ring_init(s) < 0)
		return -1;
	/* Firehose, and slow calls without specs: the app's methods, unless every call is wanted. */
	scoped = ((c->flags & TRC_TRACE_FIREHOSE) || c->nspecs == 0) && !c->scope.all;
	gen = trc_trace_prepare(c, &work.ring, trc_session_wake_fd(s));
	trc_plan_begin(c->specs, c->nspecs, scoped ? &c->scope : NULL, gen, results);
	for (int i = 0; i < c->nspecs; i++)
		reply_spec(s, i, &results[i]);
	RB_GC_GUARD(results[0].why);
	install(s);
	return 0;
}

/* --top profile: the sampler runs at once; nothing is put in place. */
static int
profile(struct trc_session *s, uint64_t interval_ms, int flags, uint32_t hz, uint32_t cap)
{
	const char *why;

	if (trc_sample_start(flags & TRC_TOP_WALL ? TRC_SAMPLE_WALL : TRC_SAMPLE_CPU, hz, interval_ms, cap,
	    &why) < 0) {
		trc_reply_error(s, TRC_ERR_INTERNAL, "process %d: %s", (int)getpid(), why);
		return -1;
	}
	work.kind = KIND_PROFILE;
	work.top_ms = interval_ms;
	work.running = 1;
	__atomic_store_n(&top_first, 1, __ATOMIC_RELAXED);
	trc_session_timer(s, TIMER_TOP, 0, top_gap, NULL);
	trc_session_quiet(s);
	reply_started(s);
	trc_session_started(s, NULL);
	return 0;
}

int
trc_work_top(struct trc_session *s, int mode, uint64_t interval_ms, int flags, uint32_t sample,
    uint32_t cap, struct trc_scope *scope)
{
	const struct trc_scope *wrapped;
	const char *why;
	uint64_t gen;
	int rc;

	if (mode == TRC_TOP_PROFILE) {
		trc_scope_release(scope);
		return profile(s, interval_ms, flags, sample, cap);
	}

	if (trc_mem_room() < trc_top_table_bytes()) {
		trc_scope_release(scope);
		trc_reply_error(s, TRC_ERR_INTERNAL, "process %d is near its address-space limit (ulimit -v): "
		    "not counting in it, its own allocations come first", (int)getpid());
		return -1;
	}
	if ((rc = trc_top_start(mode, flags, sample, scope, &why)) < 0) {
		trc_reply_error(s, rc == -2 ? TRC_ERR_UNSUPPORTED : TRC_ERR_INTERNAL, "process %d: %s", (int)getpid(), why);
		return -1;
	}
	work.kind = KIND_TOP;
	work.top_ms = interval_ms;
	if ((wrapped = trc_top_wrapped(&gen)) != NULL)
		trc_plan_begin(NULL, 0, wrapped, gen, NULL);
	install(s);
	return 0;
}

/* ---- stopping ---- */

static void
send_counts(struct trc_session *s)
{
	msgpack_packer *pk;

	if (work.kind == KIND_PROFILE) {
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
	switch (id) {
	case TIMER_STEP:
		if (work.stepping)
			step(s);
		break;
	case TIMER_TOP:
		if ((work.kind == KIND_TOP || work.kind == KIND_PROFILE) && work.running && !work.stopped)
			send_counts(s);
		break;
	case TIMER_WINDOW:
		if (work.kind == KIND_TOP && work.running && !work.stopped)
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
	if (work.stopped && how != TRC_CLOSE_EXIT)
		return;
	if (!work.stopped) {
		work.stopped = 1;
		if (work.kind == KIND_TRACE)
			trc_trace_stop();
		if (work.kind == KIND_PROFILE) {
			/* The sampler stops first: the last message then holds every sample taken. */
			trc_sample_stop();
			if (how == TRC_CLOSE_DETACH || how == TRC_CLOSE_EXIT)
				send_counts(s);
			trc_sample_release();
			trc_session_timer(s, TIMER_TOP, 0, NULL, NULL);
		}
		if (work.kind == KIND_TOP) {
			/*
			 * The counts of the last, partial interval, then the hooks off; also as the
			 * process exits, which is how a program tracer --exec started ends its counting.
			 */
			if (work.running && (how == TRC_CLOSE_DETACH || how == TRC_CLOSE_EXIT))
				send_counts(s);
			trc_top_stop();
			trc_session_timer(s, TIMER_TOP, 0, NULL, NULL);
			trc_session_timer(s, TIMER_WINDOW, 0, NULL, NULL);
		}
		trc_plan_end();
	}
	if (how == TRC_CLOSE_EXIT || plan_step(trc_plan_now() + STEP_NS)) {
		work.stepping = 0;
		trc_session_timer(s, TIMER_STEP, 0, NULL, NULL);
		stopped(s);
		return;
	}
	work.stepping = 1;
	pace_steps(s);
}

int
trc_work_hooks(void)
{
	return trc_trace_hooks() + trc_top_installed() + trc_wrapped() + trc_sample_running();
}

/* Everything the session held goes; the next one starts from nothing. */
static void
clear(void)
{
	if (work.has_cfg)
		trc_scope_release(&work.cfg.scope);
	if (work.has_ring)
		trc_ring_release(&work.ring);
	trc_names_reset();
	memset(&work, 0, sizeof(work));
}

void
trc_work_end(struct trc_session *s)
{
	last.client_pid = trc_session_client(s);
	last.how = trc_session_how(s);
	trc_session_totals(s, &last.events, &last.lost);
	clear();
	last.hooks_left = trc_work_hooks();
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
	if (work.kind == KIND_TRACE)
		trc_trace_stop();
	if (work.kind == KIND_TOP)
		trc_top_stop();
	if (work.kind == KIND_PROFILE) {
		trc_sample_stop();
		trc_sample_release();
	}
	/* The parent's wrappers are this child's too: all of them go now. */
	trc_plan_end();
	while (!trc_plan_step(trc_plan_now() + STEP_NS))
		;
	clear();
}

void
trc_work_mark(void)
{
	const struct trc_trace_cfg *c = &work.cfg;

	trc_sample_mark();
	if (!work.has_cfg)
		return;
	trc_scope_mark(&c->scope);
	for (int i = 0; i < c->nspecs; i++) {
		rb_gc_mark(c->specs[i].klass);
		rb_gc_mark(c->specs[i].name);
		for (int j = 0; j < c->specs[i].nexpr; j++)
			rb_gc_mark(c->specs[i].exprs[j]);
	}
}
