/* export_flamegraph.c: --format flamegraph: the traced calls' self time as an interactive flame graph, written at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_format.h"
#include "flame.h"
#include "xmalloc.h"

/*
 * The paths are export_stacks.c's tree, weighted in nanoseconds of self time (wall clock); at
 * the end it becomes flame.h's, each frame with its kind (app, gem, Ruby, C method, waiting:
 * from its file and name), and is written as one SVG or HTML document.
 */
struct conv {
	struct trc_export *e;
	struct trc_flame *f;
	uint32_t *frame_of;             /* exporter frame -> flame frame, UINT32_MAX: not yet */
	struct trc_flame_scope scope;
};

static uint32_t
flame_frame(struct conv *c, uint32_t label)
{
	struct trc_export *e = c->e;
	const struct trc_xp_frame *x;
	struct trc_flame_frame fr;
	size_t len;
	const char *s;

	if (label & TRC_XP_GROUP) {
		s = trc_xp_stacks_label(e, label, &len);
		return trc_flame_group(c->f, s, len);
	}
	if (label & TRC_XP_GC) {
		s = trc_xp_stacks_label(e, label, &len);
		fr = (struct trc_flame_frame){ s, len, "", 0, 0, TRC_FLAME_GC };
		return trc_flame_frame(c->f, &fr);
	}
	if (c->frame_of[label] != UINT32_MAX)
		return c->frame_of[label];
	x = &e->frames[label];
	fr.name = trc_xp_str(e, x->name, &fr.name_len);
	fr.file = trc_xp_str(e, x->file, &fr.file_len);
	fr.line = x->line;
	fr.kind = trc_flame_classify(fr.name, fr.name_len, fr.file, fr.file_len, &c->scope);
	return c->frame_of[label] = trc_flame_frame(c->f, &fr);
}

/* "tracer -f: process 1234" */
static void
title(struct trc_export *e, struct trc_buf *b)
{
	trc_buf_adds(b, e->opts.title != NULL ? e->opts.title : "tracer");
	trc_buf_adds(b, e->nsources > 1 ? ": processes" : ": process");
	for (size_t i = 0; i < e->nsources; i++) {
		if (i == 8) {
			trc_buf_addf(b, " and %zu more", e->nsources - i);
			break;
		}
		trc_buf_addf(b, "%s %d", i > 0 ? "," : "", (int)e->sources[i]->pid);
	}
}

/* What the picture shows, under its title. */
static void
subtitle(struct trc_export *e, const struct trc_flame *f, struct trc_buf *b)
{
	double secs = (double)trc_flame_total(f) / 1e9;

	trc_buf_addf(b, "self time (wall clock) of the traced calls: %.3f s in all", secs);
	if (e->nsources > 1)
		trc_buf_addf(b, ", %zu processes", e->nsources);
	if (e->opts.split == TRC_SPLIT_NONE)
		trc_buf_adds(b, ", threads merged");
	trc_buf_addf(b, "; frames under %g%% merged", e->opts.min_share * 100);
}

static void
end(struct trc_export *e)
{
	struct trc_xp_stacks *st = e->fs;
	struct conv c = { e, trc_flame_new("ns"), NULL, { NULL, 0 } };
	uint32_t *node = xcalloc(st->n ? st->n : 1, sizeof(*node));
	struct trc_flame_opts o = { e->opts.html ? TRC_FLAME_HTML : TRC_FLAME_SVG, NULL, NULL,
				    e->opts.min_share };
	struct trc_buf head, sub;

	c.frame_of = xcalloc(e->nframes ? e->nframes : 1, sizeof(*c.frame_of));
	memset(c.frame_of, 0xff, (e->nframes ? e->nframes : 1) * sizeof(*c.frame_of));
	if (e->opts.nprefixes > 0)
		c.scope = (struct trc_flame_scope){ e->opts.prefixes, e->opts.nprefixes };
	else
		c.scope = (struct trc_flame_scope){ (const char *const *)e->app_dirs, e->napp_dirs };
	/* Parents come before their children. */
	for (uint32_t id = 0; id < st->n; id++) {
		uint32_t up = st->parent[id] == TRC_XP_NO_NODE ? TRC_FLAME_ROOT : node[st->parent[id]];

		node[id] = trc_flame_node(c.f, up, flame_frame(&c, st->label[id]));
		trc_flame_weigh(c.f, node[id], st->self_ns[id]);
	}
	trc_buf_init(&head);
	title(e, &head);
	trc_buf_addc(&head, '\0');
	trc_buf_init(&sub);
	subtitle(e, c.f, &sub);
	trc_buf_addc(&sub, '\0');
	o.title = head.data;
	o.subtitle = sub.data;
	trc_flame_write(c.f, &o, e->out);
	trc_buf_release(&head);
	trc_buf_release(&sub);
	free(c.frame_of);
	free(node);
	trc_flame_free(c.f);
}

const struct trc_xp_format trc_xp_flamegraph = {
	.begin = trc_xp_stacks_begin,
	.call = trc_xp_stacks_call,
	.ret = trc_xp_stacks_ret,
	.gc = trc_xp_stacks_gc,
	.end = end,
	.free_thread = trc_xp_stacks_free_thread,
	.free = trc_xp_stacks_free,
};
