/* test_ring.c: the agent's event ring: sizes, wrap-around, pad records, a full ring, and one
 * producer and one consumer on two threads at once. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "ring.h"
#include "test.h"

/* A record of n bytes (8-aligned, at least a header) carrying seq in ts and a byte pattern. */
static struct trc_rec *
put(struct trc_ring *r, size_t n, uint64_t seq)
{
	struct trc_rec *rec = trc_ring_reserve(r, n);

	if (rec == NULL)
		return NULL;
	rec->type = TRC_REC_CALL;
	rec->size = (uint16_t)n;
	rec->ts = seq;
	for (size_t i = sizeof(*rec); i < n; i++)
		((unsigned char *)rec)[i] = (unsigned char)(seq + i);
	trc_ring_commit(r, rec);
	return rec;
}

static int
intact(const struct trc_rec *rec)
{
	for (size_t i = sizeof(*rec); i < rec->size; i++)
		if (((const unsigned char *)rec)[i] != (unsigned char)(rec->ts + i))
			return 0;
	return 1;
}

/* Reads every record ready; checks order and content. Returns how many, or -1 on a bad one. */
static long
take_all(struct trc_ring *r, uint64_t *next_seq, long *pads)
{
	const unsigned char *p;
	size_t n;
	long got = 0;

	while ((n = trc_ring_peek(r, &p)) != 0) {
		size_t off = 0;
		while (off < n) {
			const struct trc_rec *rec = (const struct trc_rec *)(p + off);
			if (rec->size == 0 || rec->size % 8 != 0 || off + rec->size > n)
				return -1;
			if (rec->type == TRC_REC_PAD) {
				(*pads)++;
			} else if (rec->ts != (*next_seq)++ || !intact(rec)) {
				return -1;
			} else {
				got++;
			}
			off += rec->size;
		}
		trc_ring_consume(r, off);
	}
	return got;
}

static void
test_sizes(void)
{
	struct trc_ring r;

	test_cond("a size that is not a power of two is refused", trc_ring_init(&r, 3000) < 0);
	test_cond("size 0 is refused", trc_ring_init(&r, 0) < 0);
	test_cond("4096 is taken", trc_ring_init(&r, 4096) == 0 && r.mask == 4095);
	test_cond("empty at start", trc_ring_used(&r) == 0);
	trc_ring_release(&r);
	test_cond("released", r.buf == NULL);
}

static void
test_every_size_and_wrap(void)
{
	struct trc_ring r;
	uint64_t seq = 0, next = 0;
	long pads = 0, got = 0, bad = 0;

	trc_ring_init(&r, 8192);
	/* Every record size from the header up to TRC_REC_MAX, many times round the ring. */
	for (int round = 0; round < 40; round++) {
		for (size_t n = sizeof(struct trc_rec); n <= TRC_REC_MAX; n += 8 * (1 + round % 7)) {
			if (put(&r, n, seq) == NULL) {
				long k = take_all(&r, &next, &pads);
				bad += k < 0;
				got += k > 0 ? k : 0;
				if (put(&r, n, seq) == NULL)
					bad++;
			}
			seq++;
		}
	}
	{
		long k = take_all(&r, &next, &pads);
		bad += k < 0;
		got += k > 0 ? k : 0;
	}
	test_cond("every record read back whole and in order", bad == 0 && got == (long)seq && next == seq);
	test_cond("records that would wrap leave a pad and start at the beginning", pads > 0);
	test_cond("drained", trc_ring_used(&r) == 0);
	trc_ring_release(&r);
}

static void
test_full(void)
{
	struct trc_ring r;
	uint64_t seq = 0, next = 0;
	long pads = 0, k;
	size_t before;

	trc_ring_init(&r, 4096);
	while (put(&r, 64, seq) != NULL)
		seq++;
	test_cond("a full ring holds what fits: 64 records of 64 bytes", seq == 64);
	before = trc_ring_used(&r);
	test_cond("a full ring refuses a record and changes nothing", trc_ring_reserve(&r, 16) == NULL &&
	    trc_ring_used(&r) == before);
	k = take_all(&r, &next, &pads);
	test_cond("a full ring reads back whole", k == 64 && pads == 0 && trc_ring_used(&r) == 0);
	trc_ring_release(&r);
}

static void
test_pad(void)
{
	struct trc_ring r;
	uint64_t seq = 0, next = 0;
	long pads = 0, k;
	const unsigned char *p;

	/* 60 records of 64 bytes end 256 bytes before the end; half of them read. */
	trc_ring_init(&r, 4096);
	for (int i = 0; i < 60; i++)
		put(&r, 64, seq++);
	trc_ring_peek(&r, &p);
	trc_ring_consume(&r, 32 * 64);
	next = 32;
	test_cond("a record that does not fit before the end fits after a pad", put(&r, 1024, seq++) != NULL);
	test_cond("the pad counts as used", trc_ring_used(&r) == 28 * 64 + 256 + 1024);
	k = take_all(&r, &next, &pads);
	test_cond("the rest reads back in order, the pad skipped", k == 29 && pads == 1 && next == seq);
	trc_ring_release(&r);
}

/* One producer and one consumer at once, as the traced threads and the I/O thread run them. */
#define STRESS_RECORDS 2000000

struct stress {
	struct trc_ring ring;
	volatile int done;
	uint64_t produced, dropped;
};

static void *
producer(void *arg)
{
	struct stress *s = arg;
	uint64_t seq = 0;

	for (uint64_t i = 0; i < STRESS_RECORDS; i++) {
		size_t n = sizeof(struct trc_rec) + 8 * (i % 37);
		if (put(&s->ring, n, seq) != NULL)
			seq++;
		else
			s->dropped++;
	}
	s->produced = seq;
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void
test_concurrent(void)
{
	struct stress s = { .done = 0 };
	pthread_t th;
	uint64_t next = 0;
	long pads = 0, got = 0, bad = 0;

	trc_ring_init(&s.ring, 1 << 16);
	pthread_create(&th, NULL, producer, &s);
	for (;;) {
		int done = __atomic_load_n(&s.done, __ATOMIC_ACQUIRE);
		long k = take_all(&s.ring, &next, &pads);
		bad += k < 0;
		got += k > 0 ? k : 0;
		if (done && trc_ring_used(&s.ring) == 0)
			break;
	}
	pthread_join(th, NULL);
	test_cond("concurrent: nothing read out of order or torn", bad == 0);
	test_cond("concurrent: every record produced was read", (uint64_t)got == s.produced);
	test_cond("concurrent: produced + dropped = attempted", s.produced + s.dropped == STRESS_RECORDS);
	trc_ring_release(&s.ring);
}

void
test_ring(void)
{
	test_sizes();
	test_every_size_and_wrap();
	test_full();
	test_pad();
	test_concurrent();
}
