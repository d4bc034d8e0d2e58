/* json.c: JSON string escaping (with UTF-8 repair) and integer formatting for the client. */
#include "json.h"

#include "utf8.h"

static const char hex[] = "0123456789abcdef";

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

/* The two bytes of a C1 control, 0xc2 then 0x80..0x9f, as \u0080..\u009f. */
static void
put_c1(struct trc_buf *b, unsigned char second)
{
	char u[6] = { '\\', 'u', '0', '0', hex[second >> 4], hex[second & 15] };

	trc_buf_add(b, u, sizeof(u));
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
		} else if ((len = trc_utf8_seq(s + i, n - i, &bad)) > 0) {
			/* U+0080..U+009F, the C1 controls: valid JSON either way, but a file shown
			 * on a terminal must not drive it. */
			if (trc_utf8_is_c1(s + i, len))
				put_c1(b, s[i + 1]);
			else
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
