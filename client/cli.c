/* cli.c: tracer's command line: option table, usage, exit codes, main loop; the only file that exits. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <dirent.h>
#include <math.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <ev.h>

#include "compress.h"
#include "exec.h"
#include "export.h"
#include "inject.h"
#include "output.h"
#include "proc.h"
#include "live.h"
#include "ps.h"
#include "repl.h"
#include "session.h"
#include "spec.h"
#include "spool.h"
#include "top.h"
#include "trace.h"
#include "tracer_protocol.h"
#include "xmalloc.h"

#define TRC_CLIENT_VERSION "0.1.0"
#define DEFAULT_SLOW_MS 250
#define DEFAULT_PREFIX 2
#define DEFAULT_TIMEOUT 5.0
#define HELP_COLUMN 28
#define DEFAULT_ROWS 25
#define DEFAULT_INTERVAL 1.0
#define DEFAULT_RESCAN 1.0      /* seconds between --ps's looks for new processes, but --top's */
#define DEFAULT_RESET 300.0
#define MIN_INTERVAL 0.01
#define MAX_INTERVAL 3600.0
/* TRC_TRACE_MAX_INDENT, for the help text. */
#define STRINGIFY(x) #x
#define DECIMAL(x) STRINGIFY(x)
#define MAX_INDENT_TEXT DECIMAL(TRC_TRACE_MAX_INDENT)
/* What --all left behind after detach, from make bench (README, Performance). */
#define TRC_RESIDUE_TEXT "1.6x to 3.4x on Ruby 3.1 to 3.4 without YJIT, up to 18x on Ruby 3.4 with YJIT"

/* The command line, as given. */
struct opts {
	pid_t *pids;            /* -p's, then those --ps found at the start */
	size_t npids;
	size_t npids_given;     /* how many of them -p gave */
	const char **specs;     /* -m's, and each line of the -c files */
	char **spec_origins;    /* per spec: NULL for -m, "FILE:LINE" (owned, as is its text) for -c */
	size_t nspecs;
	bool firehose, slow, start_time, no_duration, append, stats;
	bool help, version, yes, gc;
	bool slowcpu, slowwall;         /* --slowcpu, -s given */
	uint32_t slow_ms;
	unsigned prefix;
	const char *output, *eval;
	/* looking inside: -i, --heapdump, --shapesdump, --memory, --backtraces, --backtrace, --fork */
	bool interactive, heapdump, shapesdump, memory, backtraces, backtrace, fork;
	const char *heapdump_path, *shapesdump_path;    /* NULL: the default name */
	unsigned frames;        /* --backtraces N, --backtrace N; 0: all */
	double duration, timeout;
	/* --top and --ps */
	bool top, all, json;
	enum trc_top_mode top_mode;
	const char **filters, **ignores;        /* filters: absolute, owned */
	size_t nfilters, nignores;
	unsigned rows;
	unsigned sample;                /* --sample; 1: every allocation */
	bool sample_by_time;            /* --sample-time N (in sample) */
	const char *sample_option;      /* --sample or --sample-time, whichever was given */
	double interval, reset;         /* reset 0: not given */
	const char *ps;
	const char *top_option;         /* the last option given that only --top takes, or NULL */
	const char *scope_option;       /* the last of --filter, --all, --ignore given, or NULL */
	/* trace output */
	enum trc_format format;
	bool format_given;
	const char *text_option;        /* the last option given that only --format text takes */
	/* --exec */
	const char **exec_argv;         /* the command and its arguments, NULL-terminated */
	size_t nexec;
	double wait;                    /* --wait: 0 when not given */
};

enum arg_kind {
	ARG_NONE,               /* -f */
	ARG_REQUIRED,           /* -p PID, -pPID, --pid=PID */
	ARG_OPTIONAL,           /* -s, -s 100, --slow=100: the next word if it is no option */
	ARG_LIST,               /* -m A B C: one value, then every following word that is no option */
	ARG_REST,               /* -x CMD ARGS...: every word after it, options included */
};

struct option_def {
	const char *name;
	char short_name;        /* 0: long only */
	enum arg_kind arg;
	const char *metavar;
	const char *help;
	void (*set)(struct opts *o, const char *value);  /* value NULL when none was given */
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

static unsigned long
parse_uint(const char *what, const char *s, unsigned long min, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s < '0' || *s > '9' || *end != '\0' || errno != 0 || v < min || v > max)
		die(TRC_EXIT_USAGE, "invalid %s '%s': expected a whole number from %lu to %lu", what, s,
		    min, max);
	return v;
}

static double
parse_secs(const char *what, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v <= 0 || v > 1e7)
		die(TRC_EXIT_USAGE, "invalid %s '%s': expected a number of seconds above 0", what, s);
	return v;
}

static void
set_pid(struct opts *o, const char *v)
{
	pid_t pid = (pid_t)parse_uint("pid", v, 1, INT_MAX);

	for (size_t i = 0; i < o->npids; i++)
		if (o->pids[i] == pid)
			die(TRC_EXIT_USAGE, "pid %d given twice", (int)pid);
	o->pids = xreallocarray(o->pids, o->npids + 1, sizeof(*o->pids));
	o->pids[o->npids++] = pid;
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
set_methods(struct opts *o, const char *v)
{
	add_spec(o, v, NULL);
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
set_config(struct opts *o, const char *v)
{
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
set_exec(struct opts *o, const char *v)
{
	o->exec_argv = xreallocarray(o->exec_argv, o->nexec + 2, sizeof(*o->exec_argv));
	o->exec_argv[o->nexec++] = v;
	o->exec_argv[o->nexec] = NULL;
}

static void
set_wait(struct opts *o, const char *v)
{
	o->wait = parse_secs("--wait", v);
}

static void
set_firehose(struct opts *o, const char *v)
{
	(void)v;
	o->firehose = true;
}

static void
set_slow(struct opts *o, const char *v)
{
	o->slow = o->slowwall = true;
	o->slow_ms = v ? (uint32_t)parse_uint("--slow threshold", v, 0, UINT32_MAX) : DEFAULT_SLOW_MS;
}

static void
set_slowcpu(struct opts *o, const char *v)
{
	o->slow = o->slowcpu = true;
	o->slow_ms = v ? (uint32_t)parse_uint("--slowcpu threshold", v, 0, UINT32_MAX)
		       : DEFAULT_SLOW_MS;
}

/* rbtrace's --slow-methods: -s (unless --slowcpu says otherwise) over these methods only. */
static void
set_slow_methods(struct opts *o, const char *v)
{
	set_methods(o, v);
	o->slow = true;
}

static void
set_start_time(struct opts *o, const char *v)
{
	(void)v;
	o->start_time = true;
	o->text_option = "--start-time";
}

static void
set_stats(struct opts *o, const char *v)
{
	(void)v;
	o->stats = true;
}

static void
set_no_duration(struct opts *o, const char *v)
{
	(void)v;
	o->no_duration = true;
	o->text_option = "--no-duration";
}

static void
set_prefix(struct opts *o, const char *v)
{
	o->prefix = (unsigned)parse_uint("--prefix", v, 0, 100);
	o->text_option = "--prefix";
}

static void
set_format(struct opts *o, const char *v)
{
	if (trc_format_parse(v, &o->format) < 0)
		die(TRC_EXIT_USAGE, "invalid --format '%s': expected " TRC_FORMAT_LIST, v);
	o->format_given = true;
}

static void
set_output(struct opts *o, const char *v)
{
	o->output = v;
}

static void
set_append(struct opts *o, const char *v)
{
	(void)v;
	o->append = true;
}

static void
set_eval(struct opts *o, const char *v)
{
	o->eval = v;
}

static void
set_heapdump(struct opts *o, const char *v)
{
	o->heapdump = true;
	o->heapdump_path = v;
}

static void
set_interactive(struct opts *o, const char *v)
{
	(void)v;
	o->interactive = true;
}

static void
set_shapesdump(struct opts *o, const char *v)
{
	o->shapesdump = true;
	o->shapesdump_path = v;
}

static void
set_memory(struct opts *o, const char *v)
{
	(void)v;
	o->memory = true;
}

static void
set_backtraces(struct opts *o, const char *v)
{
	o->backtraces = true;
	o->frames = v ? (unsigned)parse_uint("--backtraces frames", v, 1, 1000000) : 0;
}

static void
set_backtrace(struct opts *o, const char *v)
{
	o->backtrace = true;
	o->frames = (unsigned)parse_uint("--backtrace frames", v, 1, 1000000);
}

static void
set_fork(struct opts *o, const char *v)
{
	(void)v;
	o->fork = true;
}

static void
set_duration(struct opts *o, const char *v)
{
	o->duration = parse_secs("--duration", v);
}

static void
set_timeout(struct opts *o, const char *v)
{
	o->timeout = parse_secs("--timeout", v);
}

static void
set_top(struct opts *o, const char *v)
{
	if (trc_top_mode_parse(v, &o->top_mode) < 0)
		die(TRC_EXIT_USAGE, "invalid --top mode '%s': expected calls, time, objects-total, "
		    "objects, arrays, strings or exceptions", v);
	o->top = true;
}

static void
set_rows(struct opts *o, const char *v)
{
	o->rows = (unsigned)parse_uint("--rows", v, 1, TRC_TOP_MAX_ENTRIES);
	o->top_option = "--rows";
}

/* --sample N (by_time false, N from 1) or --sample-time N (from 2): one or the other. */
static void
set_sampling(struct opts *o, const char *v, bool by_time)
{
	const char *name = by_time ? "--sample-time" : "--sample";

	if (o->sample_option != NULL && o->sample_by_time != by_time)
		die(TRC_EXIT_USAGE, "--sample and --sample-time exclude each other");
	o->sample = (unsigned)parse_uint(name, v, by_time ? 2 : 1, TRC_TOP_MAX_SAMPLE);
	o->sample_by_time = by_time;
	o->top_option = o->sample_option = name;
}

static void
set_sample(struct opts *o, const char *v)
{
	set_sampling(o, v, false);
}

static void
set_sample_time(struct opts *o, const char *v)
{
	set_sampling(o, v, true);
}

static const char **
push(const char **list, size_t *n, const char *v)
{
	list = xreallocarray(list, *n + 1, sizeof(*list));
	list[(*n)++] = v;
	return list;
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
set_filter(struct opts *o, const char *v)
{
	if (*v == '\0')
		die(TRC_EXIT_USAGE, "--filter needs a non-empty PREFIX");
	if (o->nfilters == TRC_MAX_PREFIXES)
		die(TRC_EXIT_USAGE, "--filter: at most %d prefixes", TRC_MAX_PREFIXES);
	o->filters = push(o->filters, &o->nfilters, absolute_prefix(v));
	o->scope_option = "--filter";
}

static void
set_all(struct opts *o, const char *v)
{
	(void)v;
	o->all = true;
	o->scope_option = "--all";
}

static void
check_regex(const char *what, const char *v)
{
	regex_t re;
	char why[128];
	int rc = regcomp(&re, v, REG_EXTENDED | REG_NOSUB);

	if (rc != 0) {
		regerror(rc, &re, why, sizeof(why));
		regfree(&re);
		die(TRC_EXIT_USAGE, "invalid %s regex '%s': %s", what, v, why);
	}
	regfree(&re);
}

static void
set_ignore(struct opts *o, const char *v)
{
	check_regex("--ignore", v);
	if (o->nignores == TRC_MAX_IGNORES)
		die(TRC_EXIT_USAGE, "--ignore: at most %d regexes", TRC_MAX_IGNORES);
	o->ignores = push(o->ignores, &o->nignores, v);
	o->scope_option = "--ignore";
}

static void
set_interval(struct opts *o, const char *v)
{
	o->interval = parse_secs("--interval", v);
	if (o->interval < MIN_INTERVAL || o->interval > MAX_INTERVAL)
		die(TRC_EXIT_USAGE, "invalid --interval '%s': expected %g to %g seconds", v,
		    MIN_INTERVAL, MAX_INTERVAL);
	o->top_option = "--interval";
}

static void
set_reset(struct opts *o, const char *v)
{
	o->reset = parse_secs("--reset", v);
	o->top_option = "--reset";
}

static void
set_json(struct opts *o, const char *v)
{
	(void)v;
	o->json = true;
	o->top_option = "--json";
}

static void
set_ps(struct opts *o, const char *v)
{
	check_regex("--ps", v);
	o->ps = v;
}

static void
set_no_inject(struct opts *o, const char *v)
{
	(void)o, (void)v;
	trc_inject_set_enabled(false);
}

static void
set_gc(struct opts *o, const char *v)
{
	(void)v;
	o->gc = true;
}

static void
set_yes(struct opts *o, const char *v)
{
	(void)v;
	o->yes = true;
}

static void
set_help(struct opts *o, const char *v)
{
	(void)v;
	o->help = true;
}

static void
set_version(struct opts *o, const char *v)
{
	(void)v;
	o->version = true;
}

static const struct option_def options[] = {
	{ "pid", 'p', ARG_REQUIRED, "PID", "process to attach to; repeat for several", set_pid },
	{ "ps", 0, ARG_REQUIRED, "REGEX", "attach to your processes matching REGEX (below)",
	  set_ps },
	{ "exec", 'x', ARG_REST, "CMD [ARG...]", "start CMD, trace it from its first line (below); "
	  "the rest is CMD's", set_exec },
	{ "wait", 0, ARG_REQUIRED, "SECS", "--exec: attach SECS after CMD starts, not at its "
	  "first line", set_wait },
	{ "methods", 'm', ARG_LIST, "SPEC...", "trace calls of these methods (see below)",
	  set_methods },
	{ "config", 'c', ARG_LIST, "NAME|FILE...", "trace the methods a tracer file lists (below)",
	  set_config },
	{ "firehose", 'f', ARG_NONE, NULL, "trace every method call", set_firehose },
	{ "slow", 's', ARG_OPTIONAL, "[MS]", "show calls slower than MS milliseconds (250)",
	  set_slow },
	{ "slowcpu", 0, ARG_OPTIONAL, "[MS]", "show calls that used more than MS milliseconds of CPU "
	  "(250)", set_slowcpu },
	{ "slow-methods", 0, ARG_LIST, "M...", "-s (or --slowcpu) for these methods only: "
	  "-s -m M...", set_slow_methods },
	{ "start-time", 't', ARG_NONE, NULL, "show the wall-clock start time of each call",
	  set_start_time },
	{ "no-duration", 'n', ARG_NONE, NULL, "hide the time spent in each call", set_no_duration },
	{ "stats", 0, ARG_NONE, NULL, "at detach, print the events the agent sent, received and lost", set_stats },
	{ "gc", 0, ARG_NONE, NULL, "tracing, --top: also show garbage collections and their pauses",
	  set_gc },
	{ "prefix", 'r', ARG_REQUIRED, "N", "indent nested calls by N spaces (2), "
	  MAX_INDENT_TEXT " levels at most",
	  set_prefix },
	{ "output", 'o', ARG_REQUIRED, "FILE", "write the trace to FILE instead of stdout; "
	  "FILE.gz, FILE.zst: compressed", set_output },
	{ "append", 'a', ARG_NONE, NULL, "append to the --output FILE (.gz, .zst too)", set_append },
	{ "format", 0, ARG_REQUIRED, "FORMAT", "write the trace as FORMAT (text; see below)",
	  set_format },
	{ "eval", 'e', ARG_REQUIRED, "CODE", "evaluate Ruby CODE in the process, print the result",
	  set_eval },
	{ "interactive", 'i', ARG_NONE, NULL, "a Ruby prompt whose lines run in the process (below)",
	  set_interactive },
	{ "heapdump", 0, ARG_OPTIONAL, "[FILE]",
	  "dump the heap to FILE ($TMPDIR/tracer-heap-PID-DATE-TIME.json)", set_heapdump },
	{ "shapesdump", 0, ARG_OPTIONAL, "[FILE]", "dump the object shapes to FILE (Ruby 3.2+)",
	  set_shapesdump },
	{ "memory", 0, ARG_NONE, NULL, "report RSS, mappings, GC, objects by type and class",
	  set_memory },
	{ "backtraces", 0, ARG_OPTIONAL, "[N]", "print every thread's backtrace (N frames of each)",
	  set_backtraces },
	{ "backtrace", 0, ARG_REQUIRED, "N", "print the main thread's N innermost frames",
	  set_backtrace },
	{ "fork", 0, ARG_NONE, NULL, "make a stopped copy of the process, for gdb (below)",
	  set_fork },
	{ "top", 0, ARG_REQUIRED, "MODE", "live table of calls, time, allocations... (below)",
	  set_top },
	{ "rows", 0, ARG_REQUIRED, "N", "--top: show the N first rows (25)", set_rows },
	{ "sample", 0, ARG_REQUIRED, "N", "--top of allocations: look up 1 in N, counted as N "
	  "(below)", set_sample },
	{ "sample-time", 0, ARG_REQUIRED, "N", "--top of allocations: count them 1/N of the "
	  "time, scaled (below)", set_sample_time },
	{ "filter", 0, ARG_REQUIRED, "PREFIX", "-f, -s, --top: the app is the files under PREFIX; "
	  "repeatable", set_filter },
	{ "all", 0, ARG_NONE, NULL, "-f, -s, --top: every call and file, not only the app's "
	  "(see below)", set_all },
	{ "ignore", 0, ARG_REQUIRED, "REGEX", "-f, -s, --top: leave out methods whose Class#method "
	  "matches; repeatable", set_ignore },
	{ "yes", 'y', ARG_NONE, NULL, "do not ask before --all (see below)", set_yes },
	{ "interval", 0, ARG_REQUIRED, "SECS", "--top: refresh every SECS seconds (1)",
	  set_interval },
	{ "reset", 0, ARG_REQUIRED, "SECS", "--top: clear the table every SECS seconds (300)",
	  set_reset },
	{ "json", 0, ARG_NONE, NULL, "--top: print each table as one line of JSON", set_json },
	{ "duration", 0, ARG_REQUIRED, "SECS", "detach after SECS seconds (may be fractional)",
	  set_duration },
	{ "timeout", 0, ARG_REQUIRED, "SECS", "give up when the agent has not answered in SECS (5)",
	  set_timeout },
	{ "no-inject", 0, ARG_NONE, NULL, "never load the agent into a process that did not load it "
	  "itself", set_no_inject },
	{ "help", 'h', ARG_NONE, NULL, "show this help and exit", set_help },
	{ "version", 'v', ARG_NONE, NULL, "show the version and exit", set_version },
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

static const char usage_text[] =
	"Usage: tracer (-p PID [-p PID...] | --ps REGEX) (-m SPEC... | -c NAME... | -f |\n"
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
	"(RUBYLIB gains tracer's lib, from $TRACER_AGENT_LIB or beside tracer, else an\n"
	"installed tracer_agent gem; RUBYOPT gains -rtracer_agent) and traces it from\n"
	"its first line: the agent connects as it loads, and the program starts once\n"
	"tracing has. Everything after CMD is CMD's. What CMD starts is traced too:\n"
	"a program it execs (bundle exec), its forks (Puma's workers) and the Ruby\n"
	"programs it spawns (rake test's runner), their lines starting with [PID].\n"
	"tracer ends when CMD does, with its exit status (128+N if signal N killed\n"
	"it; 127: no such command, 126: not runnable), and detaches from what CMD\n"
	"left running. SIGTERM and SIGHUP sent to tracer are passed on to CMD;\n"
	"Ctrl-C reaches CMD from the terminal, and a second one detaches.\n"
	"--duration stops tracing, not CMD. --wait SECS attaches after SECS instead,\n"
	"as -p does, to CMD only.\n"
	"\n"
	"Trace formats (--format, for -m, -f and -s):\n"
	"  text        the call tree, as it happens (the default); a call nested more\n"
	"              than " MAX_INDENT_TEXT " deep starts with [depth N] instead of its indent\n"
	"  chrome      Trace Event Format JSON for Perfetto and chrome://tracing\n"
	"  speedscope  speedscope's JSON, one profile per thread (held in memory)\n"
	"  collapsed   folded stacks weighted by self time in microseconds, for\n"
	"              flamegraph.pl, inferno or speedscope (written at the end)\n"
	"  jsonl       one JSON object per call, return, raise or slow call\n"
	"\n"
	"What -f, -s without -m, and --top calls and time see: the app's own Ruby\n"
	"methods, those defined in files under each process's working directory (or\n"
	"--filter PREFIX), each traced through a wrapper that is gone once tracer\n"
	"detaches, leaving the process as fast as before. --all sees every call, Ruby\n"
	"and C, through the VM's hooks instead; part of them stays after detach, and\n"
	"the process runs slower until it restarts: tracer asks first (--yes does not).\n"
	"\n"
	"Live tables (--top MODE), counted inside the processes:\n"
	"  calls          FILENAME LINE METHOD CALLS: method calls\n"
	"  time           FILENAME LINE METHOD CALLS TOTAL SELF AVG: time in methods (ms)\n"
	"  objects-total  OBJECT COUNT: allocations by class\n"
	"  objects        FILENAME LINE OBJECT COUNT: allocations by site and class\n"
	"  arrays         FILENAME LINE COUNT: Array and Hash allocations\n"
	"  strings        FILENAME LINE COUNT: String allocations\n"
	"  exceptions     FILENAME LINE EXCEPTION COUNT: raises by site and class\n"
	"Rows from several processes add up; a PIDS column says in how many each was\n"
	"seen. Only files under each process's working directory count, unless\n"
	"--filter (a relative PREFIX is taken from here) or --all says otherwise;\n"
	"--ignore also hides rows by the class part of their label (before '#' or\n"
	"'.'). A table with no row says why. On a terminal the table fills the screen\n"
	"and q quits; otherwise a table is printed every --interval, or only once, at\n"
	"the end, with --duration (which also turns the default --reset off).\n"
	"Allocation tables count every allocation, which makes a program that does\n"
	"little else about 2x slower; --sample N looks up about one in N, counted as\n"
	"N, and says so in the header: its counts are estimates, at a fraction of the\n"
	"cost. --sample-time N turns the VM's allocation hook on only about 1/N of the\n"
	"time, in 1 ms windows at random, and scales each interval's counts by the VM's\n"
	"own count of allocations: estimates again, close for steady work, at almost\n"
	"no cost; a burst between two windows counts as the windows around it did.\n"
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
	"command line matches the extended REGEX and that loaded tracer_agent. Tracing\n"
	"and --top look again every second (--top: every --interval) and attach to the\n"
	"new ones, as workers are spawned and recycled; trace lines start with [PID].\n"
	"A process that exits, or that another client traces, is noted and the others\n"
	"go on; --duration counts from the start for all of them.\n"
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
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct option_def *d = &options[i];
		char left[64];
		int n;

		if (d->short_name)
			n = snprintf(left, sizeof(left), "  -%c, --%s", d->short_name, d->name);
		else
			n = snprintf(left, sizeof(left), "      --%s", d->name);
		if (d->metavar)
			snprintf(left + n, sizeof(left) - (size_t)n, " %s", d->metavar);
		printf("%-*s%s\n", HELP_COLUMN, left, d->help);
	}
	fputs(spec_text, stdout);
}

static bool
is_option(const char *s)
{
	return s[0] == '-' && s[1] != '\0';
}

/* Gives d its value(s): glued is the value written into the same word (--x=V, -xV), or NULL. */
static void
apply(struct opts *o, const struct option_def *d, const char *spelled, const char *glued,
      int argc, char **argv, int *i)
{
	const char *v = glued;

	if (d->arg == ARG_NONE && v != NULL)
		die(TRC_EXIT_USAGE, "option '%s' takes no value", spelled);
	if (d->arg == ARG_OPTIONAL && v == NULL && *i + 1 < argc && !is_option(argv[*i + 1]))
		v = argv[++*i];
	if ((d->arg == ARG_REQUIRED || d->arg == ARG_LIST) && v == NULL) {
		if (*i + 1 >= argc)
			die(TRC_EXIT_USAGE, "option '%s' needs a value", spelled);
		v = argv[++*i];
	}
	if (d->arg == ARG_REST && v == NULL && *i + 1 >= argc)
		die(TRC_EXIT_USAGE, "option '%s' needs a command", spelled);
	if (d->arg == ARG_REST && v == NULL)
		v = argv[++*i];
	d->set(o, v);
	while (d->arg == ARG_LIST && *i + 1 < argc && !is_option(argv[*i + 1]))
		d->set(o, argv[++*i]);
	while (d->arg == ARG_REST && *i + 1 < argc)
		d->set(o, argv[++*i]);
}

static void
parse_long(struct opts *o, int argc, char **argv, int *i)
{
	const char *name = argv[*i] + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	char spelled[32];

	for (size_t k = 0; k < NOPTIONS; k++) {
		if (strlen(options[k].name) == len && strncmp(options[k].name, name, len) == 0) {
			snprintf(spelled, sizeof(spelled), "--%s", options[k].name);
			apply(o, &options[k], spelled, eq ? eq + 1 : NULL, argc, argv, i);
			return;
		}
	}
	die(TRC_EXIT_USAGE, "unknown option '--%.*s'", (int)len, name);
}

/* "-tn", "-p123", "-s": letters until one that takes a value, which gets the rest. */
static void
parse_short(struct opts *o, int argc, char **argv, int *i)
{
	const char *word = argv[*i];

	for (size_t k = 1; word[k] != '\0'; k++) {
		const struct option_def *d = NULL;
		char spelled[3] = { '-', word[k], '\0' };

		for (size_t j = 0; j < NOPTIONS && d == NULL; j++)
			if (options[j].short_name == word[k])
				d = &options[j];
		if (d == NULL)
			die(TRC_EXIT_USAGE, "unknown option '-%c'", word[k]);
		if (d->arg != ARG_NONE) {
			apply(o, d, spelled, word[k + 1] ? word + k + 1 : NULL, argc, argv, i);
			return;
		}
		apply(o, d, spelled, NULL, argc, argv, i);
	}
}

static void
parse_args(struct opts *o, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!is_option(argv[i]) || strcmp(argv[i], "--") == 0)
			die(TRC_EXIT_USAGE, "unexpected argument '%s'", argv[i]);
		if (argv[i][1] == '-')
			parse_long(o, argc, argv, &i);
		else
			parse_short(o, argc, argv, &i);
	}
}

static void
check_format(const struct opts *o, bool tracing)
{
	if (o->format_given && !tracing)
		die(TRC_EXIT_USAGE, "--format goes with tracing (-m, -c, -f, -s)");
	if (o->format != TRC_FORMAT_TEXT && o->text_option != NULL)
		die(TRC_EXIT_USAGE, "%s goes with --format text", o->text_option);
	if (o->append && trc_format_is_document(o->format))
		die(TRC_EXIT_USAGE, "--append would put a second JSON document after the first: "
		    "--format %s makes one document per file", trc_format_name(o->format));
}

/* Which of the ways of looking inside was asked for (check_mode made sure one was). */
static enum trc_mode
looking_mode(const struct opts *o)
{
	const struct {
		bool on;
		enum trc_mode mode;
	} looks[] = {
		{ o->interactive, TRC_MODE_INTERACTIVE }, { o->heapdump, TRC_MODE_HEAPDUMP },
		{ o->shapesdump, TRC_MODE_SHAPESDUMP }, { o->memory, TRC_MODE_MEMORY },
		{ o->backtraces, TRC_MODE_BACKTRACES }, { o->backtrace, TRC_MODE_BACKTRACE },
		{ o->fork, TRC_MODE_FORK },
	};

	for (size_t i = 0; i < sizeof(looks) / sizeof(looks[0]); i++)
		if (looks[i].on)
			return looks[i].mode;
	return TRC_MODE_EVAL;
}

/* Exactly one thing to do, and no option that cannot apply to it. */
static enum trc_mode
check_mode(const struct opts *o)
{
	bool tracing = o->nspecs > 0 || o->firehose || o->slow;
	int modes = tracing + o->top + (o->eval != NULL) + o->interactive + o->heapdump +
		    o->shapesdump + o->memory + o->backtraces + o->backtrace + o->fork;

	if (o->nexec > 0 && (o->npids > 0 || o->ps != NULL))
		die(TRC_EXIT_USAGE, "--exec traces the program it starts: it excludes -p and --ps");
	if (o->npids == 0 && o->ps == NULL && o->nexec == 0)
		die(TRC_EXIT_USAGE, "no process given: use -p PID, --ps REGEX or --exec CMD");
	if (o->wait > 0 && o->nexec == 0)
		die(TRC_EXIT_USAGE, "--wait goes with --exec");
	if (modes == 0)
		die(TRC_EXIT_USAGE, "nothing to do: give -m, -c, -f, -s, --top, -e, -i, --heapdump, "
		    "--shapesdump, --memory, --backtraces, --backtrace or --fork");
	if (modes > 1)
		die(TRC_EXIT_USAGE, "tracing (-m, -c, -f, -s), --top, -e, -i, --heapdump, "
		    "--shapesdump, --memory, --backtraces, --backtrace and --fork exclude each other");
	if (o->slowcpu && o->slowwall)
		die(TRC_EXIT_USAGE, "-s measures wall-clock time, --slowcpu CPU time: give one");
	if (o->nexec > 0 && !tracing && !o->top)
		die(TRC_EXIT_USAGE, "--exec traces (-m, -c, -f, -s) or counts (--top): -e, -i, "
		    "--heapdump, --shapesdump, --memory, --backtraces, --backtrace and --fork go with "
		    "-p or --ps");
	if (o->interactive && o->output != NULL)
		die(TRC_EXIT_USAGE, "-i answers on the terminal: it excludes --output");
	if (o->firehose && (o->nspecs > 0 || o->slow))
		die(TRC_EXIT_USAGE, "--firehose traces every call: it excludes -m, -c and -s");
	if (o->append && o->output == NULL)
		die(TRC_EXIT_USAGE, "--append needs --output FILE");
	if (o->top_option != NULL && !o->top)
		die(TRC_EXIT_USAGE, "%s goes with --top", o->top_option);
	if (o->sample > 1 && (o->top_mode == TRC_TOP_CALLS || o->top_mode == TRC_TOP_TIME ||
			      o->top_mode == TRC_TOP_EXCEPTIONS))
		die(TRC_EXIT_USAGE, "%s goes with --top objects, objects-total, arrays or "
		    "strings: the other tables count every event", o->sample_option);
	if (o->scope_option != NULL && !o->top && !o->firehose && !(o->slow && o->nspecs == 0))
		die(TRC_EXIT_USAGE, "%s goes with -f, -s (without -m) or --top", o->scope_option);
	if (o->gc && !tracing && !o->top)
		die(TRC_EXIT_USAGE, "--gc goes with tracing (-m, -c, -f, -s) or --top");
	if (o->all && o->nfilters > 0)
		die(TRC_EXIT_USAGE, "--all counts every file: it excludes --filter");
	check_format(o, tracing);
	if (o->top)
		return TRC_MODE_TOP;
	if (tracing)
		return TRC_MODE_TRACE;
	return looking_mode(o);
}

/* Whether the job hooks every call in the VM: --all with -f, -s alone, --top calls or time. */
static bool
hooks_every_call(const struct opts *o)
{
	if (!o->all)
		return false;
	if (o->top)
		return o->top_mode == TRC_TOP_CALLS || o->top_mode == TRC_TOP_TIME;
	return o->firehose || (o->slow && o->nspecs == 0);
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
	if (!hooks_every_call(o) && op == NULL)
		return;
	if (hooks_every_call(o))
		fprintf(stderr, "tracer: --all hooks every method call in the VM. Ruby keeps part of those "
			"hooks after tracer detaches: the process%s then stay%s slower until %s restart%s "
			"(measured on small method calls: " TRC_RESIDUE_TEXT "). Without --all only the "
			"app's own methods are traced, and nothing is left behind.\n",
			o->npids > 1 ? "es" : "", o->npids > 1 ? "" : "s", o->npids > 1 ? "they" : "it",
			o->npids > 1 ? "" : "s");
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

/* --ps: adds the matching processes to the -p ones; ps then knows them. */
static void
find_ps(struct opts *o, struct trc_ps *ps)
{
	pid_t *found;
	size_t n;

	o->npids_given = o->npids;
	if (o->ps == NULL)
		return;
	trc_ps_init(ps, o->ps);         /* checked by set_ps */
	if (trc_ps_scan(ps, &found, &n) < 0)
		die(TRC_EXIT_ERROR, "cannot list the processes in /proc: %s", strerror(errno));
	if (n == 0)
		die(TRC_EXIT_ERROR, "no process matches %s with tracer_agent loaded", o->ps);
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		while (k < o->npids && o->pids[k] != found[i])
			k++;
		if (k == o->npids) {
			o->pids = xreallocarray(o->pids, o->npids + 1, sizeof(*o->pids));
			o->pids[o->npids++] = found[i];
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
check_targets(const struct opts *o)
{
	if (o->heapdump_path != NULL && o->npids > 1)
		die(TRC_EXIT_USAGE, "--heapdump FILE takes one pid; leave FILE out for several");
	if (o->shapesdump_path != NULL && o->npids > 1)
		die(TRC_EXIT_USAGE, "--shapesdump FILE takes one pid; leave FILE out for several");
	/* One prompt, one stopped copy: which process would be meant is not for tracer to guess. */
	if ((o->interactive || o->fork) && o->npids > 1)
		die(TRC_EXIT_USAGE, o->ps != NULL ? "%s takes one process, and %zu are given or match"
						  : "%s takes one process, and you gave %zu",
		    o->interactive ? "-i" : "--fork", o->npids);
	for (size_t i = 0; i < o->npids_given; i++) {
		switch (trc_proc_check(o->pids[i])) {
		case TRC_PROC_GONE:
			die(TRC_EXIT_ERROR, "no such process %d", (int)o->pids[i]);
		case TRC_PROC_DENIED:
			die_denied(o->pids[i]);
		case TRC_PROC_ALIVE:
			break;
		}
	}
}

static const char *
tmpdir(void)
{
	const char *t = getenv("TMPDIR");

	return t != NULL && *t != '\0' ? t : "/tmp";
}

/*
 * A dump's file, FILE or $TMPDIR/tracer-WHAT-PID-DATE-TIME.json. The client makes the file
 * itself (heapfile.c), here: an absolute path only says where, in the messages, whatever
 * directory the target runs in.
 */
static char *
dump_path(const char *file, const char *what, pid_t pid)
{
	char cwd[PATH_MAX], stamp[32];
	time_t now = time(NULL);
	struct tm tm;

	if (file == NULL) {
		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime_r(&now, &tm));
		return xasprintf("%s/tracer-%s-%d-%s.json", tmpdir(), what, (int)pid, stamp);
	}
	if (file[0] == '/')
		return xstrdup(file);
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		die(TRC_EXIT_ERROR, "cannot find the current directory: %s", strerror(errno));
	return xasprintf("%s/%s", cwd, file);
}

/* What a session's eval sends: the code, a dump's path, the frames asked for, or "". */
static char *
eval_text(const struct opts *o, enum trc_mode mode, pid_t pid)
{
	switch (mode) {
	case TRC_MODE_EVAL:
		return xstrdup(o->eval);
	case TRC_MODE_HEAPDUMP:
		return dump_path(o->heapdump_path, "heap", pid);
	case TRC_MODE_SHAPESDUMP:
		return dump_path(o->shapesdump_path, "shapes", pid);
	case TRC_MODE_BACKTRACES:
	case TRC_MODE_BACKTRACE:
		return o->frames > 0 ? xasprintf("%u", o->frames) : xstrdup("");
	default:
		return xstrdup("");
	}
}

static int
open_output(const struct opts *o)
{
	int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (o->append ? O_APPEND : O_TRUNC);
	int fd;

	if (o->output == NULL)
		return STDOUT_FILENO;
	if ((fd = open(o->output, flags, 0666)) < 0)
		die(TRC_EXIT_ERROR, "cannot open '%s': %s", o->output, strerror(errno));
	return fd;
}

/*
 * -o FILE.gz, FILE.zst: every byte is compressed on its way to the file. With --append the
 * new stream is one more gzip member or zstd frame after those already there, which gzip -dc
 * and zstd -dc read on as one text.
 */
static void
compress_output(struct trc_output *out, const struct opts *o)
{
	enum trc_compression kind = o->output ? trc_compression_of(o->output) : TRC_COMPRESS_NONE;
	struct trc_codec codec;

	if (trc_compress_codec(kind, &codec) < 0)
		die(TRC_EXIT_ERROR, "cannot compress '%s': %s", o->output, strerror(errno));
	trc_output_set_codec(out, codec);
}

/* The running client: the shared output, the job, one session per pid, the loop. */
struct cli {
	const struct opts *o;
	struct ev_loop *loop;
	struct trc_output out;
	struct trc_job job;
	struct trc_session_cbs cbs;
	struct trc_session **sessions;  /* in order of start; finished ones stay */
	bool *found;                    /* per session: --ps found it (-p did not name it) */
	size_t nsessions, cap, running;
	struct trc_ps *ps;              /* --ps, tracing or --top: looks for new processes */
	ev_timer rescan_w, end_w;       /* rescans; --duration for them all */
	bool stopping;                  /* stop_all() ran: no new session, the loop ends */
	bool worked;                    /* a target was traced, or answered */
	bool specs_checked;             /* check_specs() has judged the -m specs */
	enum trc_exit churn;            /* the worst outcome of --ps processes that went away */
	int interrupts;
	bool output_failed;
	enum trc_exit code;
	ev_signal signal_w[3];
	ev_prepare flush_w;
	struct trc_top *top;            /* --top: the table, and its live view */
	struct trc_live *live;
	struct trc_export *export;      /* --format other than text */
	/* --exec: the program, which the run waits for; --wait; the end of its connections */
	bool execing;
	struct trc_exec exec;
	ev_timer wait_w, grace_w;
	struct trc_repl *repl;          /* -i */
	char *spool_dir;                /* tracing to a file: where its scratch files go (spool.h) */
};

/*
 * Whether the loop goes on with no session running: --ps waits for new processes until
 * stopped, --exec for its program to end (connecting again after an exec, maybe).
 */
static bool
waits_for_more(const struct cli *c)
{
	if (c->execing)
		return !c->exec.exited;
	return c->ps != NULL && !c->stopping;
}

/* An error of the run, under the trace; held with the notes while a screen is up. */
static void __attribute__((format(printf, 2, 3)))
say_error(struct cli *c, const char *fmt, ...)
{
	struct trc_buf b;
	va_list ap;

	trc_buf_init(&b);
	trc_buf_adds(&b, "tracer: ");
	va_start(ap, fmt);
	trc_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	trc_buf_addc(&b, '\n');
	trc_output_flush(&c->out);
	if (c->out.err_fd < 0)
		trc_buf_add(&c->out.err, b.data, b.len);
	else
		fwrite(b.data, 1, b.len, stderr);
	trc_buf_release(&b);
}

static void
stop_all(struct cli *c, enum trc_stop_reason why)
{
	c->stopping = true;
	ev_timer_stop(c->loop, &c->rescan_w);
	ev_timer_stop(c->loop, &c->end_w);
	if (c->execing) {
		ev_timer_stop(c->loop, &c->wait_w);
		trc_exec_stop_listening(&c->exec);
	}
	for (size_t i = 0; i < c->nsessions; i++)
		trc_session_stop(c->sessions[i], why);
	if (c->running == 0 && !waits_for_more(c))
		ev_break(c->loop, EVBREAK_ALL);
}

/*
 * What a changing set of processes brings, and no error of the run: a process --ps found went
 * away (before or while attached), another client traces it, or the run stopped before it
 * answered. Its message becomes a note, and counts only if nothing else could be traced.
 */
static bool
is_churn(const struct cli *c, const struct trc_session *s, size_t i)
{
	enum trc_exit st = trc_session_status(s);

	if (!c->found[i] || st == TRC_EXIT_OK)
		return false;
	return st == TRC_EXIT_EXITED || trc_session_busy(s) ||
	       (c->stopping && !trc_session_traced(s)) ||
	       trc_proc_check(trc_session_pid(s)) == TRC_PROC_GONE;
}

static size_t
session_index(const struct cli *c, const struct trc_session *s)
{
	size_t i = 0;

	while (i < c->nsessions && c->sessions[i] != s)
		i++;
	return i;
}

/*
 * -m: once every target so far has answered (or ended), the specs that matched nothing in
 * any are said; when no spec matched anything, there is nothing to trace: the run ends with 1.
 */
static void
check_specs(struct cli *c)
{
	const struct trc_job *j = &c->job;
	size_t traced = 0, unmatched = 0;
	struct trc_buf names;

	/* --exec: the program defines what it runs as it goes, and runs on regardless. */
	if (c->specs_checked || j->mode != TRC_MODE_TRACE || j->nspecs == 0 || j->exec)
		return;
	for (size_t i = 0; i < c->nsessions; i++) {
		if (!trc_session_traced(c->sessions[i]) && !trc_session_finished(c->sessions[i]))
			return;
		traced += trc_session_traced(c->sessions[i]);
	}
	if (traced == 0)
		return;
	c->specs_checked = true;
	trc_buf_init(&names);
	for (size_t k = 0; k < j->nspecs; k++) {
		bool hit = false;

		for (size_t i = 0; i < c->nsessions && !hit; i++)
			hit = trc_session_spec_matched(c->sessions[i], k);
		if (!hit)
			trc_buf_addf(&names, "%s%s", unmatched++ ? ", " : "", j->specs[k].text);
	}
	trc_buf_addc(&names, '\0');
	if (unmatched == j->nspecs) {
		if (traced == 1)
			say_error(c, "no method matches -m %s in process %d", names.data,
				  (int)trc_session_pid(c->sessions[0]));
		else
			say_error(c, "no method matches -m %s in any of the %zu processes", names.data,
				  traced);
		if (c->code < TRC_EXIT_ERROR)
			c->code = TRC_EXIT_ERROR;
		stop_all(c, TRC_STOP_END);
	} else if (unmatched > 0 && traced > 1) {
		trc_output_note(&c->out, "no method matches %s in any of the %zu processes", names.data,
				traced);
	}
	trc_buf_release(&names);
}

static void
on_session_started(struct trc_session *s, void *ctx)
{
	struct cli *c = ctx;

	(void)s;
	c->worked = true;
	check_specs(c);
}

/* A session's outcome: its error said (as a note if churn), its code counted. */
static void
account(struct cli *c, struct trc_session *s)
{
	const char *err = trc_session_error(s);
	enum trc_exit st = trc_session_status(s);

	if (trc_session_traced(s) || (c->job.mode != TRC_MODE_TRACE && c->job.mode != TRC_MODE_TOP &&
				      st == TRC_EXIT_OK))
		c->worked = true;
	if (is_churn(c, s, session_index(c, s))) {
		if (err != NULL)
			trc_output_note(&c->out, "%s", err);
		if (st > c->churn)
			c->churn = st;
		return;
	}
	if (err != NULL)
		say_error(c, "%s", err);
	if (st > c->code)
		c->code = st;
}

static void
on_session_done(struct trc_session *s, void *ctx)
{
	struct cli *c = ctx;

	trc_output_flush(&c->out);
	account(c, s);
	c->running--;
	check_specs(c);
	if (c->running == 0 && !waits_for_more(c)) {
		ev_break(c->loop, EVBREAK_ALL);
		return;
	}
	if (c->running == 0 && c->ps != NULL)
		trc_output_note(&c->out, "no process left; waiting for one that matches %s",
				c->o->ps);
	if (c->live != NULL)
		trc_live_update(c->live);
}

static void abort_all(struct cli *c);

/*
 * --exec: tracer and its program share the terminal, whose Ctrl-C reaches both: the program
 * decides what to do with its SIGINT, traced; a second one detaches, a third leaves at once.
 * SIGTERM and SIGHUP, sent to tracer alone, are passed on.
 */
static void
on_exec_signal(struct cli *c, int sig)
{
	if (sig != SIGINT) {
		trc_exec_signal(&c->exec, sig);
		return;
	}
	if (++c->interrupts == 2)
		stop_all(c, TRC_STOP_SIGNAL);
	else if (c->interrupts > 2)
		abort_all(c);
}

/* First signal: detach cleanly. Second: leave now. With -i, Ctrl+C is the prompt's first. */
static void
on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct cli *c = w->data;

	(void)loop, (void)revents;
	if (c->execing) {
		on_exec_signal(c, w->signum);
		return;
	}
	if (c->repl != NULL && w->signum == SIGINT && trc_repl_interrupt(c->repl))
		return;
	if (++c->interrupts == 1) {
		stop_all(c, TRC_STOP_SIGNAL);
		return;
	}
	abort_all(c);
}

static void
abort_all(struct cli *c)
{
	for (size_t i = 0; i < c->nsessions; i++)
		trc_session_abort(c->sessions[i]);
}

/* Runs before the loop blocks: whatever the callbacks printed goes out in one write. */
static void
on_idle_flush(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct cli *c = w->data;

	(void)loop, (void)revents;
	if (trc_output_flush(&c->out) < 0 && !c->output_failed) {
		c->output_failed = true;
		stop_all(c, TRC_STOP_OUTPUT);
	}
}

static void
watch_signals(struct cli *c)
{
	static const int signals[] = { SIGINT, SIGTERM, SIGHUP };

	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
		ev_signal_init(&c->signal_w[i], on_signal, signals[i]);
		c->signal_w[i].data = c;
		ev_signal_start(c->loop, &c->signal_w[i]);
	}
	ev_prepare_init(&c->flush_w, on_idle_flush);
	c->flush_w.data = c;
	ev_prepare_start(c->loop, &c->flush_w);
}

static void
make_job(struct cli *c, const struct opts *o, enum trc_mode mode, const struct trc_spec *specs)
{
	struct trc_job *j = &c->job;

	j->mode = mode;
	j->trace_flags = TRC_TRACE_RAISE | (o->firehose ? TRC_TRACE_FIREHOSE : 0) |
			 (o->slow ? TRC_TRACE_SLOW : 0) | (o->gc ? TRC_TRACE_GC : 0) |
			 (o->slowcpu ? TRC_TRACE_SLOWCPU : 0);
	j->slow_ms = o->slow_ms;
	j->specs = specs;
	j->nspecs = o->nspecs;
	j->trace.prefix = o->prefix;
	j->trace.start_time = o->start_time;
	j->trace.no_duration = o->no_duration;
	j->stats = o->stats;
	j->export = c->export;
	j->top.mode = o->top_mode;
	j->top.interval_ms = (uint32_t)(o->interval * 1000 + 0.5);
	j->top.flags = (o->gc ? TRC_TOP_GC : 0) | (o->sample_by_time ? TRC_TOP_BY_TIME : 0);
	j->top.sample = o->sample;
	j->scope.all = o->all;
	j->scope.prefixes = o->filters;
	j->scope.nprefixes = o->nfilters;
	j->scope.ignores = o->ignores;
	j->scope.nignores = o->nignores;
	j->top.table = c->top;
	j->label_pids = o->npids > 1 || c->ps != NULL;
	j->exec = o->nexec > 0;
	j->timeout = o->timeout;
	/* with --ps or --exec: on_end, for every process and every exec */
	j->duration = c->ps != NULL || j->exec ? 0 : o->duration;
	j->out = &c->out;
	j->spool_dir = c->spool_dir;
}

/* A session for pid, counted as running: the caller starts it. */
static struct trc_session *
add_session(struct cli *c, pid_t pid, bool found)
{
	char *text = eval_text(c->o, c->job.mode, pid);
	struct trc_session *s = trc_session_new(c->loop, &c->job, pid, text, &c->cbs, c);

	free(text);
	if (c->nsessions == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 8;
		c->sessions = xreallocarray(c->sessions, c->cap, sizeof(*c->sessions));
		c->found = xreallocarray(c->found, c->cap, sizeof(*c->found));
	}
	c->sessions[c->nsessions] = s;
	c->found[c->nsessions++] = found;
	c->running++;
	if (c->top != NULL)
		trc_top_add_pid(c->top, pid);
	if (c->live != NULL)
		trc_live_set_sessions(c->live, c->sessions, c->nsessions);
	return s;
}

/* -i: attached; the prompt's turn. */
static void
on_session_ready(struct trc_session *s, void *ctx)
{
	struct cli *c = ctx;

	c->worked = true;
	trc_repl_start(c->repl, s);
}

static void
on_session_answer(struct trc_session *s, void *ctx, bool ok, const char *text, size_t len)
{
	struct cli *c = ctx;

	(void)s;
	trc_repl_answer(c->repl, ok, text, len);
}

static void
start_sessions(struct cli *c)
{
	const struct opts *o = c->o;

	c->cbs = (struct trc_session_cbs){ on_session_started, on_session_done, on_session_ready,
					   on_session_answer };
	for (size_t i = 0; i < o->npids; i++)
		add_session(c, o->pids[i], i >= o->npids_given);
	for (size_t i = 0; i < o->npids; i++)
		trc_session_start(c->sessions[i]);
}

static bool
has_session(const struct cli *c, pid_t pid)
{
	for (size_t i = 0; i < c->nsessions; i++)
		if (trc_session_pid(c->sessions[i]) == pid && !trc_session_finished(c->sessions[i]))
			return true;
	return false;
}

/* Workers come and go: every rescan attaches to the matching processes that are new. */
static void
on_rescan(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cli *c = w->data;
	pid_t *fresh;
	size_t n;

	(void)loop, (void)revents;
	if (trc_ps_scan(c->ps, &fresh, &n) < 0)
		return;         /* /proc unreadable for a moment: the next scan will do */
	for (size_t i = 0; i < n && !c->stopping; i++)
		if (!has_session(c, fresh[i]))
			trc_session_start(add_session(c, fresh[i], true));
	free(fresh);
}

/* --duration with --ps: one end for every process, those found later too. */
static void
on_end(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop, (void)revents;
	stop_all(w->data, TRC_STOP_END);
}

static void
start_rescans(struct cli *c, const struct opts *o)
{
	double every = o->top ? o->interval : DEFAULT_RESCAN;

	ev_timer_init(&c->rescan_w, on_rescan, every, every);
	c->rescan_w.data = c;
	ev_timer_init(&c->end_w, on_end, o->duration, 0);
	c->end_w.data = c;
	if ((c->ps == NULL && !c->execing) || c->stopping)
		return;
	if (c->ps != NULL)
		ev_timer_start(c->loop, &c->rescan_w);
	if (o->duration > 0)
		ev_timer_start(c->loop, &c->end_w);
}

/* ---- --exec ---- */

#define EXEC_GRACE 2.0          /* seconds the program's connections may outlive it */

/*
 * The program connected, at its start or after an exec, or a process it started did (a fork,
 * a Ruby program it spawned): a session of its own. From the first other process on, the
 * lines of the others start with [PID]; the program's own keep no label.
 */
static void
on_exec_connected(struct trc_exec *x, int fd, pid_t pid, void *ctx)
{
	struct cli *c = ctx;

	if (c->stopping) {
		close(fd);      /* it runs on untraced */
		return;
	}
	if (pid != x->pid)
		c->job.label_pids = true;
	trc_session_adopt(add_session(c, pid, false), fd);
}

/* --wait ran out: attach, as to any process. */
static void
on_wait(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cli *c = w->data;

	(void)loop, (void)revents;
	trc_session_start(add_session(c, c->exec.pid, false));
}

/* The program's connection outlived it: something still holds a copy. */
static void
on_grace(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop, (void)revents;
	abort_all(w->data);
}

static void
on_exec_exit(struct trc_exec *x, void *ctx)
{
	struct cli *c = ctx;

	ev_timer_stop(c->loop, &c->wait_w);
	ev_timer_stop(c->loop, &c->end_w);
	if (c->running == 0) {
		ev_break(c->loop, EVBREAK_ALL);
		return;
	}
	/*
	 * The program's sessions read on to the end of what it sent, which its exit has closed.
	 * The processes it left running are detached: tracer ends with the program.
	 */
	for (size_t i = 0; i < c->nsessions; i++)
		if (trc_session_pid(c->sessions[i]) != x->pid)
			trc_session_stop(c->sessions[i], TRC_STOP_END);
	ev_timer_start(c->loop, &c->grace_w);
}

static void
start_exec(struct cli *c, const struct opts *o)
{
	char *lib = trc_exec_agent_lib();
	int rc = trc_exec_start(&c->exec, c->loop, (char *const *)o->exec_argv, lib, o->wait == 0,
				on_exec_connected, on_exec_exit, c);

	free(lib);
	if (rc < 0 && c->exec.exec_failed)
		die(errno == ENOENT ? TRC_EXIT_NOT_FOUND : TRC_EXIT_CANNOT_RUN, "%s", c->exec.error);
	if (rc < 0)
		die(TRC_EXIT_ERROR, "%s", c->exec.error);
	c->execing = true;
	ev_timer_init(&c->wait_w, on_wait, o->wait, 0);
	c->wait_w.data = c;
	ev_timer_init(&c->grace_w, on_grace, EXEC_GRACE, 0);
	c->grace_w.data = c;
	if (o->wait > 0)
		ev_timer_start(c->loop, &c->wait_w);
}

/* How the program ended, as a note; an error if it never connected. */
static void
exec_report(struct cli *c)
{
	const struct trc_exec *x = &c->exec;
	int code = trc_exec_code(x);

	if (WIFSIGNALED(x->status))
		trc_output_note(&c->out, "process %d killed by signal %d (%s)", (int)x->pid,
				WTERMSIG(x->status), strsignal(WTERMSIG(x->status)));
	else
		trc_output_note(&c->out, "process %d exited with status %d", (int)x->pid, code);
	if (c->nsessions == 0 && c->o->wait > 0) {
		trc_output_note(&c->out, "process %d ended before --wait ran out: not traced",
				(int)x->pid);
	} else if (c->nsessions == 0) {
		say_error(c, "process %d never connected: is it a Ruby program, and did it keep the "
			  "RUBYOPT that loads tracer_agent?", (int)x->pid);
		c->code = TRC_EXIT_ERROR;
	}
}

/* The run's outcome with --exec: the program's; or 1 when it succeeded but tracing failed. */
static int
exec_outcome(const struct cli *c)
{
	int code = trc_exec_code(&c->exec);

	return code != 0 ? code : c->code != TRC_EXIT_OK ? TRC_EXIT_ERROR : TRC_EXIT_OK;
}

static struct trc_top *
new_top(const struct opts *o)
{
	struct trc_top *t = trc_top_new(o->top_mode, o->pids, o->npids);
	char why[128];

	for (size_t i = 0; i < o->nignores; i++)
		if (trc_top_ignore(t, o->ignores[i], why, sizeof(why)) < 0)
			die(TRC_EXIT_USAGE, "invalid --ignore regex '%s': %s", o->ignores[i], why);
	return t;
}

/* q on the screen: as a first signal. */
static void
on_quit(void *ctx)
{
	stop_all(ctx, TRC_STOP_SIGNAL);
}

/* --duration keeps the whole run in its one table, unless --reset says otherwise. */
static void
start_live(struct cli *c, const struct opts *o, bool full_screen)
{
	struct trc_live_opts lo = {
		.full_screen = full_screen, .json = o->json, .rows = o->rows,
		.interval = o->interval, .final_only = o->duration > 0, .final = o->nexec > 0,
		.reset = o->reset > 0 ? o->reset : o->duration > 0 ? 0 : DEFAULT_RESET,
		.filters = o->filters, .nfilters = o->nfilters, .all = o->all, .gc = o->gc,
		.sample = o->sample, .sample_by_time = o->sample_by_time,
	};

	c->live = trc_live_start(c->loop, &c->out, c->top, c->sessions, c->nsessions, &lo,
				 on_quit, c);
}

static struct trc_export *
new_export(struct trc_output *out, const struct opts *o, const struct trc_spec *specs,
	   bool watching)
{
	struct trc_export_opts eo = {
		.format = o->format, .tool = "tracer " TRC_CLIENT_VERSION, .specs = specs,
		.nspecs = o->nspecs, .label_pids = o->npids > 1 || watching,
	};

	return trc_export_new(out, &eo);
}

/*
 * Tracing and --top with --ps go on while workers come and go; the one-shot modes (-e,
 * --heapdump, --backtraces...) ask the processes there at the start.
 */
static struct trc_ps *
watched(enum trc_mode mode, struct trc_ps *ps, const struct opts *o)
{
	return o->ps != NULL && (mode == TRC_MODE_TRACE || mode == TRC_MODE_TOP) ? ps : NULL;
}

static void
free_run(struct cli *c)
{
	for (size_t i = 0; i < c->nsessions; i++)
		trc_session_free(c->sessions[i]);
	free(c->sessions);
	free(c->spool_dir);
	free(c->found);
	if (c->export != NULL)
		trc_export_free(c->export);
	if (c->out.fd != STDOUT_FILENO)
		close(c->out.fd);
	trc_output_release(&c->out);
	if (c->top != NULL)
		trc_top_free(c->top);
}

/*
 * A trace going to a regular file goes through a spool (spool.h), whose scratch files go
 * beside it, on its file system: nobody watches a file line by line as it grows, and the
 * spool keeps every event of a flood. To a terminal or a pipe, a trace is formatted as it
 * comes.
 */
static char *
spool_dir(int fd, enum trc_mode mode)
{
	struct stat st;
	char link[64], path[PATH_MAX];
	ssize_t n;
	char *slash;

	if (mode != TRC_MODE_TRACE || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0 || path[0] != '/')
		return NULL;
	path[n] = '\0';
	slash = strrchr(path, '/');
	slash[slash == path ? 1 : 0] = '\0';
	return xstrdup(path);
}

static int
run(const struct opts *o, enum trc_mode mode, const struct trc_spec *specs, struct trc_ps *ps)
{
	struct cli c = { .o = o, .code = TRC_EXIT_OK, .ps = watched(mode, ps, o) };
	int fd = open_output(o), code;
	bool full_screen = mode == TRC_MODE_TOP && !o->json && isatty(fd);

	if (mode == TRC_MODE_TOP)
		c.top = new_top(o);
	trc_output_init(&c.out, fd, STDERR_FILENO);
	compress_output(&c.out, o);
	c.spool_dir = spool_dir(fd, mode);
	if (mode == TRC_MODE_TRACE && o->format != TRC_FORMAT_TEXT)
		c.export = new_export(&c.out, o, specs, c.ps != NULL || o->nexec > 0);
	make_job(&c, o, mode, specs);
	if (o->nexec > 0)
		trc_exec_init(&c.exec);     /* before libev changes the signal mask */
	c.loop = ev_default_loop(0);
	if (c.loop == NULL)
		die(TRC_EXIT_ERROR, "cannot start the event loop");
	if (mode == TRC_MODE_INTERACTIVE)
		c.repl = trc_repl_new(c.loop, &c.out, o->pids[0]);
	watch_signals(&c);
	if (o->nexec > 0)
		start_exec(&c, o);
	start_sessions(&c);
	/* Sessions may all have failed already (then without a loop to break). */
	if (mode == TRC_MODE_TOP && !c.stopping && (c.running > 0 || c.ps != NULL || c.execing))
		start_live(&c, o, full_screen);
	start_rescans(&c, o);
	if (!c.stopping && (c.running > 0 || c.ps != NULL || c.execing))
		ev_run(c.loop, 0);
	if (c.live != NULL)
		trc_live_stop(c.live);
	/* The terminal as it was, before anything more is said. */
	if (c.repl != NULL)
		trc_repl_free(c.repl);
	if (c.execing)
		exec_report(&c);
	/* Every session has ended its part: the file can be completed. */
	if (c.export != NULL)
		trc_export_finish(c.export);
	if (trc_output_end(&c.out) < 0 && c.out.error != EPIPE) {
		fprintf(stderr, "tracer: cannot write the output: %s\n", strerror(c.out.error));
		if (c.code < TRC_EXIT_ERROR)
			c.code = TRC_EXIT_ERROR;
	}
	/* --ps processes that all went away, or refused: then their outcome is the run's. */
	if (!c.worked && c.churn > c.code)
		c.code = c.churn;
	code = c.execing ? exec_outcome(&c) : (int)c.code;
	free_run(&c);
	return code;
}

int
main(int argc, char **argv)
{
	struct opts o = { .slow_ms = DEFAULT_SLOW_MS, .prefix = DEFAULT_PREFIX,
			  .timeout = DEFAULT_TIMEOUT, .rows = DEFAULT_ROWS,
			  .interval = DEFAULT_INTERVAL, .sample = 1 };
	struct trc_spec *specs;
	struct trc_ps ps = { .known = NULL };
	enum trc_mode mode;
	int code;

	parse_args(&o, argc, argv);
	if (o.help) {
		usage();
		return TRC_EXIT_OK;
	}
	if (o.version) {
		printf("tracer %s (protocol %d)\n", TRC_CLIENT_VERSION, TRC_PROTOCOL_VERSION);
		return TRC_EXIT_OK;
	}
	mode = check_mode(&o);
	specs = parse_specs(&o);
	find_ps(&o, &ps);
	check_targets(&o);
	confirm_lasting_cost(&o, specs);
	code = run(&o, mode, specs, &ps);
	if (o.ps != NULL)
		trc_ps_release(&ps);
	for (size_t i = 0; i < o.nspecs; i++)
		trc_spec_release(&specs[i]);
	free(specs);
	for (size_t i = 0; i < o.nspecs; i++) {
		if (o.spec_origins[i] != NULL)
			free((void *)o.specs[i]);       /* a tracer file's line */
		free(o.spec_origins[i]);
	}
	free(o.specs);
	free(o.spec_origins);
	free(o.exec_argv);
	for (size_t i = 0; i < o.nfilters; i++)
		free((void *)o.filters[i]);     /* absolute_prefix's copies */
	free(o.filters);
	free(o.ignores);
	free(o.pids);
	return code;
}
