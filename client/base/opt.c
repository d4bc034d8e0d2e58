/* opt.c: the option parser: words to entries, values checked and stored by type, help lines. */
#include "opt.h"

#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

#define SECS_MAX 1e7            /* SECS without a max: some 4 months */

struct parse {
	const struct trc_opt *table;
	size_t n;
	int argc;
	char **argv;
	char *opts;
	struct trc_opt_state *st;
};

static int __attribute__((format(printf, 2, 3)))
fail(struct parse *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->st->error, sizeof(p->st->error), fmt, ap);
	va_end(ap);
	return -1;
}

/* "--name", or the entry's own word for its values in errors. */
static const char *
what(const struct trc_opt *d, char *buf, size_t size)
{
	if (d->what != NULL)
		return d->what;
	snprintf(buf, size, "--%s", d->name);
	return buf;
}

static void *
field(struct parse *p, const struct trc_opt *d)
{
	return p->opts + d->off;
}

static int
set_uint(struct parse *p, const struct trc_opt *d, const char *v)
{
	char name[48], *end;
	unsigned long n;

	if (v == NULL) {
		*(unsigned *)field(p, d) = d->dflt;
		return 0;
	}
	errno = 0;
	n = strtoul(v, &end, 10);
	if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || (double)n < d->min ||
	    (double)n > d->max)
		return fail(p, "invalid %s '%s': expected a whole number from %.0f to %.0f",
			    what(d, name, sizeof(name)), v, d->min, d->max);
	*(unsigned *)field(p, d) = (unsigned)n;
	return 0;
}

static int
set_secs(struct parse *p, const struct trc_opt *d, const char *v)
{
	char name[48], *end;
	double s, max = d->max > 0 ? d->max : SECS_MAX;

	if (v == NULL)          /* an entry with an optional value must say its default */
		return fail(p, "option '--%s' needs a value", d->name);
	errno = 0;
	s = strtod(v, &end);
	if (*v == '\0' || *end != '\0' || errno != 0 || !isfinite(s) || s <= 0 || s > SECS_MAX)
		return fail(p, "invalid %s '%s': expected a number of seconds above 0",
			    what(d, name, sizeof(name)), v);
	if (s < d->min || s > max)
		return fail(p, "invalid %s '%s': expected %g to %g seconds", what(d, name, sizeof(name)),
			    v, d->min, max);
	*(double *)field(p, d) = s;
	return 0;
}

static int
check_regex(struct parse *p, const struct trc_opt *d, const char *v)
{
	char name[48], why[128];
	regex_t re;
	int rc;

	if (!(d->flags & TRC_OPT_REGEX))
		return 0;
	rc = regcomp(&re, v, REG_EXTENDED | REG_NOSUB);
	if (rc == 0) {
		regfree(&re);
		return 0;
	}
	regerror(rc, &re, why, sizeof(why));
	regfree(&re);
	return fail(p, "invalid %s regex '%s': %s", what(d, name, sizeof(name)), v, why);
}

static int
add_to_list(struct parse *p, const struct trc_opt *d, const char *v)
{
	struct trc_opt_list *l = field(p, d);
	char name[48];

	if (v == NULL)          /* as for seconds: a list has no default */
		return fail(p, "option '--%s' needs a value", d->name);
	if (d->max > 0 && (double)l->n >= d->max)
		return fail(p, "%s: at most %.0f may be given", what(d, name, sizeof(name)), d->max);
	l->v = xreallocarray(l->v, l->n + 2, sizeof(*l->v));
	l->v[l->n++] = v;
	l->v[l->n] = NULL;
	return 0;
}

/* Stores one value (NULL: an optional one left out) as the entry's type says. */
static int
set_value(struct parse *p, const struct trc_opt *d, const char *v)
{
	if (v != NULL && check_regex(p, d, v) < 0)
		return -1;
	switch (d->type) {
	case TRC_OPT_BOOL:
		*(bool *)field(p, d) = true;
		return 0;
	case TRC_OPT_MODE:
		return 0;
	case TRC_OPT_STRING:
		*(const char **)field(p, d) = v;
		return 0;
	case TRC_OPT_LIST:
		return add_to_list(p, d, v);
	case TRC_OPT_UINT:
		return set_uint(p, d, v);
	case TRC_OPT_SECS:
		return set_secs(p, d, v);
	case TRC_OPT_CALLBACK:
		d->cb(p->opts, v);
		return 0;
	}
	return 0;
}

/* The mode and group the entry stands for: one mode per run. */
static int
note_entry(struct parse *p, const struct trc_opt *d)
{
	struct trc_opt_state *st = p->st;

	if (d->group > 0 && d->group < TRC_OPT_GROUPS)
		st->group_by[d->group] = d;
	if (d->mode == 0)
		return 0;
	if (st->mode != 0 && st->mode != d->mode)
		return fail(p, "--%s and --%s exclude each other: one thing at a time", st->mode_by->name,
			    d->name);
	st->mode = d->mode;
	st->mode_by = d;
	return 0;
}

static bool
is_option(const char *s)
{
	return s[0] == '-' && s[1] != '\0';
}

static const struct trc_opt *
find_long(const struct parse *p, const char *name, size_t len)
{
	for (size_t k = 0; k < p->n; k++)
		if (strlen(p->table[k].name) == len && strncmp(p->table[k].name, name, len) == 0)
			return &p->table[k];
	return NULL;
}

static const struct trc_opt *
find_short(const struct parse *p, char c)
{
	for (size_t k = 0; k < p->n; k++)
		if (p->table[k].short_name == c)
			return &p->table[k];
	return NULL;
}

/* Whether word would name an option of the table (for the words a REST option takes). */
static bool
names_option(const struct parse *p, const char *word)
{
	const char *eq;

	if (!is_option(word) || strcmp(word, "--") == 0)
		return false;
	if (word[1] != '-')
		return find_short(p, word[1]) != NULL;
	eq = strchr(word + 2, '=');
	return find_long(p, word + 2, eq ? (size_t)(eq - word - 2) : strlen(word + 2)) != NULL;
}

/* Every word after a REST option is its value; one that looks like ours is remembered. */
static int
take_rest(struct parse *p, const struct trc_opt *d, int *i)
{
	p->st->rest_by = d;
	while (*i + 1 < p->argc) {
		const char *w = p->argv[++*i];

		if (p->st->rest_option == NULL && names_option(p, w))
			p->st->rest_option = w;
		if (set_value(p, d, w) < 0)
			return -1;
	}
	return 0;
}

/* The value written into the option's own word (--x=V, -xV), or NULL; takes the next words
 * as the entry's arg says. */
static int
apply(struct parse *p, const struct trc_opt *d, const char *spelled, const char *glued, int *i)
{
	const char *v = glued;

	if (note_entry(p, d) < 0)
		return -1;
	if (d->arg == TRC_ARG_NONE && v != NULL)
		return fail(p, "option '%s' takes no value", spelled);
	if (d->arg == TRC_ARG_OPTIONAL && v == NULL && *i + 1 < p->argc && !is_option(p->argv[*i + 1]))
		v = p->argv[++*i];
	if (d->arg == TRC_ARG_REST && v == NULL && *i + 1 >= p->argc)
		return fail(p, "option '%s' needs a command", spelled);
	if ((d->arg == TRC_ARG_REQUIRED || d->arg == TRC_ARG_LIST || d->arg == TRC_ARG_REST) &&
	    v == NULL) {
		if (*i + 1 >= p->argc)
			return fail(p, "option '%s' needs a value", spelled);
		v = p->argv[++*i];
	}
	if (set_value(p, d, v) < 0)
		return -1;
	while (d->arg == TRC_ARG_LIST && *i + 1 < p->argc && !is_option(p->argv[*i + 1]))
		if (set_value(p, d, p->argv[++*i]) < 0)
			return -1;
	return d->arg == TRC_ARG_REST ? take_rest(p, d, i) : 0;
}

static int
parse_long(struct parse *p, int *i)
{
	const char *name = p->argv[*i] + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct trc_opt *d = find_long(p, name, len);
	char spelled[48];

	if (d == NULL)
		return fail(p, "unknown option '--%.*s'", (int)len, name);
	snprintf(spelled, sizeof(spelled), "--%s", d->name);
	return apply(p, d, spelled, eq ? eq + 1 : NULL, i);
}

/* "-tn", "-p123", "-s": letters until one that takes a value, which gets the rest. */
static int
parse_short(struct parse *p, int *i)
{
	const char *word = p->argv[*i];

	for (size_t k = 1; word[k] != '\0'; k++) {
		const struct trc_opt *d = find_short(p, word[k]);
		char spelled[3] = { '-', word[k], '\0' };

		if (d == NULL)
			return fail(p, "unknown option '-%c'", word[k]);
		if (d->arg != TRC_ARG_NONE)
			return apply(p, d, spelled, word[k + 1] ? word + k + 1 : NULL, i);
		if (apply(p, d, spelled, NULL, i) < 0)
			return -1;
	}
	return 0;
}

int
trc_opt_parse(const struct trc_opt *table, size_t n, int argc, char **argv, void *opts,
	      struct trc_opt_state *st)
{
	struct parse p = { table, n, argc, argv, opts, st };

	memset(st, 0, sizeof(*st));
	for (int i = 1; i < argc; i++) {
		int rc;

		if (!is_option(argv[i]) || strcmp(argv[i], "--") == 0)
			return fail(&p, "unexpected argument '%s'", argv[i]);
		rc = argv[i][1] == '-' ? parse_long(&p, &i) : parse_short(&p, &i);
		if (rc < 0)
			return -1;
	}
	return 0;
}

void
trc_opt_help(FILE *f, const struct trc_opt *table, size_t n, int column)
{
	for (size_t i = 0; i < n; i++) {
		const struct trc_opt *d = &table[i];
		char left[64];
		int len;

		if (d->help == NULL)
			continue;
		if (d->short_name)
			len = snprintf(left, sizeof(left), "  -%c, --%s", d->short_name, d->name);
		else
			len = snprintf(left, sizeof(left), "      --%s", d->name);
		if (d->metavar && len > 0 && (size_t)len < sizeof(left))
			snprintf(left + len, sizeof(left) - (size_t)len, " %s", d->metavar);
		fprintf(f, "%-*s%s\n", column, left, d->help);
	}
}

void
trc_opt_list_release(struct trc_opt_list *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
}
