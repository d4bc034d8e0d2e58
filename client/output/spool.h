/*
 * spool.h: a trace that goes to a file loses nothing. The agent's bytes go to a scratch file
 * as they come (a copy, no formatting), and the printer or exporter is fed from there when
 * the client has nothing else to do, and whatever is left when tracing ends. Formatting
 * millions of events a second as they come takes a core the app needs, until the agent must
 * drop events for want of a reader; copying them does not. While events come slower than the
 * client formats them, the file fills as they come, as without a spool.
 */
#ifndef TRC_SPOOL_H
#define TRC_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "output.h"
#include "sink.h"

struct trc_spool;

/*
 * A spool for inner, the sink that gets the events, with a scratch file of its own in dir
 * that no other process can open and that goes away when the spool does (O_TMPFILE, else made
 * and unlinked at once). Notes go to out. NULL, with errno, if no file could be made. Main
 * thread.
 */
struct trc_spool *trc_spool_new(const char *dir, struct trc_sink inner, struct trc_output *out);
/*
 * A scratch file of the caller's own in dir, read-write, that no other process can open and
 * that goes away once closed (O_TMPFILE, else made and unlinked at once). The fd, or -1 with
 * errno. For the spool, and for exporters that keep more than memory should.
 */
int trc_spool_scratch(const char *dir);
/* As trc_spool_new, with fd (read-write, empty; the spool closes it) for the scratch file. */
struct trc_spool *trc_spool_new_fd(int fd, struct trc_sink inner, struct trc_output *out);
/*
 * The sink the session feeds while tracing: it forwards the clock, counts what TRC_EV_LOST
 * says (its lost()), and keeps nothing (the bytes come through trc_spool_put). Closing it
 * feeds inner what is left, closes inner, and frees the spool.
 */
struct trc_sink trc_spool_sink(struct trc_spool *sp);
/* When closing finds the trace cut short (its note says why), *cut_short is set true: the
 * run must not end as a success. cut_short must outlive the spool. */
void trc_spool_report(struct trc_spool *sp, bool *cut_short);
/* Keeps n more bytes of what the agent sent, as they came. */
void trc_spool_put(struct trc_spool *sp, const void *p, size_t n);
/*
 * Feeds inner the events of up to max more whole messages kept. Returns how many messages
 * were read (the session's own, WELCOME, SPEC, DETACHED..., are read and skipped), 0 when
 * none is left whole, or -1 once something went wrong: the rest is not fed, and closing
 * says why in a note.
 */
int64_t trc_spool_pump(struct trc_spool *sp, size_t max);
/* Whether kept bytes are still to be read. */
bool trc_spool_behind(const struct trc_spool *sp);
/* Bytes kept so far. */
uint64_t trc_spool_size(const struct trc_spool *sp);
/* What went wrong, or "". */
const char *trc_spool_error(const struct trc_spool *sp);

#endif
