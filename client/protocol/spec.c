/* spec.c: the -m spec grammar: constant path, separator, method name, expression list. */
#include "spec.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

#define MAX_NESTING 64

/* Operator methods, which are not identifiers. */
static const char *const operators[] = {
	"[]", "[]=", "+", "-", "*", "/", "%", "**", "==", "===", "!=", "<=>", "<", "<=", ">",
	">=", "<<", ">>", "!", "~", "+@", "-@", "=~", "!~", "&", "|", "^", "`",
};

static bool
is_ident_start(unsigned char c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

static bool
is_ident_char(unsigned char c)
{
	return is_ident_start(c) || (c >= '0' && c <= '9');
}

static bool
is_operator(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof(operators) / sizeof(operators[0]); i++)
		if (strlen(operators[i]) == len && memcmp(operators[i], s, len) == 0)
			return true;
	return false;
}

/* An identifier, optionally ending in ? ! or =, or an operator. */
static bool
valid_method(const char *s, size_t len)
{
	size_t i = 0;

	if (len == 0)
		return false;
	if (!is_ident_start((unsigned char)s[0]))
		return is_operator(s, len);
	while (i < len && is_ident_char((unsigned char)s[i]))
		i++;
	if (i + 1 == len && strchr("?!=", s[i]) != NULL)
		i++;
	return i == len;
}

/*
 * A name only define_method makes, like Sinatra's "GET /price/:name": it has a space, neither
 * starts nor ends with one, and holds no control character.
 */
static bool
free_form_method(const char *s, size_t len)
{
	if (len == 0 || s[0] == ' ' || s[len - 1] == ' ' || memchr(s, ' ', len) == NULL)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

/* Const(::Const)* where Const is an ASCII capital followed by identifier characters. */
static bool
valid_constant_path(const char *s, size_t len)
{
	size_t i = 0;

	for (;;) {
		if (i >= len || s[i] < 'A' || s[i] > 'Z')
			return false;
		while (i < len && is_ident_char((unsigned char)s[i]))
			i++;
		if (i == len)
			return true;
		if (len - i < 2 || s[i] != ':' || s[i + 1] != ':')
			return false;
		i += 2;
	}
}

static void
add_expr(struct trc_spec *s, const char *p, size_t len)
{
	s->exprs = xreallocarray(s->exprs, s->nexprs + 1, sizeof(*s->exprs));
	s->exprs[s->nexprs++] = xstrndup(p, len);
}

/* Adds p[0..len) trimmed of spaces; fails if nothing is left. */
static int
add_trimmed(struct trc_spec *s, const char *p, size_t len, const char **reason)
{
	while (len > 0 && (*p == ' ' || *p == '\t'))
		p++, len--;
	while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	if (len == 0) {
		*reason = "empty expression";
		return -1;
	}
	if (s->nexprs == TRC_MAX_EXPRS) {
		*reason = "too many expressions (the protocol takes 16)";
		return -1;
	}
	add_expr(s, p, len);
	return 0;
}

/* Where a quoted string that opens at p ends (at its closing quote), or NULL. */
static const char *
skip_quoted(const char *p)
{
	char q = *p++;

	for (; *p != '\0'; p++) {
		if (*p == '\\' && p[1] != '\0')
			p++;
		else if (*p == q)
			return p;
	}
	return NULL;
}

/* Nested brackets: the closer each opener expects, innermost last. */
struct nesting {
	char want[MAX_NESTING];
	int depth;
};

/* Tracks one bracket character; returns -1 and a reason on a mismatch. */
static int
track_bracket(struct nesting *n, char c, const char **reason)
{
	const char *open = "([{", *close = ")]}";
	const char *o = strchr(open, c);

	if (o != NULL) {
		if (n->depth == MAX_NESTING) {
			*reason = "expressions nested too deeply";
			return -1;
		}
		n->want[n->depth++] = close[o - open];
	} else if (n->depth == 0 || n->want[--n->depth] != c) {
		*reason = "unbalanced brackets in expressions";
		return -1;
	}
	return 0;
}

/*
 * p is the '(' after the method part. Splits on top-level commas up to the matching ')',
 * which must end the spec. "()" means no expressions.
 */
static int
parse_exprs(struct trc_spec *s, const char *p, const char **reason)
{
	struct nesting n = { .depth = 0 };
	const char *item = ++p;

	for (; *p != '\0'; p++) {
		if (*p == '"' || *p == '\'' || *p == '`') {
			if ((p = skip_quoted(p)) == NULL)
				break;
		} else if (*p == ')' && n.depth == 0) {
			if (p[1] != '\0') {
				*reason = "text after the closing parenthesis";
				return -1;
			}
			if (s->nexprs == 0 && strspn(item, " \t") == (size_t)(p - item))
				return 0;
			return add_trimmed(s, item, (size_t)(p - item), reason);
		} else if (*p == ',' && n.depth == 0) {
			if (add_trimmed(s, item, (size_t)(p - item), reason) < 0)
				return -1;
			item = p + 1;
		} else if (strchr("([{)]}", *p) != NULL) {
			if (track_bracket(&n, *p, reason) < 0)
				return -1;
		}
	}
	*reason = p == NULL ? "unterminated string in expressions" : "unbalanced parentheses";
	return -1;
}

/* head is "Class#meth", "Class.meth", "Class#", "meth": everything before the '('. */
static int
parse_head(struct trc_spec *s, const char *head, size_t len, const char **reason)
{
	size_t sep = strcspn(head, "#.");
	const char *m;
	size_t mlen;

	if (sep >= len) {
		s->kind = TRC_SPEC_ANY;
		if (!valid_method(head, len) && !free_form_method(head, len)) {
			*reason = len == 0 ? "missing method name" : "invalid method name";
			return -1;
		}
		s->method = xstrndup(head, len);
		return 0;
	}
	s->kind = head[sep] == '#' ? TRC_SPEC_INSTANCE : TRC_SPEC_SINGLETON;
	if (sep == 0) {
		*reason = head[sep] == '#' ? "missing class before '#'" : "missing class before '.'";
		return -1;
	}
	if (!valid_constant_path(head, sep)) {
		*reason = "class is not a constant path (like Foo or Foo::Bar)";
		return -1;
	}
	m = head + sep + 1;
	mlen = len - sep - 1;
	if (mlen > 0 && !valid_method(m, mlen) && !free_form_method(m, mlen)) {
		*reason = "invalid method name";
		return -1;
	}
	s->cls = xstrndup(head, sep);
	s->method = mlen > 0 ? xstrndup(m, mlen) : NULL;
	return 0;
}

/*
 * Where the expression list begins, or NULL. After an identifier or operator ("Foo#bar(",
 * "(self)"), the first '(' begins it, whatever follows. A name of define_method's may hold
 * parentheses itself: then it is the first '(' that opens a list reaching the end of text.
 */
static const char *
find_exprs(const char *text)
{
	const char *p = text + strcspn(text, "#."), *first;

	p = *p == '\0' ? text : p + 1;
	if ((first = strchr(p, '(')) == NULL)
		return NULL;
	if (first == p || valid_method(p, (size_t)(first - p)))
		return first;
	for (const char *q = first; q != NULL; q = strchr(q + 1, '(')) {
		struct trc_spec scratch;
		const char *why;
		int ok;

		memset(&scratch, 0, sizeof(scratch));
		ok = parse_exprs(&scratch, q, &why) == 0;
		trc_spec_release(&scratch);
		if (ok)
			return q;
	}
	return NULL;
}

int
trc_spec_parse(struct trc_spec *s, const char *text, const char **reason)
{
	const char *paren = find_exprs(text);
	size_t head_len = paren ? (size_t)(paren - text) : strlen(text);

	memset(s, 0, sizeof(*s));
	if (*text == '\0') {
		*reason = "empty spec";
		return -1;
	}
	if (parse_head(s, text, head_len, reason) < 0 ||
	    (paren != NULL && parse_exprs(s, paren, reason) < 0)) {
		trc_spec_release(s);
		return -1;
	}
	s->text = xstrdup(text);
	return 0;
}

void
trc_spec_release(struct trc_spec *s)
{
	for (size_t i = 0; i < s->nexprs; i++)
		free(s->exprs[i]);
	free(s->exprs);
	free(s->text);
	free(s->cls);
	free(s->method);
	memset(s, 0, sizeof(*s));
}

static bool
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

bool
trc_spec_next_line(const char *text, size_t len, size_t *pos, unsigned *line,
		   const char **start, size_t *n)
{
	while (*pos < len) {
		const char *p = text + *pos, *nl = memchr(p, '\n', len - *pos);
		const char *end = nl != NULL ? nl : text + len;

		*pos = (size_t)(end - text) + (nl != NULL);
		++*line;
		while (p < end && is_blank(*p))
			p++;
		while (end > p && is_blank(end[-1]))
			end--;
		if (p == end || *p == '#')
			continue;
		*start = p;
		*n = (size_t)(end - p);
		return true;
	}
	return false;
}

/* The VM's basic operations by class (tracer_protocol.h, which the agent reads too). */
static const struct {
	const char *cls;
	const char *ops;        /* space-separated, with a space at each end */
} basic_ops[] = {
#define TRC_OP(cls, list) { cls, list },
	TRC_BASIC_OPS(TRC_OP)
#undef TRC_OP
};

static bool
has_op(const char *ops, const char *method)
{
	size_t n = strlen(method);

	for (const char *p = ops; (p = strstr(p, method)) != NULL; p++)
		if (p[-1] == ' ' && p[n] == ' ')
			return true;
	return false;
}

bool
trc_spec_basic_op(const struct trc_spec *sp)
{
	if (sp->kind == TRC_SPEC_SINGLETON || (sp->method != NULL && strchr(sp->method, ' ') != NULL))
		return false;
	for (size_t i = 0; i < sizeof(basic_ops) / sizeof(basic_ops[0]); i++) {
		if (sp->cls != NULL && strcmp(sp->cls, basic_ops[i].cls) != 0)
			continue;
		if (sp->method == NULL || has_op(basic_ops[i].ops, sp->method))
			return true;
	}
	return false;
}
