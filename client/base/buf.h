/* buf.h: a growable byte buffer (the encoder's output, the output module's pending bytes). */
#ifndef TRC_BUF_H
#define TRC_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

/* data holds len bytes in a cap-byte allocation owned by the buffer; data is NULL until the
 * first append. Bytes are not NUL-terminated. */
struct trc_buf {
	char *data;
	size_t len;
	size_t cap;
};

void trc_buf_init(struct trc_buf *b);
void trc_buf_release(struct trc_buf *b);
/* Makes room for at least extra more bytes (aborts on out-of-memory). */
void trc_buf_grow(struct trc_buf *b, size_t extra);
/* Drops the first n bytes (n <= len). */
void trc_buf_consume(struct trc_buf *b, size_t n);
void trc_buf_addf(struct trc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void trc_buf_vaddf(struct trc_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

static inline void
trc_buf_add(struct trc_buf *b, const void *p, size_t n)
{
	if (n == 0)             /* data may still be NULL */
		return;
	if (b->cap - b->len < n)
		trc_buf_grow(b, n);
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static inline void
trc_buf_addc(struct trc_buf *b, char c)
{
	if (b->cap == b->len)
		trc_buf_grow(b, 1);
	b->data[b->len++] = c;
}

static inline void
trc_buf_adds(struct trc_buf *b, const char *s)
{
	trc_buf_add(b, s, strlen(s));
}

#endif
