/* flame.h: a flame graph: a weighted tree of call paths from any source, written as one interactive SVG or HTML file. */
#ifndef TRC_FLAME_H
#define TRC_FLAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "output.h"

/*
 * What a frame is, which its colour says: set by the caller (trc_flame_classify() guesses it
 * from a frame's file and name). GROUP is a thread or process label the caller keeps apart.
 */
enum trc_flame_kind {
	TRC_FLAME_APP = 0,      /* the app's own code */
	TRC_FLAME_GEM,          /* a gem's (or a vendored library's) */
	TRC_FLAME_RUBY,         /* Ruby's own library, <internal:...> */
	TRC_FLAME_CMETHOD,      /* a method written in C: no Ruby file of its own */
	TRC_FLAME_GC,           /* a garbage collection */
	TRC_FLAME_WAIT,         /* waiting: sleep, I/O, a lock, a join */
	TRC_FLAME_OTHER,        /* anything else; "(other)", frames merged under the threshold */
	TRC_FLAME_GROUP,        /* a process or thread, when they are kept apart */
};
#define TRC_FLAME_KINDS 8

/* A frame as a source names it: bytes from the target, escaped when written. */
struct trc_flame_frame {
	const char *name;
	size_t name_len;
	const char *file;       /* "" when it has none */
	size_t file_len;
	int32_t line;           /* 0: none */
	enum trc_flame_kind kind;
};

/* The root of every tree: the whole profile. */
#define TRC_FLAME_ROOT 0u
/* Nodes beyond this many are not made: their weight goes to their parent (see trc_flame_node). */
#define TRC_FLAME_MAX_NODES (1u << 20)

struct trc_flame;

/*
 * An empty tree whose weights are counted in unit ("ns", "samples", "bytes": how the file
 * shows a value; "ns" values are shown as times). The caller frees it with trc_flame_free().
 * Pure; one thread.
 */
struct trc_flame *trc_flame_new(const char *unit);
void trc_flame_free(struct trc_flame *f);

/* The id of a frame (name, file, line and kind alike: the same id), added if new; copied. */
uint32_t trc_flame_frame(struct trc_flame *f, const struct trc_flame_frame *fr);
/* The id of a GROUP frame labelled label[0..len) (a process: "ruby PID"; a thread: its name). */
uint32_t trc_flame_group(struct trc_flame *f, const char *label, size_t len);
/*
 * The node for frame called from node parent (TRC_FLAME_ROOT for an outermost frame), made if
 * new. Past TRC_FLAME_MAX_NODES it is parent itself: the tree stops growing, deep paths end
 * where it stopped, and what they weigh stays in the profile (trc_flame_dropped counts them).
 */
uint32_t trc_flame_node(struct trc_flame *f, uint32_t parent, uint32_t frame);
/* Adds weight to node's own (self) weight. */
void trc_flame_weigh(struct trc_flame *f, uint32_t node, uint64_t weight);
/*
 * One stack, outermost frame first, with weight for its innermost frame: under the group
 * frames group[0..ngroup) (a process, then a thread: ngroup 0 merges every group), each made a
 * GROUP frame. For sources that have whole stacks (samples); a source that sees calls one by
 * one keeps its own node per call with trc_flame_node().
 */
void trc_flame_add(struct trc_flame *f, const char *const *group, size_t ngroup,
		   const struct trc_flame_frame *stack, size_t n, uint64_t weight);
/* Nodes not made for want of room (TRC_FLAME_MAX_NODES). */
uint64_t trc_flame_dropped(const struct trc_flame *f);
/* The whole weight added so far. */
uint64_t trc_flame_total(const struct trc_flame *f);

enum trc_flame_doc {
	TRC_FLAME_SVG,          /* an SVG document (FILE.svg) */
	TRC_FLAME_HTML,         /* an HTML page around the same SVG (FILE.html) */
};

struct trc_flame_opts {
	enum trc_flame_doc doc;
	const char *title;      /* the heading ("tracer -f: process 1234"); escaped when written */
	const char *subtitle;   /* a line under it (what was measured, how long), or NULL */
	/*
	 * Frames whose total is below this share of the whole (0.001: 0.1%) are merged: a
	 * parent's such children become one "(other)" frame, or, when even that is below it,
	 * part of the parent's own width. Bounds the file, and the browser's work.
	 */
	double min_share;
};

/*
 * Writes the tree as one self-contained document (inline script and style, no network, no
 * font but the browser's own): frames as boxes, wider as they weigh more, callers above
 * callees; hovering a frame shows its full name, file:line, value and share; a click zooms
 * into it; a search box highlights the frames whose name matches and says their share.
 * Every name and file from a target is escaped (escape.h, then XML), so no name can be
 * markup. Returns the frames written (merged ones aside).
 */
size_t trc_flame_write(const struct trc_flame *f, const struct trc_flame_opts *o,
		       struct trc_output *out);

/*
 * Appends p[0..n), bytes from a target, as XML text or attribute value: escaped (escape.h),
 * which leaves no control and no ill-formed UTF-8, then & < > " ' as entities and the two
 * code points XML forbids that UTF-8 allows (U+FFFE, U+FFFF) as text. Pure.
 */
void trc_flame_xml(struct trc_buf *b, const char *p, size_t n);

/*
 * The app's files, for trc_flame_classify(): absolute directory prefixes (the session's
 * --filter prefixes, else the target's working directory).
 */
struct trc_flame_scope {
	const char *const *prefixes;
	size_t nprefixes;
};

/*
 * A frame's kind from its file and name, for sources that do not know it: no file is a C
 * method (or, for the few that block, waiting: Kernel#sleep, IO#read, Thread#join...); a file
 * under a gems, vendor or site_ruby directory is a gem's; Ruby's own library (a lib/ruby/X.Y
 * directory) or <internal:...> is Ruby's; under a prefix of scope, the app's; else other. Pure.
 */
enum trc_flame_kind trc_flame_classify(const char *name, size_t name_len, const char *file,
				       size_t file_len, const struct trc_flame_scope *scope);

/* The kind's name in the legend ("app", "gems"...). */
const char *trc_flame_kind_name(enum trc_flame_kind k);

#endif
