/* top.c: the --top table: (file, line, label) rows summed across targets, sorted, laid out, printed. */
#include "top.h"

#include <inttypes.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "xmalloc.h"

#define GAP 2                   /* spaces between columns */
#define MAX_COLS 8
#define NS_PER_MS 1e6

/* How each mode is shown. */
static const struct mode_def {
	const char *name;
	bool file;              /* FILENAME and LINE columns */
	const char *label;      /* title of the label column, NULL: none */
	const char *json_label; /* its JSON key */
	const char *count;      /* title of the count column */
	bool timed;             /* TOTAL, SELF and AVG; sorted by TOTAL */
} modes[] = {
	[TRC_TOP_CALLS] = { "calls", true, "METHOD", "method", "CALLS", false },
	[TRC_TOP_TIME] = { "time", true, "METHOD", "method", "CALLS", true },
	[TRC_TOP_OBJECTS_TOTAL] = { "objects-total", false, "OBJECT", "object", "COUNT", false },
	[TRC_TOP_OBJECTS] = { "objects", true, "OBJECT", "object", "COUNT", false },
	[TRC_TOP_ARRAYS] = { "arrays", true, NULL, NULL, "COUNT", false },
	[TRC_TOP_STRINGS] = { "strings", true, NULL, NULL, "COUNT", false },
	[TRC_TOP_EXCEPTIONS] = { "exceptions", true, "EXCEPTION", "exception", "COUNT", false },
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

struct entry {
	char *file;             /* file, NUL, label, NUL: one allocation */
	const char *label;
	uint32_t file_len, label_len;
	int32_t line;
	uint32_t hash;
	bool hidden;            /* an --ignore regex matched its class */
	uint64_t count, total_ns, self_ns;
};

/* An entry as a table shows it: PIDS counts the targets of the view that counted it. */
struct shown {
	const struct entry *e;
	uint32_t npids;
};

struct trc_top {
	const struct mode_def *def;
	pid_t *pids;            /* every target that ever fed the table, in order of arrival */
	size_t npids;
	size_t words;           /* uint64_t words of each entry's bitmap of pids */
	struct entry *entries;
	uint64_t *seen;         /* bit j of seen[i * words...]: pids[j] counted entries[i] */
	size_t nentries, cap;
	uint32_t *slots;        /* open addressing: entry index + 1, 0 = free */
	size_t nslots;          /* a power of two, above twice nentries */
	regex_t *ignore;
	size_t nignore;
	uint64_t events, lost;
	struct trc_top_gc gc;
	uint64_t events_at_reset;       /* events when the rows were last cleared */
};

const char *
trc_top_mode_name(enum trc_top_mode mode)
{
	return (size_t)mode < NMODES ? modes[mode].name : NULL;
}

int
trc_top_mode_parse(const char *name, enum trc_top_mode *mode)
{
	for (size_t i = 0; i < NMODES; i++) {
		if (strcmp(modes[i].name, name) == 0) {
			*mode = (enum trc_top_mode)i;
			return 0;
		}
	}
	return -1;
}

struct trc_top *
trc_top_new(enum trc_top_mode mode, const pid_t *pids, size_t npids)
{
	struct trc_top *t = xcalloc(1, sizeof(*t));

	t->def = &modes[(size_t)mode < NMODES ? mode : TRC_TOP_CALLS];
	t->nslots = 64;
	t->slots = xcalloc(t->nslots, sizeof(*t->slots));
	for (size_t i = 0; i < npids; i++)
		trc_top_add_pid(t, pids[i]);
	return t;
}

/* Gives every entry's bitmap words words, keeping the bits. */
static void
widen_bitmaps(struct trc_top *t, size_t words)
{
	uint64_t *seen = xcalloc(t->cap ? t->cap * words : 1, sizeof(*seen));

	for (size_t k = 0; k < t->nentries && t->words > 0; k++)
		memcpy(&seen[k * words], &t->seen[k * t->words], t->words * sizeof(*seen));
	free(t->seen);
	t->seen = seen;
	t->words = words;
}

void
trc_top_add_pid(struct trc_top *t, pid_t pid)
{
	for (size_t i = 0; i < t->npids; i++)
		if (t->pids[i] == pid)
			return;
	t->pids = xreallocarray(t->pids, t->npids + 1, sizeof(*t->pids));
	t->pids[t->npids++] = pid;
	if ((t->npids + 63) / 64 > t->words)
		widen_bitmaps(t, (t->npids + 63) / 64);
}

void
trc_top_reset(struct trc_top *t)
{
	for (size_t i = 0; i < t->nentries; i++)
		free(t->entries[i].file);
	t->nentries = 0;
	memset(t->slots, 0, t->nslots * sizeof(*t->slots));
	t->events_at_reset = t->events;
}

void
trc_top_free(struct trc_top *t)
{
	trc_top_reset(t);
	for (size_t i = 0; i < t->nignore; i++)
		regfree(&t->ignore[i]);
	free(t->ignore);
	free(t->entries);
	free(t->seen);
	free(t->slots);
	free(t->pids);
	free(t);
}

int
trc_top_ignore(struct trc_top *t, const char *regex, char *why, size_t whylen)
{
	regex_t re;
	int rc = regcomp(&re, regex, REG_EXTENDED | REG_NOSUB);

	if (rc != 0) {
		regerror(rc, &re, why, whylen);
		regfree(&re);
		return -1;
	}
	t->ignore = xreallocarray(t->ignore, t->nignore + 1, sizeof(*t->ignore));
	t->ignore[t->nignore++] = re;
	return 0;
}

/* "Foo::Bar#baz" -> "Foo::Bar", "Foo.new" -> "Foo", "#<Class:X>#m" -> "#<Class:X>", "Foo" -> "Foo". */
static size_t
class_len(const char *label, size_t len)
{
	for (size_t i = 1; i < len; i++)
		if (label[i] == '#' || label[i] == '.')
			return i;
	return len;
}

static bool
is_ignored(const struct trc_top *t, const char *label, size_t len)
{
	char *cls;
	bool hit = false;

	if (t->nignore == 0 || len == 0)
		return false;
	cls = xstrndup(label, class_len(label, len));
	for (size_t i = 0; i < t->nignore && !hit; i++)
		hit = regexec(&t->ignore[i], cls, 0, NULL, 0) == 0;
	free(cls);
	return hit;
}

/* FNV-1a over the key. */
static uint32_t
hash_bytes(uint32_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 16777619u;
	return h;
}

static uint32_t
hash_row(const struct trc_top_row *r)
{
	uint32_t h = 2166136261u;

	h = hash_bytes(h, r->file.ptr, r->file.len);
	h = hash_bytes(h, &r->line, sizeof(r->line));
	return hash_bytes(h, r->label.ptr, r->label.len);
}

static bool
same_key(const struct entry *e, const struct trc_top_row *r, uint32_t h)
{
	return e->hash == h && e->line == r->line && e->file_len == r->file.len &&
	       e->label_len == r->label.len && memcmp(e->file, r->file.ptr, r->file.len) == 0 &&
	       memcmp(e->label, r->label.ptr, r->label.len) == 0;
}

/* The slot holding the row's entry, or the free slot where it belongs. */
static size_t
find_slot(const struct trc_top *t, const struct trc_top_row *r, uint32_t h)
{
	size_t mask = t->nslots - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask)
		if (t->slots[i] == 0 || same_key(&t->entries[t->slots[i] - 1], r, h))
			return i;
}

static void
grow_slots(struct trc_top *t)
{
	size_t mask;

	free(t->slots);
	t->nslots *= 2;
	t->slots = xcalloc(t->nslots, sizeof(*t->slots));
	mask = t->nslots - 1;
	for (size_t k = 0; k < t->nentries; k++) {
		size_t i = t->entries[k].hash & mask;

		while (t->slots[i] != 0)
			i = (i + 1) & mask;
		t->slots[i] = (uint32_t)(k + 1);
	}
}

static void
grow_entries(struct trc_top *t)
{
	t->cap = t->cap ? t->cap * 2 : 64;
	t->entries = xreallocarray(t->entries, t->cap, sizeof(*t->entries));
	if (t->words > 0)
		t->seen = xreallocarray(t->seen, t->cap, t->words * sizeof(*t->seen));
}

/* A new, empty entry for the row; returns its index. */
static size_t
add_entry(struct trc_top *t, const struct trc_top_row *r, uint32_t h)
{
	struct entry *e;
	size_t slot;

	if ((t->nentries + 1) * 2 > t->nslots)
		grow_slots(t);
	if (t->nentries == t->cap)
		grow_entries(t);
	slot = find_slot(t, r, h);
	e = &t->entries[t->nentries];
	memset(e, 0, sizeof(*e));
	e->file = xmalloc((size_t)r->file.len + r->label.len + 2);
	memcpy(e->file, r->file.ptr, r->file.len);
	e->file[r->file.len] = '\0';
	e->label = e->file + r->file.len + 1;
	memcpy(e->file + r->file.len + 1, r->label.ptr, r->label.len);
	e->file[r->file.len + 1 + r->label.len] = '\0';
	e->file_len = r->file.len;
	e->label_len = r->label.len;
	e->line = r->line;
	e->hash = h;
	e->hidden = is_ignored(t, e->label, e->label_len);
	if (t->words > 0)
		memset(&t->seen[t->nentries * t->words], 0, t->words * sizeof(*t->seen));
	t->slots[slot] = (uint32_t)(t->nentries + 1);
	return t->nentries++;
}

static void
mark_pid(struct trc_top *t, size_t k, size_t p)
{
	t->seen[k * t->words + p / 64] |= (uint64_t)1 << (p % 64);
}

static void
add_row(struct trc_top *t, size_t p, const struct trc_top_row *r)
{
	uint32_t h = hash_row(r);
	size_t slot = find_slot(t, r, h), k;
	struct entry *e;

	if (t->slots[slot] != 0) {
		k = t->slots[slot] - 1;
	} else if (t->nentries < TRC_TOP_MAX_ENTRIES) {
		k = add_entry(t, r, h);
	} else {
		t->lost += r->count;
		return;
	}
	e = &t->entries[k];
	e->count += r->count;
	e->total_ns += r->total_ns;
	e->self_ns += r->self_ns;
	if (p < t->npids)
		mark_pid(t, k, p);
}

static size_t
pid_index(const struct trc_top *t, pid_t pid)
{
	size_t i = 0;

	while (i < t->npids && t->pids[i] != pid)
		i++;
	return i;
}

void
trc_top_feed(struct trc_top *t, pid_t pid, const struct trc_message *m)
{
	size_t p = pid_index(t, pid);

	if (m->type != TRC_MSG_TOP)
		return;
	t->events += m->top.events;
	t->lost += m->top.lost;
	t->gc.count += m->top.gcs;
	t->gc.major += m->top.major_gcs;
	t->gc.pause_ns += m->top.gc_ns;
	for (size_t i = 0; i < m->top.nrows; i++)
		add_row(t, p, &m->top.rows[i]);
}

size_t
trc_top_size(const struct trc_top *t)
{
	return t->nentries;
}

uint64_t
trc_top_events(const struct trc_top *t)
{
	return t->events;
}

uint64_t
trc_top_lost(const struct trc_top *t)
{
	return t->lost;
}

struct trc_top_gc
trc_top_gc(const struct trc_top *t)
{
	return t->gc;
}

/* Sorting: the main figure descending, then file, line and label ascending. */

static int
cmp_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c != 0 ? c : (alen > blen) - (alen < blen);
}

static int
cmp_key(const struct entry *a, const struct entry *b)
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
	const struct entry *a = ((const struct shown *)pa)->e, *b = ((const struct shown *)pb)->e;
	int c = cmp_figure(a->count, b->count);

	return c != 0 ? c : cmp_key(a, b);
}

static int
cmp_by_total(const void *pa, const void *pb)
{
	const struct entry *a = ((const struct shown *)pa)->e, *b = ((const struct shown *)pb)->e;
	int c = cmp_figure(a->total_ns, b->total_ns);

	return c != 0 ? c : cmp_key(a, b);
}

/* The view's targets as a bitmap of t->pids indexes (t->words words; the caller frees it). */
static uint64_t *
view_mask(const struct trc_top *t, const struct trc_top_view *v)
{
	uint64_t *mask = xcalloc(t->words ? t->words : 1, sizeof(*mask));

	for (size_t i = 0; i < v->npids; i++) {
		size_t p = 0;

		while (p < t->npids && t->pids[p] != v->pids[i])
			p++;
		if (p < t->npids)
			mask[p / 64] |= (uint64_t)1 << (p % 64);
	}
	return mask;
}

/* How many of the view's targets (mask) counted entry k. */
static uint32_t
count_pids(const struct trc_top *t, size_t k, const uint64_t *mask)
{
	uint32_t n = 0;

	for (size_t w = 0; w < t->words; w++)
		n += (uint32_t)__builtin_popcountll(t->seen[k * t->words + w] & mask[w]);
	return n;
}

/*
 * The visible entries, best first, at most v->rows of them (*n), each with the number of the
 * view's targets that counted it. The caller frees the array.
 */
static struct shown *
sorted(const struct trc_top *t, const struct trc_top_view *v, size_t *n)
{
	struct shown *rows = xcalloc(t->nentries ? t->nentries : 1, sizeof(*rows));
	uint64_t *mask = view_mask(t, v);
	size_t k = 0;

	for (size_t i = 0; i < t->nentries; i++)
		if (!t->entries[i].hidden)
			rows[k++] = (struct shown){ &t->entries[i], count_pids(t, i, mask) };
	free(mask);
	qsort(rows, k, sizeof(*rows), t->def->timed ? cmp_by_total : cmp_by_count);
	*n = k < v->rows ? k : v->rows;
	return rows;
}

/* Text: UTF-8 aware widths and cuts, control characters shown as '?'. */

static bool
is_cont(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

/* Display columns of s: one per code point (a fair guess for file and class names). */
static size_t
text_width(const char *s, size_t len)
{
	size_t w = 0;

	for (size_t i = 0; i < len; i++)
		w += !is_cont((unsigned char)s[i]);
	return w;
}

/* Bytes of the first w code points of s. */
static size_t
head_bytes(const char *s, size_t len, size_t w)
{
	size_t i = 0;

	for (size_t seen = 0; i < len; i++) {
		if (!is_cont((unsigned char)s[i]) && seen++ == w)
			break;
	}
	return i;
}

/* Offset where the last w code points of s begin. */
static size_t
tail_start(const char *s, size_t len, size_t w)
{
	size_t i = len;

	for (size_t seen = 0; i > 0 && seen < w; seen++) {
		i--;
		while (i > 0 && is_cont((unsigned char)s[i]))
			i--;
	}
	return i;
}

static void
put_safe(struct trc_buf *out, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char u = (unsigned char)s[i];

		if (u < 0x20 || u == 0x7f)
			trc_buf_addc(out, '?');
		else
			trc_buf_addc(out, s[i]);
	}
}

static void
put_spaces(struct trc_buf *out, size_t n)
{
	while (n-- > 0)
		trc_buf_addc(out, ' ');
}

/* s in exactly w columns: cut from the left behind "..." if longer, padded on the right if pad. */
static void
put_left_cut(struct trc_buf *out, const char *s, size_t len, size_t w, bool pad)
{
	size_t have = text_width(s, len), start;

	if (have <= w) {
		put_safe(out, s, len);
		if (pad)
			put_spaces(out, w - have);
		return;
	}
	if (w <= 3) {
		trc_buf_add(out, "...", w);
		return;
	}
	start = tail_start(s, len, w - 3);
	trc_buf_adds(out, "...");
	put_safe(out, s + start, len - start);
}

/* Columns. */

enum col { C_FILE, C_LINE, C_LABEL, C_COUNT, C_TOTAL, C_SELF, C_AVG, C_PIDS };

static const struct col_def {
	const char *title;      /* NULL: the mode's */
	bool left;              /* left-aligned, cut from the left when narrowed */
} cols[] = {
	[C_FILE] = { "FILENAME", true },
	[C_LINE] = { "LINE", false },
	[C_LABEL] = { NULL, true },
	[C_COUNT] = { NULL, false },
	[C_TOTAL] = { "TOTAL", false },
	[C_SELF] = { "SELF", false },
	[C_AVG] = { "AVG", false },
	[C_PIDS] = { "PIDS", false },
};

struct layout {
	enum col col[MAX_COLS];
	size_t width[MAX_COLS];
	size_t n;
};

/* A cell's text: points into the entry, or into buf. */
struct cell {
	const char *p;
	size_t len;
};

static const char *
col_title(const struct mode_def *d, enum col c)
{
	if (c == C_LABEL)
		return d->label;
	return c == C_COUNT ? d->count : cols[c].title;
}

static struct cell
num_cell(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static struct cell
num_cell(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return (struct cell){ buf, n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1 };
}

static double
ms(uint64_t ns)
{
	return (double)ns / NS_PER_MS;
}

static struct cell
get_cell(const struct shown *row, enum col c, char *buf, size_t size)
{
	const struct entry *e = row->e;

	switch (c) {
	case C_FILE:
		return (struct cell){ e->file, e->file_len };
	case C_LINE:
		return num_cell(buf, size, "%" PRId32, e->line);
	case C_LABEL:
		return (struct cell){ e->label, e->label_len };
	case C_COUNT:
		return num_cell(buf, size, "%" PRIu64, e->count);
	case C_TOTAL:
		return num_cell(buf, size, "%.3f", ms(e->total_ns));
	case C_SELF:
		return num_cell(buf, size, "%.3f", ms(e->self_ns));
	case C_AVG:
		return num_cell(buf, size, "%.3f", e->count ? ms(e->total_ns) / (double)e->count : 0.0);
	case C_PIDS:
		return num_cell(buf, size, "%" PRIu32, row->npids);
	}
	return (struct cell){ "", 0 };
}

static void
choose_cols(struct layout *l, const struct mode_def *d, bool pids)
{
	l->n = 0;
	if (d->file) {
		l->col[l->n++] = C_FILE;
		l->col[l->n++] = C_LINE;
	}
	if (d->label)
		l->col[l->n++] = C_LABEL;
	l->col[l->n++] = C_COUNT;
	if (d->timed) {
		l->col[l->n++] = C_TOTAL;
		l->col[l->n++] = C_SELF;
		l->col[l->n++] = C_AVG;
	}
	if (pids)
		l->col[l->n++] = C_PIDS;
}

static void
natural_widths(struct layout *l, const struct mode_def *d, const struct shown *rows, size_t n)
{
	char buf[32];

	for (size_t i = 0; i < l->n; i++) {
		const char *title = col_title(d, l->col[i]);

		l->width[i] = strlen(title);
		for (size_t r = 0; r < n; r++) {
			struct cell c = get_cell(&rows[r], l->col[i], buf, sizeof(buf));
			size_t w = text_width(c.p, c.len);

			if (w > l->width[i])
				l->width[i] = w;
		}
	}
}

/* Takes up to *over columns from column col, down to min; returns what is still over. */
static size_t
shrink(struct layout *l, enum col col, size_t min, size_t over)
{
	for (size_t i = 0; i < l->n && over > 0; i++) {
		size_t take;

		if (l->col[i] != col || l->width[i] <= min)
			continue;
		take = l->width[i] - min < over ? l->width[i] - min : over;
		l->width[i] -= take;
		over -= take;
	}
	return over;
}

/*
 * FILENAME gives up width first, then the label, each down to a readable minimum; on a very
 * narrow terminal both go on down to "...x". Numbers never shrink.
 */
static void
fit(struct layout *l, size_t width)
{
	size_t over = GAP * (l->n - 1);

	for (size_t i = 0; i < l->n; i++)
		over += l->width[i];
	if (over <= width)
		return;
	over -= width;
	over = shrink(l, C_FILE, TRC_TOP_MIN_FILE, over);
	over = shrink(l, C_LABEL, TRC_TOP_MIN_LABEL, over);
	over = shrink(l, C_FILE, TRC_TOP_MIN_CUT, over);
	shrink(l, C_LABEL, TRC_TOP_MIN_CUT, over);
}

static void
put_cell(struct trc_buf *out, const struct layout *l, size_t i, struct cell c)
{
	bool last = i + 1 == l->n;
	size_t w;

	if (i > 0)
		put_spaces(out, GAP);
	if (cols[l->col[i]].left) {
		put_left_cut(out, c.p, c.len, l->width[i], !last);
		return;
	}
	w = text_width(c.p, c.len);
	put_spaces(out, w < l->width[i] ? l->width[i] - w : 0);
	put_safe(out, c.p, c.len);
}

/* Titles are ASCII, and keep their start when narrowed: FILENAME -> FILE. */
static void
put_titles(struct trc_buf *out, const struct layout *l, const struct mode_def *d)
{
	for (size_t i = 0; i < l->n; i++) {
		const char *title = col_title(d, l->col[i]);
		size_t len = strlen(title);

		put_cell(out, l, i, (struct cell){ title, len < l->width[i] ? len : l->width[i] });
	}
	trc_buf_addc(out, '\n');
}

static void
put_row(struct trc_buf *out, const struct layout *l, const struct shown *row)
{
	char buf[32];

	for (size_t i = 0; i < l->n; i++)
		put_cell(out, l, i, get_cell(row, l->col[i], buf, sizeof(buf)));
	trc_buf_addc(out, '\n');
}

/* The header line. */

static void
add_list(struct trc_buf *b, const char *const *items, size_t n, const char *sep)
{
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			trc_buf_adds(b, sep);
		trc_buf_adds(b, items[i]);
	}
}

static void
add_filter(struct trc_buf *b, const struct trc_top_view *v)
{
	if (v->all) {
		trc_buf_adds(b, "all files");
		return;
	}
	trc_buf_adds(b, v->app_dirs ? "app dir: " : "filter: ");
	if (v->nfilter == 0)
		trc_buf_adds(b, "?");
	add_list(b, v->filter, v->nfilter, ", ");
}

/* "the app dir /srv/app" or "--filter /srv/app/lib/, /srv/gems/" */
static void
add_where(struct trc_buf *b, const struct trc_top_view *v)
{
	trc_buf_adds(b, v->app_dirs ? "the app dir " : "--filter ");
	if (v->nfilter == 0)
		trc_buf_adds(b, "?");
	add_list(b, v->filter, v->nfilter, ", ");
}

/*
 * Why a table shows no row, in b; false when it shows some. The agents count only what is
 * under the filter (their events count all they saw), and --ignore hides rows here.
 */
static bool
empty_note(const struct trc_top *t, const struct trc_top_view *v, size_t shown,
	   struct trc_buf *b)
{
	if (shown > 0)
		return false;
	if (t->nentries > 0) {
		trc_buf_addf(b, "no row: --ignore hides all %zu counted", t->nentries);
	} else if (v->all) {
		trc_buf_adds(b, "no row: nothing counted so far");
	} else if (t->events > t->events_at_reset) {
		trc_buf_adds(b, "no row: everything counted is outside ");
		add_where(b, v);
	} else {
		trc_buf_adds(b, "no row: nothing counted under ");
		add_where(b, v);
		trc_buf_adds(b, " so far");
	}
	return true;
}

/* A line of text cut to the view's width, control characters as '?'. */
static void
put_line(struct trc_buf *out, const struct trc_buf *line, const struct trc_top_view *v)
{
	put_safe(out, line->data, head_bytes(line->data, line->len, v->width));
	trc_buf_addc(out, '\n');
}

/*
 * "GC: 12 in 1.0s (2 major), 31 ms paused (3.1%)  since the start: 340 (25 major), 0.92s":
 * the pauses summed over the targets, as a share of the interval times the targets.
 */
static void
put_gc(struct trc_buf *h, const struct trc_top *t, const struct trc_top_view *v)
{
	const struct trc_top_gc *r = &v->gc_recent;
	double span = v->gc_secs * (double)(v->npids ? v->npids : 1);

	trc_buf_addf(h, "GC: %" PRIu64 " in %.1fs (%" PRIu64 " major), %.0f ms paused", r->count,
		     v->gc_secs, r->major, ms(r->pause_ns));
	if (span > 0)
		trc_buf_addf(h, " (%.1f%%)", 100.0 * (double)r->pause_ns / 1e9 / span);
	trc_buf_addf(h, "  since the start: %" PRIu64 " (%" PRIu64 " major), %.2fs paused",
		     t->gc.count, t->gc.major, (double)t->gc.pause_ns / 1e9);
}

/* The header line, and under it why there is no row, if there is none. */
static void
put_header(struct trc_buf *out, const struct trc_top *t, const struct trc_top_view *v,
	   size_t shown)
{
	struct trc_buf h;

	trc_buf_init(&h);
	trc_buf_addf(&h, "tracer --top %s  pids: ", t->def->name);
	for (size_t i = 0; i < v->npids; i++)
		trc_buf_addf(&h, "%s%d", i ? "," : "", (int)v->pids[i]);
	if (v->npids == 0)
		trc_buf_adds(&h, "-");
	trc_buf_addf(&h, "  elapsed: %.0fs  events/s: %.0f  lost: %" PRIu64 "  ", v->elapsed,
		     v->events_per_sec, t->lost);
	if (v->sample > 1 && v->sample_by_time)
		trc_buf_addf(&h, "sampled: 1/%u of the time  ", v->sample);
	else if (v->sample > 1)
		trc_buf_addf(&h, "sampled: 1 in %u  ", v->sample);
	add_filter(&h, v);
	put_line(out, &h, v);
	h.len = 0;
	if (v->gc) {
		put_gc(&h, t, v);
		put_line(out, &h, v);
		h.len = 0;
	}
	if (empty_note(t, v, shown, &h))
		put_line(out, &h, v);
	trc_buf_release(&h);
}

void
trc_top_format_text(const struct trc_top *t, const struct trc_top_view *v, struct trc_buf *out)
{
	struct layout l;
	size_t n;
	struct shown *rows = sorted(t, v, &n);

	put_header(out, t, v, n);
	trc_buf_addc(out, '\n');
	choose_cols(&l, t->def, v->pids_column);
	natural_widths(&l, t->def, rows, n);
	fit(&l, v->width);
	put_titles(out, &l, t->def);
	for (size_t i = 0; i < n; i++)
		put_row(out, &l, &rows[i]);
	free(rows);
}

/* JSON. */

static void
json_key(struct trc_buf *b, const char *key)
{
	trc_buf_addf(b, ",\"%s\":", key);
}

static void
json_row(struct trc_buf *b, const struct trc_top *t, const struct shown *row)
{
	const struct entry *e = row->e;

	trc_buf_adds(b, "{\"file\":");
	trc_json_str(b, e->file, e->file_len);
	trc_buf_addf(b, ",\"line\":%" PRId32, e->line);
	if (t->def->json_label) {
		json_key(b, t->def->json_label);
		trc_json_str(b, e->label, e->label_len);
	}
	trc_buf_addf(b, ",\"count\":%" PRIu64, e->count);
	if (t->def->timed)
		trc_buf_addf(b, ",\"total_ms\":%.3f,\"self_ms\":%.3f,\"avg_ms\":%.3f", ms(e->total_ns),
			     ms(e->self_ns), e->count ? ms(e->total_ns) / (double)e->count : 0.0);
	trc_buf_addf(b, ",\"pids\":%" PRIu32 "}", row->npids);
}

/* With no row, "note": why (as the text table's header says). */
static void
json_note(struct trc_buf *b, const struct trc_top *t, const struct trc_top_view *v, size_t shown)
{
	struct trc_buf note;

	trc_buf_init(&note);
	if (empty_note(t, v, shown, &note)) {
		json_key(b, "note");
		trc_json_str(b, note.data, note.len);
	}
	trc_buf_release(&note);
}

static void
json_head(struct trc_buf *b, const struct trc_top *t, const struct trc_top_view *v)
{
	trc_buf_addf(b, "{\"mode\":\"%s\",\"pids\":[", t->def->name);
	for (size_t i = 0; i < v->npids; i++)
		trc_buf_addf(b, "%s%d", i ? "," : "", (int)v->pids[i]);
	trc_buf_addf(b, "],\"elapsed\":%.3f,\"events\":%" PRIu64 ",\"events_per_sec\":%.1f,"
		     "\"lost\":%" PRIu64 ",\"filter\":[", v->elapsed, t->events, v->events_per_sec,
		     t->lost);
	for (size_t i = 0; i < v->nfilter && !v->all; i++) {
		if (i > 0)
			trc_buf_addc(b, ',');
		trc_json_str(b, v->filter[i], strlen(v->filter[i]));
	}
	trc_buf_addf(b, "],\"all\":%s", v->all ? "true" : "false");
	if (v->sample > 1)
		trc_buf_addf(b, ",\"sample\":%u,\"sample_by\":\"%s\"", v->sample,
			     v->sample_by_time ? "time" : "allocations");
	if (v->gc)
		trc_buf_addf(b, ",\"gc\":{\"count\":%" PRIu64 ",\"major\":%" PRIu64
			     ",\"pause_ms\":%.3f}", t->gc.count, t->gc.major, ms(t->gc.pause_ns));
}

void
trc_top_format_json(const struct trc_top *t, const struct trc_top_view *v, struct trc_buf *out)
{
	size_t n;
	struct shown *rows = sorted(t, v, &n);

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
