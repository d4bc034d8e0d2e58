/* decode.h: turns the agent's msgpack byte stream into typed messages (struct trc_message). */
#ifndef TRC_DECODE_H
#define TRC_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "tracer_protocol.h"

/* Limits that turn absurd lengths into protocol errors instead of allocations or waits: the
 * protocol's own (tracer_protocol.h), which the agent keeps when it sends. */
#define TRC_DECODE_MAX_MSG TRC_MAX_MESSAGE      /* one message, all fields */
#define TRC_DECODE_MAX_ROWS TRC_TOP_MAX_ROWS    /* rows of one TRC_MSG_TOP */
#define TRC_DECODE_MAX_PATHS TRC_TOP_MAX_PATHS  /* paths of one TRC_MSG_TOP */

/* A string inside the decoded buffer: not NUL-terminated, valid as long as the buffer is.
 * msgpack str, bin and nil (as "") are all accepted. */
struct trc_str {
	const char *ptr;
	uint32_t len;
};

struct trc_top_row {
	struct trc_str file;
	int32_t line;
	struct trc_str label;
	uint64_t count;
	uint64_t total_ns;
	uint64_t self_ns;
	uint8_t nbuckets;       /* TRC_TOP_BUCKETS (--top time), or 0 */
	uint64_t buckets[TRC_TOP_BUCKETS];      /* outermost calls by duration (tracer_protocol.h) */
	struct trc_str app_file;        /* exceptions: the app's frame nearest the raise ("": none) */
	int32_t app_line;
};

/* TRC_MSG_PROFILE's lists (tracer_protocol.h), each element as the agent sent it. */
struct trc_prof_frame {
	uint32_t id;
	uint8_t kind;           /* enum trc_frame_kind */
	struct trc_str label, file;
	int32_t line;
};
struct trc_prof_thread {
	uint32_t idx;
	struct trc_str name;
};
struct trc_prof_tag {
	uint32_t id;
	struct trc_str text;
};
struct trc_prof_root {
	uint32_t node, thread, tag;
};
struct trc_prof_node {
	uint32_t node, parent, frame;
};
struct trc_prof_weight {
	uint32_t node, samples;
	uint64_t cpu_ns, wall_ns;
};

/* A call path of --top time (tracer_protocol.h): its id, its parent's (0: none), its method. */
struct trc_top_path {
	uint32_t id, parent;
	struct trc_str file;
	int32_t line;
	struct trc_str label;
	uint64_t count;
	uint64_t self_ns;
};

/* One message from the agent; the field names follow tracer_protocol.h. */
struct trc_message {
	uint32_t type;  /* enum trc_msg or enum trc_ev */
	union {
		struct {
			uint32_t version;
			int32_t pid;
			struct trc_str ruby_version, cwd;
			uint64_t mono_ns, real_ns;
			bool yjit;              /* YJIT compiles the process's code */
			uint32_t ractors;       /* Ractors running; only the main one is traced */
		} welcome;
		struct {
			uint32_t code;
			struct trc_str message;
		} error;
		struct {
			uint32_t index;
			uint64_t matched;
			bool pending;           /* traced once its class is defined */
			struct trc_str message;
			struct trc_str skipped; /* what it names that was left out, and why */
		} spec;
		struct {
			uint32_t wrapped;       /* methods wrapped */
			uint64_t install_ns;    /* how long putting them in place took */
		} started;
		struct {
			uint32_t step;          /* enum trc_step */
			uint64_t done, total;
		} progress;
		struct {
			uint32_t id;
			bool ok;
			struct trc_str text;
		} eval;
		struct {
			uint64_t events, lost;
			uint64_t nomem;         /* the agent's failed allocations */
		} detached;
		struct {
			uint64_t elapsed_ns, events, lost;
			uint64_t gcs, major_gcs, gc_ns;  /* collections (with TRC_TOP_GC) */
			const struct trc_top_row *rows;  /* owned by the decoder */
			size_t nrows;
			const struct trc_top_path *paths;        /* likewise; none without TRC_TOP_PATHS */
			size_t npaths;
		} top;
		struct {
			const struct trc_prof_frame *frames;    /* lists owned by the decoder */
			const struct trc_prof_thread *threads;
			const struct trc_prof_tag *tags;
			const struct trc_prof_root *roots;
			const struct trc_prof_node *nodes;
			const struct trc_prof_weight *weights;
			uint32_t nframes, nthreads, ntags, nroots, nnodes, nweights;
			uint64_t elapsed_ns, samples, lost, hz, own_ns;
		} profile;
		struct {
			uint32_t idx;
			struct trc_str cls, sep, name, path;
			int32_t line;
		} method;
		struct {
			uint32_t idx;
			struct trc_str name;
		} thread;
		struct {
			uint32_t thread, method;
			uint64_t ts;
		} call;  /* TRC_EV_CALL and TRC_EV_RETURN */
		struct {
			uint32_t thread;
			uint64_t ts;
			struct trc_str cls, message, path;
			int32_t line;
		} raise;
		struct {
			uint32_t thread, spec, expr;
			struct trc_str text;
		} expr;
		struct {
			uint32_t thread, method;
			uint64_t start_ts, duration_ns;
			uint32_t depth;
		} slow;
		struct {
			uint64_t count;
		} lost;
		struct {
			uint32_t thread;        /* TRC_GC_NO_THREAD: not one traced */
			uint64_t start_ts, pause_ns;
			bool major;
			struct trc_str reason;
		} gc;
		struct {
			uint32_t thread;        /* TRC_NO_THREAD: not one traced */
			uint64_t ts;
			struct trc_str text;
		} mark;  /* every type of TRC_MARKS */
	};
};

enum trc_decode_status {
	TRC_DECODE_OK = 0,      /* one message decoded */
	TRC_DECODE_MORE = 1,    /* the bytes are a prefix of a message: read at least need bytes */
	TRC_DECODE_ERROR = -1,  /* not a valid message: error says why */
};

/* A name of the last message that was cut (escape.h's TRC_NAME_MAX): where it is in the
 * decoder's cut buffer, and the string of the message that points there. */
struct trc_decode_cut {
	struct trc_str *s;
	size_t off;
};

/* Decoder state: the TOP rows and paths and PROFILE lists it reuses, the names it cut, and the last error. */
struct trc_decoder {
	struct trc_top_row *rows;
	size_t rows_cap;
	struct trc_top_path *paths;
	size_t paths_cap;
	void *prof[6];          /* PROFILE's lists, in the message's order */
	size_t prof_cap[6];
	struct trc_buf cut;             /* the cut names of the last message */
	struct trc_decode_cut *cuts;
	size_t ncuts, cuts_cap;
	size_t need;            /* after TRC_DECODE_MORE: total bytes the message needs, at least */
	char error[96];         /* after TRC_DECODE_ERROR */
};

void trc_decoder_init(struct trc_decoder *d);
void trc_decoder_release(struct trc_decoder *d);

/*
 * Decodes the message at the start of buf[0..len). On TRC_DECODE_OK fills *m and sets *used
 * to its size; strings in *m point into buf and TOP rows into the decoder, both valid until
 * buf changes or the next call. The names in it (a method's class, name and file, a thread's
 * name, a TOP row's file and label, an exception's class and file) are bounded here, once for
 * every output: one longer than TRC_NAME_MAX is cut as trc_name_bound() says, into the
 * decoder. Never reads past len, never allocates more than the bytes present justify,
 * whatever the input. Pure; any thread, one decoder per thread.
 */
enum trc_decode_status trc_decode(struct trc_decoder *d, const void *buf, size_t len,
				  struct trc_message *m, size_t *used);

/*
 * Skips the whole calls and returns at the start of buf[0..len) without decoding them (for a
 * reader that keeps the bytes and reads them later, spool.h), and adds their number to *count.
 * Stops at anything else, or at a message cut short, which trc_decode then reads. Returns the
 * bytes skipped. Pure.
 */
size_t trc_decode_skip_calls(const void *buf, size_t len, uint64_t *count);

/* The protocol name of a message type ("CALL", "WELCOME"...), or NULL if unknown. */
const char *trc_msg_name(uint32_t type);

/* A mark (TRC_MARKS), as its line in the protocol names it. */
struct trc_mark_type {
	const char *proto;      /* its protocol name: "THREAD_BEGIN" */
	const char *name;       /* its key: "thread_begin" */
	const char *title;      /* what the printers show: "THREAD BEGIN" */
};

/* The mark of that type, or NULL when the type is no mark. Pure. */
const struct trc_mark_type *trc_mark_type(uint32_t type);

#endif
