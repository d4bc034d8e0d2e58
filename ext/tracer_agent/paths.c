/* paths.c: --top time's call paths, counted in a table mapped at start, packed with each TRC_MSG_TOP. */
#include "paths.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "clock.h"
#include "encode.h"
#include "names.h"
#include "tracer_protocol.h"

#define SLOTS ((size_t)2 * TRC_TOP_MAX_PATHS)   /* a power of two, at most half full */

struct node {
	uint32_t parent, method;
	uint64_t count, ticks;          /* since the last pack */
	uint8_t touched;                /* in touched[] */
};

static struct {
	struct node *nodes;             /* nodes[1..n]: node 0 is "no path" */
	uint32_t *slots;                /* open addressing: node id, 0 free */
	uint32_t *touched;              /* ids whose figures changed since the last pack */
	uint32_t n, ntouched;
	uint32_t sent;                  /* ids up to it have been packed once */
} paths;

static void *
map(size_t n)
{
	/* cppcheck-suppress invalidFunctionArg ; MAP_ANONYMOUS takes -1 */
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	/* cppcheck-suppress memleak ; the caller keeps it, and unmaps it (unmap) */
	return p == MAP_FAILED ? NULL : p;
}

static void
unmap(void *p, size_t n)
{
	if (p != NULL)
		munmap(p, n);
}

size_t
trc_paths_bytes(void)
{
	return (TRC_TOP_MAX_PATHS + 1) * sizeof(struct node) + SLOTS * sizeof(uint32_t) +
	    TRC_TOP_MAX_PATHS * sizeof(uint32_t);
}

/* Mapped pages are zero and touched only as paths are made: a small app costs a few pages. */
int
trc_paths_start(void)
{
	memset(&paths, 0, sizeof(paths));
	paths.nodes = map((TRC_TOP_MAX_PATHS + 1) * sizeof(struct node));
	paths.slots = map(SLOTS * sizeof(uint32_t));
	paths.touched = map(TRC_TOP_MAX_PATHS * sizeof(uint32_t));
	if (paths.nodes == NULL || paths.slots == NULL || paths.touched == NULL) {
		trc_paths_stop();
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

void
trc_paths_stop(void)
{
	unmap(paths.nodes, (TRC_TOP_MAX_PATHS + 1) * sizeof(struct node));
	unmap(paths.slots, SLOTS * sizeof(uint32_t));
	unmap(paths.touched, TRC_TOP_MAX_PATHS * sizeof(uint32_t));
	memset(&paths, 0, sizeof(paths));
}

static inline uint32_t
slot_of(uint32_t parent, uint32_t method)
{
	uint64_t h = (uint64_t)parent * 0x9E3779B97F4A7C15ull ^ (uint64_t)method * 0xC2B2AE3D27D4EB4Full;

	return (uint32_t)(h >> 40) & (SLOTS - 1);
}

uint32_t
trc_paths_enter(uint32_t parent, uint32_t method)
{
	uint32_t i, id;

	if (paths.nodes == NULL)
		return 0;
	for (i = slot_of(parent, method); (id = paths.slots[i]) != 0; i = (i + 1) & (SLOTS - 1))
		if (paths.nodes[id].parent == parent && paths.nodes[id].method == method)
			return id;
	if (paths.n >= TRC_TOP_MAX_PATHS)
		return parent;
	id = ++paths.n;
	paths.nodes[id].parent = parent;
	paths.nodes[id].method = method;
	paths.slots[i] = id;
	return id;
}

void
trc_paths_add(uint32_t path, uint64_t ticks)
{
	struct node *n;

	if (path == 0 || paths.nodes == NULL)
		return;
	n = &paths.nodes[path];
	n->count++;
	n->ticks += ticks;
	/* New paths are packed anyway: only the older ones need a note. */
	if (!n->touched && path <= paths.sent) {
		n->touched = 1;
		paths.touched[paths.ntouched++] = path;
	}
}

static void
pack_one(msgpack_packer *pk, uint32_t id, const struct trc_scope *scope)
{
	struct node *n = &paths.nodes[id];
	const struct trc_method *m = trc_method_at(n->method);
	struct trc_label label = { .a = m->name, .na = strlen(m->name) };
	char *file = m->path[0] != 0 ? trc_scope_absolute(scope, m->path) : NULL;

	if (m->sep != 0)
		label = (struct trc_label){ .a = m->klass_name, .na = strlen(m->klass_name), .sep = m->sep,
			.b = m->name, .nb = strlen(m->name) };
	trc_encode_top_path(pk, id, n->parent, file != NULL ? file : m->path, m->line, &label, n->count,
	    trc_clock_dur_ns(n->ticks));
	free(file);
	n->count = n->ticks = 0;
	n->touched = 0;
}

void
trc_paths_pack(msgpack_packer *pk, const struct trc_scope *scope)
{
	uint32_t fresh = paths.n - paths.sent;

	msgpack_pack_array(pk, fresh + paths.ntouched);
	for (uint32_t id = paths.sent + 1; id <= paths.n; id++)
		pack_one(pk, id, scope);
	for (uint32_t i = 0; i < paths.ntouched; i++)
		pack_one(pk, paths.touched[i], scope);
	paths.sent = paths.n;
	paths.ntouched = 0;
}
