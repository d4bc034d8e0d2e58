/* session.c: the per-target protocol state machine: attach, hello, trace, top or eval, detach. */
#include "session.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach.h"
#include "conn.h"
#include "encode.h"
#include "escape.h"
#include "exec.h"
#include "inject.h"
#include "sandbox.h"
#include "newfile.h"
#include "proc.h"
#include "progress.h"
#include "replay.h"
#include "spool.h"
#include "xmalloc.h"

/*
 * Seconds a detach may take, whatever the agent sends meanwhile (the protocol's TRC_DETACH_MS):
 * --duration and Ctrl-C end a session within 2 s even when an agent never stops sending. One
 * still sending then (a flood a slow terminal drains, or a hostile stream) has the rest of its
 * trace left out, as lost events are; one silent that long never confirms.
 */
#define DETACH_WAIT (TRC_DETACH_MS / 1000.0)
#define STILL_SENDING 0.5       /* seconds since its last bytes for an agent to count as sending */
#define ALIVE_EVERY 1.0         /* seconds between liveness checks while tracing */
#define GONE_EVERY 0.01         /* after a lost connection: look for the exit this often, */
#define GONE_CHECKS 50          /* this many times */
#define INJECT_EVERY 0.01       /* loading the agent: look for it this often */
#define WATCH_EVERY (TRC_PROGRESS_MS / 1000.0)  /* long work of the client's watching: the line */
#define EVAL_ID 1

enum state {
	S_IDLE,                 /* not started */
	S_ATTACHING,            /* waiting for the target to connect */
	S_WELCOMING,            /* HELLO sent */
	S_STARTING,             /* TRACE or TOP sent: SPEC replies, then STARTED */
	S_TRACING,
	S_EVALING,              /* EVAL sent */
	S_INTERACTIVE,          /* -i: the owner asks (trc_session_ask) */
	S_DETACHING,            /* DETACH sent */
	S_CLOSED,               /* connection lost: did the process exit? */
	S_DONE,
};

#define IN(st) (1u << (st))
#define CONNECTED (IN(S_WELCOMING) | IN(S_STARTING) | IN(S_TRACING) | IN(S_EVALING) | \
		   IN(S_INTERACTIVE) | IN(S_DETACHING))
#define WELCOMED (CONNECTED & ~IN(S_WELCOMING))
#define TRACE_STATES (IN(S_STARTING) | IN(S_TRACING) | IN(S_DETACHING))

struct trc_session {
	struct ev_loop *loop;
	const struct trc_job *job;
	pid_t pid;
	char *text;
	enum state state;
	struct trc_attach attach;
	struct trc_conn conn;
	struct trc_spool *spool;        /* tracing to a file: where its bytes go first (the sink's) */
	ev_idle pump_w;                 /* feeds the spool's events on when the loop is idle */
	ev_timer rate_w;                /* measures the stream, to pump only outside a flood */
	uint64_t recent;                /* bytes received since rate_w last ran */
	bool flood;
	struct trc_sink sink;           /* trace mode only, until the session ends: printer or exporter */
	struct trc_newfile heap;        /* --heapdump, --shapesdump: the file the agent writes */
	char *cwd;                      /* from WELCOME, or NULL */
	ev_tstamp closed_at;            /* the connection ended without DETACHED, or 0 */
	ev_timer timeout_w, duration_w, detach_w, alive_w, gone_w, inject_w;
	ev_timer watch_w;               /* the progress line of long work the client watches */
	int watching;                   /* its enum trc_progress_watch */
	ev_tstamp watch_since;
	struct trc_inject *inject;      /* loading the agent before attaching, or NULL */
	int gone_checks;
	bool truncated;                 /* the connection ended inside a message */
	uint64_t received;              /* trace events (calls, returns, raises, values, slow calls) */
	size_t name_bytes;              /* of the definitions a spool kept (names_fit) */
	bool cut_short;                 /* the spool said the trace is cut short */
	char tag[24];		/* "[PID] " with several targets, else "" */
	bool traced;                    /* STARTED came */
	bool counted;                   /* a TOP came */
	bool busy;                      /* the agent said another client traces it */
	bool unsupported;               /* ... that its Ruby cannot do what was asked */
	bool loaded_here;               /* this session loaded the agent into it */
	bool *matched;                  /* per job spec: its SPEC reply found methods */
	uint32_t next_id;               /* -i: the id of the last question */
	uint32_t asking;                /* -i: the id of the question out, or 0 */
	uint32_t interrupting;          /* -i: the id of the interrupt out, or 0 */
	enum trc_exit code;
	char *error;
	const struct trc_session_cbs *cbs;
	void *ctx;
};

/*
 * The end of the trace: what a spool still holds goes to the printer or exporter first. A
 * trace its spool could not keep whole (a full disk) fails the session: its note says why.
 */
static void
close_sink(struct trc_session *s)
{
	ev_idle_stop(s->loop, &s->pump_w);
	ev_timer_stop(s->loop, &s->rate_w);
	trc_sink_close(&s->sink);
	s->spool = NULL;
	if (s->cut_short && s->code < TRC_EXIT_ERROR)
		s->code = TRC_EXIT_ERROR;
}

static void
stop_timers(struct trc_session *s)
{
	ev_timer_stop(s->loop, &s->timeout_w);
	ev_timer_stop(s->loop, &s->duration_w);
	ev_timer_stop(s->loop, &s->detach_w);
	ev_timer_stop(s->loop, &s->alive_w);
	ev_timer_stop(s->loop, &s->gone_w);
	ev_timer_stop(s->loop, &s->inject_w);
	ev_timer_stop(s->loop, &s->watch_w);
}

/*
 * Long work the agent sends no progress of: the line says how far it has come, from the first
 * WATCH_EVERY on (quick work shows none). Only on a terminal (progress.c).
 */
static void
watch(struct trc_session *s, int what)
{
	s->watching = what;
	s->watch_since = ev_now(s->loop);
	ev_timer_again(s->loop, &s->watch_w);
}

static void
unwatch(struct trc_session *s)
{
	if (!ev_is_active(&s->watch_w))
		return;
	ev_timer_stop(s->loop, &s->watch_w);
	trc_progress_end(s->pid);
}

static void
on_watch(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_session *s = w->data;
	struct stat st;
	uint64_t done = (uint64_t)((ev_now(loop) - s->watch_since) * 1e3);

	(void)revents;
	/* What the agent wrote into the file it was passed so far. */
	if (s->watching == TRC_PROGRESS_DUMP)
		done = fstat(s->heap.fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	trc_progress_update(s->pid, s->watching, done, 0);
}

/* Records an outcome: the worst code wins, and the latest message. */
static void __attribute__((format(printf, 3, 0)))
set_outcome(struct trc_session *s, enum trc_exit code, const char *fmt, va_list ap)
{
	struct trc_buf b;

	if (code > s->code)
		s->code = code;
	if (fmt == NULL)
		return;
	trc_buf_init(&b);
	trc_buf_vaddf(&b, fmt, ap);
	trc_buf_addc(&b, '\0');
	free(s->error);
	s->error = b.data;
}

static void __attribute__((format(printf, 3, 4)))
remember(struct trc_session *s, enum trc_exit code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_outcome(s, code, fmt, ap);
	va_end(ap);
}

/* Ends the session: everything is released before done() hears of it. fmt may be NULL. */
static void __attribute__((format(printf, 3, 4)))
finish(struct trc_session *s, enum trc_exit code, const char *fmt, ...)
{
	va_list ap;

	if (s->state == S_DONE)
		return;
	/* First: the arguments may point into the connection's buffers. */
	va_start(ap, fmt);
	set_outcome(s, code, fmt, ap);
	va_end(ap);
	/* While the agent loads, the attach has not begun: nothing of it to stop. */
	if (s->state == S_ATTACHING && s->inject == NULL)
		trc_attach_stop(&s->attach);
	s->state = S_DONE;
	trc_progress_end(s->pid);
	stop_timers(s);
	trc_conn_close(&s->conn);
	close_sink(s);
	/* A dump that did not complete leaves nothing behind. */
	trc_newfile_release(&s->heap);
	s->cbs->done(s, s->ctx);
}

/* Sends b, passing fd with it unless fd is -1. */
static void
send_buf_fd(struct trc_session *s, struct trc_buf *b, int fd)
{
	trc_conn_send_fd(&s->conn, b, fd);
	trc_buf_release(b);
}

static void
send_buf(struct trc_session *s, struct trc_buf *b)
{
	send_buf_fd(s, b, -1);
}

static void
detach(struct trc_session *s)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_encode_detach(&b);
	send_buf(s, &b);
	s->state = S_DETACHING;
	ev_timer_stop(s->loop, &s->duration_w);
	ev_timer_set(&s->detach_w, DETACH_WAIT, 0);
	ev_timer_start(s->loop, &s->detach_w);
}

static void
start_duration(struct trc_session *s)
{
	if (s->job->duration <= 0)
		return;
	ev_timer_set(&s->duration_w, s->job->duration, 0);
	ev_timer_start(s->loop, &s->duration_w);
}

/* One line: prefix, the target's text (escaped), suffix. */
static void
put_line(struct trc_session *s, const char *prefix, struct trc_str text, const char *suffix)
{
	struct trc_output *o = s->job->out;
	struct trc_buf b;

	trc_buf_init(&b);
	trc_buf_adds(&b, s->tag);
	trc_buf_adds(&b, prefix);
	trc_escape(&b, text.ptr, text.len);
	trc_buf_adds(&b, suffix);
	trc_output_close_line(o);
	trc_output_write(o, b.data, b.len);
	trc_buf_release(&b);
}

static void
print_value(struct trc_session *s, struct trc_str text)
{
	put_line(s, "=> ", text, "\n");
}

/* What a dump mode calls its file, in messages. */
static const char *
dump_name(const struct trc_session *s)
{
	return s->job->mode == TRC_MODE_SHAPESDUMP ? "shapes dump" : "heap dump";
}

/*
 * The agent has written and closed the file and answers its size: now it gets its name, if it
 * is whole. A full file system may have cut it with no error the process heard of: then it is
 * removed (by the release that ends the session), and the dump failed.
 */
static void
print_dump(struct trc_session *s, struct trc_str size)
{
	char head[32], tail[64], *bytes;
	struct trc_str path;

	if (trc_newfile_check(&s->heap) < 0) {
		remember(s, TRC_EXIT_ERROR, "%s failed: '%s' cannot be whole: %s (removed)",
			 dump_name(s), s->heap.path, strerror(errno));
		return;
	}
	if (trc_newfile_commit(&s->heap) < 0) {
		remember(s, TRC_EXIT_ERROR, "%s failed: cannot rename '%s' to '%s': %s", dump_name(s),
			 s->heap.tmp, s->heap.path, strerror(errno));
		return;
	}
	path = (struct trc_str){ s->heap.path, (uint32_t)strlen(s->heap.path) };
	bytes = trc_escape_dup(size.ptr, size.len < 30 ? size.len : 30);
	snprintf(head, sizeof(head), "%s written to ", dump_name(s));
	snprintf(tail, sizeof(tail), " (%s bytes)\n", bytes);
	free(bytes);
	put_line(s, head, path, tail);
}

/* Text of several lines: with several targets, each line says whose it is. */
static void
print_text(struct trc_session *s, struct trc_str text)
{
	const char *p = text.ptr, *end = text.ptr + text.len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct trc_str line = { p, (uint32_t)((nl ? nl : end) - p) };

		put_line(s, "", line, "\n");
		p += line.len + (nl != NULL);
	}
}

/* The reply's text as a pid: digits only, a positive pid_t; else 0. */
static pid_t
parse_pid(struct trc_str text)
{
	long long v = 0;

	if (text.len == 0 || text.len > 10)
		return 0;
	for (uint32_t i = 0; i < text.len; i++) {
		if (text.ptr[i] < '0' || text.ptr[i] > '9')
			return 0;
		v = v * 10 + (text.ptr[i] - '0');
	}
	return v > 0 && v <= INT32_MAX ? (pid_t)v : 0;
}

/*
 * The copy's pid, and how to use it: it stays stopped until someone continues it. The pid goes
 * into commands the user may paste, so it must be a number and a child of the target (which
 * names it as it sees it: in a container, its pid in there; the commands need ours).
 */
static void
print_fork(struct trc_session *s, struct trc_str reply)
{
	pid_t copy = parse_pid(reply), here = copy > 0 ? trc_proc_child(s->pid, copy) : 0;
	char gdb[32], cont[32], *text;
	struct trc_buf b;
	int w;

	if (here == 0) {
		text = trc_escape_dup(reply.ptr, reply.len < 64 ? reply.len : 64);
		remember(s, TRC_EXIT_ERROR, "fork failed: process %d answered '%s', which is no child "
			 "of it", (int)s->pid, text);
		free(text);
		return;
	}
	snprintf(gdb, sizeof(gdb), "gdb -p %d", (int)here);
	w = snprintf(cont, sizeof(cont), "kill -CONT %d", (int)here) + 4;
	trc_buf_init(&b);
	trc_buf_addf(&b, "process %d is a copy of process %d, stopped before it ran anything\n"
		     "  %-*slook inside it (only the thread that forked is in it)\n"
		     "  %-*slet it go: it exits at once, and process %d reaps it",
		     (int)here, (int)s->pid, w, gdb, w, cont, (int)s->pid);
	print_text(s, (struct trc_str){ b.data, (uint32_t)b.len });
	trc_buf_release(&b);
}

/* How each eval-like mode asks, prints its answer and words its failure. */
static const struct eval_mode {
	enum trc_eval_kind kind;
	void (*print)(struct trc_session *, struct trc_str);
	const char *failure;
} eval_modes[] = {
	[TRC_MODE_EVAL] = { TRC_EVAL_CODE, print_value, "eval raised" },
	[TRC_MODE_HEAPDUMP] = { TRC_EVAL_HEAPDUMP, print_dump, "heap dump failed:" },
	[TRC_MODE_SHAPESDUMP] = { TRC_EVAL_SHAPESDUMP, print_dump, "shapes dump failed:" },
	[TRC_MODE_BACKTRACES] = { TRC_EVAL_BACKTRACES, print_text, "backtraces failed:" },
	[TRC_MODE_BACKTRACE] = { TRC_EVAL_BACKTRACE, print_text, "backtrace failed:" },
	[TRC_MODE_FORK] = { TRC_EVAL_FORK, print_fork, "fork failed:" },
	[TRC_MODE_MEMORY] = { TRC_EVAL_MEMORY, print_text, "memory report failed:" },
};

/* Whether the mode's eval carries a file for the agent to write (tracer_protocol.h). */
static bool
passes_file(const struct trc_session *s)
{
	return s->job->mode == TRC_MODE_HEAPDUMP || s->job->mode == TRC_MODE_SHAPESDUMP;
}

/* What to send after the WELCOME, per mode. */
static void
ask_trace(struct trc_session *s, const struct trc_message *m, struct trc_buf *b)
{
	trc_sink_set_clock(&s->sink, m->welcome.mono_ns, m->welcome.real_ns);
	trc_encode_trace(b, s->job->trace_flags, s->job->slow_ms, s->job->specs, s->job->nspecs,
			 &s->job->scope);
	s->state = S_STARTING;
}

static void
ask_top(struct trc_session *s, const struct trc_message *m, struct trc_buf *b)
{
	(void)m;
	trc_encode_top(b, s->job->top.mode, s->job->top.interval_ms, s->job->top.flags,
		       s->job->top.sample, s->job->top.cap, &s->job->scope);
	s->state = S_STARTING;
}

static void
ask_eval(struct trc_session *s, const struct trc_message *m, struct trc_buf *b)
{
	(void)m;
	/* An eval may legitimately take long: only --duration bounds it. */
	ev_timer_stop(s->loop, &s->timeout_w);
	trc_encode_eval(b, EVAL_ID, eval_modes[s->job->mode].kind, s->text);
	s->state = S_EVALING;
	start_duration(s);
	if (passes_file(s))
		watch(s, TRC_PROGRESS_DUMP);
	else if (s->job->mode == TRC_MODE_MEMORY)
		watch(s, TRC_PROGRESS_MEMORY);
}

/* -i: no command; the owner asks its questions from now on, as long as it likes. */
static void
start_interactive(struct trc_session *s, const struct trc_message *m)
{
	const struct trc_str *v = &m->welcome.ruby_version;
	char *version = trc_escape_dup(v->ptr, v->len);

	ev_timer_stop(s->loop, &s->timeout_w);
	s->state = S_INTERACTIVE;
	trc_output_note(s->job->out, "attached to process %d (Ruby %s); exit or Ctrl+D detaches",
			(int)s->pid, version);
	free(version);
	start_duration(s);
	ev_timer_start(s->loop, &s->alive_w);
	s->cbs->ready(s, s->ctx);
}

static void
on_welcome(struct trc_session *s, const struct trc_message *m)
{
	struct trc_buf b;

	if (m->welcome.version != TRC_PROTOCOL_VERSION) {
		finish(s, TRC_EXIT_ERROR, "process %d speaks protocol version %" PRIu32
		       ", this tracer speaks %d", (int)s->pid, m->welcome.version,
		       TRC_PROTOCOL_VERSION);
		return;
	}
	free(s->cwd);
	s->cwd = xstrndup(m->welcome.cwd.ptr, m->welcome.cwd.len);
	if (m->welcome.ractors > 1 && (s->job->mode == TRC_MODE_TRACE || s->job->mode == TRC_MODE_TOP))
		trc_output_note(s->job->out, "%sprocess %d runs %" PRIu32 " Ractors: only the main "
				"one is traced", s->tag, (int)s->pid, m->welcome.ractors);
	if (s->job->mode == TRC_MODE_INTERACTIVE) {
		start_interactive(s, m);
		return;
	}
	trc_buf_init(&b);
	if (s->job->mode == TRC_MODE_TRACE)
		ask_trace(s, m, &b);
	else if (s->job->mode == TRC_MODE_TOP)
		ask_top(s, m, &b);
	else
		ask_eval(s, m, &b);
	/* A dump request carries its file: the agent writes there, whoever and wherever it is. */
	send_buf_fd(s, &b, passes_file(s) ? s->heap.fd : -1);
}

static void
on_error(struct trc_session *s, const struct trc_message *m)
{
	enum trc_exit code = m->error.code == TRC_ERR_DENIED ? TRC_EXIT_DENIED : TRC_EXIT_ERROR;

	s->busy = m->error.code == TRC_ERR_BUSY;
	s->unsupported = m->error.code == TRC_ERR_UNSUPPORTED;

	char *text;

	/*
	 * Only an app that turned evals off gets this code (an agent still loading, whose check
	 * raised, says so with another): the client words it, with where it is turned off.
	 */
	if (m->error.code == TRC_ERR_EVAL_DISABLED) {
		finish(s, code, "eval is disabled in process %d (TRACER_AGENT_EVAL=0 or "
		       "TracerAgent.allow_eval = false)", (int)s->pid);
		return;
	}
	if (m->error.message.len == 0) {
		finish(s, code, "process %d refused: error %" PRIu32, (int)s->pid, m->error.code);
		return;
	}
	text = trc_escape_dup(m->error.message.ptr, m->error.message.len);
	finish(s, code, "%s", text);
	free(text);
}

/* A spec that matched nothing is worth a warning, named by the spec as the user wrote it. */
static void
on_spec(struct trc_session *s, const struct trc_message *m)
{
	const struct trc_str *msg = &m->spec.message;
	uint32_t i = m->spec.index;
	const char *spec = i < s->job->nspecs ? s->job->specs[i].text : "?";

	bool optional = i < s->job->nspecs && s->job->specs[i].optional;
	/* What the agent says of a spec that only found nothing (others say why it failed). */
	bool nothing = msg->len == 0 || (msg->len == 17 && memcmp(msg->ptr, "matched no method", 17) == 0);

	/* A spec waiting for its class to be defined will match: it is no reason to give up. */
	if (i < s->job->nspecs && (m->spec.matched != 0 || m->spec.pending || optional))
		s->matched[i] = true;
	/*
	 * Quiet: a tracer file's line, which names what an app may never load; and with --exec a
	 * class or method the program has yet to define, which it usually has not before its
	 * first line (a method defined later is traced from then on).
	 */
	if (m->spec.skipped.len > 0) {
		char *text = trc_escape_dup(m->spec.skipped.ptr, m->spec.skipped.len);

		trc_output_note(s->job->out, "%s%s: not traced: %s", s->tag, spec, text);
		free(text);
	}
	if ((m->spec.matched != 0 && msg->len == 0) || optional ||
	    (s->job->exec && (m->spec.pending || nothing)))
		return;
	if (msg->len > 0) {
		/* matched: where what it names comes from; else why nothing matched */
		char *text = trc_escape_dup(msg->ptr, msg->len);

		trc_output_note(s->job->out, "%s%s: %s", s->tag, spec, text);
		free(text);
	} else {
		trc_output_note(s->job->out, "%s%s: matched no method", s->tag, spec);
	}
}

/* Wrappers going in place (the attach waits as long as they do) or coming away. */
static void
on_progress(struct trc_session *s, const struct trc_message *m)
{
	if (s->state == S_STARTING) {
		ev_timer_stop(s->loop, &s->timeout_w);
		ev_timer_set(&s->timeout_w, s->job->timeout, 0);
		ev_timer_start(s->loop, &s->timeout_w);
	}
	trc_progress_update(s->pid, (int)m->progress.step, m->progress.done, m->progress.total);
}

static void
on_started(struct trc_session *s, const struct trc_message *m)
{
	(void)m;
	trc_progress_end(s->pid);
	/* Stopped (Ctrl-C, --duration) while the agent was putting its wrappers in place: it
	 * finished that before it read the detach, and they come off with it. */
	if (s->state == S_DETACHING) {
		s->traced = true;
		return;
	}
	ev_timer_stop(s->loop, &s->timeout_w);
	s->state = S_TRACING;
	s->traced = true;
	/*
	 * A spool keeps the bytes and reads them later: decoding a flood's calls as they come
	 * would only count them, and took the core that the agent's thread needs to send them.
	 */
	if (s->spool != NULL)
		trc_conn_skip_calls(&s->conn, &s->received);
	trc_output_note(s->job->out, "attached to process %d", (int)s->pid);
	start_duration(s);
	ev_timer_start(s->loop, &s->alive_w);
	if (s->cbs->started != NULL)
		s->cbs->started(s, s->ctx);
}

/* -i: the answer to the question out, or to its interrupt (which says nothing worth showing). */
static void
on_answer(struct trc_session *s, const struct trc_message *m)
{
	uint32_t id = m->eval.id;

	if (id != 0 && id == s->interrupting) {
		s->interrupting = 0;
		return;
	}
	if (id == 0 || id != s->asking) {
		finish(s, TRC_EXIT_ERROR, "protocol error from process %d: EVAL reply to id %" PRIu32,
		       (int)s->pid, id);
		return;
	}
	s->asking = 0;
	s->cbs->answer(s, s->ctx, m->eval.ok, m->eval.text.ptr, m->eval.text.len);
}

static void
on_eval(struct trc_session *s, const struct trc_message *m)
{
	const struct eval_mode *e = &eval_modes[s->job->mode];
	const struct trc_str *t = &m->eval.text;

	if (s->state == S_DETACHING)    /* answered after we gave up on it */
		return;
	unwatch(s);
	if (s->state == S_INTERACTIVE) {
		on_answer(s, m);
		return;
	}
	if (m->eval.id != EVAL_ID) {
		finish(s, TRC_EXIT_ERROR, "protocol error from process %d: EVAL reply to id %" PRIu32,
		       (int)s->pid, m->eval.id);
		return;
	}
	if (m->eval.ok) {
		e->print(s, *t);
	} else if (passes_file(s) && trc_newfile_check(&s->heap) < 0) {
		/* A full file system, as the process's Ruby words it (3.4: "IOError: full buffer"). */
		remember(s, TRC_EXIT_ERROR, "%s failed: '%s' cannot be whole: %s (removed)",
			 dump_name(s), s->heap.path, strerror(errno));
	} else {
		char *text = trc_escape_lines_dup(t->ptr, t->len);

		remember(s, TRC_EXIT_ERROR, "%s %s", e->failure, text);
		free(text);
	}
	detach(s);
}

static void
on_detached(struct trc_session *s, const struct trc_message *m)
{
	uint64_t lost = m->detached.lost;

	if (s->state == S_EVALING) {
		finish(s, TRC_EXIT_ERROR, "process %d detached without answering", (int)s->pid);
		return;
	}
	/* The agent went without memory it asked for: what it would have made is missing. */
	if (m->detached.nomem > 0)
		trc_output_note(s->job->out, "%sprocess %d ran out of memory %" PRIu64 " times: some "
				"events, rows or replies are missing", s->tag, (int)s->pid, m->detached.nomem);
	if (trc_sink_active(&s->sink)) {
		uint64_t reported = trc_sink_lost(&s->sink);

		close_sink(s);       /* ends its open line before the notes */
		if (lost > reported)
			trc_output_note(s->job->out, "%s%" PRIu64 " events lost", s->tag, lost - reported);
		/* sent + lost is what the agent saw; sent must equal received on a working link. */
		if (s->job->stats)
			trc_output_note(s->job->out, "%sprocess %d: %" PRIu64 " events sent, %" PRIu64
			    " received, %" PRIu64 " lost", s->tag, (int)s->pid, m->detached.events,
			    s->received, lost);
		trc_output_note(s->job->out, "detached from process %d", (int)s->pid);
	} else if (s->job->mode == TRC_MODE_TOP || s->job->mode == TRC_MODE_INTERACTIVE) {
		trc_output_note(s->job->out, "detached from process %d", (int)s->pid);
	}
	finish(s, TRC_EXIT_OK, NULL);
}

/* The agent's counts since its previous TOP: into the table shared by every target. */
static void
on_top(struct trc_session *s, const struct trc_message *m)
{
	struct trc_message rows;

	if (s->job->mode != TRC_MODE_TOP || (m->type == TRC_MSG_PROFILE) != (s->job->top.profile != NULL)) {
		finish(s, TRC_EXIT_ERROR, "protocol error from process %d: %s while %s", (int)s->pid,
		       trc_msg_name(m->type), s->job->mode != TRC_MODE_TOP ? "tracing" : "counting");
		return;
	}
	if (m->type == TRC_MSG_PROFILE) {
		/* The interval's stacks, as the rows of the table they make. */
		trc_profile_feed(s->job->top.profile, s->pid, m, &rows);
		m = &rows;
	}
	trc_top_feed(s->job->top.table, s->pid, m);
	if (s->job->top.metrics != NULL)
		trc_metrics_feed(s->job->top.metrics, s->pid, m, ev_now(s->loop));
	if (!s->counted && s->job->mode == TRC_MODE_TOP) {
		s->counted = true;
		if (s->cbs->counted != NULL)
			s->cbs->counted(s, s->ctx);
	}
}

/*
 * A spool formats later what it keeps now, so its printer's bound on names (replay.h) would
 * be met only then, after the disk took gigabytes of an agent that never stops defining
 * methods: the bound is kept here as the definitions come. False once it is passed.
 */
static bool
names_fit(struct trc_session *s, const struct trc_message *m)
{
	size_t n = 0;

	if (s->spool == NULL)
		return true;
	if (m->type == TRC_EV_METHOD)
		n = (size_t)m->method.cls.len + m->method.sep.len + m->method.name.len +
		    m->method.path.len;
	else if (m->type == TRC_EV_THREAD)
		n = m->thread.name.len;
	if (n > TRC_REPLAY_MAX_NAME_BYTES - s->name_bytes)
		return false;
	s->name_bytes += n;
	return true;
}

static void
on_event(struct trc_session *s, const struct trc_message *m)
{
	if ((m->type >= TRC_EV_CALL && m->type <= TRC_EV_SLOW) || m->type == TRC_EV_GC ||
	    trc_mark_type(m->type) != NULL)
		s->received++;
	if (!names_fit(s, m))
		finish(s, TRC_EXIT_ERROR, "protocol error from process %d: method and thread names "
		       "past %u MiB", (int)s->pid, TRC_REPLAY_MAX_NAME_BYTES >> 20);
	else if (!trc_sink_active(&s->sink))
		finish(s, TRC_EXIT_ERROR, "protocol error from process %d: trace event while not "
		       "tracing", (int)s->pid);
	else if (trc_sink_feed(&s->sink, m) < 0)
		finish(s, TRC_EXIT_ERROR, "protocol error from process %d: %s", (int)s->pid,
		       trc_sink_error(&s->sink));
}

/*
 * Which message may come in which state, and what it does: ON_<NAME> for every message of
 * TRC_MESSAGES (a message without one does not compile); every trace event (TRC_EVENTS,
 * TRC_MARKS) goes to on_event while tracing. A detach may cross SPEC, STARTED and EVAL
 * (Ctrl-C while attaching): they come all the same.
 */
#define ON_WELCOME IN(S_WELCOMING), on_welcome
#define ON_ERROR CONNECTED, on_error
#define ON_SPEC IN(S_STARTING) | IN(S_DETACHING), on_spec
#define ON_STARTED IN(S_STARTING) | IN(S_DETACHING), on_started
#define ON_EVAL IN(S_EVALING) | IN(S_INTERACTIVE) | IN(S_DETACHING), on_eval
#define ON_DETACHED WELCOMED, on_detached
#define ON_TOP TRACE_STATES, on_top
#define ON_PROGRESS IN(S_STARTING) | IN(S_DETACHING), on_progress
#define ON_PROFILE TRACE_STATES, on_top

static const struct msg_handler {
	uint32_t type;
	unsigned states;
	void (*fn)(struct trc_session *, const struct trc_message *);
} msg_handlers[] = {
	/* Nearly every message: first (their rows below are not reached). */
	{ TRC_EV_CALL, TRACE_STATES, on_event },
	{ TRC_EV_RETURN, TRACE_STATES, on_event },
#define TRC_X(NAME, name, type, fields) { TRC_MSG_##NAME, ON_##NAME },
	TRC_MESSAGES(TRC_X)
#undef TRC_X
#define TRC_X(NAME, name, type, fields) { TRC_EV_##NAME, TRACE_STATES, on_event },
	TRC_EVENTS(TRC_X)
#undef TRC_X
#define TRC_X(NAME, name, type, title, help) { TRC_EV_##NAME, TRACE_STATES, on_event },
	TRC_MARKS(TRC_X)
#undef TRC_X
};

static int
on_msg(void *ctx, const struct trc_message *m)
{
	struct trc_session *s = ctx;

	for (size_t i = 0; i < sizeof(msg_handlers) / sizeof(msg_handlers[0]); i++) {
		if (msg_handlers[i].type != m->type)
			continue;
		if (msg_handlers[i].states & IN(s->state))
			msg_handlers[i].fn(s, m);
		else
			finish(s, TRC_EXIT_ERROR, "protocol error from process %d: unexpected %s",
			       (int)s->pid, trc_msg_name(m->type));
		return s->state == S_DONE ? -1 : 0;
	}
	finish(s, TRC_EXIT_ERROR, "protocol error from process %d: message type %" PRIu32,
	       (int)s->pid, m->type);
	return -1;
}

/*
 * The connection ends without DETACHED. If the process is gone it exited; but the socket
 * closes before the process is reaped, so look a few times before calling it a lost
 * connection.
 */
static void
on_end(void *ctx, enum trc_conn_end why, const char *detail)
{
	struct trc_session *s = ctx;

	if (why == TRC_CONN_PROTOCOL) {
		finish(s, TRC_EXIT_ERROR, "protocol error from process %d: %s", (int)s->pid, detail);
		return;
	}
	/*
	 * The program tracer started ended, or exec'd another (which may connect again): either
	 * way this part of the trace is complete, and tracer, its parent, learns which by itself.
	 */
	if (s->job->exec) {
		close_sink(s);
		finish(s, TRC_EXIT_OK, NULL);
		return;
	}
	trc_conn_close(&s->conn);
	stop_timers(s);
	s->closed_at = ev_now(s->loop);
	s->state = S_CLOSED;
	s->truncated = why == TRC_CONN_TRUNCATED;
	s->gone_checks = GONE_CHECKS;
	ev_timer_start(s->loop, &s->gone_w);
}

static void
on_gone_check(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_session *s = w->data;

	(void)loop, (void)revents;
	if (trc_proc_check(s->pid) == TRC_PROC_GONE) {
		close_sink(s);
		trc_output_note(s->job->out, "process %d exited", (int)s->pid);
		finish(s, TRC_EXIT_EXITED, NULL);
	} else if (--s->gone_checks <= 0 && s->truncated) {
		/* The process lives on, so it was not killed mid-write: its agent broke a message. */
		finish(s, TRC_EXIT_ERROR, "protocol error from process %d: connection closed inside "
		       "a message", (int)s->pid);
	} else if (s->gone_checks <= 0) {
		finish(s, TRC_EXIT_ERROR, "lost connection to process %d", (int)s->pid);
	}
}

/* A forked child may hold the socket open after the target exits: check the pid too. */
static void
on_alive_check(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_session *s = w->data;

	(void)loop, (void)revents;
	if (trc_proc_check(s->pid) == TRC_PROC_GONE)
		on_end(s, TRC_CONN_EOF, "process gone");
}

static void
on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_session *s = w->data;
	char why[512];

	(void)loop, (void)revents;

	if (s->state == S_ATTACHING && s->inject != NULL)
		finish(s, TRC_EXIT_ERROR, "%s", trc_inject_stalled(s->inject, s->job->timeout));
	else if (s->state == S_ATTACHING && trc_sandbox_explain(s->pid, why, sizeof(why)) == 0)
		finish(s, TRC_EXIT_ERROR, "process %d did not answer within %g s: %s", (int)s->pid,
		       s->job->timeout, why);
	else if (s->state == S_ATTACHING && s->loaded_here)
		finish(s, TRC_EXIT_ERROR, "process %d did not answer within %g s of tracer loading the agent "
		       "into it: a process still starting, or a busy machine, may need a longer --timeout",
		       (int)s->pid, s->job->timeout);
	else if (s->state == S_ATTACHING)
		finish(s, TRC_EXIT_ERROR, "process %d did not answer; is tracer_agent loaded?",
		       (int)s->pid);
	else
		finish(s, TRC_EXIT_ERROR, "process %d did not answer within %g s", (int)s->pid,
		       s->job->timeout);
}

static void
on_duration(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_session *s = w->data;

	(void)loop, (void)revents;
	if (s->state == S_EVALING)
		remember(s, TRC_EXIT_ERROR, "process %d did not answer within %g s", (int)s->pid,
			 s->job->duration);
	if (s->state == S_EVALING || s->state == S_STARTING || s->state == S_TRACING ||
	    s->state == S_INTERACTIVE)
		detach(s);
}

static void
on_detach_wait(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_session *s = w->data;

	(void)w, (void)revents;
	if (s->conn.fd < 0 || ev_now(loop) - s->conn.last_read >= STILL_SENDING) {
		finish(s, TRC_EXIT_ERROR, "process %d did not confirm the detach within %g s",
		       (int)s->pid, DETACH_WAIT);
		return;
	}
	close_sink(s);          /* what came is formatted, the notes after it */
	trc_output_note(s->job->out, "%sprocess %d still sent its trace %g s after the detach: the "
			"rest is left out", s->tag, (int)s->pid, DETACH_WAIT);
	trc_output_note(s->job->out, "detached from process %d", (int)s->pid);
	finish(s, TRC_EXIT_OK, NULL);
}

/*
 * The spool keeps the bytes; its events are formatted when the loop has nothing else to do,
 * unless they come as a flood: formatting a flood as it comes takes CPU time the app and the
 * agent need (on two cores, the agent then drops events), so then they wait in the spool until
 * the flood ends or tracing does.
 */
#define PUMP_SLICE 4096                 /* messages formatted at a time, a millisecond or so */
#define RATE_EVERY 0.1                  /* seconds */
#define FLOOD_BYTES (400u << 10)        /* a flood: more than this in RATE_EVERY (4 MB/s,
					 * some 300 000 events a second) */

static void
spool_tap(void *ctx, const void *p, size_t n)
{
	struct trc_session *s = ctx;

	if (s->spool == NULL)   /* tracing is over */
		return;
	trc_spool_put(s->spool, p, n);
	s->recent += n;
	if (s->recent > FLOOD_BYTES) {
		s->flood = true;
		ev_idle_stop(s->loop, &s->pump_w);
	} else if (!s->flood) {
		ev_idle_start(s->loop, &s->pump_w);
	}
	if (!ev_is_active(&s->rate_w))
		ev_timer_again(s->loop, &s->rate_w);
}

static void
on_pump(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct trc_session *s = w->data;

	(void)revents;
	if (s->spool == NULL || trc_spool_pump(s->spool, PUMP_SLICE) < 0 || !trc_spool_behind(s->spool))
		ev_idle_stop(loop, w);
}

static void
on_rate(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_session *s = w->data;

	(void)revents;
	s->flood = s->recent > FLOOD_BYTES;
	if (s->flood)
		ev_idle_stop(loop, &s->pump_w);
	else if (s->spool != NULL && trc_spool_behind(s->spool))
		ev_idle_start(loop, &s->pump_w);
	else if (s->recent == 0)
		ev_timer_stop(loop, w);
	s->recent = 0;
}

static void
on_attached(struct trc_attach *a, int fd, void *ctx)
{
	struct trc_session *s = ctx;
	struct trc_buf b;

	if (fd < 0) {
		finish(s, a->failure == TRC_ATTACH_DENIED ? TRC_EXIT_DENIED : TRC_EXIT_ERROR, "%s",
		       a->error);
		return;
	}
	s->state = S_WELCOMING;
	trc_conn_init(&s->conn, s->loop, fd, on_msg, on_end, s);
	if (s->spool != NULL)
		trc_conn_tap(&s->conn, spool_tap, s);
	trc_buf_init(&b);
	trc_encode_hello(&b, (int32_t)getpid());
	send_buf(s, &b);
}

static void
attach(struct trc_session *s)
{
	if (trc_attach_start(&s->attach, s->loop, s->pid, on_attached, s) < 0)
		on_attached(&s->attach, -1, s);
}

/* The agent is in: said once, then the attach goes as to any process that loaded it. */
static void
injected(struct trc_session *s)
{
	struct trc_inject *in = s->inject;

	unwatch(s);
	s->loaded_here = in->written;
	if (in->written)
		trc_output_note(s->job->out, "%sloaded tracer_agent into process %d (Ruby %s; the process "
				"was held still %.2f ms)", s->tag, (int)s->pid, in->ruby.version,
				(double)in->frozen_ns / 1e6);
	s->inject = NULL;
	free(in);
	/* The attach gets its own --timeout: the load may have taken most of the first. */
	ev_timer_stop(s->loop, &s->timeout_w);
	ev_timer_set(&s->timeout_w, s->job->timeout, 0);
	ev_timer_start(s->loop, &s->timeout_w);
	attach(s);
}

/* Where a load stands: true while it goes on (or ended the session), false to attach now. */
static bool
inject_step(struct trc_session *s)
{
	struct trc_inject *in = s->inject;

	switch (in->phase) {
	case TRC_INJECT_LOADED:
		ev_timer_stop(s->loop, &s->inject_w);
		injected(s);
		return true;
	case TRC_INJECT_FAILED:
		finish(s, in->denied ? TRC_EXIT_DENIED : TRC_EXIT_ERROR, "%s", in->error);
		return true;
	case TRC_INJECT_QUEUED:
	case TRC_INJECT_RAN:
		break;
	}
	if (!ev_is_active(&s->inject_w))
		ev_timer_start(s->loop, &s->inject_w);
	return true;
}

static void
on_inject(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_session *s = w->data;

	(void)loop, (void)revents;
	trc_inject_poll(s->inject);
	inject_step(s);
}

/*
 * A process that never loaded the agent gets it first (inject.c), unless --no-inject: then,
 * or when it has the agent already, false: attach now.
 */
static bool
start_inject(struct trc_session *s)
{
	char *lib;

	if (!trc_inject_enabled() || s->job->exec || trc_inject_loaded(s->pid))
		return false;
	s->inject = xcalloc(1, sizeof(*s->inject));
	watch(s, TRC_PROGRESS_LOAD);
	lib = trc_exec_agent_lib();
	trc_inject_start(s->inject, s->pid, lib);
	free(lib);
	if (s->inject->phase == TRC_INJECT_LOADED && !s->inject->written) {
		unwatch(s);
		free(s->inject);
		s->inject = NULL;
		return false;
	}
	return inject_step(s);
}

static void
init_timer(struct trc_session *s, ev_timer *w, void (*cb)(struct ev_loop *, ev_timer *, int),
	   double after, double repeat)
{
	ev_timer_init(w, cb, after, repeat);
	w->data = s;
}

struct trc_session *
trc_session_new(struct ev_loop *loop, const struct trc_job *job, pid_t pid, const char *text,
		const struct trc_session_cbs *cbs, void *ctx)
{
	struct trc_session *s = xcalloc(1, sizeof(*s));
	struct trc_trace_opts topts = job->trace;

	s->loop = loop;
	s->job = job;
	s->pid = pid;
	s->text = xstrdup(text ? text : "");
	s->matched = xcalloc(job->nspecs ? job->nspecs : 1, sizeof(*s->matched));
	s->cbs = cbs;
	s->ctx = ctx;
	s->conn.fd = -1;
	if (job->label_pids)
		snprintf(s->tag, sizeof(s->tag), "[%d] ", (int)pid);
	init_timer(s, &s->timeout_w, on_timeout, job->timeout, 0);
	init_timer(s, &s->duration_w, on_duration, 0, 0);
	init_timer(s, &s->detach_w, on_detach_wait, 0, 0);
	init_timer(s, &s->alive_w, on_alive_check, ALIVE_EVERY, ALIVE_EVERY);
	init_timer(s, &s->gone_w, on_gone_check, GONE_EVERY, GONE_EVERY);
	init_timer(s, &s->inject_w, on_inject, INJECT_EVERY, INJECT_EVERY);
	init_timer(s, &s->watch_w, on_watch, 0, WATCH_EVERY);
	if (job->mode == TRC_MODE_TRACE && job->export != NULL) {
		s->sink = trc_export_sink(job->export, pid);
	} else if (job->mode == TRC_MODE_TRACE) {
		topts.pid = job->label_pids ? (int)pid : 0;
		s->sink = trc_trace_sink(trc_trace_new(job->out, &topts, job->specs, job->nspecs));
	}
	ev_idle_init(&s->pump_w, on_pump);
	s->pump_w.data = s;
	init_timer(s, &s->rate_w, on_rate, 0, RATE_EVERY);
	s->flood = true;        /* until the first RATE_EVERY says otherwise */
	if (trc_sink_active(&s->sink) && job->spool_dir != NULL) {
		s->spool = trc_spool_new(job->spool_dir, s->sink, job->out);
		if (s->spool != NULL) {
			trc_spool_report(s->spool, &s->cut_short);
			s->sink = trc_spool_sink(s->spool);
		}
		else
			trc_output_note(job->out, "%sno scratch file beside the output (%s): events are "
					"formatted as they come", s->tag, strerror(errno));
	}
	return s;
}

/*
 * A process that is no Ruby would leave the attach waiting for --timeout: its maps say so at
 * once; so for a Ruby without the agent, with --no-inject (else the agent is loaded into it).
 * Not for --exec's program, which may still be loading it (--wait). False when the session
 * is over for that.
 */
static bool
may_have_agent(struct trc_session *s)
{
	switch (s->job->exec ? TRC_PROC_UNSEEN : trc_proc_runtime(s->pid)) {
	case TRC_PROC_OTHER:
		finish(s, TRC_EXIT_ERROR, "process %d is no Ruby program: /proc/%d/maps shows no "
		       "libruby and no ruby executable", (int)s->pid, (int)s->pid);
		return false;
	case TRC_PROC_RUBY:
		if (trc_inject_enabled())
			break;
		finish(s, TRC_EXIT_ERROR, "process %d runs Ruby without tracer_agent: /proc/%d/maps "
		       "shows no %s, and --no-inject keeps tracer from loading it (require "
		       "'tracer_agent' in the app, or start it with tracer -x)",
		       (int)s->pid, (int)s->pid, TRC_PROC_AGENT_FILE);
		return false;
	case TRC_PROC_AGENT:
	case TRC_PROC_UNSEEN:
		break;
	}
	return true;
}

/*
 * A process that loaded the agent itself makes the agent's calls when it is rung, under
 * whatever confines it: its seccomp filter and limits are read first (sandbox.c), as before a
 * load. False when the session is over for that.
 */
static bool
confinement_allows(struct trc_session *s)
{
	char why[1024];
	uint64_t held;
	bool denied;

	if (s->job->exec || trc_sandbox_check(s->pid, TRC_SANDBOX_ATTACH, &held, &denied, why, sizeof(why)) == 0)
		return true;
	finish(s, denied ? TRC_EXIT_DENIED : TRC_EXIT_ERROR, "%s", why);
	return false;
}

void
trc_session_start(struct trc_session *s)
{
	/* Made before attaching: a file that cannot be made is not worth the target's time. */
	if (passes_file(s) && trc_newfile_open(&s->heap, s->text, 0600, s->job->dump_named) < 0) {
		finish(s, TRC_EXIT_ERROR, "cannot create the %s file beside '%s': %s", dump_name(s),
		       s->text, strerror(errno));
		return;
	}
	if (!may_have_agent(s))
		return;
	s->state = S_ATTACHING;
	ev_timer_start(s->loop, &s->timeout_w);
	if (!start_inject(s) && confinement_allows(s))
		attach(s);
}

void
trc_session_adopt(struct trc_session *s, int fd)
{
	s->state = S_ATTACHING;
	ev_timer_start(s->loop, &s->timeout_w);
	on_attached(&s->attach, fd, s);
}

void
trc_session_stop(struct trc_session *s, enum trc_stop_reason why)
{
	const char *what = why == TRC_STOP_SIGNAL ? "interrupted" :
			   why == TRC_STOP_OUTPUT ? "output closed" : "stopped";

	switch (s->state) {
	case S_IDLE:
	case S_ATTACHING:
	case S_WELCOMING:
		if (why == TRC_STOP_END)
			finish(s, TRC_EXIT_OK, NULL);
		else if (s->state == S_IDLE)
			finish(s, TRC_EXIT_ERROR, "%s before attaching to process %d", what, (int)s->pid);
		else
			finish(s, TRC_EXIT_ERROR, "%s before process %d answered", what, (int)s->pid);
		break;
	case S_EVALING:
		/* The agent interrupts a session's evals when it ends (eval.c). */
		remember(s, TRC_EXIT_ERROR, "%s before process %d answered: the code stops there too",
			 what, (int)s->pid);
		detach(s);
		break;
	case S_INTERACTIVE:
		if (s->asking != 0)
			remember(s, TRC_EXIT_ERROR, "%s before process %d answered", what, (int)s->pid);
		detach(s);
		break;
	case S_STARTING:
	case S_TRACING:
		detach(s);
		break;
	case S_DETACHING:
	case S_CLOSED:
	case S_DONE:
		break;
	}
}

static void
ask(struct trc_session *s, uint32_t id, enum trc_eval_kind kind, const char *text)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_encode_eval(&b, id, kind, text);
	send_buf(s, &b);
}

int
trc_session_ask(struct trc_session *s, enum trc_eval_kind kind, const char *text)
{
	if (s->state != S_INTERACTIVE || s->asking != 0)
		return -1;
	s->asking = ++s->next_id;
	ask(s, s->asking, kind, text);
	return 0;
}

void
trc_session_interrupt(struct trc_session *s)
{
	if (s->state != S_INTERACTIVE || s->asking == 0 || s->interrupting != 0)
		return;
	s->interrupting = ++s->next_id;
	ask(s, s->interrupting, TRC_EVAL_INTERRUPT, "");
}

bool
trc_session_idle(struct trc_session *s, double now)
{
	return trc_sink_idle(&s->sink, now);
}

void
trc_session_abort(struct trc_session *s)
{
	finish(s, TRC_EXIT_ERROR, "interrupted; not waiting for process %d to detach", (int)s->pid);
}

void
trc_session_free(struct trc_session *s)
{
	if (s->state == S_ATTACHING && s->inject == NULL)
		trc_attach_stop(&s->attach);
	trc_conn_close(&s->conn);
	stop_timers(s);
	close_sink(s);
	trc_newfile_release(&s->heap);
	free(s->inject);
	free(s->text);
	free(s->cwd);
	free(s->error);
	free(s->matched);
	free(s);
}

pid_t
trc_session_pid(const struct trc_session *s)
{
	return s->pid;
}

bool
trc_session_started(const struct trc_session *s)
{
	return s->state == S_TRACING || s->state == S_DETACHING || s->state == S_CLOSED ||
	       s->state == S_DONE;
}

bool
trc_sessions_all_started(struct trc_session *const *sessions, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!trc_session_started(sessions[i]))
			return false;
	return true;
}

bool
trc_sessions_all_counted(struct trc_session *const *sessions, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!sessions[i]->counted && sessions[i]->state != S_DONE)
			return false;
	return true;
}

bool
trc_session_finished(const struct trc_session *s)
{
	return s->state == S_DONE;
}

bool
trc_session_busy(const struct trc_session *s)
{
	return s->busy;
}

bool
trc_session_unsupported(const struct trc_session *s)
{
	return s->unsupported;
}

bool
trc_session_traced(const struct trc_session *s)
{
	return s->traced;
}

bool
trc_session_spec_matched(const struct trc_session *s, size_t i)
{
	return i < s->job->nspecs && s->matched[i];
}

double
trc_session_closed_at(const struct trc_session *s)
{
	return s->closed_at;
}

const char *
trc_session_cwd(const struct trc_session *s)
{
	return s->cwd;
}

bool
trc_session_cut_short(const struct trc_session *s)
{
	return s->cut_short;
}

enum trc_exit
trc_session_status(const struct trc_session *s)
{
	return s->code;
}

const char *
trc_session_error(const struct trc_session *s)
{
	return s->error;
}
