/* fuzz_agent_command.c: libFuzzer target for what a client can send the agent (ext/tracer_agent/wire.c). */
#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* As in ext/tracer_agent/session.c: receive() reads into a 64 KiB reserve, refuses past IN_MAX. */
#define READ_SIZE 65536
#define IN_MAX (64u << 20)

/*
 * The agent's handlers (command.c) read argv fields without checking them again: "shapes were
 * checked by trc_wire_command". This mirrors every read they make, into arrays of the sizes they
 * use, and traps on any field they would misread. So a shape wire.c lets through but a handler
 * cannot take shows up as a crash here, not as a Ruby exception in the target's agent thread.
 */
static void
need(int ok)
{
	if (!ok)
		__builtin_trap();
}

static volatile uint64_t sink;

/*
 * msgpack-c allocates an array's or map's elements when it reads the header, so 5 bytes may ask
 * for 64 GiB. In the agent that malloc fails (or reserves address space it never touches) and
 * the unpacker answers NOMEM, which run_commands() turns into a protocol error. Here any malloc
 * above 64 MiB fails the same way, at once, instead of ending the run: the inputs are a few KiB,
 * and what they really hold needs far less.
 */
const char *__asan_default_options(void);
const char *
__asan_default_options(void)
{
	return "allocator_may_return_null=1:max_allocation_size_mb=64";
}

static void
read_str(const msgpack_object *o, int nil_ok)
{
	need(o->type == MSGPACK_OBJECT_STR || (nil_ok && o->type == MSGPACK_OBJECT_NIL));
	if (o->type == MSGPACK_OBJECT_STR && o->via.str.size > 0)
		sink += (unsigned char)o->via.str.ptr[o->via.str.size - 1];
}

/* StringValueCStr() in cmd_top raises on an embedded NUL. */
static void
read_cstr(const msgpack_object *o)
{
	read_str(o, 0);
	need(o->via.str.size == 0 || memchr(o->via.str.ptr, 0, o->via.str.size) == NULL);
}

static void
read_spec(const msgpack_object *o)
{
	const msgpack_object *f;
	const msgpack_object *exprs[TRC_MAX_EXPRS];

	need(o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 4);
	f = o->via.array.ptr;
	read_str(&f[0], 1);
	need(f[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER && f[1].via.u64 <= TRC_SPEC_ANY);
	read_str(&f[2], 1);
	/* hook.c: ANY needs a method name; the others a class (the method may be nil: all of them). */
	if (f[1].via.u64 == TRC_SPEC_ANY)
		need(f[2].type == MSGPACK_OBJECT_STR && f[0].type == MSGPACK_OBJECT_NIL);
	else
		need(f[0].type == MSGPACK_OBJECT_STR);
	need(f[3].type == MSGPACK_OBJECT_ARRAY && f[3].via.array.size <= TRC_MAX_EXPRS);
	for (uint32_t i = 0; i < f[3].via.array.size; i++) {
		exprs[i] = &f[3].via.array.ptr[i];
		read_str(exprs[i], 0);
	}
}

/* [all, [prefix...], [ignore...]], as scope.c reads it: C strings, at most the limits. */
static void
read_scope(const msgpack_object *o)
{
	const msgpack_object *f;

	need(o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 3);
	f = o->via.array.ptr;
	need(f[0].type == MSGPACK_OBJECT_BOOLEAN);
	need(f[1].type == MSGPACK_OBJECT_ARRAY && f[1].via.array.size <= TRC_MAX_PREFIXES);
	for (uint32_t i = 0; i < f[1].via.array.size; i++)
		read_cstr(&f[1].via.array.ptr[i]);
	need(f[2].type == MSGPACK_OBJECT_ARRAY && f[2].via.array.size <= TRC_MAX_IGNORES);
	for (uint32_t i = 0; i < f[2].via.array.size; i++)
		read_cstr(&f[2].via.array.ptr[i]);
}

static void
run_hello(const msgpack_object *a)
{
	need(a[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER);
	sink += a[1].via.u64;
}

static void
run_trace(const msgpack_object *a)
{
	int matched[TRC_MAX_SPECS];

	need(a[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER);
	/* slow_ns = slow_ms * 1000000 must not wrap */
	need(a[2].via.u64 <= UINT64_MAX / 1000000u);
	need(a[3].type == MSGPACK_OBJECT_ARRAY && a[3].via.array.size <= TRC_MAX_SPECS);
	for (uint32_t i = 0; i < a[3].via.array.size; i++) {
		read_spec(&a[3].via.array.ptr[i]);
		matched[i] = (int)i;
		sink += (uint64_t)matched[i];
	}
	read_scope(&a[4]);
}

static void
run_eval(const msgpack_object *a)
{
	need(a[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER);
	need(a[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[2].via.u64 <= TRC_EVAL_LAST);
	read_str(&a[3], 0);
}

static void
run_top(const msgpack_object *a)
{
	need(a[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[1].via.u64 <= TRC_TOP_LAST);
	need(a[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[2].via.u64 > 0);
	need(a[3].type == MSGPACK_OBJECT_POSITIVE_INTEGER);
	read_scope(&a[4]);
	need(a[5].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[5].via.u64 >= 1 &&
	     a[5].via.u64 <= TRC_TOP_MAX_SAMPLE);
	need(a[6].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[6].via.u64 <= TRC_PROFILE_MAX_CAP);
}

static void
run_command(const msgpack_object *msg)
{
	int type = trc_wire_command(msg);
	const msgpack_object *a;

	if (type < 0)
		return;
	need(msg->type == MSGPACK_OBJECT_ARRAY && msg->via.array.size >= 1);
	a = msg->via.array.ptr;
	need(a[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a[0].via.u64 == (uint64_t)type);
	switch (type) {
	case TRC_CMD_HELLO:
		need(msg->via.array.size == 3);
		run_hello(a);
		break;
	case TRC_CMD_TRACE:
		need(msg->via.array.size == 5);
		run_trace(a);
		break;
	case TRC_CMD_EVAL:
		need(msg->via.array.size == 4);
		run_eval(a);
		break;
	case TRC_CMD_DETACH:
		need(msg->via.array.size == 1);
		break;
	case TRC_CMD_TOP:
		need(msg->via.array.size == TRC_CMD_TOP_FIELDS);
		run_top(a);
		break;
	default:
		need(0);
	}
}

/*
 * The input is the byte stream of one connection. The first byte picks how many bytes each
 * read() returns (short reads split messages anywhere); the rest is the stream. The whole input
 * is also offered as a queue message body to trc_wire_hello.
 */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	msgpack_unpacker in;
	msgpack_unpacked msg;
	msgpack_unpack_return ret;
	size_t off = 1, chunk;

	(void)trc_wire_hello(data, size);
	if (size == 0)
		return 0;
	chunk = data[0] == 0 ? READ_SIZE : data[0];
	if (!msgpack_unpacker_init(&in, READ_SIZE))
		return 0;
	msgpack_unpacked_init(&msg);
	while (off < size) {
		size_t n;

		/* receive() */
		if (msgpack_unpacker_message_size(&in) > IN_MAX)
			break;
		if (msgpack_unpacker_buffer_capacity(&in) < READ_SIZE &&
		    !msgpack_unpacker_reserve_buffer(&in, READ_SIZE))
			break;
		n = msgpack_unpacker_buffer_capacity(&in);
		if (n > chunk)
			n = chunk;
		if (n > size - off)
			n = size - off;
		memcpy(msgpack_unpacker_buffer(&in), data + off, n);
		msgpack_unpacker_buffer_consumed(&in, n);
		off += n;
		/* run_commands(): the agent closes on a rejected command; wire.c is stateless, so
		 * going on only checks more of them. */
		while ((ret = msgpack_unpacker_next(&in, &msg)) == MSGPACK_UNPACK_SUCCESS)
			run_command(&msg.data);
		if (ret == MSGPACK_UNPACK_PARSE_ERROR || ret == MSGPACK_UNPACK_NOMEM_ERROR)
			break;
	}
	msgpack_unpacked_destroy(&msg);
	msgpack_unpacker_destroy(&in);
	return 0;
}
