/* httpd.h: --metrics' HTTP server on the run's libev loop: one path, bounded in bytes, time and connections. */
#ifndef TRC_HTTPD_H
#define TRC_HTTPD_H

#include <sys/socket.h>

#include <ev.h>

#include "buf.h"
#include "http.h"

/* Seconds a client has to send its request's head, from its connection on, or from the first
 * byte of its next request on a kept-alive connection (not per read: a client that sends a
 * byte at a time is cut off all the same). */
#define TRC_HTTPD_READ_SECS 5.0
/* Seconds a client has to read the response. */
#define TRC_HTTPD_WRITE_SECS 10.0
/* Seconds a kept-alive connection may wait for its next request: past Prometheus' usual 15 s
 * scrape interval, so that its scrapes reuse it. Idle, it also gives way to a new connection
 * when all are taken: it cannot hold the server. */
#define TRC_HTTPD_IDLE_SECS 30.0
/* Connections served at once. One more takes the place of one that owes nothing (kept alive
 * between requests, draining), else of the oldest that has not sent a whole request, else of
 * the oldest whose response its client is not reading: connections that never send anything
 * cannot keep a scraper out. */
#define TRC_HTTPD_MAX_CONNS 16

/*
 * Makes the response to a GET or HEAD of the server's path: *body pointed at its bytes (the
 * handler's, valid until its next call: the server copies what the socket does not take at
 * once), its Content-Type returned (a string that outlives the call). Called on the loop's
 * thread.
 */
typedef const char *trc_httpd_handler(const struct trc_http_request *req,
				      const struct trc_buf **body, void *ctx);

struct trc_httpd;

/*
 * A listening socket on the address (non-blocking, close-on-exec, SO_REUSEADDR; IPv6's any
 * address takes IPv4 too). Returns it, or -1 with errno.
 */
int trc_httpd_listen(const struct sockaddr *addr, socklen_t len);

/*
 * Serves path on the listening socket fd (which it then owns) from loop: handler's response
 * for a GET or HEAD of path, 404 for another path, 405 for another method, 400 for what is
 * not HTTP/1.x and 431 for a head longer than TRC_HTTP_MAX_HEAD. An HTTP/1.1 connection stays
 * open after a 200 (pipelined requests answered in order) unless its client says
 * "Connection: close" or sent a body; every other response closes it. The caller frees it
 * with trc_httpd_free(), which closes every connection.
 * Main thread.
 */
struct trc_httpd *trc_httpd_new(struct ev_loop *loop, int fd, const char *path,
				trc_httpd_handler *handler, void *ctx);
void trc_httpd_free(struct trc_httpd *d);

#endif
