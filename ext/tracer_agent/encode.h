/* encode.h: ring records and replies to msgpack messages of the wire protocol. */
#ifndef TRC_ENCODE_H
#define TRC_ENCODE_H

#include <msgpack.h>
#include <stddef.h>

/*
 * Encodes the records in [p, p + n) into pk, each method and thread definition before its first
 * use. Runs on the agent thread without the GVL: it reads only published name-table entries.
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

/* Helpers for the replies. */
void trc_pack_str(msgpack_packer *pk, const char *s, size_t len);
void trc_pack_cstr(msgpack_packer *pk, const char *s);

#endif
