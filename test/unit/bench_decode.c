/* bench_decode.c: decode + format speed on a recorded stream of 10M CALL/RETURN events. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "decode.h"
#include "encode.h"
#include "output.h"
#include "trace.h"

#define EVENTS 10000000
#define RUNS 5

/* One tree of 10 events: a(b(c, d), e), as a firehose of a small program looks. */
static const struct step {
	uint32_t type, method;
} tree[] = {
	{ TRC_EV_CALL, 0 }, { TRC_EV_CALL, 1 }, { TRC_EV_CALL, 2 }, { TRC_EV_RETURN, 2 },
	{ TRC_EV_CALL, 3 }, { TRC_EV_RETURN, 3 }, { TRC_EV_RETURN, 1 }, { TRC_EV_CALL, 4 },
	{ TRC_EV_RETURN, 4 }, { TRC_EV_RETURN, 0 },
};

static void
record_method(struct trc_buf *b, uint32_t idx, const char *cls, const char *name)
{
	trc_pack_array(b, 7);
	trc_pack_uint(b, TRC_EV_METHOD);
	trc_pack_uint(b, idx);
	trc_pack_cstr(b, cls);
	trc_pack_cstr(b, "#");
	trc_pack_cstr(b, name);
	trc_pack_cstr(b, "/srv/app/lib/app.rb");
	trc_pack_int(b, 10 + idx);
}

static void
record(struct trc_buf *b)
{
	static const char *names[] = { "call", "process", "fetch", "parse", "render" };
	uint64_t ts = 1700000000000000ull;

	trc_pack_array(b, 3);
	trc_pack_uint(b, TRC_EV_THREAD);
	trc_pack_uint(b, 0);
	trc_pack_cstr(b, "main");
	for (uint32_t i = 0; i < 5; i++)
		record_method(b, i, "App::Handler", names[i]);
	for (size_t i = 0; i < EVENTS; i++) {
		const struct step *s = &tree[i % 10];

		trc_pack_array(b, 4);
		trc_pack_uint(b, s->type);
		trc_pack_uint(b, 0);
		trc_pack_uint(b, s->method);
		trc_pack_uint(b, ts += 137);
	}
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Decodes the whole stream, feeding the printer when format is set; returns events/s. */
static double
run(const struct trc_buf *stream, int fd, int format, size_t *bytes_out)
{
	struct trc_trace_opts opts = { .prefix = 2 };
	struct trc_decoder d;
	struct trc_output out;
	struct trc_trace *t;
	struct trc_message m;
	size_t off = 0, used, n = 0;
	double t0;

	trc_decoder_init(&d);
	trc_output_init(&out, fd, -1);
	t = trc_trace_new(&out, &opts, NULL, 0);
	t0 = now();
	while (off < stream->len &&
	       trc_decode(&d, stream->data + off, stream->len - off, &m, &used) == TRC_DECODE_OK) {
		off += used;
		n++;
		if (format && trc_trace_feed(t, &m) < 0)
			break;
	}
	trc_trace_free(t);
	trc_output_flush(&out);
	t0 = now() - t0;
	*bytes_out = off;
	trc_output_release(&out);
	trc_decoder_release(&d);
	if (n != EVENTS + 6) {
		fprintf(stderr, "bench: decoded %zu messages, expected %d\n", n, EVENTS + 6);
		exit(1);
	}
	return EVENTS / t0;
}

/* What a spooling client does with a flood as it comes: finds where each call ends. */
static double
run_skip(const struct trc_buf *stream, size_t *bytes_out)
{
	struct trc_decoder d;
	struct trc_message m;
	size_t off = 0, used;
	uint64_t n = 0;
	double t0;

	trc_decoder_init(&d);
	for (int i = 0; i < 6; i++) {   /* the thread and the methods */
		if (trc_decode(&d, stream->data + off, stream->len - off, &m, &used) != TRC_DECODE_OK)
			break;
		off += used;
	}
	t0 = now();
	off += trc_decode_skip_calls(stream->data + off, stream->len - off, &n);
	t0 = now() - t0;
	*bytes_out = off;
	trc_decoder_release(&d);
	if (n != EVENTS || off != stream->len) {
		fprintf(stderr, "bench: skipped %llu calls, expected %d\n", (unsigned long long)n, EVENTS);
		exit(1);
	}
	return EVENTS / t0;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double
median_of(const struct trc_buf *stream, int fd, int format, const char *what)
{
	double rates[RUNS];
	size_t bytes;

	for (int i = 0; i < RUNS; i++)
		rates[i] = format < 0 ? run_skip(stream, &bytes) : run(stream, fd, format, &bytes);
	qsort(rates, RUNS, sizeof(rates[0]), cmp);
	printf("%-28s median %6.2f M events/s (min %.2f, max %.2f; %zu MB)\n", what,
	       rates[RUNS / 2] / 1e6, rates[0] / 1e6, rates[RUNS - 1] / 1e6, bytes >> 20);
	return rates[RUNS / 2];
}

int
main(void)
{
	struct trc_buf stream;
	int fd = open("/dev/null", O_WRONLY);
	double rate;

	if (fd < 0) {
		perror("bench: /dev/null");
		return 1;
	}
	trc_buf_init(&stream);
	record(&stream);
	median_of(&stream, fd, -1, "skip calls (spooling):");
	median_of(&stream, fd, 0, "decode only:");
	rate = median_of(&stream, fd, 1, "decode + format (/dev/null):");
	close(fd);
	trc_buf_release(&stream);
	return rate >= 5e6 ? 0 : 1;
}
