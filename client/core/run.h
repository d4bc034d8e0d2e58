/* run.h: one run of tracer: the output, a session per target, the event loop, the exit code. */
#ifndef TRC_RUN_H
#define TRC_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "export.h"
#include "opt.h"
#include "ps.h"
#include "session.h"
#include "spec.h"
#include "top.h"

/*
 * What the command line asks for, parsed and checked (cli.c fills it: options write their
 * fields directly). Read-only to the run; everything it points to outlives the run.
 */
struct trc_run_opts {
	enum trc_mode mode;
	/* the targets */
	pid_t *pids;                    /* -p's, then those --ps found at the start */
	size_t npids;
	size_t npids_given;             /* how many of them -p gave */
	const char *ps_regex;           /* --ps REGEX, or NULL */
	struct trc_ps *ps;              /* --ps: the processes known so far; NULL without */
	struct trc_opt_list exec;       /* --exec: the command and its arguments; n 0: none */
	double wait;                    /* --exec --wait; 0: at its first line */
	double duration, timeout;       /* duration 0: until stopped */
	/* tracing */
	const struct trc_spec *specs;
	size_t nspecs;
	bool firehose, slow, slowcpu, gc, stats;
	unsigned slow_ms;
	unsigned prefix;                /* -r */
	bool start_time, no_duration;   /* -t, -n */
	/* looking inside */
	const char *eval;               /* -e CODE */
	const char *heapdump_path, *shapesdump_path;    /* absolute; NULL: a name in $TMPDIR */
	unsigned frames;                /* --backtraces N, --backtrace N; 0: all */
	/* --top, and the scope of -f and -s */
	enum trc_top_mode top_mode;
	unsigned rows;
	unsigned sample;                /* 1: every allocation */
	bool sample_by_time;
	unsigned hz;                    /* --top profile: samples a second */
	bool wall;                      /* ... by wall-clock time, not CPU time */
	unsigned cap_ppm;               /* ... the profiler's own time at most, in millionths */
	double interval, reset;         /* reset 0: the default */
	bool json, all;
	const char *metrics;            /* --metrics ADDR as given, or NULL; parsed: */
	struct sockaddr_storage metrics_addr;
	socklen_t metrics_addrlen;
	struct trc_opt_list labels;     /* --label KEY=VALUE, checked */
	struct trc_opt_list filters;    /* absolute prefixes */
	struct trc_opt_list ignores;
	/* the output */
	const char *output;             /* -o FILE, or NULL: stdout */
	bool append;
	enum trc_format format;
	enum trc_split split;           /* --split: collapsed, flamegraph */
	double min_share;               /* --min-share, as a fraction: flamegraph */
};

/* The version this client says it is, in --version and in exported files. */
#define TRC_CLIENT_VERSION "0.1.0"

/*
 * Attaches to the targets (or starts --exec's program), runs the event loop until every
 * session has ended, and returns the exit code (enum trc_exit, or --exec's program's).
 * Errors go to stderr. Main thread; once per process (it takes the default libev loop and the
 * signals SIGINT, SIGTERM, SIGHUP and SIGPIPE).
 */
int trc_run(const struct trc_run_opts *o);

#endif
