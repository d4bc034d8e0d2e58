/* utf8.c: code point counts and cuts: a continuation byte (10xxxxxx) starts no column. */
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
