/* session.h: one target from attach to detach: the conversation with its agent and its outcome. */
#ifndef TRC_SESSION_H
#define TRC_SESSION_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "encode.h"
#include "export.h"
#include "output.h"
#include "spec.h"
#include "profile.h"
#include "metrics.h"
#include "top.h"
#include "trace.h"

/* The client's exit codes; with several targets the highest one wins. */
enum trc_exit {
	TRC_EXIT_OK = 0,
	TRC_EXIT_ERROR = 1,     /* attach failed, agent refused, eval raised, protocol error... */
	TRC_EXIT_USAGE = 2,     /* bad options or method specs */
	TRC_EXIT_EXITED = 3,    /* the target exited while attached */
	TRC_EXIT_DENIED = 4,    /* permission denied */
	TRC_EXIT_CANNOT_RUN = 126,      /* --exec: the command exists but could not be run */
	TRC_EXIT_NOT_FOUND = 127,       /* --exec: no such command */
};

enum trc_mode {
	TRC_MODE_TRACE = 0,     /* -m, -f, -s */
	TRC_MODE_EVAL = 1,      /* -e */
	TRC_MODE_HEAPDUMP = 2,  /* --heapdump */
	TRC_MODE_BACKTRACES = 3,/* --backtraces */
	TRC_MODE_TOP = 4,       /* --top */
	TRC_MODE_INTERACTIVE = 5,/* -i: questions asked by the owner (trc_session_ask) */
	TRC_MODE_BACKTRACE = 6, /* --backtrace */
	TRC_MODE_FORK = 7,      /* --fork */
	TRC_MODE_SHAPESDUMP = 8,/* --shapesdump */
	TRC_MODE_MEMORY = 9,    /* --memory */
};

enum trc_stop_reason {
	TRC_STOP_SIGNAL = 0,    /* SIGINT, SIGTERM, SIGHUP */
	TRC_STOP_OUTPUT = 1,    /* nobody reads the output any more */
	TRC_STOP_END = 2,       /* the run is over (a spec matched nothing, --duration with --ps):
				 * a target not attached yet is left alone, without an error */
};

/* What to do with each target; built by cli.c, read-only to sessions, outlives them. */
struct trc_job {
	enum trc_mode mode;
	uint32_t trace_flags;   /* enum trc_trace_flag */
	uint32_t slow_ms;
	const struct trc_spec *specs;
	size_t nspecs;
	struct trc_trace_opts trace;
	struct trc_export *export;      /* --format other than text: the exporter every target
					 * feeds; NULL: each target has a call-tree printer */
	struct trc_scope scope;         /* --all, --filter, --ignore: for -f, -s and --top */
	struct {
		enum trc_top_mode mode;
		uint32_t interval_ms;
		uint32_t flags;                 /* enum trc_top_flag */
		uint32_t sample;                /* --sample: 1 counts every allocation; profile: Hz */
		uint32_t cap;                   /* profile: the profiler's own time, millionths */
		struct trc_top *table;          /* where every target's TRC_MSG_TOP rows go */
		struct trc_metrics *metrics;    /* --metrics: each target's rows too, or NULL */
		struct trc_profile *profile;    /* profile: every target's TRC_MSG_PROFILE */
	} top;
	bool label_pids;        /* several targets: "[PID] " before each of their lines */
	bool exec;              /* --exec: tracer started the target, which connects itself,
				 * maybe again after an exec; its classes are mostly not loaded yet */
	bool stats;             /* --stats: event counts of both sides at detach */
	bool dump_named;        /* --heapdump FILE, --shapesdump FILE: the user named the file
				 * (it replaces what is there); else tracer did (newfile.h) */
	double timeout;         /* seconds for the agent to answer the attach */
	double duration;        /* seconds of tracing before detaching; 0: until stopped */
	struct trc_output *out;
	/* Tracing to a file: the directory of each target's spool (spool.h); NULL: its events
	 * are formatted as they come. */
	const char *spool_dir;
};

struct trc_session;

typedef void trc_session_fn(struct trc_session *s, void *ctx);

/* What the session tells its owner, from the loop. */
struct trc_session_cbs {
	/* The agent's hooks are on, after its SPEC replies (trc_session_spec_matched). Tracing
	 * and --top only; may be NULL. */
	trc_session_fn *started;
	/* Once, when the session is over (see trc_session_status/error). */
	trc_session_fn *done;
	/* -i: attached, and ready for trc_session_ask. */
	trc_session_fn *ready;
	/* -i: the agent's answer to trc_session_ask (ok false: text is "Class: message"); text
	 * lasts until the callback returns. */
	void (*answer)(struct trc_session *s, void *ctx, bool ok, const char *text, size_t len);
	/* --top: the agent's first counts are in the table (a quarter of a second after its
	 * hooks went on, then every interval). May be NULL. */
	trc_session_fn *counted;
};

/* A session for pid; text is what its eval sends: the code, the dump's path, the number of
 * frames, or "" (copied); cbs must outlive it. Main thread. */
struct trc_session *trc_session_new(struct ev_loop *loop, const struct trc_job *job, pid_t pid,
				    const char *text, const struct trc_session_cbs *cbs,
				    void *ctx);
/* Starts attaching; failures are reported through done (maybe before this returns). */
void trc_session_start(struct trc_session *s);
/*
 * Starts from a connection the target made itself (--exec; fd non-blocking, the session owns
 * it): no attach, the hello goes out now, and the timeout runs from here. Main thread.
 */
void trc_session_adopt(struct trc_session *s, int fd);
/* Detaches cleanly: waits for the agent's DETACHED (at most 2 s) before done. */
void trc_session_stop(struct trc_session *s, enum trc_stop_reason why);
/*
 * -i, once ready: asks the agent a TRC_CMD_EVAL of kind with text (copied); the answer comes
 * through cbs->answer. One question at a time: returns 0, or -1 if one is out already or the
 * session is not ready (or over). Main thread.
 */
int trc_session_ask(struct trc_session *s, enum trc_eval_kind kind, const char *text);
/* -i: asks the agent to interrupt the question out (TRC_EVAL_INTERRUPT), which is answered
 * then, by the exception if it was running Ruby. Nothing happens when no question is out. */
void trc_session_interrupt(struct trc_session *s);
/* The loop idles (now: its time in seconds): the trace printer may let held lines go. True
 * while it still holds some (trace.h: call again within TRC_TRACE_HOLD_SECS). */
bool trc_session_idle(struct trc_session *s, double now);
/* Drops the connection now, without waiting for the agent. */
void trc_session_abort(struct trc_session *s);
void trc_session_free(struct trc_session *s);

pid_t trc_session_pid(const struct trc_session *s);
enum trc_exit trc_session_status(const struct trc_session *s);
/* True once the agent's hooks are on (STARTED), or the session is over: nothing to wait for. */
bool trc_session_started(const struct trc_session *s);
/* True when every one of sessions[0..n) is started (an empty list is). */
bool trc_sessions_all_started(struct trc_session *const *sessions, size_t n);
/* True when every one of sessions[0..n) sent its first --top counts, or is over. */
bool trc_sessions_all_counted(struct trc_session *const *sessions, size_t n);
/* True once done has been called. */
bool trc_session_finished(const struct trc_session *s);
/* True if the agent refused because another client traces the process (TRC_ERR_BUSY). */
bool trc_session_busy(const struct trc_session *s);
/* True if the agent refused because its Ruby cannot do what was asked (TRC_ERR_UNSUPPORTED). */
bool trc_session_unsupported(const struct trc_session *s);
/* True once the agent's hooks were on, even if the session is over now. */
bool trc_session_traced(const struct trc_session *s);
/* Whether job->specs[i] matched a method in the target (false until its SPEC reply). */
bool trc_session_spec_matched(const struct trc_session *s, size_t i);
/* The target's working directory from its WELCOME, or NULL before. Owned by the session. */
const char *trc_session_cwd(const struct trc_session *s);
/*
 * When its connection closed without the agent's goodbye (the process killed: what it counted
 * since its last report is lost), on the loop's clock; 0 when it did not.
 */
double trc_session_closed_at(const struct trc_session *s);
/* Whether its spool could not keep the trace whole (a full disk): its note said why. */
bool trc_session_cut_short(const struct trc_session *s);
/* What went wrong, without the "tracer: " prefix, or NULL. Owned by the session. */
const char *trc_session_error(const struct trc_session *s);

#endif
