/* ring.c: a single-producer single-consumer byte ring of event records. */
#include "ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int
trc_ring_init(struct trc_ring *r, size_t size)
{
	memset(r, 0, sizeof(*r));
	if (size == 0 || (size & (size - 1)) != 0) {
		errno = EINVAL;
		return -1;
	}
	/* mmap, not malloc: the pages stay untouched (no RSS) until events need them. */
	/* cppcheck's posix.cfg wants fd >= 0, but MAP_ANONYMOUS takes -1 (and portably needs it). */
	/* cppcheck-suppress invalidFunctionArg */
	r->buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->buf == MAP_FAILED) {
		r->buf = NULL;
		return -1;
	}
	r->mask = size - 1;
	return 0;
}

void
trc_ring_release(struct trc_ring *r)
{
	if (r->buf != NULL)
		munmap(r->buf, r->mask + 1);
	memset(r, 0, sizeof(*r));
}

/* A record that does not fit before the end: a pad record fills the gap (8 to TRC_REC_MAX). */
void
trc_ring_pad(struct trc_ring *r, size_t gap)
{
	struct trc_rec *pad = (struct trc_rec *)(r->buf + (r->head & r->mask));

	pad->type = TRC_REC_PAD;
	pad->size = (uint16_t)gap;
	__atomic_store_n(&r->head, r->head + gap, __ATOMIC_RELEASE);
}

size_t
trc_ring_peek(struct trc_ring *r, const unsigned char **out)
{
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	size_t off = r->tail & r->mask;
	size_t n = head - r->tail;

	if (off + n > r->mask + 1)
		n = r->mask + 1 - off;
	*out = r->buf + off;
	return n;
}

void
trc_ring_consume(struct trc_ring *r, size_t n)
{
	__atomic_store_n(&r->tail, r->tail + n, __ATOMIC_RELEASE);
}

size_t
trc_ring_used(const struct trc_ring *r)
{
	return __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
}

unsigned char *
trc_rec_put_str(unsigned char *p, const char *s, uint32_t len)
{
	memcpy(p, &len, sizeof(len));
	memcpy(p + sizeof(len), s, len);
	return p + sizeof(len) + len;
}

const unsigned char *
trc_rec_get_str(const unsigned char *p, const char **s, uint32_t *len)
{
	memcpy(len, p, sizeof(*len));
	*s = (const char *)p + sizeof(*len);
	return p + sizeof(*len) + *len;
}
