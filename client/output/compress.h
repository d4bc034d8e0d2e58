/* compress.h: gzip and zstd streams for -o FILE.gz and FILE.zst, as codecs of output.h. */
#ifndef TRC_COMPRESS_H
#define TRC_COMPRESS_H

#include "output.h"

enum trc_compression {
	TRC_COMPRESS_NONE = 0,
	TRC_COMPRESS_GZIP = 1,  /* one gzip member (RFC 1952), as gzip -dc reads */
	TRC_COMPRESS_ZSTD = 2,  /* one zstd frame, as zstd -dc reads */
};

/* The compression a file name asks for by its ending: ".gz", ".zst", else none. Pure. */
enum trc_compression trc_compression_of(const char *path);

/*
 * A codec (output.h) that compresses everything put through it into one stream of kind c,
 * ended by the put with end set. Streams written one after the other make a valid file of
 * several members (gzip) or frames (zstd), which decompresses to their texts in order: hence
 * --append. Returns 0 with *codec set (trc_output_set_codec takes it over), or -1 with errno
 * when the library cannot start a stream. Pure; main thread.
 */
int trc_compress_codec(enum trc_compression c, struct trc_codec *codec);

#endif
