/* cppcheck-ruby.h: read by cppcheck before each agent file (make lint), so it can parse Ruby's headers. */

/* cppcheck knows noreturn only from __attribute__: without it, every `if (!p) rb_raise(...);`
 * followed by a use of p reads as a possible NULL dereference. */
#define RBIMPL_ATTR_NORETURN_H
#define RBIMPL_ATTR_NORETURN() __attribute__((__noreturn__))

/* ruby/internal/variable.h puts that attribute before a function typedef's name, which cppcheck
 * cannot parse (a syntax error ends the whole file's analysis). The agent needs nothing from it
 * that the checks would use: skip it. */
#define RBIMPL_VARIABLE_H
