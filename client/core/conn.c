/* conn.c: one agent connection: reads of up to 1 MiB feeding the decoder, a write queue. */
#include "conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xmalloc.h"

/* Leaves at least TRC_CONN_READ_CHUNK free bytes after rend, and room for a whole message. */
static void
make_room(struct trc_conn *c)
{
	size_t live = c->rend - c->rstart;
	size_t want = live + TRC_CONN_READ_CHUNK;

	if (c->need > want)
		want = c->need;
	if (c->rcap - c->rend >= TRC_CONN_READ_CHUNK && c->rcap >= c->rstart + c->need)
		return;
	if (live > 0)
		memmove(c->rbuf, c->rbuf + c->rstart, live);
	c->rstart = 0;
	c->rend = live;
	if (c->rcap < want) {
		c->rbuf = xrealloc(c->rbuf, want);
		c->rcap = want;
	}
}

/* Decodes and hands out every whole message buffered. Returns -1 once the conn is done. */
static int
dispatch(struct trc_conn *c)
{
	struct trc_message m;
	size_t used;

	while (c->rend - c->rstart >= c->need) {
		if (c->skipped != NULL) {
			size_t n = trc_decode_skip_calls(c->rbuf + c->rstart, c->rend - c->rstart,
							 c->skipped);

			/* What need waited for is behind: a short last message (the DETACHED that
			 * ends a flood) must not wait for a call's worth of bytes that never come. */
			if (n > 0) {
				c->rstart += n;
				c->need = 1;
			}
			if (c->rstart == c->rend)
				break;
		}
		switch (trc_decode(&c->dec, c->rbuf + c->rstart, c->rend - c->rstart, &m, &used)) {
		case TRC_DECODE_OK:
			c->rstart += used;
			c->need = 1;
			if (c->on_msg(c->ctx, &m) < 0 || c->fd < 0)
				return -1;
			break;
		case TRC_DECODE_MORE:
			c->need = c->dec.need;
			return 0;
		case TRC_DECODE_ERROR:
			c->on_end(c->ctx, TRC_CONN_PROTOCOL, c->dec.error);
			return -1;
		}
	}
	if (c->rstart == c->rend)
		c->rstart = c->rend = 0;
	return 0;
}

/*
 * One read per wakeup, then decode: with several targets flooding, each gets its turn and
 * the loop reaches its idle flush between rounds.
 */
static void
on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct trc_conn *c = w->data;
	ssize_t n;

	(void)revents;
	make_room(c);
	n = read(c->fd, c->rbuf + c->rend, c->rcap - c->rend);
	/* ECONNRESET: the agent closed before reading all we sent; an end like EOF all the same. */
	if (n == 0 || (n < 0 && errno == ECONNRESET)) {
		if (c->rend > c->rstart)
			c->on_end(c->ctx, TRC_CONN_TRUNCATED, "connection closed inside a message");
		else
			c->on_end(c->ctx, TRC_CONN_EOF, "end of file");
	} else if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			c->on_end(c->ctx, TRC_CONN_IO_ERROR, strerror(errno));
	} else {
		c->last_read = ev_now(loop);
		if (c->tap != NULL)
			c->tap(c->tap_ctx, c->rbuf + c->rend, (size_t)n);
		c->rend += (size_t)n;
		dispatch(c);
	}
}

/* The queued bytes from the message that carries pass_fd on, with the descriptor. */
static ssize_t
send_with_fd(struct trc_conn *c)
{
	union {
		struct cmsghdr align;
		char bytes[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = c->wbuf.data, .iov_len = c->wbuf.len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.bytes,
			     .msg_controllen = sizeof(ctl.bytes) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	memset(ctl.bytes, 0, sizeof(ctl.bytes));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &c->pass_fd, sizeof(int));
	return sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/*
 * Up to the message that carries a descriptor, a plain send; from its first byte, a sendmsg
 * with the descriptor, which the kernel attaches to that byte (the agent gets it with them).
 */
static ssize_t
send_some(struct trc_conn *c)
{
	if (c->pass_fd >= 0 && c->pass_at == 0)
		return send_with_fd(c);
	return send(c->fd, c->wbuf.data, c->pass_fd >= 0 ? c->pass_at : c->wbuf.len,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* n bytes went out: they may have taken the descriptor along. */
static void
sent(struct trc_conn *c, size_t n)
{
	if (c->pass_fd >= 0 && c->pass_at == 0)
		c->pass_fd = -1;
	else if (c->pass_fd >= 0)
		c->pass_at -= n;
	trc_buf_consume(&c->wbuf, n);
}

static void
on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct trc_conn *c = w->data;
	ssize_t n;

	(void)revents;
	n = send_some(c);
	if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
		/* The agent is gone, but what it sent before (an ERROR, say) may still wait to be
		 * read: stop writing and let the reader reach the end. */
		ev_io_stop(loop, &c->write_w);
		c->wbuf.len = 0;
		c->pass_fd = -1;
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			c->on_end(c->ctx, TRC_CONN_IO_ERROR, strerror(errno));
		return;
	}
	sent(c, (size_t)n);
	if (c->wbuf.len == 0)
		ev_io_stop(loop, &c->write_w);
}

void
trc_conn_init(struct trc_conn *c, struct ev_loop *loop, int fd, trc_conn_msg_fn *on_msg,
	      trc_conn_end_fn *on_end, void *ctx)
{
	memset(c, 0, sizeof(*c));
	c->loop = loop;
	c->fd = fd;
	c->pass_fd = -1;
	c->need = 1;
	c->on_msg = on_msg;
	c->on_end = on_end;
	c->ctx = ctx;
	trc_buf_init(&c->wbuf);
	trc_decoder_init(&c->dec);
	ev_io_init(&c->read_w, on_readable, fd, EV_READ);
	ev_io_init(&c->write_w, on_writable, fd, EV_WRITE);
	c->read_w.data = c;
	c->write_w.data = c;
	ev_io_start(loop, &c->read_w);
}

void
trc_conn_tap(struct trc_conn *c, trc_conn_tap_fn *tap, void *ctx)
{
	c->tap = tap;
	c->tap_ctx = ctx;
}

void
trc_conn_skip_calls(struct trc_conn *c, uint64_t *count)
{
	c->skipped = count;
}

void
trc_conn_send_fd(struct trc_conn *c, const struct trc_buf *msg, int fd)
{
	if (c->fd < 0)
		return;
	if (fd >= 0) {
		c->pass_fd = fd;
		c->pass_at = c->wbuf.len;
	}
	trc_buf_add(&c->wbuf, msg->data, msg->len);
	ev_io_start(c->loop, &c->write_w);
}

void
trc_conn_close(struct trc_conn *c)
{
	if (c->fd < 0)
		return;
	ev_io_stop(c->loop, &c->read_w);
	ev_io_stop(c->loop, &c->write_w);
	close(c->fd);
	c->fd = -1;
	free(c->rbuf);
	c->rbuf = NULL;
	c->rstart = c->rend = c->rcap = 0;
	trc_buf_release(&c->wbuf);
	trc_decoder_release(&c->dec);
}
