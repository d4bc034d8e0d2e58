/* stable.c: names made the same in every process (stable.h). */
#include "stable.h"

#include <string.h>

static int
is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* How many bytes from s[i] on are ":0x<hex digits>" closed by '>', or 0. */
static size_t
address_at(const char *s, size_t n, size_t i)
{
	size_t j = i + 3;

	if (i + 3 >= n || s[i] != ':' || s[i + 1] != '0' || s[i + 2] != 'x')
		return 0;
	while (j < n && is_hex(s[j]))
		j++;
	return j > i + 3 && j < n && s[j] == '>' ? j - i : 0;
}

/* Whether s[i] (a ':') ends "#<Word": an object's inspect, not a singleton's "#<Class:Foo>". */
static int
after_word(const char *s, size_t i)
{
	size_t j = i;

	while (j > 0 && ((s[j - 1] >= 'A' && s[j - 1] <= 'Z') || (s[j - 1] >= 'a' && s[j - 1] <= 'z') ||
	    is_digit(s[j - 1]) || s[j - 1] == '_' || s[j - 1] == ':'))
		j--;
	return j < i && j >= 2 && s[j - 2] == '#' && s[j - 1] == '<';
}

size_t
trc_stable_class(char *s, size_t n)
{
	size_t out = 0;

	for (size_t i = 0; i < n;) {
		size_t cut = s[i] == ':' && after_word(s, i) ? address_at(s, n, i) : 0;

		if (cut > 0) {
			i += cut;
			continue;
		}
		s[out++] = s[i++];
	}
	return out;
}

/* Digits ending at end (exclusive), going back: where they start, or end when there are none. */
static size_t
digits_before(const char *s, size_t end)
{
	while (end > 0 && is_digit(s[end - 1]))
		end--;
	return end;
}

size_t
trc_stable_method(char *s, size_t n)
{
	size_t id, hash, mark;

	/* "_<path>__<hash>_<id>": the hash may be negative, its '-' made '_' ("___<hash>_<id>"). */
	if (n < 7 || s[0] != '_')
		return n;
	id = digits_before(s, n);
	if (id == n || id == 0 || s[id - 1] != '_')
		return n;
	hash = digits_before(s, id - 1);
	if (hash == id - 1 || hash < 3 || s[hash - 1] != '_' || s[hash - 2] != '_')
		return n;
	mark = hash - 2;
	if (s[mark - 1] == '_')
		mark--;         /* a negative hash's sign */
	return mark > 1 ? mark : n;
}

size_t
trc_stable_label(char *s, size_t n)
{
	size_t sep;

	n = trc_stable_class(s, n);
	for (sep = n; sep > 0 && s[sep - 1] != '#' && s[sep - 1] != '.'; sep--)
		;
	return sep + trc_stable_method(s + sep, n - sep);
}
