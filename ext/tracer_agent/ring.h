/* ring.h: the event ring, filled by traced threads and drained by the I/O thread. */
#ifndef TRC_RING_H
#define TRC_RING_H

#include <stddef.h>
#include <stdint.h>

/*
 * One producer at a time, one consumer. The producers are the traced Ruby threads: they only
 * write while holding the GVL, so the GVL makes them one producer. The consumer is the agent
 * thread, which drains without the GVL. Positions grow forever; the byte offset is pos & mask.
 * A record never wraps: when it does not fit before the end, a pad record fills the gap.
 */
enum trc_rec_type {
	TRC_REC_PAD = 0,
	TRC_REC_CALL,
	TRC_REC_RETURN,
	TRC_REC_RAISE,  /* strings: class, message, path; the line in dur */
	TRC_REC_EXPR,   /* strings: value */
	TRC_REC_SLOW,
	TRC_REC_LOST,
	TRC_REC_GC,     /* ts: start, dur: pause (ticks), aux: major << 8 | reason */
	TRC_REC_MARK,   /* a mark of TRC_MARKS: aux its type, thread or TRC_NO_THREAD; strings: text */
};

struct trc_rec {
	uint8_t type;
	uint8_t nstr;           /* strings after the record, each a uint32 length + bytes */
	uint16_t size;          /* whole record, 8-aligned */
	uint32_t thread;
	uint32_t method;        /* EXPR: spec */
	uint32_t aux;           /* SLOW: depth; EXPR: expr index; MARK: its event type */
	uint64_t ts;            /* LOST: count */
	uint64_t dur;           /* SLOW: duration; RAISE: line. CALL/RETURN records stop before it */
};
#define TRC_REC_SHORT offsetof(struct trc_rec, dur)

#define TRC_REC_MAX 4096        /* largest record, strings included */

/*
 * The producer's fields and the consumer's sit on different cache lines, and the producer
 * reads the consumer's tail only when its last look says the ring may be full: a traced call
 * then touches no line that the draining thread writes, and takes no cache miss for it.
 */
#define TRC_RING_LINE 64
struct trc_ring {
	unsigned char *buf;
	size_t mask;
	uint64_t head;          /* written by the producer (release) */
	uint64_t tail_seen;     /* the producer's last look at tail */
	char apart[TRC_RING_LINE];
	uint64_t tail;          /* written by the consumer (release) */
};

/* Sizes the ring (a power of two); -1 with errno on failure. */
int trc_ring_init(struct trc_ring *r, size_t size);
void trc_ring_release(struct trc_ring *r);

/*
 * Producer side, GVL held. trc_ring_reserve returns room for n bytes or NULL when the ring is
 * full (the caller counts the loss). trc_ring_commit publishes it. Inline: every traced call
 * makes two records.
 */
void trc_ring_pad(struct trc_ring *r, size_t gap);

static inline struct trc_rec *
trc_ring_reserve(struct trc_ring *r, size_t n)
{
	size_t cap = r->mask + 1;
	size_t off = r->head & r->mask;
	size_t gap = off + n > cap ? cap - off : 0;

	if ((r->head - r->tail_seen) + gap + n > cap) {
		r->tail_seen = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if ((r->head - r->tail_seen) + gap + n > cap)
			return NULL;
	}
	if (gap != 0)
		trc_ring_pad(r, gap);
	return (struct trc_rec *)(r->buf + (r->head & r->mask));
}

static inline void
trc_ring_commit(struct trc_ring *r, struct trc_rec *rec)
{
	__atomic_store_n(&r->head, r->head + rec->size, __ATOMIC_RELEASE);
}

/* Consumer side, any thread: bytes ready to read at *out, or 0. */
size_t trc_ring_peek(struct trc_ring *r, const unsigned char **out);
void trc_ring_consume(struct trc_ring *r, size_t n);
/* Bytes in use, from any thread. */
size_t trc_ring_used(const struct trc_ring *r);

/* Record helpers. */
static inline size_t trc_rec_align(size_t n) { return (n + 7) & ~(size_t)7; }
unsigned char *trc_rec_put_str(unsigned char *p, const char *s, uint32_t len);
const unsigned char *trc_rec_get_str(const unsigned char *p, const char **s, uint32_t *len);

#endif
