/* flame.c: the flame graph's tree (frames, call paths, weights) and its SVG/HTML document. */
#include "flame.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "intern.h"
#include "utf8.h"
#include "xmalloc.h"

/*
 * A node is a (parent, frame) pair, interned, so that a path costs one lookup per call and
 * memory grows with the distinct paths, not with the calls. A child is always made after its
 * parent: its id is larger, so totals add up in one backward pass.
 */
struct frame {
	uint32_t name, file;    /* ids in strings */
	int32_t line;
	uint32_t kind;
};

struct trc_flame {
	char unit[16];
	struct trc_intern strings;
	struct trc_intern frame_keys;   /* struct frame -> frame id */
	struct frame *frames;
	uint32_t nframes, frames_cap;
	struct trc_intern node_keys;    /* (parent, frame) -> node id */
	uint32_t *parent, *frame;
	uint64_t *self;
	uint32_t nnodes, nodes_cap;
	uint64_t dropped, total;
};

/* ---- the tree ---- */

static uint32_t
intern_frame(struct trc_flame *f, struct frame fr)
{
	uint32_t id = trc_intern_id(&f->frame_keys, &fr, sizeof(fr));

	if (id == f->nframes) {
		if (f->nframes == f->frames_cap) {
			f->frames_cap = f->frames_cap ? f->frames_cap * 2 : 64;
			f->frames = xreallocarray(f->frames, f->frames_cap, sizeof(*f->frames));
		}
		f->frames[f->nframes++] = fr;
	}
	return id;
}

static uint32_t
new_node(struct trc_flame *f, uint32_t parent, uint32_t frame)
{
	uint32_t id = f->nnodes++;

	if (id == f->nodes_cap) {
		f->nodes_cap = f->nodes_cap ? f->nodes_cap * 2 : 256;
		f->parent = xreallocarray(f->parent, f->nodes_cap, sizeof(*f->parent));
		f->frame = xreallocarray(f->frame, f->nodes_cap, sizeof(*f->frame));
		f->self = xreallocarray(f->self, f->nodes_cap, sizeof(*f->self));
	}
	f->parent[id] = parent;
	f->frame[id] = frame;
	f->self[id] = 0;
	return id;
}

struct trc_flame *
trc_flame_new(const char *unit)
{
	struct trc_flame *f = xcalloc(1, sizeof(*f));
	struct trc_flame_frame all = { "all", 3, "", 0, 0, TRC_FLAME_OTHER };

	snprintf(f->unit, sizeof(f->unit), "%s", unit);
	new_node(f, TRC_FLAME_ROOT, trc_flame_frame(f, &all));
	return f;
}

void
trc_flame_free(struct trc_flame *f)
{
	if (f == NULL)
		return;
	trc_intern_release(&f->strings);
	trc_intern_release(&f->frame_keys);
	trc_intern_release(&f->node_keys);
	free(f->frames);
	free(f->parent);
	free(f->frame);
	free(f->self);
	free(f);
}

uint32_t
trc_flame_frame(struct trc_flame *f, const struct trc_flame_frame *fr)
{
	struct frame k = {
		trc_intern_id(&f->strings, fr->name, fr->name_len),
		trc_intern_id(&f->strings, fr->file, fr->file_len),
		fr->line, (uint32_t)fr->kind,
	};

	return intern_frame(f, k);
}

uint32_t
trc_flame_group(struct trc_flame *f, const char *label, size_t len)
{
	struct trc_flame_frame fr = { label, len, "", 0, 0, TRC_FLAME_GROUP };

	return trc_flame_frame(f, &fr);
}

uint32_t
trc_flame_node(struct trc_flame *f, uint32_t parent, uint32_t frame)
{
	uint32_t key[2] = { parent, frame };
	uint32_t id = trc_intern_find(&f->node_keys, key, sizeof(key));

	if (id != UINT32_MAX)
		return id + 1;  /* the root has no key: node ids are key ids + 1 */
	if (f->nnodes >= TRC_FLAME_MAX_NODES) {
		f->dropped++;
		return parent;
	}
	trc_intern_id(&f->node_keys, key, sizeof(key));
	return new_node(f, parent, frame);
}

void
trc_flame_weigh(struct trc_flame *f, uint32_t node, uint64_t weight)
{
	f->self[node] += weight;
	f->total += weight;
}

void
trc_flame_add(struct trc_flame *f, const char *const *group, size_t ngroup,
	      const struct trc_flame_frame *stack, size_t n, uint64_t weight)
{
	uint32_t node = TRC_FLAME_ROOT;

	for (size_t i = 0; i < ngroup; i++)
		node = trc_flame_node(f, node, trc_flame_group(f, group[i], strlen(group[i])));
	for (size_t i = 0; i < n; i++)
		node = trc_flame_node(f, node, trc_flame_frame(f, &stack[i]));
	trc_flame_weigh(f, node, weight);
}

uint64_t
trc_flame_dropped(const struct trc_flame *f)
{
	return f->dropped;
}

uint64_t
trc_flame_total(const struct trc_flame *f)
{
	return f->total;
}

/* ---- kinds ---- */

static const char *const kind_names[TRC_FLAME_KINDS] = {
	[TRC_FLAME_APP] = "app", [TRC_FLAME_GEM] = "gems", [TRC_FLAME_RUBY] = "Ruby",
	[TRC_FLAME_CMETHOD] = "C methods", [TRC_FLAME_GC] = "GC", [TRC_FLAME_WAIT] = "waiting",
	[TRC_FLAME_OTHER] = "other", [TRC_FLAME_GROUP] = "process, thread",
};

const char *
trc_flame_kind_name(enum trc_flame_kind k)
{
	return (unsigned)k < TRC_FLAME_KINDS ? kind_names[k] : "?";
}

/* C methods that wait (for time, I/O, a lock, another thread or process) more than they run. */
static const char *const waiting[] = {
	"Kernel#sleep", "Kernel#select", "Kernel#gets", "Kernel#system", "Kernel#`",
	"IO.select", "IO#read", "IO#readpartial", "IO#read_nonblock", "IO#sysread", "IO#gets",
	"IO#readline", "IO#readlines", "IO#getc", "IO#getbyte", "IO#readchar", "IO#wait",
	"IO#wait_readable", "IO#wait_writable", "IO#write", "IO#syswrite", "IO#flush",
	"BasicSocket#recv", "BasicSocket#recvmsg", "BasicSocket#send", "Socket#accept",
	"TCPServer#accept", "UNIXServer#accept", "Socket#connect", "Addrinfo.getaddrinfo",
	"Thread#join", "Thread#value", "Thread::Mutex#lock", "Thread::Queue#pop",
	"Thread::Queue#shift", "Thread::Queue#deq", "Thread::SizedQueue#pop",
	"Thread::SizedQueue#push", "Thread::ConditionVariable#wait", "Monitor#wait",
	"Monitor#enter", "Monitor#mon_enter", "Process.wait", "Process.wait2", "Process.waitpid",
	"Process.waitpid2", "Process.waitall",
};

static bool
is_waiting(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(waiting) / sizeof(waiting[0]); i++)
		if (strlen(waiting[i]) == len && memcmp(waiting[i], name, len) == 0)
			return true;
	return false;
}

/* Whether needle occurs in p[0..n). */
static bool
contains(const char *p, size_t n, const char *needle)
{
	size_t k = strlen(needle);

	for (size_t i = 0; i + k <= n; i++)
		if (memcmp(p + i, needle, k) == 0)
			return true;
	return false;
}

/* A lib/ruby/X.Y directory (/usr/lib/ruby/3.1.0/, /opt/ruby/lib/ruby/3.4.0/): Ruby's own library. */
static bool
in_ruby_lib(const char *p, size_t n)
{
	static const char dir[] = "/lib/ruby/";

	for (size_t i = 0; i + sizeof(dir) <= n; i++)
		if (memcmp(p + i, dir, sizeof(dir) - 1) == 0 && p[i + sizeof(dir) - 1] >= '0' &&
		    p[i + sizeof(dir) - 1] <= '9')
			return true;
	return false;
}

static bool
under(const char *p, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);

	while (k > 1 && prefix[k - 1] == '/')
		k--;
	return k > 0 && n >= k && memcmp(p, prefix, k) == 0 && (n == k || p[k] == '/' || k == 1);
}

enum trc_flame_kind
trc_flame_classify(const char *name, size_t name_len, const char *file, size_t file_len,
		   const struct trc_flame_scope *scope)
{
	if (file_len == 0)
		return is_waiting(name, name_len) ? TRC_FLAME_WAIT : TRC_FLAME_CMETHOD;
	if (file_len >= 10 && memcmp(file, "<internal:", 10) == 0)
		return TRC_FLAME_RUBY;
	/* A gem inside the app (vendor/bundle) is still a gem. */
	if (contains(file, file_len, "/gems/") || contains(file, file_len, "/vendor/") ||
	    contains(file, file_len, "/vendor_ruby/") || contains(file, file_len, "/site_ruby/"))
		return TRC_FLAME_GEM;
	if (in_ruby_lib(file, file_len))
		return TRC_FLAME_RUBY;
	for (size_t i = 0; scope != NULL && i < scope->nprefixes; i++)
		if (under(file, file_len, scope->prefixes[i]))
			return TRC_FLAME_APP;
	return TRC_FLAME_OTHER;
}

/* ---- escaping ---- */

void
trc_flame_xml(struct trc_buf *b, const char *p, size_t n)
{
	struct trc_buf e;
	size_t run = 0, i;

	trc_buf_init(&e);
	trc_escape(&e, p, n);
	for (i = 0; i < e.len; i++) {
		const char *ent = NULL;
		unsigned char c = (unsigned char)e.data[i];

		switch (c) {
		case '&': ent = "&amp;"; break;
		case '<': ent = "&lt;"; break;
		case '>': ent = "&gt;"; break;
		case '"': ent = "&quot;"; break;
		case '\'': ent = "&#39;"; break;
		case 0xef:
			/* U+FFFE, U+FFFF: valid UTF-8, not XML characters. */
			if (i + 2 < e.len && (unsigned char)e.data[i + 1] == 0xbf &&
			    ((unsigned char)e.data[i + 2] & 0xfe) == 0xbe)
				ent = (unsigned char)e.data[i + 2] == 0xbe ? "\\uFFFE" : "\\uFFFF";
			break;
		}
		if (ent == NULL)
			continue;
		trc_buf_add(b, e.data + run, i - run);
		trc_buf_adds(b, ent);
		if (c == 0xef)
			i += 2;
		run = i + 1;
	}
	trc_buf_add(b, e.data + run, e.len - run);
	trc_buf_release(&e);
}

/* ---- the document ---- */

#define WIDTH 1200              /* of the picture, in pixels */
#define PAD 10                  /* left and right of the frames */
#define TOP 102                 /* the first row of frames: below the title, toolbar, legend */
#define ROW 17                  /* a row's height, with its gap */
#define BOTTOM 30               /* below the last row: the line that describes a frame */
#define CHAR_W 7.2              /* a character of the 12px monospace font, roughly */

/* Children of each node, ready to lay out: in CSR form, sorted by name. */
struct layout {
	const struct trc_flame *f;
	uint64_t *total;        /* self plus every descendant's */
	uint32_t *first, *kids; /* kids[first[n]..first[n + 1]) are n's children */
	uint64_t min;           /* frames below this weight are merged */
	uint32_t depth;         /* rows written */
	uint32_t kinds;         /* bit per kind written */
	size_t nwritten;
};

static const struct layout *sort_ctx;   /* qsort has no context argument */

static int
cmp_kids(const void *a, const void *b)
{
	const struct trc_flame *f = sort_ctx->f;
	const struct frame *x = &f->frames[f->frame[*(const uint32_t *)a]];
	const struct frame *y = &f->frames[f->frame[*(const uint32_t *)b]];
	size_t len;
	int c;

	if (x->name != y->name &&
	    (c = strcmp(trc_intern_str(&f->strings, x->name, &len),
			trc_intern_str(&f->strings, y->name, &len))) != 0)
		return c;
	if (x->file != y->file)
		return strcmp(trc_intern_str(&f->strings, x->file, &len),
			      trc_intern_str(&f->strings, y->file, &len));
	return x->line < y->line ? -1 : x->line > y->line ? 1 : (int)x->kind - (int)y->kind;
}

static void
layout_init(struct layout *l, const struct trc_flame *f, double min_share)
{
	uint32_t n = f->nnodes, *fill;

	memset(l, 0, sizeof(*l));
	l->f = f;
	l->total = xcalloc(n, sizeof(*l->total));
	memcpy(l->total, f->self, n * sizeof(*l->total));
	for (uint32_t i = n - 1; i > 0; i--)
		l->total[f->parent[i]] += l->total[i];
	l->first = xcalloc((size_t)n + 1, sizeof(*l->first));
	for (uint32_t i = 1; i < n; i++)
		l->first[f->parent[i] + 1]++;
	for (uint32_t i = 0; i < n; i++)
		l->first[i + 1] += l->first[i];
	l->kids = xcalloc(n, sizeof(*l->kids));
	fill = xcalloc(n, sizeof(*fill));
	for (uint32_t i = 1; i < n; i++)
		l->kids[l->first[f->parent[i]] + fill[f->parent[i]]++] = i;
	free(fill);
	sort_ctx = l;
	for (uint32_t i = 0; i < n; i++)
		qsort(l->kids + l->first[i], l->first[i + 1] - l->first[i], sizeof(*l->kids), cmp_kids);
	sort_ctx = NULL;
	l->min = (uint64_t)(min_share * (double)l->total[0]);
	if (l->min == 0)
		l->min = 1;     /* nothing weightless is drawn */
}

static void
layout_release(struct layout *l)
{
	free(l->total);
	free(l->first);
	free(l->kids);
}

/* Values as people read them: times for "ns", else the number and the unit. */
static void
put_value(struct trc_buf *b, const char *unit, uint64_t v)
{
	static const struct { uint64_t div; const char *name; } times[] = {
		{ 1000000000ull, "s" }, { 1000000ull, "ms" }, { 1000ull, "\xc2\xb5s" },
	};

	if (strcmp(unit, "ns") == 0) {
		for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
			if (v >= times[i].div) {
				trc_buf_addf(b, "%.2f %s", (double)v / (double)times[i].div, times[i].name);
				return;
			}
		}
		trc_buf_addf(b, "%" PRIu64 " ns", v);
		return;
	}
	trc_buf_addf(b, "%" PRIu64 " %s", v, unit);
}

static void
put_share(struct trc_buf *b, uint64_t v, uint64_t total)
{
	trc_buf_addf(b, "%.2f%%", total ? 100.0 * (double)v / (double)total : 0.0);
}

/* The colour of a frame: its kind's hue, varied by its name so that neighbours differ. */
static void
put_fill(struct trc_buf *b, uint32_t kind, const char *name)
{
	static const uint8_t base[TRC_FLAME_KINDS][6] = {
		/* r, g, b, then how much each varies */
		[TRC_FLAME_APP] = { 225, 90, 40, 30, 45, 25 },
		[TRC_FLAME_GEM] = { 200, 190, 50, 15, 30, 40 },
		[TRC_FLAME_RUBY] = { 105, 190, 95, 50, 40, 40 },
		[TRC_FLAME_CMETHOD] = { 90, 170, 215, 45, 40, 30 },
		[TRC_FLAME_GC] = { 170, 115, 220, 30, 30, 30 },
		[TRC_FLAME_WAIT] = { 170, 170, 175, 35, 35, 35 },
		[TRC_FLAME_OTHER] = { 210, 200, 180, 20, 15, 15 },
		[TRC_FLAME_GROUP] = { 160, 180, 200, 25, 25, 25 },
	};
	const uint8_t *c = base[kind < TRC_FLAME_KINDS ? kind : TRC_FLAME_OTHER];
	uint32_t h = 2166136261u, v1, v2;

	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	v1 = h & 0xff;
	v2 = (h >> 8) & 0xff;
	/* The grey of waiting varies as one, or it would tint. */
	if (kind == TRC_FLAME_WAIT)
		v2 = v1;
	trc_buf_addf(b, "rgb(%u,%u,%u)", c[0] + c[3] * v1 / 255, c[1] + c[4] * v2 / 255,
		     c[2] + c[5] * v1 / 255);
}

/* The label that fits w pixels: the escaped name, cut with ".." (the title has it whole). */
static void
put_label(struct trc_buf *b, const char *esc, size_t len, double w)
{
	double fit = (w - 6) / CHAR_W;
	size_t chars = fit > 0 ? (size_t)fit : 0, width = trc_utf8_width(esc, len);

	if (chars < 3)
		return;
	if (width <= chars) {
		trc_flame_xml(b, esc, len);
		return;
	}
	trc_flame_xml(b, esc, trc_utf8_head(esc, len, chars - 2));
	trc_buf_adds(b, "..");
}

/* One frame, at value offset x and row depth, weighing v (self: its own part). */
struct box {
	uint32_t kind;
	const char *name, *file;        /* raw bytes from the target */
	size_t name_len, file_len;
	int32_t line;
	uint64_t x, v, self;
	uint32_t depth;
};

static void
put_title(struct trc_buf *b, const struct box *x, const char *unit, uint64_t total)
{
	trc_flame_xml(b, x->name, x->name_len);
	trc_buf_addc(b, '\n');
	if (x->file_len > 0) {
		trc_flame_xml(b, x->file, x->file_len);
		if (x->line > 0)
			trc_buf_addf(b, ":%" PRId32, x->line);
	} else {
		trc_buf_adds(b, x->kind == TRC_FLAME_GROUP || x->kind == TRC_FLAME_OTHER ||
				x->kind == TRC_FLAME_GC ? "-" : "(a C method)");
	}
	trc_buf_addc(b, '\n');
	put_value(b, unit, x->v);
	trc_buf_adds(b, " (");
	put_share(b, x->v, total);
	trc_buf_adds(b, " of all), self ");
	put_value(b, unit, x->self);
}

static void
put_box(struct trc_buf *b, const struct layout *l, const struct box *x)
{
	/* An empty profile still draws its root, across. */
	double total = l->total[0] > 0 ? (double)l->total[0] : 1, span = WIDTH - 2 * PAD;
	double px = PAD + (double)x->x * span / total;
	double w = l->total[0] > 0 ? (double)x->v * span / total : span;
	struct trc_buf esc;

	trc_buf_addf(b, "<g class=\"f\" data-x=\"%" PRIu64 "\" data-v=\"%" PRIu64 "\" data-k=\"%u\"><title>",
		     x->x, x->v, x->kind);
	put_title(b, x, l->f->unit, l->total[0]);
	trc_buf_addf(b, "</title><rect x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%d\" fill=\"", px,
		     TOP + x->depth * ROW, w, ROW - 1);
	trc_buf_init(&esc);
	trc_escape(&esc, x->name, x->name_len);
	trc_buf_addc(&esc, '\0');
	put_fill(b, x->kind, esc.data);
	trc_buf_addf(b, "\"/><text x=\"%.2f\" y=\"%u\">", px + 3, TOP + x->depth * ROW + 12);
	put_label(b, esc.data, esc.len - 1, w);
	trc_buf_adds(b, "</text></g>\n");
	trc_buf_release(&esc);
}

static void
node_box(const struct layout *l, uint32_t n, uint64_t x, uint32_t depth, struct box *b)
{
	const struct trc_flame *f = l->f;
	const struct frame *fr = &f->frames[f->frame[n]];
	size_t nl, fl;
	const char *name = trc_intern_str(&f->strings, fr->name, &nl);
	const char *file = trc_intern_str(&f->strings, fr->file, &fl);

	*b = (struct box){ fr->kind, name, file, nl, fl, fr->line, x, l->total[n], f->self[n], depth };
}

/*
 * Walks the frames that are drawn, parents before children, each with its offset: put is
 * called for each (NULL: only the layout's depth and kinds are counted). Iterative: a deep
 * recursion in the app makes a deep tree.
 */
struct item {
	uint32_t node;
	uint32_t depth;
	uint64_t x;
};

static void
visit(struct layout *l, void (*put)(struct layout *, const struct box *, void *), void *ctx)
{
	struct item *stack = xcalloc(l->f->nnodes + 1, sizeof(*stack));
	size_t top = 0;
	struct box b;

	stack[top++] = (struct item){ TRC_FLAME_ROOT, 0, 0 };
	while (top > 0) {
		struct item it = stack[--top];
		uint64_t x = it.x, other = 0;
		uint32_t k0 = l->first[it.node], k1 = l->first[it.node + 1];

		node_box(l, it.node, it.x, it.depth, &b);
		put(l, &b, ctx);
		/* Children pushed last to first, so they come out in order. */
		for (uint32_t k = k0; k < k1; k++)
			if (l->total[l->kids[k]] >= l->min)
				x += l->total[l->kids[k]];
			else
				other += l->total[l->kids[k]];
		if (other >= l->min) {
			b = (struct box){ TRC_FLAME_OTHER, "(other)", "", 7, 0, 0, x, other, 0, it.depth + 1 };
			put(l, &b, ctx);
		}
		for (uint32_t k = k1; k > k0; k--) {
			uint32_t c = l->kids[k - 1];

			if (l->total[c] < l->min)
				continue;
			x -= l->total[c];
			stack[top++] = (struct item){ c, it.depth + 1, x };
		}
	}
	free(stack);
}

static void
measure(struct layout *l, const struct box *b, void *ctx)
{
	(void)ctx;
	if (b->depth + 1 > l->depth)
		l->depth = b->depth + 1;
	l->kinds |= 1u << b->kind;
	l->nwritten++;
}

struct writer {
	struct trc_output *out;
	struct trc_buf b;
};

static void
flush(struct writer *w)
{
	trc_output_write(w->out, w->b.data, w->b.len);
	w->b.len = 0;
}

static void
emit(struct layout *l, const struct box *b, void *ctx)
{
	struct writer *w = ctx;

	put_box(&w->b, l, b);
	if (w->b.len >= (64u << 10))
		flush(w);
}

static const char style[] =
	"<style>\n"
	"text{font-family:monospace;font-size:12px;fill:#000}\n"
	"#frames text{pointer-events:none}\n"
	"g.f{cursor:pointer}\n"
	"g.f:hover rect{stroke:#222;stroke-width:1}\n"
	"g.f.up{opacity:.55}\n"
	"#title{font-size:17px;text-anchor:middle}\n"
	"#subtitle{fill:#555;text-anchor:middle}\n"
	"#details{fill:#222}\n"
	"#bar{font:13px sans-serif;display:flex;gap:8px;align-items:center;height:26px;white-space:nowrap}\n"
	"#bar input{width:260px;font:13px monospace;flex:none}\n"
	"#bar button{flex:none}\n"
	"#matched{font-weight:bold;overflow:hidden;text-overflow:ellipsis}\n"
	"</style>\n";

/* The toolbar: search box, its result, reset; an XHTML island in the SVG. */
static const char toolbar[] =
	"<foreignObject x=\"10\" y=\"48\" width=\"1180\" height=\"30\">"
	"<div xmlns=\"http://www.w3.org/1999/xhtml\" id=\"bar\">"
	"<input id=\"search\" type=\"search\" placeholder=\"Search: text, or /regex/\" spellcheck=\"false\"/>"
	"<button id=\"reset\" type=\"button\">Reset zoom</button>"
	"<span id=\"matched\"></span></div></foreignObject>\n";

/*
 * The script reads what it needs from the document (names from each frame's title, offsets
 * from data attributes) and writes only text (textContent) and geometry: nothing from the
 * target is ever code or markup. Frames keep their value offsets (data-x, data-v), so a zoom
 * lays out again from those.
 */
static const char script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"(function () {\n"
	"  'use strict';\n"
	"  var svg = document.getElementById('flame');\n"
	"  var W = +svg.getAttribute('data-width'), PAD = 10, TOP = +svg.getAttribute('data-top'), ROW = 17;\n"
	"  var unit = svg.getAttribute('data-unit');\n"
	"  var details = document.getElementById('details'), matched = document.getElementById('matched');\n"
	"  var search = document.getElementById('search');\n"
	"  var gs = document.getElementById('frames').getElementsByTagName('g'), frames = [];\n"
	"  var probe = document.createElementNS('http://www.w3.org/2000/svg', 'text');\n"
	"  probe.textContent = 'MMMMMMMMMMMMMMMMMMMM';\n"
	"  svg.appendChild(probe);\n"
	"  var CHAR = probe.getComputedTextLength() / 20 || 7.2;\n"
	"  svg.removeChild(probe);\n"
	"  for (var i = 0; i < gs.length; i++) {\n"
	"    var g = gs[i], r = g.getElementsByTagName('rect')[0], lines = g.getElementsByTagName('title')[0].textContent.split('\\n');\n"
	"    frames.push({ g: g, r: r, t: g.getElementsByTagName('text')[0], x: +g.getAttribute('data-x'),\n"
	"      v: +g.getAttribute('data-v'), d: Math.round((+r.getAttribute('y') - TOP) / ROW),\n"
	"      name: lines[0], where: lines[1], value: lines[2], fill: r.getAttribute('fill') });\n"
	"    g.setAttribute('data-i', i);\n"
	"  }\n"
	"  var root = frames[0], zoomed = root, hits = [];\n"
	"  function pct(v, of) { return (of > 0 ? 100 * v / of : 0).toFixed(2) + '%'; }\n"
	"  function fit(f, w) {\n"
	"    var n = Math.floor((w - 6) / CHAR);\n"
	"    f.t.textContent = n < 3 ? '' : f.name.length <= n ? f.name : f.name.slice(0, n - 2) + '..';\n"
	"  }\n"
	"  function zoom(z) {\n"
	"    if (!(z.v > 0)) return;\n"
	"    zoomed = z;\n"
	"    var span = W - 2 * PAD;\n"
	"    frames.forEach(function (f) {\n"
	"      var inside = f.d >= z.d && f.x >= z.x && f.x + f.v <= z.x + z.v;\n"
	"      var above = f.d < z.d && f.x <= z.x && f.x + f.v >= z.x + z.v;\n"
	"      var x = PAD, w = span;\n"
	"      if (inside) { x = PAD + (f.x - z.x) / z.v * span; w = f.v / z.v * span; }\n"
	"      if (!(inside || above) || w < 0.1) { f.g.style.display = 'none'; return; }\n"
	"      f.g.style.display = '';\n"
	"      f.g.setAttribute('class', above ? 'f up' : 'f');\n"
	"      f.r.setAttribute('x', x.toFixed(2));\n"
	"      f.r.setAttribute('width', w.toFixed(2));\n"
	"      f.t.setAttribute('x', (x + 3).toFixed(2));\n"
	"      fit(f, w);\n"
	"    });\n"
	"    report();\n"
	"  }\n"
	"  function matches(term) {\n"
	"    if (term.length > 2 && term[0] === '/' && term[term.length - 1] === '/') {\n"
	"      try { var re = new RegExp(term.slice(1, -1)); return function (s) { return re.test(s); }; }\n"
	"      catch (e) { return function () { return false; }; }\n"
	"    }\n"
	"    return function (s) { return s.indexOf(term) >= 0; };\n"
	"  }\n"
	"  /* The matched frames' share: nested matches count once (their offsets overlap). */\n"
	"  function covered(lo, hi) {\n"
	"    var sum = 0, end = lo;\n"
	"    hits.forEach(function (h) {\n"
	"      var a = Math.max(h.x, end), b = Math.min(h.x + h.v, hi);\n"
	"      if (b > a) { sum += b - a; end = b; }\n"
	"    });\n"
	"    return sum;\n"
	"  }\n"
	"  function report() {\n"
	"    if (!search.value) { matched.textContent = ''; return; }\n"
	"    var text = 'Matched: ' + pct(covered(root.x, root.x + root.v), root.v) + ' of all';\n"
	"    if (zoomed !== root) text += ', ' + pct(covered(zoomed.x, zoomed.x + zoomed.v), zoomed.v) + ' of ' + zoomed.name;\n"
	"    matched.textContent = text + ' (' + hits.length + ' frames)';\n"
	"  }\n"
	"  function find() {\n"
	"    var term = search.value, test = matches(term);\n"
	"    hits = [];\n"
	"    frames.forEach(function (f) {\n"
	"      var hit = term !== '' && f !== root && test(f.name);\n"
	"      f.r.setAttribute('fill', hit ? 'rgb(230,0,230)' : f.fill);\n"
	"      if (hit) hits.push(f);\n"
	"    });\n"
	"    hits.sort(function (a, b) { return a.x - b.x || b.v - a.v; });\n"
	"    report();\n"
	"  }\n"
	"  function frameOf(e) {\n"
	"    var g = e.target.closest ? e.target.closest('g.f') : null;\n"
	"    return g ? frames[+g.getAttribute('data-i')] : null;\n"
	"  }\n"
	"  var box = document.getElementById('frames');\n"
	"  box.addEventListener('mouseover', function (e) {\n"
	"    var f = frameOf(e);\n"
	"    if (!f) return;\n"
	"    var text = f.name + '  |  ' + f.where + '  |  ' + f.value;\n"
	"    if (zoomed !== root) text += ' (' + pct(f.v, zoomed.v) + ' of ' + zoomed.name + ')';\n"
	"    details.textContent = text;\n"
	"  });\n"
	"  box.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
	"  box.addEventListener('click', function (e) { var f = frameOf(e); if (f) zoom(f); });\n"
	"  document.getElementById('reset').addEventListener('click', function () { zoom(root); });\n"
	"  search.addEventListener('input', find);\n"
	"  document.addEventListener('keydown', function (e) {\n"
	"    if (e.key === 'Escape') { zoom(root); }\n"
	"    else if ((e.key === 'f' && (e.ctrlKey || e.metaKey)) || (e.key === '/' && document.activeElement !== search)) {\n"
	"      e.preventDefault(); search.focus();\n"
	"    }\n"
	"  });\n"
	"  frames.forEach(function (f) { fit(f, +f.r.getAttribute('width')); });\n"
	"})();\n"
	"]]></script>\n";

static void
put_legend(struct trc_buf *b, uint32_t kinds)
{
	double x = PAD;

	trc_buf_adds(b, "<g id=\"legend\">");
	for (uint32_t k = 0; k < TRC_FLAME_KINDS; k++) {
		const char *name = kind_names[k];

		if (!(kinds & (1u << k)) || k == TRC_FLAME_OTHER)
			continue;
		trc_buf_addf(b, "<rect x=\"%.0f\" y=\"82\" width=\"12\" height=\"12\" fill=\"", x);
		put_fill(b, k, "");
		trc_buf_addf(b, "\"/><text x=\"%.0f\" y=\"92\">%s</text>", x + 16, name);
		x += 16 + CHAR_W * (double)strlen(name) + 14;
	}
	trc_buf_adds(b, "</g>\n");
}

static void
put_head(struct trc_buf *b, const struct layout *l, const struct trc_flame_opts *o)
{
	unsigned height = TOP + l->depth * ROW + BOTTOM;
	const char *title = o->title != NULL ? o->title : "Flame graph";

	if (o->doc == TRC_FLAME_HTML) {
		trc_buf_adds(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>\n"
			     "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
			     "style-src 'unsafe-inline'; script-src 'unsafe-inline'\"/>\n<title>");
		trc_flame_xml(b, title, strlen(title));
		trc_buf_adds(b, "</title><style>body{margin:0;background:#fafafa}</style></head><body>\n");
	} else {
		trc_buf_adds(b, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
	}
	trc_buf_addf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" id=\"flame\" "
		     "width=\"%d\" height=\"%u\" viewBox=\"0 0 %d %u\" data-width=\"%d\" data-top=\"%d\" "
		     "data-unit=\"", WIDTH, height, WIDTH, height, WIDTH, TOP);
	trc_flame_xml(b, l->f->unit, strlen(l->f->unit));
	trc_buf_adds(b, "\">\n<title>");
	trc_flame_xml(b, title, strlen(title));
	trc_buf_adds(b, "</title>\n");
	trc_buf_adds(b, style);
	trc_buf_addf(b, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n"
		     "<text id=\"title\" x=\"%d\" y=\"22\">", WIDTH / 2);
	trc_flame_xml(b, title, strlen(title));
	trc_buf_addf(b, "</text>\n<text id=\"subtitle\" x=\"%d\" y=\"40\">", WIDTH / 2);
	if (o->subtitle != NULL)
		trc_flame_xml(b, o->subtitle, strlen(o->subtitle));
	trc_buf_adds(b, "</text>\n");
	trc_buf_adds(b, toolbar);
	put_legend(b, l->kinds);
	trc_buf_adds(b, "<g id=\"frames\">\n");
}

static void
put_tail(struct trc_buf *b, const struct layout *l, const struct trc_flame_opts *o)
{
	trc_buf_addf(b, "</g>\n<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", PAD,
		     TOP + l->depth * ROW + BOTTOM - 10);
	trc_buf_adds(b, script);
	trc_buf_adds(b, "</svg>\n");
	if (o->doc == TRC_FLAME_HTML)
		trc_buf_adds(b, "</body></html>\n");
}

size_t
trc_flame_write(const struct trc_flame *f, const struct trc_flame_opts *o, struct trc_output *out)
{
	struct layout l;
	struct writer w = { out, { NULL, 0, 0 } };

	layout_init(&l, f, o->min_share);
	visit(&l, measure, NULL);
	put_head(&w.b, &l, o);
	visit(&l, emit, &w);
	put_tail(&w.b, &l, o);
	flush(&w);
	trc_buf_release(&w.b);
	layout_release(&l);
	return l.nwritten;
}
