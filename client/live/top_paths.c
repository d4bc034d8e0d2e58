/* top_paths.c: --top time's call paths, per target: each agent's path ids mapped to frames and summed. */
#include "top_paths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intern.h"
#include "xmalloc.h"

/*
 * An agent numbers its paths 1, 2... in the order it makes them and sends each new one once,
 * after its parent: a target's paths are arrays indexed by that id. A frame is a (label, file,
 * line), interned once for every target.
 */
struct frame {
	uint32_t label, file;   /* ids in strings */
	int32_t line;
};

struct target {
	pid_t pid;
	uint32_t n, cap;        /* ids 1..n known */
	uint32_t *parent, *frame;
	uint64_t *self_ns;
};

struct trc_top_paths {
	struct trc_intern strings;
	struct trc_intern frame_keys;   /* struct frame -> id */
	struct frame *frames;
	uint32_t nframes, frames_cap;
	struct target *targets;
	size_t ntargets;
	uint64_t bad;
};

struct trc_top_paths *
trc_top_paths_new(void)
{
	return xcalloc(1, sizeof(struct trc_top_paths));
}

void
trc_top_paths_free(struct trc_top_paths *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->ntargets; i++) {
		free(p->targets[i].parent);
		free(p->targets[i].frame);
		free(p->targets[i].self_ns);
	}
	free(p->targets);
	free(p->frames);
	trc_intern_release(&p->strings);
	trc_intern_release(&p->frame_keys);
	free(p);
}

uint64_t
trc_top_paths_bad(const struct trc_top_paths *p)
{
	return p->bad;
}

static struct target *
target(struct trc_top_paths *p, pid_t pid)
{
	for (size_t i = 0; i < p->ntargets; i++)
		if (p->targets[i].pid == pid)
			return &p->targets[i];
	p->targets = xreallocarray(p->targets, p->ntargets + 1, sizeof(*p->targets));
	p->targets[p->ntargets] = (struct target){ .pid = pid };
	return &p->targets[p->ntargets++];
}

static uint32_t
frame_id(struct trc_top_paths *p, const struct trc_top_path *x)
{
	struct frame k = {
		trc_intern_id(&p->strings, x->label.ptr, x->label.len),
		trc_intern_id(&p->strings, x->file.ptr, x->file.len), x->line,
	};
	uint32_t id = trc_intern_id(&p->frame_keys, &k, sizeof(k));

	if (id == p->nframes) {
		if (p->nframes == p->frames_cap) {
			p->frames_cap = p->frames_cap ? p->frames_cap * 2 : 256;
			p->frames = xreallocarray(p->frames, p->frames_cap, sizeof(*p->frames));
		}
		p->frames[p->nframes++] = k;
	}
	return id;
}

/* Room for ids up to id (arrays indexed by id; index 0 unused). */
static void
grow(struct target *t, uint32_t id)
{
	if (id < t->cap)
		return;
	t->cap = t->cap ? t->cap * 2 : 256;
	while (t->cap <= id)
		t->cap *= 2;
	t->parent = xreallocarray(t->parent, t->cap, sizeof(*t->parent));
	t->frame = xreallocarray(t->frame, t->cap, sizeof(*t->frame));
	t->self_ns = xreallocarray(t->self_ns, t->cap, sizeof(*t->self_ns));
}

static void
add(struct trc_top_paths *p, struct target *t, const struct trc_top_path *x)
{
	if (x->id == t->n + 1 && x->parent <= t->n) {
		grow(t, x->id);
		t->n = x->id;
		t->parent[x->id] = x->parent;
		t->frame[x->id] = frame_id(p, x);
		t->self_ns[x->id] = 0;
	} else if (x->id == 0 || x->id > t->n || t->parent == NULL || t->parent[x->id] != x->parent) {
		p->bad++;
		return;
	}
	t->self_ns[x->id] += x->self_ns;
}

void
trc_top_paths_feed(struct trc_top_paths *p, pid_t pid, const struct trc_message *m)
{
	struct target *t;

	if (m->type != TRC_MSG_TOP || m->top.npaths == 0)
		return;
	t = target(p, pid);
	for (size_t i = 0; i < m->top.npaths; i++)
		add(p, t, &m->top.paths[i]);
}

static uint32_t
flame_frame(const struct trc_top_paths *p, struct trc_flame *f, uint32_t id,
	    const struct trc_flame_scope *scope)
{
	const struct frame *x = &p->frames[id];
	struct trc_flame_frame fr;

	fr.name = trc_intern_str(&p->strings, x->label, &fr.name_len);
	fr.file = trc_intern_str(&p->strings, x->file, &fr.file_len);
	fr.line = x->line;
	fr.kind = trc_flame_classify(fr.name, fr.name_len, fr.file, fr.file_len, scope);
	return trc_flame_frame(f, &fr);
}

void
trc_top_paths_flame(const struct trc_top_paths *p, struct trc_flame *f, bool by_process,
		    const struct trc_flame_scope *scope)
{
	uint32_t *fid = xcalloc(p->nframes ? p->nframes : 1, sizeof(*fid));

	/* Each distinct frame classified once. */
	for (uint32_t i = 0; i < p->nframes; i++)
		fid[i] = flame_frame(p, f, i, scope);
	for (size_t k = 0; k < p->ntargets; k++) {
		const struct target *t = &p->targets[k];
		uint32_t top = TRC_FLAME_ROOT, *node = xcalloc((size_t)t->n + 1, sizeof(*node));
		char proc[32];

		if (by_process) {
			snprintf(proc, sizeof(proc), "ruby %d", (int)t->pid);
			top = trc_flame_node(f, TRC_FLAME_ROOT, trc_flame_group(f, proc, strlen(proc)));
		}
		node[0] = top;
		/* A parent's id is below its child's: made first. */
		for (uint32_t id = 1; id <= t->n; id++) {
			node[id] = trc_flame_node(f, node[t->parent[id]], fid[t->frame[id]]);
			trc_flame_weigh(f, node[id], t->self_ns[id]);
		}
		free(node);
	}
	free(fid);
}
