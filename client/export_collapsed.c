/* export_collapsed.c: --format collapsed: folded stacks "a;b;c weight" by self time, written at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "export_format.h"
#include "json.h"
#include "xmalloc.h"

#define NO_NODE UINT32_MAX

/*
 * Stacks are nodes of a tree, each (parent, label) pair interned once, so memory grows with
 * the distinct stacks, not with the calls. The root is the thread's name (under "ruby PID"
 * with several targets); each call adds its self time, in nanoseconds, to its node. At the
 * end each node with any becomes one line, weighted in nanoseconds (what was measured: a
 * weight in microseconds dropped every call under half of one), sorted, as flamegraph.pl and
 * inferno expect: "thread;Outer#call;Inner#call 1234567".
 */
struct collapsed {
	struct trc_intern keys;         /* (parent + 1, label) -> node id */
	uint32_t *parent, *label;       /* label: id in the exporter's strings */
	uint64_t *self_ns;
	uint32_t n, cap;
};

struct col_thread {
	uint32_t *node;                 /* the node of each call on the thread's stack */
	uint32_t cap;
	uint32_t root, root_name;       /* root node, and the thread name it was made for */
};

static uint32_t
node(struct collapsed *c, uint32_t parent, uint32_t label)
{
	uint32_t key[2] = { parent + 1, label };
	uint32_t id = trc_intern_id(&c->keys, key, sizeof(key));

	if (id == c->n) {
		if (c->n == c->cap) {
			c->cap = c->cap ? c->cap * 2 : 256;
			c->parent = xreallocarray(c->parent, c->cap, sizeof(*c->parent));
			c->label = xreallocarray(c->label, c->cap, sizeof(*c->label));
			c->self_ns = xreallocarray(c->self_ns, c->cap, sizeof(*c->self_ns));
		}
		c->parent[id] = parent;
		c->label[id] = label;
		c->self_ns[id] = 0;
		c->n++;
	}
	return id;
}

static uint32_t
root(struct trc_export *e, const struct trc_xp_source *s, const struct trc_xp_thread *th,
     struct col_thread *t)
{
	char proc[32];
	uint32_t parent = NO_NODE;

	if (t->root != NO_NODE && t->root_name == th->name)
		return t->root;
	if (e->opts.label_pids) {
		snprintf(proc, sizeof(proc), "ruby %d", (int)s->pid);
		parent = node(e->fs, NO_NODE, trc_xp_intern(e, proc, strlen(proc)));
	}
	t->root = node(e->fs, parent, th->name);
	t->root_name = th->name;
	return t->root;
}

static void
begin(struct trc_export *e)
{
	e->fs = xcalloc(1, sizeof(struct collapsed));
}

static void
call(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th)
{
	struct col_thread *t = th->fmt;
	uint32_t d = th->base.depth - 1, parent;

	if (t == NULL) {
		t = th->fmt = xcalloc(1, sizeof(*t));
		t->root = NO_NODE;
	}
	if (d >= t->cap) {
		t->cap = th->base.cap;  /* the core's stack bounds ours */
		t->node = xreallocarray(t->node, t->cap, sizeof(*t->node));
	}
	parent = d == 0 ? root(e, s, th, t) : t->node[d - 1];
	t->node[d] = node(e->fs, parent, e->frames[trc_xp_calls(th)[d].frame].name);
}

static void
ret(struct trc_export *e, struct trc_xp_source *s, struct trc_xp_thread *th,
    const struct trc_xp_span *sp)
{
	struct collapsed *c = e->fs;
	struct col_thread *t = th->fmt;

	(void)s;
	c->self_ns[t->node[sp->depth]] += sp->self_ns;
}

/*
 * ';' separates frames and a newline ends the line: a name is escaped (escape.h), which leaves
 * no newline nor any other control in it, and its ';' become ','.
 */
static void
put_label(struct trc_buf *b, const char *p, size_t n)
{
	size_t from = b->len;

	trc_escape(b, p, n);
	for (size_t i = from; i < b->len; i++)
		if (b->data[i] == ';')
			b->data[i] = ',';
}

/* "root;...;leaf" of node id, appended to b. */
static void
put_path(struct trc_export *e, struct trc_buf *b, uint32_t id)
{
	struct collapsed *c = e->fs;
	uint32_t chain[64], n = 0;
	size_t len;
	const char *s;

	/* Deep stacks: write the part above the last 64 frames first. */
	for (uint32_t k = id; k != NO_NODE; k = c->parent[k]) {
		if (n == sizeof(chain) / sizeof(chain[0])) {
			put_path(e, b, k);
			trc_buf_addc(b, ';');
			break;
		}
		chain[n++] = k;
	}
	while (n-- > 0) {
		s = trc_xp_str(e, c->label[chain[n]], &len);
		put_label(b, s, len);
		if (n > 0)
			trc_buf_addc(b, ';');
	}
}

static int
cmp_lines(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
end(struct trc_export *e)
{
	struct collapsed *c = e->fs;
	struct trc_buf text;
	size_t *offs = xcalloc(c->n ? c->n : 1, sizeof(*offs)), nlines = 0;
	char **lines;

	/* Each line is written with its weight and a NUL, then the lines are sorted. */
	trc_buf_init(&text);
	for (uint32_t id = 0; id < c->n; id++) {
		if (c->self_ns[id] == 0)
			continue;
		offs[nlines++] = text.len;
		put_path(e, &text, id);
		trc_buf_addc(&text, ' ');
		trc_json_uint(&text, c->self_ns[id]);
		trc_buf_addc(&text, '\0');
	}
	lines = xcalloc(nlines ? nlines : 1, sizeof(*lines));
	for (size_t i = 0; i < nlines; i++)
		lines[i] = text.data + offs[i];
	qsort(lines, nlines, sizeof(*lines), cmp_lines);
	for (size_t i = 0; i < nlines; i++) {
		trc_buf_adds(&e->line, lines[i]);
		trc_buf_addc(&e->line, '\n');
		trc_xp_emit(e);
	}
	free(lines);
	free(offs);
	trc_buf_release(&text);
}

static void
free_thread(void *fmt)
{
	struct col_thread *t = fmt;

	free(t->node);
	free(t);
}

static void
free_collapsed(struct trc_export *e)
{
	struct collapsed *c = e->fs;

	trc_intern_release(&c->keys);
	free(c->parent);
	free(c->label);
	free(c->self_ns);
	free(c);
}

const struct trc_xp_format trc_xp_collapsed = {
	.begin = begin,
	.call = call,
	.ret = ret,
	.end = end,
	.free_thread = free_thread,
	.free = free_collapsed,
};
