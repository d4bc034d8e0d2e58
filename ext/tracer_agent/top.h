/* top.h: counting calls, time, allocations and exceptions in the agent, for the live tables. */
#ifndef TRC_TOP_H
#define TRC_TOP_H

#include <msgpack.h>
#include <ruby.h>

/*
 * GVL held (agent thread). Installs the hooks that mode (enum trc_top_mode) needs. Rows whose
 * file starts with none of the prefixes are not counted, unless all is set; cwd_default says
 * the prefix is the working directory, so relative paths count too. The table owns copies of
 * the prefixes. -1 with errno when memory runs out.
 */
int trc_top_start(int mode, int all, int cwd_default, const char *const *prefixes, int nprefixes);
/* GVL held. Removes the hooks and frees the table. */
void trc_top_stop(void);
/* GVL held. Packs one TRC_MSG_TOP with what was counted since the last one, then clears it. */
void trc_top_pack(msgpack_packer *pk);
/* GVL held. How many hooks are installed now. */
int trc_top_installed(void);
/* From the GC's mark phase. */
void trc_top_mark(void);

#endif
