/* httpd.c: --metrics' HTTP server: non-blocking accept, bounded reads of heads, one write per response, keep-alive. */
#define _GNU_SOURCE     /* accept4 */
#include "httpd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/uio.h>

#include "xmalloc.h"

/* Seconds a closed-for-writing connection may take to send its end (see drain()). */
#define DRAIN_SECS 1.0
#define BACKLOG 64
/* Seconds accepting pauses when it fails for want of descriptors (see on_accept()). */
#define ACCEPT_PAUSE_SECS 0.5

enum state { READING, WRITING, DRAINING };

struct conn {
	struct trc_httpd *d;
	int fd;
	enum state state;
	bool keep_alive;        /* the response being written leaves the connection open */
	bool clean;             /* ...or, closing it, leaves nothing unread: no drain needed */
	bool served;            /* a response went out: idle, it may make room (see on_accept()) */
	uint64_t seq;           /* the order it was accepted in: the oldest gives way first */
	ev_io io_w;
	ev_timer timer_w;
	char head[TRC_HTTP_MAX_HEAD];
	size_t n;
	struct trc_buf out;     /* what is still to write of a response the socket did not take whole */
	size_t sent;
};

struct trc_httpd {
	struct ev_loop *loop;
	int fd;
	ev_io accept_w;
	ev_timer pause_w;
	char *path;
	trc_httpd_handler *handler;
	void *ctx;
	struct conn *conns[TRC_HTTPD_MAX_CONNS];
	size_t nconns;
	uint64_t accepted;      /* connections accepted so far */
};

int
trc_httpd_listen(const struct sockaddr *addr, socklen_t len)
{
	int one = 1, zero = 0, fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int saved;

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto fail;
	if (addr->sa_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
		goto fail;
	if (bind(fd, addr, len) < 0 || listen(fd, BACKLOG) < 0)
		goto fail;
	return fd;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

static void
conn_close(struct conn *c)
{
	struct trc_httpd *d = c->d;

	ev_io_stop(d->loop, &c->io_w);
	ev_timer_stop(d->loop, &c->timer_w);
	close(c->fd);
	trc_buf_release(&c->out);
	for (size_t i = 0; i < d->nconns; i++) {
		if (d->conns[i] == c) {
			d->conns[i] = d->conns[--d->nconns];
			break;
		}
	}
	free(c);
}

/* The deadline: secs from now. Timers are the loop's own heap, no system call. */
static void
conn_deadline(struct conn *c, double secs)
{
	struct ev_loop *loop = c->d->loop;

	ev_timer_stop(loop, &c->timer_w);
	ev_timer_set(&c->timer_w, secs, 0);
	ev_timer_start(loop, &c->timer_w);
}

/*
 * The state and what the socket is watched for. The watcher is touched only when the events
 * change: each change is an epoll_ctl at the loop's next turn, and a kept-alive connection
 * answered at once goes from READING to READING.
 */
static void
conn_enter(struct conn *c, enum state state, int events)
{
	struct ev_loop *loop = c->d->loop;

	c->state = state;
	if (ev_is_active(&c->io_w) && (c->io_w.events & (EV_READ | EV_WRITE)) == events)
		return;
	ev_io_stop(loop, &c->io_w);
	ev_io_set(&c->io_w, c->fd, events);
	ev_io_start(loop, &c->io_w);
}

/*
 * After a response that closes its connection. When the request was read whole and nothing
 * came after it, the socket is closed at once. Otherwise its write side is shut and it is read
 * to its end first: closing a socket with unread bytes makes the kernel send a reset, which
 * may throw away the response before the client reads it (a 431 to a client still sending its
 * head).
 */
static void
finish(struct conn *c)
{
	if (c->clean && c->n == 0) {
		conn_close(c);
		return;
	}
	shutdown(c->fd, SHUT_WR);
	conn_enter(c, DRAINING, EV_READ);
	conn_deadline(c, DRAIN_SECS);
}

/*
 * After a response that keeps its connection: back to reading, with the idle deadline, or
 * the head's if the client already sent (part of) its next request.
 */
static void
next_request(struct conn *c)
{
	c->served = true;
	conn_enter(c, READING, EV_READ);
	conn_deadline(c, c->n > 0 ? TRC_HTTPD_READ_SECS : TRC_HTTPD_IDLE_SECS);
}

/* Sends what is left in c->out. Returns false once c is closed (finished or failed). */
static bool
on_write(struct conn *c)
{
	while (c->sent < c->out.len) {
		ssize_t w = send(c->fd, c->out.data + c->sent, c->out.len - c->sent, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (w < 0) {
			conn_close(c);
			return false;
		}
		c->sent += (size_t)w;
	}
	c->out.len = c->sent = 0;
	if (!c->keep_alive) {
		finish(c);
		return false;
	}
	next_request(c);
	return true;
}

/*
 * Head and body in one sendmsg (the body is the handler's, not copied) and, as the socket
 * nearly always takes a response of a few kilobytes whole, on to the next state without
 * waiting to be writable. What it did not take is copied into c->out, the handler's bytes
 * being valid only until its next call, and written as the socket drains.
 */
static bool
respond(struct conn *c, const struct trc_buf *head, const char *body, size_t body_len)
{
	struct iovec iov[2] = { { head->data, head->len }, { (void *)body, body_len } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = body_len > 0 ? 2 : 1 };
	size_t total = head->len + body_len, done;
	ssize_t w;

	do
		w = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
		conn_close(c);
		return false;
	}
	done = w < 0 ? 0 : (size_t)w;
	c->out.len = c->sent = 0;
	if (done < head->len)
		trc_buf_add(&c->out, head->data + done, head->len - done);
	if (done < total)
		trc_buf_add(&c->out, body + (done > head->len ? done - head->len : 0),
			    body_len - (done > head->len ? done - head->len : 0));
	if (c->out.len == 0)
		return on_write(c);
	conn_enter(c, WRITING, EV_WRITE);
	conn_deadline(c, TRC_HTTPD_WRITE_SECS);
	return true;
}

/*
 * A whole head (or one refused): the response, by path and method, its request's bytes taken
 * out of c->head. A connection stays open after a 200 its client did not ask to close; one
 * that erred closes. Returns false once c is closed.
 */
static bool
answer(struct conn *c, enum trc_http_parse parsed, const struct trc_http_request *req)
{
	struct trc_httpd *d = c->d;
	struct trc_buf msg, head;
	const struct trc_buf *body = &msg;
	bool get = strcmp(req->method, "GET") == 0, head_only = strcmp(req->method, "HEAD") == 0;
	const char *text = "text/plain; charset=utf-8";
	int status = 200;
	bool alive;

	trc_buf_init(&msg);
	trc_buf_init(&head);
	if (parsed == TRC_HTTP_BAD) {
		status = 400, trc_buf_adds(&msg, "bad request\n");
	} else if (parsed == TRC_HTTP_TOO_LARGE) {
		status = 431, trc_buf_adds(&msg, "request head too large\n");
	} else if (strcmp(req->path, d->path) != 0) {
		status = 404, trc_buf_addf(&msg, "not found: try %s\n", d->path);
	} else if (!get && !head_only) {
		status = 405, trc_buf_adds(&msg, "method not allowed: GET or HEAD\n");
	} else {
		text = d->handler(req, &body, d->ctx);
	}
	/* a head refused leaves its bytes where they were: drained, never parsed again */
	c->clean = parsed == TRC_HTTP_PARSED && !req->body;
	c->keep_alive = c->clean && status == 200 && !req->close;
	if (parsed == TRC_HTTP_PARSED) {
		c->n -= req->head_len;
		memmove(c->head, c->head + req->head_len, c->n);
	}
	trc_http_response_head(&head, status, text, body->len, c->keep_alive);
	alive = respond(c, &head, body->data, head_only ? 0 : body->len);
	trc_buf_release(&head);
	trc_buf_release(&msg);
	return alive;
}

/* Every whole head read so far answered, in order, while the responses go out at once. */
static void
serve_heads(struct conn *c)
{
	struct trc_http_request req = { .method = "" };
	enum trc_http_parse parsed;

	while (c->state == READING && c->n > 0 &&
	       (parsed = trc_http_parse(c->head, c->n, &req)) != TRC_HTTP_PARTIAL)
		if (!answer(c, parsed, &req))
			return;
}

static void
on_read(struct conn *c)
{
	ssize_t r = recv(c->fd, c->head + c->n, sizeof(c->head) - c->n, 0);

	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (r <= 0) {
		conn_close(c);  /* gone, between requests or before one was whole */
		return;
	}
	if (c->n == 0 && c->served)
		conn_deadline(c, TRC_HTTPD_READ_SECS);  /* idle no more: a head to finish */
	c->n += (size_t)r;
	serve_heads(c);
}

/* Whatever the client still sends after the response is thrown away, up to its end. */
static void
on_drain(struct conn *c)
{
	char junk[4096];
	ssize_t r = recv(c->fd, junk, sizeof(junk), 0);

	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (r <= 0)
		conn_close(c);
}

static void
on_conn_io(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;

	(void)loop, (void)revents;
	switch (c->state) {
	case READING: on_read(c); break;
	case WRITING:
		if (on_write(c) && c->state == READING)
			serve_heads(c); /* requests that came while the response went out */
		break;
	case DRAINING: on_drain(c); break;
	}
}

/* A deadline passed: a slow client (or one that never reads, or an idle one) is cut off. */
static void
on_conn_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop, (void)revents;
	conn_close(w->data);
}

/*
 * A new connection, read at once: its request has often come with it, and then it is
 * answered (and, closing, closed) before the loop would have watched its socket at all.
 */
static void
add_conn(struct trc_httpd *d, int fd)
{
	struct conn *c = xcalloc(1, sizeof(*c));

	c->d = d;
	c->fd = fd;
	c->seq = d->accepted++;
	trc_buf_init(&c->out);
	ev_io_init(&c->io_w, on_conn_io, fd, EV_READ);
	c->io_w.data = c;
	ev_timer_init(&c->timer_w, on_conn_timeout, TRC_HTTPD_READ_SECS, 0);
	c->timer_w.data = c;
	d->conns[d->nconns++] = c;
	conn_enter(c, READING, EV_READ);
	conn_deadline(c, TRC_HTTPD_READ_SECS);
	on_read(c);
}

/*
 * How readily a connection gives way to a new one when all are taken: 0, it owes nothing (kept
 * alive between requests, or draining after its last response); 1, it has not sent a whole
 * request (an idle client, or a slow one); 2, its response is still going out (a client that
 * does not read).
 */
static int
rank(const struct conn *c)
{
	if (c->state == DRAINING || (c->state == READING && c->served && c->n == 0))
		return 0;
	return c->state == READING ? 1 : 2;
}

/* The connection a new one takes the place of: the lowest rank, the oldest of it. */
static struct conn *
victim(struct trc_httpd *d)
{
	struct conn *v = NULL;

	for (size_t i = 0; i < d->nconns; i++) {
		struct conn *c = d->conns[i];

		if (v == NULL || rank(c) < rank(v) || (rank(c) == rank(v) && c->seq < v->seq))
			v = c;
	}
	return v;
}

static void
on_pause_end(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_httpd *d = w->data;

	(void)revents;
	ev_io_start(loop, &d->accept_w);
}

/*
 * One pending connection taken. Not a loop until EAGAIN: the socket is watched level-triggered,
 * so a second one pending brings the loop straight back, and scrapes that come one at a time
 * (the usual case) spare the accept4 that would fail; measured at 1,000 new connections a
 * second, 5.8% of a core against 7.0% with the loop.
 *
 * Beyond the cap, the new connection always gets in and an old one makes room (victim()):
 * one that owes nothing, else the oldest that has not sent its request, else the oldest whose
 * client is not reading. A scraper sends its request as it connects, so it is served long
 * before 16 newer connections could push it out; closing the new one instead, or only ever
 * an idle kept-alive one, let any local user hold every slot with connections that never send
 * a byte, each until its 5 s deadline. (A kept-alive client reconnects, as HTTP lets a server
 * close an idle connection.) When accept fails for want of descriptors (EMFILE, ENFILE,
 * ENOBUFS), the connection stays pending and the socket readable: accepting pauses a moment
 * rather than spin the loop on it.
 */
static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct trc_httpd *d = w->data;
	int fd;

	(void)revents;
	if ((fd = accept4(d->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		if (d->nconns == TRC_HTTPD_MAX_CONNS)
			conn_close(victim(d));
		add_conn(d, fd);
		return;
	}
	if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
		ev_io_stop(loop, &d->accept_w);
		/* set again: an expired timer keeps what was left of it, nothing */
		ev_timer_set(&d->pause_w, ACCEPT_PAUSE_SECS, 0);
		ev_timer_start(loop, &d->pause_w);
	}
}

struct trc_httpd *
trc_httpd_new(struct ev_loop *loop, int fd, const char *path, trc_httpd_handler *handler,
	      void *ctx)
{
	struct trc_httpd *d = xcalloc(1, sizeof(*d));

	d->loop = loop;
	d->fd = fd;
	d->path = xstrdup(path);
	d->handler = handler;
	d->ctx = ctx;
	ev_io_init(&d->accept_w, on_accept, fd, EV_READ);
	d->accept_w.data = d;
	ev_init(&d->pause_w, on_pause_end);
	d->pause_w.data = d;
	ev_io_start(loop, &d->accept_w);
	return d;
}

void
trc_httpd_free(struct trc_httpd *d)
{
	ev_io_stop(d->loop, &d->accept_w);
	ev_timer_stop(d->loop, &d->pause_w);
	while (d->nconns > 0)
		conn_close(d->conns[d->nconns - 1]);    /* the last: nothing moves */
	close(d->fd);
	free(d->path);
	free(d);
}
