/* top_text.h: the --top table as text: a header line, then columns that fit the terminal. */
#ifndef TRC_TOP_TEXT_H
#define TRC_TOP_TEXT_H

#include "buf.h"
#include "top.h"
#include "top_rows.h"

/* When the table does not fit, FILENAME shrinks to what keeps each file's own name whole (at
 * least TRC_TOP_MIN_FILE), then METHOD/OBJECT/EXCEPTION to TRC_TOP_MIN_LABEL, FILENAME to
 * TRC_TOP_MIN_FILE, then both down to TRC_TOP_MIN_CUT ("...x"). */
#define TRC_TOP_MIN_FILE 16
#define TRC_TOP_MIN_LABEL 12
#define TRC_TOP_MIN_CUT 4

/*
 * Appends the header line, a blank line and the table (column titles, then the rows sorted by
 * the mode's main figure), each line ending in '\n', to out. What the targets named is escaped
 * (escape.h); long names lose their left part to a leading "...". Pure.
 */
void trc_top_format_text(const struct trc_top *t, const struct trc_top_view *v,
			 struct trc_buf *out);

#endif
