/* utf8.c: code point counts and cuts (a continuation byte starts no column), well-formed sequences, unsafe code points. */
#include "utf8.h"

#include <stdbool.h>

static bool
is_cont(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

size_t
trc_utf8_width(const char *s, size_t len)
{
	size_t w = 0;

	for (size_t i = 0; i < len; i++)
		w += !is_cont((unsigned char)s[i]);
	return w;
}

size_t
trc_utf8_head(const char *s, size_t len, size_t w)
{
	size_t i = 0;

	for (size_t seen = 0; i < len; i++) {
		if (!is_cont((unsigned char)s[i]) && seen++ == w)
			break;
	}
	return i;
}

size_t
trc_utf8_tail(const char *s, size_t len, size_t w)
{
	size_t i = len;

	for (size_t seen = 0; i > 0 && seen < w; seen++) {
		i--;
		while (i > 0 && is_cont((unsigned char)s[i]))
			i--;
	}
	return i;
}

size_t
trc_utf8_seq(const unsigned char *p, size_t n, size_t *bad)
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

bool
trc_utf8_is_c1(const unsigned char *p, size_t len)
{
	return len == 2 && p[0] == 0xc2 && p[1] <= 0x9f;
}

uint32_t
trc_utf8_code_point(const unsigned char *p, size_t len)
{
	static const unsigned char lead_bits[] = { 0x7f, 0x7f, 0x1f, 0x0f, 0x07 };
	uint32_t cp = p[0] & lead_bits[len < 5 ? len : 0];

	for (size_t i = 1; i < len; i++)
		cp = cp << 6 | (p[i] & 0x3f);
	return cp;
}

bool
trc_utf8_is_unsafe(const unsigned char *p, size_t len)
{
	uint32_t cp;

	if (len == 2)
		return trc_utf8_is_c1(p, len) || (p[0] == 0xd8 && p[1] == 0x9c);  /* U+061C */
	/* The others are all U+2xxx: three bytes starting 0xe2 0x80 or 0xe2 0x81. */
	if (len != 3 || p[0] != 0xe2 || (p[1] != 0x80 && p[1] != 0x81))
		return false;
	cp = trc_utf8_code_point(p, len);
	return cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x2029) ||
	       (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}
