/* stacks.c: the profiler's stacks as a tree of numbered nodes, filled from signal handlers. */
#include "stacks.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

/* A key whose node is being written: readers wait for its id, a little. */
#define PENDING 0u
/* A key that found no node left: its lookups answer 0. */
#define NONE UINT32_MAX
/* How long a lookup waits for another writer to finish a node: it may have been preempted. */
#define SPINS 4096
/* Roots have a key space of their own, above every (parent, frame) key. */
#define ROOT_KEY (1ull << 63)

static inline uint32_t
slot_of(const struct trc_stacks *t, uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	key *= 0xc4ceb9fe1a85ec53ull;
	key ^= key >> 33;
	return (uint32_t)key & t->mask;
}

int
trc_stacks_init(struct trc_stacks *t, uint32_t nodes)
{
	size_t slots = (size_t)nodes * 2, keys = slots * sizeof(uint64_t), ids = slots * sizeof(uint32_t);
	size_t bytes = keys + ids + (size_t)nodes * sizeof(struct trc_stacks_node);
	unsigned char *p;

	memset(t, 0, sizeof(*t));
	if (nodes < 2 || (nodes & (nodes - 1)) != 0) {
		errno = EINVAL;
		return -1;
	}
	/* Untouched pages cost nothing: only the slots and nodes an interval uses are memory. */
	/* cppcheck-suppress invalidFunctionArg ; MAP_ANONYMOUS takes -1 */
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	t->keys = (uint64_t *)p;
	t->ids = (uint32_t *)(p + keys);
	t->nodes = (struct trc_stacks_node *)(p + keys + ids);
	t->mask = (uint32_t)slots - 1;
	t->cap = nodes;
	t->next = 1;
	t->bytes = bytes;
	return 0;
}

void
trc_stacks_release(struct trc_stacks *t)
{
	if (t->keys != NULL)
		munmap(t->keys, t->bytes);
	memset(t, 0, sizeof(*t));
}

/* The id of a key another writer claimed: 0 while it is still being written, after SPINS. */
static uint32_t
wait_id(const struct trc_stacks *t, uint32_t slot)
{
	for (int i = 0; i < SPINS; i++) {
		uint32_t id = __atomic_load_n(&t->ids[slot], __ATOMIC_ACQUIRE);

		if (id != PENDING)
			return id == NONE ? 0 : id;
		__builtin_ia32_pause();
	}
	return 0;
}

static uint32_t
claim(struct trc_stacks *t, uint32_t slot, uint32_t parent, uint32_t frame, uint32_t tag)
{
	uint32_t id = __atomic_fetch_add(&t->next, 1, __ATOMIC_RELAXED);
	struct trc_stacks_node *n;

	if (id >= t->cap) {
		__atomic_fetch_add(&t->full, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&t->ids[slot], NONE, __ATOMIC_RELEASE);
		return 0;
	}
	n = &t->nodes[id];
	n->parent = parent;
	n->frame = frame;
	n->tag = tag;
	n->slot = slot;
	__atomic_store_n(&n->ready, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&t->ids[slot], id, __ATOMIC_RELEASE);
	return id;
}

static uint32_t
find(struct trc_stacks *t, uint64_t key, uint32_t parent, uint32_t frame, uint32_t tag)
{
	uint32_t slot = slot_of(t, key);

	for (uint32_t probe = 0; probe <= t->mask; probe++, slot = (slot + 1) & t->mask) {
		uint64_t k = __atomic_load_n(&t->keys[slot], __ATOMIC_ACQUIRE);

		if (k == 0) {
			uint64_t empty = 0;

			if (__atomic_compare_exchange_n(&t->keys[slot], &empty, key, 0, __ATOMIC_ACQ_REL,
			    __ATOMIC_ACQUIRE))
				return claim(t, slot, parent, frame, tag);
			k = empty;      /* another writer took the slot first: for which key? */
		}
		if (k == key)
			return wait_id(t, slot);
	}
	__atomic_fetch_add(&t->full, 1, __ATOMIC_RELAXED);
	return 0;
}

uint32_t
trc_stacks_root(struct trc_stacks *t, uint32_t thread, uint32_t tag)
{
	return find(t, ROOT_KEY | (uint64_t)thread << 32 | tag, 0, thread, tag);
}

uint32_t
trc_stacks_child(struct trc_stacks *t, uint32_t parent, uint32_t frame)
{
	if (parent == 0)
		return 0;
	return find(t, (uint64_t)parent << 32 | frame, parent, frame, 0);
}

void
trc_stacks_add(struct trc_stacks *t, uint32_t node, uint64_t cpu_ns, uint64_t wall_ns)
{
	struct trc_stacks_node *n = &t->nodes[node];

	__atomic_fetch_add(&n->samples, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n->cpu_ns, cpu_ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n->wall_ns, wall_ns, __ATOMIC_RELAXED);
}

uint32_t
trc_stacks_count(const struct trc_stacks *t)
{
	uint32_t next = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE);

	return next < t->cap ? next : t->cap;
}

const struct trc_stacks_node *
trc_stacks_node(const struct trc_stacks *t, uint32_t id)
{
	const struct trc_stacks_node *n = &t->nodes[id];

	return __atomic_load_n(&n->ready, __ATOMIC_ACQUIRE) ? n : NULL;
}

uint64_t
trc_stacks_full(const struct trc_stacks *t)
{
	return __atomic_load_n(&t->full, __ATOMIC_RELAXED);
}

void
trc_stacks_clear(struct trc_stacks *t)
{
	uint32_t count = trc_stacks_count(t);

	if (t->full == 0) {
		for (uint32_t id = 1; id < count; id++) {
			t->keys[t->nodes[id].slot] = 0;
			t->ids[t->nodes[id].slot] = 0;
		}
		memset(&t->nodes[1], 0, (count > 1 ? count - 1 : 0) * sizeof(t->nodes[0]));
	} else if (madvise(t->keys, t->bytes, MADV_DONTNEED) < 0) {
		/* Private anonymous pages read as zeros again once given back. */
		memset(t->keys, 0, t->bytes);
	}
	__atomic_store_n(&t->full, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->next, 1, __ATOMIC_RELEASE);
}
