/* top_json.h: the --top table as one line of JSON per snapshot (--top --json). */
#ifndef TRC_TOP_JSON_H
#define TRC_TOP_JSON_H

#include "buf.h"
#include "top.h"
#include "top_rows.h"

/* Appends the snapshot the text table would show as one line of JSON (with its '\n') to out,
 * strings escaped by trc_json_str() like every JSON the client writes. Pure. */
void trc_top_format_json(const struct trc_top *t, const struct trc_top_view *v,
			 struct trc_buf *out);

#endif
