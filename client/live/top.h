/* top.h: the --top table: every target's deltas summed into (file, line, label) entries. */
#ifndef TRC_TOP_H
#define TRC_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "decode.h"
#include "top_paths.h"
#include "tracer_protocol.h"

/* Distinct (file, line, label) rows kept between resets, and the bytes of their names; rows
 * beyond either are counted as lost. */
#define TRC_TOP_MAX_ENTRIES (1u << 20)
#define TRC_TOP_MAX_BYTES (64u << 20)

/* How a mode is shown: its columns and what its figures mean (tracer_protocol.h's list). */
struct trc_top_mode_def {
	const char *name;       /* on the command line: "calls", "objects-total"... */
	int flags;              /* enum trc_top_mode_flag */
	bool file;              /* FILENAME and LINE columns */
	const char *label;      /* title of the label column, NULL: none */
	const char *json_label; /* its JSON key */
	const char *count;      /* title of the count column */
	bool timed;             /* total and self columns, and AVG; sorted by total */
	const char *total, *self;       /* their titles */
	const char *help;       /* what it counts, for --help */
};

/* The mode's name on the command line ("calls", "objects-total"...), or NULL if out of range. */
const char *trc_top_mode_name(enum trc_top_mode mode);
/* Looks a mode up by that name. Returns 0, or -1 if there is none. */
int trc_top_mode_parse(const char *name, enum trc_top_mode *mode);
/* The mode's flags (enum trc_top_mode_flag), 0 if out of range. */
int trc_top_mode_flags(enum trc_top_mode mode);
/* "calls, time ... or threads": the modes with any of flags (0: every mode), into buf. */
void trc_top_mode_list(char *buf, size_t size, int flags);
/* For --help: a line per mode, its name, columns and what it counts, wrapped at width. */
void trc_top_mode_help(FILE *out, size_t width);

/* One row of the table: what the agents counted for a (file, line, label, app frame), summed. */
struct trc_top_entry {
	char *file;             /* file, NUL, label, NUL, app, NUL: one allocation, the table's */
	const char *label;
	const char *app;        /* exceptions: the app's frame nearest the raise ("": none) */
	uint32_t file_len, label_len, app_len;
	int32_t line, app_line;
	uint32_t hash;
	bool hidden;            /* an --ignore regex matched its class */
	uint64_t count, total_ns, self_ns;
	uint64_t *buckets;      /* --top time: TRC_TOP_BUCKETS durations, the table's; else NULL */
};

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

/* From now on the table also keeps the call paths the agents send (TRC_TOP_PATHS). */
void trc_top_keep_paths(struct trc_top *t);
/* Those paths, or NULL when the table keeps none. */
const struct trc_top_paths *trc_top_paths(const struct trc_top *t);

/* Adds the deltas of one TRC_MSG_TOP from pid (strings copied). Other messages are ignored. */
void trc_top_feed(struct trc_top *t, pid_t pid, const struct trc_message *m);

/* Forgets every row (not the event and lost totals). */
void trc_top_reset(struct trc_top *t);

/* How the table's mode is shown. */
const struct trc_top_mode_def *trc_top_def(const struct trc_top *t);
/* The table's mode. */
enum trc_top_mode trc_top_mode(const struct trc_top *t);

/* The row of (file, line, label), or NULL when the table holds none (valid until the next feed or reset). */
const struct trc_top_entry *trc_top_find(const struct trc_top *t, const char *file, uint32_t file_len,
					 int32_t line, const char *label, uint32_t label_len);

/* Rows held now, hidden ones included, and row i of them (valid until the next feed or reset). */
size_t trc_top_size(const struct trc_top *t);
const struct trc_top_entry *trc_top_entry(const struct trc_top *t, size_t i);

/* A number that changes whenever what the table holds may have: a report of counts fed, a
 * reset. What was made from the table (an exposition) is still true while it stays the same. */
uint64_t trc_top_generation(const struct trc_top *t);

/*
 * For each row, how many of the targets pids[0..npids) counted it: an array of trc_top_size()
 * figures, which the caller frees.
 */
uint32_t *trc_top_pid_counts(const struct trc_top *t, const pid_t *pids, size_t npids);

/* Events and lost events reported by the agents since the table was made, plus the counts of
 * rows that did not fit (TRC_TOP_MAX_ENTRIES, TRC_TOP_MAX_BYTES) in lost. */
uint64_t trc_top_events(const struct trc_top *t);
uint64_t trc_top_lost(const struct trc_top *t);
/* Whether the agents reported events since the rows were last cleared. */
bool trc_top_events_since_reset(const struct trc_top *t);

/* Garbage collections the agents reported (--gc) since the table was made. */
struct trc_top_gc {
	uint64_t count, major;
	uint64_t pause_ns;      /* the time they stopped the apps, summed over the targets */
};
struct trc_top_gc trc_top_gc(const struct trc_top *t);

#endif
