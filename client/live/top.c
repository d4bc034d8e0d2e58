/* top.c: the --top table: (file, line, label) entries summed across targets, with who counted each. */
#include "top.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

/* How each mode is shown: the protocol's list. */
static const struct trc_top_mode_def modes[] = {
#define TRC_X(NAME, value, name, flags, label, key, count, total, self, help) \
	[TRC_TOP_##NAME] = { name, flags, !((flags) & TRC_TOPM_NO_SITE), label, key, count, \
		((flags) & TRC_TOPM_TIMED) != 0, total, self, help },
	TRC_TOP_MODES(TRC_X)
#undef TRC_X
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

struct trc_top {
	const struct trc_top_mode_def *def;
	pid_t *pids;            /* every target that ever fed the table, in order of arrival */
	size_t npids;
	size_t words;           /* uint64_t words of each entry's bitmap of pids */
	struct trc_top_entry *entries;
	uint64_t *seen;         /* bit j of seen[i * words...]: pids[j] counted entries[i] */
	size_t nentries, cap;
	uint32_t *slots;        /* open addressing: entry index + 1, 0 = free */
	size_t nslots;          /* a power of two, above twice nentries */
	regex_t *ignore;
	size_t nignore;
	uint64_t events, lost;
	struct trc_top_gc gc;
	uint64_t events_at_reset;       /* events when the rows were last cleared */
	uint64_t generation;            /* see trc_top_generation() */
	size_t bytes;                   /* of the entries' names (TRC_TOP_MAX_BYTES) */
	struct trc_top_paths *paths;    /* trc_top_keep_paths(), or NULL */
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

int
trc_top_mode_flags(enum trc_top_mode mode)
{
	return (size_t)mode < NMODES ? modes[mode].flags : 0;
}

void
trc_top_mode_list(char *buf, size_t size, int flags)
{
	size_t len = 0, n = 0, k = 0;

	for (size_t i = 0; i < NMODES; i++)
		n += flags == 0 || (modes[i].flags & flags);
	buf[0] = '\0';
	for (size_t i = 0; i < NMODES && len < size; i++) {
		if (flags != 0 && !(modes[i].flags & flags))
			continue;
		k++;
		int w = snprintf(buf + len, size - len, "%s%s", k == 1 ? "" : k == n ? " or " : ", ",
				 modes[i].name);
		len += w > 0 ? (size_t)w : 0;
	}
}

/* Words of text after indent columns, in lines of at most width columns. */
static void
wrap(FILE *out, const char *text, size_t col, size_t indent, size_t width)
{
	while (*text != '\0') {
		size_t n = strcspn(text, " ");

		if (col > indent && col + 1 + n > width) {
			fprintf(out, "\n%*s", (int)indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', out);
			col++;
		}
		fwrite(text, 1, n, out);
		col += n;
		text += n;
		text += strspn(text, " ");
	}
	fputc('\n', out);
}

void
trc_top_mode_help(FILE *out, size_t width)
{
	for (size_t i = 0; i < NMODES; i++) {
		const struct trc_top_mode_def *d = &modes[i];
		char line[256];
		int n;

		if (d->flags & TRC_TOPM_PROFILE)       /* top_text.c's columns for it */
			n = snprintf(line, sizeof(line), "FILENAME LINE %s SELF%% TOTAL%% %s %s %s: %s (ms)", d->label,
				     d->self, d->total, d->count, d->help);
		else if (d->timed)
			n = snprintf(line, sizeof(line), "%s%s%s%s %s %s AVG: %s (ms)", d->file ? "FILENAME LINE " : "",
				     d->label ? d->label : "", d->label ? " " : "", d->count, d->total, d->self,
				     d->help);
		else
			n = snprintf(line, sizeof(line), "%s%s%s%s%s: %s", d->file ? "FILENAME LINE " : "",
				     d->label ? d->label : "", d->label ? " " : "",
				     d->flags & TRC_TOPM_RAISE ? "APP FRAME " : "", d->count, d->help);
		if (n < 0)
			continue;
		fprintf(out, "  %-14s ", d->name);
		wrap(out, line, 17, 17, width);
	}
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
	for (size_t i = 0; i < t->nentries; i++) {
		free(t->entries[i].file);
		free(t->entries[i].buckets);
	}
	t->nentries = 0;
	t->bytes = 0;
	memset(t->slots, 0, t->nslots * sizeof(*t->slots));
	t->events_at_reset = t->events;
	t->generation++;
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
	trc_top_paths_free(t->paths);
	free(t);
}

void
trc_top_keep_paths(struct trc_top *t)
{
	if (t->paths == NULL)
		t->paths = trc_top_paths_new();
}

const struct trc_top_paths *
trc_top_paths(const struct trc_top *t)
{
	return t->paths;
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
	h = hash_bytes(h, r->app_file.ptr, r->app_file.len);
	h = hash_bytes(h, &r->app_line, sizeof(r->app_line));
	return hash_bytes(h, r->label.ptr, r->label.len);
}

static bool
same_key(const struct trc_top_entry *e, const struct trc_top_row *r, uint32_t h)
{
	/* A row made here rather than decoded (the profiler's) may leave an empty string NULL. */
	return e->hash == h && e->line == r->line && e->file_len == r->file.len &&
	       e->label_len == r->label.len && (r->file.len == 0 || memcmp(e->file, r->file.ptr, r->file.len) == 0) &&
	       (r->label.len == 0 || memcmp(e->label, r->label.ptr, r->label.len) == 0) && e->app_line == r->app_line &&
	       e->app_len == r->app_file.len && (r->app_file.len == 0 || memcmp(e->app, r->app_file.ptr, r->app_file.len) == 0);
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

const struct trc_top_entry *
trc_top_find(const struct trc_top *t, const char *file, uint32_t file_len, int32_t line,
	     const char *label, uint32_t label_len)
{
	struct trc_top_row r = { .file = { file, file_len }, .line = line,
				 .label = { label, label_len } };
	uint32_t h = hash_row(&r);
	size_t slot = find_slot(t, &r, h);

	return t->slots[slot] != 0 ? &t->entries[t->slots[slot] - 1] : NULL;
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
	struct trc_top_entry *e;
	size_t slot;

	if ((t->nentries + 1) * 2 > t->nslots)
		grow_slots(t);
	if (t->nentries == t->cap)
		grow_entries(t);
	slot = find_slot(t, r, h);
	e = &t->entries[t->nentries];
	memset(e, 0, sizeof(*e));
	e->file = xmalloc((size_t)r->file.len + r->label.len + r->app_file.len + 3);
	memcpy(e->file, r->file.ptr, r->file.len);
	e->file[r->file.len] = '\0';
	e->label = e->file + r->file.len + 1;
	memcpy(e->file + r->file.len + 1, r->label.ptr, r->label.len);
	e->file[r->file.len + 1 + r->label.len] = '\0';
	e->app = e->label + r->label.len + 1;
	if (r->app_file.len > 0)
		memcpy(e->file + r->file.len + r->label.len + 2, r->app_file.ptr, r->app_file.len);
	e->file[r->file.len + r->label.len + 2 + r->app_file.len] = '\0';
	e->file_len = r->file.len;
	e->label_len = r->label.len;
	e->app_len = r->app_file.len;
	e->line = r->line;
	e->app_line = r->app_line;
	e->hash = h;
	e->hidden = is_ignored(t, e->label, e->label_len);
	if (t->words > 0)
		memset(&t->seen[t->nentries * t->words], 0, t->words * sizeof(*t->seen));
	t->slots[slot] = (uint32_t)(t->nentries + 1);
	return t->nentries++;
}

/* Whether the row's names fit in what is left of TRC_TOP_MAX_BYTES; counts them if so. */
static bool
fits(struct trc_top *t, const struct trc_top_row *r)
{
	size_t n = (size_t)r->file.len + r->label.len + r->app_file.len + 3;

	if (n > TRC_TOP_MAX_BYTES - t->bytes)
		return false;
	t->bytes += n;
	return true;
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
	struct trc_top_entry *e;

	if (t->slots[slot] != 0) {
		k = t->slots[slot] - 1;
	} else if (t->nentries < TRC_TOP_MAX_ENTRIES && fits(t, r)) {
		k = add_entry(t, r, h);
	} else {
		t->lost += r->count;
		return;
	}
	e = &t->entries[k];
	e->count += r->count;
	e->total_ns += r->total_ns;
	e->self_ns += r->self_ns;
	if (r->nbuckets == TRC_TOP_BUCKETS && e->buckets == NULL)
		e->buckets = xcalloc(TRC_TOP_BUCKETS, sizeof(*e->buckets));
	for (size_t i = 0; i < r->nbuckets; i++)
		e->buckets[i] += r->buckets[i];
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
	if (m->top.events != 0 || m->top.lost != 0 || m->top.gcs != 0 || m->top.nrows != 0)
		t->generation++;
	t->events += m->top.events;
	t->lost += m->top.lost;
	t->gc.count += m->top.gcs;
	t->gc.major += m->top.major_gcs;
	t->gc.pause_ns += m->top.gc_ns;
	for (size_t i = 0; i < m->top.nrows; i++)
		add_row(t, p, &m->top.rows[i]);
	if (t->paths != NULL)
		trc_top_paths_feed(t->paths, pid, m);
}

uint64_t
trc_top_generation(const struct trc_top *t)
{
	return t->generation;
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

const struct trc_top_mode_def *
trc_top_def(const struct trc_top *t)
{
	return t->def;
}

enum trc_top_mode
trc_top_mode(const struct trc_top *t)
{
	return (enum trc_top_mode)(t->def - modes);
}

const struct trc_top_entry *
trc_top_entry(const struct trc_top *t, size_t i)
{
	return &t->entries[i];
}

bool
trc_top_events_since_reset(const struct trc_top *t)
{
	return t->events > t->events_at_reset;
}

/* The targets pids[0..npids) as a bitmap of t->pids indexes (t->words words; the caller frees it). */
static uint64_t *
pid_mask(const struct trc_top *t, const pid_t *pids, size_t npids)
{
	uint64_t *mask = xcalloc(t->words ? t->words : 1, sizeof(*mask));

	for (size_t i = 0; i < npids; i++) {
		size_t p = pid_index(t, pids[i]);

		if (p < t->npids)
			mask[p / 64] |= (uint64_t)1 << (p % 64);
	}
	return mask;
}

uint32_t *
trc_top_pid_counts(const struct trc_top *t, const pid_t *pids, size_t npids)
{
	uint32_t *counts = xcalloc(t->nentries ? t->nentries : 1, sizeof(*counts));
	uint64_t *mask = pid_mask(t, pids, npids);

	for (size_t k = 0; k < t->nentries; k++)
		for (size_t w = 0; w < t->words; w++)
			counts[k] += (uint32_t)__builtin_popcountll(t->seen[k * t->words + w] & mask[w]);
	free(mask);
	return counts;
}
