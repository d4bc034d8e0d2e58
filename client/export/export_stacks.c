/* export_stacks.c: call paths as a tree weighted by self time, for the stack formats (collapsed, flamegraph). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_format.h"
#include "xmalloc.h"

/*
 * Each (parent, label) pair is interned once, so memory grows with the distinct paths, not
 * with the calls. A call's node is found when it is made, and its self time, in nanoseconds,
 * is added when it returns. What is at the top of a thread's paths follows --split: nothing
 * (every thread and process merged), its process, or its thread (under its process when
 * there are several targets).
 */
struct st_thread {
	uint32_t *node;                 /* the node of each call on the thread's stack */
	uint64_t *gc_ns;                /* collections during each call, taken from its self time */
	uint32_t cap;
	uint32_t root, root_name;       /* the top node, and the thread name it was made for */
	bool rooted;
};

static uint32_t
node(struct trc_xp_stacks *t, uint32_t parent, uint32_t label)
{
	uint32_t key[2] = { parent + 1, label };
	uint32_t id = trc_intern_id(&t->keys, key, sizeof(key));

	if (id == t->n) {
		if (t->n == t->cap) {
			t->cap = t->cap ? t->cap * 2 : 256;
			t->parent = xreallocarray(t->parent, t->cap, sizeof(*t->parent));
			t->label = xreallocarray(t->label, t->cap, sizeof(*t->label));
			t->self_ns = xreallocarray(t->self_ns, t->cap, sizeof(*t->self_ns));
		}
		t->parent[id] = parent;
		t->label[id] = label;
		t->self_ns[id] = 0;
		t->n++;
	}
	return id;
}

static uint32_t
group(struct trc_export *e, uint32_t parent, const char *name, size_t len)
{
	return node(e->fs, parent, TRC_XP_GROUP | trc_xp_intern(e, name, len));
}

/* The node the thread's outermost calls hang from (TRC_XP_NO_NODE: the top). */
static uint32_t
root(struct trc_export *e, const struct trc_xp_source *s, const struct trc_xp_thread *th,
     struct st_thread *t)
{
	char proc[32];
	uint32_t top = TRC_XP_NO_NODE;
	size_t len;
	const char *name;

	if (t->rooted && t->root_name == th->name)
		return t->root;
	snprintf(proc, sizeof(proc), "ruby %d", (int)s->pid);
	if (e->opts.split == TRC_SPLIT_PROCESS ||
	    (e->opts.split == TRC_SPLIT_THREAD && e->opts.label_pids))
		top = group(e, top, proc, strlen(proc));
	if (e->opts.split == TRC_SPLIT_THREAD) {
		name = trc_xp_str(e, th->name, &len);
		top = group(e, top, name, len);
	}
	t->root = top;
	t->root_name = th->name;
	t->rooted = true;
	return top;
}

static struct st_thread *
state(struct trc_xp_thread *th)
{
	struct st_thread *t = th->fmt;

	if (t == NULL)
		t = th->fmt = xcalloc(1, sizeof(*t));
	if (th->base.depth > t->cap) {
		t->cap = th->base.cap;  /* the core's stack bounds ours */
		t->node = xreallocarray(t->node, t->cap, sizeof(*t->node));
		t->gc_ns = xreallocarray(t->gc_ns, t->cap, sizeof(*t->gc_ns));
	}
	return t;
}

void
trc_xp_stacks_begin(struct trc_export *e)
{
	e->fs = xcalloc(1, sizeof(struct trc_xp_stacks));
}

void
trc_xp_stacks_call(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th)
{
	struct st_thread *t = state(th);
	uint32_t d = th->base.depth - 1;
	uint32_t parent = d == 0 ? root(e, s, th, t) : t->node[d - 1];

	t->node[d] = node(e->fs, parent, trc_xp_calls(th)[d].frame);
	t->gc_ns[d] = 0;
}

void
trc_xp_stacks_ret(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
		  const struct trc_xp_span *sp)
{
	struct trc_xp_stacks *st = e->fs;
	struct st_thread *t = th->fmt;
	uint64_t gc = t->gc_ns[sp->depth];

	(void)s;
	st->self_ns[t->node[sp->depth]] += sp->self_ns > gc ? sp->self_ns - gc : 0;
}

/*
 * A collection's pause is a frame of its own, inside the call it stopped (its time taken from
 * that call's own), or at the top of its thread's paths when no traced call was running.
 */
void
trc_xp_stacks_gc(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
		 const struct trc_message *m)
{
	struct trc_xp_stacks *st = e->fs;
	uint32_t label = TRC_XP_GC | (m->gc.major ? 1u : 0u), parent = TRC_XP_NO_NODE;
	struct st_thread *t;

	if (th != NULL) {
		t = state(th);
		parent = th->base.depth > 0 ? t->node[th->base.depth - 1] : root(e, s, th, t);
		if (th->base.depth > 0)
			t->gc_ns[th->base.depth - 1] += m->gc.pause_ns;
	} else if (e->opts.split == TRC_SPLIT_PROCESS || e->opts.split == TRC_SPLIT_THREAD) {
		char proc[32];

		snprintf(proc, sizeof(proc), "ruby %d", (int)s->pid);
		if (e->opts.split == TRC_SPLIT_PROCESS || e->opts.label_pids)
			parent = group(e, parent, proc, strlen(proc));
	}
	parent = node(st, parent, label);      /* before self_ns is read: it may move */
	st->self_ns[parent] += m->gc.pause_ns;
}

const char *
trc_xp_stacks_label(struct trc_export *e, uint32_t label, size_t *len)
{
	static const char *const gc[] = { "GC minor", "GC major" };

	if (label & TRC_XP_GROUP)
		return trc_xp_str(e, label & ~TRC_XP_GROUP, len);
	if (label & TRC_XP_GC) {
		*len = strlen(gc[label & 1]);
		return gc[label & 1];
	}
	return trc_xp_str(e, e->frames[label].name, len);
}

void
trc_xp_stacks_free_thread(void *fmt)
{
	struct st_thread *t = fmt;

	free(t->node);
	free(t->gc_ns);
	free(t);
}

void
trc_xp_stacks_free(struct trc_export *e)
{
	struct trc_xp_stacks *t = e->fs;

	if (t == NULL)
		return;
	trc_intern_release(&t->keys);
	free(t->parent);
	free(t->label);
	free(t->self_ns);
	free(t);
}
