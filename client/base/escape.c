/* escape.c: one scan for what a target's bytes may not carry out raw, a writer per syntax; names cut in the middle. */
#include "escape.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"
#include "xmalloc.h"

static const char hex[] = "0123456789abcdef";

/* What each syntax writes for a printable ASCII character it gives a meaning; NULL: copied. */
static const char *const special[][128] = {
	[TRC_ESC_EXACT] = { ['\\'] = "\\\\" },
	[TRC_ESC_JSON] = { ['\\'] = "\\\\", ['"'] = "\\\"" },
	/* EXACT's backslash, escaped again as the format wants; its own \" for the quote */
	[TRC_ESC_PROM] = { ['\\'] = "\\\\\\\\", ['"'] = "\\\"" },
	[TRC_ESC_HTML] = { ['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;",
			   ['\''] = "&#39;" },
};

/* What starts a C-style escape (\e, \xHH) in each syntax but JSON: PROM's backslash is
 * escaped in its turn, so that the label's value holds EXACT's text. */
static const char *const intro[] = {
	[TRC_ESC_TEXT] = "\\", [TRC_ESC_EXACT] = "\\", [TRC_ESC_PROM] = "\\\\", [TRC_ESC_HTML] = "\\",
};

/* The C escapes a reader knows; the other controls are \xHH. */
static const char short_esc[32] = {
	['\a'] = 'a', ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\v'] = 'v', ['\f'] = 'f',
	['\r'] = 'r', [0x1b] = 'e',
};
/* JSON's own (RFC 8259); the others are \u00XX. */
static const char json_esc[32] = {
	['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r',
};

/*
 * special[]'s characters as bits, 0x20 + i as bit i, for the scan's inner loop: they are all
 * below 0x60. (The fuzzer reads every syntax back: a character missing here would go out raw.)
 */
#define BIT(c) ((uint64_t)1 << ((c) - 0x20))
static const uint64_t special_bits[] = {
	[TRC_ESC_EXACT] = BIT('\\'),
	[TRC_ESC_JSON] = BIT('"') | BIT('\\'),
	[TRC_ESC_PROM] = BIT('"') | BIT('\\'),
	[TRC_ESC_HTML] = BIT('&') | BIT('<') | BIT('>') | BIT('"') | BIT('\''),
};

static inline bool
is_plain(enum trc_esc how, unsigned char c)
{
	if (c < 0x20 || c >= 0x7f)
		return false;
	return c >= 0x60 || !(special_bits[how] & BIT(c));
}

static void
put_hex(struct trc_buf *b, enum trc_esc how, unsigned char c)
{
	char x[3] = { 'x', hex[c >> 4], hex[c & 15] };

	trc_buf_adds(b, intro[how]);
	trc_buf_add(b, x, sizeof(x));
}

/* \u followed by the 4 hex digits of cp (at most U+FFFF: the unsafe code points are). */
static void
put_json_u(struct trc_buf *b, uint32_t cp)
{
	char u[6] = { '\\', 'u', hex[cp >> 12 & 15], hex[cp >> 8 & 15], hex[cp >> 4 & 15],
		      hex[cp & 15] };

	trc_buf_add(b, u, sizeof(u));
}

/* An ASCII byte that is no plain character: a control, DEL, or one of the syntax's own. */
static void
put_ascii(struct trc_buf *b, enum trc_esc how, unsigned char c)
{
	const char *letters = how == TRC_ESC_JSON ? json_esc : short_esc;

	if (c >= 0x20 && c < 0x7f) {
		trc_buf_adds(b, special[how][c]);
	} else if (c < 32 && letters[c] != 0) {
		trc_buf_adds(b, how == TRC_ESC_JSON ? "\\" : intro[how]);
		trc_buf_addc(b, letters[c]);
	} else if (how == TRC_ESC_JSON) {
		put_json_u(b, c);
	} else {
		put_hex(b, how, c);
	}
}

/* A well-formed sequence a terminal would act on: its code point in JSON, else its bytes. */
static void
put_unsafe(struct trc_buf *b, enum trc_esc how, const unsigned char *p, size_t len)
{
	if (how == TRC_ESC_JSON) {
		put_json_u(b, trc_utf8_code_point(p, len));
		return;
	}
	for (size_t i = 0; i < len; i++)
		put_hex(b, how, p[i]);
}

/* A maximal ill-formed subsequence: one U+FFFD in JSON, else the \xHH of each byte. */
static void
put_ill_formed(struct trc_buf *b, enum trc_esc how, const unsigned char *p, size_t len)
{
	if (how == TRC_ESC_JSON) {
		trc_buf_add(b, "\\ufffd", 6);
		return;
	}
	for (size_t i = 0; i < len; i++)
		put_hex(b, how, p[i]);
}

void
trc_escape_as(struct trc_buf *b, enum trc_esc how, const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0, run = 0, len, bad;

	/* Plain ASCII is copied in runs, as is well-formed UTF-8; only the rest goes one by one. */
	while (i < n) {
		len = 0;
		if (is_plain(how, s[i])) {
			i++;
			continue;
		}
		if (s[i] >= 0x80 && (len = trc_utf8_seq(s + i, n - i, &bad)) > 0 &&
		    !trc_utf8_is_unsafe(s + i, len)) {
			i += len;
			continue;
		}
		trc_buf_add(b, s + run, i - run);
		if (s[i] < 0x80) {
			put_ascii(b, how, s[i]);
			i++;
		} else if (len > 0) {
			put_unsafe(b, how, s + i, len);
			i += len;
		} else {
			put_ill_formed(b, how, s + i, bad);
			i += bad;
		}
		run = i;
	}
	trc_buf_add(b, s + run, n - run);
}

void
trc_escape(struct trc_buf *b, const char *p, size_t n)
{
	trc_escape_as(b, TRC_ESC_TEXT, p, n);
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

/* ---- names bounded ---- */

static bool
is_cont(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

/* FNV-1a, 64 bits: cheap, and enough to tell apart the names one app cuts. */
static uint64_t
fnv1a(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

void
trc_name_bound(struct trc_buf *b, const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t head = TRC_NAME_MAX / 2, tail = n - TRC_NAME_MAX / 2;
	char marker[64];
	int len;

	if (n <= TRC_NAME_MAX) {
		trc_buf_add(b, p, n);
		return;
	}
	/* A UTF-8 sequence is at most 4 bytes: at most 3 continuation bytes to step over. */
	for (int k = 0; k < 3 && is_cont(s[head]); k++)
		head--;
	for (int k = 0; k < 3 && is_cont(s[tail]); k++)
		tail++;
	len = snprintf(marker, sizeof(marker), "[...%zu bytes #%016llx...]", n,
		       (unsigned long long)fnv1a(s, n));
	trc_buf_add(b, p, head);
	trc_buf_add(b, marker, (size_t)len);
	trc_buf_add(b, p + tail, n - tail);
}
