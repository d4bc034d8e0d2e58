/* fuzz_client_escape.c: libFuzzer target for escape.c, the one way target bytes reach a terminal or a file. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "utf8.h"

/*
 * Whatever the input, each syntax's output must be valid UTF-8 with no C0 or C1 control, no
 * DEL, no bidirectional control or line separator (nothing a terminal or a viewer acts on),
 * at most TRC_ESCAPE_MAX_GROWTH bytes per input byte, and must mean what the syntax says:
 * EXACT's and PROM's read back to the very input (two names never show the same), JSON's to
 * the input with each ill-formed subsequence as U+FFFD, HTML's to TEXT's. Input that is
 * already safe must come out of TEXT unchanged; the line-keeping variant may add no line of
 * its own. A name is bounded: whole up to TRC_NAME_MAX, else its head and tail around a
 * marker, longer than TRC_NAME_MAX, and a different name (one byte changed) comes out different.
 */

static void
check(bool ok)
{
	if (!ok)
		__builtin_trap();
}

/* Valid UTF-8 without controls nor unsafe code points: what a terminal only prints. */
static bool
is_safe(const unsigned char *s, size_t n, bool lines)
{
	size_t i = 0, len, bad;

	while (i < n) {
		if (s[i] < 0x80) {
			if ((s[i] < 0x20 && !(lines && s[i] == '\n')) || s[i] == 0x7f)
				return false;
			i++;
			continue;
		}
		len = trc_utf8_seq(s + i, n - i, &bad);
		if (len == 0 || trc_utf8_is_unsafe(s + i, len))
			return false;
		i += len;
	}
	return true;
}

static size_t
count_lf(const uint8_t *p, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += p[i] == '\n';
	return k;
}

static int
hex_digit(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	check(false);   /* escape.c writes lowercase digits only */
	return 0;
}

/* EXACT's text read back: \\, the C escapes and \xHH; any other backslash is no EXACT text. */
static void
unescape_exact(const unsigned char *s, size_t n, struct trc_buf *out)
{
	static const char letters[] = "abtnvfre", codes[] = "\a\b\t\n\v\f\r\x1b";

	for (size_t i = 0; i < n; i++) {
		const char *l = NULL;

		if (s[i] != '\\') {
			trc_buf_addc(out, (char)s[i]);
			continue;
		}
		check(i + 1 < n);
		if (s[++i] == '\\') {
			trc_buf_addc(out, '\\');
		} else if (s[i] == 'x') {
			check(i + 2 < n);
			trc_buf_addc(out, (char)(hex_digit(s[i + 1]) << 4 | hex_digit(s[i + 2])));
			i += 2;
		} else {
			check(s[i] != '\0' && (l = strchr(letters, s[i])) != NULL);
			trc_buf_addc(out, codes[l - letters]);
		}
	}
}

/* A Prometheus label value's escapes (\\ \" \n) undone; no raw quote nor newline in it. */
static void
unescape_prom(const unsigned char *s, size_t n, struct trc_buf *out)
{
	for (size_t i = 0; i < n; i++) {
		check(s[i] != '"' && s[i] != '\n');
		if (s[i] != '\\') {
			trc_buf_addc(out, (char)s[i]);
			continue;
		}
		check(i + 1 < n && (s[i + 1] == '\\' || s[i + 1] == '"' || s[i + 1] == 'n'));
		i++;
		trc_buf_addc(out, s[i] == 'n' ? '\n' : (char)s[i]);
	}
}

/* Appends code point cp (below U+10000: escape.c writes no other \u) as UTF-8. */
static void
put_utf8(struct trc_buf *out, uint32_t cp)
{
	if (cp < 0x80) {
		trc_buf_addc(out, (char)cp);
	} else if (cp < 0x800) {
		trc_buf_addc(out, (char)(0xc0 | cp >> 6));
		trc_buf_addc(out, (char)(0x80 | (cp & 0x3f)));
	} else {
		check(cp < 0xd800 || cp > 0xdfff);
		trc_buf_addc(out, (char)(0xe0 | cp >> 12));
		trc_buf_addc(out, (char)(0x80 | (cp >> 6 & 0x3f)));
		trc_buf_addc(out, (char)(0x80 | (cp & 0x3f)));
	}
}

/* A JSON string's body read back (RFC 8259): no raw quote, backslash or control. */
static void
unescape_json(const unsigned char *s, size_t n, struct trc_buf *out)
{
	static const char letters[] = "\"\\/bfnrt", codes[] = "\"\\/\b\f\n\r\t";

	for (size_t i = 0; i < n; i++) {
		const char *l = NULL;

		check(s[i] != '"' && s[i] >= 0x20);
		if (s[i] != '\\') {
			trc_buf_addc(out, (char)s[i]);
			continue;
		}
		check(i + 1 < n);
		if (s[++i] == 'u') {
			uint32_t cp = 0;

			check(i + 4 < n);
			for (int k = 1; k <= 4; k++)
				cp = cp << 4 | (uint32_t)hex_digit(s[i + k]);
			put_utf8(out, cp);
			i += 4;
		} else {
			check(s[i] != '\0' && (l = strchr(letters, s[i])) != NULL);
			trc_buf_addc(out, codes[l - letters]);
		}
	}
}

/* p[0..n) with each maximal ill-formed subsequence as U+FFFD: what JSON's text must mean. */
static void
repaired(const unsigned char *p, size_t n, struct trc_buf *out)
{
	size_t i = 0, len, bad;

	while (i < n) {
		if (p[i] < 0x80) {
			trc_buf_addc(out, (char)p[i++]);
		} else if ((len = trc_utf8_seq(p + i, n - i, &bad)) > 0) {
			trc_buf_add(out, p + i, len);
			i += len;
		} else {
			trc_buf_adds(out, "\xef\xbf\xbd");
			i += bad;
		}
	}
}

/* HTML's references undone; no raw markup nor quote in it. */
static void
unescape_html(const unsigned char *s, size_t n, struct trc_buf *out)
{
	static const char *const refs[] = { "&amp;", "&lt;", "&gt;", "&quot;", "&#39;" };
	static const char chars[] = "&<>\"'";

	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		check(s[i] != '<' && s[i] != '>' && s[i] != '"' && s[i] != '\'');
		if (s[i] != '&') {
			trc_buf_addc(out, (char)s[i]);
			continue;
		}
		while (k < 5 && (n - i < strlen(refs[k]) || memcmp(s + i, refs[k], strlen(refs[k])) != 0))
			k++;
		check(k < 5);
		trc_buf_addc(out, chars[k]);
		i += strlen(refs[k]) - 1;
	}
}

static bool
same(const struct trc_buf *b, const void *p, size_t n)
{
	return b->len == n && (n == 0 || memcmp(b->data, p, n) == 0);
}

/* p[0..n) in syntax how into b (emptied first), checked for what every syntax promises. */
static void
escape_checked(struct trc_buf *b, enum trc_esc how, const uint8_t *p, size_t n)
{
	b->len = 0;
	trc_escape_as(b, how, (const char *)p, n);
	check(b->len <= TRC_ESCAPE_MAX_GROWTH * n);
	check(is_safe((const unsigned char *)b->data, b->len, false));
}

static void
check_syntaxes(const uint8_t *data, size_t size)
{
	struct trc_buf text, b, back, back2;

	trc_buf_init(&text);
	trc_buf_init(&b);
	trc_buf_init(&back);
	trc_buf_init(&back2);
	escape_checked(&text, TRC_ESC_TEXT, data, size);
	if (is_safe(data, size, false))
		check(same(&text, data, size));

	escape_checked(&b, TRC_ESC_EXACT, data, size);
	unescape_exact((const unsigned char *)b.data, b.len, &back);
	check(same(&back, data, size));

	escape_checked(&b, TRC_ESC_PROM, data, size);
	back.len = 0;
	unescape_prom((const unsigned char *)b.data, b.len, &back);
	unescape_exact((const unsigned char *)back.data, back.len, &back2);
	check(same(&back2, data, size));

	escape_checked(&b, TRC_ESC_JSON, data, size);
	back.len = back2.len = 0;
	unescape_json((const unsigned char *)b.data, b.len, &back);
	repaired(data, size, &back2);
	check(same(&back, back2.data, back2.len));

	escape_checked(&b, TRC_ESC_HTML, data, size);
	back.len = 0;
	unescape_html((const unsigned char *)b.data, b.len, &back);
	check(same(&back, text.data, text.len));

	trc_buf_release(&text);
	trc_buf_release(&b);
	trc_buf_release(&back);
	trc_buf_release(&back2);
}

static void
check_bound(const uint8_t *data, size_t size)
{
	struct trc_buf a, b;
	uint8_t *other;

	trc_buf_init(&a);
	trc_buf_init(&b);
	trc_name_bound(&a, (const char *)data, size);
	if (size <= TRC_NAME_MAX) {
		check(same(&a, data, size));
	} else {
		check(a.len > TRC_NAME_MAX && a.len < TRC_NAME_MAX + 64);
		check(memcmp(a.data, data, TRC_NAME_MAX / 2 - 3) == 0);
		check(memcmp(a.data + a.len - (TRC_NAME_MAX / 2 - 3), data + size - (TRC_NAME_MAX / 2 - 3),
			     TRC_NAME_MAX / 2 - 3) == 0);
	}
	if (size > 0) {
		other = malloc(size);
		memcpy(other, data, size);
		other[size / 2] ^= 1;
		trc_name_bound(&b, (const char *)other, size);
		check(!same(&a, b.data, b.len));
		free(other);
	}
	trc_buf_release(&a);
	trc_buf_release(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *lines;

	check_syntaxes(data, size);
	check_bound(data, size);
	lines = trc_escape_lines_dup((const char *)data, size);
	check(is_safe((const unsigned char *)lines, strlen(lines), true));
	check(count_lf((const uint8_t *)lines, strlen(lines)) == count_lf(data, size));
	free(lines);
	return 0;
}
