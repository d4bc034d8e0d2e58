/* encode.h: ring records and replies to msgpack messages of the wire protocol. */
#ifndef TRC_ENCODE_H
#define TRC_ENCODE_H

#include <msgpack.h>
#include <stddef.h>

/*
 * Encodes the records in [p, p + n) into pk, each method and thread definition before its first
 * use. Runs on the agent thread without the GVL: it reads only published name-table entries.
 * Returns how many bytes of records it consumed (whole records only).
 */
size_t trc_encode_records(msgpack_packer *pk, const unsigned char *p, size_t n);

/* Helpers for the replies. */
void trc_pack_str(msgpack_packer *pk, const char *s, size_t len);
void trc_pack_cstr(msgpack_packer *pk, const char *s);

#endif
