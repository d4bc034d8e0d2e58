/* metrics.c: the --top table as Prometheus' text exposition or OpenMetrics text: a series per process and row, labelled, zero first. */
#include "metrics.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "top_rows.h"
#include "xmalloc.h"

#define NS_PER_SEC 1000000000u
#define OTHER "(other)"

/* Which figure of a row a family shows. */
enum figure {
	FIG_COUNT,
	FIG_TOTAL,              /* total_ns, in seconds */
	FIG_SELF,               /* self_ns, in seconds */
	FIG_HIST,               /* the durations: a histogram (--top time) */
};

/* A family made of the table's rows: its name (OpenMetrics' family name: no _total). */
struct family {
	const char *name, *help;
	enum figure figure;
};

/*
 * The families of each kind of mode. One unit each: the seconds a method took with its
 * callees are the histogram's _sum, those without them a family of their own. Named tracer_
 * beside prometheus_exporter's and yabeda's ruby_ families, which a Rails host may serve too.
 */
static const struct family call_families[] = {
	{ "tracer_method_calls", "Calls of Ruby methods, by method and the file and line defining it.",
	  FIG_COUNT },
};
static const struct family time_families[] = {
	{ "tracer_method_calls", "Calls of Ruby methods, by method and the file and line defining it.",
	  FIG_COUNT },
	{ "tracer_method_self_seconds", "Seconds spent in Ruby methods themselves, their callees' "
	  "time left out.", FIG_SELF },
	{ "tracer_method_duration_seconds", "Durations of Ruby method calls, callees included (the "
	  "outermost call of a recursion only).", FIG_HIST },
};
static const struct family alloc_families[] = {
	{ "tracer_allocations", "Objects allocated, by class and the line that allocated them.",
	  FIG_COUNT },
};
static const struct family raise_families[] = {
	{ "tracer_exceptions", "Exceptions raised, by class and the line that raised them.", FIG_COUNT },
};
static const struct family thread_families[] = {
	{ "tracer_thread_gvl_turns", "Turns each thread had on the GVL (Ruby 3.3+).", FIG_COUNT },
	{ "tracer_thread_gvl_wait_seconds", "Seconds each thread waited for the GVL.", FIG_TOTAL },
	{ "tracer_thread_gvl_held_seconds", "Seconds each thread held the GVL.", FIG_SELF },
};

struct kind {
	const struct family *families;
	size_t nfamilies;
	const char *label;      /* the label's name */
	const char *fixed;      /* non-NULL: every row's label value (the modes whose rows have none) */
};

#define NFAMILIES(f) (sizeof(f) / sizeof((f)[0]))

/* The labels the families use themselves: --label may not name them. */
static const char *const reserved[] = {
	"pid", "method", "file", "line", "class", "thread", "kind", "le", "cause", "quantile", "app_file", "app_line",
};

#define BOUND_NS(ns) (ns),
static const uint64_t bound_ns[] = { TRC_TOP_BUCKET_BOUNDS(BOUND_NS) };
#undef BOUND_NS
_Static_assert(sizeof(bound_ns) / sizeof(bound_ns[0]) + 1 == TRC_TOP_BUCKETS,
	       "TRC_TOP_BUCKETS is the bounds and one more");

/* A row's figures as served: its own, zeros while it is held at zero, or the "(other)" sum. */
struct fig {
	uint64_t count, total, self;
	uint64_t b[TRC_TOP_BUCKETS];
};

/* One process: its own table, where it runs, how it ended, and what of it is still held at zero. */
struct proc {
	pid_t pid;
	struct trc_top *table;
	bool seen;                      /* it answered (its root, or counts): served from then on */
	char *root;                     /* its working directory, or NULL */
	double created;                 /* attached (its series' _created) */
	bool ended;
	double ended_at;
	double last_report;             /* when its last TOP came (attached, before) */
	uint64_t last_events, last_elapsed_ns;  /* that TOP's */
	double unreported_secs;         /* killed: from its last report to its connection's end */
	uint64_t unreported_lost;       /* ...and the events its last rate makes of them */
	/*
	 * Zero first: entries [published, size) are served at 0. Those a scrape saw at zero
	 * (pending, from pending_at) get their values TRC_METRICS_ZERO_HOLD seconds later; so do
	 * the process's own counters (proc_published).
	 */
	size_t published, pending;
	bool pending_set, proc_published;
	double pending_at;
	/* The exposition being made: the table's rows the run's busiest are, and the rest. */
	const struct trc_top_entry **found;
	struct fig other;
};

struct trc_metrics {
	const struct trc_top *all;
	struct trc_metrics_opts o;
	const char *app;                /* --label app=NAME's value, or NULL */
	struct proc **procs;
	size_t nprocs;
	size_t targets;
	bool valid;                     /* out holds what the counts make now */
	uint64_t generation;            /* all's, when out was made */
	struct trc_buf out[2];          /* by format */
	struct trc_buf scratch;
};

/* ---- the set ---- */

struct trc_metrics *
trc_metrics_new(const struct trc_top *all, const struct trc_metrics_opts *o)
{
	struct trc_metrics *m = xcalloc(1, sizeof(*m));

	m->all = all;
	m->o = *o;
	for (size_t i = 0; i < o->nlabels; i++)
		if (strncmp(o->labels[i], "app=", 4) == 0)
			m->app = o->labels[i] + 4;
	trc_buf_init(&m->out[0]);
	trc_buf_init(&m->out[1]);
	trc_buf_init(&m->scratch);
	return m;
}

static void
proc_free(struct proc *p)
{
	trc_top_free(p->table);
	free(p->root);
	free(p->found);
	free(p);
}

void
trc_metrics_free(struct trc_metrics *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->nprocs; i++)
		proc_free(m->procs[i]);
	free(m->procs);
	trc_buf_release(&m->out[0]);
	trc_buf_release(&m->out[1]);
	trc_buf_release(&m->scratch);
	free(m);
}

static struct proc *
find_proc(const struct trc_metrics *m, pid_t pid, size_t *at)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		if (m->procs[i]->pid == pid) {
			if (at != NULL)
				*at = i;
			return m->procs[i];
		}
	}
	return NULL;
}

static void
drop_proc(struct trc_metrics *m, size_t i)
{
	proc_free(m->procs[i]);
	memmove(&m->procs[i], &m->procs[i + 1], (m->nprocs - i - 1) * sizeof(*m->procs));
	m->nprocs--;
	m->valid = false;
}

void
trc_metrics_add(struct trc_metrics *m, pid_t pid, double now)
{
	struct proc *p;
	size_t at;
	char why[128];

	if (find_proc(m, pid, &at) != NULL)
		drop_proc(m, at);
	p = xcalloc(1, sizeof(*p));
	p->pid = pid;
	p->table = trc_top_new(m->o.mode, &pid, 1);
	for (size_t i = 0; i < m->o.nignores; i++)
		trc_top_ignore(p->table, m->o.ignores[i], why, sizeof(why));
	p->created = now;
	p->last_report = now;
	m->procs = xreallocarray(m->procs, m->nprocs + 1, sizeof(*m->procs));
	m->procs[m->nprocs++] = p;
	m->valid = false;
}

void
trc_metrics_root(struct trc_metrics *m, pid_t pid, const char *root)
{
	struct proc *p = find_proc(m, pid, NULL);

	if (p == NULL || root == NULL)
		return;
	free(p->root);
	p->root = xstrdup(root);
	p->seen = true;
	m->valid = false;
}

void
trc_metrics_feed(struct trc_metrics *m, pid_t pid, const struct trc_message *msg, double now)
{
	struct proc *p = find_proc(m, pid, NULL);

	if (p == NULL || p->ended || msg->type != TRC_MSG_TOP)
		return;
	trc_top_feed(p->table, pid, msg);
	p->seen = true;
	p->last_report = now;
	p->last_events = msg->top.events;
	p->last_elapsed_ns = msg->top.elapsed_ns;
	m->valid = false;
}

void
trc_metrics_ended(struct trc_metrics *m, pid_t pid, double now, double closed_at)
{
	struct proc *p = find_proc(m, pid, NULL);
	double secs;

	if (p == NULL || p->ended)
		return;
	p->ended = true;
	p->ended_at = now;
	if (closed_at > 0) {
		secs = closed_at > p->last_report ? closed_at - p->last_report : 0;
		p->unreported_secs = secs;
		if (p->last_elapsed_ns > 0)
			p->unreported_lost = (uint64_t)((double)p->last_events * secs * 1e9 /
							(double)p->last_elapsed_ns + 0.5);
	}
	m->valid = false;
}

void
trc_metrics_set_targets(struct trc_metrics *m, size_t targets)
{
	if (m->targets != targets)
		m->valid = false;
	m->targets = targets;
}

/* ---- labels ---- */

int
trc_metrics_check_label(const char *kv, char *why, size_t whylen)
{
	const char *eq = strchr(kv, '=');
	size_t n = eq != NULL ? (size_t)(eq - kv) : 0;

	if (eq == NULL || n == 0) {
		snprintf(why, whylen, "expected KEY=VALUE");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (!(isalpha((unsigned char)kv[i]) || kv[i] == '_' || (i > 0 && isdigit((unsigned char)kv[i])))) {
			snprintf(why, whylen, "a label name is letters, digits and '_', not starting with a digit");
			return -1;
		}
	}
	if (n >= 2 && kv[0] == '_' && kv[1] == '_') {
		snprintf(why, whylen, "names starting with '__' are Prometheus' own");
		return -1;
	}
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		if (strlen(reserved[i]) == n && strncmp(kv, reserved[i], n) == 0) {
			snprintf(why, whylen, "'%s' is a label tracer's series have already", reserved[i]);
			return -1;
		}
	}
	return 0;
}

void
trc_metrics_label_value(struct trc_buf *b, const char *p, size_t n)
{
	trc_escape_as(b, TRC_ESC_PROM, p, n);
}

/* The file as served: relative to the process's root when under it ("/" is no root). */
static void
file_value(struct trc_buf *b, const struct proc *p, const char *file, size_t n)
{
	size_t r = p->root != NULL ? strlen(p->root) : 0;

	if (r > 1 && n > r + 1 && memcmp(file, p->root, r) == 0 && file[r] == '/') {
		file += r + 1;
		n -= r + 1;
	}
	trc_metrics_label_value(b, file, n);
}

/* pid, app and --label's: the labels every series of p has, ",pid=...", into b. */
static void
proc_labels(const struct trc_metrics *m, const struct proc *p, struct trc_buf *b)
{
	b->len = 0;
	trc_buf_addf(b, ",pid=\"%d\"", (int)p->pid);
	if (m->app != NULL || p->root != NULL) {
		trc_buf_adds(b, ",app=\"");
		if (m->app != NULL)
			trc_metrics_label_value(b, m->app, strlen(m->app));
		else
			trc_metrics_label_value(b, p->root, strlen(p->root));
		trc_buf_addc(b, '"');
	}
	for (size_t i = 0; i < m->o.nlabels; i++) {
		const char *eq = strchr(m->o.labels[i], '=');

		if (strncmp(m->o.labels[i], "app=", 4) == 0)
			continue;
		trc_buf_addf(b, ",%.*s=\"", (int)(eq - m->o.labels[i]), m->o.labels[i]);
		trc_metrics_label_value(b, eq + 1, strlen(eq + 1));
		trc_buf_addc(b, '"');
	}
}

/* --label's alone, for the series of no process: "{k=\"v\"}" or "". */
static void
run_labels(const struct trc_metrics *m, struct trc_buf *b)
{
	size_t n = 0;

	for (size_t i = 0; i < m->o.nlabels; i++) {
		const char *eq = strchr(m->o.labels[i], '=');

		trc_buf_addf(b, "%s%.*s=\"", n++ ? "," : "{", (int)(eq - m->o.labels[i]), m->o.labels[i]);
		trc_metrics_label_value(b, eq + 1, strlen(eq + 1));
		trc_buf_addc(b, '"');
	}
	if (n > 0)
		trc_buf_addc(b, '}');
}

/* ---- the exposition ---- */

static struct kind
kind_of(enum trc_top_mode mode)
{
	int flags = trc_top_mode_flags(mode);

	if (flags & TRC_TOPM_METHOD)
		return flags & TRC_TOPM_TIMED ?
		       (struct kind){ time_families, NFAMILIES(time_families), "method", NULL } :
		       (struct kind){ call_families, NFAMILIES(call_families), "method", NULL };
	if (flags & TRC_TOPM_THREAD)
		return (struct kind){ thread_families, NFAMILIES(thread_families), "thread", NULL };
	if (flags & TRC_TOPM_RAISE)
		return (struct kind){ raise_families, NFAMILIES(raise_families), "class", NULL };
	/* arrays and strings: their rows have no class; the mode says which classes they count */
	if (!(flags & TRC_TOPM_CLASS))
		return (struct kind){ alloc_families, NFAMILIES(alloc_families), "class",
				      mode == TRC_TOP_STRINGS ? "String" : "Array|Hash" };
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

/* What one exposition is being made of. */
struct ex {
	const struct trc_metrics *m;
	enum trc_metrics_format format;
	struct trc_buf *b;
	struct kind k;
	bool site;
	struct trc_top_shown *rows;     /* the run's, busiest first */
	size_t nrows, shown;
	struct trc_buf plabels;         /* the process's labels, for the one being written */
};

/* A family's # HELP and # TYPE: OpenMetrics names the family, the text format a counter's sample. */
static void
header(const struct ex *x, const char *name, const char *type, const char *help)
{
	const char *suffix = x->format == TRC_METRICS_TEXT && strcmp(type, "counter") == 0 ? "_total" : "";

	trc_buf_addf(x->b, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, suffix, help, name, suffix, type);
}

/* A figure in nanoseconds as seconds, exactly. */
static void
add_seconds(struct trc_buf *b, uint64_t ns)
{
	trc_buf_addf(b, "%" PRIu64 ".%09" PRIu64, ns / NS_PER_SEC, ns % NS_PER_SEC);
}

/* A bucket's bound as le: "0.00001", "2.5", "10.0" (one form for each bound, as both formats read it). */
static void
add_le(struct trc_buf *b, uint64_t ns)
{
	char frac[16];
	int n = snprintf(frac, sizeof(frac), "%09" PRIu64, ns % NS_PER_SEC);

	while (n > 1 && frac[n - 1] == '0')
		frac[--n] = '\0';
	trc_buf_addf(b, "%" PRIu64 ".%s", ns / NS_PER_SEC, frac);
}

/* A row's own labels: "{method=\"...\",file=\"...\",line=\"3\"", unclosed. */
static void
row_labels(const struct ex *x, const struct proc *p, const struct trc_top_entry *e)
{
	struct trc_buf *b = x->b;

	trc_buf_addf(b, "{%s=\"", x->k.label);
	if (e == NULL)
		trc_buf_adds(b, OTHER);
	else if (x->k.fixed != NULL)
		trc_buf_adds(b, x->k.fixed);
	else
		trc_metrics_label_value(b, e->label, e->label_len);
	trc_buf_addc(b, '"');
	if (x->site && e != NULL) {
		trc_buf_adds(b, ",file=\"");
		file_value(b, p, e->file, e->file_len);
		trc_buf_addf(b, "\",line=\"%" PRId32 "\"", e->line);
	}
	/* An exception's app frame: two rows of one site and class differ by it alone. */
	if (e != NULL && e->app_len > 0) {
		trc_buf_adds(b, ",app_file=\"");
		trc_metrics_label_value(b, e->app, e->app_len);
		trc_buf_addf(b, "\",app_line=\"%" PRId32 "\"", e->app_line);
	}
	trc_buf_add(b, x->plabels.data, x->plabels.len);
}

/* OpenMetrics: when the series began, after its sample. */
static void
created(const struct ex *x, const struct proc *p, const char *name, const struct trc_top_entry *e)
{
	if (x->format != TRC_METRICS_OPENMETRICS)
		return;
	trc_buf_addf(x->b, "%s_created", name);
	row_labels(x, p, e);
	trc_buf_addf(x->b, "} %.3f\n", p->created);
}

static void
counter_series(const struct ex *x, const struct family *f, const struct proc *p,
	       const struct trc_top_entry *e, const struct fig *v)
{
	trc_buf_addf(x->b, "%s_total", f->name);
	row_labels(x, p, e);
	trc_buf_adds(x->b, "} ");
	if (f->figure == FIG_COUNT)
		trc_buf_addf(x->b, "%" PRIu64, v->count);
	else
		add_seconds(x->b, f->figure == FIG_TOTAL ? v->total : v->self);
	trc_buf_addc(x->b, '\n');
	created(x, p, f->name, e);
}

/* _bucket (cumulative, by le), _sum, _count: what histogram_quantile() reads. */
static void
hist_series(const struct ex *x, const struct family *f, const struct proc *p,
	    const struct trc_top_entry *e, const struct fig *v)
{
	uint64_t cum = 0;

	for (size_t i = 0; i < TRC_TOP_BUCKETS; i++) {
		cum += v->b[i];
		trc_buf_addf(x->b, "%s_bucket", f->name);
		row_labels(x, p, e);
		trc_buf_adds(x->b, ",le=\"");
		if (i + 1 < TRC_TOP_BUCKETS)
			add_le(x->b, bound_ns[i]);
		else
			trc_buf_adds(x->b, "+Inf");
		trc_buf_addf(x->b, "\"} %" PRIu64 "\n", cum);
	}
	trc_buf_addf(x->b, "%s_count", f->name);
	row_labels(x, p, e);
	trc_buf_addf(x->b, "} %" PRIu64 "\n%s_sum", cum, f->name);
	row_labels(x, p, e);
	trc_buf_adds(x->b, "} ");
	add_seconds(x->b, v->total);
	trc_buf_addc(x->b, '\n');
	created(x, p, f->name, e);
}

static void
series(const struct ex *x, const struct family *f, const struct proc *p,
       const struct trc_top_entry *e, const struct fig *v)
{
	if (f->figure == FIG_HIST)
		hist_series(x, f, p, e, v);
	else
		counter_series(x, f, p, e, v);
}

/* Whether p's entry e is still held at zero. */
static bool
held(const struct proc *p, const struct trc_top_entry *e)
{
	return (size_t)(e - trc_top_entry(p->table, 0)) >= p->published;
}

static void
fig_of(const struct proc *p, const struct trc_top_entry *e, struct fig *v)
{
	memset(v, 0, sizeof(*v));
	if (held(p, e))
		return;
	v->count = e->count;
	v->total = e->total_ns;
	v->self = e->self_ns;
	for (size_t i = 0; e->buckets != NULL && i < TRC_TOP_BUCKETS; i++)
		v->b[i] = e->buckets[i];
}

static void
fig_add(struct fig *a, const struct fig *v, int sign)
{
	a->count += (uint64_t)sign * v->count;
	a->total += (uint64_t)sign * v->total;
	a->self += (uint64_t)sign * v->self;
	for (size_t i = 0; i < TRC_TOP_BUCKETS; i++)
		a->b[i] += (uint64_t)sign * v->b[i];
}

/* p's entries of the run's busiest rows (NULL where p has none), and the sum of its others. */
static void
match_rows(const struct ex *x, struct proc *p)
{
	struct fig v;

	free(p->found);
	p->found = xcalloc(x->shown ? x->shown : 1, sizeof(*p->found));
	memset(&p->other, 0, sizeof(p->other));
	for (size_t k = 0; k < trc_top_size(p->table); k++) {
		const struct trc_top_entry *e = trc_top_entry(p->table, k);

		if (!e->hidden) {
			fig_of(p, e, &v);
			fig_add(&p->other, &v, 1);
		}
	}
	for (size_t i = 0; i < x->shown; i++) {
		const struct trc_top_entry *r = x->rows[i].e;

		p->found[i] = trc_top_find(p->table, r->file, r->file_len, r->line, r->label, r->label_len);
		if (p->found[i] != NULL && !p->found[i]->hidden) {
			fig_of(p, p->found[i], &v);
			fig_add(&p->other, &v, -1);
		}
	}
}

static void
family(struct ex *x, const struct family *f)
{
	const struct trc_metrics *m = x->m;
	struct fig v;

	header(x, f->name, f->figure == FIG_HIST ? "histogram" : "counter", f->help);
	for (size_t j = 0; j < m->nprocs; j++) {
		const struct proc *p = m->procs[j];

		if (!p->seen)
			continue;       /* refused, gone before it answered: nothing of it to serve */
		proc_labels(m, p, &x->plabels);
		for (size_t i = 0; i < x->shown; i++) {
			if (p->found[i] == NULL)
				continue;
			fig_of(p, p->found[i], &v);
			series(x, f, p, p->found[i], &v);
		}
		if (x->shown < x->nrows)
			series(x, f, p, NULL, &p->other);
	}
}

/* "{extra,pid=...,app=...": a process's counter's labels, unclosed (the process's start with a comma). */
static void
own_labels(const struct ex *x, const char *extra)
{
	trc_buf_addc(x->b, '{');
	trc_buf_adds(x->b, extra);
	if (extra[0] != '\0')
		trc_buf_add(x->b, x->plabels.data, x->plabels.len);
	else
		trc_buf_add(x->b, x->plabels.data + 1, x->plabels.len - 1);
}

/* A counter of each process: "name_total{pid=...}" and its value from fn, 0 while held. */
static void
proc_counter(struct ex *x, const char *name, const char *help, const char *extra,
	     void (*value)(struct trc_buf *, const struct proc *, const void *), const void *arg)
{
	const struct trc_metrics *m = x->m;

	if (help != NULL)
		header(x, name, "counter", help);
	for (size_t j = 0; j < m->nprocs; j++) {
		const struct proc *p = m->procs[j];

		if (!p->seen)
			continue;
		proc_labels(m, p, &x->plabels);
		trc_buf_addf(x->b, "%s_total", name);
		own_labels(x, extra);
		trc_buf_adds(x->b, "} ");
		if (p->proc_published)
			value(x->b, p, arg);
		else
			trc_buf_addc(x->b, '0');
		trc_buf_addc(x->b, '\n');
		if (x->format == TRC_METRICS_OPENMETRICS) {
			trc_buf_addf(x->b, "%s_created", name);
			own_labels(x, extra);
			trc_buf_addf(x->b, "} %.3f\n", p->created);
		}
	}
}

enum proc_fig { PF_EVENTS, PF_LOST_FULL, PF_LOST_ENDED, PF_UNREPORTED, PF_MINOR, PF_MAJOR, PF_PAUSE };

static void
proc_value(struct trc_buf *b, const struct proc *p, const void *arg)
{
	enum proc_fig f = *(const enum proc_fig *)arg;
	struct trc_top_gc gc = trc_top_gc(p->table);

	switch (f) {
	case PF_EVENTS: trc_buf_addf(b, "%" PRIu64, trc_top_events(p->table)); break;
	case PF_LOST_FULL: trc_buf_addf(b, "%" PRIu64, trc_top_lost(p->table)); break;
	case PF_LOST_ENDED: trc_buf_addf(b, "%" PRIu64, p->unreported_lost); break;
	case PF_UNREPORTED: trc_buf_addf(b, "%.3f", p->unreported_secs); break;
	case PF_MINOR: trc_buf_addf(b, "%" PRIu64, gc.count - gc.major); break;
	case PF_MAJOR: trc_buf_addf(b, "%" PRIu64, gc.major); break;
	case PF_PAUSE: add_seconds(b, gc.pause_ns); break;
	}
}

static void
proc_family(struct ex *x, const char *name, const char *help, const char *extra, enum proc_fig f)
{
	proc_counter(x, name, help, extra, proc_value, &f);
}

static void
proc_families(struct ex *x)
{
	if (x->m->o.gc) {
		proc_family(x, "tracer_gc_collections", "Garbage collections, minor and major.",
			    "kind=\"minor\"", PF_MINOR);
		proc_family(x, "tracer_gc_collections", NULL, "kind=\"major\"", PF_MAJOR);
		proc_family(x, "tracer_gc_pause_seconds", "Seconds garbage collections stopped the process.",
			    "", PF_PAUSE);
	}
	proc_family(x, "tracer_events", "Events the agent counted.", "", PF_EVENTS);
	proc_family(x, "tracer_events_lost", "Events lost: cause=full, the agent's buffers or a "
		    "table were full (counted); cause=unreported, a process killed between two "
		    "reports (an estimate: its last report's rate over the seconds unreported).",
		    "cause=\"full\"", PF_LOST_FULL);
	proc_family(x, "tracer_events_lost", NULL, "cause=\"unreported\"", PF_LOST_ENDED);
	proc_family(x, "tracer_unreported_seconds", "Seconds from a killed process's last report to "
		    "its end, whose counts never came.", "", PF_UNREPORTED);
}

/* The whole exposition in x->format into x->b. */
static void
make(struct ex *x)
{
	const struct trc_metrics *m = x->m;

	for (size_t j = 0; j < x->k.nfamilies; j++)
		family(x, &x->k.families[j]);
	proc_families(x);
	header(x, "tracer_targets", "gauge", "Processes tracer is attached to now.");
	trc_buf_adds(x->b, "tracer_targets");
	run_labels(m, x->b);
	trc_buf_addf(x->b, " %zu\n", m->targets);
	if (x->format == TRC_METRICS_OPENMETRICS)
		trc_buf_adds(x->b, "# EOF\n");
}

/* Ended processes kept long enough go; what waited at zero long enough gets its values. */
static void
age(struct trc_metrics *m, double now)
{
	for (size_t i = m->nprocs; i-- > 0;)
		if (m->procs[i]->ended && now - m->procs[i]->ended_at >= TRC_METRICS_KEEP_ENDED)
			drop_proc(m, i);
	for (size_t i = 0; i < m->nprocs; i++) {
		struct proc *p = m->procs[i];

		if (p->pending_set && now - p->pending_at >= TRC_METRICS_ZERO_HOLD) {
			p->published = p->pending;
			p->proc_published = true;
			p->pending_set = false;
			m->valid = false;
		}
	}
}

static void
build(struct trc_metrics *m)
{
	struct trc_top_view all = { .rows = UINT_MAX };
	struct ex x = { .m = m, .k = kind_of(m->o.mode) };

	x.site = !(trc_top_mode_flags(m->o.mode) & TRC_TOPM_NO_SITE);
	x.rows = trc_top_rows(m->all, &all, &x.nrows);
	x.shown = x.nrows < m->o.rows ? x.nrows : m->o.rows;
	trc_buf_init(&x.plabels);
	for (size_t i = 0; i < m->nprocs; i++)
		match_rows(&x, m->procs[i]);
	for (int f = 0; f < 2; f++) {
		x.format = (enum trc_metrics_format)f;
		x.b = &m->out[f];
		x.b->len = 0;
		make(&x);
	}
	trc_buf_release(&x.plabels);
	free(x.rows);
	m->valid = true;
	m->generation = trc_top_generation(m->all);
}

/* What was served at zero now waits TRC_METRICS_ZERO_HOLD seconds for its values. */
static void
hold(struct trc_metrics *m, double now)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		struct proc *p = m->procs[i];
		size_t n = trc_top_size(p->table);

		if (!p->pending_set && (n > p->published || !p->proc_published)) {
			p->pending = n;
			p->pending_at = now;
			p->pending_set = true;
		}
	}
}

const struct trc_buf *
trc_metrics_expose(struct trc_metrics *m, enum trc_metrics_format format, double now)
{
	age(m, now);
	if (!m->valid || m->generation != trc_top_generation(m->all))
		build(m);
	hold(m, now);
	return &m->out[format];
}
