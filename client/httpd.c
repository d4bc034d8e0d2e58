/* httpd.c: --metrics' HTTP server: non-blocking accept, a bounded read of the head, a buffered write, close. */
#define _GNU_SOURCE     /* accept4 */
#include "httpd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>

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
	ev_io io_w;
	ev_timer timer_w;
	char head[TRC_HTTP_MAX_HEAD];
	size_t n;
	struct trc_buf out;
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

/* The state's watcher and deadline. */
static void
conn_enter(struct conn *c, enum state state, int events, double secs)
{
	struct ev_loop *loop = c->d->loop;

	c->state = state;
	ev_io_stop(loop, &c->io_w);
	ev_io_set(&c->io_w, c->fd, events);
	ev_io_start(loop, &c->io_w);
	ev_timer_stop(loop, &c->timer_w);
	ev_timer_set(&c->timer_w, secs, 0);
	ev_timer_start(loop, &c->timer_w);
}

/*
 * After the response: the write side shut, the connection read to its end before it is
 * closed. Closing a socket with unread bytes makes the kernel send a reset, which may throw
 * away the response before the client reads it (a 431 to a client still sending its head).
 */
static void
drain(struct conn *c)
{
	shutdown(c->fd, SHUT_WR);
	conn_enter(c, DRAINING, EV_READ, DRAIN_SECS);
}

static void
on_write(struct conn *c)
{
	while (c->sent < c->out.len) {
		ssize_t w = send(c->fd, c->out.data + c->sent, c->out.len - c->sent, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (w < 0) {
			conn_close(c);
			return;
		}
		c->sent += (size_t)w;
	}
	drain(c);
}

static void
respond(struct conn *c, int status, const char *content_type, struct trc_buf *body, bool head_only)
{
	trc_http_response_head(&c->out, status, content_type, body->len);
	if (!head_only)
		trc_buf_add(&c->out, body->data, body->len);
	conn_enter(c, WRITING, EV_WRITE, TRC_HTTPD_WRITE_SECS);
	on_write(c);
}

/* A whole head: the response, by path and method. */
static void
answer(struct conn *c, enum trc_http_parse parsed, const struct trc_http_request *req)
{
	struct trc_httpd *d = c->d;
	struct trc_buf body;
	bool get = strcmp(req->method, "GET") == 0, head = strcmp(req->method, "HEAD") == 0;
	const char *text = "text/plain; charset=utf-8";
	int status = 200;

	trc_buf_init(&body);
	if (parsed == TRC_HTTP_BAD) {
		status = 400, trc_buf_adds(&body, "bad request\n");
	} else if (parsed == TRC_HTTP_TOO_LARGE) {
		status = 431, trc_buf_adds(&body, "request head too large\n");
	} else if (strcmp(req->path, d->path) != 0) {
		status = 404, trc_buf_addf(&body, "not found: try %s\n", d->path);
	} else if (!get && !head) {
		status = 405, trc_buf_adds(&body, "method not allowed: GET or HEAD\n");
	} else {
		text = d->handler(req, &body, d->ctx);
	}
	respond(c, status, text, &body, head);
	trc_buf_release(&body);
}

static void
on_read(struct conn *c)
{
	struct trc_http_request req = { .method = "" };
	enum trc_http_parse parsed;
	ssize_t r = recv(c->fd, c->head + c->n, sizeof(c->head) - c->n, 0);

	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (r <= 0) {
		conn_close(c);  /* gone before its request was whole */
		return;
	}
	c->n += (size_t)r;
	parsed = trc_http_parse(c->head, c->n, &req);
	if (parsed != TRC_HTTP_PARTIAL)
		answer(c, parsed, &req);
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
	case WRITING: on_write(c); break;
	case DRAINING: on_drain(c); break;
	}
}

/* A deadline passed: a slow client (or one that never reads) is cut off. */
static void
on_conn_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop, (void)revents;
	conn_close(w->data);
}

static void
add_conn(struct trc_httpd *d, int fd)
{
	struct conn *c = xcalloc(1, sizeof(*c));

	c->d = d;
	c->fd = fd;
	trc_buf_init(&c->out);
	ev_io_init(&c->io_w, on_conn_io, fd, EV_READ);
	c->io_w.data = c;
	ev_timer_init(&c->timer_w, on_conn_timeout, TRC_HTTPD_READ_SECS, 0);
	c->timer_w.data = c;
	d->conns[d->nconns++] = c;
	conn_enter(c, READING, EV_READ, TRC_HTTPD_READ_SECS);
}

static void
on_pause_end(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_httpd *d = w->data;

	(void)revents;
	ev_io_start(loop, &d->accept_w);
}

/*
 * Every pending connection taken; those beyond the cap closed at once, unread. When accept
 * fails for want of descriptors (EMFILE, ENFILE, ENOBUFS), the connection stays pending and the
 * socket readable: accepting pauses a moment rather than spin the loop on it.
 */
static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct trc_httpd *d = w->data;
	int fd;

	(void)revents;
	while ((fd = accept4(d->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		if (d->nconns == TRC_HTTPD_MAX_CONNS)
			close(fd);
		else
			add_conn(d, fd);
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
