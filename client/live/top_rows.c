/* top_rows.c: a snapshot's rows: the visible entries sorted by the mode's figure, and the note for none. */
#include "top_rows.h"

#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

/* Sorting: the main figure descending, then file, line and label ascending. */

static int
cmp_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c != 0 ? c : (alen > blen) - (alen < blen);
}

static int
cmp_key(const struct trc_top_entry *a, const struct trc_top_entry *b)
{
	int c = cmp_bytes(a->file, a->file_len, b->file, b->file_len);

	if (c != 0)
		return c;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return cmp_bytes(a->label, a->label_len, b->label, b->label_len);
}

static int
cmp_figure(uint64_t a, uint64_t b)
{
	return (a < b) - (a > b);
}

static int
cmp_by_count(const void *pa, const void *pb)
{
	const struct trc_top_entry *a = ((const struct trc_top_shown *)pa)->e, *b = ((const struct trc_top_shown *)pb)->e;
	int c = cmp_figure(a->count, b->count);

	return c != 0 ? c : cmp_key(a, b);
}

static int
cmp_by_total(const void *pa, const void *pb)
{
	const struct trc_top_entry *a = ((const struct trc_top_shown *)pa)->e, *b = ((const struct trc_top_shown *)pb)->e;
	int c = cmp_figure(a->total_ns, b->total_ns);

	return c != 0 ? c : cmp_key(a, b);
}

/* A profile: where the time is spent first, then where it is spent under. */
static int
cmp_by_self(const void *pa, const void *pb)
{
	const struct trc_top_entry *a = ((const struct trc_top_shown *)pa)->e, *b = ((const struct trc_top_shown *)pb)->e;
	int c = cmp_figure(a->self_ns, b->self_ns);

	if (c == 0)
		c = cmp_figure(a->total_ns, b->total_ns);
	return c != 0 ? c : cmp_key(a, b);
}

static int (*cmp_of(const struct trc_top_mode_def *d))(const void *, const void *)
{
	if (d->flags & TRC_TOPM_PROFILE)
		return cmp_by_self;
	return d->timed ? cmp_by_total : cmp_by_count;
}

struct trc_top_shown *
trc_top_rows(const struct trc_top *t, const struct trc_top_view *v, size_t *n)
{
	size_t size = trc_top_size(t), k = 0;
	struct trc_top_shown *rows = xcalloc(size ? size : 1, sizeof(*rows));
	uint32_t *npids = trc_top_pid_counts(t, v->pids, v->npids);

	for (size_t i = 0; i < size; i++)
		if (!trc_top_entry(t, i)->hidden)
			rows[k++] = (struct trc_top_shown){ trc_top_entry(t, i), npids[i] };
	free(npids);
	qsort(rows, k, sizeof(*rows), cmp_of(trc_top_def(t)));
	*n = k < v->rows ? k : v->rows;
	return rows;
}

/* "the app dir /srv/app" or "--filter /srv/app/lib/, /srv/gems/" */
static void
add_where(struct trc_buf *b, const struct trc_top_view *v)
{
	trc_buf_adds(b, v->app_dirs ? "the app dir " : "--filter ");
	if (v->nfilter == 0)
		trc_buf_adds(b, "?");
	for (size_t i = 0; i < v->nfilter; i++)
		trc_buf_addf(b, "%s%s", i > 0 ? ", " : "", v->filter[i]);
}

bool
trc_top_empty_note(const struct trc_top *t, const struct trc_top_view *v, size_t shown,
		   struct trc_buf *b)
{
	if (shown > 0)
		return false;
	if (trc_top_size(t) > 0) {
		trc_buf_addf(b, "no row: --ignore hides all %zu counted", trc_top_size(t));
	} else if (v->all) {
		trc_buf_adds(b, "no row: nothing counted so far");
	} else if (trc_top_events_since_reset(t)) {
		trc_buf_adds(b, "no row: everything counted is outside ");
		add_where(b, v);
	} else {
		trc_buf_adds(b, "no row: nothing counted under ");
		add_where(b, v);
		trc_buf_adds(b, " so far");
	}
	return true;
}

