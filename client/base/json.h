/* json.h: pieces of JSON text (escaped strings, exact numbers) for all the JSON the client writes. */
#ifndef TRC_JSON_H
#define TRC_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/*
 * Appends p[0..n) as a quoted JSON string, escaped as escape.h's TRC_ESC_JSON says: quote,
 * backslash, controls and the code points a terminal acts on escaped, valid UTF-8 copied as
 * it is, each maximal ill-formed subsequence replaced by \ufffd, so any bytes make valid
 * JSON. Pure.
 */
void trc_json_str(struct trc_buf *b, const char *p, size_t n);
/* The same, as the body of a string (no quotes): for strings assembled from several parts. */
void trc_json_str_body(struct trc_buf *b, const char *p, size_t n);

void trc_json_uint(struct trc_buf *b, uint64_t v);
void trc_json_int(struct trc_buf *b, int64_t v);
/* ns nanoseconds as microseconds with exactly three decimals ("-1.500", "12.345"): no floats,
 * so no rounding and no locale. */
void trc_json_micros(struct trc_buf *b, int64_t ns);

/* ns nanoseconds as milliseconds with exactly six decimals ("0.000412"), exact likewise. */
void trc_json_millis(struct trc_buf *b, uint64_t ns);

#endif
