/* test_spec.c: the -m spec grammar, accepted and rejected forms. */
#include <stdlib.h>

#include "spec.h"
#include "test.h"

static const struct good {
	const char *text;
	const char *cls;        /* NULL: nil */
	enum trc_spec_kind kind;
	const char *method;     /* NULL: nil */
	const char *exprs;      /* joined with '|' */
} goods[] = {
	{ "Kernel#sleep", "Kernel", TRC_SPEC_INSTANCE, "sleep", "" },
	{ "Process.pid", "Process", TRC_SPEC_SINGLETON, "pid", "" },
	{ "Foo::Bar#baz", "Foo::Bar", TRC_SPEC_INSTANCE, "baz", "" },
	{ "A::B::C9_x.go", "A::B::C9_x", TRC_SPEC_SINGLETON, "go", "" },
	{ "sleep", NULL, TRC_SPEC_ANY, "sleep", "" },
	{ "Kernel#", "Kernel", TRC_SPEC_INSTANCE, NULL, "" },
	{ "Dir.", "Dir", TRC_SPEC_SINGLETON, NULL, "" },
	{ "Foo#empty?", "Foo", TRC_SPEC_INSTANCE, "empty?", "" },
	{ "Foo#save!", "Foo", TRC_SPEC_INSTANCE, "save!", "" },
	{ "Foo#name=", "Foo", TRC_SPEC_INSTANCE, "name=", "" },
	{ "Array#[]", "Array", TRC_SPEC_INSTANCE, "[]", "" },
	{ "Hash#[]=", "Hash", TRC_SPEC_INSTANCE, "[]=", "" },
	{ "Integer#+", "Integer", TRC_SPEC_INSTANCE, "+", "" },
	{ "Comparable#<=>", "Comparable", TRC_SPEC_INSTANCE, "<=>", "" },
	{ "String#==", "String", TRC_SPEC_INSTANCE, "==", "" },
	{ "Integer#-@", "Integer", TRC_SPEC_INSTANCE, "-@", "" },
	{ "Kernel#`", "Kernel", TRC_SPEC_INSTANCE, "`", "" },
	{ "<<", NULL, TRC_SPEC_ANY, "<<", "" },
	{ "_private_thing", NULL, TRC_SPEC_ANY, "_private_thing", "" },
	{ "Kernel#sleep(self, __source__, @ivar, foo(1, 2))", "Kernel", TRC_SPEC_INSTANCE, "sleep",
	  "self|__source__|@ivar|foo(1, 2)" },
	{ "Foo#bar(  self  )", "Foo", TRC_SPEC_INSTANCE, "bar", "self" },
	{ "Foo#bar()", "Foo", TRC_SPEC_INSTANCE, "bar", "" },
	{ "Foo#bar( )", "Foo", TRC_SPEC_INSTANCE, "bar", "" },
	{ "Foo#bar(a[1, 2], {x: 1, y: 2}, \"a,b\", 'c)d', `e,f`)", "Foo", TRC_SPEC_INSTANCE,
	  "bar", "a[1, 2]|{x: 1, y: 2}|\"a,b\"|'c)d'|`e,f`" },
	{ "Foo#bar(\"q\\\"(,\")", "Foo", TRC_SPEC_INSTANCE, "bar", "\"q\\\"(,\"" },
	{ "puts(self)", NULL, TRC_SPEC_ANY, "puts", "self" },
	{ "Foo#(self)", "Foo", TRC_SPEC_INSTANCE, NULL, "self" },
	{ "Foo#bar(x.map { |y| y * 2 })", "Foo", TRC_SPEC_INSTANCE, "bar", "x.map { |y| y * 2 }" },
	{ "Shop#GET /price/:name", "Shop", TRC_SPEC_INSTANCE, "GET /price/:name", "" },
	{ "Shop#GET /price/:name(name, params)", "Shop", TRC_SPEC_INSTANCE, "GET /price/:name",
	  "name|params" },
	{ "Shop#GET /a.json", "Shop", TRC_SPEC_INSTANCE, "GET /a.json", "" },
	{ "GET /price/:name", NULL, TRC_SPEC_ANY, "GET /price/:name", "" },
	{ "Foo#b ar", "Foo", TRC_SPEC_INSTANCE, "b ar", "" },
	{ "Foo#GET (a|b) x", "Foo", TRC_SPEC_INSTANCE, "GET (a|b) x", "" },
	{ "Hash#[]=", "Hash", TRC_SPEC_INSTANCE, "[]=", "" },
	{ "Integer#+(self)", "Integer", TRC_SPEC_INSTANCE, "+", "self" },
	{ "Foo#bar?", "Foo", TRC_SPEC_INSTANCE, "bar?", "" },
};

static const struct bad {
	const char *text;
	const char *reason;     /* a word the reason contains */
} bads[] = {
	{ "", "empty" },
	{ "#foo", "missing class" },
	{ ".foo", "missing class" },
	{ "Foo#bar(", "unbalanced" },
	{ "Foo#bar(a, (b)", "unbalanced" },
	{ "Foo#bar(a])", "unbalanced" },
	{ "Foo#bar(a)x", "after the closing" },
	{ "Foo#bar(a)(b)", "after the closing" },
	{ "Foo#bar(\"abc)", "unterminated" },
	{ "Foo#bar(a,,b)", "empty expression" },
	{ "Foo#bar(a, )", "empty expression" },
	{ "Foo#bar(, a)", "empty expression" },
	{ "foo#bar", "constant path" },
	{ "Foo::#x", "constant path" },
	{ "Foo::bar#x", "constant path" },
	{ "Foo:Bar#x", "constant path" },
	{ "::Foo#x", "constant path" },
	{ "Foo #bar", "constant path" },
	{ "Foo#b ar ", "invalid method" },
	{ "Foo# bar", "invalid method" },
	{ "Foo#GET /x\n", "invalid method" },
	{ "Foo#bar ", "invalid method" },
	{ "Foo#9lives", "invalid method" },
	{ "Foo#a?b", "invalid method" },
	{ "Foo#a??", "invalid method" },
	{ "Foo#<=>=", "invalid method" },
	{ "Foo#bar#baz", "invalid method" },
	{ "Foo.bar.baz", "invalid method" },
	{ "Foo::bar", "invalid method" },
	{ "(self)", "missing method" },
	{ "Foo#bar (self)", "invalid method" },
	{ "Foo#bar)", "invalid method" },
};

/* The exprs joined with '|', in a static buffer. */
static const char *
joined(const struct trc_spec *s)
{
	static char buf[512];

	buf[0] = '\0';
	for (size_t i = 0; i < s->nexprs; i++) {
		if (i)
			strcat(buf, "|");
		strcat(buf, s->exprs[i]);
	}
	return buf;
}

static int
same(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void
test_goods(void)
{
	for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
		const struct good *g = &goods[i];
		struct trc_spec s;
		const char *why = NULL;
		int rc = trc_spec_parse(&s, g->text, &why);

		test_note("accepts %s", g->text);
		test_cond("parses", rc == 0);
		if (rc != 0) {
			printf("    reason: %s\n", why);
			continue;
		}
		test_cond("class", same(s.cls, g->cls));
		test_cond("kind", s.kind == g->kind);
		test_cond("method", same(s.method, g->method));
		test_str("exprs", joined(&s), g->exprs);
		test_str("keeps its text", s.text, g->text);
		trc_spec_release(&s);
	}
}

static void
test_bads(void)
{
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		struct trc_spec s;
		const char *why = NULL;
		int rc = trc_spec_parse(&s, bads[i].text, &why);

		test_note("rejects '%s': %s", bads[i].text, rc ? why : "(accepted!)");
		test_cond("rejected", rc == -1);
		test_cond("with the right reason", rc == -1 && strstr(why, bads[i].reason) != NULL);
		test_cond("left empty", rc == 0 || (s.cls == NULL && s.method == NULL &&
						     s.exprs == NULL && s.text == NULL));
		if (rc == 0)
			trc_spec_release(&s);
	}
}

/* Deep nesting is bounded, not a stack overflow. */
static void
test_deep_nesting(void)
{
	char text[600] = "Foo#bar(";
	struct trc_spec s;
	const char *why;

	memset(text + 8, '(', 200);
	test_cond("200 nested parens rejected", trc_spec_parse(&s, text, &why) == -1 &&
						strstr(why, "deeply") != NULL);
}

/* The protocol's TRC_MAX_EXPRS: one more is refused here, not by the agent. */
static void
test_expression_limit(void)
{
	char text[256] = "Foo#bar(";
	struct trc_spec s;
	const char *why;

	for (int i = 0; i < TRC_MAX_EXPRS; i++)
		strcat(text, i ? ",a" : "a");
	strcat(text, ")");
	test_cond("16 expressions accepted", trc_spec_parse(&s, text, &why) == 0 &&
					     s.nexprs == TRC_MAX_EXPRS);
	trc_spec_release(&s);
	strcpy(text + strlen(text) - 1, ",b)");
	test_cond("17 expressions rejected", trc_spec_parse(&s, text, &why) == -1 &&
					     strstr(why, "too many") != NULL);
}

/* A tracer file's lines: specs trimmed, comments and blank lines skipped, numbers kept. */
static void
test_tracer_file(void)
{
	static const char text[] = "# io: reads\n\n  IO#read(self)  \r\n\t# indented comment\n"
				   "IO.write\nlast";
	const char *want[] = { "IO#read(self)", "IO.write", "last" };
	const unsigned lines[] = { 3, 5, 6 };
	size_t pos = 0, n, k = 0;
	unsigned line = 0;
	const char *p;
	char got[64];

	while (trc_spec_next_line(text, strlen(text), &pos, &line, &p, &n) && k < 3) {
		snprintf(got, sizeof(got), "%.*s", (int)n, p);
		test_str("tracer file spec", got, want[k]);
		test_cond("its line number", line == lines[k]);
		k++;
	}
	test_cond("three specs, then the end", k == 3 &&
		  !trc_spec_next_line(text, strlen(text), &pos, &line, &p, &n));
	pos = 0;
	line = 0;
	test_cond("only comments: none", !trc_spec_next_line("#a\n \n", 5, &pos, &line, &p, &n));
	pos = 0;
	line = 0;
	test_cond("empty: none", !trc_spec_next_line("", 0, &pos, &line, &p, &n) && line == 0);
}

/* The '#' of a spec is no comment; CRLF files; a NUL-free length is what counts, not a NUL. */
static void
test_tracer_file_edges(void)
{
	static const char text[] = "\r\n  Foo#bar(sql, name) \r\n\n\n#x\nBaz.qux # not a comment";
	size_t pos = 0, n;
	unsigned line = 0;
	const char *p;
	char got[64];

	test_cond("a spec after a CRLF blank line", trc_spec_next_line(text, strlen(text), &pos, &line,
								       &p, &n) && line == 2);
	snprintf(got, sizeof(got), "%.*s", (int)n, p);
	test_str("its text, without the CR", got, "Foo#bar(sql, name)");
	test_cond("line 6, after blanks and a comment", trc_spec_next_line(text, strlen(text), &pos,
									   &line, &p, &n) && line == 6);
	snprintf(got, sizeof(got), "%.*s", (int)n, p);
	test_str("a # inside a line stays", got, "Baz.qux # not a comment");
	pos = 0;
	line = 0;
	test_cond("only the first len bytes", trc_spec_next_line("a\nb", 1, &pos, &line, &p, &n) &&
		  n == 1 && *p == 'a' && !trc_spec_next_line("a\nb", 1, &pos, &line, &p, &n));
}

/* The specs whose wrapping leaves a basic operation's slow path behind. */
static void
test_basic_ops(void)
{
	static const struct {
		const char *text;
		bool op;
	} cases[] = {
		{ "Integer#+", true }, { "String#-@", true }, { "Hash#[]=", true }, { "Array#[]", true },
		{ "String#==", true }, { "Integer#", true }, { "+", true }, { "nil?", true },
		{ "Integer.sqrt", false }, { "Hash#key?", false }, { "Foo#+", false },
		{ "Proc#call", true }, { "Object#f", false }, { "Shop#GET /price/:name", false },
	};
	char label[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct trc_spec sp;
		const char *why = NULL;

		snprintf(label, sizeof(label), "basic op: %s", cases[i].text);
		if (trc_spec_parse(&sp, cases[i].text, &why) != 0) {
			test_cond(label, false);
			continue;
		}
		test_cond(label, trc_spec_basic_op(&sp) == cases[i].op);
		trc_spec_release(&sp);
	}
}

void
test_spec(void)
{
	test_basic_ops();
	test_goods();
	test_bads();
	test_deep_nesting();
	test_expression_limit();
	test_tracer_file();
	test_tracer_file_edges();
}
