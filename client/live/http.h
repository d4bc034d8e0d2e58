/* http.h: the pure half of --metrics' HTTP server: a request's head parsed, a listen address, a response's head. */
#ifndef TRC_HTTP_H
#define TRC_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "buf.h"

/* The most bytes of a request's head (request line and headers) the server reads. */
#define TRC_HTTP_MAX_HEAD 8192

enum trc_http_parse {
	TRC_HTTP_PARSED,        /* the head is whole: *req holds it */
	TRC_HTTP_PARTIAL,       /* no end of head yet: read on */
	TRC_HTTP_BAD,           /* not an HTTP/1.x request: 400 */
	TRC_HTTP_TOO_LARGE,     /* no end within TRC_HTTP_MAX_HEAD bytes: 431 */
};

/* A parsed head: the strings are NUL-terminated copies of its parts, the request's. */
struct trc_http_request {
	char method[16];
	char path[1024];        /* the target without its query ("/metrics" of "/metrics?x=1") */
	char accept[512];       /* the Accept header's value, cut at 511 bytes; "" when absent */
	size_t head_len;        /* bytes of the head, its blank line included */
	bool close;             /* HTTP/1.0 (whose keep-alive is not spoken here) or "Connection: close" */
	bool body;              /* a body follows the head (Content-Length not 0, Transfer-Encoding) */
};

/*
 * Parses the head at p[0..n), the bytes read so far of a connection: a request line "METHOD
 * TARGET HTTP/1.x", header lines, a blank line (CRLF or bare LF line ends). What follows the
 * head (a body) is ignored. Pure.
 */
enum trc_http_parse trc_http_parse(const char *p, size_t n, struct trc_http_request *req);

/*
 * A listen address, "HOST:PORT" (an IPv4 address, or an IPv6 one in brackets) or ":PORT"
 * (every address, IPv6 and IPv4): numbers only, no name is looked up. Returns 0 with the
 * address in *ss (*len its size), or -1 with why in why[0..whylen). Pure.
 */
int trc_http_parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len,
			char *why, size_t whylen);

/* The reason phrase of status (200, 400, 404, 405, 431, 503), "" for others. */
const char *trc_http_reason(int status);

/*
 * Appends a whole response's head to b: status line, Content-Type, Content-Length of
 * body_len, "Allow: GET, HEAD" with 405, and "Connection: close" unless keep_alive (HTTP/1.1's
 * connections persist unless one side says so). Pure.
 */
void trc_http_response_head(struct trc_buf *b, int status, const char *content_type,
			    size_t body_len, bool keep_alive);

#endif
