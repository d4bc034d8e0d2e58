/* json.c: JSON strings (escape.h's JSON syntax) and exact numbers for the client. */
#include "json.h"

#include "escape.h"

void
trc_json_str_body(struct trc_buf *b, const char *p, size_t n)
{
	trc_escape_as(b, TRC_ESC_JSON, p, n);
}

void
trc_json_str(struct trc_buf *b, const char *p, size_t n)
{
	trc_buf_addc(b, '"');
	trc_json_str_body(b, p, n);
	trc_buf_addc(b, '"');
}

void
trc_json_uint(struct trc_buf *b, uint64_t v)
{
	char buf[24], *p = buf + sizeof(buf);

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	trc_buf_add(b, p, (size_t)(buf + sizeof(buf) - p));
}

void
trc_json_int(struct trc_buf *b, int64_t v)
{
	if (v < 0) {
		trc_buf_addc(b, '-');
		trc_json_uint(b, (uint64_t)0 - (uint64_t)v);
	} else {
		trc_json_uint(b, (uint64_t)v);
	}
}

void
trc_json_micros(struct trc_buf *b, int64_t ns)
{
	uint64_t abs = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
	unsigned frac = (unsigned)(abs % 1000);
	char dec[4] = { '.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
			(char)('0' + frac % 10) };

	if (ns < 0)
		trc_buf_addc(b, '-');
	trc_json_uint(b, abs / 1000);
	trc_buf_add(b, dec, sizeof(dec));
}

void
trc_json_millis(struct trc_buf *b, uint64_t ns)
{
	char dec[7] = { '.' };
	uint64_t frac = ns % 1000000;

	for (int i = 6; i >= 1; i--, frac /= 10)
		dec[i] = (char)('0' + frac % 10);
	trc_json_uint(b, ns / 1000000);
	trc_buf_add(b, dec, sizeof(dec));
}
