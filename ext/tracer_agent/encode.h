/* encode.h: every message the agent sends, packed here: ring records, replies, goodbyes. */
#ifndef TRC_ENCODE_H
#define TRC_ENCODE_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Encodes the records in [p, p + n) into pk, each method and thread definition before its first
 * use. Runs on the I/O thread without the GVL: it reads only published name-table entries.
 * Returns how many bytes of records it consumed: whole records, the last of them the one that
 * begins before p + n, which may end after it (the ring's records are whole up to its head).
 */
size_t trc_encode_records(msgpack_packer *pk, const unsigned char *p, size_t n);
/* The same records counted as lost instead (trc_encode_lost), for a session out of time. */
size_t trc_encode_drop(const unsigned char *p, size_t n);
/*
 * The packer's write callback for trc_encode_records (its data: a msgpack_sbuffer). A record
 * that does not fit in memory is taken back whole and counted: trc_encode_lost() tells how
 * many since trc_encode_reset() (I/O thread only).
 */
int trc_encode_write(void *data, const char *buf, size_t len);
uint64_t trc_encode_lost(void);
/*
 * Forgets the session: what was lost, which definitions were sent. Reset frees; forget, in a
 * fork's child, whose parent's I/O thread may have been inside a realloc, only lets go.
 */
void trc_encode_reset(void);
void trc_encode_forget(void);

/*
 * The replies (tracer_protocol.h, TRC_MESSAGES), one function each. Strings are given with
 * their lengths: they are the target's bytes (a class name, an exception's message), which
 * the client escapes. Any thread; the packer's buffer is the caller's.
 */
struct trc_welcome {
	pid_t pid;
	const char *ruby, *cwd;
	size_t ruby_len;
	uint64_t mono_ns, real_ns;
	int yjit;
	uint32_t ractors;
};
void trc_encode_welcome(msgpack_packer *pk, const struct trc_welcome *w);
void trc_encode_error(msgpack_packer *pk, int code, const char *msg);
void trc_encode_spec(msgpack_packer *pk, int index, int matched, int pending, const char *msg, size_t msg_len,
    const char *skipped, size_t skipped_len);
void trc_encode_started(msgpack_packer *pk, uint32_t wrapped, uint64_t install_ns);
void trc_encode_eval(msgpack_packer *pk, uint64_t id, int ok, const char *text, size_t len);
void trc_encode_detached(msgpack_packer *pk, uint64_t events, uint64_t lost, uint64_t nomem);
void trc_encode_progress(msgpack_packer *pk, int step, uint64_t done, uint64_t total);

/* A --top interval: its header, then each of its nrows rows, then its paths (TRC_TOP_PATHS). */
struct trc_top_head {
	uint64_t elapsed_ns, events, lost, gcs, major_gcs, gc_ns;
};
void trc_encode_top(msgpack_packer *pk, const struct trc_top_head *h, uint32_t nrows);
/* A row's label: a, or a sep b ("Class#method") when sep is not 0. */
struct trc_label {
	const char *a, *b;
	size_t na, nb;
	char sep;
};
/* buckets: TRC_TOP_BUCKETS durations (--top time), or NULL for none; app_path: the app's frame
 * nearest a raise (NULL: none). */
void trc_encode_top_row(msgpack_packer *pk, const char *path, int line, const struct trc_label *label, uint64_t count,
    uint64_t total_ns, uint64_t self_ns, const uint64_t *buckets, const char *app_path, int app_line);
/* After the rows: the array of paths (paths.c packs its header), each [id, parent, file, line, label, count, self_ns]. */
void trc_encode_top_path(msgpack_packer *pk, uint32_t id, uint32_t parent, const char *path, int line,
    const struct trc_label *label, uint64_t count, uint64_t self_ns);

#endif
