/* export_pprof.c: --format pprof: the calls as a call tree of samples (pprof.h), written at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_format.h"
#include "pprof.h"
#include "xmalloc.h"

#define NO_NODE UINT32_MAX
/* Distinct stacks kept; calls on further ones are left out, and counted. */
#define MAX_NODES (1u << 22)

/*
 * As in export_collapsed.c, stacks are nodes of a tree, each (parent, frame) interned once,
 * so memory grows with the distinct stacks, not with the calls. A thread's root node stands
 * for (target, thread name) and is no frame: it becomes the sample's labels. Each call that
 * ends adds 1 and its self time to its node; at the end each node with calls becomes one
 * sample, its stack the frames from the node up to the root, leaf first as pprof wants.
 */
static const struct trc_pprof_type types[] = {
	{ "calls", "count" },
	{ "wall", "nanoseconds" },
};

struct pp {
	struct trc_intern keys;         /* (kind, a, b) -> node id */
	uint32_t *parent;               /* the caller's node; a root's: its source index */
	uint32_t *frame;                /* NO_NODE: a root */
	uint32_t *thread;               /* a root's thread name (id in the exporter's strings) */
	uint64_t *calls, *self_ns;
	uint32_t n, cap;
	uint64_t left_out;              /* calls past MAX_NODES stacks */
};

struct pp_thread {
	uint32_t *node;                 /* the node of each call on the thread's stack */
	uint32_t cap;
};

/* Kind 0: the root of thread name b of source index a; 1: frame b called under node a. */
static uint32_t
node(struct pp *c, uint32_t kind, uint32_t a, uint32_t b)
{
	uint32_t key[3] = { kind, a, b }, id;

	if (c->n >= MAX_NODES)          /* no new node: only the known ones are found */
		return trc_intern_find(&c->keys, key, sizeof(key));
	id = trc_intern_id(&c->keys, key, sizeof(key));
	if (id == c->n) {
		if (c->n == c->cap) {
			c->cap = c->cap ? c->cap * 2 : 256;
			c->parent = xreallocarray(c->parent, c->cap, sizeof(*c->parent));
			c->frame = xreallocarray(c->frame, c->cap, sizeof(*c->frame));
			c->thread = xreallocarray(c->thread, c->cap, sizeof(*c->thread));
			c->calls = xreallocarray(c->calls, c->cap, sizeof(*c->calls));
			c->self_ns = xreallocarray(c->self_ns, c->cap, sizeof(*c->self_ns));
		}
		c->parent[id] = a;
		c->frame[id] = kind == 0 ? NO_NODE : b;
		c->thread[id] = kind == 0 ? b : NO_NODE;
		c->calls[id] = c->self_ns[id] = 0;
		c->n++;
	}
	return id;
}

static void
begin(struct trc_export *e)
{
	e->fs = xcalloc(1, sizeof(struct pp));
}

static uint32_t
source_index(const struct trc_export *e, const struct trc_xp_source *s)
{
	uint32_t i = 0;

	while (i < e->nsources && e->sources[i] != s)
		i++;
	return i;
}

static void
call(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th)
{
	struct pp *c = e->fs;
	struct pp_thread *t = th->fmt;
	uint32_t d = th->base.depth - 1, parent;

	if (t == NULL)
		t = th->fmt = xcalloc(1, sizeof(*t));
	if (d >= t->cap) {
		t->cap = th->base.cap;  /* the core's stack bounds ours */
		t->node = xreallocarray(t->node, t->cap, sizeof(*t->node));
	}
	/* The root is looked up again at depth 0: the thread may have been renamed. */
	parent = d == 0 ? node(c, 0, source_index(e, s), th->name) : t->node[d - 1];
	t->node[d] = parent == NO_NODE ? NO_NODE : node(c, 1, parent, trc_xp_calls(th)[d].frame);
}

static void
ret(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
    const struct trc_xp_span *sp)
{
	struct pp *c = e->fs;
	uint32_t id = ((struct pp_thread *)th->fmt)->node[sp->depth];

	(void)s;
	if (id == NO_NODE) {
		c->left_out++;
		return;
	}
	c->calls[id]++;
	c->self_ns[id] += sp->self_ns;
}

/* The node's stack, leaf first, into locs (grown as needed); returns its root. */
static uint32_t
stack(struct trc_export *e, struct trc_pprof *p, uint32_t id, uint64_t **locs, size_t *n,
      size_t *cap)
{
	struct pp *c = e->fs;
	size_t len;

	*n = 0;
	for (; c->frame[id] != NO_NODE; id = c->parent[id]) {
		const struct trc_xp_frame *f = &e->frames[c->frame[id]];
		const char *name = trc_xp_str(e, f->name, &len), *file;
		size_t file_len;

		file = trc_xp_str(e, f->file, &file_len);
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 64;
			*locs = xreallocarray(*locs, *cap, sizeof(**locs));
		}
		(*locs)[(*n)++] = trc_pprof_location(p, name, len, file, file_len, f->line);
	}
	return id;
}

static void
add_samples(struct trc_export *e, struct trc_pprof *p)
{
	struct pp *c = e->fs;
	uint64_t *locs = NULL;
	size_t n, cap = 0, len;

	for (uint32_t id = 0; id < c->n; id++) {
		int64_t values[2] = { (int64_t)c->calls[id], (int64_t)c->self_ns[id] };
		uint32_t root;
		struct trc_pprof_label labels[2];

		if (c->calls[id] == 0)
			continue;
		root = stack(e, p, id, &locs, &n, &cap);
		labels[0] = (struct trc_pprof_label){ .key = "thread" };
		labels[0].str = trc_xp_str(e, c->thread[root], &len);
		labels[0].str_len = len;
		labels[1] = (struct trc_pprof_label){
			.key = "pid", .num = e->sources[c->parent[root]]->pid,
		};
		trc_pprof_sample(p, locs, n, values, labels, 2);
	}
	free(locs);
}

/* The time from the first event of the run to the last one of any target. */
static int64_t
duration(const struct trc_export *e)
{
	uint64_t last = e->t0;

	for (size_t i = 0; i < e->nsources; i++)
		if (e->sources[i]->last_ts > last)
			last = e->sources[i]->last_ts;
	return trc_xp_rel(e, last);
}

static void
end(struct trc_export *e)
{
	struct pp *c = e->fs;
	struct trc_pprof *p = trc_pprof_new(types, sizeof(types) / sizeof(types[0]));
	char note[96];

	add_samples(e, p);
	/*
	 * Every call is counted, none sampled: each value stands for itself (period 1 of wall
	 * nanoseconds, the type shown first). Pyroscope files a profile by its sample and period
	 * types (NAME:wall:nanoseconds:wall:nanoseconds); empty ones left it no name.
	 */
	trc_pprof_period(p, "wall", "nanoseconds", 1);
	trc_pprof_default_type(p, 1);
	trc_pprof_duration(p, duration(e));
	trc_pprof_comment(p, e->opts.tool);
	if (c->left_out > 0) {
		snprintf(note, sizeof(note), "%llu calls past %u distinct stacks left out",
			 (unsigned long long)c->left_out, MAX_NODES);
		trc_pprof_comment(p, note);
		trc_output_note(e->out, "%s of the profile", note);
	}
	trc_pprof_write(p, &e->line);
	trc_pprof_free(p);
	trc_xp_emit(e);
}

static void
free_thread(void *fmt)
{
	struct pp_thread *t = fmt;

	free(t->node);
	free(t);
}

static void
free_pp(struct trc_export *e)
{
	struct pp *c = e->fs;

	trc_intern_release(&c->keys);
	free(c->parent);
	free(c->frame);
	free(c->thread);
	free(c->calls);
	free(c->self_ns);
	free(c);
}

const struct trc_xp_format trc_xp_pprof = {
	.begin = begin,
	.call = call,
	.ret = ret,
	.end = end,
	.free_thread = free_thread,
	.free = free_pp,
};
