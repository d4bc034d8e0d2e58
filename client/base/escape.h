/* escape.h: bytes from a target made safe for every output (one scan, a syntax per format), and names bounded. */
#ifndef TRC_ESCAPE_H
#define TRC_ESCAPE_H

#include <stddef.h>

#include "buf.h"

/*
 * The syntaxes text from a target is written in. One scan (trc_escape_as) finds what must not
 * go out as it is, whatever the format: the C0 controls and DEL; the code points a terminal or
 * a viewer acts on (utf8.h's unsafe ones: C1 controls, bidirectional controls, line
 * separators); the bytes of ill-formed UTF-8; and the characters the syntax itself gives a
 * meaning (its quote, its escape character, markup). Each syntax only says how it writes
 * them. Whatever the bytes, the result is valid UTF-8 with none of those raw in it, at most
 * TRC_ESCAPE_MAX_GROWTH bytes per byte.
 */
enum trc_esc {
	/*
	 * A terminal or a text file (the trace, --top's table, collapsed stacks): a control as
	 * its C escape (\a \b \t \n \v \f \r \e), else \xHH, as is NUL (\x00) and DEL (\x7f);
	 * an unsafe code point and each byte of an ill-formed sequence as the \xHH of its bytes.
	 * A backslash stays as it is (Ruby's inspect is full of them), so the text cannot always
	 * be read back; what it shows is what was sent.
	 */
	TRC_ESC_TEXT,
	/* TEXT, with a backslash as \\: the text reads back to the very bytes, so two names never
	 * show the same (pprof's functions, a series' labels). */
	TRC_ESC_EXACT,
	/*
	 * The body of a JSON string: " and \ escaped, controls and DEL as \b \t \n \f \r or
	 * \u00XX, an unsafe code point as its \uXXXX (the value is the same; a file shown on a
	 * terminal cannot drive it), each maximal ill-formed subsequence as \ufffd (Unicode's
	 * "best practice", as WHATWG decoders do), so any bytes make valid JSON.
	 */
	TRC_ESC_JSON,
	/* The body of a label value in Prometheus' text format or OpenMetrics: EXACT's text, in
	 * the format's own escapes (\\ \" \n): a value reads back to the very bytes. */
	TRC_ESC_PROM,
	/* HTML or XML text, or an attribute value in either quotes: TEXT's text with & < > " '
	 * as character references. */
	TRC_ESC_HTML,
};

/* The most bytes one byte of input becomes, in any syntax (JSON's \u001b). */
#define TRC_ESCAPE_MAX_GROWTH 6

/* Appends p[0..n) to b in syntax how. Every byte a target sends that reaches a terminal or a
 * file goes through here. Pure. */
void trc_escape_as(struct trc_buf *b, enum trc_esc how, const char *p, size_t n);

/* trc_escape_as(b, TRC_ESC_TEXT, p, n). */
void trc_escape(struct trc_buf *b, const char *p, size_t n);

/* The TEXT of p[0..n) as a new NUL-terminated string the caller frees. */
char *trc_escape_dup(const char *p, size_t n);

/*
 * As trc_escape_dup, but a text of several lines (an error's message: a SyntaxError's source
 * and caret, "Did you mean?") keeps its line breaks: each line is escaped, a "\r\n" ends a
 * line as "\n" does, and only the other controls show as escapes. For text printed where a
 * line of its own forges nothing (standard error, after "tracer: "). Pure.
 */
char *trc_escape_lines_dup(const char *p, size_t n);

/*
 * The bytes a name from a target (a method, class, file or thread name) may take in any
 * output. The client cuts longer ones once, where it receives them (decode.c): an output
 * that prints a method's name on every call then copies a bounded name, not the megabyte an
 * app can name a method with.
 */
#define TRC_NAME_MAX 512

/*
 * Appends the name p[0..n) to b: as it is when n <= TRC_NAME_MAX; else its first and last
 * TRC_NAME_MAX / 2 bytes or so (cut where no UTF-8 sequence is split) around a marker
 * "[...N bytes #HASH...]", N its length and HASH 16 hex digits of its FNV-1a hash. That is
 * longer than TRC_NAME_MAX, so it is never the name of another that was not cut, and two
 * names cut stay apart by their length and hash. Pure.
 */
void trc_name_bound(struct trc_buf *b, const char *p, size_t n);

#endif
