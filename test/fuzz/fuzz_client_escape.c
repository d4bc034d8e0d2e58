/* fuzz_client_escape.c: libFuzzer target for escape.c, the one way target bytes reach a terminal. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "utf8.h"

/*
 * Whatever the input, the output must be valid UTF-8 with no C0 or C1 control and no DEL
 * (nothing a terminal acts on), no longer than 4 bytes per input byte; input that is already
 * safe must come out unchanged; and the line-keeping variant may add no line of its own.
 */

static void
check(int ok)
{
	if (!ok)
		__builtin_trap();
}

/* Valid UTF-8 without controls: what a terminal only prints. */
static int
is_safe(const unsigned char *s, size_t n, int lines)
{
	size_t i = 0, len, bad;

	while (i < n) {
		if (s[i] < 0x80) {
			if ((s[i] < 0x20 && !(lines && s[i] == '\n')) || s[i] == 0x7f)
				return 0;
			i++;
			continue;
		}
		len = trc_utf8_seq(s + i, n - i, &bad);
		if (len == 0 || trc_utf8_is_c1(s + i, len))
			return 0;
		i += len;
	}
	return 1;
}

static size_t
count_lf(const uint8_t *p, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += p[i] == '\n';
	return k;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trc_buf b;
	char *lines;

	trc_buf_init(&b);
	trc_escape(&b, (const char *)data, size);
	check(b.len <= 4 * size);
	check(is_safe((const unsigned char *)b.data, b.len, 0));
	if (is_safe(data, size, 0))
		check(b.len == size && (size == 0 || memcmp(b.data, data, size) == 0));
	trc_buf_release(&b);

	lines = trc_escape_lines_dup((const char *)data, size);
	check(is_safe((const unsigned char *)lines, strlen(lines), 1));
	check(count_lf((const uint8_t *)lines, strlen(lines)) == count_lf(data, size));
	free(lines);
	return 0;
}
