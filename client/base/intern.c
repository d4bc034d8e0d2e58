/* intern.c: string interning with an open-addressing hash index over one byte arena. */
#include "intern.h"

#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

/* FNV-1a: short keys, no adversary worth a keyed hash (the agent only names its own methods). */
static uint32_t
hash_bytes(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void
rehash(struct trc_intern *t)
{
	uint32_t nslots = t->nslots ? t->nslots * 2 : 64;

	free(t->slots);
	t->slots = xcalloc(nslots, sizeof(*t->slots));
	t->nslots = nslots;
	for (uint32_t id = 0; id < t->n; id++) {
		uint32_t i = t->entries[id].hash & (nslots - 1);

		while (t->slots[i] != 0)
			i = (i + 1) & (nslots - 1);
		t->slots[i] = id + 1;
	}
}

/* The slot of p[0..len) (hash h): the one holding it, else the empty one where it would go. */
static uint32_t
probe(const struct trc_intern *t, const void *p, uint32_t len, uint32_t h)
{
	uint32_t i;

	for (i = h & (t->nslots - 1); t->slots[i] != 0; i = (i + 1) & (t->nslots - 1)) {
		const struct trc_intern_entry *e = &t->entries[t->slots[i] - 1];

		if (e->hash == h && e->len == len &&
		    (len == 0 || memcmp(t->bytes.data + e->off, p, len) == 0))
			break;
	}
	return i;
}

uint32_t
trc_intern_id(struct trc_intern *t, const void *p, size_t n)
{
	uint32_t len = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	uint32_t h = hash_bytes(p, len), i, id;

	if ((t->n + 1) * 2 > t->nslots)
		rehash(t);
	i = probe(t, p, len, h);
	if (t->slots[i] != 0)
		return t->slots[i] - 1;
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		t->entries = xreallocarray(t->entries, t->cap, sizeof(*t->entries));
	}
	id = t->n++;
	t->entries[id] = (struct trc_intern_entry){ t->bytes.len, len, h };
	trc_buf_add(&t->bytes, p, len);
	trc_buf_addc(&t->bytes, '\0');
	t->slots[i] = id + 1;
	return id;
}

uint32_t
trc_intern_find(const struct trc_intern *t, const void *p, size_t n)
{
	uint32_t len = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n, i;

	if (t->nslots == 0)
		return UINT32_MAX;
	i = probe(t, p, len, hash_bytes(p, len));
	return t->slots[i] != 0 ? t->slots[i] - 1 : UINT32_MAX;
}

const char *
trc_intern_str(const struct trc_intern *t, uint32_t id, size_t *len)
{
	*len = t->entries[id].len;
	return t->bytes.data + t->entries[id].off;
}

void
trc_intern_release(struct trc_intern *t)
{
	trc_buf_release(&t->bytes);
	free(t->entries);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
