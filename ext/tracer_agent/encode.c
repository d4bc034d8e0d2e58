/* encode.c: every message the agent sends: ring records (the I/O thread's half of the ring), replies. */
#include "encode.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "gc.h"
#include "mem.h"
#include "names.h"
#include "ring.h"
#include "tracer_protocol.h"

static void
pack_str(msgpack_packer *pk, const char *s, size_t len)
{
	msgpack_pack_str(pk, len);
	msgpack_pack_str_body(pk, s, len);
}

static void
pack_cstr(msgpack_packer *pk, const char *s)
{
	pack_str(pk, s, strlen(s));
}

static void
pack_bool(msgpack_packer *pk, int b)
{
	if (b)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
}

/* ---- replies ---- */

void
trc_encode_welcome(msgpack_packer *pk, const struct trc_welcome *w)
{
	msgpack_pack_array(pk, TRC_MSG_WELCOME_FIELDS);
	msgpack_pack_uint8(pk, TRC_MSG_WELCOME);
	msgpack_pack_uint32(pk, TRC_PROTOCOL_VERSION);
	msgpack_pack_int(pk, (int)w->pid);
	pack_str(pk, w->ruby, w->ruby_len);
	pack_cstr(pk, w->cwd);
	msgpack_pack_uint64(pk, w->mono_ns);
	msgpack_pack_uint64(pk, w->real_ns);
	pack_bool(pk, w->yjit);
	msgpack_pack_uint32(pk, w->ractors);
}

void
trc_encode_error(msgpack_packer *pk, int code, const char *msg)
{
	msgpack_pack_array(pk, TRC_MSG_ERROR_FIELDS);
	msgpack_pack_uint8(pk, TRC_MSG_ERROR);
	msgpack_pack_int(pk, code);
	pack_cstr(pk, msg);
}

void
trc_encode_spec(msgpack_packer *pk, int index, int matched, int pending, const char *msg, size_t msg_len,
    const char *skipped, size_t skipped_len)
{
	msgpack_pack_array(pk, TRC_MSG_SPEC_FIELDS);
	msgpack_pack_uint8(pk, TRC_MSG_SPEC);
	msgpack_pack_int(pk, index);
	msgpack_pack_int(pk, matched);
	pack_bool(pk, pending);
	pack_str(pk, msg, msg_len);
	pack_str(pk, skipped, skipped_len);
}

void
trc_encode_started(msgpack_packer *pk, uint32_t wrapped, uint64_t install_ns)
{
	msgpack_pack_array(pk, TRC_MSG_STARTED_FIELDS);
	msgpack_pack_uint8(pk, TRC_MSG_STARTED);
	msgpack_pack_uint32(pk, wrapped);
	msgpack_pack_uint64(pk, install_ns);
}

void
trc_encode_eval(msgpack_packer *pk, uint64_t id, int ok, const char *text, size_t len)
{
	msgpack_pack_array(pk, TRC_MSG_EVAL_FIELDS);
	msgpack_pack_uint8(pk, TRC_MSG_EVAL);
	msgpack_pack_uint64(pk, id);
	pack_bool(pk, ok);
	pack_str(pk, text, len);
}

void
trc_encode_detached(msgpack_packer *pk, uint64_t events, uint64_t lost, uint64_t nomem)
{
	msgpack_pack_array(pk, TRC_MSG_DETACHED_FIELDS);
	msgpack_pack_uint8(pk, TRC_MSG_DETACHED);
	msgpack_pack_uint64(pk, events);
	msgpack_pack_uint64(pk, lost);
	msgpack_pack_uint64(pk, nomem);
}

void
trc_encode_progress(msgpack_packer *pk, int step, uint64_t done, uint64_t total)
{
	msgpack_pack_array(pk, TRC_MSG_PROGRESS_FIELDS);
	msgpack_pack_uint8(pk, TRC_MSG_PROGRESS);
	msgpack_pack_uint8(pk, (uint8_t)step);
	msgpack_pack_uint64(pk, done);
	msgpack_pack_uint64(pk, total);
}

void
trc_encode_top(msgpack_packer *pk, const struct trc_top_head *h, uint32_t nrows)
{
	msgpack_pack_array(pk, TRC_MSG_TOP_FIELDS);
	msgpack_pack_uint8(pk, TRC_MSG_TOP);
	msgpack_pack_uint64(pk, h->elapsed_ns);
	msgpack_pack_uint64(pk, h->events);
	msgpack_pack_uint64(pk, h->lost);
	msgpack_pack_uint64(pk, h->gcs);
	msgpack_pack_uint64(pk, h->major_gcs);
	msgpack_pack_uint64(pk, h->gc_ns);
	msgpack_pack_array(pk, nrows);
}

/* "Class#method" without making the string: the parts go out as one msgpack str. */
static void
pack_label(msgpack_packer *pk, const struct trc_label *label)
{
	if (label->sep == 0) {
		pack_str(pk, label->a, label->na);
	} else {
		msgpack_pack_str(pk, label->na + 1 + label->nb);
		msgpack_pack_str_body(pk, label->a, label->na);
		msgpack_pack_str_body(pk, &label->sep, 1);
		msgpack_pack_str_body(pk, label->b, label->nb);
	}
}

void
trc_encode_top_row(msgpack_packer *pk, const char *path, int line, const struct trc_label *label, uint64_t count,
    uint64_t total_ns, uint64_t self_ns, const uint64_t *buckets, const char *app_path, int app_line)
{
	msgpack_pack_array(pk, 9);
	pack_cstr(pk, path);
	msgpack_pack_int(pk, line);
	pack_label(pk, label);
	msgpack_pack_uint64(pk, count);
	msgpack_pack_uint64(pk, total_ns);
	msgpack_pack_uint64(pk, self_ns);
	msgpack_pack_array(pk, buckets != NULL ? TRC_TOP_BUCKETS : 0);
	for (unsigned i = 0; buckets != NULL && i < TRC_TOP_BUCKETS; i++)
		msgpack_pack_uint64(pk, buckets[i]);
	pack_cstr(pk, app_path != NULL ? app_path : "");
	msgpack_pack_int(pk, app_path != NULL ? app_line : 0);
}

void
trc_encode_top_path(msgpack_packer *pk, uint32_t id, uint32_t parent, const char *path, int line,
    const struct trc_label *label, uint64_t count, uint64_t self_ns)
{
	msgpack_pack_array(pk, 7);
	msgpack_pack_uint32(pk, id);
	msgpack_pack_uint32(pk, parent);
	pack_cstr(pk, path);
	msgpack_pack_int(pk, line);
	pack_label(pk, label);
	msgpack_pack_uint64(pk, count);
	msgpack_pack_uint64(pk, self_ns);
}

/* ---- ring records ---- */

/*
 * Memory for the output may run out: a record whose bytes do not all fit is taken back whole
 * (the stream stays well-formed) and counted as lost, like an event the ring had no room for.
 */
static int write_failed;
static uint64_t dropped;

/*
 * Which definitions the client has: this thread's own flags, one byte per thread and method
 * index, kept apart from the name tables. A traced thread writes its thread's entry (depth) on
 * every call and reads the method's on every event; a flag in those entries, read and written
 * here for every record, made the two threads take the same cache lines from each other tens
 * of millions of times a second: most of this thread's time on a firehose (perf).
 */
struct sent {
	uint8_t *on;
	uint32_t cap;
};
static struct sent threads_sent, methods_sent;

static inline int
is_sent(const struct sent *s, uint32_t idx)
{
	return idx < s->cap && s->on[idx];
}

/* Without memory to note it, a definition is simply sent again with the next record. */
static void
mark(struct sent *s, uint32_t idx)
{
	if (idx >= s->cap) {
		uint32_t cap = s->cap ? s->cap : 1024;
		uint8_t *on;

		while (cap <= idx)
			cap *= 2;
		if ((on = trc_realloc(s->on, cap)) == NULL)
			return;
		memset(on + s->cap, 0, cap - s->cap);
		s->on = on;
		s->cap = cap;
	}
	s->on[idx] = 1;
}

int
trc_encode_write(void *data, const char *buf, size_t len)
{
	if (msgpack_sbuffer_write(data, buf, len) == 0)
		return 0;
	write_failed = 1;
	trc_mem_failed();
	return -1;
}

uint64_t
trc_encode_lost(void)
{
	return dropped;
}

void
trc_encode_reset(void)
{
	free(threads_sent.on);
	free(methods_sent.on);
	trc_encode_forget();
}

void
trc_encode_forget(void)
{
	dropped = 0;
	threads_sent = (struct sent){ 0 };
	methods_sent = (struct sent){ 0 };
}

/* Definitions are marked sent only once the record that needed them is out whole. */
static void
define_method_now(msgpack_packer *pk, uint32_t idx)
{
	struct trc_method *m = trc_method_at(idx);
	char sep[2] = { m->sep, 0 };

	msgpack_pack_array(pk, TRC_EV_METHOD_FIELDS);
	msgpack_pack_uint8(pk, TRC_EV_METHOD);
	msgpack_pack_uint32(pk, idx);
	pack_str(pk, m->klass_name, m->klass_name_len);
	pack_cstr(pk, sep);
	pack_str(pk, m->name, m->name_len);
	pack_cstr(pk, m->path);
	msgpack_pack_int(pk, m->line);
}

static inline void
define_method(msgpack_packer *pk, uint32_t idx)
{
	if (!is_sent(&methods_sent, idx))
		define_method_now(pk, idx);
}

static void
define_thread_now(msgpack_packer *pk, uint32_t idx)
{
	struct trc_thread *t = trc_thread_at(idx);

	msgpack_pack_array(pk, TRC_EV_THREAD_FIELDS);
	msgpack_pack_uint8(pk, TRC_EV_THREAD);
	msgpack_pack_uint32(pk, idx);
	pack_cstr(pk, t->name);
}

static inline void
define_thread(msgpack_packer *pk, uint32_t idx)
{
	if (!is_sent(&threads_sent, idx))
		define_thread_now(pk, idx);
}

/*
 * A msgpack unsigned integer, big-endian, in its shortest form: at most 9 bytes. The byte swaps
 * below turn a little-endian host's integers into msgpack's big-endian ones; a big-endian host
 * would need none, so the agent refuses to build there rather than send garbage.
 */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "encode.c writes msgpack integers for a little-endian host"
#endif
static inline unsigned char *
put_uint(unsigned char *p, uint64_t v)
{
	if (v < 0x80) {
		*p = (unsigned char)v;
		return p + 1;
	}
	if (v <= UINT8_MAX) {
		p[0] = 0xcc;
		p[1] = (unsigned char)v;
		return p + 2;
	}
	if (v <= UINT16_MAX) {
		uint16_t be = __builtin_bswap16((uint16_t)v);
		p[0] = 0xcd;
		memcpy(p + 1, &be, 2);
		return p + 3;
	}
	if (v <= UINT32_MAX) {
		uint32_t be = __builtin_bswap32((uint32_t)v);
		p[0] = 0xce;
		memcpy(p + 1, &be, 4);
		return p + 5;
	}
	{
		uint64_t be = __builtin_bswap64(v);
		p[0] = 0xcf;
		memcpy(p + 1, &be, 8);
		return p + 9;
	}
}

/* Room for n more bytes in pk's buffer; 0 when memory runs out. */
static int
reserve(msgpack_packer *pk, size_t n)
{
	msgpack_sbuffer *sb = pk->data;
	size_t want;
	char *data;

	if (sb->alloc - sb->size >= n)
		return 1;
	want = sb->alloc ? sb->alloc * 2 : 65536;
	while (want - sb->size < n)
		want *= 2;
	if ((data = trc_realloc(sb->data, want)) == NULL)
		return 0;
	sb->data = data;
	sb->alloc = want;
	return 1;
}

/*
 * CALL and RETURN are nearly every message: they are written as msgpack bytes directly (one
 * capacity check, no call per field), the same bytes msgpack-c's packer would produce.
 */
static void
encode_event(msgpack_packer *pk, const struct trc_rec *r)
{
	msgpack_sbuffer *sb = pk->data;
	unsigned char *p, *start;

	define_thread(pk, r->thread);
	define_method(pk, r->method);
	if (!reserve(pk, 1 + 2 + 5 + 5 + 9)) {
		write_failed = 1;
		return;
	}
	p = start = (unsigned char *)sb->data + sb->size;
	_Static_assert(TRC_EV_CALL_FIELDS == 4 && TRC_EV_RETURN_FIELDS == 4, "CALL and RETURN are fixarrays of 4");
	*p++ = 0x94;    /* fixarray of 4 */
	p = put_uint(p, r->type == TRC_REC_CALL ? TRC_EV_CALL : TRC_EV_RETURN);
	p = put_uint(p, r->thread);
	p = put_uint(p, r->method);
	p = put_uint(p, trc_clock_ns(r->ts));
	sb->size += (size_t)(p - start);
}

static void
encode_slow(msgpack_packer *pk, const struct trc_rec *r)
{
	define_thread(pk, r->thread);
	define_method(pk, r->method);
	msgpack_pack_array(pk, TRC_EV_SLOW_FIELDS);
	msgpack_pack_uint8(pk, TRC_EV_SLOW);
	msgpack_pack_uint32(pk, r->thread);
	msgpack_pack_uint32(pk, r->method);
	msgpack_pack_uint64(pk, trc_clock_ns(r->ts));
	msgpack_pack_uint64(pk, trc_clock_dur_ns(r->dur));
	msgpack_pack_uint32(pk, r->aux);
}

static void
encode_raise(msgpack_packer *pk, const struct trc_rec *r)
{
	const unsigned char *p = (const unsigned char *)(r + 1);
	const char *s[3];
	uint32_t len[3];

	for (int i = 0; i < 3; i++)
		p = trc_rec_get_str(p, &s[i], &len[i]);
	define_thread(pk, r->thread);
	msgpack_pack_array(pk, TRC_EV_RAISE_FIELDS);
	msgpack_pack_uint8(pk, TRC_EV_RAISE);
	msgpack_pack_uint32(pk, r->thread);
	msgpack_pack_uint64(pk, trc_clock_ns(r->ts));
	for (int i = 0; i < 3; i++)
		pack_str(pk, s[i], len[i]);
	msgpack_pack_uint64(pk, r->dur);
}

static void
encode_expr(msgpack_packer *pk, const struct trc_rec *r)
{
	const char *s;
	uint32_t len;

	trc_rec_get_str((const unsigned char *)(r + 1), &s, &len);
	msgpack_pack_array(pk, TRC_EV_EXPR_FIELDS);
	msgpack_pack_uint8(pk, TRC_EV_EXPR);
	msgpack_pack_uint32(pk, r->thread);
	msgpack_pack_uint32(pk, r->method);
	msgpack_pack_uint32(pk, r->aux);
	pack_str(pk, s, len);
}

static void
encode_gc(msgpack_packer *pk, const struct trc_rec *r)
{
	if (r->thread != TRC_GC_NO_THREAD)
		define_thread(pk, r->thread);
	msgpack_pack_array(pk, TRC_EV_GC_FIELDS);
	msgpack_pack_uint8(pk, TRC_EV_GC);
	msgpack_pack_uint32(pk, r->thread);
	msgpack_pack_uint64(pk, trc_clock_ns(r->ts));
	msgpack_pack_uint64(pk, trc_clock_dur_ns(r->dur));
	if (r->aux >> 8)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
	pack_cstr(pk, trc_gc_reason_name((int)(r->aux & 0xff)));
}

/* Every mark alike: the record carries its type (TRC_MARKS). */
static void
encode_mark(msgpack_packer *pk, const struct trc_rec *r)
{
	const char *s;
	uint32_t len;

	trc_rec_get_str((const unsigned char *)(r + 1), &s, &len);
	if (r->thread != TRC_NO_THREAD)
		define_thread(pk, r->thread);
	msgpack_pack_array(pk, TRC_MARK_FIELDS);
	msgpack_pack_uint8(pk, (uint8_t)r->aux);
	msgpack_pack_uint32(pk, r->thread);
	msgpack_pack_uint64(pk, trc_clock_ns(r->ts));
	pack_str(pk, s, len);
}

static void
encode_lost(msgpack_packer *pk, const struct trc_rec *r)
{
	msgpack_pack_array(pk, TRC_EV_LOST_FIELDS);
	msgpack_pack_uint8(pk, TRC_EV_LOST);
	msgpack_pack_uint64(pk, r->ts);
}

_Static_assert(TRC_GC_NO_THREAD == TRC_NO_THREAD, "GC and marks: one value for no thread");

/* After a record went out whole: the definitions it carried need not be sent again. */
static void
mark_sent(const struct trc_rec *r)
{
	switch (r->type) {
	case TRC_REC_CALL:
	case TRC_REC_RETURN:
	case TRC_REC_SLOW:
		if (!is_sent(&methods_sent, r->method))
			mark(&methods_sent, r->method);
		/* fall through */
	case TRC_REC_RAISE:
		if (!is_sent(&threads_sent, r->thread))
			mark(&threads_sent, r->thread);
		break;
	case TRC_REC_GC:
	case TRC_REC_MARK:
		if (r->thread != TRC_NO_THREAD && !is_sent(&threads_sent, r->thread))
			mark(&threads_sent, r->thread);
		break;
	default:
		break;
	}
}

/* A record that will not reach the client: the events it stands for count as lost. */
static void
count_dropped(const struct trc_rec *r)
{
	dropped += r->type == TRC_REC_LOST ? r->ts : r->type != TRC_REC_PAD;
}

size_t
trc_encode_records(msgpack_packer *pk, const unsigned char *p, size_t n)
{
	msgpack_sbuffer *sb = pk->data;
	size_t off = 0;

	while (off < n) {
		const struct trc_rec *r = (const struct trc_rec *)(p + off);
		size_t mark = sb->size;

		write_failed = 0;
		switch (r->type) {
		case TRC_REC_CALL:
		case TRC_REC_RETURN:
			encode_event(pk, r);
			break;
		case TRC_REC_SLOW:
			encode_slow(pk, r);
			break;
		case TRC_REC_RAISE:
			encode_raise(pk, r);
			break;
		case TRC_REC_EXPR:
			encode_expr(pk, r);
			break;
		case TRC_REC_LOST:
			encode_lost(pk, r);
			break;
		case TRC_REC_GC:
			encode_gc(pk, r);
			break;
		case TRC_REC_MARK:
			encode_mark(pk, r);
			break;
		default:        /* TRC_REC_PAD */
			break;
		}
		if (write_failed) {
			sb->size = mark;
			count_dropped(r);
		} else {
			mark_sent(r);
		}
		off += r->size;
	}
	return off;
}

size_t
trc_encode_drop(const unsigned char *p, size_t n)
{
	size_t off = 0;

	while (off < n) {
		const struct trc_rec *r = (const struct trc_rec *)(p + off);

		count_dropped(r);
		off += r->size;
	}
	return off;
}
