/* profile_export.c: --top profile's stacks as a file: collapsed, speedscope, pprof or a flame graph. */
#include "profile_export.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "json.h"
#include "pprof.h"
#include "xmalloc.h"

#define NONE UINT32_MAX
#define SCHEMA "https://www.speedscope.app/file-format-schema.json"

bool
trc_profile_format(enum trc_format f)
{
	static const bool writes[] = {
#define TRC_X(NAME, name, exporter, document, profile) [TRC_FORMAT_##NAME] = (profile),
		TRC_FORMATS(TRC_X)
#undef TRC_X
	};

	return (size_t)f < sizeof(writes) / sizeof(writes[0]) && writes[f];
}

/* The frames from node id's root down to it (the root itself left out), into *out. */
static uint32_t
frames_of(const struct trc_profile *p, uint32_t id, uint32_t **out, uint32_t *cap, uint32_t *root)
{
	uint32_t n = 0;

	for (uint32_t k = id; k != NONE; k = p->nodes[k].parent) {
		if (p->nodes[k].parent == NONE) {
			*root = k;
			break;
		}
		if (n == *cap) {
			*cap = *cap ? *cap * 2 : 256;
			*out = xreallocarray(*out, *cap, sizeof(**out));
		}
		(*out)[n++] = p->nodes[k].frame;
	}
	/* leaf first so far: the formats want the root first */
	for (uint32_t i = 0; i < n / 2; i++) {
		uint32_t t = (*out)[i];

		(*out)[i] = (*out)[n - 1 - i];
		(*out)[n - 1 - i] = t;
	}
	return n;
}

static const char *
frame_label(const struct trc_profile *p, uint32_t f, size_t *len)
{
	return trc_profile_str(p, p->frames[f].label, len);
}

/* ---- collapsed ---- */

/* A name in a collapsed line: escaped (no control, no newline), its ';' made ','. */
static void
put_name(struct trc_buf *b, const char *s, size_t n)
{
	size_t from = b->len;

	trc_escape(b, s, n);
	for (size_t i = from; i < b->len; i++)
		if (b->data[i] == ';')
			b->data[i] = ',';
}

struct line {
	size_t off, len;
	uint64_t weight;
};

static const char *sort_base;

static int
cmp_line(const void *a, const void *b)
{
	const struct line *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(sort_base + x->off, sort_base + y->off, n);

	return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

static void
write_collapsed(const struct trc_profile *p, const struct trc_profile_write_opts *o, struct trc_buf *out)
{
	struct trc_buf paths;
	struct line *lines = xcalloc(p->nnodes ? p->nnodes : 1, sizeof(*lines));
	uint32_t *frames = NULL, cap = 0, root = 0;
	size_t nlines = 0;

	trc_buf_init(&paths);
	for (uint32_t id = 0; id < p->nnodes; id++) {
		const struct trc_profile_node *node = &p->nodes[id];
		uint64_t w = trc_profile_weight(p, node);
		uint32_t n = frames_of(p, id, &frames, &cap, &root);
		struct line *l = &lines[nlines];
		size_t len;
		const char *s;

		if (w == 0 || n == 0)
			continue;
		l->off = paths.len;
		l->weight = w;
		if (o->by_process || o->by_thread)
			trc_buf_addf(&paths, "ruby %d;", (int)p->nodes[root].pid);
		if (o->by_thread) {
			s = trc_profile_str(p, p->nodes[root].thread, &len);
			put_name(&paths, s, len);
			trc_buf_addc(&paths, ';');
		}
		for (uint32_t i = 0; i < n; i++) {
			s = frame_label(p, frames[i], &len);
			put_name(&paths, s, len);
			if (i + 1 < n)
				trc_buf_addc(&paths, ';');
		}
		l->len = paths.len - l->off;
		nlines++;
	}
	/* The same stack of several threads (or processes) is one line, its weights summed. */
	sort_base = paths.data;
	qsort(lines, nlines, sizeof(*lines), cmp_line);
	for (size_t i = 0; i < nlines; i++) {
		uint64_t w = lines[i].weight;

		while (i + 1 < nlines && cmp_line(&lines[i], &lines[i + 1]) == 0)
			w += lines[++i].weight;
		trc_buf_add(out, paths.data + lines[i].off, lines[i].len);
		trc_buf_addc(out, ' ');
		trc_json_uint(out, w);
		trc_buf_addc(out, '\n');
	}
	free(frames);
	free(lines);
	trc_buf_release(&paths);
}

/* ---- speedscope ---- */

static void
put_profile_head(struct trc_buf *out, const char *name, size_t len, uint64_t end)
{
	trc_buf_adds(out, "{\"type\":\"sampled\",\"name\":");
	trc_json_str(out, name, len);
	trc_buf_adds(out, ",\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":");
	trc_json_uint(out, end);
	trc_buf_adds(out, ",\"samples\":[");
}

/* One sampled profile's samples and weights: the nodes under root group (NONE: every root). */
static void
put_sampled(const struct trc_profile *p, uint32_t group, struct trc_buf *out)
{
	uint32_t *frames = NULL, cap = 0, root = 0;
	struct trc_buf weights;
	bool first = true;

	trc_buf_init(&weights);
	for (uint32_t id = 0; id < p->nnodes; id++) {
		uint64_t w = trc_profile_weight(p, &p->nodes[id]);
		uint32_t n = frames_of(p, id, &frames, &cap, &root);

		if (w == 0 || n == 0 || (group != NONE && root != group))
			continue;
		trc_buf_adds(out, first ? "[" : ",[");
		trc_buf_adds(&weights, first ? "" : ",");
		for (uint32_t i = 0; i < n; i++) {
			if (i > 0)
				trc_buf_addc(out, ',');
			trc_json_uint(out, frames[i]);
		}
		trc_buf_addc(out, ']');
		trc_json_uint(&weights, w);
		first = false;
	}
	trc_buf_adds(out, "],\"weights\":[");
	trc_buf_add(out, weights.data, weights.len);
	trc_buf_adds(out, "]}");
	free(frames);
	trc_buf_release(&weights);
}

static uint64_t
group_total(const struct trc_profile *p, uint32_t group)
{
	uint32_t *frames = NULL, cap = 0, root = 0;
	uint64_t total = 0;

	for (uint32_t id = 0; id < p->nnodes; id++) {
		uint64_t w = trc_profile_weight(p, &p->nodes[id]);

		if (w == 0 || frames_of(p, id, &frames, &cap, &root) == 0 || (group != NONE && root != group))
			continue;
		total += w;
	}
	free(frames);
	return total;
}

static void
write_speedscope(const struct trc_profile *p, const struct trc_profile_write_opts *o, struct trc_buf *out)
{
	bool first = true;

	trc_buf_adds(out, "{\"$schema\":\"" SCHEMA "\",\"shared\":{\"frames\":[");
	for (uint32_t f = 0; f < p->nframes; f++) {
		size_t len;
		const char *s = frame_label(p, f, &len);

		trc_buf_adds(out, f ? ",{\"name\":" : "{\"name\":");
		trc_json_str(out, s, len);
		s = trc_profile_str(p, p->frames[f].file, &len);
		if (len > 0) {
			trc_buf_adds(out, ",\"file\":");
			trc_json_str(out, s, len);
			trc_buf_adds(out, ",\"line\":");
			trc_json_int(out, p->frames[f].line);
		}
		trc_buf_addc(out, '}');
	}
	trc_buf_adds(out, "]},\"profiles\":[");
	if (!o->by_thread) {
		static const char all[] = "every thread";

		put_profile_head(out, all, sizeof(all) - 1, group_total(p, NONE));
		put_sampled(p, NONE, out);
		first = false;
	}
	for (uint32_t id = 0; o->by_thread && id < p->nnodes; id++) {
		const struct trc_profile_node *r = &p->nodes[id];
		char name[256];
		size_t len;
		const char *s;
		int n;

		if (r->parent != NONE || group_total(p, id) == 0)
			continue;
		s = trc_profile_str(p, r->thread, &len);
		n = snprintf(name, sizeof(name), "%d %.*s", (int)r->pid, (int)(len > 200 ? 200 : len), s);
		trc_buf_adds(out, first ? "" : ",");
		put_profile_head(out, name, n > 0 ? (size_t)n : 0, group_total(p, id));
		put_sampled(p, id, out);
		first = false;
	}
	trc_buf_adds(out, "],\"name\":\"tracer profile\",\"exporter\":");
	trc_json_str(out, o->tool, strlen(o->tool));
	trc_buf_adds(out, ",\"activeProfileIndex\":0}\n");
}

/* ---- pprof ---- */

static void
write_pprof(const struct trc_profile *p, const struct trc_profile_write_opts *o, struct trc_buf *out)
{
	static const struct trc_pprof_type types[] = {
		{ "samples", "count" }, { "cpu", "nanoseconds" }, { "wall", "nanoseconds" },
	};
	struct trc_pprof *pp = trc_pprof_new(types, p->wall ? 3 : 2);
	uint32_t *frames = NULL, cap = 0, root = 0;
	uint64_t *locs = NULL;
	char note[96];

	trc_pprof_period(pp, p->wall ? "wall" : "cpu", "nanoseconds",
			 o->hz ? (int64_t)(1000000000u / o->hz) : 0);
	trc_pprof_default_type(pp, p->wall ? 2 : 1);
	for (uint32_t id = 0; id < p->nnodes; id++) {
		const struct trc_profile_node *node = &p->nodes[id];
		uint32_t n = frames_of(p, id, &frames, &cap, &root);
		int64_t values[3] = { (int64_t)node->samples, (int64_t)node->cpu_ns, (int64_t)node->wall_ns };
		struct trc_pprof_label labels[3];
		size_t nlabels = 0, len;
		const char *s;

		if (node->samples == 0 || n == 0)
			continue;
		locs = xreallocarray(locs, n, sizeof(*locs));
		for (uint32_t i = 0; i < n; i++) {
			const struct trc_profile_frame *f = &p->frames[frames[n - 1 - i]];
			size_t flen;
			const char *file = trc_profile_str(p, f->file, &flen);

			s = trc_profile_str(p, f->label, &len);
			locs[i] = trc_pprof_location(pp, s, len, file, flen, f->line);
		}
		s = trc_profile_str(p, p->nodes[root].thread, &len);
		labels[nlabels++] = (struct trc_pprof_label){ .key = "thread", .str = s, .str_len = len };
		labels[nlabels++] = (struct trc_pprof_label){ .key = "pid", .num = p->nodes[root].pid };
		s = trc_profile_str(p, p->nodes[root].tag, &len);
		if (len > 0)
			labels[nlabels++] = (struct trc_pprof_label){ .key = "request", .str = s, .str_len = len };
		trc_pprof_sample(pp, locs, n, values, labels, nlabels);
	}
	trc_pprof_duration(pp, o->duration_ns);
	snprintf(note, sizeof(note), "%s --top profile, %s time, %" PRIu64 " Hz", o->tool,
		 p->wall ? "wall-clock" : "CPU", o->hz);
	trc_pprof_comment(pp, note);
	trc_pprof_write(pp, out);
	trc_pprof_free(pp);
	free(locs);
	free(frames);
}

void
trc_profile_write(const struct trc_profile *p, const struct trc_profile_write_opts *o,
		  struct trc_buf *out)
{
	if (o->format == TRC_FORMAT_COLLAPSED)
		write_collapsed(p, o, out);
	else if (o->format == TRC_FORMAT_SPEEDSCOPE)
		write_speedscope(p, o, out);
	else if (o->format == TRC_FORMAT_PPROF)
		write_pprof(p, o, out);
}

/* ---- flame graph ---- */

/* A sampled frame's colour: the agent says what a pseudo-frame is; a Ruby frame's file says whose it is. */
static enum trc_flame_kind
flame_kind(const struct trc_profile *p, uint32_t f, const struct trc_flame_scope *scope)
{
	const struct trc_profile_frame *fr = &p->frames[f];
	size_t nlen, flen;
	const char *name = trc_profile_str(p, fr->label, &nlen);
	const char *file = trc_profile_str(p, fr->file, &flen);

	switch (fr->kind) {
	case TRC_FRAME_C:
		return TRC_FLAME_CMETHOD;
	case TRC_FRAME_GC:
		return TRC_FLAME_GC;
	case TRC_FRAME_GVL:
	case TRC_FRAME_BLOCKED:
		return TRC_FLAME_WAIT;
	case TRC_FRAME_RUBY:
		return trc_flame_classify(name, nlen, file, flen, scope);
	default:
		return TRC_FLAME_OTHER;
	}
}

void
trc_profile_flame(const struct trc_profile *p, const struct trc_profile_write_opts *o,
		  const struct trc_flame_scope *scope, struct trc_flame *f)
{
	uint32_t *frames = NULL, cap = 0, root = 0;
	struct trc_flame_frame *stack = NULL;
	uint32_t stack_cap = 0;

	for (uint32_t id = 0; id < p->nnodes; id++) {
		uint64_t w = trc_profile_weight(p, &p->nodes[id]);
		uint32_t n = frames_of(p, id, &frames, &cap, &root);
		const char *group[2];
		size_t ngroup = 0, len;
		char pidname[32];

		if (w == 0 || n == 0)
			continue;
		if (n > stack_cap) {
			stack_cap = cap;
			stack = xreallocarray(stack, stack_cap, sizeof(*stack));
		}
		for (uint32_t i = 0; i < n; i++) {
			const struct trc_profile_frame *fr = &p->frames[frames[i]];

			stack[i] = (struct trc_flame_frame){ .line = fr->line };
			stack[i].name = trc_profile_str(p, fr->label, &stack[i].name_len);
			stack[i].file = trc_profile_str(p, fr->file, &stack[i].file_len);
			stack[i].kind = flame_kind(p, frames[i], scope);
		}
		if (o->by_process || o->by_thread) {
			snprintf(pidname, sizeof(pidname), "ruby %d", (int)p->nodes[root].pid);
			group[ngroup++] = pidname;
		}
		if (o->by_thread)
			group[ngroup++] = trc_profile_str(p, p->nodes[root].thread, &len);
		trc_flame_add(f, group, ngroup, stack, n, w);
	}
	free(stack);
	free(frames);
}
