/* tracer_protocol.h: the wire protocol between the tracer_agent extension and the tracer client. */
#ifndef TRACER_PROTOCOL_H
#define TRACER_PROTOCOL_H

#include <stdint.h>
#include <sys/types.h>

/*
 * Bump TRC_PROTOCOL_VERSION on ANY change to this file that alters bytes on the wire: a new
 * message type, a new field, a changed meaning. Both sides check it on the first message and
 * refuse to talk to a different version (the agent answers TRC_MSG_ERROR/TRC_ERR_VERSION).
 */
#define TRC_PROTOCOL_VERSION 2

/*
 * How a client attaches (all of it in the client's attach.c and the agent's control.c):
 *
 *  1. The client makes a directory only it (or, when it runs as root, only the target's user)
 *     can enter, TRC_SOCK_DIR_FMT, mode 0700, and listens there on a SOCK_STREAM UNIX socket
 *     named TRC_SOCK_NAME.
 *  2. It opens the SysV message queue TRC_QUEUE_KEY(target pid) with IPC_CREAT and mode 0600
 *     (owned by the target's user when the client is root), puts one struct trc_hello in it and
 *     sends SIGURG to the target's main thread. It repeats the signal every
 *     TRC_RESIGNAL_MS until the agent connects or --timeout expires.
 *  3. The agent's SIGURG handler triggers a postponed job; at the next safe point the job reads
 *     every hello in the queue (IPC_NOWAIT), ignores queues not owned by its own user or root,
 *     and connects to each hello's socket path. Both sides check the other with SO_PEERCRED:
 *     the client that the peer is the target pid, the agent that the peer's uid is its own or 0.
 *  4. The client removes the queue as soon as a connection is accepted (or on timeout). From then
 *     on everything travels over the socket, in both directions.
 *
 * On the socket each message is one msgpack array whose first element is the message type
 * (a positive integer from the ranges below); messages follow each other with no framing, as
 * msgpack is self-delimiting. The first message each way is a hello: TRC_CMD_HELLO from the
 * client, TRC_MSG_WELCOME (or TRC_MSG_ERROR) from the agent. A peer that receives a type it
 * does not know, or an array of the wrong shape, reports a protocol error and closes.
 *
 * Timestamps are CLOCK_MONOTONIC nanoseconds of the target; TRC_MSG_WELCOME carries one
 * monotonic/realtime pair so the client can turn them into wall-clock times.
 */
#define TRC_QUEUE_KEY(pid) ((key_t)(0x74000000 | ((pid) & 0x00ffffff)))
#define TRC_SOCK_DIR_FMT "%s/tracer-%d-%d"      /* tmpdir, client pid, target pid */
#define TRC_SOCK_NAME "sock"
#define TRC_RESIGNAL_MS 20
#define TRC_HELLO_MAGIC 0x54524331u /* "TRC1" */

/* The only message that travels through the SysV queue: "connect to me". */
struct trc_hello {
	long mtype;                     /* always TRC_HELLO_MTYPE */
	uint32_t magic;                 /* TRC_HELLO_MAGIC */
	uint32_t version;               /* TRC_PROTOCOL_VERSION */
	int32_t client_pid;
	char path[108];                 /* NUL-terminated socket path (sun_path size) */
};
#define TRC_HELLO_MTYPE 1
#define TRC_HELLO_SIZE (sizeof(struct trc_hello) - sizeof(long))

/* Client -> agent commands: 1..63. */
enum trc_cmd {
	TRC_CMD_HELLO = 1,      /* [1, version, client_pid] */
	TRC_CMD_TRACE = 2,      /* [2, flags, slow_ms, [spec...], scope]  spec: [class|nil, kind, method|nil, [expr...]] */
	TRC_CMD_EVAL = 3,       /* [3, id, kind, text]  kind: enum trc_eval_kind */
	TRC_CMD_DETACH = 4,     /* [4] */
	TRC_CMD_TOP = 5,        /* [5, mode, interval_ms, scope]  count in the agent; see below */
};

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
 * Row [file, line, label, count, total_ns, self_ns], per mode:
 *   calls          file:line of the method's definition (with all, of its Ruby caller for a C
 *                  method), label "Class#method", count = calls
 *   time           as calls, plus total_ns (inclusive, outermost call of a recursion only) and
 *                  self_ns (exclusive), per thread; a method that raises ends at its unwinding
 *   objects-total  file "" line 0, label = class name, count = allocations
 *   objects        file:line of the allocation, label = class name
 *   arrays         file:line of Array and Hash allocations, label ""
 *   strings        file:line of String allocations, label ""
 *   exceptions     file:line of the raise, label = exception class
 * TRC_MSG_TOP also carries the events seen in the interval and those lost (a full count table).
 */
#define TRC_TOP_MAX_ROWS 65536

/* TRC_CMD_TRACE flags. */
enum trc_trace_flag {
	TRC_TRACE_FIREHOSE = 1 << 0,    /* every Ruby and C call */
	TRC_TRACE_SLOW = 1 << 1,        /* only calls slower than slow_ms (TRC_EV_SLOW) */
	TRC_TRACE_RAISE = 1 << 2,       /* exceptions (TRC_EV_RAISE) */
};

/* kind of a method spec. */
enum trc_spec_kind {
	TRC_SPEC_INSTANCE = 0,  /* Class#method, or Class# (method nil) for all of them */
	TRC_SPEC_SINGLETON = 1, /* Class.method, or Class. for all of them */
	TRC_SPEC_ANY = 2,       /* method: any receiver (class nil) */
};

enum trc_eval_kind {
	TRC_EVAL_CODE = 0,      /* text: Ruby code; reply: inspect of the value */
	TRC_EVAL_HEAPDUMP = 1,  /* text: absolute path; reply: "PATH SIZE" */
	TRC_EVAL_BACKTRACES = 2,/* text: ""; reply: every thread's name and backtrace */
};

/* top modes (TRC_CMD_TOP). */
enum trc_top_mode {
	TRC_TOP_CALLS = 0,
	TRC_TOP_TIME = 1,
	TRC_TOP_OBJECTS_TOTAL = 2,
	TRC_TOP_OBJECTS = 3,
	TRC_TOP_ARRAYS = 4,
	TRC_TOP_STRINGS = 5,
	TRC_TOP_EXCEPTIONS = 6,
};

/* Agent -> client replies: 64..127. */
enum trc_msg {
	TRC_MSG_WELCOME = 64,   /* [64, version, pid, ruby_version, cwd, mono_ns, real_ns, yjit,
				 *  ractors]  ractors: how many; only the main one is traced */
	TRC_MSG_ERROR = 65,     /* [65, code, message]  code: enum trc_err */
	TRC_MSG_SPEC = 66,      /* [66, spec_index, matched, message]  matched 0: nothing found */
	TRC_MSG_STARTED = 67,   /* [67]  hooks are on */
	TRC_MSG_EVAL = 68,      /* [68, id, ok, text]  ok false: text is "Class: message" */
	TRC_MSG_DETACHED = 69,  /* [69, events, lost]  totals for the session */
	TRC_MSG_TOP = 70,       /* [70, elapsed_ns, events, lost, [[file, line, label, count, total_ns, self_ns]...]]
				 * counts since the previous TRC_MSG_TOP (deltas) */
};

enum trc_err {
	TRC_ERR_VERSION = 1,    /* protocol versions differ */
	TRC_ERR_BUSY = 2,       /* already traced; message says by which pid */
	TRC_ERR_DENIED = 3,     /* peer's user may not attach */
	TRC_ERR_EVAL_DISABLED = 4,
	TRC_ERR_PROTOCOL = 5,   /* malformed message */
	TRC_ERR_INTERNAL = 6,
};

/* Agent -> client trace events: 128..191. */
enum trc_ev {
	TRC_EV_METHOD = 128,    /* [128, idx, class, sep, name, path, line]  defines method idx; sent
				 * before any event that uses it. sep is "#" or "." (or "" when class is "") */
	TRC_EV_THREAD = 129,    /* [129, idx, name]  defines thread idx */
	TRC_EV_CALL = 130,      /* [130, thread, method, ts] */
	TRC_EV_RETURN = 131,    /* [131, thread, method, ts] */
	TRC_EV_RAISE = 132,     /* [132, thread, ts, class, message, path, line] */
	TRC_EV_EXPR = 133,      /* [133, thread, spec, expr, text]  value of expression expr of spec
				 * at the thread's latest call */
	TRC_EV_SLOW = 134,      /* [134, thread, method, start_ts, duration_ns, depth] */
	TRC_EV_LOST = 135,      /* [135, count]  count events were dropped here (agent buffer full) */
};

#endif
