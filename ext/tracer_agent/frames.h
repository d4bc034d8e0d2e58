/* frames.h: the profiler's frames: what rb_profile_frames returns, numbered and kept alive. */
#ifndef TRC_FRAMES_H
#define TRC_FRAMES_H

#include <msgpack.h>
#include <ruby.h>
#include <stdint.h>

/*
 * A sample is a list of frame ids. A signal handler that meets a frame (an instruction
 * sequence or a C method's entry) the table does not know numbers it itself, so that the
 * sample needs nothing more of the VM once taken; the GVL side names the new numbers later,
 * at leisure (trc_frames_pack). The table keeps every frame it numbered alive and where it is
 * (rb_gc_mark pins), so a number always means the same frame.
 *
 * Numbering needs the GVL: a frame is only known to be alive while the thread that met it
 * holds it and no collection runs. A handler that cannot be sure (a collection began while
 * it worked) marks what it numbered as suspect: kept, never marked nor named again.
 *
 * Pseudo-frames, numbered before any frame, stand for what has no Ruby frame: X(NAME, kind,
 * "name"), kind as enum trc_frame_kind (tracer_protocol.h).
 */
#define TRC_PFRAMES(X) \
	X(GC, TRC_FRAME_GC, "(garbage collection)") \
	X(MARKING, TRC_FRAME_GC, "(marking)") \
	X(SWEEPING, TRC_FRAME_GC, "(sweeping)") \
	X(GVL, TRC_FRAME_GVL, "(waiting for the GVL)") \
	X(BLOCKED, TRC_FRAME_BLOCKED, "(blocked: sleeping, IO or C without the GVL)") \
	X(NOGVL, TRC_FRAME_C, "(running C without the GVL)") \
	X(UNKNOWN, TRC_FRAME_OTHER, "(unknown frame)") \
	X(TRUNCATED, TRC_FRAME_OTHER, "(deeper frames left out)")

enum trc_pframe {
	TRC_PFRAME_NONE = 0,
#define TRC_X(NAME, kind, name) TRC_PFRAME_##NAME,
	TRC_PFRAMES(TRC_X)
#undef TRC_X
	TRC_PFRAME_END          /* the first real frame's id */
};

/* GVL held. Makes the table for up to cap frames (a power of two). -1 with errno. */
int trc_frames_init(uint32_t cap);
/* GVL held, once nothing can number frames any more (handlers gone). */
void trc_frames_release(void);

/*
 * Async-signal-safe, any thread. The id of frame v; a new one when add is set and v is new
 * (*added then says so), 0 when the table is full or, without add, when v is new.
 */
uint32_t trc_frames_id(VALUE v, int add, int *added);
/* Async-signal-safe. A frame numbered while a collection may have run: never touched again. */
void trc_frames_suspect(uint32_t id);
/* Async-signal-safe: whether id's frame is marked and pinned at each collection (so its
 * address names it for as long as the table lasts). */
int trc_frames_pinned(uint32_t id);

/* GVL held. Frames numbered but not yet named: packs [[id, kind, label, file, line]...]. */
void trc_frames_pack(msgpack_packer *pk);
/* From the GC's mark phase. */
void trc_frames_mark(void);

#endif
