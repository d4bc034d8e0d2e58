/* profile.h: --top profile: every target's sampled stacks, as table rows and as one tree for files. */
#ifndef TRC_PROFILE_H
#define TRC_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "decode.h"
#include "intern.h"

/*
 * The agent sends each interval's samples as a tree of its own (TRC_MSG_PROFILE). Each one
 * becomes rows for the live table (a frame's samples, and the time under it and in it, as a
 * TRC_MSG_TOP would carry them), and, when the run writes a file, is added to one tree for the
 * whole run: a root per (process, thread, tag), a node per (parent, frame), frames shared by
 * every target (a method of every worker is one frame).
 */

/* A frame as the run names it. */
struct trc_profile_frame {
	uint32_t label, file;   /* ids in trc_profile.strings */
	int32_t line;
	uint8_t kind;           /* enum trc_frame_kind */
};

/* A node of the run's tree: a root (parent UINT32_MAX) or a frame under its parent. */
struct trc_profile_node {
	uint32_t parent;
	uint32_t frame;         /* a root: none (UINT32_MAX) */
	pid_t pid;              /* a root: its process; others: their root's */
	uint32_t thread, tag;   /* a root: ids in strings ("" for no tag) */
	uint64_t samples, cpu_ns, wall_ns;      /* what ended here: self */
};

/* Nodes the run's tree holds at most; samples that need more are counted as lost. */
#define TRC_PROFILE_MAX_NODES (1u << 22)

struct trc_profile_target;

struct trc_profile {
	bool wall;              /* weighed by wall-clock time; else by CPU time */
	bool keep_tree;         /* a file is written at the end */
	struct trc_intern strings;
	struct trc_intern frame_keys;
	struct trc_profile_frame *frames;
	uint32_t nframes, frames_cap;
	struct trc_intern node_keys;
	struct trc_profile_node *nodes;
	uint32_t nnodes, nodes_cap;
	struct trc_profile_target **targets;
	size_t ntargets;
	uint64_t samples, lost, own_ns, elapsed_ns;     /* every target's, since the start */
	uint64_t hz;            /* the rate the last message said its target samples at */
	uint64_t tree_lost;     /* samples the tree had no room for */
	/* Scratch for one message's rows. */
	struct trc_top_row *rows;
	size_t rows_cap;
	/* Scratch for a chain of parents (tree_node). */
	uint32_t *chain, chain_cap;
};

void trc_profile_init(struct trc_profile *p, bool wall, bool keep_tree);
void trc_profile_release(struct trc_profile *p);

/*
 * Takes one TRC_MSG_PROFILE of pid and fills *top with the TRC_MSG_TOP it amounts to (rows by
 * frame: count the samples that ended in it, self_ns their time, total_ns the time of every
 * sample it was on the stack of, once however deep the recursion); top's rows are p's, valid
 * until the next call. Pure.
 */
void trc_profile_feed(struct trc_profile *p, pid_t pid, const struct trc_message *m,
		      struct trc_message *top);

/* A node's weight in the run's unit: wall or CPU nanoseconds. */
static inline uint64_t
trc_profile_weight(const struct trc_profile *p, const struct trc_profile_node *n)
{
	return p->wall ? n->wall_ns : n->cpu_ns;
}

/* The bytes of string id. */
const char *trc_profile_str(const struct trc_profile *p, uint32_t id, size_t *len);

#endif
