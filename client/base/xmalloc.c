/* xmalloc.c: the client's one allocation-failure policy: print and abort. */
#include "xmalloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Out of memory is not worth recovering from in a command-line tool: say so and stop. */
static void __attribute__((noreturn))
oom(size_t size)
{
	fprintf(stderr, "tracer: out of memory (%zu bytes)\n", size);
	abort();
}

void *
xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (p == NULL)
		oom(size);
	return p;
}

void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (p == NULL)
		oom(n * size);
	return p;
}

void *
xrealloc(void *p, size_t size)
{
	void *q = realloc(p, size ? size : 1);

	if (q == NULL)
		oom(size);
	return q;
}

void *
xreallocarray(void *p, size_t n, size_t size)
{
	if (size != 0 && n > SIZE_MAX / size)
		oom(SIZE_MAX);
	return xrealloc(p, n * size);
}

char *
xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *
xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *
xasprintf(const char *fmt, ...)
{
	va_list ap;
	int n;
	char *p;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	p = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

void *
xgrowzero(void *arr, uint32_t *n, uint32_t idx, size_t sz)
{
	uint32_t cap = *n ? *n : 16;

	while (cap <= idx)
		cap *= 2;
	arr = xreallocarray(arr, cap, sz);
	memset((char *)arr + (size_t)*n * sz, 0, (size_t)(cap - *n) * sz);
	*n = cap;
	return arr;
}
