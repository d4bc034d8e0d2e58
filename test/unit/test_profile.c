/* test_profile.c: --profile's messages as table rows, and the run's tree as collapsed stacks, pprof and a flame graph. */
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "output.h"
#include "pprof/profile.pb-c.h"
#include "profile.h"
#include "profile_export.h"
#include "test.h"

#define S(s) ((struct trc_str){ (s), (uint32_t)(sizeof(s) - 1) })
#define MS 1000000ull

/*
 * One interval of two threads: main ran Foo#bar (30 ms of CPU) and Array#sort under it (80 ms);
 * worker, in a request, ran Foo#bar (10 ms). Frame 2 is the agent's garbage-collection
 * pseudo-frame, named but not sampled.
 */
static const struct trc_prof_frame frames[] = {
	{ 2, TRC_FRAME_GC, S("(garbage collection)"), S(""), 0 },
	{ 9, TRC_FRAME_RUBY, S("Foo#bar"), S("/app/a.rb"), 3 },
	{ 10, TRC_FRAME_C, S("Array#sort"), S(""), 0 },
};
static const struct trc_prof_thread threads[] = { { 0, S("main") }, { 1, S("worker") } };
static const struct trc_prof_tag tags[] = { { 1, S("UsersController#index") } };
static const struct trc_prof_root roots[] = { { 1, 0, 0 }, { 4, 1, 1 } };
static const struct trc_prof_node nodes[] = { { 2, 1, 9 }, { 3, 2, 10 }, { 5, 4, 9 } };
static const struct trc_prof_weight weights[] = {
	{ 2, 3, 30 * MS, 31 * MS }, { 3, 8, 80 * MS, 90 * MS }, { 5, 1, 10 * MS, 12 * MS },
};

static struct trc_message
interval(void)
{
	struct trc_message m = { .type = TRC_MSG_PROFILE };

	m.profile.frames = frames;
	m.profile.nframes = 3;
	m.profile.threads = threads;
	m.profile.nthreads = 2;
	m.profile.tags = tags;
	m.profile.ntags = 1;
	m.profile.roots = roots;
	m.profile.nroots = 2;
	m.profile.nodes = nodes;
	m.profile.nnodes = 3;
	m.profile.weights = weights;
	m.profile.nweights = 3;
	m.profile.elapsed_ns = 1000 * MS;
	m.profile.samples = 12;
	m.profile.hz = 100;
	m.profile.own_ns = 2 * MS;
	return m;
}

static const struct trc_top_row *
row(const struct trc_message *top, const char *label)
{
	for (size_t i = 0; i < top->top.nrows; i++)
		if (top->top.rows[i].label.len == strlen(label) &&
		    memcmp(top->top.rows[i].label.ptr, label, strlen(label)) == 0)
			return &top->top.rows[i];
	return NULL;
}

static void
rows(void)
{
	struct trc_profile p;
	struct trc_message m = interval(), top;
	const struct trc_top_row *bar, *sort;

	test_note("an interval as rows: self and total time per frame, each sample once");
	trc_profile_init(&p, false, false);
	trc_profile_feed(&p, 42, &m, &top);
	bar = row(&top, "Foo#bar");
	sort = row(&top, "Array#sort");
	test_cond("a row per frame sampled", bar != NULL && sort != NULL && row(&top, "(garbage collection)") == NULL);
	test_cond("Foo#bar: its own 40 ms in 4 samples, 120 ms under it", bar != NULL && bar->self_ns == 40 * MS &&
		  bar->count == 4 && bar->total_ns == 120 * MS && bar->line == 3);
	test_cond("Array#sort: 80 ms, 8 samples, no file", sort != NULL && sort->self_ns == 80 * MS && sort->count == 8 &&
		  sort->total_ns == 80 * MS && sort->file.len == 0);
	test_cond("the interval's counts", top.top.events == 12 && top.top.elapsed_ns == 1000 * MS && p.hz == 100 &&
		  p.own_ns == 2 * MS);
	/* Rows are made in a buffer kept from one interval to the next: none keeps a field of
	 * what was there (an app frame's pointer, hashed as its key, crashed a --ps table). */
	memset(p.rows, 0xa5, p.rows_cap * sizeof(*p.rows));
	trc_profile_feed(&p, 42, &m, &top);
	{
		bool clean = top.top.nrows > 0;

		for (size_t i = 0; i < top.top.nrows; i++)
			clean = clean && top.top.rows[i].app_file.len == 0 && top.top.rows[i].app_file.ptr == NULL &&
				top.top.rows[i].app_line == 0 && top.top.rows[i].nbuckets == 0;
		test_cond("a row of the next interval has no app frame, whatever its buffer held", clean);
	}
	trc_profile_release(&p);
}

/* The run's tree written in format with o; NUL-terminated, the caller frees it. */
static char *
written(bool wall, enum trc_format format, bool by_thread, size_t *len)
{
	struct trc_profile p;
	struct trc_message m = interval(), top;
	struct trc_profile_write_opts o = { .format = format, .by_thread = by_thread, .by_process = by_thread,
					    .duration_ns = 1000 * MS, .hz = 100, .tool = "tracer test" };
	struct trc_buf b;

	trc_profile_init(&p, wall, true);
	trc_profile_feed(&p, 42, &m, &top);
	trc_buf_init(&b);
	trc_profile_write(&p, &o, &b);
	*len = b.len;
	trc_buf_addc(&b, '\0');
	trc_profile_release(&p);
	return b.data;
}

static void
collapsed(void)
{
	size_t len;
	char *s;

	test_note("collapsed: the same stack of every thread one line, in CPU nanoseconds");
	s = written(false, TRC_FORMAT_COLLAPSED, false, &len);
	test_str("merged", s, "Foo#bar 40000000\nFoo#bar;Array#sort 80000000\n");
	free(s);
	test_note("collapsed by thread, by wall-clock time");
	s = written(true, TRC_FORMAT_COLLAPSED, true, &len);
	test_str("a process frame, then the thread's", s,
		 "ruby 42;main;Foo#bar 31000000\nruby 42;main;Foo#bar;Array#sort 90000000\nruby 42;worker;Foo#bar 12000000\n");
	free(s);
}

static const char *
string_of(const Perftools__Profiles__Profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

static void
pprof(void)
{
	Perftools__Profiles__Profile *p;
	size_t len;
	char *s = written(false, TRC_FORMAT_PPROF, false, &len);
	bool labels = false;

	test_note("pprof: the types pprof and Pyroscope expect, the period, thread and request labels");
	p = perftools__profiles__profile__unpack(NULL, len, (const uint8_t *)s);
	test_cond("unpacks", p != NULL);
	if (p != NULL) {
		test_cond("samples/count and cpu/nanoseconds", p->n_sample_type == 2 &&
			  strcmp(string_of(p, p->sample_type[0]->type), "samples") == 0 &&
			  strcmp(string_of(p, p->sample_type[0]->unit), "count") == 0 &&
			  strcmp(string_of(p, p->sample_type[1]->type), "cpu") == 0 &&
			  strcmp(string_of(p, p->sample_type[1]->unit), "nanoseconds") == 0);
		test_cond("period: 10 ms of CPU", p->period_type != NULL &&
			  strcmp(string_of(p, p->period_type->type), "cpu") == 0 && p->period == 10 * MS);
		test_cond("a sample per stack and thread", p->n_sample == 3);
		for (size_t i = 0; i < p->n_sample; i++)
			for (size_t k = 0; k < p->sample[i]->n_label; k++)
				labels |= strcmp(string_of(p, p->sample[i]->label[k]->key), "request") == 0 &&
					  strcmp(string_of(p, p->sample[i]->label[k]->str), "UsersController#index") == 0;
		test_cond("the worker's sample says its request", labels);
		perftools__profiles__profile__free_unpacked(p, NULL);
	}
	free(s);
}

static void
flamegraph(void)
{
	struct trc_profile p;
	struct trc_message m = interval(), top;
	struct trc_profile_write_opts o = { .format = TRC_FORMAT_FLAMEGRAPH };
	const char *app = "/app/";
	struct trc_flame_scope scope = { &app, 1 };
	struct trc_flame_opts fo = { TRC_FLAME_SVG, "t", NULL, 0 };
	struct trc_flame *f = trc_flame_new("ns");
	struct trc_output out;

	test_note("a flame graph: the run's stacks, frames coloured as what they are");
	trc_profile_init(&p, false, true);
	trc_profile_feed(&p, 42, &m, &top);
	trc_profile_flame(&p, &o, &scope, f);
	test_cond("every sample's time", trc_flame_total(f) == 120 * MS);
	trc_output_init(&out, -1, -1);
	trc_flame_write(f, &fo, &out);
	trc_buf_addc(&out.out, '\0');
	test_cond("Foo#bar the app's, Array#sort a C method",
		  strstr(out.out.data, "Foo#bar") != NULL && strstr(out.out.data, "Array#sort") != NULL &&
		  strstr(out.out.data, "data-k=\"0\"") != NULL && strstr(out.out.data, "data-k=\"3\"") != NULL);
	trc_output_release(&out);
	trc_flame_free(f);
	trc_profile_release(&p);
}

/* A chain of parents as deep as an agent may send, and one redefined into a loop. */
static void
hostile_trees(void)
{
	enum { DEEP = 200000 };
	struct trc_prof_node *chain = calloc(DEEP, sizeof(*chain));
	struct trc_prof_root root = { 1, 0, 0 };
	struct trc_prof_weight w = { DEEP, 1, 5 * MS, 5 * MS };
	struct trc_prof_node loop[] = { { 2, 1, 9 }, { 3, 2, 9 }, { 2, 3, 9 } };
	struct trc_prof_weight lw = { 3, 1, MS, MS };
	struct trc_message m = interval(), top;
	struct trc_profile p;

	test_note("a chain of %d parents: one stack, no recursion to overflow", DEEP);
	for (uint32_t i = 0; i < DEEP - 1; i++)
		chain[i] = (struct trc_prof_node){ i + 2, i + 1, 9 };
	m.profile.roots = &root;
	m.profile.nroots = 1;
	m.profile.nodes = chain;
	m.profile.nnodes = DEEP - 1;
	m.profile.weights = &w;
	m.profile.nweights = 1;
	trc_profile_init(&p, false, true);
	trc_profile_feed(&p, 42, &m, &top);
	test_cond("its sample in the tree", p.nnodes >= DEEP && p.tree_lost == 0);
	trc_profile_release(&p);
	free(chain);

	test_note("a node redefined under its own child: a loop, its sample lost, not followed forever");
	m.profile.nodes = loop;
	m.profile.nnodes = 3;
	m.profile.weights = &lw;
	trc_profile_init(&p, false, true);
	trc_profile_feed(&p, 42, &m, &top);
	test_cond("ends, its sample counted lost", p.tree_lost == 1);
	trc_profile_release(&p);
}

void
test_profile(void)
{
	hostile_trees();
	rows();
	collapsed();
	pprof();
	flamegraph();
}
