/* top_json.c: a --top snapshot as one JSON object: the header's figures, then the rows. */
#include "top_json.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define NS_PER_MS 1e6

static double
ms(uint64_t ns)
{
	return (double)ns / NS_PER_MS;
}

static void
json_key(struct trc_buf *b, const char *key)
{
	trc_buf_addf(b, ",\"%s\":", key);
}

/* TOTAL, SELF and AVG in milliseconds to the nanosecond, as measured (AVG: rounded down). */
static void
put_times(struct trc_buf *b, const struct trc_top_entry *e)
{
	trc_buf_adds(b, ",\"total_ms\":");
	trc_json_millis(b, e->total_ns);
	trc_buf_adds(b, ",\"self_ms\":");
	trc_json_millis(b, e->self_ns);
	trc_buf_adds(b, ",\"avg_ms\":");
	trc_json_millis(b, e->count ? e->total_ns / e->count : 0);
}

static void
json_row(struct trc_buf *b, const struct trc_top *t, const struct trc_top_shown *row)
{
	const struct trc_top_entry *e = row->e;

	trc_buf_adds(b, "{\"file\":");
	trc_json_str(b, e->file, e->file_len);
	trc_buf_addf(b, ",\"line\":%" PRId32, e->line);
	if (trc_top_def(t)->json_label) {
		json_key(b, trc_top_def(t)->json_label);
		trc_json_str(b, e->label, e->label_len);
	}
	/* An exception's app frame, when its stack had one: "app_file", "app_line". */
	if (e->app_len > 0) {
		trc_buf_adds(b, ",\"app_file\":");
		trc_json_str(b, e->app, e->app_len);
		trc_buf_addf(b, ",\"app_line\":%" PRId32, e->app_line);
	}
	trc_buf_addf(b, ",\"count\":%" PRIu64, e->count);
	if (trc_top_def(t)->timed)
		put_times(b, e);
	trc_buf_addf(b, ",\"pids\":%" PRIu32 "}", row->npids);
}

/* With no row, "note": why (as the text table's header says). */
static void
json_note(struct trc_buf *b, const struct trc_top *t, const struct trc_top_view *v, size_t shown)
{
	struct trc_buf note;

	trc_buf_init(&note);
	if (trc_top_empty_note(t, v, shown, &note)) {
		json_key(b, "note");
		trc_json_str(b, note.data, note.len);
	}
	trc_buf_release(&note);
}

static void
json_head(struct trc_buf *b, const struct trc_top *t, const struct trc_top_view *v)
{
	trc_buf_addf(b, "{\"mode\":\"%s\",\"pids\":[", trc_top_def(t)->name);
	for (size_t i = 0; i < v->npids; i++)
		trc_buf_addf(b, "%s%d", i ? "," : "", (int)v->pids[i]);
	trc_buf_addf(b, "],\"elapsed\":%.3f,\"events\":%" PRIu64 ",\"events_per_sec\":%.1f,"
		     "\"lost\":%" PRIu64 ",\"filter\":[", v->elapsed, trc_top_events(t),
		     v->events_per_sec, trc_top_lost(t));
	for (size_t i = 0; i < v->nfilter && !v->all; i++) {
		if (i > 0)
			trc_buf_addc(b, ',');
		trc_json_str(b, v->filter[i], strlen(v->filter[i]));
	}
	trc_buf_addf(b, "],\"all\":%s", v->all ? "true" : "false");
	if (v->sample > 1)
		trc_buf_addf(b, ",\"sample\":%u,\"sample_by\":\"%s\"", v->sample,
			     v->sample_by_time ? "time" : "allocations");
	if (v->profile != NULL) {
		const struct trc_profile *p = v->profile;

		/* The clock, the rate asked and the one kept, the profiler's share of the time. */
		trc_buf_addf(b, ",\"profile\":{\"clock\":\"%s\",\"hz\":%u,\"hz_now\":%" PRIu64
			     ",\"tracer_pct\":%.3f}", p->wall ? "wall" : "cpu", v->hz, p->hz ? p->hz : v->hz,
			     p->elapsed_ns ? 100.0 * (double)p->own_ns / (double)p->elapsed_ns : 0.0);
	}
	if (v->gc) {
		struct trc_top_gc gc = trc_top_gc(t);

		trc_buf_addf(b, ",\"gc\":{\"count\":%" PRIu64 ",\"major\":%" PRIu64
			     ",\"pause_ms\":%.3f}", gc.count, gc.major, ms(gc.pause_ns));
	}
}

void
trc_top_format_json(const struct trc_top *t, const struct trc_top_view *v, struct trc_buf *out)
{
	size_t n;
	struct trc_top_shown *rows = trc_top_rows(t, v, &n);

	json_head(out, t, v);
	json_note(out, t, v, n);
	trc_buf_adds(out, ",\"rows\":[");
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			trc_buf_addc(out, ',');
		json_row(out, t, &rows[i]);
	}
	trc_buf_adds(out, "]}\n");
	free(rows);
}
