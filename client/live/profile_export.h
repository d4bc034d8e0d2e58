/* profile_export.h: --top profile's stacks as a file: collapsed, speedscope, pprof or a flame graph. */
#ifndef TRC_PROFILE_EXPORT_H
#define TRC_PROFILE_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "export.h"
#include "flame.h"
#include "profile.h"

/* Whether --top profile writes format f (TRC_FORMATS' profile column; trc_format_list(true)
 * names them). */
bool trc_profile_format(enum trc_format f);

struct trc_profile_write_opts {
	enum trc_format format;
	bool by_thread;         /* each thread a stack of its own; else the same stack of every
				 * thread (and process) is one */
	bool by_process;        /* each process apart (by_thread implies it) */
	int64_t duration_ns;    /* how long the session sampled */
	uint64_t hz;            /* the rate asked */
	const char *tool;       /* "tracer 0.1.0" */
};

/*
 * The run's tree (profile.h) in o->format, appended to out (pprof: serialized, not yet
 * gzipped; the output compresses). Names are escaped as each format needs. Pure.
 *  - collapsed: "frame;frame;frame weight" lines, sorted, weighed in nanoseconds of CPU (or
 *    wall-clock) time; with by_process a "ruby PID" frame first, with by_thread the thread's
 *    name after it;
 *  - speedscope: one sampled profile per thread (by_thread) or one for all, in nanoseconds;
 *  - pprof: sample types samples/count, cpu/nanoseconds (and wall/nanoseconds by wall-clock),
 *    period as asked, labels "thread" and "pid", and "request": the Rails controller#action
 *    or job class the sample was taken in, where the app said (lib/tracer_agent.rb).
 */
void trc_profile_write(const struct trc_profile *p, const struct trc_profile_write_opts *o,
		       struct trc_buf *out);

/*
 * The run's tree added to flame graph f, weighed in nanoseconds: pseudo-frames coloured as
 * what they are (GC, waiting), Ruby frames by whose file they are in (scope: the app's). With
 * by_process, a group frame per process; with by_thread, one per thread under it. Pure.
 */
void trc_profile_flame(const struct trc_profile *p, const struct trc_profile_write_opts *o,
		       const struct trc_flame_scope *scope, struct trc_flame *f);

#endif
