/* metrics.c: the --top table as Prometheus' text exposition or OpenMetrics text: families, series, escaping. */
#include "metrics.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "top_rows.h"

#define NS_PER_SEC 1000000000u
#define OTHER "(other)"

/* Which figure of a row a family shows. */
enum figure {
	FIG_COUNT,
	FIG_TOTAL,              /* total_ns, in seconds */
	FIG_SELF,               /* self_ns, in seconds */
	FIG_TIMES,              /* both: a series each, kind="total" and kind="self" */
};

/* A counter family made of the table's rows; name without "_total" (OpenMetrics' family name). */
struct family {
	const char *name, *help;
	enum figure figure;
};

/* The families of each kind of mode, and the name of the label its rows' labels go in. */
static const struct family method_families[] = {
	{ "ruby_method_calls", "Calls of Ruby methods, by method and the file and line defining it.",
	  FIG_COUNT },
	{ "ruby_method_seconds", "Seconds spent in Ruby methods: kind=total with their callees, "
	  "kind=self without.", FIG_TIMES },
};
static const struct family alloc_families[] = {
	{ "ruby_allocations", "Objects allocated, by class and the line that allocated them.",
	  FIG_COUNT },
};
static const struct family raise_families[] = {
	{ "ruby_exceptions", "Exceptions raised, by class and the line that raised them.", FIG_COUNT },
};
static const struct family thread_families[] = {
	{ "ruby_thread_gvl_turns", "Turns each thread had on the GVL (Ruby 3.3+).", FIG_COUNT },
	{ "ruby_thread_gvl_wait_seconds", "Seconds each thread waited for the GVL.", FIG_TOTAL },
	{ "ruby_thread_gvl_held_seconds", "Seconds each thread held the GVL.", FIG_SELF },
};

struct kind {
	const struct family *families;
	size_t nfamilies;
	const char *label;      /* the label's name */
	const char *fixed;      /* non-NULL: every row's label value (the modes whose rows have none) */
};

#define NFAMILIES(f) (sizeof(f) / sizeof((f)[0]))

static struct kind
kind_of(const struct trc_top *t)
{
	const struct trc_top_mode_def *d = trc_top_def(t);

	if (d->flags & TRC_TOPM_METHOD)        /* calls: no seconds */
		return (struct kind){ method_families, d->timed ? NFAMILIES(method_families) : 1,
				      "method", NULL };
	if (d->flags & TRC_TOPM_THREAD)
		return (struct kind){ thread_families, NFAMILIES(thread_families), "thread", NULL };
	if (d->flags & TRC_TOPM_RAISE)
		return (struct kind){ raise_families, NFAMILIES(raise_families), "class", NULL };
	/* arrays and strings: their rows have no class; the mode says which classes they count */
	if (!(d->flags & TRC_TOPM_CLASS))
		return (struct kind){ alloc_families, NFAMILIES(alloc_families), "class",
				      strcmp(d->name, "strings") == 0 ? "String" : "Array|Hash" };
	return (struct kind){ alloc_families, NFAMILIES(alloc_families), "class", NULL };
}

const char *
trc_metrics_content_type(enum trc_metrics_format format)
{
	return format == TRC_METRICS_OPENMETRICS ?
	       "application/openmetrics-text; version=1.0.0; charset=utf-8" :
	       "text/plain; version=0.0.4; charset=utf-8";
}

/* Whether s contains word, ASCII case aside. */
static bool
contains_nocase(const char *s, const char *word)
{
	size_t n = strlen(word);

	for (; *s != '\0'; s++) {
		size_t i = 0;

		while (i < n && s[i] != '\0' && tolower((unsigned char)s[i]) == word[i])
			i++;
		if (i == n)
			return true;
	}
	return false;
}

enum trc_metrics_format
trc_metrics_negotiate(const char *accept)
{
	if (accept != NULL && contains_nocase(accept, "application/openmetrics-text"))
		return TRC_METRICS_OPENMETRICS;
	return TRC_METRICS_TEXT;
}

void
trc_metrics_label_value(struct trc_buf *b, const char *p, size_t n)
{
	trc_escape_as(b, TRC_ESC_PROM, p, n);
}

/* A family's # HELP and # TYPE: OpenMetrics names the family, the text format the sample. */
static void
header(struct trc_buf *b, enum trc_metrics_format format, const char *name, const char *type,
       const char *help)
{
	const char *suffix = format == TRC_METRICS_TEXT && strcmp(type, "counter") == 0 ? "_total" : "";

	trc_buf_addf(b, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, suffix, help, name, suffix, type);
}

/* A figure in nanoseconds as seconds, exactly. */
static void
add_seconds(struct trc_buf *b, uint64_t ns)
{
	trc_buf_addf(b, "%" PRIu64 ".%09" PRIu64, ns / NS_PER_SEC, ns % NS_PER_SEC);
}

/* One series of a row: its labels (but the "(other)" row's file and line), and its value. */
static void
series(struct trc_buf *b, const struct family *f, const struct kind *k, bool site,
       const struct trc_top_entry *e, bool other, enum figure fig)
{
	trc_buf_addf(b, "%s_total{%s=\"", f->name, k->label);
	if (other)
		trc_buf_adds(b, OTHER);
	else if (k->fixed != NULL)
		trc_buf_adds(b, k->fixed);
	else
		trc_metrics_label_value(b, e->label, e->label_len);
	trc_buf_addc(b, '"');
	if (site && !other) {
		trc_buf_adds(b, ",file=\"");
		trc_metrics_label_value(b, e->file, e->file_len);
		trc_buf_addf(b, "\",line=\"%" PRId32 "\"", e->line);
	}
	/* An exception's app frame: two rows of one site and class differ by it alone. */
	if (!other && e->app_len > 0) {
		trc_buf_adds(b, ",app_file=\"");
		trc_metrics_label_value(b, e->app, e->app_len);
		trc_buf_addf(b, "\",app_line=\"%" PRId32 "\"", e->app_line);
	}
	if (fig == FIG_TOTAL && f->figure == FIG_TIMES)
		trc_buf_adds(b, ",kind=\"total\"");
	else if (fig == FIG_SELF && f->figure == FIG_TIMES)
		trc_buf_adds(b, ",kind=\"self\"");
	trc_buf_addc(b, '}');
	trc_buf_addc(b, ' ');
	if (fig == FIG_COUNT)
		trc_buf_addf(b, "%" PRIu64, e->count);
	else
		add_seconds(b, fig == FIG_TOTAL ? e->total_ns : e->self_ns);
	trc_buf_addc(b, '\n');
}

static void
row_series(struct trc_buf *b, const struct family *f, const struct kind *k, bool site,
	   const struct trc_top_entry *e, bool other)
{
	if (f->figure == FIG_TIMES) {
		series(b, f, k, site, e, other, FIG_TOTAL);
		series(b, f, k, site, e, other, FIG_SELF);
	} else {
		series(b, f, k, site, e, other, f->figure);
	}
}

/* The rows, busiest first: the first shown of their own, the others summed in *rest. */
static void
families(struct trc_buf *b, const struct trc_top *t, const struct trc_metrics_view *v,
	 enum trc_metrics_format format)
{
	struct trc_top_view all = { .rows = UINT_MAX };
	struct kind k = kind_of(t);
	bool site = !(trc_top_def(t)->flags & TRC_TOPM_NO_SITE);
	size_t n, shown;
	struct trc_top_shown *rows = trc_top_rows(t, &all, &n);
	struct trc_top_entry rest = { .count = 0 };

	shown = n < v->rows ? n : v->rows;
	for (size_t i = shown; i < n; i++) {
		rest.count += rows[i].e->count;
		rest.total_ns += rows[i].e->total_ns;
		rest.self_ns += rows[i].e->self_ns;
	}
	for (size_t j = 0; j < k.nfamilies; j++) {
		const struct family *f = &k.families[j];

		header(b, format, f->name, "counter", f->help);
		for (size_t i = 0; i < shown; i++)
			row_series(b, f, &k, site, rows[i].e, false);
		if (shown < n)
			row_series(b, f, &k, site, &rest, true);
	}
	free(rows);
}

static void
gc_families(struct trc_buf *b, const struct trc_top *t, enum trc_metrics_format format)
{
	struct trc_top_gc gc = trc_top_gc(t);

	header(b, format, "ruby_gc_collections", "counter", "Garbage collections, minor and major.");
	trc_buf_addf(b, "ruby_gc_collections_total{kind=\"minor\"} %" PRIu64 "\n"
		     "ruby_gc_collections_total{kind=\"major\"} %" PRIu64 "\n",
		     gc.count - gc.major, gc.major);
	header(b, format, "ruby_gc_pause_seconds", "counter",
	       "Seconds garbage collections stopped the processes, summed over them.");
	trc_buf_adds(b, "ruby_gc_pause_seconds_total ");
	add_seconds(b, gc.pause_ns);
	trc_buf_addc(b, '\n');
}

void
trc_metrics_format(const struct trc_top *t, const struct trc_metrics_view *v,
		   enum trc_metrics_format format, struct trc_buf *out)
{
	families(out, t, v, format);
	if (v->gc)
		gc_families(out, t, format);
	header(out, format, "tracer_events", "counter", "Events the agents counted.");
	trc_buf_addf(out, "tracer_events_total %" PRIu64 "\n", trc_top_events(t));
	header(out, format, "tracer_events_lost", "counter",
	       "Events lost: the agents' buffers were full, or the table was.");
	trc_buf_addf(out, "tracer_events_lost_total %" PRIu64 "\n", trc_top_lost(t));
	header(out, format, "tracer_targets", "gauge", "Processes tracer is attached to now.");
	trc_buf_addf(out, "tracer_targets %zu\n", v->targets);
	if (format == TRC_METRICS_OPENMETRICS)
		trc_buf_adds(out, "# EOF\n");
}

void
trc_metrics_cache_init(struct trc_metrics_cache *c)
{
	memset(c, 0, sizeof(*c));
	trc_buf_init(&c->out);
}

void
trc_metrics_cache_release(struct trc_metrics_cache *c)
{
	trc_buf_release(&c->out);
	c->valid = false;
}

static bool
same_view(const struct trc_metrics_view *a, const struct trc_metrics_view *b)
{
	return a->rows == b->rows && a->gc == b->gc && a->targets == b->targets;
}

const struct trc_buf *
trc_metrics_cached(struct trc_metrics_cache *c, const struct trc_top *t,
		   const struct trc_metrics_view *v, enum trc_metrics_format format)
{
	uint64_t generation = trc_top_generation(t);

	if (c->valid && c->generation == generation && c->format == format && same_view(&c->view, v))
		return &c->out;
	c->out.len = 0;
	trc_metrics_format(t, v, format, &c->out);
	c->valid = true;
	c->generation = generation;
	c->view = *v;
	c->format = format;
	return &c->out;
}
