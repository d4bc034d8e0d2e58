/* utf8.h: UTF-8 text: display widths and cuts in code points, well-formed sequences, C1 controls. */
#ifndef TRC_UTF8_H
#define TRC_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Display columns of s[0..len): one per code point (a fair guess for file and class names). Pure. */
size_t trc_utf8_width(const char *s, size_t len);
/* Bytes of the first w code points of s[0..len). Pure. */
size_t trc_utf8_head(const char *s, size_t len, size_t w);
/* Offset in s[0..len) where its last w code points begin. Pure. */
size_t trc_utf8_tail(const char *s, size_t len, size_t w);

/*
 * Length of the well-formed UTF-8 sequence at p[0..n) (Unicode table 3-7), n >= 1; or 0 with
 * *bad set to the length of the maximal ill-formed subpart there (at least 1), which Unicode's
 * "best practice" (and WHATWG's decoders) count as one error. Pure.
 */
size_t trc_utf8_seq(const unsigned char *p, size_t n, size_t *bad);
/* Whether the well-formed sequence p[0..len) is a C1 control, U+0080 to U+009F. Pure. */
bool trc_utf8_is_c1(const unsigned char *p, size_t len);
/*
 * Whether the well-formed sequence p[0..len) is a code point that makes a terminal or a viewer
 * do something, or show text as other than it is: a C1 control; a bidirectional control
 * (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069), which can make a name read
 * as another ("Trojan Source"); a line or paragraph separator (U+2028, U+2029), which editors
 * and JavaScript take for a line break. Pure.
 */
bool trc_utf8_is_unsafe(const unsigned char *p, size_t len);
/* The code point of the well-formed sequence p[0..len). Pure. */
uint32_t trc_utf8_code_point(const unsigned char *p, size_t len);

#endif
