/* top_pprof.h: the --top table as a pprof profile: --top MODE --format pprof -o FILE. */
#ifndef TRC_TOP_PPROF_H
#define TRC_TOP_PPROF_H

#include <stdint.h>

#include "buf.h"
#include "top.h"

/*
 * Appends the serialized profile (pprof.h) of t's visible rows to out: one sample per row.
 * A row of a method (calls, time), a class without a site (objects-total) or a thread is a
 * one-frame stack named as the table names it, at its file and line; a class at a site
 * (objects, exceptions) is the class called from a frame "FILE:LINE"; a site alone (arrays,
 * strings) is that frame. Values by mode: calls/count, and wall/nanoseconds (self time) for
 * time; alloc_objects/count; exceptions/count; threads: runs/count, gvl_wait/nanoseconds,
 * gvl_held/nanoseconds. duration_ns: the session's length. Pure.
 */
void trc_top_format_pprof(const struct trc_top *t, int64_t duration_ns, const char *tool,
			  struct trc_buf *out);

#endif
