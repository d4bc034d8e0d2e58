/* intern.h: a table that gives byte strings dense ids (0, 1, 2...), the same id for equal bytes. */
#ifndef TRC_INTERN_H
#define TRC_INTERN_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct trc_intern_entry {
	size_t off;             /* in bytes */
	uint32_t len;
	uint32_t hash;
};

/* Zero-initialized is empty. The exporters' frame names, thread names and stack nodes. */
struct trc_intern {
	struct trc_buf bytes;           /* every string, each followed by a NUL */
	struct trc_intern_entry *entries;
	uint32_t n, cap;
	uint32_t *slots;                /* open addressing: id + 1, 0 for empty */
	uint32_t nslots;                /* a power of two, at least twice n */
};

void trc_intern_release(struct trc_intern *t);
/* The id of p[0..n), added if new. Strings longer than UINT32_MAX are cut. Pure. */
uint32_t trc_intern_id(struct trc_intern *t, const void *p, size_t n);
/* The id of p[0..n) if it is in t, else UINT32_MAX. Pure. */
uint32_t trc_intern_find(const struct trc_intern *t, const void *p, size_t n);
/* The bytes of id (NUL-terminated, valid until the next trc_intern_id); *len gets their length. */
const char *trc_intern_str(const struct trc_intern *t, uint32_t id, size_t *len);

#endif
