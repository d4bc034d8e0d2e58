/* pprof.h: a pprof profile (pprof/profile.proto) built in memory, serialized with protobuf-c. */
#ifndef TRC_PPROF_H
#define TRC_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/*
 * Names come from the targets, which may be hostile: each string goes into the table as
 * escape.h's EXACT text (controls, NUL, ill-formed bytes and the code points a terminal acts
 * on as \e, \x00, \xHH...; a backslash as \\), valid UTF-8 that drives no terminal and keeps
 * distinct names distinct.
 */
#define TRC_PPROF_MAX_TYPES 4u

/* What Sample.value[i] means: ("calls", "count"), ("wall", "nanoseconds")... */
struct trc_pprof_type {
	const char *type, *unit;
};

/* A sample's label: a string (str non-NULL, str_len bytes), else the number num in unit. */
struct trc_pprof_label {
	const char *key;
	const char *str;
	size_t str_len;
	int64_t num;
	const char *unit;       /* NULL: none */
};

struct trc_pprof;

/* A profile whose samples carry ntypes values (at most TRC_PPROF_MAX_TYPES), described by
 * types (copied). The caller frees it with trc_pprof_free(). Pure. */
struct trc_pprof *trc_pprof_new(const struct trc_pprof_type *types, size_t ntypes);
void trc_pprof_free(struct trc_pprof *p);

/* The id of the location, and of the function, named name in file at line (one per distinct
 * triple); nonzero. */
uint64_t trc_pprof_location(struct trc_pprof *p, const char *name, size_t name_len,
			    const char *file, size_t file_len, int64_t line);

/* One sample: the stack locs[0..nlocs) leaf first, ntypes values, and labels (all copied). */
void trc_pprof_sample(struct trc_pprof *p, const uint64_t *locs, size_t nlocs,
		      const int64_t *values, const struct trc_pprof_label *labels, size_t nlabels);

/* Profile.duration_nanos, and a free-form comment (pprof -comments). */
void trc_pprof_duration(struct trc_pprof *p, int64_t ns);
void trc_pprof_comment(struct trc_pprof *p, const char *text);
/* Profile.period_type and period: what one sample stands for ("cpu", "nanoseconds", 10000000). */
void trc_pprof_period(struct trc_pprof *p, const char *type, const char *unit, int64_t period);
/* Which sample type a viewer shows first (the index of one given to trc_pprof_new). */
void trc_pprof_default_type(struct trc_pprof *p, size_t i);

/* Appends the serialized Profile (not compressed: the file's gzip is the output's) to out. */
void trc_pprof_write(struct trc_pprof *p, struct trc_buf *out);

#endif
