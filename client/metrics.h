/* metrics.h: the --top table as Prometheus' text exposition (0.0.4) or OpenMetrics text, for --metrics. */
#ifndef TRC_METRICS_H
#define TRC_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "top.h"

/* The two dialects a scraper may ask for (its Accept header). */
enum trc_metrics_format {
	TRC_METRICS_TEXT,               /* text/plain; version=0.0.4 */
	TRC_METRICS_OPENMETRICS,        /* application/openmetrics-text; version=1.0.0 */
};

/* What an exposition shows besides the table's rows. */
struct trc_metrics_view {
	unsigned rows;          /* rows that become series of their own; the rest sum into "(other)" */
	bool gc;                /* --gc: the garbage collection counters */
	size_t targets;         /* processes attached now (the tracer_targets gauge) */
};

/* The Content-Type of format's exposition. */
const char *trc_metrics_content_type(enum trc_metrics_format format);

/* The format an Accept header's value asks for (NULL: none given): OpenMetrics when it names
 * application/openmetrics-text, else the text format. Pure. */
enum trc_metrics_format trc_metrics_negotiate(const char *accept);

/*
 * Appends p[0..n) to b as a label value's inside (escape.h's TRC_ESC_PROM): the value is the
 * text TRC_ESC_EXACT makes of the bytes (controls, NUL, unsafe code points and ill-formed
 * bytes as \e, \x00, \xHH..., a backslash as \\), written in the format's escapes (\\, \",
 * \n). So what a target named cannot make the exposition invalid, nor drive a terminal, and
 * two names that differ, by a byte after a NUL or a byte that is no UTF-8, are two series. Pure.
 */
void trc_metrics_label_value(struct trc_buf *b, const char *p, size_t n);

/*
 * Appends the exposition of table t to out: # HELP and # TYPE lines, then the samples of each
 * family. The rows are the visible ones, busiest first (as the table sorts them): the first
 * v->rows are series of their own, the others summed into one whose label is "(other)".
 * Counters only grow as long as t is never reset. Pure.
 */
void trc_metrics_format(const struct trc_top *t, const struct trc_metrics_view *v,
			enum trc_metrics_format format, struct trc_buf *out);

/*
 * An exposition kept for as long as it stays true: while the table's generation, the view
 * and the format are those it was made from, a scrape costs no sorting and no formatting
 * (a scraper may come a thousand times a second; the agents report once a tick).
 */
struct trc_metrics_cache {
	bool valid;
	uint64_t generation;
	struct trc_metrics_view view;
	enum trc_metrics_format format;
	struct trc_buf out;
};

void trc_metrics_cache_init(struct trc_metrics_cache *c);
void trc_metrics_cache_release(struct trc_metrics_cache *c);

/*
 * The exposition trc_metrics_format() makes of t, v and format: made again only when one of
 * them changed since the last call. The buffer is c's, its bytes valid until the next call
 * or trc_metrics_cache_release(). Pure.
 */
const struct trc_buf *trc_metrics_cached(struct trc_metrics_cache *c, const struct trc_top *t,
					 const struct trc_metrics_view *v,
					 enum trc_metrics_format format);

#endif
