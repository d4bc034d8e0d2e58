/* http.c: HTTP/1.x request heads, listen addresses and response heads, for --metrics' server; pure. */
#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the head ends in p[0..n): the offset past its blank line, or 0 when there is none yet. */
static size_t
head_end(const char *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++) {
		if (p[i] != '\n')
			continue;
		if (p[i + 1] == '\n')
			return i + 2;
		if (p[i + 1] == '\r' && i + 2 < n && p[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* RFC 9110's tchar: what a method name is made of. */
static bool
is_tchar(char c)
{
	return isalnum((unsigned char)c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Copies p[0..n) into dst[0..size) with a NUL; false if it does not fit. */
static bool
copy(char *dst, size_t size, const char *p, size_t n)
{
	if (n >= size)
		return false;
	memcpy(dst, p, n);
	dst[n] = '\0';
	return true;
}

/* "GET /metrics?x HTTP/1.1" in line[0..n) (no line end). */
static bool
request_line(const char *line, size_t n, struct trc_http_request *req)
{
	const char *sp1 = memchr(line, ' ', n), *sp2, *target, *q;
	size_t m, tlen;

	if (sp1 == NULL || sp1 == line)
		return false;
	for (const char *c = line; c < sp1; c++)
		if (!is_tchar(*c))
			return false;
	target = sp1 + 1;
	sp2 = memchr(target, ' ', n - (size_t)(target - line));
	if (sp2 == NULL || sp2 == target)
		return false;
	m = n - (size_t)(sp2 + 1 - line);
	if (m != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)sp2[8]))
		return false;
	req->close = sp2[8] == '0';
	tlen = (size_t)(sp2 - target);
	if ((q = memchr(target, '?', tlen)) != NULL)
		tlen = (size_t)(q - target);
	for (size_t i = 0; i < tlen; i++)
		if ((unsigned char)target[i] <= ' ' || target[i] == 0x7f)
			return false;
	return copy(req->method, sizeof(req->method), line, (size_t)(sp1 - line)) &&
	       copy(req->path, sizeof(req->path), target, tlen);
}

/* Whether the header name line[0..n) is name, ASCII case aside. */
static bool
is_header(const char *line, size_t n, const char *name)
{
	return n == strlen(name) && strncasecmp(line, name, n) == 0;
}

/* Whether v[0..n) holds word, ASCII case aside ("close" in "Connection: keep-alive, close"). */
static bool
has_word(const char *v, size_t n, const char *word)
{
	size_t w = strlen(word);

	for (size_t i = 0; i + w <= n; i++)
		if (strncasecmp(v + i, word, w) == 0)
			return true;
	return false;
}

/*
 * "Name: value" in line[0..n): Accept's value kept, Connection, Content-Length and
 * Transfer-Encoding read for close and body, the others checked for a colon only.
 */
static bool
header_line(const char *line, size_t n, struct trc_http_request *req)
{
	const char *colon = memchr(line, ':', n), *v;
	size_t vlen, name;

	if (colon == NULL || colon == line)
		return false;
	for (const char *c = line; c < colon; c++)
		if (!is_tchar(*c))
			return false;
	name = (size_t)(colon - line);
	v = colon + 1;
	vlen = n - (size_t)(v - line);
	while (vlen > 0 && (*v == ' ' || *v == '\t'))
		v++, vlen--;
	while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	if (is_header(line, name, "connection") && has_word(v, vlen, "close"))
		req->close = true;
	else if ((is_header(line, name, "content-length") && !(vlen == 1 && v[0] == '0')) ||
		 is_header(line, name, "transfer-encoding"))
		req->body = true;
	if (!is_header(line, name, "accept"))
		return true;
	if (vlen >= sizeof(req->accept))
		vlen = sizeof(req->accept) - 1;
	copy(req->accept, sizeof(req->accept), v, vlen);
	return true;
}

enum trc_http_parse
trc_http_parse(const char *p, size_t n, struct trc_http_request *req)
{
	size_t end = head_end(p, n < TRC_HTTP_MAX_HEAD ? n : TRC_HTTP_MAX_HEAD), i = 0;
	bool first = true;

	if (end == 0)
		return n >= TRC_HTTP_MAX_HEAD ? TRC_HTTP_TOO_LARGE : TRC_HTTP_PARTIAL;
	memset(req, 0, sizeof(*req));
	while (i < end) {
		const char *nl = memchr(p + i, '\n', end - i);
		size_t len = (size_t)(nl - (p + i));

		if (len > 0 && p[i + len - 1] == '\r')
			len--;
		if (len == 0)
			break;          /* the blank line */
		if (first ? !request_line(p + i, len, req) : !header_line(p + i, len, req))
			return TRC_HTTP_BAD;
		first = false;
		i = (size_t)(nl - p) + 1;
	}
	req->head_len = end;
	return first ? TRC_HTTP_BAD : TRC_HTTP_PARSED;
}

/* PORT: 1 to 65535, decimal digits only. */
static int
parse_port(const char *s, unsigned short *port)
{
	char *end;
	unsigned long n;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	n = strtoul(s, &end, 10);
	if (*end != '\0' || errno != 0 || n < 1 || n > 65535)
		return -1;
	*port = (unsigned short)n;
	return 0;
}

int
trc_http_parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len,
		    char *why, size_t whylen)
{
	const char *colon = strrchr(addr, ':');
	char host[INET6_ADDRSTRLEN + 2];
	size_t hlen;
	unsigned short port;
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (colon == NULL || parse_port(colon + 1, &port) < 0) {
		snprintf(why, whylen, "expected HOST:PORT or :PORT, with a port from 1 to 65535");
		return -1;
	}
	hlen = (size_t)(colon - addr);
	if (hlen == 0) {
		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_any;
		in6->sin6_port = htons(port);
		*len = sizeof(*in6);
		return 0;
	}
	if (addr[0] == '[' && hlen >= 2 && addr[hlen - 1] == ']' && hlen - 2 < sizeof(host)) {
		memcpy(host, addr + 1, hlen - 2);
		host[hlen - 2] = '\0';
		if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
			in6->sin6_family = AF_INET6;
			in6->sin6_port = htons(port);
			*len = sizeof(*in6);
			return 0;
		}
	} else if (hlen < sizeof(host)) {
		memcpy(host, addr, hlen);
		host[hlen] = '\0';
		if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
			in4->sin_family = AF_INET;
			in4->sin_port = htons(port);
			*len = sizeof(*in4);
			return 0;
		}
	}
	snprintf(why, whylen, "expected an IPv4 address, or an IPv6 one in brackets, before the port "
		 "(no name is looked up)");
	return -1;
}

const char *
trc_http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 431: return "Request Header Fields Too Large";
	case 503: return "Service Unavailable";
	default: return "";
	}
}

void
trc_http_response_head(struct trc_buf *b, int status, const char *content_type, size_t body_len,
		       bool keep_alive)
{
	trc_buf_addf(b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n", status,
		     trc_http_reason(status), content_type, body_len);
	if (status == 405)
		trc_buf_adds(b, "Allow: GET, HEAD\r\n");
	trc_buf_adds(b, keep_alive ? "\r\n" : "Connection: close\r\n\r\n");
}
