/* test_opt.c: the option parser: values by type, ranges, modes, groups, and its errors. */
#include <stdbool.h>
#include <stdlib.h>

#include "opt.h"
#include "test.h"

struct o {
	bool flag;
	const char *name;
	struct trc_opt_list list, rest;
	unsigned n;
	double secs;
	int calls;
	const char *last;
};

static void
count(void *opts, const char *v)
{
	struct o *o = opts;

	o->calls++;
	o->last = v;
}

#define F(f, type) TRC_OPT_FIELD(struct o, f, type)

static const struct trc_opt table[] = {
	{ .name = "flag", .short_name = 'f', .type = TRC_OPT_BOOL, .off = F(flag, bool),
	  .mode = 1, .group = 2, .help = "a flag" },
	{ .name = "name", .short_name = 'n', .type = TRC_OPT_STRING, .arg = TRC_ARG_OPTIONAL,
	  .off = F(name, const char *), .metavar = "[NAME]", .help = "a name" },
	{ .name = "list", .short_name = 'l', .type = TRC_OPT_LIST, .arg = TRC_ARG_LIST,
	  .off = F(list, struct trc_opt_list), .max = 3, .flags = TRC_OPT_REGEX, .group = 2 },
	{ .name = "num", .type = TRC_OPT_UINT, .arg = TRC_ARG_OPTIONAL, .off = F(n, unsigned),
	  .min = 2, .max = 10, .dflt = 7, .what = "--num count", .mode = 1 },
	{ .name = "secs", .type = TRC_OPT_SECS, .arg = TRC_ARG_REQUIRED, .off = F(secs, double),
	  .min = 0.5, .max = 60 },
	{ .name = "call", .short_name = 'c', .type = TRC_OPT_CALLBACK, .arg = TRC_ARG_REQUIRED,
	  .cb = count, .mode = 2 },
	{ .name = "exec", .short_name = 'x', .type = TRC_OPT_LIST, .arg = TRC_ARG_REST,
	  .off = F(rest, struct trc_opt_list) },
};
#define N (sizeof(table) / sizeof(table[0]))

static void
release(struct o *o)
{
	trc_opt_list_release(&o->list);
	trc_opt_list_release(&o->rest);
}

/* Parses the words (after a program name) into *o, emptied first; returns trc_opt_parse's
 * result. */
static int
parse(struct o *o, struct trc_opt_state *st, int argc, const char **words)
{
	const char *argv[16] = { "prog" };

	for (int i = 0; i < argc; i++)
		argv[i + 1] = words[i];
	release(o);
	*o = (struct o){ 0 };
	return trc_opt_parse(table, N, argc + 1, (char **)argv, o, st);
}

#define PARSE(...) parse(&o, &st, (int)(sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(char *)), \
			 (const char *[]){ __VA_ARGS__ })

static void
test_values(void)
{
	struct o o = { 0 };
	struct trc_opt_state st;

	test_cond("flags and values", PARSE("-f", "--name=x", "-l", "a", "b", "--num", "3",
					     "--secs", "1.5") == 0);
	test_cond("bool set", o.flag);
	test_str("string glued after =", o.name, "x");
	test_cond("list takes every word up to an option", o.list.n == 2 &&
		  strcmp(o.list.v[1], "b") == 0 && o.list.v[2] == NULL);
	test_cond("uint", o.n == 3);
	test_cond("secs", o.secs == 1.5);
	test_cond("the mode and the last option of it", st.mode == 1 && st.mode_by == &table[3]);
	test_cond("the last option of a group", st.group_by[2] == &table[2]);
	release(&o);

	test_cond("optional values left out", PARSE("-n", "--num", "-f") == 0);
	test_cond("an optional string left out is NULL", o.name == NULL);
	test_cond("an optional number left out takes its default", o.n == 7);
	test_cond("short options glued", PARSE("-fnNAME") == 0 && o.flag && strcmp(o.name, "NAME") == 0);
	test_cond("a callback per value", PARSE("-c", "v", "--call=w") == 0 && o.calls == 2 &&
		  strcmp(o.last, "w") == 0);
}

static void
test_errors(void)
{
	struct o o = { 0 };
	struct trc_opt_state st;

	test_cond("out of range", PARSE("--num", "11") < 0);
	test_str("its message names the value", st.error,
		 "invalid --num count '11': expected a whole number from 2 to 10");
	test_cond("a sign is no number", PARSE("--num=-3") < 0);
	test_cond("seconds out of range", PARSE("--secs", "0.1") < 0);
	test_str("seconds message", st.error, "invalid --secs '0.1': expected 0.5 to 60 seconds");
	test_cond("seconds not positive", PARSE("--secs", "0") < 0);
	test_str("not positive message", st.error,
		 "invalid --secs '0': expected a number of seconds above 0");
	test_cond("two modes", PARSE("-f", "-c", "x") < 0);
	test_str("two modes message", st.error, "--flag and --call exclude each other: one thing at a time");
	test_cond("same mode twice is fine", PARSE("-f", "--num", "3") == 0);
	test_cond("unknown long", PARSE("--nope") < 0);
	test_str("unknown long message", st.error, "unknown option '--nope'");
	test_cond("unknown short", PARSE("-fz") < 0);
	test_str("unknown short message", st.error, "unknown option '-z'");
	test_cond("a value where none goes", PARSE("--flag=1") < 0);
	test_str("no value message", st.error, "option '--flag' takes no value");
	test_cond("a missing value", PARSE("--secs") < 0);
	test_str("missing value message", st.error, "option '--secs' needs a value");
	test_cond("a stray word", PARSE("-f", "word") < 0);
	test_str("stray word message", st.error, "unexpected argument 'word'");
	test_cond("a bad regex", PARSE("-l", "(") < 0);
	test_cond("regex message", strncmp(st.error, "invalid --list regex '(': ", 26) == 0);
	release(&o);
	test_cond("too many", PARSE("-l", "a", "b", "c", "d") < 0);
	test_str("too many message", st.error, "--list: at most 3 may be given");
	release(&o);
}

static void
test_rest(void)
{
	struct o o = { 0 };
	struct trc_opt_state st;

	test_cond("a command without words", PARSE("-x") < 0);
	test_str("its message", st.error, "option '-x' needs a command");
	test_cond("everything after -x", PARSE("-f", "-x", "ruby", "app.rb", "-f", "--num=3") == 0);
	test_cond("the command and its words", o.rest.n == 4 && strcmp(o.rest.v[0], "ruby") == 0 &&
		  strcmp(o.rest.v[3], "--num=3") == 0 && o.rest.v[4] == NULL);
	test_cond("-x's own option", st.rest_by == &table[6]);
	test_str("the first of ours after it", st.rest_option, "-f");
	test_cond("nothing of ours after it", PARSE("-x", "ruby", "-w", "--x-y") == 0 &&
		  st.rest_option == NULL);
	release(&o);
}

void
test_opt(void)
{
	test_values();
	test_errors();
	test_rest();
}
