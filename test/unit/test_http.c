/* test_http.c: --metrics' HTTP heads: requests parsed or refused, listen addresses, response heads. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>

#include "http.h"
#include "test.h"

static enum trc_http_parse
parse(const char *s, struct trc_http_request *req)
{
	return trc_http_parse(s, strlen(s), req);
}

static void
test_requests(void)
{
	struct trc_http_request req;

	test_note("a scrape: method, path without its query, Accept");
	test_cond("parsed", parse("GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\n"
				  "accept:  application/openmetrics-text;version=1.0.0 \r\n\r\n",
				  &req) == TRC_HTTP_PARSED);
	test_str("method", req.method, "GET");
	test_str("path", req.path, "/metrics");
	test_str("accept, trimmed", req.accept, "application/openmetrics-text;version=1.0.0");

	test_note("bare LF line ends, no header, a body after the head");
	test_cond("parsed", parse("HEAD /metrics HTTP/1.0\n\nbody", &req) == TRC_HTTP_PARSED);
	test_str("method", req.method, "HEAD");
	test_str("no accept", req.accept, "");

	test_note("keep-alive: what may follow the response, where the next request starts");
	test_cond("1.1", parse("GET /metrics HTTP/1.1\r\nHost: h\r\n\r\nGET /", &req) ==
		  TRC_HTTP_PARSED);
	test_cond("1.1 stays open, no body", !req.close && !req.body);
	test_cond("head length: up to the next request", req.head_len == 34);
	test_cond("1.0", parse("GET /metrics HTTP/1.0\r\n\r\n", &req) == TRC_HTTP_PARSED);
	test_cond("1.0 closes", req.close && req.head_len == 25);
	test_cond("Connection: close", parse("GET / HTTP/1.1\r\nconnection: Keep-Alive, Close\r\n\r\n",
					     &req) == TRC_HTTP_PARSED && req.close);
	test_cond("Connection: keep-alive", parse("GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n",
						  &req) == TRC_HTTP_PARSED && !req.close);
	test_cond("Content-Length: 0 is no body",
		  parse("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &req) == TRC_HTTP_PARSED &&
		  !req.body);
	test_cond("Content-Length: 5 is a body",
		  parse("POST / HTTP/1.1\r\nContent-Length:  5 \r\n\r\nhello", &req) == TRC_HTTP_PARSED &&
		  req.body && !req.close);
	test_cond("Transfer-Encoding is a body",
		  parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &req) ==
		  TRC_HTTP_PARSED && req.body);

	test_note("a head not yet whole");
	test_cond("empty", parse("", &req) == TRC_HTTP_PARTIAL);
	test_cond("request line only", parse("GET /metrics HTTP/1.1\r\n", &req) == TRC_HTTP_PARTIAL);
	test_cond("half a blank line", parse("GET / HTTP/1.1\r\nA: b\r\n\r", &req) == TRC_HTTP_PARTIAL);

	test_note("not HTTP/1.x");
	test_cond("no version", parse("GET /metrics\r\n\r\n", &req) == TRC_HTTP_BAD);
	test_cond("HTTP/2", parse("GET / HTTP/2.0\r\n\r\n", &req) == TRC_HTTP_BAD);
	test_cond("blank first line", parse("\r\n\r\n", &req) == TRC_HTTP_BAD);
	test_cond("bad method byte", parse("G(T / HTTP/1.1\r\n\r\n", &req) == TRC_HTTP_BAD);
	test_cond("method too long", parse("ABCDEFGHIJKLMNOPQRSTU / HTTP/1.1\r\n\r\n", &req) ==
		  TRC_HTTP_BAD);
	test_cond("header without colon", parse("GET / HTTP/1.1\r\nnocolon\r\n\r\n", &req) ==
		  TRC_HTTP_BAD);
	test_cond("control in target", parse("GET /a\x01 HTTP/1.1\r\n\r\n", &req) == TRC_HTTP_BAD);
}

static void
test_sizes(void)
{
	struct trc_http_request req;
	size_t n = TRC_HTTP_MAX_HEAD + 100;
	char *big = malloc(n);

	test_note("a head with no end in TRC_HTTP_MAX_HEAD bytes is too large");
	memset(big, 'a', n);
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	test_cond("partial below the cap", trc_http_parse(big, TRC_HTTP_MAX_HEAD - 1, &req) ==
		  TRC_HTTP_PARTIAL);
	test_cond("too large at the cap", trc_http_parse(big, TRC_HTTP_MAX_HEAD, &req) ==
		  TRC_HTTP_TOO_LARGE);
	memcpy(big + TRC_HTTP_MAX_HEAD + 10, "\r\n\r\n", 4);
	test_cond("an end past the cap does not count", trc_http_parse(big, n, &req) ==
		  TRC_HTTP_TOO_LARGE);

	test_note("a long Accept is cut, not refused");
	memset(big, 'a', n);
	memcpy(big, "GET / HTTP/1.1\r\nAccept: ", 24);
	memcpy(big + 24 + 1000, "\r\n\r\n", 5);
	test_cond("parsed", trc_http_parse(big, strlen(big), &req) == TRC_HTTP_PARSED);
	test_cond("cut at 511", strlen(req.accept) == sizeof(req.accept) - 1);

	test_note("a target longer than the path buffer is refused");
	memset(big, 'a', n);
	memcpy(big, "GET /", 5);
	memcpy(big + 2000, " HTTP/1.1\r\n\r\n", 14);
	test_cond("bad", trc_http_parse(big, strlen(big), &req) == TRC_HTTP_BAD);
	free(big);
}

static void
test_addrs(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char why[256];
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

	test_note("HOST:PORT, [V6]:PORT, :PORT");
	test_cond("v4", trc_http_parse_addr("127.0.0.1:9394", &ss, &len, why, sizeof(why)) == 0);
	test_cond("v4 family", ss.ss_family == AF_INET && len == sizeof(*in4));
	test_cond("v4 port", ntohs(in4->sin_port) == 9394);
	test_cond("v4 address", ntohl(in4->sin_addr.s_addr) == 0x7f000001);
	test_cond("v6", trc_http_parse_addr("[::1]:80", &ss, &len, why, sizeof(why)) == 0);
	test_cond("v6 family", ss.ss_family == AF_INET6 && ntohs(in6->sin6_port) == 80);
	test_cond("v6 loopback", IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr));
	test_cond("any", trc_http_parse_addr(":9394", &ss, &len, why, sizeof(why)) == 0);
	test_cond("any is v6's", ss.ss_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr));

	test_note("refused, with why");
	test_cond("no port", trc_http_parse_addr("127.0.0.1", &ss, &len, why, sizeof(why)) < 0);
	test_cond("port 0", trc_http_parse_addr(":0", &ss, &len, why, sizeof(why)) < 0);
	test_cond("port too big", trc_http_parse_addr(":65536", &ss, &len, why, sizeof(why)) < 0);
	test_cond("port not a number", trc_http_parse_addr(":80x", &ss, &len, why, sizeof(why)) < 0);
	test_cond("signed port", trc_http_parse_addr(":+80", &ss, &len, why, sizeof(why)) < 0);
	test_cond("a name", trc_http_parse_addr("localhost:80", &ss, &len, why, sizeof(why)) < 0);
	test_cond("says why", strstr(why, "no name is looked up") != NULL);
	test_cond("v6 without brackets", trc_http_parse_addr("::1:80", &ss, &len, why, sizeof(why)) < 0);
	test_cond("empty", trc_http_parse_addr("", &ss, &len, why, sizeof(why)) < 0);
}

static void
test_responses(void)
{
	struct trc_buf b;

	test_note("a response's head");
	trc_buf_init(&b);
	trc_http_response_head(&b, 405, "text/plain", 3, false);
	trc_buf_addc(&b, '\0');
	test_str("405", b.data, "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain\r\n"
		 "Content-Length: 3\r\nAllow: GET, HEAD\r\nConnection: close\r\n\r\n");
	trc_buf_release(&b);
	trc_buf_init(&b);
	trc_http_response_head(&b, 200, "text/plain; version=0.0.4", 12345, false);
	trc_buf_addc(&b, '\0');
	test_str("200", b.data, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
		 "Content-Length: 12345\r\nConnection: close\r\n\r\n");
	trc_buf_release(&b);
	trc_buf_init(&b);
	trc_http_response_head(&b, 200, "text/plain", 7, true);
	trc_buf_addc(&b, '\0');
	test_str("200, kept alive: no Connection header (HTTP/1.1's default)", b.data,
		 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n\r\n");
	trc_buf_release(&b);
}

void
test_http(void)
{
	test_requests();
	test_sizes();
	test_addrs();
	test_responses();
}
