/* names.c: append-only, chunked tables of methods and threads, with a hash index for lookups. */
#include "names.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_BITS 10
#define CHUNK (1u << CHUNK_BITS)
#define NCHUNKS (TRC_NAMES_MAX / CHUNK)

/* An open-addressing index from a (VALUE, ID) pair to idx + 1 (0 marks a free slot). */
struct pair_index {
	uint32_t *slots;
	uint32_t mask;
	uint32_t used;
};

struct table {
	void *chunks[NCHUNKS];
	size_t elem;
	uint32_t count;         /* published with release ordering */
	struct pair_index index;
};

static struct table methods = { .elem = sizeof(struct trc_method) };
static struct table threads = { .elem = sizeof(struct trc_thread) };

static inline uint32_t
pair_hash(VALUE a, ID b)
{
	uint64_t h = ((uint64_t)a >> 3) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)b * 0xC2B2AE3D27D4EB4Full);
	return (uint32_t)(h >> 32);
}

static inline void *
table_at(struct table *t, uint32_t idx)
{
	return (char *)t->chunks[idx >> CHUNK_BITS] + (size_t)(idx & (CHUNK - 1)) * t->elem;
}

/* The key of entry idx: both entry types start with a VALUE, methods follow it with an ID. */
static inline void
table_key(struct table *t, uint32_t idx, VALUE *a, ID *b)
{
	VALUE *e = table_at(t, idx);
	*a = e[0];
	*b = t == &methods ? (ID)e[1] : 0;
}

static uint32_t
index_find(struct table *t, VALUE a, ID b)
{
	struct pair_index *ix = &t->index;
	if (ix->slots == NULL)
		return UINT32_MAX;
	for (uint32_t i = pair_hash(a, b) & ix->mask;; i = (i + 1) & ix->mask) {
		uint32_t s = ix->slots[i];
		VALUE ka;
		ID kb;
		if (s == 0)
			return UINT32_MAX;
		table_key(t, s - 1, &ka, &kb);
		if (ka == a && kb == b)
			return s - 1;
	}
}

static void
index_put(struct pair_index *ix, uint32_t hash, uint32_t idx)
{
	uint32_t i = hash & ix->mask;
	while (ix->slots[i] != 0)
		i = (i + 1) & ix->mask;
	ix->slots[i] = idx + 1;
	ix->used++;
}

/* Keeps the load under one half; -1 when memory runs out. */
static int
index_grow(struct table *t)
{
	struct pair_index *ix = &t->index, bigger;
	uint32_t size = ix->slots == NULL ? 256 : (ix->mask + 1) * 2;

	if (ix->slots != NULL && ix->used * 2 < ix->mask + 1)
		return 0;
	bigger.slots = calloc(size, sizeof(uint32_t));
	if (bigger.slots == NULL)
		return -1;
	bigger.mask = size - 1;
	bigger.used = 0;
	for (uint32_t idx = 0; idx < t->count; idx++) {
		VALUE a;
		ID b;
		table_key(t, idx, &a, &b);
		index_put(&bigger, pair_hash(a, b), idx);
	}
	free(ix->slots);
	*ix = bigger;
	return 0;
}

static uint32_t
table_add(struct table *t, const void *entry, VALUE a, ID b)
{
	uint32_t idx = t->count;
	if (idx >= TRC_NAMES_MAX || index_grow(t) < 0)
		return UINT32_MAX;
	if (t->chunks[idx >> CHUNK_BITS] == NULL) {
		t->chunks[idx >> CHUNK_BITS] = malloc(CHUNK * t->elem);
		if (t->chunks[idx >> CHUNK_BITS] == NULL)
			return UINT32_MAX;
	}
	memcpy(table_at(t, idx), entry, t->elem);
	index_put(&t->index, pair_hash(a, b), idx);
	/* The agent thread reads entries below count without the GVL: publish after filling. */
	__atomic_store_n(&t->count, idx + 1, __ATOMIC_RELEASE);
	return idx;
}

uint32_t
trc_method_find(VALUE klass, ID mid)
{
	return index_find(&methods, klass, mid);
}

uint32_t
trc_method_add(const struct trc_method *m)
{
	return table_add(&methods, m, m->klass, m->mid);
}

struct trc_method *
trc_method_at(uint32_t idx)
{
	return table_at(&methods, idx);
}

uint32_t
trc_method_count(void)
{
	return __atomic_load_n(&methods.count, __ATOMIC_ACQUIRE);
}

/* The agent's own threads outlive sessions, so they are remembered apart from the table. */
#define MAX_IGNORED 64
static VALUE ignored[MAX_IGNORED];

void
trc_thread_ignore(VALUE th, int on)
{
	for (int i = 0; i < MAX_IGNORED; i++) {
		if (on ? ignored[i] == 0 : ignored[i] == th) {
			ignored[i] = on ? th : 0;
			break;
		}
	}
	uint32_t idx = index_find(&threads, th, 0);
	if (idx != UINT32_MAX)
		trc_thread_at(idx)->ignored = (uint8_t)on;
}

static int
is_ignored(VALUE th)
{
	for (int i = 0; i < MAX_IGNORED; i++)
		if (ignored[i] == th)
			return 1;
	return 0;
}

static char *
thread_name(VALUE th, uint32_t idx)
{
	static ID id_name;
	char buf[32];
	VALUE name;

	if (!id_name)
		id_name = rb_intern("name");
	name = rb_funcall(th, id_name, 0);
	if (RB_TYPE_P(name, T_STRING))
		return strndup(RSTRING_PTR(name), (size_t)RSTRING_LEN(name));
	if (th == rb_thread_main())
		return strdup("main");
	snprintf(buf, sizeof(buf), "thread-%u", idx);
	return strdup(buf);
}

struct trc_thread *
trc_thread_get(VALUE th)
{
	struct trc_thread t;
	uint32_t idx = index_find(&threads, th, 0);

	if (idx != UINT32_MAX)
		return trc_thread_at(idx);
	memset(&t, 0, sizeof(t));
	t.thread = th;
	t.idx = threads.count;
	t.ignored = (uint8_t)is_ignored(th);
	t.name = t.ignored ? strdup("tracer-agent") : thread_name(th, t.idx);
	if (t.name == NULL || (idx = table_add(&threads, &t, th, 0)) == UINT32_MAX) {
		free(t.name);
		return NULL;
	}
	return trc_thread_at(idx);
}

struct trc_thread *
trc_thread_at(uint32_t idx)
{
	return table_at(&threads, idx);
}

uint32_t
trc_thread_count(void)
{
	return __atomic_load_n(&threads.count, __ATOMIC_ACQUIRE);
}

static void
free_method(void *e)
{
	struct trc_method *m = e;
	free(m->klass_name);
	free(m->name);
	free(m->path);
}

static void
free_thread(void *e)
{
	struct trc_thread *t = e;
	free(t->name);
	free(t->slow_start);
}

static void
table_reset(struct table *t, void (*free_entry)(void *))
{
	for (uint32_t idx = 0; idx < t->count; idx++)
		free_entry(table_at(t, idx));
	for (uint32_t c = 0; c < NCHUNKS && t->chunks[c] != NULL; c++) {
		free(t->chunks[c]);
		t->chunks[c] = NULL;
	}
	free(t->index.slots);
	memset(&t->index, 0, sizeof(t->index));
	__atomic_store_n(&t->count, 0, __ATOMIC_RELEASE);
}

void
trc_names_reset(void)
{
	table_reset(&methods, free_method);
	table_reset(&threads, free_thread);
}

void
trc_names_mark(void)
{
	for (uint32_t idx = 0; idx < methods.count; idx++)
		rb_gc_mark(trc_method_at(idx)->klass);
	for (uint32_t idx = 0; idx < threads.count; idx++)
		rb_gc_mark(trc_thread_at(idx)->thread);
	for (int i = 0; i < MAX_IGNORED; i++)
		if (ignored[i])
			rb_gc_mark(ignored[i]);
}
