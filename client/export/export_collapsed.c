/* export_collapsed.c: --format collapsed: folded stacks "a;b;c weight" by self time, written at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "export_format.h"
#include "json.h"
#include "xmalloc.h"

/*
 * The paths are export_stacks.c's tree. At the end each node with any self time becomes one
 * line, weighted in nanoseconds (what was measured: a weight in microseconds dropped every
 * call under half of one), sorted, as flamegraph.pl and inferno expect:
 * "Outer#call;Inner#call 1234567". Two methods of one name (defined in two places) make two
 * nodes but one line: lines of the same text are summed.
 */

/*
 * ';' separates frames and a newline ends the line: a name is escaped (escape.h), which leaves
 * no newline nor any other control in it, and its ';' become ','.
 */
static void
put_label(struct trc_buf *b, const char *p, size_t n)
{
	size_t from = b->len;

	trc_escape(b, p, n);
	for (size_t i = from; i < b->len; i++)
		if (b->data[i] == ';')
			b->data[i] = ',';
}

/* "top;...;leaf" of node id, appended to b. */
static void
put_path(struct trc_export *e, struct trc_buf *b, uint32_t id)
{
	struct trc_xp_stacks *c = e->fs;
	uint32_t chain[64], n = 0;
	size_t len;
	const char *s;

	/* Deep stacks: write the part above the last 64 frames first. */
	for (uint32_t k = id; k != TRC_XP_NO_NODE; k = c->parent[k]) {
		if (n == sizeof(chain) / sizeof(chain[0])) {
			put_path(e, b, k);
			trc_buf_addc(b, ';');
			break;
		}
		chain[n++] = k;
	}
	while (n-- > 0) {
		s = trc_xp_stacks_label(e, c->label[chain[n]], &len);
		put_label(b, s, len);
		if (n > 0)
			trc_buf_addc(b, ';');
	}
}

struct line {
	const char *path;       /* NUL-terminated */
	uint64_t ns;
};

static int
cmp_lines(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->path, ((const struct line *)b)->path);
}

static void
end(struct trc_export *e)
{
	struct trc_xp_stacks *c = e->fs;
	struct trc_buf text;
	size_t *offs = xcalloc(c->n ? c->n : 1, sizeof(*offs)), nlines = 0;
	struct line *lines;

	/* Each path is written with a NUL, then the lines are sorted and the same ones summed. */
	trc_buf_init(&text);
	for (uint32_t id = 0; id < c->n; id++) {
		if (c->self_ns[id] == 0)
			continue;
		offs[nlines++] = text.len;
		put_path(e, &text, id);
		trc_buf_addc(&text, '\0');
	}
	lines = xcalloc(nlines ? nlines : 1, sizeof(*lines));
	for (size_t i = 0, k = 0; k < c->n; k++)
		if (c->self_ns[k] > 0) {
			lines[i] = (struct line){ text.data + offs[i], c->self_ns[k] };
			i++;
		}
	qsort(lines, nlines, sizeof(*lines), cmp_lines);
	for (size_t i = 0; i < nlines; i++) {
		uint64_t ns = lines[i].ns;

		while (i + 1 < nlines && strcmp(lines[i + 1].path, lines[i].path) == 0)
			ns += lines[++i].ns;
		trc_buf_adds(&e->line, lines[i].path);
		trc_buf_addc(&e->line, ' ');
		trc_json_uint(&e->line, ns);
		trc_buf_addc(&e->line, '\n');
		trc_xp_emit(e);
	}
	free(lines);
	free(offs);
	trc_buf_release(&text);
}

const struct trc_xp_format trc_xp_collapsed = {
	.begin = trc_xp_stacks_begin,
	.call = trc_xp_stacks_call,
	.ret = trc_xp_stacks_ret,
	.end = end,
	.free_thread = trc_xp_stacks_free_thread,
	.free = trc_xp_stacks_free,
};
