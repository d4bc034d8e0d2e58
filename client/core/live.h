/* live.h: a running --top: its redraw and reset timers, and the tables it prints or draws. */
#ifndef TRC_LIVE_H
#define TRC_LIVE_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>

#include "output.h"
#include "profile.h"
#include "session.h"
#include "top.h"
#include "top_rows.h"

struct trc_live_opts {
	bool full_screen;       /* draw on the terminal of out (else print a table per interval) */
	bool json;              /* tables as JSON lines */
	unsigned rows;          /* rows per table, at most */
	double interval;        /* seconds between tables */
	double reset;           /* seconds between clearings of the table; 0: never */
	bool final_only;        /* --duration: one table only, when trc_live_stop() is called */
	bool final;             /* --exec: a last table too, when trc_live_stop() is called */
	const char *const *filters;     /* --filter, for the header; none: the targets' cwds */
	size_t nfilters;
	bool all;
	bool gc;                /* --gc: the garbage collections line */
	unsigned sample;        /* --sample: 1 in sample allocations looked up (1: all) */
	bool sample_by_time;    /* --sample-time: the hook on 1/sample of the time instead */
	const struct trc_profile *profile;      /* --top profile: its rate and cost, for the header */
	unsigned hz;            /* --top profile: the rate asked */
};

struct trc_live;

/* Called from the loop when the user asks to quit (q on the screen). */
typedef void trc_live_quit_fn(void *ctx);

/*
 * Starts showing table, fed by sessions[0..nsessions) (whose pids, working directories and
 * progress the header shows): starts the timers and, with full_screen, takes the terminal (see
 * screen.h). While the screen is up, out keeps its notes in memory (err_fd -1; errors for
 * stderr belong there too): the latest shows under the table, and all are written to stderr
 * when the screen closes. Everything passed must outlive the live view, which the caller frees
 * with trc_live_stop(). Main thread.
 */
struct trc_live *trc_live_start(struct ev_loop *loop, struct trc_output *out,
				struct trc_top *table, struct trc_session *const *sessions,
				size_t nsessions, const struct trc_live_opts *o,
				trc_live_quit_fn *quit, void *ctx);

/* Something changed (a session ended): redraws the screen, if any. */
void trc_live_update(struct trc_live *l);

/*
 * A target's first counts came: redraws the screen; without one, prints the first table now
 * if every target has counted (the next comes an interval later), so that the rows show a
 * moment after tracing is in place rather than at the end of an interval.
 */
void trc_live_counted(struct trc_live *l);

/* The sessions are now sessions[0..nsessions) (--ps found more): same rules as at the start. */
void trc_live_set_sessions(struct trc_live *l, struct trc_session *const *sessions,
			   size_t nsessions);

/*
 * Stops the timers, gives the terminal back and writes the notes it held to stderr, then
 * prints the final_only table to out. Frees l.
 */
void trc_live_stop(struct trc_live *l);

#endif
