/* compress.c: the gzip (zlib) and zstd (libzstd) streams behind -o FILE.gz and FILE.zst. */
#include "compress.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define ZLIB_CONST
#include <zlib.h>
#include <zstd.h>

#include "xmalloc.h"

/*
 * Levels: a firehose writes a hundred MB a second of very repetitive text, and the client
 * must keep up with the agent or events are lost, on cores the app needs. The fastest levels
 * still shrink a trace some 20 times. zstd's level 1 took 35-40% less CPU than its default (3)
 * on a Redmine -f trace (141 MB) and on a loop's (300 MB), and its files were 4% and 26%
 * smaller (libzstd 1.5.4, docs/performance.md).
 */
#define GZIP_LEVEL Z_BEST_SPEED
#define ZSTD_LEVEL 1
#define GZIP_WINDOW (15 + 16)   /* 32 KiB window, gzip header and trailer */
#define IN_CHUNK (1u << 20)     /* zlib counts in uInt: input goes in slices */
#define OUT_CHUNK (64u << 10)

static bool
suffix_is(const char *path, const char *suffix)
{
	size_t n = strlen(path), k = strlen(suffix);

	return n > k && strcmp(path + n - k, suffix) == 0;
}

enum trc_compression
trc_compression_of(const char *path)
{
	if (suffix_is(path, ".gz"))
		return TRC_COMPRESS_GZIP;
	if (suffix_is(path, ".zst"))
		return TRC_COMPRESS_ZSTD;
	return TRC_COMPRESS_NONE;
}

/* ---- gzip ---- */

/* zlib allocates through the client's one policy: out of memory aborts. */
static voidpf
gz_alloc(voidpf opaque, uInt items, uInt size)
{
	(void)opaque;
	return xreallocarray(NULL, items, size);
}

static void
gz_free(voidpf opaque, voidpf p)
{
	(void)opaque;
	free(p);
}

/* Runs deflate over what z holds as input until it is all taken (or, with Z_FINISH, until
 * the stream has ended), appending the output to out. */
static int
gz_deflate(z_stream *z, int flush, struct trc_buf *out)
{
	int rc;

	do {
		size_t room;

		trc_buf_grow(out, OUT_CHUNK);
		room = out->cap - out->len;
		z->next_out = (Bytef *)out->data + out->len;
		z->avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
		rc = deflate(z, flush);
		out->len = (size_t)((char *)z->next_out - out->data);
		if (rc == Z_STREAM_ERROR) {
			errno = EIO;
			return -1;
		}
	} while (z->avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
	return 0;
}

static int
gz_put(void *impl, const void *p, size_t n, bool end, struct trc_buf *out)
{
	z_stream *z = impl;
	size_t done = 0;

	/* p is NULL when there is nothing to put: no arithmetic on it then. */
	do {
		uInt take = n - done > IN_CHUNK ? IN_CHUNK : (uInt)(n - done);

		z->next_in = take > 0 ? (const Bytef *)p + done : NULL;
		z->avail_in = take;
		done += take;
		if (gz_deflate(z, end && done == n ? Z_FINISH : Z_NO_FLUSH, out) < 0)
			return -1;
	} while (done < n);
	return 0;
}

static void
gz_close(void *impl)
{
	z_stream *z = impl;

	deflateEnd(z);
	free(z);
}

static const struct trc_codec_ops gz_ops = { gz_put, gz_close };

static int
gz_new(struct trc_codec *codec)
{
	z_stream *z = xcalloc(1, sizeof(*z));

	z->zalloc = gz_alloc;
	z->zfree = gz_free;
	if (deflateInit2(z, GZIP_LEVEL, Z_DEFLATED, GZIP_WINDOW, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(z);
		errno = EINVAL;         /* a zlib that does not take these parameters */
		return -1;
	}
	*codec = (struct trc_codec){ &gz_ops, z };
	return 0;
}

/* ---- zstd ---- */

static int
zs_put(void *impl, const void *p, size_t n, bool end, struct trc_buf *out)
{
	ZSTD_inBuffer in = { p, n, 0 };
	ZSTD_EndDirective mode = end ? ZSTD_e_end : ZSTD_e_continue;
	size_t left;

	do {
		ZSTD_outBuffer ob;

		trc_buf_grow(out, ZSTD_CStreamOutSize());
		ob = (ZSTD_outBuffer){ out->data + out->len, out->cap - out->len, 0 };
		left = ZSTD_compressStream2(impl, &ob, &in, mode);
		if (ZSTD_isError(left)) {
			errno = EIO;
			return -1;
		}
		out->len += ob.pos;
	} while (end ? left != 0 : in.pos < in.size);
	return 0;
}

static void
zs_close(void *impl)
{
	ZSTD_freeCCtx(impl);
}

static const struct trc_codec_ops zs_ops = { zs_put, zs_close };

/* libzstd allocates with plain malloc (a custom allocator is experimental API): a NULL
 * context is its out of memory. */
static int
zs_new(struct trc_codec *codec)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();

	if (cc == NULL) {
		errno = ENOMEM;
		return -1;
	}
	if (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, ZSTD_LEVEL))) {
		ZSTD_freeCCtx(cc);
		errno = EINVAL;
		return -1;
	}
	*codec = (struct trc_codec){ &zs_ops, cc };
	return 0;
}

int
trc_compress_codec(enum trc_compression c, struct trc_codec *codec)
{
	switch (c) {
	case TRC_COMPRESS_GZIP:
		return gz_new(codec);
	case TRC_COMPRESS_ZSTD:
		return zs_new(codec);
	case TRC_COMPRESS_NONE:
		break;
	}
	*codec = (struct trc_codec){ NULL, NULL };
	return 0;
}
