/* screen.h: the terminal of the full-screen --top view: keys without echo, alternate screen, frames. */
#ifndef TRC_SCREEN_H
#define TRC_SCREEN_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#define TRC_SCREEN_COLUMNS 160  /* width when neither the terminal nor $COLUMNS says */
#define TRC_SCREEN_LINES 50     /* height when neither the terminal nor $LINES says */
#define TRC_SCREEN_REDRAW (-1)  /* the "key" sent after a resize or a resume */

/* The size of the terminal on fd (TIOCGWINSZ); else $COLUMNS / $LINES; else the defaults. */
unsigned trc_screen_columns(int fd);
unsigned trc_screen_lines(int fd);

/* Called from the loop with each byte typed, or TRC_SCREEN_REDRAW. */
typedef void trc_screen_key_fn(void *ctx, int key);

struct trc_screen;

/*
 * Takes over the terminal: out_fd (a terminal) switches to the alternate screen with the cursor
 * hidden; in_fd, when it is a terminal, goes non-canonical without echo and its keys go to fn.
 * Everything is undone by trc_screen_close(), and also if the client dies of a signal; on
 * SIGTSTP the terminal is given back while the client is stopped. One screen at a time; main
 * thread. The caller frees it with trc_screen_close().
 */
struct trc_screen *trc_screen_open(struct ev_loop *loop, int in_fd, int out_fd,
				   trc_screen_key_fn *fn, void *ctx);
/* Restores the terminal as it was and frees s. Flush what was written to out_fd before. */
void trc_screen_close(struct trc_screen *s);

/*
 * Appends text (lines ending in '\n') to out as one frame that replaces the screen: cursor home,
 * each line followed by clear-to-end-of-line, then clear-below. Pure.
 */
void trc_screen_frame(struct trc_buf *out, const char *text, size_t len);

#endif
