/* export.h: trace exporters for other tools: Chrome trace events, speedscope, collapsed stacks, JSON lines, pprof, flame graphs. */
#ifndef TRC_EXPORT_H
#define TRC_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "output.h"
#include "sink.h"
#include "spec.h"

/*
 * --format, one list: X(NAME, name, exporter, document, profile). text is the call-tree
 * printer (trace.h); the others are exporters (exporter 1), each a struct trc_xp_format
 * trc_xp_<name> (export_format.h): a row without one does not link. document: what a file of
 * it holds when it is one document per file, which --append would break (NULL: lines, which
 * may be appended to). profile 1: --top profile writes its stacks so too (profile_export.c).
 */
#define TRC_FORMATS(X) \
	X(TEXT, text, 0, NULL, 0) \
	/* Trace Event Format JSON (Perfetto, chrome://tracing), streamed */ \
	X(CHROME, chrome, 1, "JSON document", 0) \
	/* speedscope's evented profiles, written at the end */ \
	X(SPEEDSCOPE, speedscope, 1, "JSON document", 1) \
	/* folded stacks weighted by self time, written at the end */ \
	X(COLLAPSED, collapsed, 1, NULL, 1) \
	/* one JSON object per event, streamed */ \
	X(JSONL, jsonl, 1, NULL, 0) \
	/* pprof's profile.proto, gzipped, written at the end */ \
	X(PPROF, pprof, 1, "profile", 1) \
	/* an interactive SVG or HTML flame graph, written at the end */ \
	X(FLAMEGRAPH, flamegraph, 1, "flame graph", 1)

enum trc_format {
#define TRC_X(NAME, name, exporter, document, profile) TRC_FORMAT_##NAME,
	TRC_FORMATS(TRC_X)
#undef TRC_X
	TRC_FORMAT_COUNT
};

/*
 * --split: what the stack formats (collapsed, flamegraph) keep apart. By default the same
 * stack in every thread of every process is one.
 */
enum trc_split {
	TRC_SPLIT_NONE = 0,
	TRC_SPLIT_PROCESS = 1,          /* a tree per process: "ruby PID" at the top */
	TRC_SPLIT_THREAD = 2,           /* per thread: its name at the top (under its process's,
					 * with several targets) */
};
/* Whether a flame graph written to path is an HTML page (FILE.html, FILE.htm, and those
 * compressed), else an SVG document. */
bool trc_format_html(const char *path);
/* Parses a --split name ("process", "thread"). Returns 0, or -1 if there is none. */
int trc_split_parse(const char *name, enum trc_split *s);
/* The default --min-share, in percent: frames lighter than that are merged. */
#define TRC_FLAME_MIN_SHARE 0.1

/* Parses a --format name. Returns 0, or -1 if there is no such format. */
int trc_format_parse(const char *name, enum trc_format *f);
const char *trc_format_name(enum trc_format f);
/* What formats that make one document per file make ("JSON document", "profile"), which
 * --append would break; NULL for the others. */
const char *trc_format_document(enum trc_format f);
/* The formats' names for a message, "text, chrome, ... or flamegraph"; profile: only those
 * --top profile writes. */
const char *trc_format_list(bool profile);

struct trc_export_opts {
	enum trc_format format;         /* any but TRC_FORMAT_TEXT */
	const char *tool;               /* "tracer VERSION", recorded in the file where it has a place */
	const struct trc_spec *specs;   /* the -m specs, in order: they name the expressions */
	size_t nspecs;
	bool label_pids;                /* several targets: say which process where it matters */
	enum trc_split split;           /* collapsed, flamegraph */
	double min_share;               /* flamegraph: a share (0.001: 0.1%) under which frames merge */
	bool html;                      /* flamegraph: an HTML page, else an SVG document */
	const char *title;              /* flamegraph: what the run was, for its heading */
	/* flamegraph: the app's files (--filter's absolute prefixes; none: each target's working
	 * directory, trc_export_app_dir()), to tell its frames from the others */
	const char *const *prefixes;
	size_t nprefixes;
	/* where a format that keeps more than memory should puts it (speedscope): a directory on
	 * the output's file system; NULL: $TMPDIR, else /tmp */
	const char *scratch_dir;
};

struct trc_export;

/*
 * One exporter for the whole run, shared by every target's session; writes to out (the
 * caller keeps out, opts->tool and opts->specs alive longer). Streaming formats write their
 * header now. Main thread, as are all the functions below.
 */
struct trc_export *trc_export_new(struct trc_output *out, const struct trc_export_opts *opts);
/*
 * A sink for target pid's events (see sink.h). Closing it ends the target's part: calls still
 * open are closed at the last timestamp seen from that target. The exporter owns what the
 * sink points to: it stays valid until trc_export_free().
 */
struct trc_sink trc_export_sink(struct trc_export *e, pid_t pid);
/* A directory whose files are the app's (a target's working directory), when no prefix was
 * given; copied. For the frames' kinds (flamegraph). */
void trc_export_app_dir(struct trc_export *e, const char *dir);
/* Ends every target's part still open, then writes the end of the file (or all of it). */
void trc_export_finish(struct trc_export *e);
/* Why the file could not be made whole (a scratch file that failed), or NULL: then the run
 * fails, and the file is not left looking whole. */
const char *trc_export_failed(const struct trc_export *e);
void trc_export_free(struct trc_export *e);

#endif
