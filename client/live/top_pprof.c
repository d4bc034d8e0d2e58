/* top_pprof.c: the --top table as a pprof profile, one sample per visible row. */
#include "top_pprof.h"

#include <stdio.h>

#include "pprof.h"

/* What each sample's values are, by the mode's flags: the first entry that matches. */
static const struct {
	int flags;
	struct trc_pprof_type types[3];
	size_t ntypes;
	size_t main;            /* the type shown first, and the period's */
} kinds[] = {
	{ TRC_TOPM_THREAD, { { "runs", "count" }, { "gvl_wait", "nanoseconds" },
			     { "gvl_held", "nanoseconds" } }, 3, 1 },
	{ TRC_TOPM_METHOD | TRC_TOPM_TIMED, { { "calls", "count" }, { "wall", "nanoseconds" } }, 2, 1 },
	{ TRC_TOPM_METHOD, { { "calls", "count" } }, 1, 0 },
	{ TRC_TOPM_ALLOC, { { "alloc_objects", "count" } }, 1, 0 },
	{ TRC_TOPM_RAISE, { { "exceptions", "count" } }, 1, 0 },
};

static size_t
kind_of(int flags)
{
	size_t k = 0;

	while (k + 1 < sizeof(kinds) / sizeof(kinds[0]) && (flags & kinds[k].flags) != kinds[k].flags)
		k++;
	return k;
}

/* The row's stack, leaf first, into locs[0..2); returns its length. */
static size_t
row_stack(struct trc_pprof *p, const struct trc_top_mode_def *def, const struct trc_top_entry *e,
	  uint64_t locs[2])
{
	char site[32];
	size_t n = 0;
	int len;

	if (def->label != NULL)
		locs[n++] = trc_pprof_location(p, e->label, e->label_len, e->file, e->file_len,
					       e->line);
	/* The class made or raised at a site: the site is its caller, named "FILE:LINE". */
	if (def->file && (def->label == NULL || (def->flags & TRC_TOPM_CLASS))) {
		struct trc_buf name;

		len = snprintf(site, sizeof(site), ":%d", (int)e->line);
		trc_buf_init(&name);
		trc_buf_add(&name, e->file, e->file_len);
		trc_buf_add(&name, site, (size_t)len);
		locs[n++] = trc_pprof_location(p, name.data, name.len, e->file, e->file_len,
					       e->line);
		trc_buf_release(&name);
	}
	return n;
}

void
trc_top_format_pprof(const struct trc_top *t, int64_t duration_ns, const char *tool,
		     struct trc_buf *out)
{
	const struct trc_top_mode_def *def = trc_top_def(t);
	size_t k = kind_of(def->flags);
	struct trc_pprof *p = trc_pprof_new(kinds[k].types, kinds[k].ntypes);
	char note[64];

	for (size_t i = 0; i < trc_top_size(t); i++) {
		const struct trc_top_entry *e = trc_top_entry(t, i);
		int64_t values[3] = { (int64_t)e->count, (int64_t)e->self_ns, 0 };
		uint64_t locs[2];

		if (e->hidden)
			continue;
		if (def->flags & TRC_TOPM_THREAD) {
			values[1] = (int64_t)e->total_ns;
			values[2] = (int64_t)e->self_ns;
		}
		trc_pprof_sample(p, locs, row_stack(p, def, e, locs), values, NULL, 0);
	}
	/*
	 * Counted, not sampled (--sample's estimates are already scaled): each value stands for
	 * itself, period 1 of the main type. Pyroscope names a profile by its sample and period
	 * types (NAME:wall:nanoseconds:wall:nanoseconds); empty ones left it unnamed.
	 */
	trc_pprof_period(p, kinds[k].types[kinds[k].main].type, kinds[k].types[kinds[k].main].unit, 1);
	trc_pprof_default_type(p, kinds[k].main);
	trc_pprof_duration(p, duration_ns);
	trc_pprof_comment(p, tool);
	snprintf(note, sizeof(note), "--top %s", def->name);
	trc_pprof_comment(p, note);
	trc_pprof_write(p, out);
	trc_pprof_free(p);
}
