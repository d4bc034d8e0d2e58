/* names.c: append-only, chunked tables of methods and threads, with a hash index for lookups. */
#include "names.h"

#include "extconf.h"
#include "mem.h"
#include "stable.h"

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
	bigger.slots = trc_calloc(size, sizeof(uint32_t));
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
		t->chunks[idx >> CHUNK_BITS] = trc_malloc(CHUNK * t->elem);
		if (t->chunks[idx >> CHUNK_BITS] == NULL)
			return UINT32_MAX;
	}
	memcpy(table_at(t, idx), entry, t->elem);
	index_put(&t->index, pair_hash(a, b), idx);
	/* The I/O thread reads entries below count without the GVL: publish after filling. */
	__atomic_store_n(&t->count, idx + 1, __ATOMIC_RELEASE);
	return idx;
}

uint32_t
trc_method_find(VALUE klass, ID mid)
{
	return index_find(&methods, klass, mid);
}

VALUE
trc_attached_object(VALUE klass)
{
#ifdef HAVE_RB_CLASS_ATTACHED_OBJECT
	return rb_class_attached_object(klass);
#else
	return rb_attr_get(klass, rb_intern("__attached__"));
#endif
}

/* A copy of str's bytes (NUL included: a name may hold one), its length in *len. */
static char *
str_copy(VALUE str, uint32_t *len)
{
	long n = RSTRING_LEN(str);

	*len = n > 0 && (unsigned long)n < UINT32_MAX ? (uint32_t)n : 0;
	return trc_memdup(RSTRING_PTR(str), *len);
}

/*
 * An anonymous one's "#<Class:0x...>" without its address: the same class in each of a
 * server's workers (ActionView's class of compiled templates) is one row across them.
 */
static char *
module_path(VALUE mod, uint32_t *len)
{
	VALUE name = rb_mod_name(mod);
	char *s;

	if (NIL_P(name))
		name = rb_class_path(mod);
	s = str_copy(name, len);
	if (s != NULL) {
		*len = (uint32_t)trc_stable_class(s, *len);
		s[*len] = '\0';
	}
	return s;
}

/* "Foo" with sep '.' for Foo's singleton class, "Foo" with '#' for Foo or an object's. */
static char *
class_name(VALUE klass, char *sep, uint32_t *len)
{
	if (klass == 0 || NIL_P(klass)) {
		*sep = 0;
		*len = 0;
		return trc_strdup("");
	}
	if (RB_TYPE_P(klass, T_ICLASS))
		klass = RBASIC(klass)->klass;
	*sep = '#';
	if (FL_TEST(klass, FL_SINGLETON)) {
		VALUE obj = trc_attached_object(klass);
		if (RB_TYPE_P(obj, T_CLASS) || RB_TYPE_P(obj, T_MODULE)) {
			*sep = '.';
			klass = obj;
		} else {
			klass = rb_obj_class(obj);
		}
	}
	return module_path(klass, len);
}

VALUE
trc_module_label(VALUE klass, char *sep)
{
	uint32_t len;
	char *name = class_name(klass, sep, &len);
	VALUE label = name ? rb_str_new(name, len) : rb_str_new_cstr("?");

	free(name);
	return label;
}

uint32_t
trc_method_intern(VALUE klass, ID mid, VALUE path, int line, int spec)
{
	struct trc_method m;
	VALUE name;
	uint32_t idx = index_find(&methods, klass, mid);

	if (idx != UINT32_MAX)
		return idx;
	name = rb_id2str(mid);
	memset(&m, 0, sizeof(m));
	m.klass = klass;
	m.mid = mid;
	m.klass_name = class_name(klass, &m.sep, &m.klass_name_len);
	/* By its length: define_method("a\0b") and ("a\0c") are two methods, not two "a". */
	if (RB_TYPE_P(name, T_STRING)) {
		/* A compiled template's name without the numbers of its process (stable.h). */
		m.name = str_copy(name, &m.name_len);
		if (m.name != NULL) {
			m.name_len = (uint32_t)trc_stable_method(m.name, m.name_len);
			m.name[m.name_len] = '\0';
		}
	} else {
		m.name = trc_strdup("(unknown)");
		m.name_len = sizeof("(unknown)") - 1;
	}
	m.path = RB_TYPE_P(path, T_STRING) ? trc_strndup(RSTRING_PTR(path), (size_t)RSTRING_LEN(path)) : trc_strdup("");
	m.line = line;
	m.spec = (int8_t)(spec >= 0 ? spec : -1);
	m.selected = spec != -1;
	/* Naming the class may have run Ruby, and another thread interned the method meanwhile. */
	if ((idx = index_find(&methods, klass, mid)) != UINT32_MAX) {
		free(m.klass_name);
		free(m.name);
		free(m.path);
		return idx;
	}
	if (m.klass_name == NULL || m.name == NULL || m.path == NULL ||
	    (idx = table_add(&methods, &m, klass, mid)) == UINT32_MAX) {
		free(m.klass_name);
		free(m.name);
		free(m.path);
	}
	/* Not a leak: table_add() copied m, strings included, into the table, which owns them. */
	return idx;  /* NOLINT(clang-analyzer-unix.Malloc) */
}

struct trc_method *
trc_method_at(uint32_t idx)
{
	return table_at(&methods, idx);
}

VALUE trc_names_last_thread = Qnil;     /* a one-entry cache for trc_thread_current */
static VALUE agent_th = Qnil;   /* a one-entry cache for trc_thread_is_agent */
static int agent_is;
struct trc_thread *trc_names_last_entry;

/* The agent's own threads outlive sessions, so they are remembered apart from the table. */
#define MAX_IGNORED 64
static VALUE ignored[MAX_IGNORED];
static int nignored;

static int
is_ignored(VALUE th)
{
	for (int i = 0; i < MAX_IGNORED; i++)
		if (ignored[i] == th)
			return 1;
	return 0;
}

/*
 * A thread takes one slot however often it is ignored: an eval thread is ignored by the
 * command that makes it and again by itself, and the one call that ends it frees its slot
 * (a second slot held the dead thread from the GC, and the table filled after 64 evals).
 */
static void
remember_ignored(VALUE th, int on)
{
	if (on && is_ignored(th))
		return;
	for (int i = 0; i < MAX_IGNORED; i++) {
		if (on ? ignored[i] == 0 : ignored[i] == th) {
			ignored[i] = on ? th : 0;
			nignored += on ? 1 : -1;
			return;
		}
	}
}

void
trc_thread_ignore(VALUE th, int on)
{
	remember_ignored(th, on);
	uint32_t idx = index_find(&threads, th, 0);
	if (idx != UINT32_MAX)
		trc_thread_at(idx)->ignored = (uint8_t)on;
	trc_names_last_thread = Qnil;
	agent_th = Qnil;
}

int
trc_agent_threads(void)
{
	return nignored;
}

int
trc_thread_is_agent(VALUE th)
{
	if (th != agent_th) {
		agent_th = th;
		agent_is = is_ignored(th);
	}
	return agent_is;
}

static VALUE
call_name(VALUE th)
{
	return rb_funcall(th, rb_intern("name"), 0);
}

/*
 * Thread#name, which a Thread subclass may define otherwise: what that raises stays here, out
 * of the app's traced call. A String of some length, or Qnil.
 */
static VALUE
name_of(VALUE th)
{
	int state = 0;
	VALUE name = rb_protect(call_name, th, &state);

	if (state) {
		rb_set_errinfo(Qnil);
		return Qnil;
	}
	return RB_TYPE_P(name, T_STRING) && RSTRING_LEN(name) > 0 ? name : Qnil;
}

/*
 * Asked at every table, so Ruby's own Thread#name only: it returns the name Thread#name= kept.
 * An app's own #name could run anything, even hand the GVL over mid-table; it is asked once,
 * at first sight (thread_name).
 */
VALUE
trc_thread_name_now(VALUE th)
{
	return rb_method_basic_definition_p(CLASS_OF(th), rb_intern("name")) ? name_of(th) : Qnil;
}

/* The thread's name, "main", or "" for an unnamed one. */
static char *
thread_name(VALUE th)
{
	VALUE name = name_of(th);

	if (name != Qnil)
		return trc_strndup(RSTRING_PTR(name), (size_t)RSTRING_LEN(name));
	return trc_strdup(th == rb_thread_main() ? "main" : "");
}

struct trc_thread *
trc_thread_find(VALUE th)
{
	uint32_t idx = index_find(&threads, th, 0);
	return idx == UINT32_MAX ? NULL : trc_thread_at(idx);
}

/*
 * Thread#name runs Ruby, and another thread may run meanwhile and take the next slot: the
 * index is looked for again and taken only after it (two threads with one index had each
 * other's calls).
 */
struct trc_thread *
trc_thread_get(VALUE th)
{
	struct trc_thread t;
	uint32_t idx = index_find(&threads, th, 0);
	char buf[32];

	if (idx != UINT32_MAX)
		return trc_thread_at(idx);
	memset(&t, 0, sizeof(t));
	t.thread = th;
	t.ignored = (uint8_t)is_ignored(th);
	t.name = t.ignored ? trc_strdup("tracer-agent") : thread_name(th);
	if ((idx = index_find(&threads, th, 0)) != UINT32_MAX) {
		free(t.name);
		return trc_thread_at(idx);
	}
	t.idx = threads.count;
	if (t.name != NULL && t.name[0] == '\0') {
		free(t.name);
		snprintf(buf, sizeof(buf), "thread-%u", t.idx);
		t.name = trc_strdup(buf);
	}
	if (t.name == NULL || (idx = table_add(&threads, &t, th, 0)) == UINT32_MAX) {
		free(t.name);
		return NULL;
	}
	/* Not a leak: table_add() copied t, name included, into the table, which owns it. */
	return trc_thread_at(idx);  /* NOLINT(clang-analyzer-unix.Malloc) */
}

struct trc_thread *
trc_thread_current(void)
{
	VALUE th = rb_thread_current();
	struct trc_thread *t;

	if (th == trc_names_last_thread)
		return trc_names_last_entry;
	t = trc_thread_get(th);
	if (t != NULL && t->ignored)
		t = NULL;
	trc_names_last_thread = th;
	trc_names_last_entry = t;
	return t;
}

struct trc_frame *
trc_thread_frame(struct trc_thread *t, uint32_t depth)
{
	if (depth >= t->frames_cap) {
		uint32_t cap = t->frames_cap ? t->frames_cap * 2 : 64;
		struct trc_frame *f;
		while (cap <= depth)
			cap *= 2;
		if (cap > (1u << 20) || (f = trc_realloc(t->frames, cap * sizeof(*f))) == NULL)
			return NULL;
		t->frames = f;
		t->frames_cap = cap;
	}
	return &t->frames[depth];
}

struct trc_thread *
trc_thread_at(uint32_t idx)
{
	return table_at(&threads, idx);
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
	free(t->frames);
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
	trc_names_last_thread = Qnil;
	trc_names_last_entry = NULL;
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
