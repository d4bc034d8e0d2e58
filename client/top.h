/* top.h: the live tables of --top: every target's deltas summed into one table, sorted and printed. */
#ifndef TRC_TOP_H
#define TRC_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "decode.h"
#include "tracer_protocol.h"

/* Distinct (file, line, label) rows kept between resets; rows beyond are counted as lost. */
#define TRC_TOP_MAX_ENTRIES (1u << 20)
/* FILENAME and METHOD/OBJECT/EXCEPTION shrink to these widths first when the table does not
 * fit, then both down to TRC_TOP_MIN_CUT ("...x"). */
#define TRC_TOP_MIN_FILE 16
#define TRC_TOP_MIN_LABEL 12
#define TRC_TOP_MIN_CUT 4

/* The mode's name on the command line ("calls", "objects-total"...), or NULL if out of range. */
const char *trc_top_mode_name(enum trc_top_mode mode);
/* Looks a mode up by that name. Returns 0, or -1 if there is none. */
int trc_top_mode_parse(const char *name, enum trc_top_mode *mode);

struct trc_top;

/*
 * A table for mode, fed by the targets pids[0..npids) (copied), and those added later: the
 * PIDS figure of a row counts which of the targets a view shows contributed. The caller frees
 * it with trc_top_free(). Pure; main thread.
 */
struct trc_top *trc_top_new(enum trc_top_mode mode, const pid_t *pids, size_t npids);
void trc_top_free(struct trc_top *t);

/* One more target whose rows count (--ps found it later); nothing if it is one already. */
void trc_top_add_pid(struct trc_top *t, pid_t pid);

/*
 * Hides the rows whose label's class part (the text before the first '#' or '.' after its first
 * character, else the whole label) matches the POSIX extended regex. Returns 0, or -1 with
 * regerror()'s text in why[0..whylen) when the regex is invalid.
 */
int trc_top_ignore(struct trc_top *t, const char *regex, char *why, size_t whylen);

/* Adds the deltas of one TRC_MSG_TOP from pid (strings copied). Other messages are ignored. */
void trc_top_feed(struct trc_top *t, pid_t pid, const struct trc_message *m);

/* Forgets every row (not the event and lost totals). */
void trc_top_reset(struct trc_top *t);

/* Rows held now, hidden ones included. */
size_t trc_top_size(const struct trc_top *t);
/* Events and lost events reported by the agents since the table was made, plus the counts of
 * rows that did not fit (TRC_TOP_MAX_ENTRIES) in lost. */
uint64_t trc_top_events(const struct trc_top *t);
uint64_t trc_top_lost(const struct trc_top *t);

/* Garbage collections the agents reported (--gc) since the table was made. */
struct trc_top_gc {
	uint64_t count, major;
	uint64_t pause_ns;      /* the time they stopped the apps, summed over the targets */
};
struct trc_top_gc trc_top_gc(const struct trc_top *t);

/* What a snapshot shows besides the rows. */
struct trc_top_view {
	const pid_t *pids;      /* the targets attached now: PIDS counts these only */
	size_t npids;
	bool pids_column;       /* several targets: add PIDS */
	double elapsed;         /* seconds since the start */
	double events_per_sec;
	const char *const *filter;      /* the prefixes counted: --filter's, or the app dirs */
	size_t nfilter;
	bool app_dirs;          /* filter holds the targets' working directories */
	bool all;               /* --all: every file */
	bool gc;                /* --gc: a line of garbage collections under the header */
	unsigned sample;        /* > 1: counts are estimates from 1 allocation in sample */
	bool sample_by_time;    /* ... from allocations in 1/sample of the time */
	struct trc_top_gc gc_recent;    /* those since the previous table... */
	double gc_secs;                 /* ...which was this many seconds ago */
	unsigned width;         /* columns of text at most (the table tries hard to fit) */
	unsigned rows;          /* table rows at most */
};

/*
 * Appends the header line, a blank line and the table (column titles, then the rows sorted by
 * the mode's main figure), each line ending in '\n', to out. Control characters in names are
 * shown as '?'; long names lose their left part to a leading "...". Pure.
 */
void trc_top_format_text(const struct trc_top *t, const struct trc_top_view *v,
			 struct trc_buf *out);

/* Appends the same snapshot as one line of JSON (with its '\n') to out, strings escaped by
 * trc_json_str() like every JSON the client writes. Pure. */
void trc_top_format_json(const struct trc_top *t, const struct trc_top_view *v,
			 struct trc_buf *out);

#endif
