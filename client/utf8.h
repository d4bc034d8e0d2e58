/* utf8.h: display widths and cuts of UTF-8 text, counted in code points. */
#ifndef TRC_UTF8_H
#define TRC_UTF8_H

#include <stddef.h>

/* Display columns of s[0..len): one per code point (a fair guess for file and class names). Pure. */
size_t trc_utf8_width(const char *s, size_t len);
/* Bytes of the first w code points of s[0..len). Pure. */
size_t trc_utf8_head(const char *s, size_t len, size_t w);
/* Offset in s[0..len) where its last w code points begin. Pure. */
size_t trc_utf8_tail(const char *s, size_t len, size_t w);

#endif
