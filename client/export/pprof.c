/* pprof.c: pprof profiles: interned strings, locations and samples, packed by protobuf-c. */
#include "pprof.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "intern.h"
#include "pprof/profile.pb-c.h"
#include "xmalloc.h"

/* A label as the profile holds it: string table indices, or a number. */
struct label {
	int64_t key, str, num, unit;
};

/* An array that grows by doubling; n elements of size bytes in use. */
struct vec {
	void *v;
	size_t n, cap;
};

struct trc_pprof {
	struct trc_pprof_type types[TRC_PPROF_MAX_TYPES];
	size_t ntypes;
	struct trc_intern strings;      /* the string table: id = index, 0 = "" */
	struct trc_intern loc_keys;     /* (name, file, line) -> location index */
	struct vec locs;                /* int64_t[3] each: name, file, line */
	struct vec stack;               /* uint64_t: every sample's location ids */
	struct vec values;              /* int64_t: ntypes per sample */
	struct vec labels;              /* struct label: every sample's */
	struct vec samples;             /* size_t[2] each: its first location, its first label */
	struct vec comments;            /* int64_t: string table indices */
	int64_t duration_ns;
	struct trc_pprof_type period_type;      /* type NULL: none */
	int64_t period;
	size_t default_type;            /* SIZE_MAX: the second type if any, else the first */
	struct trc_buf clean;           /* a string being made valid */
};

/* Room for one more element of size bytes; returns it. */
static void *
vec_push(struct vec *a, size_t size)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 64;
		a->v = xreallocarray(a->v, a->cap, size);
	}
	return (char *)a->v + a->n++ * size;
}

/*
 * s[0..n) as escape.h's EXACT text, into p->clean: valid UTF-8 (protobuf-c checks it, and
 * pprof's readers decode the table so), no NUL (protobuf-c's strings end at one), nothing a
 * terminal acts on (go tool pprof -top prints the names as they are), and two names that
 * differ stay two functions. Their length was bounded where the client received them.
 */
static void
clean(struct trc_pprof *p, const char *s, size_t n)
{
	p->clean.len = 0;
	trc_escape_as(&p->clean, TRC_ESC_EXACT, s, n);
}

static int64_t
string(struct trc_pprof *p, const char *s, size_t n)
{
	clean(p, s, n);
	return trc_intern_id(&p->strings, p->clean.data ? p->clean.data : "", p->clean.len);
}

static int64_t
cstring(struct trc_pprof *p, const char *s)
{
	return string(p, s, strlen(s));
}

struct trc_pprof *
trc_pprof_new(const struct trc_pprof_type *types, size_t ntypes)
{
	struct trc_pprof *p = xcalloc(1, sizeof(*p));

	if (ntypes > TRC_PPROF_MAX_TYPES)
		ntypes = TRC_PPROF_MAX_TYPES;
	memcpy(p->types, types, ntypes * sizeof(*types));
	p->ntypes = ntypes;
	p->default_type = SIZE_MAX;
	trc_intern_id(&p->strings, "", 0);      /* string_table[0] must be "" */
	return p;
}

void
trc_pprof_free(struct trc_pprof *p)
{
	if (p == NULL)
		return;
	trc_intern_release(&p->strings);
	trc_intern_release(&p->loc_keys);
	free(p->locs.v);
	free(p->stack.v);
	free(p->values.v);
	free(p->labels.v);
	free(p->samples.v);
	free(p->comments.v);
	trc_buf_release(&p->clean);
	free(p);
}

uint64_t
trc_pprof_location(struct trc_pprof *p, const char *name, size_t name_len, const char *file,
		   size_t file_len, int64_t line)
{
	int64_t key[3] = { string(p, name, name_len), string(p, file, file_len), line };
	uint32_t id = trc_intern_id(&p->loc_keys, key, sizeof(key));

	if (id == p->locs.n)
		memcpy(vec_push(&p->locs, sizeof(key)), key, sizeof(key));
	return (uint64_t)id + 1;
}

void
trc_pprof_sample(struct trc_pprof *p, const uint64_t *locs, size_t nlocs, const int64_t *values,
		 const struct trc_pprof_label *labels, size_t nlabels)
{
	size_t *s = vec_push(&p->samples, 2 * sizeof(size_t));

	s[0] = p->stack.n;
	s[1] = p->labels.n;
	for (size_t i = 0; i < nlocs; i++)
		*(uint64_t *)vec_push(&p->stack, sizeof(uint64_t)) = locs[i];
	for (size_t i = 0; i < p->ntypes; i++)
		*(int64_t *)vec_push(&p->values, sizeof(int64_t)) = values[i];
	for (size_t i = 0; i < nlabels; i++) {
		const struct trc_pprof_label *l = &labels[i];
		struct label *to = vec_push(&p->labels, sizeof(*to));

		*to = (struct label){ .key = cstring(p, l->key) };
		if (l->str != NULL) {
			to->str = string(p, l->str, l->str_len);
		} else {
			to->num = l->num;
			to->unit = l->unit != NULL ? cstring(p, l->unit) : 0;
		}
	}
}

void
trc_pprof_duration(struct trc_pprof *p, int64_t ns)
{
	p->duration_ns = ns;
}

void
trc_pprof_period(struct trc_pprof *p, const char *type, const char *unit, int64_t period)
{
	p->period_type = (struct trc_pprof_type){ type, unit };
	p->period = period;
}

void
trc_pprof_default_type(struct trc_pprof *p, size_t i)
{
	p->default_type = i < p->ntypes ? i : SIZE_MAX;
}

void
trc_pprof_comment(struct trc_pprof *p, const char *text)
{
	int64_t id = cstring(p, text);

	*(int64_t *)vec_push(&p->comments, sizeof(id)) = id;
}

/* ---- packing ---- */

/*
 * protobuf-c packs a tree of its own structs: they are made here, all at once, pointing into
 * the arrays above (and into the string table, whose strings are NUL-terminated), and freed
 * once packed.
 */
struct tree {
	Perftools__Profiles__ValueType types[TRC_PPROF_MAX_TYPES], *type_ptrs[TRC_PPROF_MAX_TYPES];
	Perftools__Profiles__ValueType period_type;
	Perftools__Profiles__Mapping mapping, *mapping_ptr;
	Perftools__Profiles__Sample *samples, **sample_ptrs;
	Perftools__Profiles__Label *labels, **label_ptrs;
	Perftools__Profiles__Location *locs, **loc_ptrs;
	Perftools__Profiles__Line *lines, **line_ptrs;
	Perftools__Profiles__Function *funcs, **func_ptrs;
	char **strings;
};

static void
make_types(struct trc_pprof *p, struct tree *t, Perftools__Profiles__Profile *pr)
{
	for (size_t i = 0; i < p->ntypes; i++) {
		perftools__profiles__value_type__init(&t->types[i]);
		t->types[i].type = cstring(p, p->types[i].type);
		t->types[i].unit = cstring(p, p->types[i].unit);
		t->type_ptrs[i] = &t->types[i];
	}
	pr->n_sample_type = p->ntypes;
	pr->sample_type = t->type_ptrs;
	/* wall time, when there is one, is what a viewer should show first (unless told) */
	pr->default_sample_type = t->types[p->default_type != SIZE_MAX ? p->default_type :
					   p->ntypes > 1 ? 1 : 0].type;
	if (p->period_type.type != NULL) {
		perftools__profiles__value_type__init(&t->period_type);
		t->period_type.type = cstring(p, p->period_type.type);
		t->period_type.unit = cstring(p, p->period_type.unit);
		pr->period_type = &t->period_type;
		pr->period = p->period;
	}
}

static void
make_samples(struct trc_pprof *p, struct tree *t, Perftools__Profiles__Profile *pr)
{
	const size_t *s = p->samples.v;
	size_t n = p->samples.n, nlabels = p->labels.n;
	const struct label *l = p->labels.v;

	t->samples = xcalloc(n ? n : 1, sizeof(*t->samples));
	t->sample_ptrs = xcalloc(n ? n : 1, sizeof(*t->sample_ptrs));
	t->labels = xcalloc(nlabels ? nlabels : 1, sizeof(*t->labels));
	t->label_ptrs = xcalloc(nlabels ? nlabels : 1, sizeof(*t->label_ptrs));
	for (size_t i = 0; i < nlabels; i++) {
		perftools__profiles__label__init(&t->labels[i]);
		t->labels[i].key = l[i].key;
		t->labels[i].str = l[i].str;
		t->labels[i].num = l[i].num;
		t->labels[i].num_unit = l[i].unit;
		t->label_ptrs[i] = &t->labels[i];
	}
	for (size_t i = 0; i < n; i++) {
		Perftools__Profiles__Sample *x = &t->samples[i];
		size_t loc_end = i + 1 < n ? s[2 * i + 2] : p->stack.n;
		size_t lab_end = i + 1 < n ? s[2 * i + 3] : nlabels;

		perftools__profiles__sample__init(x);
		x->n_location_id = loc_end - s[2 * i];
		x->location_id = (uint64_t *)p->stack.v + s[2 * i];
		x->n_value = p->ntypes;
		x->value = (int64_t *)p->values.v + i * p->ntypes;
		x->n_label = lab_end - s[2 * i + 1];
		x->label = t->label_ptrs + s[2 * i + 1];
		t->sample_ptrs[i] = x;
	}
	pr->n_sample = n;
	pr->sample = t->sample_ptrs;
}

/* A location per (name, file, line), with one line, of a function of the same id. */
static void
make_locations(struct trc_pprof *p, struct tree *t, Perftools__Profiles__Profile *pr)
{
	size_t n = p->locs.n, m = n ? n : 1;
	const int64_t *k = p->locs.v;

	t->locs = xcalloc(m, sizeof(*t->locs));
	t->loc_ptrs = xcalloc(m, sizeof(*t->loc_ptrs));
	t->lines = xcalloc(m, sizeof(*t->lines));
	t->line_ptrs = xcalloc(m, sizeof(*t->line_ptrs));
	t->funcs = xcalloc(m, sizeof(*t->funcs));
	t->func_ptrs = xcalloc(m, sizeof(*t->func_ptrs));
	for (size_t i = 0; i < n; i++) {
		perftools__profiles__function__init(&t->funcs[i]);
		t->funcs[i].id = i + 1;
		/*
		 * No system name: pprof takes a function whose name is its system name for one still
		 * to demangle, and a Ruby name with angle brackets for a C++ one, which it cuts
		 * ("block in <main>" showed as "block in ").
		 */
		t->funcs[i].name = k[3 * i];
		t->funcs[i].filename = k[3 * i + 1];
		t->funcs[i].start_line = k[3 * i + 2];
		t->func_ptrs[i] = &t->funcs[i];
		perftools__profiles__line__init(&t->lines[i]);
		t->lines[i].function_id = i + 1;
		t->lines[i].line = k[3 * i + 2];
		t->line_ptrs[i] = &t->lines[i];
		perftools__profiles__location__init(&t->locs[i]);
		t->locs[i].id = i + 1;
		t->locs[i].n_line = 1;
		t->locs[i].line = &t->line_ptrs[i];
		t->loc_ptrs[i] = &t->locs[i];
	}
	pr->n_location = pr->n_function = n;
	pr->location = t->loc_ptrs;
	pr->function = t->func_ptrs;
	/* One mapping that says the names, files and lines are there: nothing to symbolize. */
	perftools__profiles__mapping__init(&t->mapping);
	t->mapping.id = 1;
	t->mapping.has_functions = t->mapping.has_filenames = t->mapping.has_line_numbers = 1;
	t->mapping_ptr = &t->mapping;
	for (size_t i = 0; i < n; i++)
		t->locs[i].mapping_id = 1;
	pr->n_mapping = 1;
	pr->mapping = &t->mapping_ptr;
}

/* Last: the others add their strings. */
static void
make_strings(struct trc_pprof *p, struct tree *t, Perftools__Profiles__Profile *pr)
{
	size_t len;

	t->strings = xcalloc(p->strings.n, sizeof(*t->strings));
	for (uint32_t i = 0; i < p->strings.n; i++)
		t->strings[i] = (char *)trc_intern_str(&p->strings, i, &len);
	pr->n_string_table = p->strings.n;
	pr->string_table = t->strings;
}

static void
free_tree(struct tree *t)
{
	free(t->samples);
	free(t->sample_ptrs);
	free(t->labels);
	free(t->label_ptrs);
	free(t->locs);
	free(t->loc_ptrs);
	free(t->lines);
	free(t->line_ptrs);
	free(t->funcs);
	free(t->func_ptrs);
	free(t->strings);
}

void
trc_pprof_write(struct trc_pprof *p, struct trc_buf *out)
{
	Perftools__Profiles__Profile pr;
	struct tree t = { 0 };
	size_t size;

	perftools__profiles__profile__init(&pr);
	make_types(p, &t, &pr);
	make_samples(p, &t, &pr);
	make_locations(p, &t, &pr);
	pr.duration_nanos = p->duration_ns;
	pr.n_comment = p->comments.n;
	pr.comment = p->comments.v;
	make_strings(p, &t, &pr);
	size = perftools__profiles__profile__get_packed_size(&pr);
	trc_buf_grow(out, size);
	out->len += perftools__profiles__profile__pack(&pr, (uint8_t *)out->data + out->len);
	free_tree(&t);
}
