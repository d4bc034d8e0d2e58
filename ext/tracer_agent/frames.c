/* frames.c: the profiler's frames: what rb_profile_frames returns, numbered and kept alive. */
#include "frames.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <ruby/debug.h>

#include "stable.h"
#include "tracer_protocol.h"

#define SPINS 4096

enum state {
	UNSET = 0,      /* being numbered */
	LIVE,           /* numbered: marked at each collection until the table goes */
	SUSPECT,        /* numbered while a collection may have run: never touched */
	SENT_LIVE,      /* named to the client, still marked */
	SENT_SUSPECT,
};

static struct {
	VALUE *keys;            /* hash slots: the frame, 0 empty */
	uint32_t *ids;          /* each slot's id, 0 while being written */
	VALUE *values;          /* by id */
	uint8_t *state;         /* by id: enum state */
	uint32_t mask, cap;
	uint32_t next;          /* the next id (atomic) */
	uint32_t named;         /* ids below are all sent (GVL side) */
	size_t bytes;
} ft;

static const struct {
	int kind;
	const char *name;
} pframes[] = {
	[TRC_PFRAME_NONE] = { TRC_FRAME_OTHER, "" },
#define TRC_X(NAME, kind, name) [TRC_PFRAME_##NAME] = { kind, name },
	TRC_PFRAMES(TRC_X)
#undef TRC_X
};

int
trc_frames_init(uint32_t cap)
{
	size_t slots = (size_t)cap * 2;
	size_t bytes = slots * (sizeof(VALUE) + sizeof(uint32_t)) + (size_t)cap * (sizeof(VALUE) + 1);
	unsigned char *p;

	if (cap < TRC_PFRAME_END * 2 || (cap & (cap - 1)) != 0) {
		errno = EINVAL;
		return -1;
	}
	/* cppcheck-suppress invalidFunctionArg ; MAP_ANONYMOUS takes -1 */
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	ft.keys = (VALUE *)p;
	ft.values = (VALUE *)(p + slots * sizeof(VALUE));
	ft.ids = (uint32_t *)(p + slots * sizeof(VALUE) + (size_t)cap * sizeof(VALUE));
	ft.state = p + slots * (sizeof(VALUE) + sizeof(uint32_t)) + (size_t)cap * sizeof(VALUE);
	ft.mask = (uint32_t)slots - 1;
	ft.cap = cap;
	ft.bytes = bytes;
	ft.named = TRC_PFRAME_NONE + 1;
	/* The pseudo-frames are numbered already, and named with the first pack. */
	for (uint32_t i = 1; i < TRC_PFRAME_END; i++)
		ft.state[i] = LIVE;
	__atomic_store_n(&ft.next, TRC_PFRAME_END, __ATOMIC_RELEASE);
	return 0;
}

void
trc_frames_release(void)
{
	if (ft.keys != NULL)
		munmap(ft.keys, ft.bytes);
	memset(&ft, 0, sizeof(ft));
}

static inline uint32_t
slot_of(VALUE v)
{
	uint64_t k = (uint64_t)v >> 3;

	k *= 0x9E3779B97F4A7C15ull;
	return (uint32_t)(k >> 32) & ft.mask;
}

static uint32_t
wait_id(uint32_t slot)
{
	for (int i = 0; i < SPINS; i++) {
		uint32_t id = __atomic_load_n(&ft.ids[slot], __ATOMIC_ACQUIRE);

		if (id != 0)
			return id == UINT32_MAX ? 0 : id;
		__builtin_ia32_pause();
	}
	return 0;
}

static uint32_t
number(uint32_t slot, VALUE v)
{
	uint32_t id = __atomic_fetch_add(&ft.next, 1, __ATOMIC_RELAXED);

	if (id >= ft.cap) {
		__atomic_store_n(&ft.ids[slot], UINT32_MAX, __ATOMIC_RELEASE);
		return 0;
	}
	ft.values[id] = v;
	/* From here on every collection marks it: seq_cst, for the handler's check after. */
	__atomic_store_n(&ft.state[id], LIVE, __ATOMIC_SEQ_CST);
	__atomic_store_n(&ft.ids[slot], id, __ATOMIC_RELEASE);
	return id;
}

uint32_t
trc_frames_id(VALUE v, int add, int *added)
{
	uint32_t slot;

	*added = 0;
	if (ft.keys == NULL || v == 0)
		return 0;
	slot = slot_of(v);
	for (uint32_t probe = 0; probe <= ft.mask; probe++, slot = (slot + 1) & ft.mask) {
		VALUE k = __atomic_load_n(&ft.keys[slot], __ATOMIC_ACQUIRE);

		if (k == 0) {
			VALUE empty = 0;

			if (!add)
				return 0;
			if (__atomic_compare_exchange_n(&ft.keys[slot], &empty, v, 0, __ATOMIC_ACQ_REL,
			    __ATOMIC_ACQUIRE)) {
				uint32_t id = number(slot, v);

				*added = id != 0;
				return id;
			}
			k = empty;
		}
		if (k == v)
			return wait_id(slot);
	}
	return 0;
}

void
trc_frames_suspect(uint32_t id)
{
	if (id < ft.cap)
		__atomic_store_n(&ft.state[id], SUSPECT, __ATOMIC_SEQ_CST);
}

int
trc_frames_pinned(uint32_t id)
{
	int s;

	if (id < TRC_PFRAME_END || id >= ft.cap)
		return 0;
	s = __atomic_load_n(&ft.state[id], __ATOMIC_SEQ_CST);
	return s == LIVE || s == SENT_LIVE;
}

void
trc_frames_mark(void)
{
	uint32_t next = __atomic_load_n(&ft.next, __ATOMIC_ACQUIRE);

	if (ft.keys == NULL)
		return;
	if (next > ft.cap)
		next = ft.cap;
	for (uint32_t id = TRC_PFRAME_END; id < next; id++) {
		int s = __atomic_load_n(&ft.state[id], __ATOMIC_SEQ_CST);

		if (s == LIVE || s == SENT_LIVE)
			rb_gc_mark(ft.values[id]);  /* and pinned: its address stays its key */
	}
}

static void
pack_str(msgpack_packer *pk, VALUE s)
{
	if (!RB_TYPE_P(s, T_STRING)) {
		msgpack_pack_str(pk, 0);
		return;
	}
	msgpack_pack_str(pk, (size_t)RSTRING_LEN(s));
	msgpack_pack_str_body(pk, RSTRING_PTR(s), (size_t)RSTRING_LEN(s));
}

static void
pack_cstr(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);

	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

/*
 * A label made stable (stable.h): a compiled template's frame is one frame across a server's
 * workers. One too long for the buffer goes as it is.
 */
static void
pack_label_str(msgpack_packer *pk, VALUE label)
{
	char buf[1024];
	size_t n;

	if (!RB_TYPE_P(label, T_STRING) || (size_t)RSTRING_LEN(label) > sizeof(buf)) {
		pack_str(pk, label);
		return;
	}
	n = (size_t)RSTRING_LEN(label);
	memcpy(buf, RSTRING_PTR(label), n);
	n = trc_stable_label(buf, n);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, buf, n);
}

/* [id, kind, label, file, line] of a frame the VM knows. */
static void
pack_frame(msgpack_packer *pk, uint32_t id, VALUE v)
{
	VALUE label = rb_profile_frame_full_label(v);
	VALUE file = rb_profile_frame_absolute_path(v);
	VALUE line = rb_profile_frame_first_lineno(v);

	int c;

	if (NIL_P(file))
		file = rb_profile_frame_path(v);
	/* Only an instruction sequence has a file: a C method has none of its own (Ruby 3.1 calls
	 * it "<cfunc>"). */
	c = NIL_P(file) || !RB_TYPE_P(file, T_STRING) || (RSTRING_LEN(file) == 7 &&
	    memcmp(RSTRING_PTR(file), "<cfunc>", 7) == 0);
	if (c)
		file = Qnil;
	msgpack_pack_array(pk, 5);
	msgpack_pack_uint32(pk, id);
	msgpack_pack_uint8(pk, c ? TRC_FRAME_C : TRC_FRAME_RUBY);
	pack_label_str(pk, label);
	pack_str(pk, file);
	msgpack_pack_int32(pk, FIXNUM_P(line) ? (int32_t)FIX2LONG(line) : 0);
	RB_GC_GUARD(label);
	RB_GC_GUARD(file);
}

static void
pack_named(msgpack_packer *pk, uint32_t id, int kind, const char *name)
{
	msgpack_pack_array(pk, 5);
	msgpack_pack_uint32(pk, id);
	msgpack_pack_uint8(pk, (uint8_t)kind);
	pack_cstr(pk, name);
	pack_cstr(pk, "");
	msgpack_pack_int32(pk, 0);
}

void
trc_frames_pack(msgpack_packer *pk)
{
	uint32_t next = __atomic_load_n(&ft.next, __ATOMIC_ACQUIRE), n = 0, *ids;

	if (ft.keys == NULL) {
		msgpack_pack_array(pk, 0);
		return;
	}
	if (next > ft.cap)
		next = ft.cap;
	/*
	 * The ids to send, taken once: naming a frame calls Ruby, which may collect, and a handler
	 * may mark a frame suspect meanwhile; the array's length is what this list holds, whatever
	 * their states are by the time each is named (a count taken in a loop of its own and a
	 * second loop that read the states again once sent a list one element short, which the
	 * client read as garbage).
	 */
	ids = malloc((size_t)(next > ft.named ? next - ft.named : 1) * sizeof(*ids));
	if (ids == NULL) {
		msgpack_pack_array(pk, 0);      /* sent next time: nothing was marked sent */
		return;
	}
	for (uint32_t id = ft.named; id < next; id++) {
		int s = __atomic_load_n(&ft.state[id], __ATOMIC_SEQ_CST);

		if (s == LIVE || s == SUSPECT)
			ids[n++] = id;
	}
	msgpack_pack_array(pk, n);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = ids[i];
		int s = __atomic_load_n(&ft.state[id], __ATOMIC_SEQ_CST);
		uint8_t expected, sent;

		if (id < TRC_PFRAME_END)
			pack_named(pk, id, pframes[id].kind, pframes[id].name);
		else if (s != LIVE)
			pack_named(pk, id, TRC_FRAME_OTHER, pframes[TRC_PFRAME_UNKNOWN].name);
		else
			pack_frame(pk, id, ft.values[id]);
		/* A handler may make it suspect meanwhile: it was named while it was live. */
		expected = (uint8_t)s;
		sent = s == LIVE ? SENT_LIVE : SENT_SUSPECT;
		if (!__atomic_compare_exchange_n(&ft.state[id], &expected, sent, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			__atomic_store_n(&ft.state[id], SENT_SUSPECT, __ATOMIC_SEQ_CST);
	}
	free(ids);
	while (ft.named < next && ft.state[ft.named] >= SENT_LIVE)
		ft.named++;
}
