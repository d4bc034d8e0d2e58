/* metrics.h: the --top table as Prometheus' text exposition (0.0.4) or OpenMetrics text, for --metrics: a series per process. */
#ifndef TRC_METRICS_H
#define TRC_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "top.h"

/* The two dialects a scraper may ask for (its Accept header). */
enum trc_metrics_format {
	TRC_METRICS_TEXT,               /* text/plain; version=0.0.4 */
	TRC_METRICS_OPENMETRICS,        /* application/openmetrics-text; version=1.0.0 */
};

/* Seconds a series new to the exposition is served at 0 before its value (zero first). */
#define TRC_METRICS_ZERO_HOLD 1.0
/* Seconds the series of a process that ended are served on, then dropped. */
#define TRC_METRICS_KEEP_ENDED 300.0

/* What an exposition shows; the strings are the caller's, valid as long as the set. */
struct trc_metrics_opts {
	enum trc_top_mode mode;
	unsigned rows;          /* rows that become series of their own; the rest sum into "(other)" */
	bool gc;                /* --gc: the garbage collection counters */
	const char *const *labels;      /* --label KEY=VALUE, each checked by trc_metrics_check_label */
	size_t nlabels;
	const char *const *ignores;     /* --ignore regexes, checked: the rows they hide are not served */
	size_t nignores;
};

struct trc_metrics;

/*
 * What --metrics serves: all, the run's table (fed by every target; it ranks the rows, and
 * stays the caller's), and a table per process with the labels that say where it came from.
 * The caller frees it with trc_metrics_free(). Main thread.
 */
struct trc_metrics *trc_metrics_new(const struct trc_top *all, const struct trc_metrics_opts *o);
void trc_metrics_free(struct trc_metrics *m);

/* The Content-Type of format's exposition. */
const char *trc_metrics_content_type(enum trc_metrics_format format);

/* The format an Accept header's value asks for (NULL: none given): OpenMetrics when it names
 * application/openmetrics-text, else the text format. Pure. */
enum trc_metrics_format trc_metrics_negotiate(const char *accept);

/*
 * --label KEY=VALUE: 0 when KEY is a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not
 * reserved "__...") that no family uses itself (pid, method, file, line, le...); else -1 with
 * why in why[0..whylen). VALUE may be any bytes (escaped as every value is). Pure.
 */
int trc_metrics_check_label(const char *kv, char *why, size_t whylen);

/*
 * Appends p[0..n) to b as a label value's inside (escape.h's TRC_ESC_PROM): the value is the
 * text TRC_ESC_EXACT makes of the bytes (controls, NUL, unsafe code points and ill-formed
 * bytes as \e, \x00, \xHH..., a backslash as \\), written in the format's escapes (\\, \",
 * \n). So what a target named cannot make the exposition invalid, nor drive a terminal, and
 * two names that differ, by a byte after a NUL or a byte that is no UTF-8, are two series. Pure.
 */
void trc_metrics_label_value(struct trc_buf *b, const char *p, size_t n);

/*
 * Process pid attached at now (seconds since the epoch: its series' _created). A pid seen
 * before (a process that ended, its pid taken by a new one) starts again from nothing.
 */
void trc_metrics_add(struct trc_metrics *m, pid_t pid, double now);
/* pid's root, its working directory (WELCOME's cwd): files under it are labelled relative to
 * it, and it is the app label unless --label app=NAME. Copied. */
void trc_metrics_root(struct trc_metrics *m, pid_t pid, const char *root);
/* Adds one TRC_MSG_TOP of pid, received at now; other messages are ignored. */
void trc_metrics_feed(struct trc_metrics *m, pid_t pid, const struct trc_message *msg, double now);
/*
 * pid's session ended at now. closed_at > 0: its connection closed at closed_at without the
 * agent's goodbye (killed: SIGKILL, the OOM killer), so what it counted since its last report
 * never came: the seconds in between are counted, and the events its last report's rate
 * makes of them, as lost (an estimate, said as such).
 */
void trc_metrics_ended(struct trc_metrics *m, pid_t pid, double now, double closed_at);

/*
 * The exposition in format, as of now, for a scrape: made again only when the counts, the
 * processes, or what is held at zero changed since the last call (a scraper may come a
 * thousand times a second; the agents report once a tick). A series new since the last scrape
 * is served at 0 first, for TRC_METRICS_ZERO_HOLD seconds, so that increase() counts it from
 * its start. The buffer is m's, its bytes valid until the next call. Main thread.
 */
const struct trc_buf *trc_metrics_expose(struct trc_metrics *m, enum trc_metrics_format format,
					 double now);

/* The processes whose hooks are on now (the tracer_targets gauge): set by the caller. */
void trc_metrics_set_targets(struct trc_metrics *m, size_t targets);

#endif
