/* conn.h: one connection to an agent: non-blocking reads into the decoder, buffered writes. */
#ifndef TRC_CONN_H
#define TRC_CONN_H

#include <ev.h>
#include <stdint.h>

#include "buf.h"
#include "decode.h"

/* Reads up to this much at once: a flood arrives in the agent's 4 MiB socket buffer. */
#define TRC_CONN_READ_CHUNK (1024u << 10)

enum trc_conn_end {
	TRC_CONN_EOF = 0,       /* the agent closed the connection */
	TRC_CONN_IO_ERROR = 1,  /* read or write failed: detail is strerror */
	TRC_CONN_PROTOCOL = 2,  /* the bytes are not a valid message: detail says why */
	TRC_CONN_TRUNCATED = 3, /* the agent closed the connection inside a message */
};

struct trc_conn;

/* A decoded message; strings in m last until the callback returns. Return 0 to go on, or -1
 * if the connection was closed (or must not be read further) from inside the callback. */
typedef int trc_conn_msg_fn(void *ctx, const struct trc_message *m);
/* The connection cannot go on; the callee should trc_conn_close() it. */
typedef void trc_conn_end_fn(void *ctx, enum trc_conn_end why, const char *detail);
/* Sees every byte received, as read, before it is decoded. */
typedef void trc_conn_tap_fn(void *ctx, const void *p, size_t n);

/* Caller-allocated; fields are private to conn.c. */
struct trc_conn {
	struct ev_loop *loop;
	int fd;                 /* -1 once closed */
	ev_io read_w, write_w;
	uint8_t *rbuf;          /* received bytes [rstart, rend) not decoded yet */
	size_t rstart, rend, rcap;
	size_t need;            /* decode again once this many bytes are buffered */
	struct trc_buf wbuf;    /* bytes not sent yet */
	int pass_fd;            /* a descriptor to send with wbuf's byte pass_at, or -1 */
	size_t pass_at;
	struct trc_decoder dec;
	trc_conn_msg_fn *on_msg;
	trc_conn_end_fn *on_end;
	trc_conn_tap_fn *tap;   /* NULL: none */
	uint64_t *skipped;      /* calls and returns are counted here, not decoded; NULL: decoded */
	ev_tstamp last_read;    /* the loop's time when bytes last came */
	void *ctx, *tap_ctx;
};

/* Takes ownership of the non-blocking fd and starts reading it in loop. Main thread. */
void trc_conn_init(struct trc_conn *c, struct ev_loop *loop, int fd, trc_conn_msg_fn *on_msg,
		   trc_conn_end_fn *on_end, void *ctx);
/* Shows tap every byte received from now on (a spool keeps them: spool.h). */
void trc_conn_tap(struct trc_conn *c, trc_conn_tap_fn *tap, void *ctx);
/*
 * From now on, calls and returns are not decoded nor handed to on_msg: they are only counted
 * in *count (a tap has their bytes). Everything else still is. NULL: decoded again.
 */
void trc_conn_skip_calls(struct trc_conn *c, uint64_t *count);
/*
 * Queues the bytes of msg (copied) for sending, and passes fd (SCM_RIGHTS) with its first
 * byte, unless fd is -1. Ignored once closed. The caller keeps fd, and keeps it open until the
 * connection is closed; one at a time.
 */
void trc_conn_send_fd(struct trc_conn *c, const struct trc_buf *msg, int fd);
/* Stops the watchers, closes the fd and frees the buffers. Safe to repeat. */
void trc_conn_close(struct trc_conn *c);

#endif
