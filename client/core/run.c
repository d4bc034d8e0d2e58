/* run.c: the run loop: one session per target on a libev loop, signals, --ps rescans, --exec, the outcome. */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <ev.h>

#include "agentfile.h"
#include "compress.h"
#include "exec.h"
#include "flame.h"
#include "httpd.h"
#include "live.h"
#include "metrics.h"
#include "outfile.h"
#include "output.h"
#include "progress.h"
#include "proc.h"
#include "profile_export.h"
#include "repl.h"
#include "top_pprof.h"
#include "trace.h"
#include "xmalloc.h"

#define DEFAULT_RESCAN 1.0      /* seconds between --ps's looks for new processes, but --top's */
#define DEFAULT_RESET 300.0
#define END_RECHECK 0.25       /* seconds: --duration, not yet begun, looks again (on_end) */

static const char *
tmpdir(void)
{
	const char *t = getenv("TMPDIR");

	return t != NULL && *t != '\0' ? t : "/tmp";
}

/*
 * A dump's file: FILE (absolute: cli.c made it so), or $TMPDIR/tracer-WHAT-PID-DATE-TIME.json.
 * The client makes the file itself (newfile.c): the path only says where, in the messages,
 * whatever directory the target runs in.
 */
static char *
dump_path(const char *file, const char *what, pid_t pid)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;

	if (file != NULL)
		return xstrdup(file);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime_r(&now, &tm));
	return xasprintf("%s/tracer-%s-%d-%s.json", tmpdir(), what, (int)pid, stamp);
}

/* What a session's eval sends: the code, a dump's path, the frames asked for, or "". */
static char *
eval_text(const struct trc_run_opts *o, pid_t pid)
{
	switch (o->mode) {
	case TRC_MODE_EVAL:
		return xstrdup(o->eval);
	case TRC_MODE_HEAPDUMP:
		return dump_path(o->heapdump_path, "heap", pid);
	case TRC_MODE_SHAPESDUMP:
		return dump_path(o->shapesdump_path, "shapes", pid);
	case TRC_MODE_BACKTRACES:
	case TRC_MODE_BACKTRACE:
		return o->frames > 0 ? xasprintf("%u", o->frames) : xstrdup("");
	default:
		return xstrdup("");
	}
}

/* A failure before the loop runs: said, and the run's exit code. */
static int __attribute__((format(printf, 2, 3)))
setup_failed(int code, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("tracer: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

/*
 * -o FILE.gz, FILE.zst: every byte is compressed on its way to the file. With --append the
 * new stream is one more gzip member or zstd frame after those already there, which gzip -dc
 * and zstd -dc read on as one text. A pprof profile is gzipped whatever the file's name, as
 * its format says (cli.c refuses FILE.zst for it). Returns 0, or -1 with errno.
 */
static int
compress_output(struct trc_output *out, const struct trc_run_opts *o)
{
	enum trc_compression kind = o->output ? trc_compression_of(o->output) : TRC_COMPRESS_NONE;
	struct trc_codec codec;

	if (o->format == TRC_FORMAT_PPROF)
		kind = TRC_COMPRESS_GZIP;

	if (trc_compress_codec(kind, &codec) < 0)
		return -1;
	trc_output_set_codec(out, codec);
	return 0;
}

/* The running client: the shared output, the job, one session per pid, the loop. */
struct run {
	const struct trc_run_opts *o;
	struct ev_loop *loop;
	struct trc_output out;
	struct trc_job job;
	struct trc_session_cbs cbs;
	struct trc_session **sessions;  /* in order of start; finished ones stay */
	bool *found;                    /* per session: --ps found it (-p did not name it) */
	size_t nsessions, cap, running;
	struct trc_ps *ps;              /* --ps, tracing or --top: looks for new processes */
	ev_timer rescan_w, end_w;       /* rescans; --duration for them all */
	bool stopping;                  /* stop_all() ran: no new session, the loop ends */
	bool worked;                    /* a target was traced, or answered */
	bool begun;                     /* --ps: --duration counts, every process found was traced or given up */
	bool specs_checked;             /* check_specs() has judged the -m specs */
	enum trc_exit churn;            /* the worst outcome of --ps processes that went away */
	int interrupts;
	bool output_failed;
	enum trc_exit code;
	ev_signal signal_w[3];
	ev_prepare flush_w;
	ev_timer hold_w;                /* wakes the loop for lines a printer holds (trace.h) */
	struct trc_top *top;            /* --top: the table, and its live view */
	struct trc_profile profile;     /* --top profile: every target's stacks */
	struct trc_live *live;          /* none with --format pprof: the table is written at the end */
	ev_tstamp top_start;            /* --top --format pprof: when the sessions started */
	struct trc_httpd *httpd;        /* --metrics: the table served instead of shown */
	struct trc_metrics *metrics;    /* ...a table per target, labelled */
	struct trc_export *export;      /* --format other than text */
	/* --exec: the program, which the run waits for; --wait; the end of its connections */
	bool execing;
	bool exec_agent;                /* tracer found an agent to preload, not left to a gem */
	struct trc_exec exec;
	ev_timer wait_w, grace_w;
	struct trc_repl *repl;          /* -i */
	char *spool_dir;                /* tracing to a file: where its scratch files go (spool.h) */
	bool refused;                   /* a process's Ruby could not do the mode: said, and ending */
	struct trc_outfile file;        /* -o FILE */
};

/*
 * Whether the loop goes on with no session running: --ps waits for new processes until
 * stopped, --exec for its program to end (connecting again after an exec, maybe).
 */
static bool
waits_for_more(const struct run *r)
{
	if (r->execing)
		return !r->exec.exited;
	return r->ps != NULL && !r->stopping;
}

/* An error of the run, under the trace; held with the notes while a screen is up. */
static void __attribute__((format(printf, 2, 3)))
say_error(struct run *r, const char *fmt, ...)
{
	struct trc_buf b;
	va_list ap;

	trc_buf_init(&b);
	trc_buf_adds(&b, "tracer: ");
	va_start(ap, fmt);
	trc_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	trc_buf_addc(&b, '\n');
	trc_output_flush(&r->out);
	if (r->out.err_fd < 0)
		trc_buf_add(&r->out.err, b.data, b.len);
	else
		fwrite(b.data, 1, b.len, stderr);
	trc_buf_release(&b);
}

static void
stop_all(struct run *r, enum trc_stop_reason why)
{
	r->stopping = true;
	ev_timer_stop(r->loop, &r->rescan_w);
	ev_timer_stop(r->loop, &r->end_w);
	if (r->execing) {
		ev_timer_stop(r->loop, &r->wait_w);
		trc_exec_stop_listening(&r->exec);
	}
	for (size_t i = 0; i < r->nsessions; i++)
		trc_session_stop(r->sessions[i], why);
	if (r->running == 0 && !waits_for_more(r))
		ev_break(r->loop, EVBREAK_ALL);
}

/*
 * What a changing set of processes brings, and no error of the run: a process --ps found went
 * away (before or while attached), another client traces it, or the run stopped before it
 * answered. Its message becomes a note, and counts only if nothing else could be traced.
 */
static bool
is_churn(const struct run *r, const struct trc_session *s, size_t i)
{
	enum trc_exit st = trc_session_status(s);

	if (!r->found[i] || st == TRC_EXIT_OK)
		return false;
	return st == TRC_EXIT_EXITED || trc_session_busy(s) ||
	       (r->stopping && !trc_session_traced(s)) ||
	       trc_proc_check(trc_session_pid(s)) == TRC_PROC_GONE;
}

static size_t
session_index(const struct run *r, const struct trc_session *s)
{
	size_t i = 0;

	while (i < r->nsessions && r->sessions[i] != s)
		i++;
	return i;
}

/*
 * -m: once every target so far has answered (or ended), the specs that matched nothing in
 * any are said; when no spec matched anything, there is nothing to trace: the run ends with 1.
 */
static void
check_specs(struct run *r)
{
	const struct trc_job *j = &r->job;
	size_t traced = 0, unmatched = 0;
	struct trc_buf names;

	/* --exec: the program defines what it runs as it goes, and runs on regardless. */
	if (r->specs_checked || j->mode != TRC_MODE_TRACE || j->nspecs == 0 || j->exec)
		return;
	for (size_t i = 0; i < r->nsessions; i++) {
		if (!trc_session_traced(r->sessions[i]) && !trc_session_finished(r->sessions[i]))
			return;
		traced += trc_session_traced(r->sessions[i]);
	}
	if (traced == 0)
		return;
	r->specs_checked = true;
	trc_buf_init(&names);
	for (size_t k = 0; k < j->nspecs; k++) {
		bool hit = false;

		for (size_t i = 0; i < r->nsessions && !hit; i++)
			hit = trc_session_spec_matched(r->sessions[i], k);
		if (!hit)
			trc_buf_addf(&names, "%s%s", unmatched++ ? ", " : "", j->specs[k].text);
	}
	trc_buf_addc(&names, '\0');
	if (unmatched == j->nspecs) {
		if (traced == 1)
			say_error(r, "no method matches -m %s in process %d", names.data,
				  (int)trc_session_pid(r->sessions[0]));
		else
			say_error(r, "no method matches -m %s in any of the %zu processes", names.data,
				  traced);
		if (r->code < TRC_EXIT_ERROR)
			r->code = TRC_EXIT_ERROR;
		stop_all(r, TRC_STOP_END);
	} else if (unmatched > 0 && traced > 1) {
		trc_output_note(&r->out, "no method matches %s in any of the %zu processes", names.data,
				traced);
	}
	trc_buf_release(&names);
}

/*
 * --duration with --ps counts from when every process found so far is traced (or was given
 * up: gone, refused, no answer within --timeout): putting the wrappers of an app's every
 * method in place takes a while, and not the same in each worker. A fresh Puma worker of Ruby
 * 3.3 first finishes the sweep its preloader's last GC left, some 300 ms in one step, and one
 * that ran a GC of its own does not: counted from the first in place, a short --duration ended
 * before three workers of four were traced. Processes found later share the same end.
 */
static void
begin_duration(struct run *r)
{
	r->begun = true;
	if (r->ps == NULL || r->stopping || r->o->duration <= 0)
		return;
	ev_timer_stop(r->loop, &r->end_w);
	ev_timer_set(&r->end_w, r->o->duration, 0);
	ev_timer_start(r->loop, &r->end_w);
}

static void
on_session_started(struct trc_session *s, void *ctx)
{
	struct run *r = ctx;

	r->worked = true;
	if (r->metrics != NULL)
		trc_metrics_root(r->metrics, trc_session_pid(s), trc_session_cwd(s));
	if (!r->begun && trc_sessions_all_started(r->sessions, r->nsessions))
		begin_duration(r);
	check_specs(r);
}

/*
 * A process whose Ruby cannot do what was asked (--top threads on Ruby 3.1): the others, and
 * those --ps would find, most likely run the same Ruby. The run ends on the first, said once,
 * rather than each worker saying so and --ps waiting for one that could, forever.
 */
static bool
refused_mode(struct run *r, struct trc_session *s)
{
	if (!trc_session_unsupported(s))
		return false;
	if (!r->refused) {
		r->refused = true;
		say_error(r, "%s", trc_session_error(s));
	}
	if (r->code < TRC_EXIT_ERROR)
		r->code = TRC_EXIT_ERROR;
	if (!r->stopping)
		stop_all(r, TRC_STOP_END);
	return true;
}

/* A session's outcome: its error said (as a note if churn), its code counted. */
static void
account(struct run *r, struct trc_session *s)
{
	const char *err = trc_session_error(s);
	enum trc_exit st = trc_session_status(s);

	if (refused_mode(r, s))
		return;
	if (trc_session_traced(s) || (r->job.mode != TRC_MODE_TRACE && r->job.mode != TRC_MODE_TOP &&
				      st == TRC_EXIT_OK))
		r->worked = true;
	if (is_churn(r, s, session_index(r, s))) {
		if (err != NULL)
			trc_output_note(&r->out, "%s", err);
		if (st > r->churn)
			r->churn = st;
		return;
	}
	if (err != NULL)
		say_error(r, "%s", err);
	if (st > r->code)
		r->code = st;
}

static void
on_session_done(struct trc_session *s, void *ctx)
{
	struct run *r = ctx;

	trc_output_flush(&r->out);
	account(r, s);
	if (r->metrics != NULL)
		trc_metrics_ended(r->metrics, trc_session_pid(s), ev_now(r->loop), trc_session_closed_at(s));
	r->running--;
	check_specs(r);
	if (r->running == 0 && !waits_for_more(r)) {
		ev_break(r->loop, EVBREAK_ALL);
		return;
	}
	if (r->running == 0 && r->ps != NULL)
		trc_output_note(&r->out, "no process left; waiting for one that matches %s",
				r->o->ps_regex);
	if (r->live != NULL)
		trc_live_update(r->live);
}

/* A process's first counts: shown now rather than at the next interval (trc_live_counted). */
static void
on_session_counted(struct trc_session *s, void *ctx)
{
	struct run *r = ctx;

	(void)s;
	if (r->live != NULL)
		trc_live_counted(r->live);
}

static void abort_all(struct run *r);

/* Whether the latest SIGINT came from the terminal (to the whole foreground group). */
static volatile sig_atomic_t int_from_terminal;

/*
 * --exec's SIGINT handler, in place of libev's: a signal from a process (kill) has si_code
 * SI_USER or SI_QUEUE, one the terminal sends its foreground group has SI_KERNEL. The loop
 * hears of it as of any signal (ev_feed_signal is async-signal-safe).
 */
static void
on_raw_int(int sig, siginfo_t *info, void *uc)
{
	(void)uc;
	int_from_terminal = info != NULL && info->si_code == SI_KERNEL;
	ev_feed_signal(sig);
}

static void
tell_int_source(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_raw_int;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
}

/*
 * --exec: tracer and its program share the terminal, whose Ctrl-C reaches both: the program
 * decides what to do with its SIGINT, traced; a second one detaches, a third leaves at once.
 * SIGTERM and SIGHUP, sent to tracer alone, are passed on; so is a SIGINT sent to tracer
 * alone (kill -INT), which the program did not get: one ends the run as Ctrl-C does.
 */
static void
on_exec_signal(struct run *r, int sig)
{
	if (sig != SIGINT) {
		trc_exec_signal(&r->exec, sig);
		return;
	}
	if (!int_from_terminal && r->interrupts == 0)
		trc_exec_signal(&r->exec, sig);
	if (++r->interrupts == 2)
		stop_all(r, TRC_STOP_SIGNAL);
	else if (r->interrupts > 2)
		abort_all(r);
}

/* First signal: detach cleanly. Second: leave now. With -i, Ctrl+C is the prompt's first. */
static void
on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct run *r = w->data;

	(void)loop, (void)revents;
	if (r->execing) {
		on_exec_signal(r, w->signum);
		return;
	}
	if (r->repl != NULL && w->signum == SIGINT && trc_repl_interrupt(r->repl))
		return;
	if (++r->interrupts == 1) {
		stop_all(r, TRC_STOP_SIGNAL);
		return;
	}
	abort_all(r);
}

static void
abort_all(struct run *r)
{
	for (size_t i = 0; i < r->nsessions; i++)
		trc_session_abort(r->sessions[i]);
}

/* Nothing to do: waking the loop runs its prepare watcher, on_idle_flush. */
static void
on_hold(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop, (void)w, (void)revents;
}

/* Runs before the loop blocks: whatever the callbacks printed goes out in one write. */
static void
on_idle_flush(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct run *r = w->data;
	bool held = false;

	(void)revents;
	for (size_t i = 0; i < r->nsessions; i++)
		held |= trc_session_idle(r->sessions[i], ev_now(loop));
	/* Held lines go out within their time even if nothing else wakes the loop. */
	if (held && !ev_is_active(&r->hold_w)) {
		ev_timer_set(&r->hold_w, TRC_TRACE_HOLD_SECS, 0);
		ev_timer_start(loop, &r->hold_w);
	}
	if (trc_output_flush(&r->out) < 0 && !r->output_failed) {
		r->output_failed = true;
		stop_all(r, TRC_STOP_OUTPUT);
	}
}

static void
watch_signals(struct run *r)
{
	static const int signals[] = { SIGINT, SIGTERM, SIGHUP };

	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
		ev_signal_init(&r->signal_w[i], on_signal, signals[i]);
		r->signal_w[i].data = r;
		ev_signal_start(r->loop, &r->signal_w[i]);
	}
	ev_prepare_init(&r->flush_w, on_idle_flush);
	r->flush_w.data = r;
	ev_prepare_start(r->loop, &r->flush_w);
	ev_timer_init(&r->hold_w, on_hold, TRC_TRACE_HOLD_SECS, 0);
	r->hold_w.data = r;
	/* After libev's own handler is in: this one replaces it, and feeds it. */
	if (r->o->exec.n > 0)
		tell_int_source();
}

static void
make_job(struct run *r, const struct trc_run_opts *o)
{
	struct trc_job *j = &r->job;

	j->mode = o->mode;
	j->trace_flags = TRC_TRACE_RAISE | (o->firehose ? TRC_TRACE_FIREHOSE : 0) |
			 (o->slow ? TRC_TRACE_SLOW : 0) | (o->gc ? TRC_TRACE_GC : 0) |
			 (o->slowcpu ? TRC_TRACE_SLOWCPU : 0);
	j->slow_ms = o->slow_ms;
	j->specs = o->specs;
	j->nspecs = o->nspecs;
	j->trace.prefix = o->prefix;
	j->trace.start_time = o->start_time;
	j->trace.no_duration = o->no_duration;
	j->stats = o->stats;
	j->dump_named = o->heapdump_path != NULL || o->shapesdump_path != NULL;
	j->export = r->export;
	j->top.mode = o->top_mode;
	j->top.interval_ms = (uint32_t)(o->interval * 1000 + 0.5);
	j->top.flags = (o->gc ? TRC_TOP_GC : 0) | (o->sample_by_time ? TRC_TOP_BY_TIME : 0) |
		       (o->format == TRC_FORMAT_FLAMEGRAPH ? TRC_TOP_PATHS : 0);
	j->top.sample = o->sample;
	if (o->top_mode == TRC_TOP_PROFILE && o->mode == TRC_MODE_TOP) {
		j->top.sample = o->hz;
		j->top.cap = o->cap_ppm;
		j->top.flags |= o->wall ? TRC_TOP_WALL : 0;
		j->top.profile = &r->profile;
	}
	j->scope.all = o->all;
	j->scope.prefixes = o->filters.v;
	j->scope.nprefixes = o->filters.n;
	j->scope.ignores = o->ignores.v;
	j->scope.nignores = o->ignores.n;
	j->top.table = r->top;
	j->top.metrics = r->metrics;
	j->label_pids = o->npids > 1 || r->ps != NULL;
	j->exec = o->exec.n > 0;
	j->timeout = o->timeout;
	/* with --ps or --exec: on_end, for every process and every exec */
	j->duration = r->ps != NULL || j->exec ? 0 : o->duration;
	j->out = &r->out;
	j->spool_dir = r->spool_dir;
}

/* A session for pid, counted as running: the caller starts it. */
static struct trc_session *
add_session(struct run *r, pid_t pid, bool found)
{
	char *text = eval_text(r->o, pid);
	struct trc_session *s = trc_session_new(r->loop, &r->job, pid, text, &r->cbs, r);

	free(text);
	if (r->nsessions == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 8;
		r->sessions = xreallocarray(r->sessions, r->cap, sizeof(*r->sessions));
		r->found = xreallocarray(r->found, r->cap, sizeof(*r->found));
	}
	r->sessions[r->nsessions] = s;
	r->found[r->nsessions++] = found;
	r->running++;
	if (r->top != NULL)
		trc_top_add_pid(r->top, pid);
	if (r->metrics != NULL)
		trc_metrics_add(r->metrics, pid, ev_now(r->loop));
	if (r->live != NULL)
		trc_live_set_sessions(r->live, r->sessions, r->nsessions);
	return s;
}

/* -i: attached; the prompt's turn. */
static void
on_session_ready(struct trc_session *s, void *ctx)
{
	struct run *r = ctx;

	r->worked = true;
	trc_repl_start(r->repl, s);
}

static void
on_session_answer(struct trc_session *s, void *ctx, bool ok, const char *text, size_t len)
{
	struct run *r = ctx;

	(void)s;
	trc_repl_answer(r->repl, ok, text, len);
}

static void
start_sessions(struct run *r)
{
	const struct trc_run_opts *o = r->o;

	r->cbs = (struct trc_session_cbs){ on_session_started, on_session_done, on_session_ready,
					   on_session_answer, on_session_counted };
	for (size_t i = 0; i < o->npids; i++)
		add_session(r, o->pids[i], i >= o->npids_given);
	for (size_t i = 0; i < o->npids; i++)
		trc_session_start(r->sessions[i]);
}

static bool
has_session(const struct run *r, pid_t pid)
{
	for (size_t i = 0; i < r->nsessions; i++)
		if (trc_session_pid(r->sessions[i]) == pid && !trc_session_finished(r->sessions[i]))
			return true;
	return false;
}

/* Workers come and go: every rescan attaches to the matching processes that are new. */
static void
on_rescan(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct run *r = w->data;
	pid_t *fresh;
	size_t n;

	(void)loop, (void)revents;
	if (trc_ps_scan(r->ps, &fresh, &n) < 0)
		return;         /* /proc unreadable for a moment: the next scan will do */
	for (size_t i = 0; i < n && !r->stopping; i++)
		if (!has_session(r, fresh[i]))
			trc_session_start(add_session(r, fresh[i], true));
	free(fresh);
}

/*
 * --duration with --ps: one end for every process, those found later too. While some are on
 * their way (a first install on a busy machine takes seconds), it has not begun:
 * begin_duration sets it going once they are traced, or here once the last was given up.
 */
static void
on_end(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct run *r = w->data;

	(void)revents;
	/* --ps: until begun; --exec: until the program is traced. */
	bool waiting = r->ps != NULL ? !r->begun : !r->worked;

	if (waiting && !r->stopping && !trc_sessions_all_started(r->sessions, r->nsessions)) {
		ev_timer_set(w, END_RECHECK, 0);
		ev_timer_start(loop, w);
		return;
	}
	if (r->ps != NULL && waiting && !r->stopping && r->worked) {
		begin_duration(r);
		return;
	}
	stop_all(r, TRC_STOP_END);
}

static void
start_rescans(struct run *r, const struct trc_run_opts *o)
{
	double every = o->mode == TRC_MODE_TOP ? o->interval : DEFAULT_RESCAN;

	ev_timer_init(&r->rescan_w, on_rescan, every, every);
	r->rescan_w.data = r;
	ev_timer_init(&r->end_w, on_end, o->duration, 0);
	r->end_w.data = r;
	if ((r->ps == NULL && !r->execing) || r->stopping)
		return;
	if (r->ps != NULL)
		ev_timer_start(r->loop, &r->rescan_w);
	if (o->duration > 0)
		ev_timer_start(r->loop, &r->end_w);
}

/* ---- --exec ---- */

#define EXEC_GRACE 2.0          /* seconds the program's connections may outlive it */

/*
 * The program connected, at its start or after an exec, or a process it started did (a fork,
 * a Ruby program it spawned): a session of its own. From the first other process on, the
 * lines of the others start with [PID]; the program's own keep no label.
 */
static void
on_exec_connected(struct trc_exec *x, int fd, pid_t pid, void *ctx)
{
	struct run *r = ctx;

	if (r->stopping) {
		close(fd);      /* it runs on untraced */
		return;
	}
	if (pid != x->pid)
		r->job.label_pids = true;
	trc_session_adopt(add_session(r, pid, false), fd);
}

/* --wait ran out: attach, as to any process. */
static void
on_wait(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct run *r = w->data;

	(void)loop, (void)revents;
	trc_session_start(add_session(r, r->exec.pid, false));
}

/* The program's connection outlived it: something still holds a copy. */
static void
on_grace(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop, (void)revents;
	abort_all(w->data);
}

static void
on_exec_exit(struct trc_exec *x, void *ctx)
{
	struct run *r = ctx;

	ev_timer_stop(r->loop, &r->wait_w);
	ev_timer_stop(r->loop, &r->end_w);
	if (r->running == 0) {
		ev_break(r->loop, EVBREAK_ALL);
		return;
	}
	/*
	 * The program's sessions read on to the end of what it sent, which its exit has closed.
	 * The processes it left running are detached: tracer ends with the program.
	 */
	for (size_t i = 0; i < r->nsessions; i++)
		if (trc_session_pid(r->sessions[i]) != x->pid)
			trc_session_stop(r->sessions[i], TRC_STOP_END);
	ev_timer_start(r->loop, &r->grace_w);
}

/* Starts the program. Returns 0, or its exit code when it could not be started (said). */
static int
start_exec(struct run *r, const struct trc_run_opts *o)
{
	char *lib = trc_exec_agent_lib(), why[PATH_MAX + 256];
	int rc;

	/* An agent found but not built would fail as the program starts, with a LoadError. */
	if (lib != NULL && trc_agentfile_missing(lib, false, why, sizeof(why)) < 0) {
		free(lib);
		return setup_failed(TRC_EXIT_ERROR, "%s", why);
	}
	r->exec_agent = lib != NULL;
	rc = trc_exec_start(&r->exec, r->loop, (char *const *)o->exec.v, lib, o->wait == 0,
			    on_exec_connected, on_exec_exit, r);
	free(lib);
	if (rc < 0 && r->exec.exec_failed)
		return setup_failed(errno == ENOENT ? TRC_EXIT_NOT_FOUND : TRC_EXIT_CANNOT_RUN, "%s",
				    r->exec.error);
	if (rc < 0)
		return setup_failed(TRC_EXIT_ERROR, "%s", r->exec.error);
	r->execing = true;
	ev_timer_init(&r->wait_w, on_wait, o->wait, 0);
	r->wait_w.data = r;
	ev_timer_init(&r->grace_w, on_grace, EXEC_GRACE, 0);
	r->grace_w.data = r;
	if (o->wait > 0)
		ev_timer_start(r->loop, &r->wait_w);
	return 0;
}

/* How the program ended, as a note; an error if it never connected. */
static void
exec_report(struct run *r)
{
	const struct trc_exec *x = &r->exec;
	int code = trc_exec_code(x);

	if (WIFSIGNALED(x->status))
		trc_output_note(&r->out, "process %d killed by signal %d (%s)", (int)x->pid,
				WTERMSIG(x->status), strsignal(WTERMSIG(x->status)));
	else
		trc_output_note(&r->out, "process %d exited with status %d", (int)x->pid, code);
	if (r->nsessions == 0 && r->o->wait > 0) {
		trc_output_note(&r->out, "process %d ended before --wait ran out: not traced",
				(int)x->pid);
	} else if (r->nsessions == 0 && !r->exec_agent) {
		say_error(r, "process %d never connected: tracer found no agent to preload (not in "
			  "$TRACER_AGENT_LIB, lib/ beside its binary's directory, nor make install's "
			  "PREFIX/lib/tracer), and left it to Ruby to find the tracer_agent gem (a LoadError "
			  "above says it did not): make install, or set TRACER_AGENT_LIB to the lib/ of a "
			  "built tracer checkout, or gem install tracer_agent", (int)x->pid);
		r->code = TRC_EXIT_ERROR;
	} else if (r->nsessions == 0) {
		say_error(r, "process %d never connected: is it a Ruby program, and did it keep the "
			  "RUBYOPT that loads tracer_agent?", (int)x->pid);
		r->code = TRC_EXIT_ERROR;
	}
}

/* The run's outcome with --exec: the program's; or 1 when it succeeded but tracing failed. */
static int
exec_outcome(const struct run *r)
{
	int code = trc_exec_code(&r->exec);

	return code != 0 ? code : r->code != TRC_EXIT_OK ? TRC_EXIT_ERROR : TRC_EXIT_OK;
}

/* The --top table; cli.c has checked the --ignore regexes, which compile the same here. */
static struct trc_top *
new_top(const struct trc_run_opts *o)
{
	struct trc_top *t = trc_top_new(o->top_mode, o->pids, o->npids);
	char why[128];

	for (size_t i = 0; i < o->ignores.n; i++)
		trc_top_ignore(t, o->ignores.v[i], why, sizeof(why));
	if (o->format == TRC_FORMAT_FLAMEGRAPH)
		trc_top_keep_paths(t);
	return t;
}

/* q on the screen: as a first signal. */
static void
on_quit(void *ctx)
{
	stop_all(ctx, TRC_STOP_SIGNAL);
}

/* --duration keeps the whole run in its one table, unless --reset says otherwise. */
static void
start_live(struct run *r, const struct trc_run_opts *o, bool full_screen)
{
	struct trc_live_opts lo = {
		.full_screen = full_screen, .json = o->json, .rows = o->rows,
		.interval = o->interval, .final_only = o->duration > 0, .final = o->exec.n > 0,
		.reset = o->reset > 0 ? o->reset : o->duration > 0 ? 0 : DEFAULT_RESET,
		.filters = o->filters.v, .nfilters = o->filters.n, .all = o->all, .gc = o->gc,
		.sample = o->sample, .sample_by_time = o->sample_by_time,
		.profile = o->top_mode == TRC_TOP_PROFILE ? &r->profile : NULL, .hz = o->hz,
	};

	r->live = trc_live_start(r->loop, &r->out, r->top, r->sessions, r->nsessions, &lo,
				 on_quit, r);
}

/* A flame graph to -o FILE.html is a page; else an SVG document. */
static enum trc_flame_doc
flame_doc(const struct trc_run_opts *o)
{
	return o->output != NULL && trc_format_html(o->output) ? TRC_FLAME_HTML : TRC_FLAME_SVG;
}

/* "tracer -f", "tracer -m Order#total ...": what the trace was, for a flame graph's heading. */
static void
trace_title(const struct trc_run_opts *o, char *buf, size_t size)
{
	size_t len;

	if (o->firehose)
		snprintf(buf, size, "tracer -f%s", o->all ? " --all" : "");
	else if (o->slow && o->nspecs == 0)
		snprintf(buf, size, "tracer -s %u", o->slow_ms);
	else
		snprintf(buf, size, "tracer -m");
	for (size_t i = 0; i < o->nspecs && (len = strlen(buf)) + 8 < size; i++) {
		if (i == 4) {
			snprintf(buf + len, size - len, " ...");
			break;
		}
		snprintf(buf + len, size - len, " %s", o->specs[i].text);
	}
}

static struct trc_export *
new_export(struct trc_output *out, const struct trc_run_opts *o, bool watching, const char *scratch)
{
	static char title[256];
	struct trc_export_opts eo = {
		.format = o->format, .tool = "tracer " TRC_CLIENT_VERSION, .specs = o->specs,
		.nspecs = o->nspecs, .label_pids = o->npids > 1 || watching, .split = o->split,
		.min_share = o->min_share, .html = flame_doc(o) == TRC_FLAME_HTML,
		.title = title, .prefixes = o->filters.v, .nprefixes = o->filters.n,
		.scratch_dir = scratch,
	};

	trace_title(o, title, sizeof(title));
	return trc_export_new(out, &eo);
}

/*
 * Tracing and --top with --ps go on while workers come and go; the one-shot modes (-e,
 * --heapdump, --backtraces...) ask the processes there at the start.
 */
static struct trc_ps *
watched(const struct trc_run_opts *o)
{
	return o->mode == TRC_MODE_TRACE || o->mode == TRC_MODE_TOP ? o->ps : NULL;
}

static void
free_run(struct run *r)
{
	for (size_t i = 0; i < r->nsessions; i++)
		trc_session_free(r->sessions[i]);
	free(r->sessions);
	free(r->spool_dir);
	free(r->found);
	if (r->export != NULL)
		trc_export_free(r->export);
	trc_outfile_release(&r->file);
	trc_output_release(&r->out);
	if (r->httpd != NULL)
		trc_httpd_free(r->httpd);
	trc_metrics_free(r->metrics);
	if (r->top != NULL)
		trc_top_free(r->top);
	trc_profile_release(&r->profile);
}

/*
 * A trace going to a regular file goes through a spool (spool.h), whose scratch files go
 * beside it, on its file system: nobody watches a file line by line as it grows, and the
 * spool keeps every event of a flood. To a terminal or a pipe, a trace is formatted as it
 * comes.
 */
static char *
spool_dir(int fd, enum trc_mode mode)
{
	struct stat st;
	char link[64], path[PATH_MAX];
	ssize_t n;
	char *slash;

	if (mode != TRC_MODE_TRACE || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0 || path[0] != '/')
		return NULL;
	path[n] = '\0';
	slash = strrchr(path, '/');
	slash[slash == path ? 1 : 0] = '\0';
	return xstrdup(path);
}

/* ---- --metrics ---- */

/* The processes whose hooks are on now: a target that ended no longer counts, its rows do. */
static size_t
attached(const struct run *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nsessions; i++)
		n += trc_session_traced(r->sessions[i]) && !trc_session_finished(r->sessions[i]);
	return n;
}

/*
 * GET /metrics: every target's table, never reset, as the scraper asked (Accept). Made again
 * only when the agents reported counts since (or a target came or went, or a series held at
 * zero gets its value).
 */
static const char *
serve_metrics(const struct trc_http_request *req, const struct trc_buf **body, void *ctx)
{
	struct run *r = ctx;
	enum trc_metrics_format f = trc_metrics_negotiate(req->accept);

	trc_metrics_set_targets(r->metrics, attached(r));
	*body = trc_metrics_expose(r->metrics, f, ev_now(r->loop));
	return trc_metrics_content_type(f);
}

/*
 * Listens before anything is attached: an address in use fails the run at once. On a
 * terminal, says where.
 */
static int
start_metrics(struct run *r, const struct trc_run_opts *o)
{
	int fd = trc_httpd_listen((const struct sockaddr *)&o->metrics_addr, o->metrics_addrlen);

	/* ":PORT" on a machine without IPv6: every IPv4 address, then. */
	if (fd < 0 && errno == EAFNOSUPPORT && o->metrics[0] == ':') {
		struct sockaddr_in any = { .sin_family = AF_INET,
					   .sin_port = ((const struct sockaddr_in6 *)&o->metrics_addr)->sin6_port,
					   .sin_addr.s_addr = htonl(INADDR_ANY) };

		fd = trc_httpd_listen((const struct sockaddr *)&any, sizeof(any));
	}
	if (fd < 0)
		return setup_failed(TRC_EXIT_ERROR, "cannot serve metrics on %s: %s", o->metrics,
				    strerror(errno));
	r->httpd = trc_httpd_new(r->loop, fd, "/metrics", serve_metrics, r);
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "*** serving metrics on http://%s%s/metrics\n",
			o->metrics[0] == ':' ? "[::]" : "", o->metrics);
	return 0;
}

/*
 * Whether the output is only good whole: a JSON document, a profile, a picture, stacks
 * written at the end. Text and JSON lines are good as far as they go.
 */
static bool
whole_file(const struct trc_run_opts *o)
{
	if (o->append)          /* collapsed stacks added to a file's: written in place, as asked */
		return false;
	if (o->mode == TRC_MODE_TOP)
		return o->format != TRC_FORMAT_TEXT;
	return o->mode == TRC_MODE_TRACE && o->format != TRC_FORMAT_TEXT && o->format != TRC_FORMAT_JSONL;
}

/* The output, the table or exporter, the job and the loop. Returns 0, or an exit code (said). */
static int
set_up(struct run *r, const struct trc_run_opts *o)
{
	char why[PATH_MAX + 256];
	int fd = STDOUT_FILENO;

	if (o->output != NULL && (fd = trc_outfile_open(&r->file, o->output, o->append,
							 whole_file(o), why, sizeof(why))) < 0)
		return setup_failed(TRC_EXIT_ERROR, "%s", why);
	trc_output_init(&r->out, fd, STDERR_FILENO);
	trc_progress_init(STDERR_FILENO);
	/*
	 * --exec's program writes to the same terminal or pipe: no trace line of ours half out.
	 * (--top's screen draws with escapes, not lines, and is drawn whole each time.)
	 */
	if (o->exec.n > 0 && o->output == NULL && o->mode == TRC_MODE_TRACE)
		trc_output_share(&r->out);
	if (compress_output(&r->out, o) < 0)
		return setup_failed(TRC_EXIT_ERROR, "cannot compress '%s': %s", o->output,
				    strerror(errno));
	if (o->mode == TRC_MODE_TOP)
		r->top = new_top(o);
	if (o->metrics != NULL) {
		struct trc_metrics_opts mo = {
			.mode = o->top_mode, .rows = o->rows, .gc = o->gc,
			.labels = o->labels.v, .nlabels = o->labels.n,
			.ignores = o->ignores.v, .nignores = o->ignores.n,
		};

		r->metrics = trc_metrics_new(r->top, &mo);
	}
	if (o->mode == TRC_MODE_TOP && o->top_mode == TRC_TOP_PROFILE)
		trc_profile_init(&r->profile, o->wall, trc_profile_format(o->format) && o->output != NULL);
	r->spool_dir = spool_dir(fd, o->mode);
	if (o->mode == TRC_MODE_TRACE && o->format != TRC_FORMAT_TEXT)
		r->export = new_export(&r->out, o, r->ps != NULL || o->exec.n > 0, r->spool_dir);
	make_job(r, o);
	if (o->exec.n > 0)
		trc_exec_init(&r->exec);     /* before libev changes the signal mask */
	r->loop = ev_default_loop(0);
	if (r->loop == NULL)
		return setup_failed(TRC_EXIT_ERROR, "cannot start the event loop");
	if (o->mode == TRC_MODE_INTERACTIVE)
		r->repl = trc_repl_new(r->loop, &r->out, o->pids[0]);
	watch_signals(r);
	if (o->metrics != NULL && start_metrics(r, o) != 0)
		return TRC_EXIT_ERROR;
	return o->exec.n > 0 ? start_exec(r, o) : 0;
}

/* Whether the loop has anything to wait for. */
static bool
has_work(const struct run *r)
{
	return !r->stopping && (r->running > 0 || r->ps != NULL || r->execing);
}

/*
 * Why a whole file is not whole: a session's trace cut short, the exporter's own failure, or
 * no process traced at all (an empty document would look like a quiet app).
 */
static const char *
not_whole(const struct run *r)
{
	size_t traced = 0;

	for (size_t i = 0; i < r->nsessions; i++) {
		if (trc_session_cut_short(r->sessions[i]))
			return "the trace was cut short";
		traced += trc_session_traced(r->sessions[i]);
	}
	if (traced == 0)
		return "no process was traced";
	if (r->export != NULL && trc_export_failed(r->export) != NULL)
		return trc_export_failed(r->export);
	return NULL;
}

/*
 * A whole file that is not (a trace cut short, a write that failed: a full disk) is not left
 * at FILE, where it would look complete: removed (what was at FILE stays as it was), or, when
 * written in place through one's own link, emptied. The run fails, saying so.
 */
static bool
discard_output(struct run *r, const char *cause)
{
	const char *done = trc_outfile_discard(&r->file);

	if (done != NULL)
		fprintf(stderr, "tracer: '%s' not written: %s; the incomplete %s file was %s\n",
			r->o->output, cause, trc_format_name(r->o->format), done);
	else
		fprintf(stderr, "tracer: '%s' is incomplete: %s\n", r->o->output, cause);
	return true;
}

/*
 * The last bytes out, and -o FILE in place. A write that failed (a full disk) leaves a trace
 * cut short: a text file keeps what was written, and the run fails, saying so.
 */
static void
end_output(struct run *r)
{
	char why[PATH_MAX * 2 + 256];
	bool failed = trc_output_end(&r->out) < 0 && r->out.error != EPIPE;
	/*
	 * Only a file that is good whole fails for want of one: text and JSON lines are good as far
	 * as they go (a --wait that outlasted the program traced nothing), and -e, --heapdump and
	 * the like trace nothing at all.
	 */
	const char *cause = whole_file(r->o) ? not_whole(r) : NULL;

	if (r->o->output != NULL && whole_file(r->o) && (failed || cause != NULL)) {
		snprintf(why, sizeof(why), "%s", failed ? strerror(r->out.error) : cause);
		failed = discard_output(r, why);
	} else {
		if (failed && r->o->output != NULL)
			fprintf(stderr, "tracer: cannot write '%s': %s: the trace in it is partial\n",
				r->o->output, strerror(r->out.error));
		else if (failed)
			fprintf(stderr, "tracer: cannot write the output: %s\n", strerror(r->out.error));
		if (r->o->output != NULL && trc_outfile_commit(&r->file, why, sizeof(why)) < 0) {
			fprintf(stderr, "tracer: %s\n", why);
			failed = true;
		}
	}
	if (failed && r->code < TRC_EXIT_ERROR)
		r->code = TRC_EXIT_ERROR;
}

/* --top --format pprof: the whole session's table, once, as the sessions have all ended. */
static void
write_top_profile(struct run *r)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_top_format_pprof(r->top, (int64_t)((ev_time() - r->top_start) * 1e9),
			     "tracer " TRC_CLIENT_VERSION, &b);
	trc_output_write(&r->out, b.data, b.len);
	trc_buf_release(&b);
}

/* The processes of the run, for a flame graph's heading: "process 1234" or "processes 1, 2 and 3 more". */
static void
title_pids(struct run *r, struct trc_buf *title)
{
	trc_buf_addf(title, "%s", r->nsessions > 1 ? "processes" : "process");
	for (size_t i = 0; i < r->nsessions && i < 8; i++)
		trc_buf_addf(title, "%s %d", i > 0 ? "," : "", (int)trc_session_pid(r->sessions[i]));
	if (r->nsessions > 8)
		trc_buf_addf(title, " and %zu more", r->nsessions - 8);
}

/* The app's files, for a flame graph's colours: --filter's prefixes, else each target's working directory. */
static struct trc_flame_scope
app_scope(struct run *r, const char **dirs)
{
	const struct trc_run_opts *o = r->o;
	size_t n = 0;

	if (o->filters.n > 0)
		return (struct trc_flame_scope){ o->filters.v, o->filters.n };
	for (size_t i = 0; i < r->nsessions; i++)
		if (trc_session_cwd(r->sessions[i]) != NULL)
			dirs[n++] = trc_session_cwd(r->sessions[i]);
	return (struct trc_flame_scope){ dirs, n };
}

/* The flame graph f under its heading and subtitle (taken, with f), written to the output. */
static void
draw_flame(struct run *r, struct trc_flame *f, struct trc_buf *title, struct trc_buf *sub)
{
	struct trc_flame_opts fo = { flame_doc(r->o), NULL, NULL, r->o->min_share };

	trc_buf_addc(title, '\0');
	trc_buf_addc(sub, '\0');
	fo.title = title->data;
	fo.subtitle = sub->data;
	trc_flame_write(f, &fo, &r->out);
	trc_buf_release(title);
	trc_buf_release(sub);
	trc_flame_free(f);
}

/* --top profile --format flamegraph: the run's sampled stacks, drawn once. */
static void
write_profile_flame(struct run *r, const struct trc_profile_write_opts *wo)
{
	const struct trc_run_opts *o = r->o;
	const struct trc_profile *p = &r->profile;
	struct trc_flame *f = trc_flame_new("ns");
	const char **dirs = xcalloc(r->nsessions + 1, sizeof(*dirs));
	struct trc_flame_scope scope = app_scope(r, dirs);
	struct trc_buf title, sub;

	trc_profile_flame(p, wo, &scope, f);
	trc_buf_init(&title);
	trc_buf_addf(&title, "tracer --profile %s: ", p->wall ? "wall" : "cpu");
	title_pids(r, &title);
	trc_buf_init(&sub);
	trc_buf_addf(&sub, "%s time per stack, sampled at %" PRIu64 " Hz: %.3f s in %" PRIu64 " samples, %s; "
		     "frames under %g%% merged", p->wall ? "wall-clock" : "CPU", p->hz,
		     (double)trc_flame_total(f) / 1e9, p->samples,
		     wo->by_thread ? "each thread apart" : wo->by_process ? "threads merged" :
		     r->nsessions > 1 ? "threads and processes merged" : "threads merged",
		     o->min_share * 100);
	if (p->lost > 0 || p->tree_lost > 0)
		trc_buf_addf(&sub, "; %" PRIu64 " samples lost", p->lost + p->tree_lost);
	draw_flame(r, f, &title, &sub);
	free(dirs);
}

/* --top profile --format F: every target's stacks, once, as the sessions have all ended. */
static void
write_profile(struct run *r)
{
	struct trc_profile_write_opts wo = {
		.format = r->o->format, .duration_ns = (int64_t)((ev_time() - r->top_start) * 1e9),
		.hz = r->o->hz, .tool = "tracer " TRC_CLIENT_VERSION,
	};
	struct trc_buf b;

	wo.by_process = r->o->split == TRC_SPLIT_PROCESS || r->o->split == TRC_SPLIT_THREAD;
	wo.by_thread = r->o->split == TRC_SPLIT_THREAD;
	if (r->o->format == TRC_FORMAT_FLAMEGRAPH) {
		write_profile_flame(r, &wo);
		return;
	}
	trc_buf_init(&b);
	trc_profile_write(&r->profile, &wo, &b);
	trc_output_write(&r->out, b.data, b.len);
	trc_buf_release(&b);
}

/* --top time --format flamegraph: the whole session's paths, drawn once, as the sessions have all ended. */
static void
write_top_flame(struct run *r)
{
	const struct trc_run_opts *o = r->o;
	struct trc_flame *f = trc_flame_new("ns");
	const char **dirs = xcalloc(r->nsessions + 1, sizeof(*dirs));
	struct trc_flame_scope scope = app_scope(r, dirs);
	struct trc_buf title, sub;

	trc_top_paths_flame(trc_top_paths(r->top), f, o->split == TRC_SPLIT_PROCESS, &scope);
	trc_buf_init(&title);
	trc_buf_addf(&title, "tracer --top time%s: ", o->all ? " --all" : "");
	title_pids(r, &title);
	trc_buf_init(&sub);
	trc_buf_addf(&sub, "self time (wall clock) per call path, counted in the process%s: %.3f s in all%s; "
		     "frames under %g%% merged", r->nsessions > 1 ? "es" : "",
		     (double)trc_flame_total(f) / 1e9,
		     o->split == TRC_SPLIT_PROCESS ? ", threads merged" :
		     r->nsessions > 1 ? ", threads and processes merged" : ", threads merged",
		     o->min_share * 100);
	draw_flame(r, f, &title, &sub);
	free(dirs);
}

/* After the loop: the terminal back, the last words, the file completed; the exit code. */
static int
finish_run(struct run *r)
{
	if (r->live != NULL)
		trc_live_stop(r->live);
	/* The terminal as it was, before anything more is said. */
	if (r->repl != NULL)
		trc_repl_free(r->repl);
	if (r->execing)
		exec_report(r);
	/* Every session has ended its part: the file can be completed. */
	if (r->export != NULL) {
		for (size_t i = 0; i < r->nsessions; i++)
			if (trc_session_cwd(r->sessions[i]) != NULL)
				trc_export_app_dir(r->export, trc_session_cwd(r->sessions[i]));
		trc_export_finish(r->export);
	}
	if (r->profile.keep_tree)
		write_profile(r);
	else if (r->top != NULL && r->o->format == TRC_FORMAT_PPROF)
		write_top_profile(r);
	else if (r->top != NULL && r->o->format == TRC_FORMAT_FLAMEGRAPH)
		write_top_flame(r);
	end_output(r);
	/* --ps processes that all went away, or refused: then their outcome is the run's. */
	if (!r->worked && r->churn > r->code)
		r->code = r->churn;
	return r->execing ? exec_outcome(r) : (int)r->code;
}

int
trc_run(const struct trc_run_opts *o)
{
	struct run r = { .o = o, .code = TRC_EXIT_OK, .ps = watched(o), .out.fd = -1,
			 .file.fd = -1, .file.nf.fd = -1 };
	bool full_screen;
	int code = set_up(&r, o);

	if (code != 0) {
		free_run(&r);
		return code;
	}
	full_screen = o->mode == TRC_MODE_TOP && !o->json && isatty(r.out.fd);
	start_sessions(&r);
	/* Sessions may all have failed already (then without a loop to break). */
	r.top_start = ev_time();
	if (o->mode == TRC_MODE_TOP && o->format == TRC_FORMAT_TEXT && !r.profile.keep_tree &&
	    o->metrics == NULL && has_work(&r))
		start_live(&r, o, full_screen);
	start_rescans(&r, o);
	if (has_work(&r))
		ev_run(r.loop, 0);
	code = finish_run(&r);
	free_run(&r);
	return code;
}
