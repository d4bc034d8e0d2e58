/* wire.c: shape checks for everything a client can send the agent. */
#include "wire.h"

#include <string.h>

static int
is_uint(const msgpack_object *o, uint64_t max)
{
	return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= max;
}

static int
is_str(const msgpack_object *o)
{
	return o->type == MSGPACK_OBJECT_STR;
}

static int
is_str_or_nil(const msgpack_object *o)
{
	return is_str(o) || o->type == MSGPACK_OBJECT_NIL;
}

/* A string that command.c may take as a C string: StringValueCStr() raises on a NUL in it. */
static int
is_cstr(const msgpack_object *o)
{
	return is_str(o) && (o->via.str.size == 0 || memchr(o->via.str.ptr, 0, o->via.str.size) == NULL);
}

/* An array of at most max elements that all pass is. */
static int
is_list(const msgpack_object *o, uint32_t max, int (*is)(const msgpack_object *))
{
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > max)
		return 0;
	for (uint32_t i = 0; i < o->via.array.size; i++)
		if (!is(&o->via.array.ptr[i]))
			return 0;
	return 1;
}

/* [class|nil, kind, method|nil, [expr...]]: ANY needs a method and no class, others a class. */
static int
is_spec(const msgpack_object *o)
{
	const msgpack_object *f;

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 4)
		return 0;
	f = o->via.array.ptr;
	if (!is_str_or_nil(&f[0]) || !is_uint(&f[1], TRC_SPEC_ANY) || !is_str_or_nil(&f[2]) ||
	    !is_list(&f[3], TRC_MAX_EXPRS, is_str))
		return 0;
	if (f[1].via.u64 == TRC_SPEC_ANY)
		return f[0].type == MSGPACK_OBJECT_NIL && is_str(&f[2]) && f[2].via.str.size > 0;
	return is_str(&f[0]) && f[0].via.str.size > 0;
}

/* [all, [prefix...], [ignore...]]: C strings (ignores are regexps Ruby compiles). */
static int
is_scope(const msgpack_object *o)
{
	const msgpack_object *f;

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 3)
		return 0;
	f = o->via.array.ptr;
	return f[0].type == MSGPACK_OBJECT_BOOLEAN && is_list(&f[1], TRC_MAX_PREFIXES, is_cstr) &&
	    is_list(&f[2], TRC_MAX_IGNORES, is_cstr);
}

static int
check_hello(const msgpack_object *a)
{
	return is_uint(&a[1], UINT32_MAX) && is_uint(&a[2], INT32_MAX);
}

static int
check_trace(const msgpack_object *a)
{
	if (!is_uint(&a[1], TRC_TRACE_FIREHOSE | TRC_TRACE_SLOW | TRC_TRACE_RAISE | TRC_TRACE_GC |
		     TRC_TRACE_SLOWCPU) ||
	    !is_uint(&a[2], TRC_SLOW_MS_MAX) || a[3].type != MSGPACK_OBJECT_ARRAY ||
	    a[3].via.array.size > TRC_MAX_SPECS)
		return 0;
	for (uint32_t i = 0; i < a[3].via.array.size; i++)
		if (!is_spec(&a[3].via.array.ptr[i]))
			return 0;
	return is_scope(&a[4]);
}

static int
check_eval(const msgpack_object *a)
{
	return is_uint(&a[1], UINT64_MAX) && is_uint(&a[2], TRC_EVAL_LAST) && is_str(&a[3]);
}

static int
check_detach(const msgpack_object *a)
{
	return 1;
}

static int
check_top(const msgpack_object *a)
{
	return is_uint(&a[1], TRC_TOP_LAST) && a[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	    a[2].via.u64 >= TRC_TOP_INTERVAL_MIN_MS && a[2].via.u64 <= TRC_TOP_INTERVAL_MAX_MS && is_uint(&a[3], TRC_TOP_GC | TRC_TOP_BY_TIME | TRC_TOP_WALL | TRC_TOP_PATHS) && is_scope(&a[4]) &&
	    a[5].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[5].via.u64 >= 1 && a[5].via.u64 <= TRC_TOP_MAX_SAMPLE &&
	    is_uint(&a[6], TRC_PROFILE_MAX_CAP);
}

/* The shapes, from the protocol's list: a command there without its check here does not compile. */
static const struct {
	int type;
	uint32_t size;
	int (*check)(const msgpack_object *a);
} shapes[] = {
#define TRC_X(NAME, name, type, fields, before_hello) { TRC_CMD_##NAME, fields, check_##name },
	TRC_COMMANDS(TRC_X)
#undef TRC_X
};

int
trc_wire_command(const msgpack_object *msg)
{
	const msgpack_object *a;

	if (msg->type != MSGPACK_OBJECT_ARRAY || msg->via.array.size == 0)
		return -1;
	a = msg->via.array.ptr;
	if (a[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return -1;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		if ((uint64_t)shapes[i].type != a[0].via.u64)
			continue;
		if (msg->via.array.size != shapes[i].size || !shapes[i].check(a))
			return -1;
		return shapes[i].type;
	}
	return -1;
}

/* "@name" (an abstract socket, the name not empty) or "/path", NUL-terminated in its field. */
static int
is_hello_addr(const char *addr, size_t size)
{
	if (memchr(addr, 0, size) == NULL)
		return 0;
	return addr[0] == '/' || (addr[0] == TRC_SOCK_ABSTRACT && addr[1] != '\0');
}

int
trc_wire_hello(const void *buf, size_t n)
{
	struct trc_hello h;

	if (n != TRC_HELLO_SIZE)
		return 0;
	memcpy((char *)&h + sizeof(long), buf, n);
	return h.magic == TRC_HELLO_MAGIC && h.client_pid > 0 && is_hello_addr(h.addr, sizeof(h.addr));
}
