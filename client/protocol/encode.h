/* encode.h: msgpack writers, and the client's commands (tracer_protocol.h) built with them. */
#ifndef TRC_ENCODE_H
#define TRC_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "spec.h"
#include "tracer_protocol.h"

/* msgpack values, appended to b in the smallest encoding. Pure. */
void trc_pack_array(struct trc_buf *b, uint32_t n);
void trc_pack_uint(struct trc_buf *b, uint64_t v);
void trc_pack_int(struct trc_buf *b, int64_t v);
void trc_pack_nil(struct trc_buf *b);
void trc_pack_bool(struct trc_buf *b, bool v);
void trc_pack_str(struct trc_buf *b, const char *s, size_t len);
void trc_pack_bin(struct trc_buf *b, const void *p, size_t len);
/* A C string, or nil for NULL. */
void trc_pack_cstr(struct trc_buf *b, const char *s);

/* Which calls and files a trace or a table covers: "scope" in tracer_protocol.h. */
struct trc_scope {
	bool all;                       /* everything, through the VM's hooks */
	const char *const *prefixes;    /* none: the agent's working directory */
	size_t nprefixes;
	const char *const *ignores;     /* extended regexps over "Class#method" */
	size_t nignores;
};

/* One command each, appended to b. Pure. */
void trc_encode_hello(struct trc_buf *b, int32_t client_pid);
void trc_encode_trace(struct trc_buf *b, uint32_t flags, uint32_t slow_ms,
		      const struct trc_spec *specs, size_t nspecs, const struct trc_scope *scope);
void trc_encode_eval(struct trc_buf *b, uint32_t id, enum trc_eval_kind kind, const char *text);
void trc_encode_detach(struct trc_buf *b);
void trc_encode_top(struct trc_buf *b, enum trc_top_mode mode, uint32_t interval_ms, uint32_t flags,
		    uint32_t sample, uint32_t cap, const struct trc_scope *scope);

#endif
