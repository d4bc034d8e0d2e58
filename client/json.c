/* json.c: JSON string escaping (with UTF-8 repair) and integer formatting for the client. */
#include "json.h"

static const char hex[] = "0123456789abcdef";

/*
 * Length of the well-formed UTF-8 sequence at p (Unicode table 3-7), or 0 with *bad set to the
 * length of the maximal ill-formed subpart there (at least 1), which becomes one U+FFFD.
 */
static size_t
utf8_seq(const unsigned char *p, size_t n, size_t *bad)
{
	unsigned char c = p[0], lo = 0x80, hi = 0xbf;
	size_t need;

	if (c >= 0xc2 && c <= 0xdf)
		need = 2;
	else if (c >= 0xe0 && c <= 0xef)
		need = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		need = 4;
	else
		need = 0;
	if (need == 0) {
		*bad = 1;
		return 0;
	}
	/* The second byte's range rules out overlongs, surrogates and code points past U+10FFFF. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	for (size_t i = 1; i < need; i++, lo = 0x80, hi = 0xbf) {
		if (i >= n || p[i] < lo || p[i] > hi) {
			*bad = i;
			return 0;
		}
	}
	return need;
}

static void
put_escape(struct trc_buf *b, unsigned char c)
{
	static const char short_esc[32] = {
		['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r',
	};
	char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

	if (c == '"' || c == '\\') {
		trc_buf_addc(b, '\\');
		trc_buf_addc(b, (char)c);
	} else if (c < sizeof(short_esc) && short_esc[c]) {
		trc_buf_addc(b, '\\');
		trc_buf_addc(b, short_esc[c]);
	} else {
		trc_buf_add(b, u, sizeof(u));
	}
}

void
trc_json_str_body(struct trc_buf *b, const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0, run = 0, len, bad;

	/* Plain bytes are copied in runs; only the rest goes one by one. */
	while (i < n) {
		unsigned char c = s[i];

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			i++;
			continue;
		}
		trc_buf_add(b, s + run, i - run);
		if (c < 0x80) {
			put_escape(b, c);
			i++;
		} else if ((len = utf8_seq(s + i, n - i, &bad)) > 0) {
			trc_buf_add(b, s + i, len);
			i += len;
		} else {
			trc_buf_add(b, "\\ufffd", 6);
			i += bad;
		}
		run = i;
	}
	trc_buf_add(b, s + run, n - run);
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
