/* stacks.h: the profiler's stacks as a tree of numbered nodes, filled from signal handlers. */
#ifndef TRC_STACKS_H
#define TRC_STACKS_H

#include <stddef.h>
#include <stdint.h>

/*
 * One interval's samples, as a tree: a root per (thread, tag), then a node per distinct
 * (parent, frame), each with the samples and time that ended there (self weights). Any
 * number of writers at once (signal handlers on the threads sampled, the sampler thread),
 * none of them allowed to take a lock or allocate: the tables are sized once, nodes are
 * claimed with a compare-and-swap and numbered with a fetch-and-add, and weights are atomic
 * additions. One reader, after the writers are done with it (sample.c swaps two trees and
 * waits for writers to leave the old one), reads every node and clears the tree.
 *
 * Node 0 is no node: a full tree answers 0, and the writer counts the sample as lost.
 */
struct trc_stacks_node {
	uint32_t parent;        /* 0: a root */
	uint32_t frame;         /* a root: its thread */
	uint32_t tag;           /* a root: its tag; else 0 */
	uint32_t ready;         /* the fields above are written */
	uint32_t samples;
	uint32_t slot;          /* its hash slot, to clear it */
	uint64_t cpu_ns, wall_ns;
};

struct trc_stacks {
	uint64_t *keys;         /* hash: parent << 32 | frame (a root: its own key space), 0 empty */
	uint32_t *ids;          /* the node of each key */
	struct trc_stacks_node *nodes;  /* by id; [0] unused */
	uint32_t mask;          /* hash slots - 1 */
	uint32_t cap;           /* nodes, node 0 included */
	uint32_t next;          /* the next id to give (atomic) */
	uint64_t full;          /* lookups that found no room (atomic) */
	size_t bytes;           /* mapped, for release */
};

/* Maps a tree for up to nodes nodes (a power of two). -1 with errno. */
int trc_stacks_init(struct trc_stacks *t, uint32_t nodes);
void trc_stacks_release(struct trc_stacks *t);

/* Async-signal-safe, any thread. The root of (thread, tag), made if new; 0 when full. */
uint32_t trc_stacks_root(struct trc_stacks *t, uint32_t thread, uint32_t tag);
/* Async-signal-safe, any thread. The child of parent for frame, made if new; 0 when full. */
uint32_t trc_stacks_child(struct trc_stacks *t, uint32_t parent, uint32_t frame);
/* Async-signal-safe, any thread. One sample ended at node, weighing cpu_ns and wall_ns. */
void trc_stacks_add(struct trc_stacks *t, uint32_t node, uint64_t cpu_ns, uint64_t wall_ns);

/* Reader, once no writer uses the tree: ids given so far (the next one). */
uint32_t trc_stacks_count(const struct trc_stacks *t);
/* Reader: node id (0 < id < trc_stacks_count), NULL when a writer never finished it. */
const struct trc_stacks_node *trc_stacks_node(const struct trc_stacks *t, uint32_t id);
/* Reader: lookups that found the tree full since the last clear. */
uint64_t trc_stacks_full(const struct trc_stacks *t);
/*
 * Reader, once no writer uses the tree: empties it. The slots its nodes took are cleared one
 * by one (its pages stay: a fault per page at each interval cost a handler more than the rest
 * of its work); a tree that filled up is given back to the kernel whole.
 */
void trc_stacks_clear(struct trc_stacks *t);

#endif
