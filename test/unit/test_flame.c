/* test_flame.c: the flame graph's tree, its merging under the threshold, its escaping and its document. */
#include <stdlib.h>

#include "flame.h"
#include "output.h"
#include "test.h"

static struct trc_flame_frame
F(const char *name, const char *file, int32_t line, enum trc_flame_kind kind)
{
	return (struct trc_flame_frame){ name, strlen(name), file, strlen(file), line, kind };
}

/* The document of f, NUL-terminated; the caller frees it. */
static char *
render(const struct trc_flame *f, double min_share, enum trc_flame_doc doc, size_t *nframes)
{
	struct trc_output out;
	struct trc_flame_opts o = { doc, "a <title>", "sub & title", min_share };
	char *s;
	size_t n;

	trc_output_init(&out, -1, -1);
	n = trc_flame_write(f, &o, &out);
	if (nframes != NULL)
		*nframes = n;
	trc_buf_addc(&out.out, '\0');
	s = strdup(out.out.data);
	trc_output_release(&out);
	return s;
}

static size_t
count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* The frame whose title starts with name: its data-v, or -1 when there is none. */
static long long
value_of(const char *doc, const char *name)
{
	char key[256];
	const char *t, *g;

	snprintf(key, sizeof(key), "<title>%s\n", name);
	if ((t = strstr(doc, key)) == NULL)
		return -1;
	for (g = t; g > doc && strncmp(g, "<g class=\"f\"", 12) != 0; g--)
		;
	g = strstr(g, "data-v=\"");
	return g != NULL ? atoll(g + 8) : -1;
}

static char *
xml(const char *p, size_t n)
{
	struct trc_buf b;

	trc_buf_init(&b);
	trc_flame_xml(&b, p, n);
	trc_buf_addc(&b, '\0');
	return b.data;
}

static void
check_xml(const char *in, size_t n, const char *want)
{
	char *got = xml(in, n);

	test_str(in, got, want);
	free(got);
}

static void
test_tree(void)
{
	struct trc_flame *f = trc_flame_new("ns");
	struct trc_flame_frame a = F("A#run", "/app/a.rb", 3, TRC_FLAME_APP);
	struct trc_flame_frame b = F("B#step", "/app/b.rb", 7, TRC_FLAME_APP);
	struct trc_flame_frame c = F("Kernel#sleep", "", 0, TRC_FLAME_WAIT);
	struct trc_flame_frame ab[] = { a, b }, abc[] = { a, b, c }, ac[] = { a, c };
	const char *t1[] = { "main" }, *t2[] = { "worker" };
	uint32_t n1, n2;
	char *doc;

	test_note("the same path twice is one node; totals add up its callees");
	trc_flame_add(f, NULL, 0, ab, 2, 100);
	trc_flame_add(f, NULL, 0, ab, 2, 50);
	trc_flame_add(f, NULL, 0, abc, 3, 30);
	trc_flame_add(f, NULL, 0, ac, 2, 20);
	trc_flame_add(f, NULL, 0, &a, 1, 5);
	test_cond("total", trc_flame_total(f) == 205);
	n1 = trc_flame_node(f, TRC_FLAME_ROOT, trc_flame_frame(f, &a));
	n2 = trc_flame_node(f, n1, trc_flame_frame(f, &b));
	test_cond("a node found again", trc_flame_node(f, TRC_FLAME_ROOT, trc_flame_frame(f, &a)) == n1);
	test_cond("a child is another node", n2 != n1 && n2 != TRC_FLAME_ROOT);
	doc = render(f, 0, TRC_FLAME_SVG, NULL);
	test_cond("root: everything", value_of(doc, "all") == 205);
	test_cond("A#run: its own and its callees'", value_of(doc, "A#run") == 205);
	test_cond("B#step: 150 own + 30 in sleep", value_of(doc, "B#step") == 180);
	test_cond("two sleeps: one under B, one under A", count(doc, "<title>Kernel#sleep\n") == 2);
	test_cond("a C method says so", count(doc, "(a C method)") == 2);
	test_cond("ns shown as time", strstr(doc, "205 ns (100.00% of all)") != NULL);
	test_cond("a file and line", strstr(doc, "/app/b.rb:7\n") != NULL);
	free(doc);

	test_note("groups: a frame per thread under the root, merged when none is given");
	trc_flame_add(f, t1, 1, ab, 2, 10);
	trc_flame_add(f, t2, 1, ab, 2, 10);
	doc = render(f, 0, TRC_FLAME_SVG, NULL);
	test_cond("thread frames", value_of(doc, "main") == 10 && value_of(doc, "worker") == 10);
	test_cond("three A#run: merged, and one per thread", count(doc, "<title>A#run\n") == 3);
	test_cond("group kind in the legend", strstr(doc, ">process, thread</text>") != NULL);
	free(doc);
	trc_flame_free(f);
}

static void
test_threshold(void)
{
	struct trc_flame *f = trc_flame_new("samples");
	struct trc_flame_frame big = F("Big#work", "/app/big.rb", 1, TRC_FLAME_APP);
	char name[32];
	size_t n;
	char *doc;

	test_note("frames under the share are merged into one (other) per parent");
	trc_flame_add(f, NULL, 0, &big, 1, 9000);
	for (int i = 0; i < 100; i++) {
		struct trc_flame_frame st[2] = { big, F(name, "/gems/x.rb", i, TRC_FLAME_GEM) };

		snprintf(name, sizeof(name), "Tiny#m%d", i);
		st[1].name_len = strlen(name);
		trc_flame_add(f, NULL, 0, st, 2, 10);
	}
	doc = render(f, 0.001, TRC_FLAME_SVG, &n);     /* 10 of 10000: 0.1%, kept */
	test_cond("at the threshold: kept", count(doc, "<title>Tiny#m") == 100 && n == 102);
	free(doc);
	doc = render(f, 0.002, TRC_FLAME_SVG, &n);
	test_cond("below: none drawn alone", count(doc, "<title>Tiny#m") == 0);
	test_cond("one (other) with their sum", value_of(doc, "(other)") == 1000);
	test_cond("root, Big#work, (other)", n == 3);
	test_cond("samples are counted as such", strstr(doc, "1000 samples (10.00% of all)") != NULL);
	free(doc);
	doc = render(f, 0.5, TRC_FLAME_SVG, &n);
	test_cond("an (other) below the share too: part of its parent", value_of(doc, "(other)") == -1 && n == 2);
	test_cond("the parent keeps its width", value_of(doc, "Big#work") == 10000);
	free(doc);
	trc_flame_free(f);
}

static void
test_escaping(void)
{
	struct trc_flame *f = trc_flame_new("ns");
	struct trc_flame_frame evil[] = {
		F("<script>alert(1)</script>", "/app/\"onload=alert(1)\".rb", 1, TRC_FLAME_APP),
		F("<img src=x onerror=alert(1)>", "", 0, TRC_FLAME_CMETHOD),
	};
	struct trc_flame_frame ctl = F("bad\x1b]0;t\x07\xff\xef\xbf\xbe]]>", "", 0, TRC_FLAME_OTHER);
	char *doc;

	test_note("XML text: markup characters, controls, ill-formed UTF-8, U+FFFE");
	check_xml("<a href=\"x\">&'</a>", 18, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
	check_xml("a\0b\n\x1b[31m", 9, "a\\x00b\\n\\e[31m");
	check_xml("\xff\xfe ok \xc3\xa9", 8, "\\xff\\xfe ok \xc3\xa9");
	check_xml("\xef\xbf\xbe\xef\xbf\xbf\xef\xbf\xbd", 9, "\\uFFFE\\uFFFF\xef\xbf\xbd");
	check_xml("\xc2\x9b" "2J", 4, "\\xc2\\x9b2J");
	check_xml("]]>", 3, "]]&gt;");

	test_note("names from the target are text in the document, never markup");
	trc_flame_add(f, NULL, 0, evil, 2, 10);
	trc_flame_add(f, NULL, 0, &ctl, 1, 10);
	doc = render(f, 0, TRC_FLAME_HTML, NULL);
	test_cond("no <script> but ours", count(doc, "<script") == 1);
	test_cond("no <img>", strstr(doc, "<img") == NULL);
	test_cond("no raw quote from a file", strstr(doc, "\"onload") == NULL);
	test_cond("the name as text", strstr(doc, "&lt;script&gt;alert(1)&lt;/script&gt;") != NULL);
	test_cond("no raw ESC, BEL or 0xff", strchr(doc, 0x1b) == NULL && strchr(doc, 0x07) == NULL &&
		  strchr(doc, (char)0xff) == NULL);
	test_cond("one CDATA end: the script's", count(doc, "]]>") == 1);
	test_cond("the title escaped", strstr(doc, "<title>a &lt;title&gt;</title>") != NULL);
	test_cond("a page", strncmp(doc, "<!DOCTYPE html>", 15) == 0 && strstr(doc, "</html>\n") != NULL);
	free(doc);
	doc = render(f, 0, TRC_FLAME_SVG, NULL);
	test_cond("an SVG document", strncmp(doc, "<?xml version=\"1.0\"", 19) == 0 &&
		  strstr(doc, "</svg>\n") != NULL && strstr(doc, "<html") == NULL);
	test_cond("the subtitle escaped", strstr(doc, "sub &amp; title") != NULL);
	free(doc);
	trc_flame_free(f);
}

static void
test_structure(void)
{
	struct trc_flame *f = trc_flame_new("ns");
	struct trc_flame_frame deep[3000];
	char *doc, *p;
	size_t n, open = 0, close = 0;

	test_note("a deep stack: every frame a row, the document closed");
	for (size_t i = 0; i < 3000; i++)
		deep[i] = F("R#rec", "/app/r.rb", 1, TRC_FLAME_APP);
	trc_flame_add(f, NULL, 0, deep, 3000, 1);
	doc = render(f, 0, TRC_FLAME_SVG, &n);
	test_cond("every frame", n == 3001);
	for (p = doc; (p = strstr(p, "<g")) != NULL; p++)
		open++;
	for (p = doc; (p = strstr(p, "</g>")) != NULL; p++)
		close++;
	test_cond("each g closed", open == close && open == 3001 + 2);
	test_cond("as tall as its rows", strstr(doc, "height=\"51149\"") != NULL);
	free(doc);
	trc_flame_free(f);

	test_note("an empty profile is a document with its root");
	f = trc_flame_new("ns");
	doc = render(f, 0.001, TRC_FLAME_SVG, &n);
	test_cond("root only", n == 1 && value_of(doc, "all") == 0);
	test_cond("drawn across", strstr(doc, "width=\"1180.00\"") != NULL);
	free(doc);
	trc_flame_free(f);
}

static void
test_classify(void)
{
	const char *pre[] = { "/srv/app", "/opt/other/" };
	struct trc_flame_scope sc = { pre, 2 };
	struct {
		const char *name, *file;
		enum trc_flame_kind want;
	} cases[] = {
		{ "Order#total", "/srv/app/app/models/order.rb", TRC_FLAME_APP },
		{ "X#y", "/opt/other/x.rb", TRC_FLAME_APP },
		{ "X#y", "/srv/application/x.rb", TRC_FLAME_OTHER },
		{ "AR#save", "/srv/app/vendor/bundle/ruby/3.1.0/gems/ar-7/lib/a.rb", TRC_FLAME_GEM },
		{ "Rack#call", "/usr/share/rubygems-integration/all/gems/rack-2/lib/r.rb", TRC_FLAME_GEM },
		{ "R#x", "/usr/lib/ruby/vendor_ruby/rails.rb", TRC_FLAME_GEM },
		{ "Set#add", "/usr/lib/ruby/3.1.0/set.rb", TRC_FLAME_RUBY },
		{ "Kernel#tap", "<internal:kernel>", TRC_FLAME_RUBY },
		{ "Array#each", "", TRC_FLAME_CMETHOD },
		{ "Kernel#sleep", "", TRC_FLAME_WAIT },
		{ "Thread::Queue#pop", "", TRC_FLAME_WAIT },
		{ "x", "/tmp/x.rb", TRC_FLAME_OTHER },
	};

	test_note("kinds from files and names");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		test_cond(cases[i].file, trc_flame_classify(cases[i].name, strlen(cases[i].name),
							    cases[i].file, strlen(cases[i].file), &sc) ==
					 cases[i].want);
	test_cond("no scope: nothing is the app's",
		  trc_flame_classify("a", 1, "/srv/app/a.rb", 13, NULL) == TRC_FLAME_OTHER);
}

static void
test_bounded(void)
{
	struct trc_flame *f = trc_flame_new("ns");
	uint32_t node = TRC_FLAME_ROOT, last = 0;
	struct trc_flame_frame fr = F("A#a", "/a.rb", 1, TRC_FLAME_APP);
	uint32_t frame = trc_flame_frame(f, &fr);

	test_note("past the most nodes, a path ends where the tree stopped growing");
	for (uint32_t i = 0; i < TRC_FLAME_MAX_NODES + 10; i++) {
		last = node;
		node = trc_flame_node(f, node, frame);
	}
	test_cond("the last node is its own parent", node == last);
	test_cond("what was not made is counted", trc_flame_dropped(f) == 11);
	trc_flame_weigh(f, node, 7);
	test_cond("its weight stays", trc_flame_total(f) == 7);
	trc_flame_free(f);
}

void
test_flame(void)
{
	test_tree();
	test_threshold();
	test_escaping();
	test_structure();
	test_classify();
	test_bounded();
}
