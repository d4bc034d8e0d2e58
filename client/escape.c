/* escape.c: controls and ill-formed UTF-8 shown as visible escapes; everything else copied as it is. */
#include "escape.h"

#include <stdbool.h>
#include <string.h>

#include "utf8.h"
#include "xmalloc.h"

static const char hex[] = "0123456789abcdef";

/* The C escapes a reader knows; the other controls are \xHH. */
static const char short_esc[32] = {
	['\a'] = 'a', ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\v'] = 'v', ['\f'] = 'f',
	['\r'] = 'r', [0x1b] = 'e',
};

static void
put_hex(struct trc_buf *b, unsigned char c)
{
	char x[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };

	trc_buf_add(b, x, sizeof(x));
}

static void
put_control(struct trc_buf *b, unsigned char c)
{
	char e[2] = { '\\', 0 };

	if (c < sizeof(short_esc) && short_esc[c] != 0) {
		e[1] = short_esc[c];
		trc_buf_add(b, e, sizeof(e));
	} else {
		put_hex(b, c);
	}
}

static bool
is_plain(unsigned char c)
{
	return c >= 0x20 && c < 0x7f;
}

void
trc_escape(struct trc_buf *b, const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0, run = 0, len, bad;

	/* Printable ASCII is copied in runs; only the rest goes one by one. */
	while (i < n) {
		if (is_plain(s[i])) {
			i++;
			continue;
		}
		trc_buf_add(b, s + run, i - run);
		if (s[i] < 0x80) {
			put_control(b, s[i++]);
		} else if ((len = trc_utf8_seq(s + i, n - i, &bad)) > 0 && !trc_utf8_is_c1(s + i, len)) {
			trc_buf_add(b, s + i, len);
			i += len;
		} else {
			/* A C1 control's two bytes, or the bytes of an ill-formed subpart. */
			for (size_t k = 0, m = len > 0 ? len : bad; k < m; k++)
				put_hex(b, s[i++]);
		}
		run = i;
	}
	trc_buf_add(b, s + run, n - run);
}

char *
trc_escape_dup(const char *p, size_t n)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_escape(&b, p, n);
	trc_buf_addc(&b, '\0');
	return b.data;
}

char *
trc_escape_lines_dup(const char *p, size_t n)
{
	struct trc_buf b;
	const char *end = p + n;

	trc_buf_init(&b);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl != NULL ? nl : end) - p);

		trc_escape(&b, p, len > 0 && nl != NULL && p[len - 1] == '\r' ? len - 1 : len);
		if (nl == NULL)
			break;
		trc_buf_addc(&b, '\n');
		p = nl + 1;
	}
	trc_buf_addc(&b, '\0');
	return b.data;
}
