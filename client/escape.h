/* escape.h: bytes from a target made safe for a terminal or a text file, one rule for every output. */
#ifndef TRC_ESCAPE_H
#define TRC_ESCAPE_H

#include <stddef.h>

#include "buf.h"

/*
 * Appends p[0..n) to b as text that cannot drive a terminal nor forge a line: valid UTF-8 is
 * copied, but for the C0 and C1 controls; a control is shown as its C escape (\a \b \t \n \v
 * \f \r \e), else as \xHH, a C1 control (U+0080 to U+009F) as the \xHH of its two bytes, DEL
 * as \x7f, a NUL as \x00; each byte of an ill-formed UTF-8 sequence as \xHH. A backslash
 * stays as it is (Ruby's inspect is full of them), so the text cannot always be read back;
 * what it shows is what was sent. Everything a target sends that reaches a terminal or a text
 * file goes through here (JSON has its own escaping, json.h). Pure.
 */
void trc_escape(struct trc_buf *b, const char *p, size_t n);

/* The escaped text of p[0..n) as a new NUL-terminated string the caller frees. */
char *trc_escape_dup(const char *p, size_t n);

/*
 * As trc_escape_dup, but a text of several lines (an error's message: a SyntaxError's source
 * and caret, "Did you mean?") keeps its line breaks: each line is escaped, a "\r\n" ends a
 * line as "\n" does, and only the other controls show as escapes. For text printed where a
 * line of its own forges nothing (standard error, after "tracer: "). Pure.
 */
char *trc_escape_lines_dup(const char *p, size_t n);

#endif
