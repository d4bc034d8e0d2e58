/* encode.c: msgpack writers and the client's commands. */
#include "encode.h"

/* Appends the header byte c followed by the width-byte big-endian v. */
static void
put_be(struct trc_buf *b, uint8_t c, uint64_t v, unsigned width)
{
	char tmp[9];

	tmp[0] = (char)c;
	for (unsigned i = 0; i < width; i++)
		tmp[1 + i] = (char)(v >> (8 * (width - 1 - i)));
	trc_buf_add(b, tmp, 1 + width);
}

void
trc_pack_uint(struct trc_buf *b, uint64_t v)
{
	if (v <= 0x7f)
		trc_buf_addc(b, (char)v);
	else if (v <= UINT8_MAX)
		put_be(b, 0xcc, v, 1);
	else if (v <= UINT16_MAX)
		put_be(b, 0xcd, v, 2);
	else if (v <= UINT32_MAX)
		put_be(b, 0xce, v, 4);
	else
		put_be(b, 0xcf, v, 8);
}

void
trc_pack_int(struct trc_buf *b, int64_t v)
{
	if (v >= 0)
		trc_pack_uint(b, (uint64_t)v);
	else if (v >= -32)
		trc_buf_addc(b, (char)(uint8_t)(int8_t)v);
	else if (v >= INT8_MIN)
		put_be(b, 0xd0, (uint64_t)v, 1);
	else if (v >= INT16_MIN)
		put_be(b, 0xd1, (uint64_t)v, 2);
	else if (v >= INT32_MIN)
		put_be(b, 0xd2, (uint64_t)v, 4);
	else
		put_be(b, 0xd3, (uint64_t)v, 8);
}

void
trc_pack_array(struct trc_buf *b, uint32_t n)
{
	if (n <= 15)
		trc_buf_addc(b, (char)(0x90 | n));
	else if (n <= UINT16_MAX)
		put_be(b, 0xdc, n, 2);
	else
		put_be(b, 0xdd, n, 4);
}

void
trc_pack_nil(struct trc_buf *b)
{
	trc_buf_addc(b, (char)0xc0);
}

void
trc_pack_bool(struct trc_buf *b, bool v)
{
	trc_buf_addc(b, (char)(v ? 0xc3 : 0xc2));
}

void
trc_pack_str(struct trc_buf *b, const char *s, size_t len)
{
	if (len <= 31)
		trc_buf_addc(b, (char)(0xa0 | len));
	else if (len <= UINT8_MAX)
		put_be(b, 0xd9, len, 1);
	else if (len <= UINT16_MAX)
		put_be(b, 0xda, len, 2);
	else
		put_be(b, 0xdb, len, 4);
	trc_buf_add(b, s, len);
}

void
trc_pack_bin(struct trc_buf *b, const void *p, size_t len)
{
	if (len <= UINT8_MAX)
		put_be(b, 0xc4, len, 1);
	else if (len <= UINT16_MAX)
		put_be(b, 0xc5, len, 2);
	else
		put_be(b, 0xc6, len, 4);
	trc_buf_add(b, p, len);
}

void
trc_pack_cstr(struct trc_buf *b, const char *s)
{
	if (s == NULL)
		trc_pack_nil(b);
	else
		trc_pack_str(b, s, strlen(s));
}

void
trc_encode_hello(struct trc_buf *b, int32_t client_pid)
{
	trc_pack_array(b, TRC_CMD_HELLO_FIELDS);
	trc_pack_uint(b, TRC_CMD_HELLO);
	trc_pack_uint(b, TRC_PROTOCOL_VERSION);
	trc_pack_int(b, client_pid);
}

/* [class|nil, kind, method|nil, [expr...]] */
static void
encode_spec(struct trc_buf *b, const struct trc_spec *s)
{
	trc_pack_array(b, 4);
	trc_pack_cstr(b, s->cls);
	trc_pack_uint(b, s->kind);
	trc_pack_cstr(b, s->method);
	trc_pack_array(b, (uint32_t)s->nexprs);
	for (size_t i = 0; i < s->nexprs; i++)
		trc_pack_cstr(b, s->exprs[i]);
}

static void
encode_strs(struct trc_buf *b, const char *const *list, size_t n)
{
	trc_pack_array(b, (uint32_t)n);
	for (size_t i = 0; i < n; i++)
		trc_pack_cstr(b, list[i]);
}

/* [all, [prefix...], [ignore...]] */
static void
encode_scope(struct trc_buf *b, const struct trc_scope *s)
{
	trc_pack_array(b, 3);
	trc_pack_bool(b, s->all);
	encode_strs(b, s->prefixes, s->nprefixes);
	encode_strs(b, s->ignores, s->nignores);
}

void
trc_encode_trace(struct trc_buf *b, uint32_t flags, uint32_t slow_ms,
		 const struct trc_spec *specs, size_t nspecs, const struct trc_scope *scope)
{
	trc_pack_array(b, TRC_CMD_TRACE_FIELDS);
	trc_pack_uint(b, TRC_CMD_TRACE);
	trc_pack_uint(b, flags);
	trc_pack_uint(b, slow_ms);
	trc_pack_array(b, (uint32_t)nspecs);
	for (size_t i = 0; i < nspecs; i++)
		encode_spec(b, &specs[i]);
	encode_scope(b, scope);
}

void
trc_encode_eval(struct trc_buf *b, uint32_t id, enum trc_eval_kind kind, const char *text)
{
	trc_pack_array(b, TRC_CMD_EVAL_FIELDS);
	trc_pack_uint(b, TRC_CMD_EVAL);
	trc_pack_uint(b, id);
	trc_pack_uint(b, kind);
	trc_pack_cstr(b, text ? text : "");
}

void
trc_encode_detach(struct trc_buf *b)
{
	trc_pack_array(b, TRC_CMD_DETACH_FIELDS);
	trc_pack_uint(b, TRC_CMD_DETACH);
}

void
trc_encode_top(struct trc_buf *b, enum trc_top_mode mode, uint32_t interval_ms, uint32_t flags,
	       uint32_t sample, uint32_t cap, const struct trc_scope *scope)
{
	trc_pack_array(b, TRC_CMD_TOP_FIELDS);
	trc_pack_uint(b, TRC_CMD_TOP);
	trc_pack_uint(b, mode);
	trc_pack_uint(b, interval_ms);
	trc_pack_uint(b, flags);
	encode_scope(b, scope);
	trc_pack_uint(b, sample);
	trc_pack_uint(b, cap);
}
