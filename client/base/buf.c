/* buf.c: a growable byte buffer. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "xmalloc.h"

void
trc_buf_init(struct trc_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void
trc_buf_release(struct trc_buf *b)
{
	free(b->data);
	trc_buf_init(b);
}

void
trc_buf_grow(struct trc_buf *b, size_t extra)
{
	size_t cap = b->cap ? b->cap : 256;

	while (cap - b->len < extra)
		cap *= 2;
	if (cap != b->cap) {
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
}

void
trc_buf_consume(struct trc_buf *b, size_t n)
{
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

void
trc_buf_vaddf(struct trc_buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	int n;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n <= 0)
		return;
	trc_buf_grow(b, (size_t)n + 1);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void
trc_buf_addf(struct trc_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	trc_buf_vaddf(b, fmt, ap);
	va_end(ap);
}
