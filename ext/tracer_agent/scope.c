/* scope.c: a session's scope: prefixes and ignores, read from the client's command. */
#include "scope.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"

static VALUE
str_list(const msgpack_object *o)
{
	VALUE list = rb_ary_new_capa(o->via.array.size);

	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *e = &o->via.array.ptr[i];
		rb_ary_push(list, rb_str_new(e->via.str.ptr, e->via.str.size));
	}
	return list;
}

static int
add_prefix(struct trc_scope *s, const char *p, size_t n)
{
	char *copy = trc_malloc(n + 1);

	if (copy == NULL)
		return -1;
	memcpy(copy, p, n);
	copy[n] = 0;
	s->prefixes[s->nprefixes++] = copy;
	return 0;
}

static int
relative(const char *path)
{
	return path[0] != '/' && path[0] != '<' && path[0] != '(' && path[0] != 0;
}

int
trc_scope_read(struct trc_scope *s, const msgpack_object *o)
{
	const msgpack_object *f = o->via.array.ptr;
	const msgpack_object *prefixes = &f[1];
	char cwd[PATH_MAX + 1];
	size_t n;

	memset(s, 0, sizeof(*s));
	s->prefix_list = s->ignore_list = Qnil;
	s->all = f[0].via.boolean;
	s->prefixes = trc_calloc(prefixes->via.array.size + 1, sizeof(char *));
	if (s->prefixes == NULL)
		return -1;
	for (uint32_t i = 0; i < prefixes->via.array.size; i++)
		if (add_prefix(s, prefixes->via.array.ptr[i].via.str.ptr, prefixes->via.array.ptr[i].via.str.size) < 0)
			goto fail;
	s->cwd_default = s->nprefixes == 0;
	if (getcwd(cwd, sizeof(cwd) - 1) != NULL) {
		/* The directory itself, with its slash: /srv/app must not take in /srv/app2. */
		n = strlen(cwd);
		if (cwd[n - 1] != '/')
			cwd[n++] = '/';
		cwd[n] = 0;
		if ((s->cwd = trc_strdup(cwd)) == NULL || (s->cwd_default && add_prefix(s, cwd, n) < 0))
			goto fail;
	}
	s->prefix_list = rb_ary_new_capa(s->nprefixes);
	for (int i = 0; i < s->nprefixes; i++)
		rb_ary_push(s->prefix_list, rb_str_new_cstr(s->prefixes[i]));
	s->ignore_list = str_list(&f[2]);
	return 0;
fail:
	trc_scope_release(s);
	errno = ENOMEM;
	return -1;
}

void
trc_scope_release(struct trc_scope *s)
{
	for (int i = 0; i < s->nprefixes; i++)
		free(s->prefixes[i]);
	free(s->prefixes);
	free(s->cwd);
	memset(s, 0, sizeof(*s));
	s->prefix_list = s->ignore_list = Qnil;
}

/* Whether dir + path starts with prefix, without making dir + path. */
static int
joined_has_prefix(const char *dir, const char *path, const char *prefix)
{
	size_t a = strlen(dir), n = strlen(prefix);

	if (n <= a)
		return strncmp(dir, prefix, n) == 0;
	return strncmp(dir, prefix, a) == 0 && strncmp(path, prefix + a, n - a) == 0;
}

/*
 * A relative path is matched as trc_scope_absolute() makes it: `ruby app.rb` run in /srv/app
 * counts under --filter /srv/app/ too, not only under the default prefix.
 */
int
trc_scope_wanted(const struct trc_scope *s, const char *path)
{
	const char *dir = "";

	if (s->all)
		return 1;
	if (relative(path)) {
		if (s->cwd == NULL)
			return s->cwd_default;
		dir = s->cwd;
		if (path[0] == '.' && path[1] == '/')
			path += 2;
	}
	for (int i = 0; i < s->nprefixes; i++)
		if (joined_has_prefix(dir, path, s->prefixes[i]))
			return 1;
	return 0;
}

char *
trc_scope_absolute(const struct trc_scope *s, const char *path)
{
	size_t a, b;
	char *out;

	if (!relative(path) || s->cwd == NULL)
		return trc_strdup(path);
	if (path[0] == '.' && path[1] == '/')
		path += 2;
	a = strlen(s->cwd);
	b = strlen(path);
	if ((out = trc_malloc(a + b + 1)) == NULL)
		return NULL;
	memcpy(out, s->cwd, a);
	memcpy(out + a, path, b + 1);
	return out;
}

void
trc_scope_mark(const struct trc_scope *s)
{
	rb_gc_mark(s->prefix_list);
	rb_gc_mark(s->ignore_list);
}
