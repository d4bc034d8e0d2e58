/* test_encode.c: the client's commands, checked by unpacking them with msgpack-c. */
#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>

#include "encode.h"
#include "spec.h"
#include "test.h"

/* Unpacks exactly one object from b into *u; returns 0 on success. */
static int
unpack_one(const struct trc_buf *b, msgpack_unpacked *u)
{
	size_t off = 0;

	msgpack_unpacked_init(u);
	if (msgpack_unpack_next(u, b->data, b->len, &off) != MSGPACK_UNPACK_SUCCESS)
		return -1;
	return off == b->len ? 0 : -1;
}

static int
is_uint(msgpack_object o, uint64_t v)
{
	return o.type == MSGPACK_OBJECT_POSITIVE_INTEGER && o.via.u64 == v;
}

static int
is_str(msgpack_object o, const char *s)
{
	return o.type == MSGPACK_OBJECT_STR && o.via.str.size == strlen(s) &&
	       memcmp(o.via.str.ptr, s, o.via.str.size) == 0;
}

static int
is_array(msgpack_object o, uint32_t n)
{
	return o.type == MSGPACK_OBJECT_ARRAY && o.via.array.size == n;
}

static void
test_hello(void)
{
	struct trc_buf b;
	msgpack_unpacked u;
	msgpack_object *a;

	trc_buf_init(&b);
	trc_encode_hello(&b, 123456);
	test_cond("hello unpacks", unpack_one(&b, &u) == 0);
	a = u.data.via.array.ptr;
	test_cond("hello is [1, version, pid]",
		  is_array(u.data, 3) && is_uint(a[0], TRC_CMD_HELLO) &&
		  is_uint(a[1], TRC_PROTOCOL_VERSION) && is_uint(a[2], 123456));
	msgpack_unpacked_destroy(&u);
	trc_buf_release(&b);
}

static void
test_detach(void)
{
	struct trc_buf b;
	msgpack_unpacked u;

	trc_buf_init(&b);
	trc_encode_detach(&b);
	test_cond("detach unpacks", unpack_one(&b, &u) == 0);
	test_cond("detach is [4]", is_array(u.data, 1) &&
				   is_uint(u.data.via.array.ptr[0], TRC_CMD_DETACH));
	msgpack_unpacked_destroy(&u);
	trc_buf_release(&b);
}

static void
test_trace_cmd(void)
{
	const char *texts[] = { "Kernel#sleep(self, __source__)", "Dir.", "puts" };
	struct trc_spec specs[3];
	struct trc_buf b;
	msgpack_unpacked u;
	msgpack_object *a, *s0, *s1, *s2;
	const char *why;
	struct trc_scope scope = { 0 };

	for (int i = 0; i < 3; i++)
		trc_spec_parse(&specs[i], texts[i], &why);
	trc_buf_init(&b);
	trc_encode_trace(&b, TRC_TRACE_SLOW | TRC_TRACE_RAISE, 300, specs, 3, &scope);
	test_cond("trace unpacks", unpack_one(&b, &u) == 0);
	a = u.data.via.array.ptr;
	test_cond("trace is [2, flags, slow_ms, [3 specs], scope]",
		  is_array(u.data, 5) && is_uint(a[0], TRC_CMD_TRACE) &&
		  is_uint(a[1], TRC_TRACE_SLOW | TRC_TRACE_RAISE) && is_uint(a[2], 300) &&
		  is_array(a[3], 3));
	test_cond("the default scope: the app, no prefix, no ignore",
		  is_array(a[4], 3) && a[4].via.array.ptr[0].type == MSGPACK_OBJECT_BOOLEAN &&
		  !a[4].via.array.ptr[0].via.boolean && is_array(a[4].via.array.ptr[1], 0) &&
		  is_array(a[4].via.array.ptr[2], 0));
	s0 = a[3].via.array.ptr[0].via.array.ptr;
	s1 = a[3].via.array.ptr[1].via.array.ptr;
	s2 = a[3].via.array.ptr[2].via.array.ptr;
	test_cond("instance spec with exprs",
		  is_str(s0[0], "Kernel") && is_uint(s0[1], TRC_SPEC_INSTANCE) &&
		  is_str(s0[2], "sleep") && is_array(s0[3], 2) &&
		  is_str(s0[3].via.array.ptr[0], "self") &&
		  is_str(s0[3].via.array.ptr[1], "__source__"));
	test_cond("all singleton methods: method nil",
		  is_str(s1[0], "Dir") && is_uint(s1[1], TRC_SPEC_SINGLETON) &&
		  s1[2].type == MSGPACK_OBJECT_NIL && is_array(s1[3], 0));
	test_cond("any receiver: class nil",
		  s2[0].type == MSGPACK_OBJECT_NIL && is_uint(s2[1], TRC_SPEC_ANY) &&
		  is_str(s2[2], "puts"));
	msgpack_unpacked_destroy(&u);
	trc_buf_release(&b);
	for (int i = 0; i < 3; i++)
		trc_spec_release(&specs[i]);
}

static void
test_eval(void)
{
	char *code = malloc(70000);
	struct trc_buf b;
	msgpack_unpacked u;
	msgpack_object *a;

	memset(code, '1', 69999);
	code[69999] = '\0';
	trc_buf_init(&b);
	trc_encode_eval(&b, 9, TRC_EVAL_CODE, code);
	test_cond("eval unpacks", unpack_one(&b, &u) == 0);
	a = u.data.via.array.ptr;
	test_cond("eval is [3, id, kind, text] with a 70 KB text",
		  is_array(u.data, 4) && is_uint(a[0], TRC_CMD_EVAL) && is_uint(a[1], 9) &&
		  is_uint(a[2], TRC_EVAL_CODE) && is_str(a[3], code));
	msgpack_unpacked_destroy(&u);
	trc_buf_release(&b);
	free(code);
}

static void
test_encode_top(void)
{
	const char *prefixes[] = { "app/", "lib/" }, *ignores[] = { "^Rack" };
	struct trc_scope scope = { true, prefixes, 2, ignores, 1 };
	struct trc_buf b;
	msgpack_unpacked u;
	msgpack_object *a, *sc;

	trc_buf_init(&b);
	trc_encode_top(&b, TRC_TOP_TIME, 1000, TRC_TOP_GC | TRC_TOP_BY_TIME, 16, 10000, &scope);
	test_cond("top unpacks", unpack_one(&b, &u) == 0);
	a = u.data.via.array.ptr;
	test_cond("top is [5, mode, interval, flags, scope, sample, cap]",
		  is_array(u.data, 7) && is_uint(a[0], TRC_CMD_TOP) && is_uint(a[1], TRC_TOP_TIME) &&
		  is_uint(a[2], 1000) && is_uint(a[3], TRC_TOP_GC | TRC_TOP_BY_TIME) && is_array(a[4], 3) &&
		  is_uint(a[5], 16) && is_uint(a[6], 10000));
	sc = a[4].via.array.ptr;
	test_cond("scope is [all, [prefix...], [ignore...]]",
		  sc[0].type == MSGPACK_OBJECT_BOOLEAN && sc[0].via.boolean && is_array(sc[1], 2) &&
		  is_str(sc[1].via.array.ptr[1], "lib/") && is_array(sc[2], 1) &&
		  is_str(sc[2].via.array.ptr[0], "^Rack"));
	msgpack_unpacked_destroy(&u);
	trc_buf_release(&b);
}

/* Every integer width and sign, as msgpack-c reads it back. */
static void
test_integers(void)
{
	static const int64_t values[] = { 0, 127, 128, 255, 256, 65535, 65536, INT32_MAX,
					  (int64_t)1 << 32, INT64_MAX, -1, -32, -33, -128, -129,
					  -32768, -32769, INT32_MIN, (int64_t)INT32_MIN - 1, INT64_MIN };
	int ok = 1;

	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		struct trc_buf b;
		msgpack_unpacked u;

		trc_buf_init(&b);
		trc_pack_int(&b, values[i]);
		ok &= unpack_one(&b, &u) == 0 &&
		      (values[i] >= 0 ? u.data.via.u64 == (uint64_t)values[i]
				      : u.data.via.i64 == values[i]);
		msgpack_unpacked_destroy(&u);
		trc_buf_release(&b);
	}
	test_cond("integers of every width read back by msgpack-c", ok);
}

void
test_encode(void)
{
	test_hello();
	test_detach();
	test_trace_cmd();
	test_eval();
	test_encode_top();
	test_integers();
}
