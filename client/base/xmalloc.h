/* xmalloc.h: the client's allocators; they abort on out-of-memory, so callers never check for NULL. */
#ifndef TRC_XMALLOC_H
#define TRC_XMALLOC_H

#include <stddef.h>
#include <stdint.h>

/* Each returns memory the caller owns and frees with free(); none returns NULL. Any thread. */
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t size);
void *xreallocarray(void *p, size_t n, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/*
 * Grows arr, an array of *n elements of size sz, to hold index idx (doubling, at least 16),
 * zero-fills the new part and updates *n. Returns the new array.
 */
void *xgrowzero(void *arr, uint32_t *n, uint32_t idx, size_t sz);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
