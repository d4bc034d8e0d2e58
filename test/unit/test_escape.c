/* test_escape.c: what the targets send, as it reaches a terminal: escapes for controls and bad UTF-8. */
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
	test_lines();
}
