/* decode.c: a small msgpack reader for the agent's messages, strict about shape, safe on garbage. */
#include "decode.h"

#include <stdio.h>
#include <stdlib.h>

#include "escape.h"
#include "xmalloc.h"

/*
 * The reader keeps a sticky status: the first short read (MORE) or mismatch (ERROR) sticks, and
 * every later read returns a zero value without looking at the bytes. So a message decoder is a
 * straight list of reads, checked once at the end.
 */
struct rd {
	const uint8_t *start, *p, *end;
	enum trc_decode_status status;
	size_t need;
	const char *why;        /* static reason of an ERROR */
	unsigned field;         /* index of the element being read, for the error message */
};

static void
rd_fail(struct rd *r, const char *why)
{
	if (r->status != TRC_DECODE_OK)
		return;
	r->status = TRC_DECODE_ERROR;
	r->why = why;
}

/* True if n more bytes are present; otherwise records how long the message is at least. */
static inline bool
rd_have(struct rd *r, uint64_t n)
{
	uint64_t need;

	if ((uint64_t)(r->end - r->p) >= n)
		return true;
	need = (uint64_t)(r->p - r->start) + n;
	if (need > TRC_DECODE_MAX_MSG) {
		rd_fail(r, "message too large");
	} else {
		r->status = TRC_DECODE_MORE;
		r->need = (size_t)need;
	}
	return false;
}

static inline uint64_t
rd_be(const uint8_t *p, unsigned width)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < width; i++)
		v = v << 8 | p[i];
	return v;
}

static const uint8_t int_width[4] = { 1, 2, 4, 8 };

/* Starts reading the next element: false once the status is no longer OK. */
static inline bool
rd_next(struct rd *r)
{
	if (r->status != TRC_DECODE_OK)
		return false;
	r->field++;
	return true;
}

/* Any msgpack integer: *neg says whether (int64_t)*v is negative. */
static inline bool
rd_integer(struct rd *r, uint64_t *v, bool *neg)
{
	uint8_t c;
	unsigned w;

	if (!rd_have(r, 1))
		return false;
	c = r->p[0];
	*neg = false;
	if (c <= 0x7f) {
		*v = c;
		r->p++;
		return true;
	}
	if (c >= 0xe0) {
		*v = (uint64_t)(int64_t)(int8_t)c;
		*neg = true;
		r->p++;
		return true;
	}
	if (c < 0xcc || c > 0xd3) {
		rd_fail(r, "expected an integer");
		return false;
	}
	w = int_width[(c - 0xcc) & 3];
	if (!rd_have(r, 1 + w))
		return false;
	*v = rd_be(r->p + 1, w);
	/* w is 1, 2, 4 or 8 (int_width), which the analyzer does not follow into the table. */
	if (c >= 0xd0 && w < 8 && (*v >> (w * 8 - 1)))  /* NOLINT(clang-analyzer-core.UndefinedBinaryOperatorResult) */
		*v |= ~(uint64_t)0 << (w * 8);  /* sign-extend */
	*neg = c >= 0xd0 && (int64_t)*v < 0;
	r->p += 1 + w;
	return true;
}

static inline uint64_t
rd_u64(struct rd *r)
{
	uint64_t v;
	bool neg;

	if (!rd_next(r) || !rd_integer(r, &v, &neg))
		return 0;
	if (neg) {
		rd_fail(r, "negative integer");
		return 0;
	}
	return v;
}

static inline uint32_t
rd_u32(struct rd *r)
{
	uint64_t v = rd_u64(r);

	if (v > UINT32_MAX) {
		rd_fail(r, "integer out of range");
		return 0;
	}
	return (uint32_t)v;
}

static int32_t
rd_i32(struct rd *r)
{
	uint64_t v;
	bool neg;

	if (!rd_next(r) || !rd_integer(r, &v, &neg))
		return 0;
	if ((neg && (int64_t)v < INT32_MIN) || (!neg && v > INT32_MAX)) {
		rd_fail(r, "integer out of range");
		return 0;
	}
	return (int32_t)(int64_t)v;
}

/* true/false, or an integer (non-zero is true). */
static bool
rd_bool(struct rd *r)
{
	uint64_t v;
	bool neg;

	if (!rd_next(r) || !rd_have(r, 1))
		return false;
	if (r->p[0] == 0xc2 || r->p[0] == 0xc3)
		return *r->p++ == 0xc3;
	return rd_integer(r, &v, &neg) && v != 0;
}

/* Header size and length-field width of a str/bin/nil header byte; 0 if it is none. */
static unsigned
str_header(uint8_t c, unsigned *lenw)
{
	*lenw = 0;
	if ((c & 0xe0) == 0xa0 || c == 0xc0)
		return 1;
	if (c == 0xd9 || c == 0xc4)
		*lenw = 1;
	else if (c == 0xda || c == 0xc5)
		*lenw = 2;
	else if (c == 0xdb || c == 0xc6)
		*lenw = 4;
	else
		return 0;
	return 1 + *lenw;
}

static struct trc_str
rd_str(struct rd *r)
{
	struct trc_str s = { "", 0 };
	unsigned hdr, lenw;
	uint64_t len;

	if (!rd_next(r) || !rd_have(r, 1))
		return s;
	hdr = str_header(r->p[0], &lenw);
	if (hdr == 0) {
		rd_fail(r, "expected a string");
		return s;
	}
	if (!rd_have(r, hdr))
		return s;
	len = lenw ? rd_be(r->p + 1, lenw) : (r->p[0] == 0xc0 ? 0 : r->p[0] & 0x1f);
	if (!rd_have(r, hdr + len))
		return s;
	s.ptr = (const char *)r->p + hdr;
	s.len = (uint32_t)len;
	r->p += hdr + len;
	return s;
}

/*
 * A name into *to: rd_str's, or, past TRC_NAME_MAX, its bounded copy in d->cut, which *to
 * points into once the message is whole (finish(): d->cut may move as it grows until then).
 */
static void
rd_name(struct rd *r, struct trc_decoder *d, struct trc_str *to)
{
	struct trc_decode_cut *c;

	*to = rd_str(r);
	if (to->len <= TRC_NAME_MAX)
		return;
	if (d->ncuts == d->cuts_cap) {
		d->cuts_cap = d->cuts_cap ? d->cuts_cap * 2 : 16;
		d->cuts = xreallocarray(d->cuts, d->cuts_cap, sizeof(*d->cuts));
	}
	c = &d->cuts[d->ncuts++];
	c->s = to;
	c->off = d->cut.len;
	trc_name_bound(&d->cut, to->ptr, to->len);
	to->len = (uint32_t)(d->cut.len - c->off);
}

/* An array header: its element count. */
static uint32_t
rd_array(struct rd *r)
{
	uint8_t c;
	unsigned w;

	if (!rd_next(r) || !rd_have(r, 1))
		return 0;
	c = r->p[0];
	if ((c & 0xf0) == 0x90) {
		r->p++;
		return c & 0x0f;
	}
	if (c != 0xdc && c != 0xdd) {
		rd_fail(r, "expected an array");
		return 0;
	}
	w = c == 0xdc ? 2 : 4;
	if (!rd_have(r, 1 + w))
		return 0;
	r->p += 1 + w;
	return (uint32_t)rd_be(r->p - w, w);
}

static void
dec_welcome(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->welcome.version = rd_u32(r);
	m->welcome.pid = rd_i32(r);
	m->welcome.ruby_version = rd_str(r);
	m->welcome.cwd = rd_str(r);
	m->welcome.mono_ns = rd_u64(r);
	m->welcome.real_ns = rd_u64(r);
	m->welcome.yjit = rd_bool(r);
	m->welcome.ractors = rd_u32(r);
}

static void
dec_error(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->error.code = rd_u32(r);
	m->error.message = rd_str(r);
}

static void
dec_spec(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->spec.index = rd_u32(r);
	m->spec.matched = rd_u64(r);
	m->spec.pending = rd_bool(r);
	m->spec.message = rd_str(r);
	m->spec.skipped = rd_str(r);
}

static void
dec_eval(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->eval.id = rd_u32(r);
	m->eval.ok = rd_bool(r);
	m->eval.text = rd_str(r);
}

static void
dec_started(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->started.wrapped = rd_u32(r);
	m->started.install_ns = rd_u64(r);
}

static void
dec_progress(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->progress.step = rd_u32(r);
	m->progress.done = rd_u64(r);
	m->progress.total = rd_u64(r);
	if (m->progress.step > TRC_STEP_REMOVE)
		rd_fail(r, "PROGRESS step out of range");
}

static void
dec_detached(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->detached.events = rd_u64(r);
	m->detached.lost = rd_u64(r);
	m->detached.nomem = rd_u64(r);
}

static void
dec_top_row(struct rd *r, struct trc_decoder *d, struct trc_top_row *row)
{
	uint32_t n;

	if (rd_array(r) != 9) {
		rd_fail(r, "TOP row is not a 9-element array");
		return;
	}
	rd_name(r, d, &row->file);
	row->line = rd_i32(r);
	rd_name(r, d, &row->label);
	row->count = rd_u64(r);
	row->total_ns = rd_u64(r);
	row->self_ns = rd_u64(r);
	n = rd_array(r);
	if (n != 0 && n != TRC_TOP_BUCKETS) {
		rd_fail(r, "TOP row's buckets are neither none nor TRC_TOP_BUCKETS");
		return;
	}
	row->nbuckets = (uint8_t)n;
	for (uint32_t i = 0; i < n; i++)
		row->buckets[i] = rd_u64(r);
	rd_name(r, d, &row->app_file);
	row->app_line = rd_i32(r);
}

static void
dec_top_path(struct rd *r, struct trc_decoder *d, struct trc_top_path *p)
{
	if (rd_array(r) != 7) {
		rd_fail(r, "TOP path is not a 7-element array");
		return;
	}
	p->id = rd_u32(r);
	p->parent = rd_u32(r);
	rd_name(r, d, &p->file);
	p->line = rd_i32(r);
	rd_name(r, d, &p->label);
	p->count = rd_u64(r);
	p->self_ns = rd_u64(r);
	if (r->status == TRC_DECODE_OK && (p->id == 0 || p->id > TRC_TOP_MAX_PATHS || p->parent >= p->id))
		rd_fail(r, "TOP path id out of range, or not after its parent's");
}

/* A path takes at least 8 bytes: paths are only allocated for bytes already received. */
static void
dec_top_paths(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	uint32_t n = rd_array(r);

	if (n > TRC_DECODE_MAX_PATHS)
		rd_fail(r, "too many TOP paths");
	if (r->status != TRC_DECODE_OK || !rd_have(r, (uint64_t)n * 8))
		return;
	if (n > d->paths_cap) {
		d->paths = xreallocarray(d->paths, n, sizeof(*d->paths));
		d->paths_cap = n;
	}
	for (uint32_t i = 0; i < n; i++)
		dec_top_path(r, d, &d->paths[i]);
	m->top.paths = d->paths;
	m->top.npaths = n;
}

/* A row takes at least 8 bytes, so rows are only allocated for bytes already received. */
static void
dec_top(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	uint32_t n;

	m->top.elapsed_ns = rd_u64(r);
	m->top.events = rd_u64(r);
	m->top.lost = rd_u64(r);
	m->top.gcs = rd_u64(r);
	m->top.major_gcs = rd_u64(r);
	m->top.gc_ns = rd_u64(r);
	n = rd_array(r);
	if (n > TRC_DECODE_MAX_ROWS)
		rd_fail(r, "too many TOP rows");
	if (r->status != TRC_DECODE_OK || !rd_have(r, (uint64_t)n * 8))
		return;
	if (n > d->rows_cap) {
		d->rows = xreallocarray(d->rows, n, sizeof(*d->rows));
		d->rows_cap = n;
	}
	for (uint32_t i = 0; i < n; i++)
		dec_top_row(r, d, &d->rows[i]);
	m->top.rows = d->rows;
	m->top.nrows = n;
	dec_top_paths(r, m, d);
}

static void
dec_method(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	m->method.idx = rd_u32(r);
	rd_name(r, d, &m->method.cls);
	m->method.sep = rd_str(r);
	rd_name(r, d, &m->method.name);
	rd_name(r, d, &m->method.path);
	m->method.line = rd_i32(r);
}

static void
dec_thread(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	m->thread.idx = rd_u32(r);
	rd_name(r, d, &m->thread.name);
}

static void
dec_call(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->call.thread = rd_u32(r);
	m->call.method = rd_u32(r);
	m->call.ts = rd_u64(r);
}

static void
dec_raise(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	m->raise.thread = rd_u32(r);
	m->raise.ts = rd_u64(r);
	rd_name(r, d, &m->raise.cls);
	m->raise.message = rd_str(r);
	rd_name(r, d, &m->raise.path);
	m->raise.line = rd_i32(r);
}

static void
dec_gc(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->gc.thread = rd_u32(r);
	m->gc.start_ts = rd_u64(r);
	m->gc.pause_ns = rd_u64(r);
	m->gc.major = rd_bool(r);
	m->gc.reason = rd_str(r);
}

static void
dec_expr(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->expr.thread = rd_u32(r);
	m->expr.spec = rd_u32(r);
	m->expr.expr = rd_u32(r);
	m->expr.text = rd_str(r);
}

static void
dec_slow(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->slow.thread = rd_u32(r);
	m->slow.method = rd_u32(r);
	m->slow.start_ts = rd_u64(r);
	m->slow.duration_ns = rd_u64(r);
	m->slow.depth = rd_u32(r);
}

static void
dec_lost(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->lost.count = rd_u64(r);
}

/*
 * A PROFILE list of n elements of at least min_bytes each: room for them in the decoder's
 * list k, once the bytes are there (so garbage cannot make it allocate more than it sent).
 */
static void *
prof_list(struct rd *r, struct trc_decoder *d, int k, uint32_t *n, size_t size, unsigned min_bytes)
{
	*n = rd_array(r);
	if (r->status != TRC_DECODE_OK || !rd_have(r, (uint64_t)*n * min_bytes))
		return NULL;
	if (*n > d->prof_cap[k]) {
		d->prof[k] = xreallocarray(d->prof[k], *n, size);
		d->prof_cap[k] = *n;
	}
	return d->prof[k];
}

static bool
prof_elem(struct rd *r, uint32_t fields)
{
	if (rd_array(r) == fields)
		return true;
	rd_fail(r, "PROFILE element of the wrong shape");
	return false;
}

static void
dec_profile(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	struct trc_prof_frame *f = prof_list(r, d, 0, &m->profile.nframes, sizeof(*f), 6);
	struct trc_prof_thread *th;
	struct trc_prof_tag *tg;
	struct trc_prof_root *ro;
	struct trc_prof_node *no;
	struct trc_prof_weight *w;

	for (uint32_t i = 0; f != NULL && i < m->profile.nframes && prof_elem(r, 5); i++) {
		f[i].id = rd_u32(r);
		f[i].kind = (uint8_t)rd_u32(r);
		rd_name(r, d, &f[i].label);
		rd_name(r, d, &f[i].file);
		f[i].line = rd_i32(r);
		if (f[i].kind > TRC_FRAME_KIND_LAST)
			rd_fail(r, "PROFILE frame kind out of range");
	}
	th = prof_list(r, d, 1, &m->profile.nthreads, sizeof(*th), 3);
	for (uint32_t i = 0; th != NULL && i < m->profile.nthreads && prof_elem(r, 2); i++) {
		th[i].idx = rd_u32(r);
		rd_name(r, d, &th[i].name);
	}
	tg = prof_list(r, d, 2, &m->profile.ntags, sizeof(*tg), 3);
	for (uint32_t i = 0; tg != NULL && i < m->profile.ntags && prof_elem(r, 2); i++) {
		tg[i].id = rd_u32(r);
		rd_name(r, d, &tg[i].text);
	}
	m->profile.elapsed_ns = rd_u64(r);
	m->profile.samples = rd_u64(r);
	m->profile.lost = rd_u64(r);
	m->profile.hz = rd_u64(r);
	m->profile.own_ns = rd_u64(r);
	ro = prof_list(r, d, 3, &m->profile.nroots, sizeof(*ro), 4);
	for (uint32_t i = 0; ro != NULL && i < m->profile.nroots && prof_elem(r, 3); i++) {
		ro[i].node = rd_u32(r);
		ro[i].thread = rd_u32(r);
		ro[i].tag = rd_u32(r);
	}
	no = prof_list(r, d, 4, &m->profile.nnodes, sizeof(*no), 4);
	for (uint32_t i = 0; no != NULL && i < m->profile.nnodes && prof_elem(r, 3); i++) {
		no[i].node = rd_u32(r);
		no[i].parent = rd_u32(r);
		no[i].frame = rd_u32(r);
	}
	w = prof_list(r, d, 5, &m->profile.nweights, sizeof(*w), 5);
	for (uint32_t i = 0; w != NULL && i < m->profile.nweights && prof_elem(r, 4); i++) {
		w[i].node = rd_u32(r);
		w[i].samples = rd_u32(r);
		w[i].cpu_ns = rd_u64(r);
		w[i].wall_ns = rd_u64(r);
	}
	m->profile.frames = f;
	m->profile.threads = th;
	m->profile.tags = tg;
	m->profile.roots = ro;
	m->profile.nodes = no;
	m->profile.weights = w;
}

static void
dec_mark(struct rd *r, struct trc_message *m, struct trc_decoder *d)
{
	(void)d;
	m->mark.thread = rd_u32(r);
	m->mark.ts = rd_u64(r);
	m->mark.text = rd_str(r);
}

/* A RETURN reads as a CALL does. */
#define dec_return dec_call

/*
 * Every message the client accepts: its name, its array length (type included), its reader;
 * from the protocol's lists, so that a message there without its reader here does not compile.
 */
static const struct msg_type {
	const char *name;
	uint32_t nelems;
	void (*decode)(struct rd *, struct trc_message *, struct trc_decoder *);
} msg_types[] = {
#define TRC_X(NAME, name, type, fields) [TRC_MSG_##NAME] = { #NAME, fields, dec_##name },
	TRC_MESSAGES(TRC_X)
#undef TRC_X
#define TRC_X(NAME, name, type, fields) [TRC_EV_##NAME] = { #NAME, fields, dec_##name },
	TRC_EVENTS(TRC_X)
#undef TRC_X
};

/* Every mark reads alike; its own name is in mark_types. */
static const struct msg_type mark_msg = { "MARK", TRC_MARK_FIELDS, dec_mark };

static const struct trc_mark_type mark_types[] = {
	{ NULL, NULL, NULL },   /* the list may be empty; TRC_EV_METHOD is no mark */
#define TRC_X(NAME, name, type, title, help) [(type) - TRC_EV_METHOD] = { #NAME, #name, title },
	TRC_MARKS(TRC_X)
#undef TRC_X
};

const struct trc_mark_type *
trc_mark_type(uint32_t type)
{
	uint32_t i = type - TRC_EV_METHOD;

	if (type < TRC_EV_METHOD || i >= sizeof(mark_types) / sizeof(mark_types[0]) ||
	    mark_types[i].name == NULL)
		return NULL;
	return &mark_types[i];
}

static const struct msg_type *
msg_type(uint32_t type)
{
	if (trc_mark_type(type) != NULL)
		return &mark_msg;
	if (type >= sizeof(msg_types) / sizeof(msg_types[0]) || msg_types[type].decode == NULL)
		return NULL;
	return &msg_types[type];
}

const char *
trc_msg_name(uint32_t type)
{
	const struct trc_mark_type *k = trc_mark_type(type);
	const struct msg_type *t = msg_type(type);

	return k ? k->proto : t ? t->name : NULL;
}

void
trc_decoder_init(struct trc_decoder *d)
{
	d->rows = NULL;
	d->rows_cap = 0;
	d->paths = NULL;
	d->paths_cap = 0;
	for (int i = 0; i < 6; i++) {
		d->prof[i] = NULL;
		d->prof_cap[i] = 0;
	}
	trc_buf_init(&d->cut);
	d->cuts = NULL;
	d->ncuts = d->cuts_cap = 0;
	d->need = 0;
	d->error[0] = '\0';
}

void
trc_decoder_release(struct trc_decoder *d)
{
	free(d->rows);
	free(d->paths);
	for (int i = 0; i < 6; i++)
		free(d->prof[i]);
	trc_buf_release(&d->cut);
	free(d->cuts);
	trc_decoder_init(d);
}

/* name: the message's (trc_msg_name), or NULL before its type is known. */
static enum trc_decode_status
finish(struct trc_decoder *d, struct rd *r, const char *name, size_t *used)
{
	if (r->status == TRC_DECODE_OK) {
		*used = (size_t)(r->p - r->start);
		for (size_t i = 0; i < d->ncuts; i++)
			d->cuts[i].s->ptr = d->cut.data + d->cuts[i].off;
	}
	else if (r->status == TRC_DECODE_MORE)
		d->need = r->need;
	else if (name != NULL)
		snprintf(d->error, sizeof(d->error), "%s element %u: %s", name, r->field - 2, r->why);
	else
		snprintf(d->error, sizeof(d->error), "message type: %s", r->why);
	return r->status;
}

/* An unsigned msgpack integer of at most 32 bits at *p, below end; false if it is not one. */
static inline bool
quick_u32(const uint8_t **p, const uint8_t *end, uint32_t *v)
{
	const uint8_t *q = *p;
	unsigned w;

	if (q >= end)
		return false;
	if (q[0] < 0x80) {
		*v = q[0];
		*p = q + 1;
		return true;
	}
	if (q[0] < 0xcc || q[0] > 0xce)
		return false;
	w = 1u << (q[0] - 0xcc);
	if ((size_t)(end - q) < 1 + w)
		return false;
	*v = (uint32_t)rd_be(q + 1, w);
	*p = q + 1 + w;
	return true;
}

/*
 * Calls and returns are nearly every message of a trace: [130 or 131, thread, method, ts] with
 * unsigned integers, read here without the general reader. Anything else, or a message cut
 * short, is left to it (false).
 */
static inline bool
quick_call(const uint8_t *b, size_t len, struct trc_message *m, size_t *used)
{
	const uint8_t *p = b + 3, *end = b + len;
	uint32_t thread, method;

	if (len < 3 + 1 + 1 + 9 || b[0] != 0x94 || b[1] != 0xcc ||
	    (b[2] != TRC_EV_CALL && b[2] != TRC_EV_RETURN))
		return false;
	if (!quick_u32(&p, end, &thread) || !quick_u32(&p, end, &method) || end - p < 9 || p[0] != 0xcf)
		return false;
	m->type = b[2];
	m->call.thread = thread;
	m->call.method = method;
	m->call.ts = rd_be(p + 1, 8);
	*used = (size_t)(p + 9 - b);
	return true;
}

/* The size of the msgpack unsigned integer that starts with b, if it fits max bytes; else 0. */
static inline unsigned
uint_size(uint8_t b, unsigned max)
{
	unsigned w = b < 0x80 ? 1 : b >= 0xcc && b <= 0xcf ? 1 + (1u << (b - 0xcc)) : 0;

	return w <= max ? w : 0;
}

size_t
trc_decode_skip_calls(const void *buf, size_t len, uint64_t *count)
{
	const uint8_t *b = buf, *p = b, *end = b + len;
	uint64_t n = 0;

	while (end - p >= 6 && p[0] == 0x94 && p[1] == 0xcc &&
	       (p[2] == TRC_EV_CALL || p[2] == TRC_EV_RETURN)) {
		const uint8_t *q = p + 3;
		unsigned w;

		/* thread and method (uint32), then ts (uint64); q never passes end unread */
		for (int i = 0; i < 3; i++) {
			if (q >= end || (w = uint_size(*q, i < 2 ? 5 : 9)) == 0 || (size_t)(end - q) < w)
				goto out;
			q += w;
		}
		p = q;
		n++;
	}
out:
	*count += n;
	return (size_t)(p - b);
}

enum trc_decode_status
trc_decode(struct trc_decoder *d, const void *buf, size_t len, struct trc_message *m, size_t *used)
{
	struct rd r = { .start = buf, .p = buf, .end = (const uint8_t *)buf + len };
	const struct msg_type *t;
	uint32_t n, type;

	if (quick_call(buf, len, m, used))
		return TRC_DECODE_OK;
	n = rd_array(&r);
	if (r.status == TRC_DECODE_OK && n == 0)
		rd_fail(&r, "empty array");
	type = rd_u32(&r);
	if (r.status != TRC_DECODE_OK)
		return finish(d, &r, NULL, used);
	t = msg_type(type);
	if (t == NULL) {
		snprintf(d->error, sizeof(d->error), "unknown message type %u", type);
		return TRC_DECODE_ERROR;
	}
	if (n != t->nelems) {
		snprintf(d->error, sizeof(d->error), "%s has %u elements, not %u", trc_msg_name(type), n,
			 t->nelems);
		return TRC_DECODE_ERROR;
	}
	m->type = type;
	d->cut.len = d->ncuts = 0;
	t->decode(&r, m, d);
	return finish(d, &r, trc_msg_name(type), used);
}
