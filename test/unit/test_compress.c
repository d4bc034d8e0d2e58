/* test_compress.c: -o FILE.gz and FILE.zst: what the output writes decompresses to its text. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <zlib.h>
#include <zstd.h>

#include "compress.h"
#include "output.h"
#include "test.h"

/* Every byte of the file f, in b. */
static void
slurp(FILE *f, struct trc_buf *b)
{
	char chunk[4096];
	size_t n;

	rewind(f);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		trc_buf_add(b, chunk, n);
}

/* gzip -dc: every member of in, one after the other. Returns 0, or -1 on a bad stream. */
static int
gunzip(const struct trc_buf *in, struct trc_buf *out)
{
	z_stream z = { 0 };
	int rc = Z_OK;

	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return -1;
	z.next_in = (Bytef *)in->data;
	z.avail_in = (uInt)in->len;
	while (z.avail_in > 0 && (rc == Z_OK || rc == Z_STREAM_END)) {
		if (rc == Z_STREAM_END)
			inflateReset(&z);
		trc_buf_grow(out, 4096);
		z.next_out = (Bytef *)out->data + out->len;
		z.avail_out = (uInt)(out->cap - out->len);
		rc = inflate(&z, Z_NO_FLUSH);
		out->len = (size_t)((char *)z.next_out - out->data);
	}
	inflateEnd(&z);
	return rc == Z_STREAM_END ? 0 : -1;
}

/* zstd -dc: every frame of in. Returns 0, or -1 on a bad or unfinished stream. */
static int
unzstd(const struct trc_buf *in, struct trc_buf *out)
{
	ZSTD_DCtx *d = ZSTD_createDCtx();
	ZSTD_inBuffer ib = { in->data, in->len, 0 };
	size_t rc = 1;

	while (ib.pos < ib.size) {
		ZSTD_outBuffer ob;

		trc_buf_grow(out, 4096);
		ob = (ZSTD_outBuffer){ out->data + out->len, out->cap - out->len, 0 };
		rc = ZSTD_decompressStream(d, &ob, &ib);
		if (ZSTD_isError(rc))
			break;
		out->len += ob.pos;
	}
	ZSTD_freeDCtx(d);
	return rc == 0 ? 0 : -1;
}

/* The text a test writes: lines of a trace, flushed now and then as the loop would. */
static void
write_trace(struct trc_output *o, struct trc_buf *want, int lines)
{
	for (int i = 0; i < lines; i++) {
		char line[64];
		int n = snprintf(line, sizeof(line), "[%d] Foo#bar <0.%06d>\n", 100 + i % 4, i);

		trc_output_write(o, line, (size_t)n);
		trc_buf_add(want, line, (size_t)n);
		if (i % 1000 == 0)
			trc_output_flush(o);
	}
}

/* Writes runs streams of text into one file (as --append does), decodes the file. */
static void
round_trip(enum trc_compression kind, int runs, int (*decode)(const struct trc_buf *,
							   struct trc_buf *), const char *what)
{
	FILE *f = tmpfile();
	struct trc_buf want, file, got;

	trc_buf_init(&want);
	trc_buf_init(&file);
	trc_buf_init(&got);
	for (int r = 0; r < runs; r++) {
		struct trc_output o;
		struct trc_codec codec;

		trc_output_init(&o, fileno(f), -1);
		test_cond("codec made", trc_compress_codec(kind, &codec) == 0);
		trc_output_set_codec(&o, codec);
		write_trace(&o, &want, 30000 * (r + 1));
		test_cond("end", trc_output_end(&o) == 0);
		trc_output_write(&o, "late", 4);
		test_cond("nothing after the end", trc_output_flush(&o) == 0);
		trc_output_release(&o);
	}
	slurp(f, &file);
	test_cond(what, decode(&file, &got) == 0 && got.len == want.len &&
			memcmp(got.data, want.data, want.len) == 0);
	test_cond("compressed", file.len * 3 < want.len);
	fclose(f);
	trc_buf_release(&want);
	trc_buf_release(&file);
	trc_buf_release(&got);
}

static void
test_suffixes(void)
{
	test_cond(".gz", trc_compression_of("/tmp/trace.txt.gz") == TRC_COMPRESS_GZIP);
	test_cond(".zst", trc_compression_of("trace.zst") == TRC_COMPRESS_ZSTD);
	test_cond("plain", trc_compression_of("trace.txt") == TRC_COMPRESS_NONE);
	test_cond("a bare .gz is a name", trc_compression_of(".gz") == TRC_COMPRESS_NONE);
	test_cond("gz inside", trc_compression_of("x.gz.txt") == TRC_COMPRESS_NONE);
}

/* An empty trace still makes a valid (empty) stream. */
static void
test_empty(void)
{
	FILE *f = tmpfile();
	struct trc_output o;
	struct trc_codec codec;
	struct trc_buf file, got;

	trc_buf_init(&file);
	trc_buf_init(&got);
	trc_output_init(&o, fileno(f), -1);
	trc_compress_codec(TRC_COMPRESS_GZIP, &codec);
	trc_output_set_codec(&o, codec);
	trc_output_end(&o);
	trc_output_release(&o);
	slurp(f, &file);
	test_cond("empty gzip member", file.len > 0 && gunzip(&file, &got) == 0 && got.len == 0);
	fclose(f);
	trc_buf_release(&file);
	trc_buf_release(&got);
}

void
test_compress(void)
{
	test_suffixes();
	round_trip(TRC_COMPRESS_GZIP, 1, gunzip, "gzip decompresses to the text");
	round_trip(TRC_COMPRESS_ZSTD, 1, unzstd, "zstd decompresses to the text");
	round_trip(TRC_COMPRESS_GZIP, 2, gunzip, "two gzip members: both texts in order");
	round_trip(TRC_COMPRESS_ZSTD, 2, unzstd, "two zstd frames: both texts in order");
	test_empty();
}
