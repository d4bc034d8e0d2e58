/* test_escape.c: what the targets send, as it reaches a terminal or a file: escapes in each syntax, names bounded. */
#include <stdlib.h>

#include "escape.h"
#include "test.h"

/* trc_escape_dup of n bytes, compared with want, freed. */
static void
check(const char *descr, const char *p, size_t n, const char *want)
{
	char *got = trc_escape_dup(p, n);

	test_str(descr, got, want);
	free(got);
}

#define CHECK(descr, lit, want) check((descr), (lit), sizeof(lit) - 1, (want))

static void
test_kept(void)
{
	CHECK("plain ASCII", "Order#total(x) <0.1>", "Order#total(x) <0.1>");
	CHECK("a backslash stays", "a\\nb \\e", "a\\nb \\e");
	CHECK("valid UTF-8", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	CHECK("U+00A0, just past the C1 range", "\xc2\xa0", "\xc2\xa0");
	CHECK("empty", "", "");
}

static void
test_controls(void)
{
	CHECK("C escapes", "\a\b\t\n\v\f\r\x1b", "\\a\\b\\t\\n\\v\\f\\r\\e");
	CHECK("other C0 controls and DEL", "\x01\x1f\x7f", "\\x01\\x1f\\x7f");
	CHECK("a NUL cuts nothing", "a\0b", "a\\x00b");
	CHECK("OSC 52, the clipboard", "\x1b]52;c;QQ==\a", "\\e]52;c;QQ==\\a");
	CHECK("a C1 CSI as UTF-8", "\xc2\x9b" "2J", "\\xc2\\x9b2J");
	CHECK("C1 bounds", "\xc2\x80\xc2\x9f", "\\xc2\\x80\\xc2\\x9f");
}

static void
test_ill_formed(void)
{
	CHECK("a lone C1 byte", "\x9b" "2J", "\\x9b2J");
	CHECK("0xff", "a\xff", "a\\xff");
	CHECK("a truncated sequence at the end", "\xe2\x82", "\\xe2\\x82");
	CHECK("a truncated sequence, then ASCII", "\xe2\x82x", "\\xe2\\x82x");
	CHECK("an overlong slash", "\xc0\xaf", "\\xc0\\xaf");
	CHECK("a surrogate", "\xed\xa0\x80", "\\xed\\xa0\\x80");
	CHECK("past U+10FFFF", "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
}

static void
test_unsafe_code_points(void)
{
	CHECK("U+202E, the right-to-left override", "evil\xe2\x80\xaegpj.exe",
	      "evil\\xe2\\x80\\xaegpj.exe");
	CHECK("the other embeddings and overrides", "\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad",
	      "\\xe2\\x80\\xaa\\xe2\\x80\\xab\\xe2\\x80\\xac\\xe2\\x80\\xad");
	CHECK("the isolates", "\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9",
	      "\\xe2\\x81\\xa6\\xe2\\x81\\xa7\\xe2\\x81\\xa8\\xe2\\x81\\xa9");
	CHECK("the marks, and Arabic's", "\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c",
	      "\\xe2\\x80\\x8e\\xe2\\x80\\x8f\\xd8\\x9c");
	CHECK("line and paragraph separators", "a\xe2\x80\xa8" "b\xe2\x80\xa9",
	      "a\\xe2\\x80\\xa8b\\xe2\\x80\\xa9");
	CHECK("their neighbours kept: U+200D, U+202F, U+2065, U+206A, U+061B",
	      "\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa\xd8\x9b",
	      "\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa\xd8\x9b");
}

/* p[0..n) in syntax how, compared with want. */
static void
check_as(const char *descr, enum trc_esc how, const char *p, size_t n, const char *want)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_escape_as(&b, how, p, n);
	trc_buf_addc(&b, '\0');
	test_str(descr, b.data, want);
	trc_buf_release(&b);
}

#define CHECK_AS(descr, how, lit, want) check_as((descr), (how), (lit), sizeof(lit) - 1, (want))
/* One of everything: an escape, a NUL, a C1 control, a bidi control, an ill-formed byte, the
 * U+FFFD that would replace it, a backslash, quotes, markup, DEL, plain UTF-8. */
#define HOSTILE "\x1b]0;t\a\0\xc2\x9b\xe2\x80\xae\xff\xef\xbf\xbd\\\"'<&>\x7f\xc3\xa9"

static void
test_syntaxes(void)
{
	test_note("one scan, each syntax's escapes");
	CHECK_AS("TEXT: the terminal's", TRC_ESC_TEXT, HOSTILE,
		 "\\e]0;t\\a\\x00\\xc2\\x9b\\xe2\\x80\\xae\\xff\xef\xbf\xbd\\\"'<&>\\x7f\xc3\xa9");
	CHECK_AS("EXACT: the same, and the backslash", TRC_ESC_EXACT, HOSTILE,
		 "\\e]0;t\\a\\x00\\xc2\\x9b\\xe2\\x80\\xae\\xff\xef\xbf\xbd\\\\\"'<&>\\x7f\xc3\xa9");
	CHECK_AS("JSON: \\u escapes of the same code points, U+FFFD for the bad byte", TRC_ESC_JSON,
		 HOSTILE, "\\u001b]0;t\\u0007\\u0000\\u009b\\u202e\\ufffd\xef\xbf\xbd\\\\\\\"'<&>\\u007f\xc3\xa9");
	CHECK_AS("PROM: EXACT's text as the value, escaped as the format says", TRC_ESC_PROM, HOSTILE,
		 "\\\\e]0;t\\\\a\\\\x00\\\\xc2\\\\x9b\\\\xe2\\\\x80\\\\xae\\\\xff\xef\xbf\xbd\\\\\\\\\\\"'<&>"
		 "\\\\x7f\xc3\xa9");
	CHECK_AS("HTML: TEXT's, with references for markup and quotes", TRC_ESC_HTML, HOSTILE,
		 "\\e]0;t\\a\\x00\\xc2\\x9b\\xe2\\x80\\xae\\xff\xef\xbf\xbd\\&quot;&#39;&lt;&amp;&gt;"
		 "\\x7f\xc3\xa9");
	CHECK_AS("HTML: a script tag is text", TRC_ESC_HTML, "<script>alert(1)</script>",
		 "&lt;script&gt;alert(1)&lt;/script&gt;");
	CHECK_AS("EXACT: a name that looks escaped stays apart from the bytes", TRC_ESC_EXACT,
		 "bad\\xff", "bad\\\\xff");
	CHECK_AS("JSON: a newline and a line separator", TRC_ESC_JSON, "a\n\xe2\x80\xa8",
		 "a\\n\\u2028");
}

/* trc_name_bound of p[0..n), NUL-terminated; the caller frees it. */
static char *
bound(const char *p, size_t n)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_name_bound(&b, p, n);
	trc_buf_addc(&b, '\0');
	return b.data;
}

static void
test_bound(void)
{
	size_t big = 1u << 20;
	char *a = malloc(big), *b = malloc(big), *x, *y, *m;

	test_note("names cut in the middle past TRC_NAME_MAX, said so, distinct");
	memset(a, 'a', big);
	x = bound(a, TRC_NAME_MAX);
	test_cond("TRC_NAME_MAX bytes: as they are", strlen(x) == TRC_NAME_MAX);
	free(x);
	x = bound(a, TRC_NAME_MAX + 1);
	test_cond("one more: cut, longer than any name not cut", strlen(x) > TRC_NAME_MAX &&
		  strstr(x, "[...513 bytes #") != NULL);
	free(x);
	memcpy(b, a, big);
	b[big / 2] = 'b';
	x = bound(a, big);
	y = bound(b, big);
	m = strstr(x, "[...");
	test_cond("a megabyte: head, marker, tail", strlen(x) < TRC_NAME_MAX + 64 && m != NULL &&
		  m - x == TRC_NAME_MAX / 2 && strncmp(m, "[...1048576 bytes #", 19) == 0 &&
		  strlen(strstr(m, "...]") + 4) == TRC_NAME_MAX / 2);
	test_cond("names that differ only where they were cut: apart", strcmp(x, y) != 0 &&
		  strlen(x) == strlen(y));
	free(x);
	free(y);
	/* A 3-byte sequence across each cut: neither is split. */
	memcpy(a + TRC_NAME_MAX / 2 - 1, "\xe2\x82\xac", 3);
	memcpy(a + 1000 - TRC_NAME_MAX / 2 - 1, "\xe2\x82\xac", 3);
	x = bound(a, 1000);
	m = strstr(x, "[...");
	test_cond("no UTF-8 sequence split: the head ends before one, the tail starts after one",
		  m != NULL && m - x == TRC_NAME_MAX / 2 - 1 &&
		  strlen(strstr(m, "...]") + 4) == TRC_NAME_MAX / 2 - 2);
	free(x);
	free(a);
	free(b);
}

static void
test_lines(void)
{
	char *got = trc_escape_lines_dup("E: one\r\ntwo \x1b[1m\n\nthree\n", 24);

	test_str("lines kept, \\r\\n as \\n, the rest escaped", got,
		 "E: one\ntwo \\e[1m\n\nthree\n");
	free(got);
	got = trc_escape_lines_dup("a\rb", 3);
	test_str("a \\r inside a line shows", got, "a\\rb");
	free(got);
}

void
test_escape(void)
{
	test_kept();
	test_controls();
	test_ill_formed();
	test_unsafe_code_points();
	test_syntaxes();
	test_bound();
	test_lines();
}
