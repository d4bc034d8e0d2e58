/* stable.h: names made the same in every process: what Ruby or a framework made per process, taken out. */
#ifndef TRC_STABLE_H
#define TRC_STABLE_H

#include <stddef.h>

/*
 * A class or module name with each object address taken out: "#<Class:0x00007f9540022cb8>"
 * becomes "#<Class>" (an anonymous class's name is its address, which differs in every
 * process, so one class of a forked server's workers was a row per worker). In place, in the
 * n bytes of s (a name may hold a NUL); returns the new length. Pure.
 */
size_t trc_stable_class(char *s, size_t n);

/*
 * A method name with what a compiled template's name holds of its process taken out:
 * ActionView names the method of "app/views/issues/index.html.erb"
 * "_app_views_issues_index_html_erb__<the path's String#hash>_<the template's object id>"
 * ('-' made '_'), and both numbers differ in every process (String#hash is seeded per
 * process): "_app_views_issues_index_html_erb" is left. Other names are left as they are.
 * In place, in the n bytes of s; returns the new length. Pure.
 */
size_t trc_stable_method(char *s, size_t n);

/*
 * A frame's full label ("Foo#bar", "Foo.bar", "block in Foo#bar", "#<Class:0x...>#_app_...")
 * made stable: its class part by trc_stable_class, the method after the last '#' or '.' by
 * trc_stable_method. In place; returns the new length. Pure.
 */
size_t trc_stable_label(char *s, size_t n);

#endif
