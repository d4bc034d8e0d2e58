/* scope.h: which calls and files a session looks at: the app's own, or everything. */
#ifndef TRC_SCOPE_H
#define TRC_SCOPE_H

#include <msgpack.h>
#include <ruby.h>

/* A TRC_CMD_TRACE's or TRC_CMD_TOP's scope, [all, [prefix...], [ignore...]] (tracer_protocol.h). */
struct trc_scope {
	int all;
	int cwd_default;        /* no prefix was given: the working directory is the prefix */
	int nprefixes;
	char **prefixes;        /* owned; each ends with '/' when it names a directory */
	VALUE prefix_list;      /* the same, as an Array of Strings, for lib/tracer_agent/wrap.rb */
	VALUE ignore_list;      /* Array of Strings: extended regexps over "Class#method" */
	char *cwd;              /* the working directory when the scope was read, with its '/' */
};

/*
 * GVL held. Fills s from o (its shape checked by wire.c); -1 with errno when memory runs out.
 * The working directory stands in when no prefix is given.
 */
int trc_scope_read(struct trc_scope *s, const msgpack_object *o);
void trc_scope_release(struct trc_scope *s);
/*
 * Any thread, no allocation: whether path is in the scope. A relative path is one Ruby loaded
 * relative to the working directory: it is matched as trc_scope_absolute() makes it.
 */
int trc_scope_wanted(const struct trc_scope *s, const char *path);
/* A copy of path made absolute against the working directory (malloc: the caller frees). */
char *trc_scope_absolute(const struct trc_scope *s, const char *path);
void trc_scope_mark(const struct trc_scope *s);

#endif
