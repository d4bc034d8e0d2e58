/* profile.c: --top profile: every target's sampled stacks, as table rows and as one tree for files. */
#include "profile.h"

#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

#define NONE UINT32_MAX

/* What the agent numbered, as this run numbers it; and one message's tree, by its ids. */
struct local {
	uint32_t parent;        /* NONE: a root */
	uint32_t frame;         /* run frame; a root: NONE */
	uint32_t node;          /* run node (keep_tree), NONE before it is made */
	uint32_t tag;           /* a root: the run frame of its tag, NONE for none */
	bool defined;
};

struct trc_profile_target {
	pid_t pid;
	uint32_t *frame;        /* agent frame id -> run frame */
	uint32_t nframe;
	uint32_t *thread;       /* agent thread idx -> string id of its name */
	uint32_t nthread;
	uint32_t *tag;          /* agent tag id -> string id */
	uint32_t ntag;
	struct local *local;    /* agent node id -> what it is, this message */
	uint32_t nlocal;
	/* Rows scratch, by run frame. */
	uint64_t *self_ns, *total_ns, *samples;
	uint32_t *stamp, cur;
	uint32_t nscratch;
};

void
trc_profile_init(struct trc_profile *p, bool wall, bool keep_tree)
{
	memset(p, 0, sizeof(*p));
	p->wall = wall;
	p->keep_tree = keep_tree;
	trc_intern_id(&p->strings, "", 0);      /* id 0: "" */
}

static void
target_free(struct trc_profile_target *t)
{
	free(t->frame);
	free(t->thread);
	free(t->tag);
	free(t->local);
	free(t->self_ns);
	free(t->total_ns);
	free(t->samples);
	free(t->stamp);
	free(t);
}

void
trc_profile_release(struct trc_profile *p)
{
	for (size_t i = 0; i < p->ntargets; i++)
		target_free(p->targets[i]);
	free(p->targets);
	trc_intern_release(&p->strings);
	trc_intern_release(&p->frame_keys);
	trc_intern_release(&p->node_keys);
	free(p->frames);
	free(p->nodes);
	free(p->rows);
	free(p->chain);
	memset(p, 0, sizeof(*p));
}

const char *
trc_profile_str(const struct trc_profile *p, uint32_t id, size_t *len)
{
	return trc_intern_str(&p->strings, id, len);
}

static struct trc_profile_target *
target_of(struct trc_profile *p, pid_t pid)
{
	struct trc_profile_target *t;

	for (size_t i = 0; i < p->ntargets; i++)
		if (p->targets[i]->pid == pid)
			return p->targets[i];
	t = xcalloc(1, sizeof(*t));
	t->pid = pid;
	p->targets = xreallocarray(p->targets, p->ntargets + 1, sizeof(*p->targets));
	p->targets[p->ntargets++] = t;
	return t;
}

/* Grows a map of uint32 to hold index i, new entries NONE. */
static uint32_t *
map_room(uint32_t *map, uint32_t *n, uint32_t i)
{
	uint32_t want;

	if (i < *n)
		return map;
	want = *n ? *n : 64;
	while (want <= i)
		want *= 2;
	map = xreallocarray(map, want, sizeof(*map));
	for (uint32_t k = *n; k < want; k++)
		map[k] = NONE;
	*n = want;
	return map;
}

static uint32_t
intern_str(struct trc_profile *p, struct trc_str s)
{
	return trc_intern_id(&p->strings, s.ptr, s.len);
}

/* The run's frame for (kind, label, file, line): one for the same method in every target. */
static uint32_t
run_frame(struct trc_profile *p, const struct trc_prof_frame *f)
{
	uint32_t key[4] = { f->kind, intern_str(p, f->label), intern_str(p, f->file), (uint32_t)f->line };
	uint32_t id = trc_intern_id(&p->frame_keys, key, sizeof(key));

	if (id == p->nframes) {
		if (p->nframes == p->frames_cap) {
			p->frames_cap = p->frames_cap ? p->frames_cap * 2 : 256;
			p->frames = xreallocarray(p->frames, p->frames_cap, sizeof(*p->frames));
		}
		p->frames[id] = (struct trc_profile_frame){ key[1], key[2], f->line, f->kind };
		p->nframes++;
	}
	return id;
}

/*
 * The frame a tag's samples are under in the table: the request or job itself, whose TOTAL is
 * the time spent serving it. FILENAME says "(request)".
 */
static uint32_t
tag_frame(struct trc_profile *p, uint32_t text)
{
	static const char where[] = "(request)";
	size_t len;
	const char *s = trc_profile_str(p, text, &len);
	struct trc_prof_frame f = { 0, TRC_FRAME_OTHER, { s, (uint32_t)len }, { where, sizeof(where) - 1 }, 0 };

	return run_frame(p, &f);
}

static void
take_frames(struct trc_profile *p, struct trc_profile_target *t, const struct trc_message *m)
{
	for (uint32_t i = 0; i < m->profile.nframes; i++) {
		const struct trc_prof_frame *f = &m->profile.frames[i];

		if (f->id >= TRC_PROFILE_MAX_FRAME_ID)
			continue;
		t->frame = map_room(t->frame, &t->nframe, f->id);
		t->frame[f->id] = run_frame(p, f);
	}
}

static void
take_names(struct trc_profile *p, struct trc_profile_target *t, const struct trc_message *m)
{
	for (uint32_t i = 0; i < m->profile.nthreads; i++) {
		const struct trc_prof_thread *th = &m->profile.threads[i];

		if (th->idx >= TRC_PROFILE_MAX_THREAD_ID)
			continue;
		t->thread = map_room(t->thread, &t->nthread, th->idx);
		t->thread[th->idx] = intern_str(p, th->name);
	}
	for (uint32_t i = 0; i < m->profile.ntags; i++) {
		const struct trc_prof_tag *tg = &m->profile.tags[i];

		if (tg->id >= TRC_PROFILE_MAX_TAG_ID)
			continue;
		t->tag = map_room(t->tag, &t->ntag, tg->id);
		t->tag[tg->id] = intern_str(p, tg->text);
	}
}

static struct local *
local_at(struct trc_profile_target *t, uint32_t id)
{
	if (id >= t->nlocal) {
		uint32_t want = t->nlocal ? t->nlocal : 1024;

		while (want <= id)
			want *= 2;
		t->local = xreallocarray(t->local, want, sizeof(*t->local));
		t->nlocal = want;
	}
	return &t->local[id];
}

/* The message's tree, by the agent's node ids; what is not well-formed is left undefined. */
static uint32_t
take_tree(struct trc_profile *p, struct trc_profile_target *t, const struct trc_message *m)
{
	uint32_t max = 0;

	for (uint32_t i = 0; i < m->profile.nroots; i++)
		max = m->profile.roots[i].node > max ? m->profile.roots[i].node : max;
	for (uint32_t i = 0; i < m->profile.nnodes; i++)
		max = m->profile.nodes[i].node > max ? m->profile.nodes[i].node : max;
	if (max >= TRC_PROFILE_MAX_NODE_ID)
		max = TRC_PROFILE_MAX_NODE_ID - 1;
	local_at(t, max);
	for (uint32_t i = 0; i <= max; i++)
		t->local[i].defined = false;
	for (uint32_t i = 0; i < m->profile.nroots; i++) {
		const struct trc_prof_root *r = &m->profile.roots[i];

		if (r->node > max)
			continue;
		t->local[r->node] = (struct local){ NONE, NONE, NONE, NONE, true };
		if (r->tag != 0 && r->tag < t->ntag && t->tag[r->tag] != NONE)
			t->local[r->node].tag = tag_frame(p, t->tag[r->tag]);
	}
	/* A node comes after its parent: a parent not yet defined makes it undefined too. */
	for (uint32_t i = 0; i < m->profile.nnodes; i++) {
		const struct trc_prof_node *n = &m->profile.nodes[i];
		uint32_t frame = n->frame < t->nframe ? t->frame[n->frame] : NONE;

		if (n->node > max || n->parent > max || n->parent == n->node || !t->local[n->parent].defined ||
		    frame == NONE)
			continue;
		t->local[n->node] = (struct local){ n->parent, frame, NONE, NONE, true };
	}
	return max;
}

/* ---- rows for the table ---- */

static void
scratch_room(struct trc_profile *p, struct trc_profile_target *t)
{
	uint32_t n = p->nframes;

	if (t->nscratch >= n)
		return;
	t->self_ns = xreallocarray(t->self_ns, n, sizeof(*t->self_ns));
	t->total_ns = xreallocarray(t->total_ns, n, sizeof(*t->total_ns));
	t->samples = xreallocarray(t->samples, n, sizeof(*t->samples));
	t->stamp = xreallocarray(t->stamp, n, sizeof(*t->stamp));
	memset(t->stamp + t->nscratch, 0, (n - t->nscratch) * sizeof(*t->stamp));
	t->nscratch = n;
}

/* One weighed node: self to its frame, total to each distinct frame from it up to the root. */
static void
add_row_weight(struct trc_profile_target *t, uint32_t node, uint32_t max, uint64_t ns, uint32_t samples)
{
	struct local *l = &t->local[node];
	uint32_t depth = 0;

	if (l->frame == NONE)
		return;
	t->cur++;
	t->self_ns[l->frame] += ns;
	t->samples[l->frame] += samples;
	for (uint32_t id = node; id <= max && t->local[id].defined && depth <= max;
	     id = t->local[id].parent, depth++) {
		uint32_t f = t->local[id].frame != NONE ? t->local[id].frame : t->local[id].tag;

		if (f != NONE && t->stamp[f] != t->cur) {       /* a recursion: its time counts once */
			t->stamp[f] = t->cur;
			t->total_ns[f] += ns;
		}
		if (t->local[id].parent == NONE)
			break;
	}
}

/*
 * The rows of one message: every frame that any weighed sample had on its stack. The scratch
 * sums start from zero for each message: frames are cleared as they are turned into rows.
 */
static size_t
make_rows(struct trc_profile *p, struct trc_profile_target *t, const struct trc_message *m, uint32_t max)
{
	uint32_t *touched = NULL;
	size_t ntouched = 0, touched_cap = 0, nrows = 0;
	uint8_t *seen;

	scratch_room(p, t);
	seen = xcalloc(p->nframes ? p->nframes : 1, 1);
	for (uint32_t i = 0; i < m->profile.nweights; i++) {
		const struct trc_prof_weight *w = &m->profile.weights[i];
		uint64_t ns = p->wall ? w->wall_ns : w->cpu_ns;

		if (w->node > max || !t->local[w->node].defined)
			continue;
		/* Every frame on the way up is a row (a tag too): note them before adding. */
		for (uint32_t id = w->node, depth = 0; id <= max && t->local[id].defined && depth <= max;
		     id = t->local[id].parent, depth++) {
			uint32_t f = t->local[id].frame != NONE ? t->local[id].frame : t->local[id].tag;

			if (t->local[id].parent == NONE && f == NONE)
				break;
			if (!seen[f]) {
				seen[f] = 1;
				if (ntouched == touched_cap) {
					touched_cap = touched_cap ? touched_cap * 2 : 64;
					touched = xreallocarray(touched, touched_cap, sizeof(*touched));
				}
				touched[ntouched++] = f;
				t->self_ns[f] = t->total_ns[f] = t->samples[f] = 0;
			}
		}
		add_row_weight(t, w->node, max, ns, w->samples);
	}
	if (ntouched > p->rows_cap) {
		p->rows = xreallocarray(p->rows, ntouched, sizeof(*p->rows));
		p->rows_cap = ntouched;
	}
	for (size_t i = 0; i < ntouched; i++) {
		const struct trc_profile_frame *f = &p->frames[touched[i]];
		struct trc_top_row *r = &p->rows[nrows++];
		size_t len;

		/* Whole: a field left from a realloc (app_file, which only exceptions' rows have) is
		 * hashed and compared as the row's key. */
		memset(r, 0, sizeof(*r));
		r->file.ptr = trc_profile_str(p, f->file, &len);
		r->file.len = (uint32_t)len;
		r->label.ptr = trc_profile_str(p, f->label, &len);
		r->label.len = (uint32_t)len;
		r->line = f->line;
		r->count = t->samples[touched[i]];
		r->total_ns = t->total_ns[touched[i]];
		r->self_ns = t->self_ns[touched[i]];
		r->nbuckets = 0;        /* samples have no durations of calls */
	}
	free(seen);
	free(touched);
	return nrows;
}

/* ---- the run's tree ---- */

static uint32_t
run_node(struct trc_profile *p, const struct trc_profile_node *n)
{
	uint32_t key[5] = { n->parent, n->frame, (uint32_t)n->pid, n->thread, n->tag };
	uint32_t id;

	if (n->parent != NONE)
		key[2] = key[3] = key[4] = 0;   /* a frame under a parent: the parent says the rest */
	if (p->nnodes >= TRC_PROFILE_MAX_NODES &&
	    trc_intern_find(&p->node_keys, key, sizeof(key)) == UINT32_MAX)
		return NONE;
	id = trc_intern_id(&p->node_keys, key, sizeof(key));
	if (id == p->nnodes) {
		if (p->nnodes == p->nodes_cap) {
			p->nodes_cap = p->nodes_cap ? p->nodes_cap * 2 : 1024;
			p->nodes = xreallocarray(p->nodes, p->nodes_cap, sizeof(*p->nodes));
		}
		p->nodes[id] = *n;
		p->nnodes++;
	}
	return id;
}

/*
 * The run's node for the agent's node id (made, with its parents, if new). Iterative: an agent's
 * chain of parents may be a million deep, or, redefined, a loop (max + 1 steps end it), and a
 * recursion per parent overflowed the client's stack (the fuzzer's find).
 */
static uint32_t
tree_node(struct trc_profile *p, struct trc_profile_target *t, const struct trc_message *m, uint32_t id,
	  uint32_t max)
{
	uint32_t n = 0, k = id, top;

	while (t->local[k].node == NONE && t->local[k].parent != NONE) {
		if (n > max)
			return NONE;    /* a loop */
		if (n == p->chain_cap) {
			p->chain_cap = p->chain_cap ? p->chain_cap * 2 : 64;
			p->chain = xreallocarray(p->chain, p->chain_cap, sizeof(*p->chain));
		}
		p->chain[n++] = k;
		k = t->local[k].parent;
	}
	if (t->local[k].node == NONE) {
		struct trc_profile_node root = { .parent = NONE, .frame = NONE, .pid = t->pid };

		for (uint32_t i = 0; i < m->profile.nroots; i++) {
			const struct trc_prof_root *r = &m->profile.roots[i];

			if (r->node != k)
				continue;
			root.thread = r->thread < t->nthread && t->thread[r->thread] != NONE ? t->thread[r->thread] : 0;
			root.tag = r->tag < t->ntag && t->tag[r->tag] != NONE ? t->tag[r->tag] : 0;
			break;
		}
		t->local[k].node = run_node(p, &root);
	}
	top = t->local[k].node;
	while (n > 0 && top != NONE) {
		struct local *l = &t->local[p->chain[--n]];
		struct trc_profile_node child = { .parent = top, .frame = l->frame, .pid = t->pid };

		l->node = run_node(p, &child);
		top = l->node;
	}
	return top;
}

static void
add_to_tree(struct trc_profile *p, struct trc_profile_target *t, const struct trc_message *m, uint32_t max)
{
	for (uint32_t i = 0; i < m->profile.nweights; i++) {
		const struct trc_prof_weight *w = &m->profile.weights[i];
		uint32_t node;

		if (w->node > max || !t->local[w->node].defined)
			continue;
		node = tree_node(p, t, m, w->node, max);
		if (node == NONE) {
			p->tree_lost += w->samples;
			continue;
		}
		p->nodes[node].samples += w->samples;
		p->nodes[node].cpu_ns += w->cpu_ns;
		p->nodes[node].wall_ns += w->wall_ns;
	}
}

void
trc_profile_feed(struct trc_profile *p, pid_t pid, const struct trc_message *m,
		 struct trc_message *top)
{
	struct trc_profile_target *t = target_of(p, pid);
	uint32_t max;

	take_frames(p, t, m);
	take_names(p, t, m);
	max = take_tree(p, t, m);
	for (uint32_t i = 0; i <= max; i++)
		t->local[i].node = NONE;
	memset(top, 0, sizeof(*top));
	top->type = TRC_MSG_TOP;
	top->top.elapsed_ns = m->profile.elapsed_ns;
	top->top.events = m->profile.samples;
	top->top.lost = m->profile.lost;
	top->top.nrows = make_rows(p, t, m, max);
	top->top.rows = p->rows;
	if (p->keep_tree)
		add_to_tree(p, t, m, max);
	p->samples += m->profile.samples;
	p->lost += m->profile.lost;
	p->own_ns += m->profile.own_ns;
	p->elapsed_ns += m->profile.elapsed_ns;
	if (m->profile.hz != 0)
		p->hz = m->profile.hz;
}
