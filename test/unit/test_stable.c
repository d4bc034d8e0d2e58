/* test_stable.c: names made the same in every process (the agent's stable.c). */
#include "stable.h"
#include "test.h"

static char buf[256];

/* What f makes of s, as a C string in buf. */
static const char *
made(size_t (*f)(char *, size_t), const char *s)
{
	size_t n = strlen(s);

	memcpy(buf, s, n);
	buf[f(buf, n)] = '\0';
	return buf;
}

static int
nul_kept(void)
{
	char s[] = "A\0#<Class:0x1>";
	size_t n = trc_stable_class(s, sizeof(s) - 1);

	return n == 10 && memcmp(s, "A\0#<Class>", 10) == 0;
}

#define SAME(what, f, s, want) test_cond(what, strcmp(made(f, s), want) == 0)

void
test_stable(void)
{
	test_note("an anonymous class or module loses its address");
	SAME("ActionView's template class", trc_stable_class, "#<Class:0x00007f9540022cb8>", "#<Class>");
	SAME("a module", trc_stable_class, "#<Module:0x000055d0c0a1b2c8>", "#<Module>");
	SAME("short address", trc_stable_class, "#<Class:0x1f>", "#<Class>");
	SAME("nested: an anonymous class's singleton", trc_stable_class, "#<Class:#<Class:0x00007f95400>>",
	     "#<Class:#<Class>>");
	SAME("a named class's inspect", trc_stable_class, "#<ActionView::Base:0x0000abc>", "#<ActionView::Base>");
	SAME("under a named one", trc_stable_class, "Foo::#<Class:0xdead>", "Foo::#<Class>");

	test_note("what is not an address stays");
	SAME("a named class", trc_stable_class, "ActionView::Base", "ActionView::Base");
	SAME("a singleton's name", trc_stable_class, "#<Class:Foo>", "#<Class:Foo>");
	SAME("no hex digit", trc_stable_class, "#<Class:0x>", "#<Class:0x>");
	SAME("not closed", trc_stable_class, "#<Class:0x1234", "#<Class:0x1234");
	SAME("not hex", trc_stable_class, "#<Class:0x12g4>", "#<Class:0x12g4>");
	SAME("not after #<", trc_stable_class, "Class:0x1234>", "Class:0x1234>");
	SAME("empty", trc_stable_class, "", "");
	test_cond("a NUL in it is a byte like another", nul_kept());

	test_note("a compiled template's method loses its hash and object id (ActionView 6.1's method_name)");
	SAME("positive hash", trc_stable_method, "_app_views_issues_index_html_erb__3315063590997469328_40160",
	     "_app_views_issues_index_html_erb");
	SAME("negative hash ('-' made '_')", trc_stable_method,
	     "_app_views_issues_index_html_erb___3315063590997469328_40160", "_app_views_issues_index_html_erb");
	SAME("a partial", trc_stable_method, "_app_views_issues__list_html_erb__12_7", "_app_views_issues__list_html_erb");
	SAME("shortest", trc_stable_method, "_a__1_2", "_a");

	test_note("other method names stay");
	SAME("plain", trc_stable_method, "index", "index");
	SAME("no leading underscore", trc_stable_method, "app__1_2", "app__1_2");
	SAME("one number only", trc_stable_method, "_app__12", "_app__12");
	SAME("single underscore before the hash", trc_stable_method, "_app_1_2", "_app_1_2");
	SAME("nothing before the numbers", trc_stable_method, "___1_2", "___1_2");
	SAME("not digits at the end", trc_stable_method, "_app__1_x", "_app__1_x");
	SAME("empty", trc_stable_method, "", "");

	test_note("a frame's full label: both parts");
	SAME("template frame", trc_stable_label, "#<Class:0x00007f9540022cb8>#_app_views_a_html_erb___33_40",
	     "#<Class>#_app_views_a_html_erb");
	SAME("a block in one", trc_stable_label, "block in #<Class:0x1>#_app_views_a_html_erb__3_4",
	     "block in #<Class>#_app_views_a_html_erb");
	SAME("a class method", trc_stable_label, "Foo._x__1_2", "Foo._x");
	SAME("no class", trc_stable_label, "_x__1_2", "_x");
	SAME("plain", trc_stable_label, "Foo#bar", "Foo#bar");
}
