/* test_pprof.c: pprof profiles as protobuf-c reads them back: ids, strings made valid, labels. */
#include <stdlib.h>

#include "pprof.h"
#include "pprof/profile.pb-c.h"
#include "test.h"

static const struct trc_pprof_type types[] = { { "calls", "count" }, { "wall", "nanoseconds" } };

static Perftools__Profiles__Profile *
unpack(struct trc_pprof *p, struct trc_buf *b)
{
	b->len = 0;
	trc_pprof_write(p, b);
	return perftools__profiles__profile__unpack(NULL, b->len, (const uint8_t *)b->data);
}

static void
test_tables(void)
{
	struct trc_pprof *p = trc_pprof_new(types, 2);
	struct trc_buf b;
	uint64_t a, c, locs[2];
	int64_t values[2] = { 3, 1500 };
	struct trc_pprof_label labels[] = { { .key = "thread", .str = "main", .str_len = 4 },
					    { .key = "pid", .num = 42 } };
	Perftools__Profiles__Profile *pr;

	test_note("locations, functions, samples and the string table");
	trc_buf_init(&b);
	a = trc_pprof_location(p, "A#a", 3, "a.rb", 4, 7);
	c = trc_pprof_location(p, "B.b", 3, "b.rb", 4, 9);
	test_cond("ids from 1", a == 1 && c == 2);
	test_cond("the same location again", trc_pprof_location(p, "A#a", 3, "a.rb", 4, 7) == a);
	test_cond("another line is another", trc_pprof_location(p, "A#a", 3, "a.rb", 4, 8) == 3);
	locs[0] = c;
	locs[1] = a;
	trc_pprof_sample(p, locs, 2, values, labels, 2);
	trc_pprof_duration(p, 5);
	trc_pprof_comment(p, "tracer test");
	pr = unpack(p, &b);
	test_cond("unpacks", pr != NULL);
	if (pr == NULL)
		goto out;
	test_str("string 0 is empty", pr->string_table[0], "");
	test_cond("two types", pr->n_sample_type == 2);
	test_str("calls", pr->string_table[pr->sample_type[0]->type], "calls");
	test_str("ns", pr->string_table[pr->sample_type[1]->unit], "nanoseconds");
	test_str("wall by default", pr->string_table[pr->default_sample_type], "wall");
	test_cond("one sample, leaf first", pr->n_sample == 1 && pr->sample[0]->n_location_id == 2 &&
		  pr->sample[0]->location_id[0] == c && pr->sample[0]->location_id[1] == a);
	test_cond("its values", pr->sample[0]->n_value == 2 && pr->sample[0]->value[0] == 3 &&
		  pr->sample[0]->value[1] == 1500);
	test_cond("labels", pr->sample[0]->n_label == 2 &&
		  strcmp(pr->string_table[pr->sample[0]->label[0]->str], "main") == 0 &&
		  pr->sample[0]->label[1]->num == 42);
	test_cond("three locations and functions", pr->n_location == 3 && pr->n_function == 3);
	test_cond("location 2 is B.b at b.rb:9", pr->location[1]->id == 2 &&
		  pr->location[1]->line[0]->line == 9 &&
		  pr->function[pr->location[1]->line[0]->function_id - 1]->start_line == 9);
	test_str("its name", pr->string_table[pr->function[1]->name], "B.b");
	test_str("its file", pr->string_table[pr->function[1]->filename], "b.rb");
	test_cond("duration", pr->duration_nanos == 5);
	test_cond("comment", pr->n_comment == 1 &&
		  strcmp(pr->string_table[pr->comment[0]], "tracer test") == 0);
	perftools__profiles__profile__free_unpacked(pr, NULL);
out:
	trc_buf_release(&b);
	trc_pprof_free(p);
}

/* What a hostile target names things: the string table must stay valid UTF-8, inert, distinct. */
static void
test_strings(void)
{
	struct trc_pprof *p = trc_pprof_new(types, 1);
	struct trc_buf b;
	static const char bad[] = "A\xff\xc3(\0z\xe2\x82\xac\x1b]0;t\a\\";  /* 0xff, a cut C3, NUL, €, OSC, \ */
	static const char replaced[] = "A\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbdz";
	int64_t one = 1;
	uint64_t locs[2];
	Perftools__Profiles__Profile *pr;

	test_note("names as escape.h's EXACT text: valid UTF-8, inert, two names two functions");
	trc_buf_init(&b);
	locs[0] = trc_pprof_location(p, bad, sizeof(bad) - 1, "", 0, 0);
	locs[1] = trc_pprof_location(p, replaced, sizeof(replaced) - 1, "", 0, 0);
	trc_pprof_sample(p, locs, 2, &one, NULL, 0);
	pr = unpack(p, &b);
	test_cond("unpacks (protobuf-c checks UTF-8 too)", pr != NULL);
	if (pr != NULL) {
		test_str("bad bytes, NUL, escapes and backslash as escapes",
			 pr->string_table[pr->function[0]->name],
			 "A\\xff\\xc3(\\x00z\xe2\x82\xac\\e]0;t\\a\\\\");
		test_str("U+FFFD, which they once became, a name of its own",
			 pr->string_table[pr->function[1]->name], replaced);
		perftools__profiles__profile__free_unpacked(pr, NULL);
	}
	trc_buf_release(&b);
	trc_pprof_free(p);
}

void
test_pprof(void)
{
	test_tables();
	test_strings();
}
