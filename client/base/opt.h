/* opt.h: options as data: a table of entries parsed from argv, and the help lines it makes (git's parse-options.h). */
#ifndef TRC_OPT_H
#define TRC_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/*
 * One entry says an option's names, what its value is and where it goes: a field of the
 * caller's options struct, found by offset, so that one static table serves any instance of it.
 * The parser checks what it can (numbers, ranges, regexes, counts); an entry that needs more
 * (a value to look up, a file to read) has a callback, which may itself refuse the value.
 */
enum trc_opt_type {
	TRC_OPT_BOOL,           /* bool: set true */
	TRC_OPT_MODE,           /* no field: the entry's mode alone (below) */
	TRC_OPT_STRING,         /* const char *: the word (NULL when an optional value is absent) */
	TRC_OPT_LIST,           /* struct trc_opt_list: each value appended, at most max of them */
	TRC_OPT_UINT,           /* unsigned: a whole number from min to max; absent optional: dflt */
	TRC_OPT_SECS,           /* double: seconds, above min (0: any above 0), at most max */
	TRC_OPT_CALLBACK,       /* cb(opts, value) for each value, NULL for an absent optional one */
};

/* How many words an option takes after its name. */
enum trc_opt_arg {
	TRC_ARG_NONE,           /* -f */
	TRC_ARG_REQUIRED,       /* -e CODE, -eCODE, --eval=CODE */
	TRC_ARG_OPTIONAL,       /* -s, -s 100, --slow=100: the next word if it is no option */
	TRC_ARG_LIST,           /* -m A B C: one value, then each following word that is no option */
	TRC_ARG_REST,           /* -x CMD ARGS...: every word after it, options included */
};

/* Entry flags. */
enum {
	TRC_OPT_REGEX = 1 << 0,         /* STRING, LIST: must compile as a POSIX extended regex */
	TRC_OPT_NONEMPTY = 1 << 1,      /* STRING, LIST: "" is refused */
};

/* The most groups an entry may belong to (its group: 1..TRC_OPT_GROUPS-1; 0: none). */
#define TRC_OPT_GROUPS 8

struct trc_opt {
	const char *name;       /* long name, without "--" */
	char short_name;        /* 0: long only */
	enum trc_opt_type type;
	enum trc_opt_arg arg;
	size_t off;             /* the field it sets, an offset in the options struct */
	const char *metavar;    /* in the help: "FILE", "[MS]"; NULL with TRC_ARG_NONE */
	const char *help;       /* NULL: not in the help (a hint for another tool's spelling) */
	const char *what;       /* in errors: "invalid WHAT 'v'"; NULL: "--name" */
	double min, max;        /* UINT, SECS: the range; LIST: max values (0: no limit) */
	unsigned dflt;          /* UINT with an optional value: the value when none is given */
	unsigned flags;
	int mode;               /* nonzero: what the option makes the program do; two options of
				 * different modes exclude each other */
	int group;              /* nonzero: the parser remembers the last option given of each group,
				 * for rules such as "--rows goes with --top" */
	void (*cb)(void *opts, const char *value);
};

/* A LIST field: v[0..n) and a NULL after them (a command's argv, as -x needs). */
struct trc_opt_list {
	const char **v;
	size_t n;
};

/* What a parse found besides the fields it set. Entries point into the table. */
struct trc_opt_state {
	int mode;                                       /* 0: no option set one */
	const struct trc_opt *mode_by;                  /* the option that set it */
	const struct trc_opt *group_by[TRC_OPT_GROUPS]; /* the last option given of each group */
	const struct trc_opt *rest_by;                  /* the TRC_ARG_REST option, if given */
	const char *rest_option;                        /* the first word after it that is an
							 * option of the table (an argv word; it
							 * went to the rest all the same) */
	char error[512];                                /* why trc_opt_parse() returned -1 */
};

/*
 * The field's offset, if it has type type: anything else does not compile. For the entries'
 * initializers: TRC_OPT_FIELD(struct opts, rows, unsigned).
 */
#define TRC_OPT_FIELD(st, field, type) _Generic(((st *)0)->field, type: offsetof(st, field))

/*
 * Parses argv[1..argc) into opts by table[0..n): every word must be an option of the table or
 * a value of one. Returns 0, or -1 with a message for the user in st->error (a usage error);
 * callbacks may end the program themselves. Pure but for the callbacks.
 */
int trc_opt_parse(const struct trc_opt *table, size_t n, int argc, char **argv, void *opts,
		  struct trc_opt_state *st);

/* Prints the help line of each entry with help, "  -s, --long METAVAR" then the help from
 * column on. */
void trc_opt_help(FILE *f, const struct trc_opt *table, size_t n, int column);

/* Frees a LIST field's array (not the strings, which are argv's). */
void trc_opt_list_release(struct trc_opt_list *l);

#endif
