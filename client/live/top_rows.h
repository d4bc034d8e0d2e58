/* top_rows.h: what one snapshot of the --top table shows: its rows, sorted, and why none. */
#ifndef TRC_TOP_ROWS_H
#define TRC_TOP_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "profile.h"
#include "top.h"

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
	const struct trc_profile *profile;      /* --top profile: its rate and cost */
	unsigned hz;                    /* ... the rate asked */
	unsigned width;         /* columns of text at most (the table tries hard to fit) */
	unsigned rows;          /* table rows at most */
};

/* A row as a snapshot shows it: PIDS counts the targets of the view that counted it. */
struct trc_top_shown {
	const struct trc_top_entry *e;
	uint32_t npids;
};

/*
 * The visible rows (no --ignore hides them), best first by the mode's main figure (SELF for a
 * profile, TOTAL for the other timed modes, else the count), then by file, line and label; at most v->rows of them (*n). The
 * caller frees the array; its entries are the table's. Pure.
 */
struct trc_top_shown *trc_top_rows(const struct trc_top *t, const struct trc_top_view *v,
				   size_t *n);

/*
 * Why a snapshot of shown rows shows none, appended to b: true; false when it shows some. The
 * agents count only what is under the filter (their events count all they saw), and --ignore
 * hides rows here. Pure.
 */
bool trc_top_empty_note(const struct trc_top *t, const struct trc_top_view *v, size_t shown,
			struct trc_buf *b);

#endif
