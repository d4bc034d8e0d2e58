/* cli.c: tracer's command line: the option table, usage, the checks before a run, exit codes; the only file that exits. */
#include <errno.h>
#include <limits.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <unistd.h>
#include <sys/stat.h>

#include "compress.h"
#include "http.h"
#include "metrics.h"
#include "inject.h"
#include "opt.h"
#include "proc.h"
#include "profile_export.h"
#include "ps.h"
#include "run.h"
#include "session.h"
#include "spec.h"
#include "top.h"
#include "trace.h"
#include "tracer_protocol.h"
#include "xmalloc.h"

#define DEFAULT_SLOW_MS 250
#define DEFAULT_PREFIX 2
#define DEFAULT_TIMEOUT 5.0
#define HELP_COLUMN 28
#define DEFAULT_ROWS 25
#define DEFAULT_INTERVAL 1.0
#define DEFAULT_HZ 100
#define DEFAULT_CAP_PPM 10000   /* 1% */
#define MIN_INTERVAL (TRC_TOP_INTERVAL_MIN_MS / 1000.0)
#define MAX_INTERVAL (TRC_TOP_INTERVAL_MAX_MS / 1000.0)
#define MAX_FRAMES 1000000
#define MAX_PREFIX 100
/* TRC_TRACE_MAX_INDENT, for the help text. */
#define STRINGIFY(x) #x
#define DECIMAL(x) STRINGIFY(x)
#define MAX_INDENT_TEXT DECIMAL(TRC_TRACE_MAX_INDENT)
/* What --all left behind after detach, from make bench (README, Performance). */
#define TRC_RESIDUE_TEXT "1.6x to 3.4x on Ruby 3.1 to 3.4 without YJIT, up to 18x on Ruby 3.4 with YJIT"

/*
 * The command line, as given: what the run reads (the options write its fields directly), and
 * what only the checks before it need.
 */
struct opts {
	struct trc_run_opts run;
	const char **specs;     /* -m's, and each line of the -c files */
	char **spec_origins;    /* per spec: NULL for -m, "FILE:LINE" (owned, as is its text) for -c */
	size_t nspecs;
	bool slow_methods;      /* --slow-methods given */
	bool split_given, min_share_given;
	bool help, version, yes;
	const char *sample_option;      /* --sample or --sample-time, whichever was given */
	const char *ps_user;    /* --user: whose processes --ps looks at, and may load the agent into */
};

/* What an option makes tracer do (struct trc_opt's mode): an enum trc_mode, plus one. */
#define DOES(mode) ((int)(mode) + 1)

/* The option groups the checks ask about (struct trc_opt's group). */
enum {
	G_TOP = 1,      /* only --top takes them */
	G_TEXT,         /* only --format text takes them */
	G_SCOPE,        /* -f, -s without -m, --top: which calls and files count */
	G_FORMAT,       /* --format */
	G_WALL,         /* -s: slow by the wall clock */
	G_CPU,          /* --slowcpu: slow by the thread's CPU time */
	G_PROFILE,      /* only --top profile takes them */
};

static void __attribute__((noreturn, format(printf, 2, 3)))
die(enum trc_exit code, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("tracer: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (code == TRC_EXIT_USAGE)
		fputs("Try 'tracer --help' for more information.\n", stderr);
	exit(code);
}

/* ---- the options whose values need more than the parser checks ---- */

static void
add_pid(void *opts, const char *v)
{
	struct trc_run_opts *r = &((struct opts *)opts)->run;
	char *end;
	unsigned long n;
	pid_t pid;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < 1 || n > INT_MAX)
		die(TRC_EXIT_USAGE, "invalid pid '%s': expected a whole number from 1 to %d", v, INT_MAX);
	pid = (pid_t)n;
	for (size_t i = 0; i < r->npids; i++)
		if (r->pids[i] == pid)
			die(TRC_EXIT_USAGE, "pid %d given twice", (int)pid);
	r->pids = xreallocarray(r->pids, r->npids + 1, sizeof(*r->pids));
	r->pids[r->npids++] = pid;
}

/* origin: NULL for -m; else "FILE:LINE", and both it and v are the spec's own. */
static void
add_spec(struct opts *o, const char *v, char *origin)
{
	o->specs = xreallocarray(o->specs, o->nspecs + 1, sizeof(*o->specs));
	o->spec_origins = xreallocarray(o->spec_origins, o->nspecs + 1, sizeof(*o->spec_origins));
	o->spec_origins[o->nspecs] = origin;
	o->specs[o->nspecs++] = v;
}

static void
add_method(void *opts, const char *v)
{
	add_spec(opts, v, NULL);
}

/* rbtrace's --slow-methods: -s (unless --slowcpu says otherwise) over these methods only. */
static void
add_slow_method(void *opts, const char *v)
{
	add_spec(opts, v, NULL);
	((struct opts *)opts)->slow_methods = true;
}

/*
 * The bundled tracers, relative to the directory of tracer's binary: the same in the source
 * tree (client/tracer, share/tracer/tracers) and where make install puts them (PREFIX/bin,
 * PREFIX/share/tracer/tracers).
 */
#define TRACER_DIR "/../share/tracer/tracers"

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of the bundled tracers, sorted, "a, b, c" (the caller frees), or "none". */
static char *
bundled_tracers(void)
{
	char *path = trc_proc_self_path(TRACER_DIR), **names = NULL;
	DIR *dir = path != NULL ? opendir(path) : NULL;
	size_t n = 0;
	struct trc_buf list;
	struct dirent *d;

	while (dir != NULL && (d = readdir(dir)) != NULL) {
		size_t len = strlen(d->d_name);

		if (len <= 7 || strcmp(d->d_name + len - 7, ".tracer") != 0)
			continue;
		names = xreallocarray(names, n + 1, sizeof(*names));
		names[n++] = xstrndup(d->d_name, len - 7);
	}
	if (dir != NULL)
		closedir(dir);
	free(path);
	if (n > 1)
		qsort(names, n, sizeof(*names), compare_names);
	trc_buf_init(&list);
	for (size_t i = 0; i < n; i++) {
		trc_buf_addf(&list, "%s%s", i > 0 ? ", " : "", names[i]);
		free(names[i]);
	}
	free(names);
	trc_buf_adds(&list, n == 0 ? "none" : "");
	trc_buf_addc(&list, '\0');
	return list.data;
}

static bool
is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* -c v: the file v, or else the bundled tracer named v. Returns a path the caller frees. */
static char *
find_tracer(const char *v)
{
	char *dir, *path, *names;

	if (is_file(v))
		return xstrdup(v);
	if (strchr(v, '/') == NULL && (dir = trc_proc_self_path(TRACER_DIR)) != NULL) {
		path = xasprintf("%s/%s.tracer", dir, v);
		free(dir);
		if (is_file(path))
			return path;
		free(path);
	}
	names = bundled_tracers();
	fprintf(stderr, "tracer: no tracer file '%s', and no bundled tracer of that name (bundled: %s)\n",
		v, names);
	free(names);
	fputs("Try 'tracer --help' for more information.\n", stderr);
	exit(TRC_EXIT_USAGE);
}

#define TRACER_FILE_MAX (1u << 20)

/* The whole file at path, NUL-terminated, in *len bytes (the caller frees it). */
static char *
read_tracer(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *text = xmalloc(TRACER_FILE_MAX + 1);

	if (f == NULL)
		die(TRC_EXIT_USAGE, "cannot read tracer file '%s': %s", path, strerror(errno));
	*len = fread(text, 1, TRACER_FILE_MAX + 1, f);
	if (ferror(f))
		die(TRC_EXIT_USAGE, "cannot read tracer file '%s': %s", path, strerror(errno));
	fclose(f);
	if (*len > TRACER_FILE_MAX)
		die(TRC_EXIT_USAGE, "tracer file '%s' is over 1 MiB", path);
	text[*len] = '\0';
	return text;
}

/* -c NAME|FILE: every spec the tracer file lists, in its order, after those given before. */
static void
add_config(void *opts, const char *v)
{
	struct opts *o = opts;
	char *path = find_tracer(v);
	size_t len, pos = 0, n, before = o->nspecs;
	char *text = read_tracer(path, &len);
	unsigned line = 0;
	const char *p;

	while (trc_spec_next_line(text, len, &pos, &line, &p, &n))
		add_spec(o, xstrndup(p, n), xasprintf("%s:%u", path, line));
	if (o->nspecs == before)
		die(TRC_EXIT_USAGE, "tracer file '%s' lists no method", path);
	free(text);
	free(path);
}

static void
set_format(void *opts, const char *v)
{
	struct opts *o = opts;

	if (trc_format_parse(v, &o->run.format) < 0)
		die(TRC_EXIT_USAGE, "invalid --format '%s': expected %s", v, trc_format_list(false));
}

static void
set_split(void *opts, const char *v)
{
	struct opts *o = opts;

	if (trc_split_parse(v, &o->run.split) < 0)
		die(TRC_EXIT_USAGE, "invalid --split '%s': expected process or thread", v);
	o->split_given = true;
}

/* Whether v is a number from 0 to 100, into *pct. */
static bool
percent(const char *v, double *pct)
{
	char *end;

	errno = 0;
	*pct = strtod(v, &end);
	return end != v && *end == '\0' && errno == 0 && *pct >= 0 && *pct <= 100;
}

/* --min-share PERCENT: a number from 0 to 100, a fraction kept. */
static void
set_min_share(void *opts, const char *v)
{
	struct opts *o = opts;
	double pct;

	if (!percent(v, &pct))
		die(TRC_EXIT_USAGE, "invalid --min-share '%s': expected a percentage from 0 to 100 "
		    "(0.1: frames under 0.1%% of the whole are merged)", v);
	o->run.min_share = pct / 100;
	o->min_share_given = true;
}

static void
set_top(void *opts, const char *v)
{
	struct opts *o = opts;

	char modes[256];

	if (trc_top_mode_parse(v, &o->run.top_mode) < 0) {
		trc_top_mode_list(modes, sizeof(modes), 0);
		die(TRC_EXIT_USAGE, "invalid --top mode '%s': expected %s", v, modes);
	}
}

/* --profile [cpu|wall]: --top profile, by CPU time (the default) or by wall-clock time. */
static void
set_profile(void *opts, const char *v)
{
	struct opts *o = opts;

	o->run.top_mode = TRC_TOP_PROFILE;
	if (v == NULL || strcmp(v, "cpu") == 0)
		return;
	if (strcmp(v, "wall") != 0)
		die(TRC_EXIT_USAGE, "invalid --profile clock '%s': expected cpu or wall", v);
	o->run.wall = true;
}

/* --cap PCT: the most of the wall time the profiler's own work may take, 0 for no cap. */
static void
set_cap(void *opts, const char *v)
{
	struct opts *o = opts;
	double pct;

	if (!percent(v, &pct))
		die(TRC_EXIT_USAGE, "invalid --cap '%s': expected a percentage from 0 (no cap) to 100", v);
	o->run.cap_ppm = (unsigned)(pct * 10000 + 0.5);
}

/* --metrics ADDR: checked here (a usage error), bound by the run (an error of the run). */
static void
set_metrics(void *opts, const char *v)
{
	struct trc_run_opts *r = &((struct opts *)opts)->run;
	char why[256];

	if (trc_http_parse_addr(v, &r->metrics_addr, &r->metrics_addrlen, why, sizeof(why)) < 0)
		die(TRC_EXIT_USAGE, "invalid --metrics address '%s': %s", v, why);
	r->metrics = v;
}

/* --sample N (by_time false, N from 1) or --sample-time N (from 2): one or the other. */
static void
set_sampling(struct opts *o, const char *v, bool by_time)
{
	const char *name = by_time ? "--sample-time" : "--sample";
	char *end;
	unsigned long n;

	if (o->sample_option != NULL && o->run.sample_by_time != by_time)
		die(TRC_EXIT_USAGE, "--sample and --sample-time exclude each other");
	errno = 0;
	n = strtoul(v, &end, 10);
	if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < (by_time ? 2 : 1) ||
	    n > TRC_TOP_MAX_SAMPLE)
		die(TRC_EXIT_USAGE, "invalid %s '%s': expected a whole number from %d to %d", name, v,
		    by_time ? 2 : 1, TRC_TOP_MAX_SAMPLE);
	o->run.sample = (unsigned)n;
	o->run.sample_by_time = by_time;
	o->sample_option = name;
}

static void
set_sample(void *opts, const char *v)
{
	set_sampling(opts, v, false);
}

static void
set_sample_time(void *opts, const char *v)
{
	set_sampling(opts, v, true);
}

/*
 * The agents match absolute paths (a script run by a relative path included): a relative
 * PREFIX is taken from tracer's working directory, as --heapdump FILE is. Returns a copy the
 * caller frees.
 */
static char *
absolute_prefix(const char *v)
{
	char cwd[PATH_MAX];

	if (v[0] == '/')
		return xstrdup(v);
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		die(TRC_EXIT_ERROR, "cannot find the current directory: %s", strerror(errno));
	while (v[0] == '.' && v[1] == '/')
		v += 2;
	if (strcmp(v, ".") == 0 || v[0] == '\0')
		v = "";
	return xasprintf("%s%s%s", cwd, strcmp(cwd, "/") == 0 ? "" : "/", v);
}

static void
add_filter(void *opts, const char *v)
{
	struct trc_opt_list *l = &((struct opts *)opts)->run.filters;

	if (*v == '\0')
		die(TRC_EXIT_USAGE, "--filter needs a non-empty PREFIX");
	if (l->n == TRC_MAX_PREFIXES)
		die(TRC_EXIT_USAGE, "--filter: at most %d prefixes", TRC_MAX_PREFIXES);
	l->v = xreallocarray(l->v, l->n + 2, sizeof(*l->v));
	l->v[l->n++] = absolute_prefix(v);
	l->v[l->n] = NULL;
}

/* --devmode: rbtrace looks methods up again on each event, for apps that reload code. */
static void
rbtrace_only(void *opts, const char *v)
{
	(void)opts, (void)v;
	fputs("tracer: --devmode is rbtrace's: tracer always traces the methods defined or redefined "
	      "while it is attached (ignored)\n", stderr);
}

static void
set_no_inject(void *opts, const char *v)
{
	(void)opts, (void)v;
	trc_inject_set_enabled(false);
}

#define FIELD(f, type) TRC_OPT_FIELD(struct opts, f, type)

/* Every option: its names, its value and where it goes, its help line. Order: the help's. */
static const struct trc_opt options[] = {
	{ .name = "pid", .short_name = 'p', .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_LIST,
	  .cb = add_pid, .metavar = "PID...", .help = "processes to attach to (-p A B, -p A -p B)" },
	{ .name = "ps", .type = TRC_OPT_STRING, .arg = TRC_ARG_REQUIRED, .flags = TRC_OPT_REGEX,
	  .off = FIELD(run.ps_regex, const char *), .metavar = "REGEX",
	  .help = "attach to your processes matching REGEX (below)" },
	{ .name = "user", .type = TRC_OPT_STRING, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(ps_user, const char *), .metavar = "USER",
	  .help = "--ps: USER's processes instead (as root: the agent loaded into them)" },
	{ .name = "exec", .short_name = 'x', .type = TRC_OPT_LIST, .arg = TRC_ARG_REST,
	  .off = FIELD(run.exec, struct trc_opt_list), .metavar = "CMD [ARG...]",
	  .help = "start CMD, trace it from its first line (below); the rest is CMD's" },
	{ .name = "wait", .type = TRC_OPT_SECS, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.wait, double), .metavar = "SECS",
	  .help = "--exec: attach SECS after CMD starts, not at its first line" },
	{ .name = "methods", .short_name = 'm', .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_LIST,
	  .cb = add_method, .mode = DOES(TRC_MODE_TRACE), .metavar = "SPEC...",
	  .help = "trace calls of these methods (see below)" },
	{ .name = "config", .short_name = 'c', .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_LIST,
	  .cb = add_config, .mode = DOES(TRC_MODE_TRACE), .metavar = "NAME|FILE...",
	  .help = "trace the methods a tracer file lists (below)" },
	{ .name = "firehose", .short_name = 'f', .type = TRC_OPT_BOOL,
	  .off = FIELD(run.firehose, bool), .mode = DOES(TRC_MODE_TRACE),
	  .help = "trace every method call" },
	{ .name = "slow", .short_name = 's', .type = TRC_OPT_UINT, .arg = TRC_ARG_OPTIONAL,
	  .off = FIELD(run.slow_ms, unsigned), .max = TRC_SLOW_MS_MAX, .dflt = DEFAULT_SLOW_MS,
	  .what = "--slow threshold", .mode = DOES(TRC_MODE_TRACE), .group = G_WALL,
	  .metavar = "[MS]", .help = "show calls slower than MS milliseconds (250)" },
	{ .name = "slowcpu", .type = TRC_OPT_UINT, .arg = TRC_ARG_OPTIONAL,
	  .off = FIELD(run.slow_ms, unsigned), .max = TRC_SLOW_MS_MAX, .dflt = DEFAULT_SLOW_MS,
	  .what = "--slowcpu threshold", .mode = DOES(TRC_MODE_TRACE), .group = G_CPU,
	  .metavar = "[MS]", .help = "show calls that used more than MS milliseconds of CPU (250)" },
	{ .name = "slow-methods", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_LIST,
	  .cb = add_slow_method, .mode = DOES(TRC_MODE_TRACE), .metavar = "M...",
	  .help = "-s (or --slowcpu) for these methods only: -s -m M..." },
	{ .name = "start-time", .short_name = 't', .type = TRC_OPT_BOOL,
	  .off = FIELD(run.start_time, bool), .group = G_TEXT,
	  .help = "show the wall-clock start time of each call" },
	{ .name = "no-duration", .short_name = 'n', .type = TRC_OPT_BOOL,
	  .off = FIELD(run.no_duration, bool), .group = G_TEXT,
	  .help = "hide the time spent in each call" },
	{ .name = "stats", .type = TRC_OPT_BOOL, .off = FIELD(run.stats, bool),
	  .help = "at detach, print the events the agent sent, received and lost" },
	{ .name = "gc", .type = TRC_OPT_BOOL, .off = FIELD(run.gc, bool),
	  .help = "tracing, --top: also show garbage collections and their pauses" },
	{ .name = "prefix", .short_name = 'r', .type = TRC_OPT_UINT, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.prefix, unsigned), .max = MAX_PREFIX, .group = G_TEXT, .metavar = "N",
	  .help = "indent nested calls by N spaces (2), " MAX_INDENT_TEXT " levels at most" },
	{ .name = "output", .short_name = 'o', .type = TRC_OPT_STRING, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.output, const char *), .metavar = "FILE",
	  .help = "write the trace to FILE instead of stdout; FILE.gz, FILE.zst: compressed" },
	{ .name = "append", .short_name = 'a', .type = TRC_OPT_BOOL, .off = FIELD(run.append, bool),
	  .help = "append to the --output FILE (.gz, .zst too)" },
	{ .name = "format", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_REQUIRED, .cb = set_format,
	  .group = G_FORMAT, .metavar = "FORMAT",
	  .help = "write the trace as FORMAT (text; see below)" },
	{ .name = "split", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_REQUIRED, .cb = set_split,
	  .metavar = "WHAT",
	  .help = "--format collapsed, flamegraph: keep each process or thread apart" },
	{ .name = "min-share", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_REQUIRED,
	  .cb = set_min_share, .metavar = "PERCENT",
	  .help = "--format flamegraph: merge frames under PERCENT of the whole (0.1)" },
	{ .name = "eval", .short_name = 'e', .type = TRC_OPT_STRING, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.eval, const char *), .mode = DOES(TRC_MODE_EVAL), .metavar = "CODE",
	  .help = "evaluate Ruby CODE in the process, print the result" },
	{ .name = "interactive", .short_name = 'i', .type = TRC_OPT_MODE,
	  .mode = DOES(TRC_MODE_INTERACTIVE),
	  .help = "a Ruby prompt whose lines run in the process (below)" },
	{ .name = "heapdump", .type = TRC_OPT_STRING, .arg = TRC_ARG_OPTIONAL,
	  .off = FIELD(run.heapdump_path, const char *), .mode = DOES(TRC_MODE_HEAPDUMP),
	  .metavar = "[FILE]",
	  .help = "dump the heap to FILE ($TMPDIR/tracer-heap-PID-DATE-TIME.json)" },
	{ .name = "shapesdump", .type = TRC_OPT_STRING, .arg = TRC_ARG_OPTIONAL,
	  .off = FIELD(run.shapesdump_path, const char *), .mode = DOES(TRC_MODE_SHAPESDUMP),
	  .metavar = "[FILE]", .help = "dump the object shapes to FILE (Ruby 3.2+)" },
	{ .name = "memory", .type = TRC_OPT_MODE, .mode = DOES(TRC_MODE_MEMORY),
	  .help = "report RSS, mappings, GC, objects by type and class" },
	{ .name = "backtraces", .short_name = 'b', .type = TRC_OPT_UINT, .arg = TRC_ARG_OPTIONAL,
	  .off = FIELD(run.frames, unsigned), .min = 1, .max = MAX_FRAMES,
	  .what = "--backtraces frames", .mode = DOES(TRC_MODE_BACKTRACES), .metavar = "[N]",
	  .help = "print every thread's backtrace (N frames of each)" },
	{ .name = "backtrace", .type = TRC_OPT_UINT, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.frames, unsigned), .min = 1, .max = MAX_FRAMES,
	  .what = "--backtrace frames", .mode = DOES(TRC_MODE_BACKTRACE), .metavar = "N",
	  .help = "print the main thread's N innermost frames" },
	{ .name = "fork", .type = TRC_OPT_MODE, .mode = DOES(TRC_MODE_FORK),
	  .help = "make a stopped copy of the process, for gdb (below)" },
	{ .name = "top", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_REQUIRED, .cb = set_top,
	  .mode = DOES(TRC_MODE_TOP), .metavar = "MODE",
	  .help = "live table of calls, time, allocations... (below)" },
	{ .name = "profile", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_OPTIONAL, .cb = set_profile,
	  .mode = DOES(TRC_MODE_TOP), .metavar = "[cpu|wall]",
	  .help = "sample every thread's stack: --top profile, by CPU (or wall) time" },
	{ .name = "hz", .type = TRC_OPT_UINT, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.hz, unsigned), .min = 1, .max = TRC_PROFILE_MAX_HZ, .group = G_PROFILE,
	  .metavar = "N", .help = "--top profile: N samples a second of each thread (100)" },
	{ .name = "wall", .type = TRC_OPT_BOOL, .off = FIELD(run.wall, bool), .group = G_PROFILE,
	  .help = "--top profile: by wall-clock time, every thread, running or not" },
	{ .name = "cap", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_REQUIRED, .cb = set_cap,
	  .group = G_PROFILE, .metavar = "PCT",
	  .help = "--top profile: keep the profiler's own time under PCT% (1; 0: none)" },
	{ .name = "rows", .type = TRC_OPT_UINT, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.rows, unsigned), .min = 1, .max = TRC_TOP_MAX_ENTRIES, .group = G_TOP,
	  .metavar = "N", .help = "--top: show the N first rows (25)" },
	{ .name = "sample", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_REQUIRED, .cb = set_sample,
	  .group = G_TOP, .metavar = "N",
	  .help = "--top of allocations: look up 1 in N, counted as N (below)" },
	{ .name = "sample-time", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_REQUIRED,
	  .cb = set_sample_time, .group = G_TOP, .metavar = "N",
	  .help = "--top of allocations: count them 1/N of the time, scaled (below)" },
	{ .name = "filter", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_REQUIRED, .cb = add_filter,
	  .group = G_SCOPE, .metavar = "PREFIX",
	  .help = "-f, -s, --top: the app is the files under PREFIX; repeatable" },
	{ .name = "all", .type = TRC_OPT_BOOL, .off = FIELD(run.all, bool), .group = G_SCOPE,
	  .help = "-f, -s, --top: every call and file, not only the app's (see below)" },
	{ .name = "ignore", .type = TRC_OPT_LIST, .arg = TRC_ARG_REQUIRED, .flags = TRC_OPT_REGEX,
	  .off = FIELD(run.ignores, struct trc_opt_list), .max = TRC_MAX_IGNORES, .group = G_SCOPE,
	  .metavar = "REGEX",
	  .help = "-f, -s, --top: leave out methods whose Class#method matches; repeatable" },
	{ .name = "yes", .short_name = 'y', .type = TRC_OPT_BOOL, .off = FIELD(yes, bool),
	  .help = "do not ask before --all (see below)" },
	{ .name = "interval", .type = TRC_OPT_SECS, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.interval, double), .min = MIN_INTERVAL, .max = MAX_INTERVAL,
	  .group = G_TOP, .metavar = "SECS", .help = "--top: refresh every SECS seconds (1)" },
	{ .name = "reset", .type = TRC_OPT_SECS, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.reset, double), .group = G_TOP, .metavar = "SECS",
	  .help = "--top: clear the table every SECS seconds (300)" },
	{ .name = "json", .type = TRC_OPT_BOOL, .off = FIELD(run.json, bool), .group = G_TOP,
	  .help = "--top: print each table as one line of JSON" },
	{ .name = "metrics", .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_REQUIRED, .cb = set_metrics,
	  .group = G_TOP, .metavar = "ADDR",
	  .help = "--top: serve the table to Prometheus on ADDR (below)" },
	{ .name = "label", .type = TRC_OPT_LIST, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.labels, struct trc_opt_list), .max = 16, .group = G_TOP,
	  .metavar = "KEY=VALUE",
	  .help = "--metrics: one more label on every series (app=NAME names the app); repeatable" },
	{ .name = "duration", .type = TRC_OPT_SECS, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.duration, double), .metavar = "SECS",
	  .help = "detach after SECS seconds (may be fractional)" },
	{ .name = "timeout", .type = TRC_OPT_SECS, .arg = TRC_ARG_REQUIRED,
	  .off = FIELD(run.timeout, double), .metavar = "SECS",
	  .help = "give up when the agent has not answered in SECS (5)" },
	{ .name = "no-inject", .type = TRC_OPT_CALLBACK, .cb = set_no_inject,
	  .help = "never load the agent into a process that did not load it itself" },
	{ .name = "help", .short_name = 'h', .type = TRC_OPT_BOOL, .off = FIELD(help, bool),
	  .help = "show this help and exit" },
	{ .name = "version", .short_name = 'v', .type = TRC_OPT_BOOL, .off = FIELD(version, bool),
	  .help = "show the version and exit" },
	/* rbtrace's spellings that mean nothing here: a note, no help line. */
	{ .name = "devmode", .type = TRC_OPT_CALLBACK, .cb = rbtrace_only },
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

static const char usage_text[] =
	"Usage: tracer (-p PID... | --ps REGEX) (-m SPEC... | -c NAME... | -f |\n"
	"              -s [MS] | --top MODE | -e CODE | -i | --heapdump [FILE] |\n"
	"              --memory | --shapesdump [FILE] | --backtraces [N] |\n"
	"              --backtrace N | --fork) [options]\n"
	"       tracer (-m SPEC... | -c NAME... | -f | -s [MS] | --top MODE) [options]\n"
	"              -x CMD [ARG...]\n"
	"\n"
	"Traces method calls in running Ruby processes that loaded tracer_agent, shows\n"
	"live tables of what they do, or evaluates code in them; or starts a Ruby\n"
	"program and traces it from its first line.\n"
	"\n"
	"Options:\n";

static const char spec_text[] =
	"\n"
	"Method specs (-m):\n"
	"  Class#method        an instance method      Class.method   a singleton method\n"
	"  Mod::Class#method   a nested class          method         with any receiver\n"
	"  Class#              all instance methods    Class.         all singleton methods\n"
	"  Kernel#sleep(self, __source__, @ivar, any_ruby_expr)\n"
	"                      also print these values at each call (a C method's\n"
	"                      arguments, which have no names, are args or arg0...)\n"
	"\n"
	"Tracer files (-c NAME|FILE): a FILE lists method specs, one per line, as -m\n"
	"takes them; blank lines and lines starting with # are skipped. A NAME that is\n"
	"no file is a bundled tracer:\n"
	"  activerecord  every SQL statement ActiveRecord runs: its text, bound values\n"
	"                and duration\n"
	"  http          Net::HTTP requests: method, host, port and path\n"
	"  io            file, pipe and socket reads and writes, IO.select\n"
	"  sleep         sleeps: how long they asked for, and where they are\n"
	"  threads       mutex waits, Thread#join and #value, Queue#pop,\n"
	"                ConditionVariable#wait\n"
	"-c goes with -m and other -c; a class a tracer names that the app never\n"
	"loads is no error, and is traced if it does.\n"
	"\n"
	"--exec CMD [ARG...] (-x) starts CMD (found in PATH) with the agent preloaded\n"
	"(RUBYLIB gains tracer's lib, from $TRACER_AGENT_LIB, beside tracer or in\n"
	"make install's PREFIX/lib/tracer, else an installed tracer_agent gem;\n"
	"RUBYOPT gains -rtracer_agent) and traces it from\n"
	"its first line: the agent connects as it loads, and the program starts once\n"
	"tracing has. Everything after CMD is CMD's. What CMD starts is traced too:\n"
	"a program it execs (bundle exec), its forks (Puma's workers) and the Ruby\n"
	"programs it spawns (rake test's runner), their lines starting with [PID].\n"
	"tracer ends when CMD does, with its exit status (128+N if signal N killed\n"
	"it; 127: no such command, 126: not runnable), and detaches from what CMD\n"
	"left running. SIGTERM, SIGHUP and a SIGINT sent to tracer alone are passed\n"
	"on to CMD; Ctrl-C reaches CMD from the terminal, and a second one detaches.\n"
	"--duration stops tracing, not CMD. --wait SECS attaches after SECS instead,\n"
	"as -p does, to CMD only. tracer's own options go before -x: one after it\n"
	"is CMD's, which tracer says.\n"
	"\n"
	"Trace formats (--format, for -m, -f and -s):\n"
	"  text        the call tree, as it happens (the default); a call nested more\n"
	"              than " MAX_INDENT_TEXT " deep starts with [depth N] instead of its indent\n"
	"  chrome      Trace Event Format JSON for Perfetto and chrome://tracing\n"
	"  speedscope  speedscope's JSON, one profile per thread (written at the end)\n"
	"  collapsed   folded stacks weighted by self time in nanoseconds, for\n"
	"              flamegraph.pl, inferno or speedscope (written at the end)\n"
	"  jsonl       one JSON object per call, return, raise or slow call\n"
	"  pprof       a gzipped pprof profile (profile.proto) for pprof, Pyroscope or\n"
	"              speedscope: each call path a sample of its calls and self wall\n"
	"              time (written at the end; needs -o FILE). Also for --top MODE:\n"
	"              the whole session's table, one sample per row\n"
	"  flamegraph  a flame graph to open in a browser: -o FILE.svg, or FILE.html\n"
	"              for a page; self wall time per call path (written at the end).\n"
	"              Also for --top time: its calls' paths, counted in the process\n"
	"--top profile writes its sampled stacks as collapsed, speedscope, pprof or\n"
	"flamegraph (-o FILE, at the end): by CPU (or --wall) nanoseconds.\n"
	"collapsed and flamegraph merge the same stack in every thread and process;\n"
	"--split process or --split thread keeps them apart.\n"
	"\n"
	"What -f, -s without -m, and --top calls and time see: the app's own Ruby\n"
	"methods, those defined in files under each process's working directory (or\n"
	"--filter PREFIX), each traced through a wrapper that is gone once tracer\n"
	"detaches, leaving the process as fast as before. --all sees every call, Ruby\n"
	"and C, through the VM's hooks instead; part of them stays after detach, and\n"
	"the process runs slower until it restarts: tracer asks first (--yes does not).\n"
	"\n"
	"Live tables (--top MODE), counted inside the processes:\n";

/* After the table of --top's modes. */
static const char usage_text_after_modes[] =
	"Rows from several processes add up; a PIDS column says in how many each was\n"
	"seen. Only files under each process's working directory count, unless\n"
	"--filter (a relative PREFIX is taken from here) or --all says otherwise;\n"
	"--ignore also hides rows by the class part of their label (before '#' or\n"
	"'.'). A table with no row says why. The first rows come a quarter of a second\n"
	"after tracing starts: on a terminal the table fills the screen, and q quits;\n"
	"otherwise a table is printed then and every --interval after, or only once,\n"
	"at the end, with --duration (which also turns the default --reset off).\n"
	"Allocation tables count every allocation, which makes a program that does\n"
	"little else about 2x slower; --sample N looks up about one in N, counted as\n"
	"N, and says so in the header: its counts are estimates, at a fraction of the\n"
	"cost. --sample-time N turns the VM's allocation hook on only about 1/N of the\n"
	"time, in 1 ms windows at random, and scales each interval's counts by the VM's\n"
	"own count of allocations: estimates again, close for steady work, at almost\n"
	"no cost; a burst between two windows counts as the windows around it did.\n"
	"--metrics ADDR (127.0.0.1:19394, or :19394 for every address) prints no\n"
	"table: it serves GET /metrics to Prometheus for as long as it runs, counters\n"
	"that never reset, a series per process (labels pid, app: its directory, or\n"
	"--label app=NAME); the --rows busiest rows are series, the rest \"(other)\".\n"
	"\n"
	"Looking inside (-e, -i, --heapdump, --shapesdump, --memory, --backtraces,\n"
	"--backtrace, --fork) runs Ruby in the process, in a thread of its own.\n"
	"-i reads lines at a prompt (libedit; history in ~/.tracer_history) or from a\n"
	"pipe, and runs each in the process, attached once; the locals a line makes\n"
	"last until exit or Ctrl+D, which detach. A line left unfinished (a def, an\n"
	"open bracket) asks for the next one; Ctrl+C drops the line being typed, or\n"
	"interrupts the one running. --memory forks the process: the copy walks the\n"
	"heap, so the process stops only for the fork. --fork's copy stays stopped,\n"
	"for gdb -p, until kill -CONT, when it exits.\n"
	"\n"
	"--ps REGEX attaches to every process of your user, tracer itself aside, whose\n"
	"command line matches the extended REGEX and that loaded tracer_agent or runs\n"
	"Ruby (which gets the agent, as with -p; with --no-inject, not). As root, it\n"
	"also attaches to other users' processes that loaded tracer_agent themselves,\n"
	"and leaves those that did not alone, saying so: --user USER looks at USER's\n"
	"processes only, and loads the agent into theirs. Tracing and --top look again\n"
	"every second (--top: every --interval) and attach to the new ones, as workers\n"
	"are spawned and recycled; trace lines start with [PID].\n"
	"A process that exits, or that another client traces, is noted and the others\n"
	"go on; --duration counts from when all found are traced (or given up), and\n"
	"ends it for every one, those found later too.\n"
	"\n"
	"Exit codes:\n"
	"  0  success (for --top: quit with q or a signal, or --duration ran out)\n"
	"  1  runtime error: no such process (or none for --ps), attach failed or timed\n"
	"     out, the agent refused, the eval raised, protocol error, lost connection,\n"
	"     no -m SPEC matched a method in any process\n"
	"  2  usage error: bad option or method spec\n"
	"  3  the process exited while tracer was attached\n"
	"  4  permission denied: the process belongs to another user, or is in\n"
	"     namespaces (a container) that only root may enter\n"
	"With several pids, the highest code wins; a process --ps found that exits or\n"
	"is traced by another client counts only when no process could be traced.\n"
	"With --exec, CMD's exit status, or 1 when CMD succeeded but could not be traced.\n";

static void
usage(void)
{
	fputs(usage_text, stdout);
	trc_opt_help(stdout, options, NOPTIONS, HELP_COLUMN);
	fputs(spec_text, stdout);
	trc_top_mode_help(stdout, 79);
	fputs(usage_text_after_modes, stdout);
}

/* ---- the checks before a run: each says what is wrong with the command line ---- */

/*
 * --format pprof makes one gzipped profile, written at the end (pprof's own format), and is
 * the one format --top also writes: its whole session's table, instead of tables as it goes.
 */
static void
check_pprof(const struct opts *o)
{
	const struct trc_run_opts *r = &o->run;

	if (r->output == NULL)
		die(TRC_EXIT_USAGE, "--format pprof writes a gzipped profile: give -o FILE");
	if (trc_compression_of(r->output) == TRC_COMPRESS_ZSTD)
		die(TRC_EXIT_USAGE, "--format pprof is gzipped, as pprof reads it: not -o FILE.zst");
	if (r->mode == TRC_MODE_TOP && r->json)
		die(TRC_EXIT_USAGE, "--json goes with --top's tables: --format pprof writes one "
		    "profile at the end");
	if (r->mode == TRC_MODE_TOP && r->reset > 0)
		die(TRC_EXIT_USAGE, "--reset goes with --top's tables: --format pprof writes one "
		    "profile of the whole session");
}

/*
 * --format flamegraph: a document for a browser, written at the end; from a trace, or from
 * --top time, whose agent then counts its calls' paths.
 */
static void
check_flamegraph(const struct opts *o)
{
	const struct trc_run_opts *r = &o->run;

	if (r->mode == TRC_MODE_TOP && r->top_mode != TRC_TOP_TIME && r->top_mode != TRC_TOP_PROFILE)
		die(TRC_EXIT_USAGE, "--format flamegraph goes with tracing, --top time or --profile: "
		    "the other tables have no call paths");
	if (r->mode == TRC_MODE_TOP && r->json)
		die(TRC_EXIT_USAGE, "--json goes with --top's tables: --format flamegraph draws one "
		    "picture at the end");
	if (r->mode == TRC_MODE_TOP && r->reset > 0)
		die(TRC_EXIT_USAGE, "--reset goes with --top's tables: --format flamegraph draws the "
		    "whole session");
	if (r->mode == TRC_MODE_TOP && r->top_mode == TRC_TOP_TIME && r->split == TRC_SPLIT_THREAD)
		die(TRC_EXIT_USAGE, "--top time counts paths per process, not per thread: "
		    "--split process, or trace (-f) to keep threads apart");
}

static void
check_format(const struct opts *o, const struct trc_opt_state *st)
{
	const struct trc_opt *text = st->group_by[G_TEXT];
	const char *document = trc_format_document(o->run.format);
	bool profile = o->run.mode == TRC_MODE_TOP && o->run.top_mode == TRC_TOP_PROFILE;
	bool top_doc = o->run.mode == TRC_MODE_TOP && (o->run.format == TRC_FORMAT_PPROF ||
						       o->run.format == TRC_FORMAT_FLAMEGRAPH);
	bool stacks = o->run.format == TRC_FORMAT_COLLAPSED || o->run.format == TRC_FORMAT_FLAMEGRAPH;

	if (profile && st->group_by[G_FORMAT] != NULL && !trc_profile_format(o->run.format))
		die(TRC_EXIT_USAGE, "--top profile writes its stacks as --format %s at the end, or "
		    "shows a table", trc_format_list(true));
	if (profile && st->group_by[G_FORMAT] != NULL && o->run.output == NULL)
		die(TRC_EXIT_USAGE, "--top profile --format %s writes a file at the end: give -o FILE",
		    trc_format_name(o->run.format));
	if (st->group_by[G_FORMAT] != NULL && o->run.mode != TRC_MODE_TRACE && !top_doc && !profile)
		die(TRC_EXIT_USAGE, "--format goes with tracing (-m, -c, -f, -s); --top takes "
		    "--format pprof or flamegraph only (--top profile: %s)", trc_format_list(true));
	if (o->split_given && !stacks)
		die(TRC_EXIT_USAGE, "--split goes with --format collapsed or flamegraph");
	if (o->min_share_given && o->run.format != TRC_FORMAT_FLAMEGRAPH)
		die(TRC_EXIT_USAGE, "--min-share goes with --format flamegraph");
	if (o->run.format == TRC_FORMAT_FLAMEGRAPH)
		check_flamegraph(o);
	if (o->run.format != TRC_FORMAT_TEXT && text != NULL)
		die(TRC_EXIT_USAGE, "--%s goes with --format text", text->name);
	if (o->run.append && document != NULL)
		die(TRC_EXIT_USAGE, "--append would put a second %s after the first: "
		    "--format %s makes one %s per file", document, trc_format_name(o->run.format),
		    document);
	if (o->run.format == TRC_FORMAT_PPROF)
		check_pprof(o);
}


/* --label KEY=VALUE: names Prometheus takes, none of tracer's own, each once; with --metrics. */
static void
check_labels(const struct trc_run_opts *r)
{
	char why[128];

	if (r->labels.n > 0 && r->metrics == NULL)
		die(TRC_EXIT_USAGE, "--label goes with --metrics: it labels the series served");
	for (size_t i = 0; i < r->labels.n; i++) {
		size_t n = strcspn(r->labels.v[i], "=");

		if (trc_metrics_check_label(r->labels.v[i], why, sizeof(why)) < 0)
			die(TRC_EXIT_USAGE, "invalid --label '%s': %s", r->labels.v[i], why);
		for (size_t k = 0; k < i; k++)
			if (strncmp(r->labels.v[k], r->labels.v[i], n + 1) == 0)
				die(TRC_EXIT_USAGE, "--label %.*s given twice", (int)n, r->labels.v[i]);
	}
}

/* Options that only --top takes, or only -f, -s and --top: with what they go. */
static void
check_groups(const struct opts *o, const struct trc_opt_state *st)
{
	const struct trc_run_opts *r = &o->run;
	const struct trc_opt *top = st->group_by[G_TOP], *scope = st->group_by[G_SCOPE];
	bool tracing = r->mode == TRC_MODE_TRACE;

	if (top != NULL && r->mode != TRC_MODE_TOP)
		die(TRC_EXIT_USAGE, "--%s goes with --top", top->name);
	if (st->group_by[G_PROFILE] != NULL && (r->mode != TRC_MODE_TOP || r->top_mode != TRC_TOP_PROFILE))
		die(TRC_EXIT_USAGE, "--%s goes with --top profile (--profile)", st->group_by[G_PROFILE]->name);
	if (r->sample > 1 && !(trc_top_mode_flags(r->top_mode) & TRC_TOPM_ALLOC)) {
		char modes[256];

		trc_top_mode_list(modes, sizeof(modes), TRC_TOPM_ALLOC);
		die(TRC_EXIT_USAGE, "%s goes with --top %s: the other tables count every event",
		    o->sample_option, modes);
	}
	if (scope != NULL && r->mode != TRC_MODE_TOP && !r->firehose && !(r->slow && o->nspecs == 0))
		die(TRC_EXIT_USAGE, "--%s goes with -f, -s (without -m) or --top", scope->name);
	if (r->gc && !tracing && r->mode != TRC_MODE_TOP)
		die(TRC_EXIT_USAGE, "--gc goes with tracing (-m, -c, -f, -s) or --top");
	if (r->all && r->filters.n > 0)
		die(TRC_EXIT_USAGE, "--all counts every file: it excludes --filter");
	if (r->metrics != NULL && r->json)
		die(TRC_EXIT_USAGE, "--metrics serves the table instead of printing it: it excludes --json");
	if (r->metrics != NULL && r->reset > 0)
		die(TRC_EXIT_USAGE, "--metrics' counters only grow: it excludes --reset");
	if (r->metrics != NULL && r->format != TRC_FORMAT_TEXT)
		die(TRC_EXIT_USAGE, "--metrics serves the table instead of writing it: it excludes --format %s",
		    trc_format_name(r->format));
	check_labels(r);
}

/* Exactly one thing to do (the parser refused two), and no option that cannot apply to it. */
static void
check_mode(struct opts *o, const struct trc_opt_state *st)
{
	struct trc_run_opts *r = &o->run;

	if (r->exec.n > 0 && (r->npids > 0 || r->ps_regex != NULL))
		die(TRC_EXIT_USAGE, "--exec traces the program it starts: it excludes -p and --ps");
	if (r->npids == 0 && r->ps_regex == NULL && r->exec.n == 0)
		die(TRC_EXIT_USAGE, "no process given: use -p PID, --ps REGEX or --exec CMD");
	if (r->wait > 0 && r->exec.n == 0)
		die(TRC_EXIT_USAGE, "--wait goes with --exec");
	if (o->ps_user != NULL && r->ps_regex == NULL)
		die(TRC_EXIT_USAGE, "--user goes with --ps: it says whose processes --ps looks at");
	if (st->mode == 0 && r->metrics != NULL)
		die(TRC_EXIT_USAGE, "--metrics goes with --top");
	if (st->mode == 0)
		die(TRC_EXIT_USAGE, "nothing to do: give -m, -c, -f, -s, --top, -e, -i, --heapdump, "
		    "--shapesdump, --memory, --backtraces, --backtrace or --fork");
	r->mode = (enum trc_mode)(st->mode - 1);
	r->slow = st->group_by[G_WALL] != NULL || st->group_by[G_CPU] != NULL || o->slow_methods;
	r->slowcpu = st->group_by[G_CPU] != NULL;
	if (st->group_by[G_WALL] != NULL && st->group_by[G_CPU] != NULL)
		die(TRC_EXIT_USAGE, "-s measures wall-clock time, --slowcpu CPU time: give one");
	if (r->exec.n > 0 && r->mode != TRC_MODE_TRACE && r->mode != TRC_MODE_TOP)
		die(TRC_EXIT_USAGE, "--exec traces (-m, -c, -f, -s) or counts (--top): -e, -i, "
		    "--heapdump, --shapesdump, --memory, --backtraces, --backtrace and --fork go with "
		    "-p or --ps");
	if (r->mode == TRC_MODE_INTERACTIVE && r->output != NULL)
		die(TRC_EXIT_USAGE, "-i answers on the terminal: it excludes --output");
	if (r->firehose && (o->nspecs > 0 || r->slow))
		die(TRC_EXIT_USAGE, "--firehose traces every call: it excludes -m, -c and -s");
	if (r->append && r->output == NULL)
		die(TRC_EXIT_USAGE, "--append needs --output FILE");
	check_groups(o, st);
	check_format(o, st);
}

/* Whether the job hooks every call in the VM: --all with -f, -s alone, --top calls or time. */
static bool
hooks_every_call(const struct trc_run_opts *r)
{
	if (!r->all)
		return false;
	if (r->mode == TRC_MODE_TOP)
		return (trc_top_mode_flags(r->top_mode) & TRC_TOPM_METHOD) != 0;
	return r->firehose || (r->slow && r->nspecs == 0);
}

/*
 * Before attaching: --all leaves the VM's call hooks' instrumentation in the process for good,
 * and wrapping a basic operation (Integer#+) its slow path. Says so, and goes on only with
 * --yes or a "y" typed at the terminal.
 */
static void
confirm_lasting_cost(const struct opts *o, const struct trc_spec *specs)
{
	char answer[16] = "";
	FILE *tty;
	const struct trc_spec *op = NULL;

	for (size_t i = 0; i < o->nspecs && op == NULL; i++)
		if (trc_spec_basic_op(&specs[i]))
			op = &specs[i];
	if (!hooks_every_call(&o->run) && op == NULL)
		return;
	if (hooks_every_call(&o->run))
		fprintf(stderr, "tracer: --all hooks every method call in the VM. Ruby keeps part of those "
			"hooks after tracer detaches: the process%s then stay%s slower until %s restart%s "
			"(measured on small method calls: " TRC_RESIDUE_TEXT "). Without --all only the "
			"app's own methods are traced, and nothing is left behind.\n",
			o->run.npids > 1 ? "es" : "", o->run.npids > 1 ? "" : "s",
			o->run.npids > 1 ? "they" : "it", o->run.npids > 1 ? "" : "s");
	if (op != NULL)
		fprintf(stderr, "tracer: '%s' names an operation Ruby's VM runs without a method call "
			"(Integer#+, Array#[], Hash#[]= and the like). Wrapping it makes the VM take the slow "
			"path for it until the process restarts, after tracer detaches too (about 2x on a "
			"loop of Integer#+).\n", op->text);
	if (o->yes)
		return;
	if (!isatty(STDIN_FILENO) || (tty = fopen("/dev/tty", "r+")) == NULL)
		die(TRC_EXIT_USAGE, "not attached: add --yes to go ahead without being asked");
	fputs("Continue? [y/N] ", tty);
	fflush(tty);
	if (fgets(answer, sizeof(answer), tty) == NULL)
		answer[0] = 0;
	fclose(tty);
	if (answer[0] != 'y' && answer[0] != 'Y')
		die(TRC_EXIT_ERROR, "not attached");
}

/* Every spec is checked before anything is attached. */
static struct trc_spec *
parse_specs(const struct opts *o)
{
	struct trc_spec *specs = xcalloc(o->nspecs, sizeof(*specs));
	const char *why;

	if (o->nspecs > TRC_MAX_SPECS)
		die(TRC_EXIT_USAGE, "%zu method specs: at most %d can be traced at once", o->nspecs,
		    TRC_MAX_SPECS);
	for (size_t i = 0; i < o->nspecs; i++) {
		if (trc_spec_parse(&specs[i], o->specs[i], &why) < 0) {
			if (o->spec_origins[i] != NULL)
				die(TRC_EXIT_USAGE, "%s: invalid method spec '%s': %s",
				    o->spec_origins[i], o->specs[i], why);
			die(TRC_EXIT_USAGE, "invalid method spec '%s': %s", o->specs[i], why);
		}
		specs[i].optional = o->spec_origins[i] != NULL;
	}
	return specs;
}

/* --user's uid: a user name, or a number. */
static uid_t
user_uid(const char *user)
{
	struct passwd pw, *found = NULL;
	char buf[4096], *end;
	unsigned long v;

	if (getpwnam_r(user, &pw, buf, sizeof(buf), &found) == 0 && found != NULL)
		return found->pw_uid;
	errno = 0;
	v = strtoul(user, &end, 10);
	if (user[0] >= '0' && user[0] <= '9' && *end == '\0' && errno == 0 && v < (uid_t)-1)
		return (uid_t)v;
	die(TRC_EXIT_USAGE, "--user %s: no such user (a name from /etc/passwd, or a uid)", user);
}

/*
 * As root, --ps leaves other users' processes without the agent alone: loading code into
 * them is for --user to ask. Says so, with the pid of one, so that a run that finds fewer
 * processes than the operator expected says why.
 */
static void
note_left_alone(const struct trc_ps *ps)
{
	if (ps->left_alone == 0)
		return;
	fprintf(stderr, "tracer: --ps leaves alone %zu matching process%s of other users that never "
		"loaded tracer_agent (%s %d): --user USER loads it into USER's\n", ps->left_alone,
		ps->left_alone == 1 ? "" : "es", ps->left_alone == 1 ? "pid" : "the first:",
		(int)ps->left_alone_pid);
}

/* --ps: adds the matching processes to the -p ones; ps then knows them. */
static void
find_ps(struct trc_run_opts *r, struct trc_ps *ps, const char *user)
{
	pid_t *found;
	size_t n;

	r->npids_given = r->npids;
	if (r->ps_regex == NULL)
		return;
	/* the regex was checked by the parser */
	trc_ps_init(ps, r->ps_regex, user != NULL ? user_uid(user) : getuid(), user != NULL);
	r->ps = ps;
	if (trc_ps_scan(ps, &found, &n) < 0)
		die(TRC_EXIT_ERROR, "cannot list the processes in /proc: %s", strerror(errno));
	note_left_alone(ps);
	if (n == 0)
		die(TRC_EXIT_ERROR, "no process matches %s with tracer_agent loaded", r->ps_regex);
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		while (k < r->npids && r->pids[k] != found[i])
			k++;
		if (k == r->npids) {
			r->pids = xreallocarray(r->pids, r->npids + 1, sizeof(*r->pids));
			r->pids[r->npids++] = found[i];
		}
	}
	free(found);
}

/* Another user's process; in a container (a nested pid namespace) only root can reach it. */
static void
die_denied(pid_t pid)
{
	pid_t inner;
	int levels;

	if (trc_proc_nspid(pid, &inner, &levels) == 0 && levels > 1)
		die(TRC_EXIT_DENIED, "permission denied: process %d belongs to another user and is in "
		    "another pid namespace (a container?): attaching needs root", (int)pid);
	die(TRC_EXIT_DENIED, "permission denied: process %d belongs to another user: run tracer as that "
	    "user, or as root", (int)pid);
}

/* The pids -p gave must be there; those --ps found may be gone already (their sessions say). */
static void
check_targets(const struct trc_run_opts *r)
{
	bool one = r->mode == TRC_MODE_INTERACTIVE || r->mode == TRC_MODE_FORK;

	if (r->heapdump_path != NULL && r->npids > 1)
		die(TRC_EXIT_USAGE, "--heapdump FILE takes one pid; leave FILE out for several");
	if (r->shapesdump_path != NULL && r->npids > 1)
		die(TRC_EXIT_USAGE, "--shapesdump FILE takes one pid; leave FILE out for several");
	/* One prompt, one stopped copy: which process would be meant is not for tracer to guess. */
	if (one && r->npids > 1)
		die(TRC_EXIT_USAGE, r->ps_regex != NULL ? "%s takes one process, and %zu are given or match"
							: "%s takes one process, and you gave %zu",
		    r->mode == TRC_MODE_INTERACTIVE ? "-i" : "--fork", r->npids);
	for (size_t i = 0; i < r->npids_given; i++) {
		switch (trc_proc_check(r->pids[i])) {
		case TRC_PROC_GONE:
			die(TRC_EXIT_ERROR, "no such process %d", (int)r->pids[i]);
		case TRC_PROC_DENIED:
			die_denied(r->pids[i]);
		case TRC_PROC_ALIVE:
			break;
		}
	}
}

/*
 * --heapdump FILE, --shapesdump FILE, as an absolute path (the caller frees it), or NULL: the
 * client makes the file, and its messages say where, whatever directory the target runs in.
 */
static char *
absolute_dump(const char *file)
{
	char cwd[PATH_MAX];

	if (file == NULL)
		return NULL;
	if (file[0] == '/')
		return xstrdup(file);
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		die(TRC_EXIT_ERROR, "cannot find the current directory: %s", strerror(errno));
	return xasprintf("%s/%s", cwd, file);
}

/*
 * -x takes every word after it: "tracer -m X -x ruby app.rb --duration 1" gives --duration to
 * app.rb, and tracer traces until the program ends. Said, in case that was not meant.
 */
static void
warn_rest(const struct trc_opt_state *st)
{
	if (st->rest_option != NULL)
		fprintf(stderr, "tracer: '%s' after --%s is the command's, not tracer's (tracer's "
			"options go before --%s)\n", st->rest_option, st->rest_by->name,
			st->rest_by->name);
}

static void
free_opts(struct opts *o, struct trc_spec *specs)
{
	struct trc_run_opts *r = &o->run;

	for (size_t i = 0; i < r->nspecs; i++)
		trc_spec_release(&specs[i]);
	free(specs);
	for (size_t i = 0; i < o->nspecs; i++) {
		if (o->spec_origins[i] != NULL)
			free((void *)o->specs[i]);      /* a tracer file's line */
		free(o->spec_origins[i]);
	}
	free(o->specs);
	free(o->spec_origins);
	trc_opt_list_release(&r->exec);
	for (size_t i = 0; i < r->filters.n; i++)
		free((void *)r->filters.v[i]);  /* absolute_prefix's copies */
	trc_opt_list_release(&r->filters);
	trc_opt_list_release(&r->ignores);
	trc_opt_list_release(&r->labels);
	free(r->pids);
}

int
main(int argc, char **argv)
{
	struct opts o = { .run = { .slow_ms = DEFAULT_SLOW_MS, .prefix = DEFAULT_PREFIX,
				   .timeout = DEFAULT_TIMEOUT, .rows = DEFAULT_ROWS,
				   .interval = DEFAULT_INTERVAL, .sample = 1, .hz = DEFAULT_HZ,
				   .cap_ppm = DEFAULT_CAP_PPM, .min_share = TRC_FLAME_MIN_SHARE / 100 } };
	struct trc_opt_state st = { 0 };
	struct trc_spec *specs;
	struct trc_ps ps = { .known = NULL };
	char *heap, *shapes;
	int code;

	if (trc_opt_parse(options, NOPTIONS, argc, argv, &o, &st) < 0)
		die(TRC_EXIT_USAGE, "%s", st.error);
	if (o.help) {
		usage();
		/* rbtrace's -h is its heap dump: someone who typed "-p PID -h" may have meant it. */
		if (argc > 2)
			fputs("tracer: -h is --help here; rbtrace's -h (a heap dump) is --heapdump\n", stderr);
		return TRC_EXIT_OK;
	}
	if (o.version) {
		printf("tracer %s (protocol %d)\n", TRC_CLIENT_VERSION, TRC_PROTOCOL_VERSION);
		return TRC_EXIT_OK;
	}
	check_mode(&o, &st);
	warn_rest(&st);
	o.run.specs = specs = parse_specs(&o);
	o.run.nspecs = o.nspecs;
	find_ps(&o.run, &ps, o.ps_user);
	check_targets(&o.run);
	confirm_lasting_cost(&o, specs);
	o.run.heapdump_path = heap = absolute_dump(o.run.heapdump_path);
	o.run.shapesdump_path = shapes = absolute_dump(o.run.shapesdump_path);
	code = trc_run(&o.run);
	free(heap);
	free(shapes);
	if (o.run.ps != NULL)
		trc_ps_release(&ps);
	free_opts(&o, specs);
	return code;
}
