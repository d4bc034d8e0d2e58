/* tracer_protocol.h: the wire protocol between the tracer_agent extension and the tracer client. */
#ifndef TRACER_PROTOCOL_H
#define TRACER_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Bump TRC_PROTOCOL_VERSION on ANY change to this file that alters bytes on the wire: a new
 * message type, a new field, a changed meaning. Both sides check it on the first message and
 * refuse to talk to a different version (the agent answers TRC_MSG_ERROR/TRC_ERR_VERSION).
 */
#define TRC_PROTOCOL_VERSION 14

/*
 * How a client attaches (all of it in the client's attach.c and ns.c and the agent's control.c):
 *
 *  1. The client listens on a SOCK_STREAM UNIX socket with an abstract name (Linux: no file,
 *     the name lives in the network namespace), TRC_SOCK_NAME_FMT with 64 random bits, made in
 *     the target's network namespace. Nothing of it is in a file system: a private /tmp
 *     (systemd's PrivateTmp), a different TMPDIR or a container's own root on either side does
 *     not matter. A name already taken is replaced by another random one.
 *  2. It opens the SysV message queue TRC_QUEUE_KEY(pid) in the target's IPC namespace, where
 *     pid is the target's pid as the target sees it (the last NSpid field of /proc/PID/status),
 *     with IPC_CREAT and mode 0600 (owned by the target's user when the client is root), puts one
 *     struct trc_hello in it and sends SIGURG to the target's main thread. It repeats the signal
 *     every TRC_RESIGNAL_MS until the agent connects or --timeout expires.
 *  3. The agent's SIGURG handler triggers a postponed job; at the next safe point the job reads
 *     every hello in the queue (IPC_NOWAIT), ignores queues not owned by its own user or root,
 *     and connects to each hello's address. Both sides check the other with SO_PEERCRED:
 *     the client that the peer is the target pid, the agent that the peer's uid is its own or 0.
 *  4. The client removes the queue as soon as a connection is accepted (or on timeout), and
 *     closes the listening socket, which frees the name. From then on everything travels over
 *     the socket, in both directions.
 *
 * Namespaces. The client enters the target's network namespace only around socket() (a socket
 * stays in the namespace it was made in) and its IPC namespace only around the queue calls; it
 * signals and checks the target by the pid it sees. Entering another namespace needs root
 * (CAP_SYS_ADMIN): an unprivileged client is told so rather than left waiting. SO_PEERCRED
 * gives each reader the peer's pid and uid in the reader's own namespaces: the client, which
 * names the target by the pid it sees, compares that; the agent compares uids only (a client
 * in a parent pid namespace has pid 0 there). A root client whose uid has no mapping in the
 * target's user namespace would look like "nobody" to the agent: it is told so before trying.
 *
 * Why an abstract name is as safe as the 0700 socket directory of protocol 2: an abstract
 * socket has no file permissions, and anyone in the network namespace can read the name in
 * /proc/net/unix and connect. But the client accepts only a peer whose SO_PEERCRED pid is the
 * target and closes any other, so a stranger gets nothing and cannot take the target's place;
 * the name is bound before its hello exists, so nobody can hold it first; and the agent
 * connects only to addresses from a queue of its own user or root with mode 0600, and stays
 * only when the listener's SO_PEERCRED uid is its own or root's, so a name taken by someone
 * else after the client left leads nowhere. As before, only the target's user or root gets in.
 *
 * Starting the target (tracer --exec, the client's exec.c and the agent's control.c): the client
 * listens as in step 1 (its name has target pid 0: there is no target yet), then forks and
 * execs the program with the agent preloaded (RUBYLIB, RUBYOPT -rtracer_agent) and
 * TRC_CONNECT_ENV=@name in its environment. The agent, as it loads, connects to @name (the
 * same SO_PEERCRED checks as step 3 on both sides: the client keeps only the program and its
 * descendants) and serves that session right there, holding the GVL, until its TRC_CMD_TRACE or
 * TRC_CMD_TOP has put the hooks in place (or the session ended, or TRC_CONNECT_WAIT_MS passed):
 * the program's first line runs traced. The variable stays in the environment: a program that
 * execs another (bundle exec, a shell's exec) connects again, as a new session, and so do the
 * Ruby programs it spawns, and its forks (as Process._fork returns in the child).
 * Nothing else differs from an attach: the same messages follow.
 *
 * On the socket each message is one msgpack array whose first element is the message type
 * (a positive integer from the ranges below); messages follow each other with no framing, as
 * msgpack is self-delimiting. The first message each way is a hello: TRC_CMD_HELLO from the
 * client, TRC_MSG_WELCOME (or TRC_MSG_ERROR) from the agent. A peer that receives a type it
 * does not know, or an array of the wrong shape, reports a protocol error and closes.
 *
 * File descriptors: only a dump request (TRC_CMD_EVAL, TRC_EVAL_HEAPDUMP or TRC_EVAL_SHAPESDUMP)
 * carries one, the file to write, passed with SCM_RIGHTS on the first byte of that message. The
 * agent keeps at most one received descriptor per session (it closes any other at once), hands
 * it to the dump, which closes it when done, and closes it when the session ends unused.
 *
 * Timestamps are CLOCK_MONOTONIC nanoseconds of the target; TRC_MSG_WELCOME carries one
 * monotonic/realtime pair so the client can turn them into wall-clock times.
 */
#define TRC_QUEUE_KEY(pid) ((key_t)(0x74000000 | ((pid) & 0x00ffffff)))
#define TRC_SOCK_ABSTRACT '@'           /* first byte of a hello's addr: an abstract name */
#define TRC_SOCK_NAME_FMT "tracer-%d-%d-%08x%08x"  /* client pid, target pid, 64 random bits */
#define TRC_RESIGNAL_MS 20
#define TRC_HELLO_MAGIC 0x54524331u /* "TRC1" */
#define TRC_CONNECT_ENV "TRACER_AGENT_CONNECT"
#define TRC_CONNECT_WAIT_MS 10000       /* the longest a program started by --exec waits */
#define TRC_HELLO_WAIT_MS 5000          /* the agent drops a connection whose hello has not come */
/*
 * A detach ends within TRC_DETACH_MS of the client's TRC_CMD_DETACH, whatever the agent still has
 * to send: the client waits no longer for TRC_MSG_DETACHED, and the agent delivers events for at
 * most half of it (taking its wrappers away comes first), then counts the rest as lost.
 */
#define TRC_DETACH_MS 1800

/*
 * The only message that travels through the SysV queue: "connect to me". addr is
 * TRC_SOCK_ABSTRACT followed by the abstract name, whose bytes are exactly those up to the NUL
 * (the address length counts no padding). An addr starting with '/' is a socket file path:
 * the agent still connects to one, so that a protocol 2 client reaches it and is told
 * TRC_ERR_VERSION instead of hearing nothing.
 */
struct trc_hello {
	long mtype;                     /* always TRC_HELLO_MTYPE */
	uint32_t magic;                 /* TRC_HELLO_MAGIC */
	uint32_t version;               /* TRC_PROTOCOL_VERSION */
	int32_t client_pid;             /* the client's pid as it sees itself */
	char addr[108];                 /* NUL-terminated "@name" or path (sun_path size) */
};
#define TRC_HELLO_MTYPE 1
#define TRC_HELLO_SIZE (sizeof(struct trc_hello) - sizeof(long))

/*
 * Client -> agent commands: 1..63. X(NAME, name, type, fields, before_hello): the array has
 * fields elements, the type first; before_hello: allowed before the hello. Each side makes its
 * tables from this list: the client's encoder, the agent's shape checks (wire.c) and commands
 * (command.c).
 *   hello   [1, version, client_pid]
 *   trace   [2, flags, slow_ms, [spec...], scope]  spec: [class|nil, kind, method|nil, [expr...]]
 *   eval    [3, id, kind, text]  kind: enum trc_eval_kind (below)
 *   detach  [4]
 *   top     [5, mode, interval_ms, flags, scope, sample, cap]  count in the agent; see below.
 *           flags: enum trc_top_flag; sample: 1 counts every event, N > 1 (allocation modes
 *           only) about one allocation in N, each as the allocations since the previous one,
 *           or with TRC_TOP_BY_TIME every allocation in about 1/N of the time (estimates either
 *           way); for profile, the samples a second per thread (1..TRC_PROFILE_MAX_HZ). cap
 *           (profile): the most of the wall time the profiler's own work may take, in
 *           millionths (0: no cap); the agent halves the rate (to 1 Hz at least) after each
 *           second in which it took more, and doubles it back, up to the rate asked, after
 *           each second in which it took under a quarter of that (sample.c's keep_cap)
 */
#define TRC_COMMANDS(X) \
	X(HELLO, hello, 1, 3, 1) \
	X(TRACE, trace, 2, 5, 0) \
	X(EVAL, eval, 3, 4, 0) \
	X(DETACH, detach, 4, 1, 1) \
	X(TOP, top, 5, 7, 0)

enum trc_cmd {
#define TRC_X(NAME, name, type, fields, before_hello) TRC_CMD_##NAME = type, TRC_CMD_##NAME##_FIELDS = fields,
	TRC_COMMANDS(TRC_X)
#undef TRC_X
};

/*
 * Limits on what travels, which both sides keep: the sender never goes past them (the client
 * checks the user's values against them before sending anything), and the receiver takes a
 * message beyond them for a malformed one.
 */
#define TRC_MAX_MESSAGE (64u << 20)     /* bytes of one message, either way */
#define TRC_SLOW_MS_MAX 86400000u       /* TRC_CMD_TRACE's slow_ms: a day */
#define TRC_TOP_INTERVAL_MIN_MS 10u     /* TRC_CMD_TOP's interval_ms */
#define TRC_TOP_INTERVAL_MAX_MS 3600000u

/* The most a TRC_CMD_TRACE may hold (more is a malformed message): specs, expressions per spec,
 * scope prefixes and ignores. */
#define TRC_MAX_SPECS 64
#define TRC_MAX_EXPRS 16
#define TRC_MAX_PREFIXES 64
#define TRC_MAX_IGNORES 16

/* The most the agent sends: methods and threads defined in a session, bytes of an -m
 * expression's inspected value (the rest is cut). */
#define TRC_MAX_METHODS (1u << 20)
#define TRC_MAX_THREADS (1u << 20)
#define TRC_MAX_EXPR_TEXT 1024

/*
 * scope: [all, [prefix...], [ignore...]]: which calls firehose (-f), slow calls without -m
 * specs, and the calls and time tables see, and which files the other tables count.
 *   all false  the app's own Ruby methods: those defined in files under a prefix (none given:
 *              under the agent's working directory; a file loaded by a relative path is its
 *              working directory + that path, for the prefixes too), traced through
 *              wrappers put around each, which leave nothing behind once removed. An ignore
 *              (an extended regular expression) leaves out the methods whose "Class#method"
 *              label it matches.
 *   all true   every call, Ruby and C, through the VM's call hooks; the VM keeps part of them
 *              after they are removed, and the process stays slower until it restarts.
 */

/*
 * Top mode: the agent counts events itself and every interval_ms sends one TRC_MSG_TOP with the
 * rows counted since the previous one (deltas: the client adds them up and resets when it likes).
 * A row counts only when its FILE is in the scope (above).
 * Row [file, line, label, count, total_ns, self_ns, buckets], per mode:
 *   calls          file:line of the method's definition (with all, of its Ruby caller for a C
 *                  method), label "Class#method", count = calls
 *   time           as calls, plus total_ns (inclusive, outermost call of a recursion only) and
 *                  self_ns (exclusive), per thread; a method that raises ends at its unwinding;
 *                  buckets: the same outermost calls by their duration (total), TRC_TOP_BUCKETS
 *                  counts: [i] of those up to bound i (TRC_TOP_BUCKET_BOUNDS) and above bound
 *                  i - 1, the last of those above every bound. Every other mode: buckets [].
 *   objects-total  file "" line 0, label = class name, count = allocations
 *   objects        file:line of the allocation, label = class name
 *   arrays         file:line of Array and Hash allocations, label ""
 *   strings        file:line of String allocations, label ""
 *   exceptions     file:line of the raise, label = exception class
 *   threads        file "" line 0, label = the thread's name, count = turns on the GVL,
 *                  total_ns = waiting for it, self_ns = holding it
 *   profile        no rows: the agent sends TRC_MSG_PROFILE (below), from which the client
 *                  makes them
 * TRC_MSG_TOP also carries the events seen in the interval and those lost (a full count table).
 *
 * Paths (time, with TRC_TOP_PATHS): the agent also counts each call path's calls and self time,
 * a path being a method called from a path (0: from no counted call; threads are not told
 * apart). Paths have ids from 1, kept for the session, at most TRC_TOP_MAX_PATHS: a call whose
 * path finds no room counts for its caller's. Path [id, parent, file, line, label, count,
 * self_ns] (file and line of the method's definition, "" and 0 for a C method): each new path
 * once, in id order, with its first figures, then each older path whose figures changed (their
 * deltas); a parent always comes before its child.
 */
#define TRC_TOP_MAX_ROWS 65536
#define TRC_TOP_MAX_PATHS 65536

/*
 * --top time's duration buckets: their upper bounds in nanoseconds, 10 us to 10 s in steps of
 * 1, 2.5 and 5 (what a Prometheus histogram's le labels show, in seconds), and one bucket above.
 * Fixed: every agent and client agree on them without saying them on the wire.
 */
#define TRC_TOP_BUCKET_BOUNDS(X) \
	X(10000) X(25000) X(50000) X(100000) X(250000) X(500000) \
	X(1000000) X(2500000) X(5000000) X(10000000) X(25000000) X(50000000) \
	X(100000000) X(250000000) X(500000000) X(1000000000) X(2500000000) X(5000000000) \
	X(10000000000)
#define TRC_TOP_BUCKETS 20      /* the bounds, and the bucket above them */
#define TRC_GC_NO_THREAD 0xffffffffu

/* TRC_CMD_TRACE flags. */
enum trc_trace_flag {
	TRC_TRACE_FIREHOSE = 1 << 0,    /* every Ruby and C call */
	TRC_TRACE_SLOW = 1 << 1,        /* only calls slower than slow_ms (TRC_EV_SLOW) */
	TRC_TRACE_RAISE = 1 << 2,       /* exceptions (TRC_EV_RAISE) */
	TRC_TRACE_GC = 1 << 3,          /* garbage collections (TRC_EV_GC) */
	TRC_TRACE_SLOWCPU = 1 << 4,     /* with TRC_TRACE_SLOW: slow by the CPU time of the call's
					 * thread, which TRC_EV_SLOW's duration then is */
};

/* The most TRC_CMD_TOP's sample may be. */
#define TRC_TOP_MAX_SAMPLE 65536

/* TRC_CMD_TOP flags. */
enum trc_top_flag {
	TRC_TOP_GC = 1 << 0,            /* count garbage collections (TRC_MSG_TOP's gc fields) */
	TRC_TOP_BY_TIME = 1 << 1,       /* allocation modes, sample N > 1: the allocation hook is on
					 * for windows of TRC_TOP_WINDOW_US, about 1/N of the time at
					 * random, and each interval's counts are scaled by the VM's
					 * own count of allocations over the windows' */
	TRC_TOP_WALL = 1 << 2,          /* profile: every thread at every tick, by wall-clock time,
					 * running or not; else each thread by the CPU time it uses */
	TRC_TOP_PATHS = 1 << 3,         /* time: count the calls' paths too (TRC_MSG_TOP's paths) */
};
#define TRC_TOP_WINDOW_US 1000
#define TRC_PROFILE_MAX_HZ 10000
#define TRC_PROFILE_MAX_CAP 1000000     /* cap: millionths of the wall time */
/* The largest ids a TRC_MSG_PROFILE may hold: frames of a session, threads, tags, and nodes of
 * one message (a receiver leaves out what is beyond). */
#define TRC_PROFILE_MAX_FRAME_ID (1u << 20)
#define TRC_PROFILE_MAX_THREAD_ID (1u << 16)
#define TRC_PROFILE_MAX_TAG_ID (1u << 16)
#define TRC_PROFILE_MAX_NODE_ID (1u << 20)

/*
 * What a frame of a sampled stack is (TRC_MSG_PROFILE): pseudo-frames stand for what has no
 * Ruby frame. The client colours and groups by it.
 */
enum trc_frame_kind {
	TRC_FRAME_RUBY = 0,     /* a Ruby method or block: file and line of its definition */
	TRC_FRAME_C = 1,        /* a C method (no file of its own), or C run without the GVL */
	TRC_FRAME_GC = 2,       /* garbage collection, marking, sweeping */
	TRC_FRAME_GVL = 3,      /* waiting for the GVL */
	TRC_FRAME_BLOCKED = 4,  /* the GVL let go: sleeping, IO, a C call that released it */
	TRC_FRAME_OTHER = 5,    /* a frame that could not be named, deeper frames left out */
};
#define TRC_FRAME_KIND_LAST TRC_FRAME_OTHER

/* kind of a method spec. */
enum trc_spec_kind {
	TRC_SPEC_INSTANCE = 0,  /* Class#method, or Class# (method nil) for all of them */
	TRC_SPEC_SINGLETON = 1, /* Class.method, or Class. for all of them */
	TRC_SPEC_ANY = 2,       /* method: any receiver (class nil) */
};

/*
 * What a TRC_CMD_EVAL asks. The agent answers each with one TRC_MSG_EVAL of the same id, and
 * runs each but TRC_EVAL_INTERRUPT in a Ruby thread of its own (named tracer-eval), so several
 * may run at once. A failure is the TRC_MSG_EVAL with ok false and "Class: message".
 */
#define TRC_EVAL_KINDS(X) \
	/* text: Ruby code, run at the top level; reply: inspect of the value */ \
	X(CODE, 0) \
	/* text: the file's name, for messages only; the message carries the open file \
	 * (SCM_RIGHTS, above), which the agent writes and closes; reply: its size in bytes */ \
	X(HEAPDUMP, 1) \
	/* text: "" or N; reply: every thread's name and backtrace, its N innermost frames ("": \
	 * all of them) */ \
	X(BACKTRACES, 2) \
	/* text: N; reply: the main thread's N innermost frames, a line each */ \
	X(BACKTRACE, 3) \
	/* text: Ruby code, run in the session's own Binding: the locals it makes last until the \
	 * session ends; reply: inspect of the value */ \
	X(REPL, 4) \
	/* text: Ruby code; reply: "incomplete" when it ends inside an unfinished expression (a \
	 * def without its end, an open string...), else "complete" (a syntax error too: running \
	 * it says which) */ \
	X(COMPLETE, 5) \
	/* text: ""; answered at once, without a thread: raises Interrupt in the session's \
	 * TRC_EVAL_REPL evals still running (theirs replies then say so); reply: how many */ \
	X(INTERRUPT, 6) \
	/* text: ""; reply: the pid of a copy of the process (fork), stopped (SIGSTOP) before it \
	 * runs anything; it exits once continued, and the process reaps it */ \
	X(FORK, 7) \
	/* as TRC_EVAL_HEAPDUMP, with ObjectSpace.dump_shapes (Ruby 3.2+; fails on a Ruby without \
	 * it); reply: the file's size in bytes */ \
	X(SHAPESDUMP, 8) \
	/* text: ""; reply: a report of the process's memory (text), made in a forked copy so that \
	 * the process itself pauses only to fork */ \
	X(MEMORY, 9)

/* TRC_EVAL_CODE = 0...; the agent names them TracerAgent::EVAL_CODE... for lib/'s Ruby. */
enum trc_eval_kind {
#define TRC_X(NAME, value) TRC_EVAL_##NAME = value,
	TRC_EVAL_KINDS(TRC_X)
#undef TRC_X
};
#define TRC_X(NAME, value) + 1
enum { TRC_EVAL_COUNT = 0 TRC_EVAL_KINDS(TRC_X) };
#undef TRC_X
#define TRC_EVAL_LAST (TRC_EVAL_COUNT - 1)
/* The kinds are 0..TRC_EVAL_LAST, each once: the wire checks kind <= TRC_EVAL_LAST. */
#define TRC_X(NAME, value) | (1u << (value))
_Static_assert((0u TRC_EVAL_KINDS(TRC_X)) == (1u << TRC_EVAL_COUNT) - 1,
	       "TRC_EVAL_KINDS: values 0..count-1, each once");
#undef TRC_X

/*
 * Top modes (TRC_CMD_TOP): what both sides make their tables from (the agent's counting hooks;
 * the client's option, help, columns and checks). X(NAME, value, "name", flags, label title,
 * label's JSON key, count title, total title, self title, "what it counts"): flags are enum
 * trc_top_mode_flag; a title NULL has no column.
 */
#define TRC_TOP_MODES(X) \
	X(CALLS, 0, "calls", TRC_TOPM_METHOD, "METHOD", "method", "CALLS", NULL, NULL, \
	    "calls of the app's methods (--all: of every method)") \
	X(TIME, 1, "time", TRC_TOPM_METHOD | TRC_TOPM_TIMED, "METHOD", "method", "CALLS", "TOTAL", "SELF", \
	    "time in the app's methods, with and without their callees") \
	X(OBJECTS_TOTAL, 2, "objects-total", TRC_TOPM_ALLOC | TRC_TOPM_CLASS | TRC_TOPM_NO_SITE, "OBJECT", \
	    "object", "COUNT", NULL, NULL, "allocations by class") \
	X(OBJECTS, 3, "objects", TRC_TOPM_ALLOC | TRC_TOPM_CLASS, "OBJECT", "object", "COUNT", NULL, NULL, \
	    "allocations by class and the line that made them") \
	X(ARRAYS, 4, "arrays", TRC_TOPM_ALLOC, NULL, NULL, "COUNT", NULL, NULL, \
	    "Array and Hash allocations by line") \
	X(STRINGS, 5, "strings", TRC_TOPM_ALLOC, NULL, NULL, "COUNT", NULL, NULL, "String allocations by line") \
	X(EXCEPTIONS, 6, "exceptions", TRC_TOPM_RAISE | TRC_TOPM_CLASS, "EXCEPTION", "exception", "COUNT", \
	    NULL, NULL, "raises by class and line, with the app's frame nearest each") \
	X(THREADS, 7, "threads", TRC_TOPM_THREAD | TRC_TOPM_TIMED | TRC_TOPM_NO_SITE, "THREAD", "thread", "RUNS", \
	    "WAITED", "HELD", "each thread's turns on the GVL: time waiting for it, and holding it (Ruby 3.3+)") \
	X(PROFILE, 8, "profile", TRC_TOPM_PROFILE | TRC_TOPM_TIMED, "FRAME", "frame", "SAMPLES", "TOTAL", "SELF", \
	    "every thread's stack sampled (--hz, --wall): where the time goes, Ruby and C, GC and waits")

enum trc_top_mode_flag {
	TRC_TOPM_METHOD = 1 << 0,       /* rows are methods: calls, through wrappers or the VM's hook */
	TRC_TOPM_TIMED = 1 << 1,        /* rows have total_ns and self_ns */
	TRC_TOPM_ALLOC = 1 << 2,        /* counts allocations: the only modes --sample applies to */
	TRC_TOPM_RAISE = 1 << 3,        /* counts raises */
	TRC_TOPM_CLASS = 1 << 4,        /* the label is a class's name */
	TRC_TOPM_NO_SITE = 1 << 5,      /* rows have no file:line (file "", line 0) */
	TRC_TOPM_THREAD = 1 << 6,       /* rows are threads, from the VM's thread events: count = turns
					 * on the GVL, total_ns = waiting for it, self_ns = holding it */
	TRC_TOPM_PROFILE = 1 << 7,      /* rows are frames of sampled stacks: the agent sends
					 * TRC_MSG_PROFILE, from which the client makes them: count =
					 * samples, total_ns and self_ns the time in and under each */
};

enum trc_top_mode {
#define TRC_X(NAME, value, name, flags, label, key, count, total, self, help) TRC_TOP_##NAME = value,
	TRC_TOP_MODES(TRC_X)
#undef TRC_X
};
#define TRC_TOP_LAST TRC_TOP_PROFILE

/*
 * Agent -> client replies: 64..127. X(NAME, name, type, fields): the array has fields
 * elements, the type first. The agent's encode.c writes each, the client's decode.c reads each.
 *   welcome   [64, version, pid, ruby_version, cwd, mono_ns, real_ns, yjit, ractors]
 *             ractors: how many; only the main one is traced
 *   error     [65, code, message]  code: enum trc_err
 *   spec      [66, spec_index, matched, pending, message, skipped]  matched 0: nothing found,
 *             and message says why; pending: its class is not defined yet, and what it names
 *             is traced from its definition (as are methods defined later); matched > 0:
 *             message says where what it names comes from when not from the class named (""
 *             else); skipped: the methods it names that were left out, and why ("" when none)
 *   started   [67, wrapped, install_ns]  hooks are on: every wrapper is in place (wrapped of
 *             them, put there in install_ns)
 *   eval      [68, id, ok, text]  ok false: text is "Class: message"
 *   detached  [69, events, lost, nomem]  totals for the session; nomem: the agent's
 *             allocations that failed during it (what needed them did without)
 *   top       [70, elapsed_ns, events, lost, gcs, major_gcs, gc_ns,
 *              [[file, line, label, count, total_ns, self_ns, buckets, app_file, app_line]...],
 *              [[id, parent, file, line, label, count, self_ns]...]]
 *             counts since the previous TRC_MSG_TOP (deltas); gc_ns: the time the collections
 *             stopped the app (0s without TRC_TOP_GC); the paths: [] without TRC_TOP_PATHS;
 *             app_file and app_line: exceptions, the innermost frame of the raising thread's
 *             stack under the scope's prefixes ("", 0: none, and every other mode)
 *   progress  [71, step, done, total]  putting wrappers in place, or taking them away, takes a
 *             while: step is enum trc_step; sent every TRC_PROGRESS_MS or so while it lasts
 *   profile   [72, frames, threads, tags, elapsed_ns, samples, lost, hz, own_ns, roots, nodes,
 *              weights]  --top profile, instead of top: one interval's sampled stacks, as a
 *             tree whose node ids hold for this message only. frames: [[id, kind, label, file,
 *             line]...] the frames first seen (ids hold for the session; kind: enum
 *             trc_frame_kind); threads: [[idx, name]...] threads new or named anew; tags:
 *             [[id, text]...]; samples taken in the interval, and lost (buffers full); hz: the
 *             rate now (below the one asked while the cap holds it back); own_ns: the
 *             profiler's own time in the process; roots: [[node, thread, tag]...]; nodes:
 *             [[node, parent, frame]...], each after its parent; weights: [[node, samples,
 *             cpu_ns, wall_ns]...] what ended at each node (wall_ns 0 without TRC_TOP_WALL)
 */
#define TRC_MESSAGES(X) \
	X(WELCOME, welcome, 64, 9) \
	X(ERROR, error, 65, 3) \
	X(SPEC, spec, 66, 6) \
	X(STARTED, started, 67, 3) \
	X(EVAL, eval, 68, 4) \
	X(DETACHED, detached, 69, 4) \
	X(TOP, top, 70, 9) \
	X(PROGRESS, progress, 71, 4) \
	X(PROFILE, profile, 72, 12)

enum trc_msg {
#define TRC_X(NAME, name, type, fields) TRC_MSG_##NAME = type, TRC_MSG_##NAME##_FIELDS = fields,
	TRC_MESSAGES(TRC_X)
#undef TRC_X
};

/*
 * Wrapping the app's methods (-f, -s, --top calls and time) is done in slices, between which
 * the app runs: its modules are looked at first, then what was found is wrapped; at the end of
 * the session the wrappers are taken away. TRC_MSG_STARTED comes once all are in place, and
 * TRC_MSG_DETACHED once all are gone.
 */
enum trc_step {
	TRC_STEP_FIND = 0,      /* done of total modules looked at for the app's methods */
	TRC_STEP_WRAP = 1,      /* done of total methods wrapped */
	TRC_STEP_REMOVE = 2,    /* done of total wrappers taken away */
};
#define TRC_PROGRESS_MS 200

/*
 * The VM's basic operations, by class (Ruby's vm.c, vm_init_redefined_flag): a method one of
 * them is made of runs without a call, until anything redefines it, after which it takes a slow
 * path for the rest of the process, even once the definition is gone. X(class, " op op ... ").
 */
#define TRC_BASIC_OPS(X) \
	X("Integer", " + - * / % == === < <= > >= [] succ & | <=> ") \
	X("Float", " + - * / % == === < <= > >= <=> ") \
	X("String", " + == === << length size empty? succ =~ freeze -@ <=> ") \
	X("Array", " + << [] []= length size empty? freeze max min hash include? pack ") \
	X("Hash", " [] []= length size empty? freeze default ") \
	X("Symbol", " == === ") \
	X("NilClass", " === nil? ") \
	X("TrueClass", " === ") \
	X("FalseClass", " === ") \
	X("Regexp", " =~ ") \
	X("Proc", " call ") \
	X("BasicObject", " ! != ")

enum trc_err {
	TRC_ERR_VERSION = 1,    /* protocol versions differ */
	TRC_ERR_BUSY = 2,       /* already traced; message says by which pid */
	TRC_ERR_DENIED = 3,     /* peer's user may not attach */
	TRC_ERR_EVAL_DISABLED = 4,
	TRC_ERR_PROTOCOL = 5,   /* malformed message */
	TRC_ERR_INTERNAL = 6,
	TRC_ERR_UNSUPPORTED = 7,        /* this process's Ruby cannot do what was asked (--top threads
					 * without the VM's thread events): no process of the same Ruby
					 * can, and the client ends the run on it */
};

/*
 * Agent -> client trace events: 128..191. X(NAME, name, type, fields), as the replies.
 *   method  [128, idx, class, sep, name, path, line]  defines method idx; sent before any event
 *           that uses it. sep is "#" or "." (or "" when class is "")
 *   thread  [129, idx, name]  defines thread idx
 *   call    [130, thread, method, ts]
 *   return  [131, thread, method, ts]
 *   raise   [132, thread, ts, class, message, path, line]
 *   expr    [133, thread, spec, expr, text]  value of expression expr of spec at the thread's
 *           latest call
 *   slow    [134, thread, method, start_ts, duration_ns, depth]
 *   lost    [135, count]  count events were dropped here (agent buffer full)
 *   gc      [136, thread, start_ts, pause_ns, major, reason]  a garbage collection, from its
 *           start to the end of its sweep, on the thread that triggered it (TRC_GC_NO_THREAD:
 *           one not traced); pause_ns: the time its steps stopped the app; reason: its
 *           major_by when major, else its gc_by ("nofree", "newobj", ...)
 *
 * Marks: events of one shape, [type, thread, ts, text], a moment on a thread (TRC_NO_THREAD:
 * none the trace names) with a text, listed in TRC_MARKS. The client decodes, replays, prints
 * and exports every mark from that list alone (the printer as "TITLE text" at the thread's
 * depth): a new one is its line there and the agent's hook that records it.
 * X(NAME, name, type, "TITLE", "what it is"): name is its key in --format jsonl.
 */
#define TRC_EVENTS(X) \
	X(METHOD, method, 128, 7) \
	X(THREAD, thread, 129, 3) \
	X(CALL, call, 130, 4) \
	X(RETURN, return, 131, 4) \
	X(RAISE, raise, 132, 7) \
	X(EXPR, expr, 133, 5) \
	X(SLOW, slow, 134, 6) \
	X(LOST, lost, 135, 2) \
	X(GC, gc, 136, 6)

#define TRC_MARKS(X) \
	X(THREAD_BEGIN, thread_begin, 137, "THREAD BEGIN", \
	    "a thread starts (-f, -m); thread TRC_NO_THREAD, as it may not have its name yet; " \
	    "text: its #inspect, with where it was made") \
	X(THREAD_END, thread_end, 138, "THREAD END", "a thread ends (-f, -m); text: its #inspect")
#define TRC_MARK_FIELDS 4
#define TRC_NO_THREAD 0xffffffffu       /* a mark's thread when the trace names none */

enum trc_ev {
#define TRC_X(NAME, name, type, fields) TRC_EV_##NAME = type, TRC_EV_##NAME##_FIELDS = fields,
	TRC_EVENTS(TRC_X)
#undef TRC_X
#define TRC_X(NAME, name, type, title, help) TRC_EV_##NAME = type,
	TRC_MARKS(TRC_X)
#undef TRC_X
};

#endif
