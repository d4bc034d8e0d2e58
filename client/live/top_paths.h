/* top_paths.h: --top time's call paths (TRC_TOP_PATHS), each target's summed, for a flame graph. */
#ifndef TRC_TOP_PATHS_H
#define TRC_TOP_PATHS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "decode.h"
#include "flame.h"

struct trc_top_paths;

/* An empty store; the caller frees it with trc_top_paths_free(). Pure; main thread. */
struct trc_top_paths *trc_top_paths_new(void);
void trc_top_paths_free(struct trc_top_paths *p);

/*
 * Adds the paths of one TRC_MSG_TOP from pid (strings copied; other messages are ignored). A
 * path the agent could not have sent (an id out of its order, a parent it never defined, a
 * known id with another parent) is left out and counted.
 */
void trc_top_paths_feed(struct trc_top_paths *p, pid_t pid, const struct trc_message *m);
/* Paths left out as malformed so far. */
uint64_t trc_top_paths_bad(const struct trc_top_paths *p);

/*
 * Every target's paths into f, weighed by their self time in ns, each frame's kind from its
 * file and name (scope: the app's directories); by_process: each target's under a "ruby PID"
 * group frame, else all merged.
 */
void trc_top_paths_flame(const struct trc_top_paths *p, struct trc_flame *f, bool by_process,
			 const struct trc_flame_scope *scope);

#endif
