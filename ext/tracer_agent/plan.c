/* plan.c: which methods a session wraps, put in place and taken away a slice at a time. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "extconf.h"

#include "clock.h"
#include "mem.h"
#include "names.h"
#include "wrap.h"

/*
 * Why slices. A Rails app has thousands of methods of its own (Redmine: 4,600; Foreman, ten
 * times more), and every Ruby thing done to each (listing it, finding its file, defining its
 * wrapper) holds the GVL: done in one go, the app served no request for as long. So the work
 * is cut into slices that end at a deadline, and the session's service asks for the next one
 * only after the app has had the GVL back for a while (session.c paces them). The methods -m
 * names are few and done at once; the app's own (-f, -s, --top calls and time) are found, then
 * wrapped, in slices: a walk of the heap lists the modules and keeps their method entries, and
 * the entries in the app's files are checked (most here, the rest by wrap.rb); where the entries
 * cannot be read, wrap.rb looks at each module instead. Nothing reports before everything is in
 * place: the wrappers' generation goes live only then (trc_wrap_live, by the caller).
 */
enum phase {
	PHASE_IDLE,
	PHASE_FIND,             /* the heap walk, then its entries (or modules) for the app's methods */
	PHASE_WRAP,             /* wrapping what was found */
	PHASE_DONE,             /* in place */
	PHASE_REMOVE,           /* taking it all away */
};

#ifdef HAVE_RB_OBJSPACE_EACH_OBJECTS
void rb_objspace_each_objects(int (*callback)(void *start, void *end, size_t stride, void *data), void *data);
#endif
#ifdef HAVE_RB_OBJSPACE_INTERNAL_OBJECT_P
/*
 * ObjectSpace.each_object's own test of what is the VM's and not the app's to see, exported for
 * objspace.so, in no public header. Ruby 4.0 made RubyVM::FrozenCore (the receiver of what
 * compiled code calls: core#define_method, lambda, ...) a plain class, which only this test
 * leaves out (3.1-3.4 kept it an ICLASS); Kernel#singleton_class on it crashes 4.0.2, since
 * its singleton class has no class of its own (class.c, make_metaclass).
 */
int rb_objspace_internal_object_p(VALUE obj);
#define vm_internal(v) rb_objspace_internal_object_p(v)
#else
#define vm_internal(v) 0
#endif
#if defined(HAVE_RB_OBJSPACE_EACH_OBJECTS) && defined(HAVE_RB_RESOLVE_ME_LOCATION)
#define FIND_BY_ENTRIES 1
/* Exported by libruby for the coverage library, declared in no public header: the file and
 * lines of a method entry's code, following aliases and refinements; NULL when it has none. */
const void *rb_resolve_me_location(const void *me, VALUE location[5]);
#endif

/* found holds ENTRY values per method: owner (or an UnboundMethod no table holds), name,
 * visibility (-1 for such a method), arity, path, line. */
#define ENTRY 6

static struct {
	enum phase phase;
	uint64_t gen;
	const struct trc_spec *specs;
	int nspecs;
	const struct trc_scope *scope;
	VALUE cwd, ignore;      /* the scope's, as wrap.rb takes them */
	VALUE *modules;         /* FIND: every module (malloc'd, marked), looked at from next on */
	size_t nmodules, modules_cap;
	int walked;             /* modules (and entries) hold them all */
	VALUE *entries;         /* FIND: the heap's method entries (malloc'd, marked), from next_entry */
	size_t nentries, entries_cap, next_entry;
	int by_entries;         /* the find reads entries: the walk collects them and they are usable */
	size_t probes[4];       /* where in entries the probes are, plus one (0: not found) */
	VALUE files;            /* FIND by entries: wrap.rb's verdicts by file, and what it checked */
	VALUE candidates, seen;
	VALUE plain;            /* FIND by entries: wrap.rb's plain? by owner (checked_in_c) */
	long next_candidate;
	const char *found_by;   /* how the last find went about it: "entries", "modules", or NULL */
	long found_count;       /* and how many methods it found */
	int walk_begun;         /* the find has begun (detached methods looked for) */
	int walk_begun_entries; /* the heap walk has begun (walk_modules) */
	uintptr_t *pages;       /* the heap pages walked so far: an open-addressed set (0: free) */
	size_t npages, pages_cap;
	size_t next;
	VALUE found;            /* WRAP: what to wrap, from next_found on */
	long next_found;
	VALUE pending;          /* [mod, name, ...] defined while the plan was under way */
	VALUE tracepoints;      /* on methods no table holds */
	uint32_t wrapped;
	uint64_t remove_total;
	uint64_t longest_step;  /* ns: the longest any step held the GVL, this session */
	/* What the last plan with a scope found, kept for the next one: it holds as long as the
	 * scope is the same and the app has defined no method since (trc_wrap_definitions). */
	VALUE known;            /* found, or Qnil */
	VALUE known_scope;      /* [prefixes, ignores, cwd] */
	uint64_t known_at;
	uint64_t found_at;      /* definitions when this plan began to find */
	int found_known;        /* found came from known: each entry is checked again */
} plan = { .cwd = Qnil, .ignore = Qnil, .found = Qnil, .pending = Qnil, .tracepoints = Qnil, .known = Qnil,
	.known_scope = Qnil, .files = Qnil, .candidates = Qnil, .seen = Qnil,
	.plain = Qnil };

static ID id_modules, id_app_methods_of, id_app_method, id_owners_of, id_own_methods, id_visibility_of,
    id_detached, id_detached_app, id_trace_detached, id_ignore_regexp, id_source_location, id_owner, id_name,
    id_instance_method, id_arity, id_bind_call, id_still_defined, id_found_all, id_files, id_file_verdict,
    id_app_methods_among, id_plain, id_own_visibility, id_boxed, id_box_only;

uint64_t
trc_plan_now(void)
{
	return trc_clock_mono_ns();
}

static VALUE
wrap_module(void)
{
	return rb_const_get(trc_wrap_agent(), rb_intern("Wrap"));
}

/* ---- calling wrap.rb, every exception rescued ---- */

struct ruby_call {
	VALUE recv;
	ID mid;
	int argc;
	const VALUE *argv;
};

static VALUE
ruby_call_run(VALUE arg)
{
	const struct ruby_call *c = (const struct ruby_call *)arg;
	return rb_funcallv(c->recv, c->mid, c->argc, c->argv);
}

/* recv.mid(*argv), or Qundef when it raised (the exception is dropped). */
static VALUE
call(VALUE recv, ID mid, int argc, const VALUE *argv)
{
	struct ruby_call c = { recv, mid, argc, argv };
	int state = 0;
	VALUE v = rb_protect(ruby_call_run, (VALUE)&c, &state);

	if (state) {
		rb_set_errinfo(Qnil);
		return Qundef;
	}
	return v;
}

static VALUE
wrap_call(ID mid, int argc, const VALUE *argv)
{
	return call(wrap_module(), mid, argc, argv);
}

/* ---- methods -m names ---- */

static int
native(VALUE loc)
{
	VALUE path;

	if (!RB_TYPE_P(loc, T_ARRAY) || RARRAY_LEN(loc) < 2)
		return 1;
	path = RARRAY_AREF(loc, 0);
	return !RB_TYPE_P(path, T_STRING) || strncmp(RSTRING_PTR(path), "<internal:", 10) == 0;
}

/* Adds name to what r says was left out for reason. */
static void
skip(struct trc_spec_result *r, ID mid, const char *reason)
{
	VALUE key = rb_str_new_cstr(reason), names;

	if (NIL_P(r->skipped))
		r->skipped = rb_hash_new();
	if (NIL_P(names = rb_hash_aref(r->skipped, key)))
		rb_hash_aset(r->skipped, key, names = rb_ary_new());
	rb_ary_push(names, rb_id2str(mid));
}

static VALUE
spec_exprs(const struct trc_spec *sp)
{
	VALUE list = rb_ary_new_capa(sp->nexpr);

	for (int i = 0; i < sp->nexpr; i++)
		rb_ary_push(list, sp->exprs[i]);
	return list;
}

/*
 * The method a spec names may come from elsewhere (Issue.find is ActiveRecord's, from a module
 * the class extends): it is traced for the class named, and shown so, and r says where it is
 * from.
 */
static void
note_owner(struct trc_spec_result *r, VALUE named, ID mid, VALUE um)
{
	VALUE from = call(um, id_owner, 0, NULL), label;
	char sep = '#';

	if (from == Qundef || from == named || (!RB_TYPE_P(from, T_MODULE) && !RB_TYPE_P(from, T_CLASS)))
		return;
	label = trc_module_label(from, &sep);
	if (NIL_P(r->note))
		r->note = rb_str_new_cstr("defined in ");
	else
		rb_str_cat_cstr(r->note, ", ");
	rb_str_catf(r->note, "%"PRIsVALUE"%c%"PRIsVALUE, label, sep, rb_id2str(mid));
}

/*
 * Wraps owner's method mid (of the given visibility) for spec i. um: its UnboundMethod, for
 * where it is defined. Returns 1 if wrapped.
 */
static int
select_one(VALUE owner, ID mid, int visibility, VALUE um, int i, struct trc_spec_result *r)
{
	VALUE loc = call(um, id_source_location, 0, NULL), arity = call(um, id_arity, 0, NULL);
	VALUE exprs = Qnil, why = Qnil;
	const struct trc_spec *sp = &plan.specs[i];
	const char *refusal;
	uint32_t m;

	if (trc_method_find(owner, mid) != UINT32_MAX)
		return 1;       /* an earlier spec took it */
	if (loc == Qundef)
		loc = Qnil;
	if ((refusal = trc_wrap_refusal(owner, mid, native(loc))) != NULL) {
		skip(r, mid, refusal);
		return 0;
	}
	m = NIL_P(loc) ? trc_method_intern(owner, mid, Qnil, 0, i) :
	    trc_method_intern(owner, mid, RARRAY_AREF(loc, 0), NUM2INT(RARRAY_AREF(loc, 1)), i);
	if (m == UINT32_MAX) {
		r->why = rb_str_new_cstr("too many methods");
		return 0;
	}
	if (sp->nexpr > 0 && NIL_P(exprs = trc_wrap_expressions(owner, mid, spec_exprs(sp), &why))) {
		r->why = why;
		return 0;
	}
	if (trc_wrap_put(owner, mid, visibility, FIXNUM_P(arity) ? FIX2INT(arity) : -1, m, plan.gen, exprs, &why) < 0) {
		r->why = why;
		return 0;
	}
	if (sp->mid != 0)
		note_owner(r, owner, mid, um);
	plan.wrapped++;
	return 1;
}

/*
 * The UnboundMethod of mod's own method mid, or Qnil: Module#instance_method called on mod
 * through bind_call, which leaves no call cache in mod's class (wrap.rb says why).
 */
static VALUE
own_method(VALUE mod, ID mid)
{
	VALUE argv[2] = { mod, ID2SYM(mid) }, im = rb_const_get(wrap_module(), rb_intern("INSTANCE_METHOD"));
	VALUE um = call(im, id_bind_call, 2, argv);

	return um == Qundef ? Qnil : um;
}

/* Wraps, for spec i, mod's methods named mid (every one of mod's own when mid is 0). */
static int
select_in(int i, VALUE mod, ID mid, struct trc_spec_result *r)
{
	VALUE names;
	int n = 0;

	if (mid != 0) {
		VALUE argv[3] = { mod, ID2SYM(mid), Qtrue }, visibility = wrap_call(id_visibility_of, 3, argv);
		names = rb_ary_new_from_args(2, ID2SYM(mid), FIXNUM_P(visibility) ? visibility : INT2FIX(0));
	} else if ((names = wrap_call(id_own_methods, 1, &mod)) == Qundef) {
		return 0;
	}
	for (long j = 0; j + 1 < RARRAY_LEN(names); j += 2) {
		ID name = SYM2ID(RARRAY_AREF(names, j));
		VALUE um = own_method(mod, name);

		if (!NIL_P(um))
			n += select_one(mod, name, FIX2INT(RARRAY_AREF(names, j + 1)), um, i, r);
	}
	RB_GC_GUARD(names);
	return n;
}

/* Methods named mid of owner (Qnil: any) that no table holds any more (Sinatra's routes). */
static int
select_detached(int i, VALUE owner, ID mid, struct trc_spec_result *r)
{
	VALUE argv[2] = { owner, ID2SYM(mid) }, ums = wrap_call(id_detached, 2, argv);
	int n = 0;

	if (ums == Qundef)
		return 0;
	for (long k = 0; k < RARRAY_LEN(ums); k++) {
		VALUE um = RARRAY_AREF(ums, k), loc = call(um, id_source_location, 0, NULL);
		VALUE mod = call(um, id_owner, 0, NULL), tp, targv[2];
		uint32_t m;

		if (mod == Qundef || loc == Qundef)
			continue;
		m = NIL_P(loc) ? trc_method_intern(mod, mid, Qnil, 0, i) :
		    trc_method_intern(mod, mid, RARRAY_AREF(loc, 0), NUM2INT(RARRAY_AREF(loc, 1)), i);
		if (m == UINT32_MAX) {
			r->why = rb_str_new_cstr("too many methods");
			break;
		}
		targv[0] = um;
		targv[1] = ULL2NUM(trc_wrap_token(plan.gen, m));
		if ((tp = wrap_call(id_trace_detached, 2, targv)) == Qundef)
			continue;
		rb_ary_push(plan.tracepoints, tp);
		n++;
	}
	return n;
}

/*
 * The class a spec names, or Qnil: under Ruby::Box (4.0) one that is no constant of the agent's
 * box may be one of another box of the app's, which r's note then names (wrap.rb, boxed).
 */
static VALUE
spec_class(const struct trc_spec *sp, struct trc_spec_result *r)
{
	VALUE found;

	if (!NIL_P(sp->klass) || NIL_P(sp->name))
		return sp->klass;
	found = wrap_call(id_boxed, 1, &sp->name);
	if (!RB_TYPE_P(found, T_ARRAY) || RARRAY_LEN(found) != 2)
		return Qnil;
	r->note = rb_sprintf("the class of %"PRIsVALUE", traced as that box sees it", RARRAY_AREF(found, 1));
	return RARRAY_AREF(found, 0);
}

static int
select_spec(int i, struct trc_spec_result *r)
{
	const struct trc_spec *sp = &plan.specs[i];
	VALUE mods, klass = Qnil;
	int n = 0;

	switch (sp->kind) {
	case TRC_SPEC_ANY: {
		VALUE name = ID2SYM(sp->mid);
		if ((mods = wrap_call(id_owners_of, 1, &name)) == Qundef)
			return 0;
		break;
	}
	case TRC_SPEC_SINGLETON:
		if (NIL_P(klass = spec_class(sp, r)))
			goto pending;
		mods = rb_ary_new_from_args(1, rb_singleton_class(klass));
		break;
	default:
		if (NIL_P(klass = spec_class(sp, r)))
			goto pending;
		mods = rb_ary_new_from_args(1, klass);
		break;
	}
	for (long k = 0; k < RARRAY_LEN(mods); k++)
		n += select_in(i, RARRAY_AREF(mods, k), sp->mid, r);
	if (n == 0 && sp->mid != 0 && NIL_P(r->skipped))
		n = select_detached(i, sp->kind == TRC_SPEC_ANY ? Qnil : RARRAY_AREF(mods, 0), sp->mid, r);
	if (n == 0 && sp->mid != 0 && NIL_P(r->why) && !NIL_P(klass)) {
		/* Ruby::Box: a builtin class that has the method in another box only. */
		VALUE argv[3] = { klass, ID2SYM(sp->mid), sp->kind == TRC_SPEC_SINGLETON ? Qtrue : Qfalse };
		VALUE why = wrap_call(id_box_only, 3, argv);

		if (RB_TYPE_P(why, T_STRING))
			r->why = why;
	}
	RB_GC_GUARD(mods);
	RB_GC_GUARD(klass);
	return n;
pending:
	r->pending = 1;
	r->why = rb_sprintf("no class or module named %"PRIsVALUE" yet: its methods are traced once it is defined",
	    sp->name);
	return 0;
}

static int
skipped_i(VALUE reason, VALUE names, VALUE out)
{
	if (RSTRING_LEN(out) > 0)
		rb_str_cat_cstr(out, "; ");
	rb_str_append(out, rb_ary_join(names, rb_str_new_cstr(", ")));
	rb_str_catf(out, " (%"PRIsVALUE")", reason);
	return ST_CONTINUE;
}

/* "block_given?, binding (it reads its caller's frame...); object_id (...)" */
static VALUE
skipped_text(VALUE skipped)
{
	VALUE out = rb_str_new_cstr("");

	rb_hash_foreach(skipped, skipped_i, out);
	return out;
}

/* ---- the app's own methods ---- */

static int
same_name(VALUE mod, VALUE name)
{
	VALUE path;

	if (NIL_P(name) || !(RB_TYPE_P(mod, T_CLASS) || RB_TYPE_P(mod, T_MODULE)))
		return 0;
	path = rb_mod_name(mod);
	return !NIL_P(path) && rb_str_equal(path, name) == Qtrue;
}

/*
 * The VM's basic operations (tracer_protocol.h): wrapping one, even the app's own definition
 * of it, leaves it on its slow path for good. -m asks first (the client); the app-wide modes
 * leave them out.
 */
static const struct {
	const char *cls, *ops;
} basic_ops[] = {
#define TRC_OP(cls, list) { cls, list },
	TRC_BASIC_OPS(TRC_OP)
#undef TRC_OP
};
static VALUE basic_op_classes[sizeof(basic_ops) / sizeof(basic_ops[0])];

static int
basic_op(VALUE owner, ID mid)
{
	const char *name = rb_id2name(mid);
	size_t n;

	if (name == NULL || !RB_TYPE_P(owner, T_CLASS))
		return 0;
	n = strlen(name);
	for (size_t i = 0; i < sizeof(basic_ops) / sizeof(basic_ops[0]); i++) {
		if (basic_op_classes[i] == 0)
			basic_op_classes[i] = rb_path2class(basic_ops[i].cls);
		if (owner != basic_op_classes[i])
			continue;
		for (const char *p = basic_ops[i].ops; (p = strstr(p, name)) != NULL; p++)
			if (p[-1] == ' ' && p[n] == ' ')
				return 1;
	}
	return 0;
}

/* Wraps one entry of found (ENTRY values from e); 1 if wrapped. */
static int
wrap_entry(const VALUE *e)
{
	VALUE owner = e[0], why, tp, targv[2];
	ID mid = SYM2ID(e[1]);
	int visibility = FIX2INT(e[2]);
	uint32_t m;

	if (visibility < 0) {   /* an UnboundMethod no table holds: a TracePoint on it */
		VALUE mod = call(owner, id_owner, 0, NULL);
		if (mod == Qundef || (m = trc_method_intern(mod, mid, e[4], FIX2INT(e[5]), -2)) == UINT32_MAX)
			return 0;
		targv[0] = owner;
		targv[1] = ULL2NUM(trc_wrap_token(plan.gen, m));
		if ((tp = wrap_call(id_trace_detached, 2, targv)) == Qundef)
			return 0;
		rb_ary_push(plan.tracepoints, tp);
		return 1;
	}
	if (trc_wrap_refusal(owner, mid, 0) != NULL || basic_op(owner, mid))
		return 0;
	if (plan.found_known) {
		VALUE argv[2] = { owner, e[1] };
		if (!RTEST(wrap_call(id_still_defined, 2, argv)))
			return 0;
	}
	if ((m = trc_method_intern(owner, mid, e[4], FIX2INT(e[5]), -2)) == UINT32_MAX)
		return 0;
	return trc_wrap_put(owner, mid, visibility, FIX2INT(e[3]), m, plan.gen, Qnil, &why) == 0;
}

/* Whether spec sp names method mid just defined in mod. */
static int
spec_defines(const struct trc_spec *sp, VALUE mod, ID mid)
{
	int singleton = FL_TEST(mod, FL_SINGLETON) != 0;
	VALUE cls;

	if (sp->mid != 0 && sp->mid != mid)
		return 0;
	if (sp->kind == TRC_SPEC_ANY)
		return 1;
	if ((sp->kind == TRC_SPEC_SINGLETON) != singleton)
		return 0;
	cls = singleton ? trc_attached_object(mod) : mod;
	return cls == sp->klass || same_name(cls, sp->name);
}

/* mod's method mid, defined after the plan began: wrapped if a spec or the scope wants it. */
static void
defined_now(VALUE mod, ID mid)
{
	VALUE argv[5], where;
	struct trc_spec_result r = { 0, 0, Qnil, Qnil, Qnil };

	for (int i = 0; i < plan.nspecs; i++) {
		VALUE um;

		if (!spec_defines(&plan.specs[i], mod, mid))
			continue;
		argv[0] = mod;
		argv[1] = ID2SYM(mid);
		where = wrap_call(id_visibility_of, 2, argv);
		if (!NIL_P(um = own_method(mod, mid)) && FIXNUM_P(where))
			select_one(mod, mid, FIX2INT(where), um, i, &r);
		return;
	}
	if (plan.scope == NULL)
		return;
	argv[0] = mod;
	argv[1] = ID2SYM(mid);
	argv[2] = plan.scope->prefix_list;
	argv[3] = plan.cwd;
	argv[4] = plan.ignore;
	where = wrap_call(id_app_method, 5, argv);
	if (RB_TYPE_P(where, T_ARRAY) && RARRAY_LEN(where) == 4) {
		VALUE e[ENTRY] = { mod, ID2SYM(mid), RARRAY_AREF(where, 0), RARRAY_AREF(where, 1), RARRAY_AREF(where, 2),
				   RARRAY_AREF(where, 3) };
		plan.wrapped += wrap_entry(e);
	}
}

/* What a scope is, for telling whether what was found for one holds for another. */
static VALUE
scope_key(void)
{
	return rb_ary_new_from_args(3, plan.scope->prefix_list, plan.scope->ignore_list, plan.cwd);
}

/* ---- every module, from the heap ---- */

static void
pages_forget(void)
{
	free(plan.pages);
	plan.pages = NULL;
	plan.npages = plan.pages_cap = 0;
}

static size_t
page_slot(uintptr_t page, size_t cap)
{
	return (size_t)(((uint64_t)page >> 12) * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
}

/*
 * Adds page to the set of those walked: 1, 0 if it was there already, -1 if it was not and
 * there is no room for it.
 */
static int
page_add(uintptr_t page)
{
	size_t i;

	if (plan.pages_cap != 0) {
		for (i = page_slot(page, plan.pages_cap); plan.pages[i] != 0; i = (i + 1) & (plan.pages_cap - 1))
			if (plan.pages[i] == page)
				return 0;
	}
	if ((plan.npages + 1) * 2 > plan.pages_cap) {
		size_t cap = plan.pages_cap ? plan.pages_cap * 2 : 4096;
		uintptr_t *v = calloc(cap, sizeof(*v));

		if (v == NULL)
			return -1;
		for (size_t j = 0; j < plan.pages_cap; j++) {
			if (plan.pages[j] == 0)
				continue;
			for (i = page_slot(plan.pages[j], cap); v[i] != 0; i = (i + 1) & (cap - 1))
				;
			v[i] = plan.pages[j];
		}
		free(plan.pages);
		plan.pages = v;
		plan.pages_cap = cap;
	}
	for (i = page_slot(page, plan.pages_cap); plan.pages[i] != 0; i = (i + 1) & (plan.pages_cap - 1))
		;
	plan.pages[i] = page;
	plan.npages++;
	return 1;
}

static void
modules_forget(void)
{
	free(plan.modules);
	plan.modules = NULL;
	plan.nmodules = plan.modules_cap = 0;
	plan.next = 0;
	plan.walked = 0;
	plan.walk_begun = 0;
	plan.walk_begun_entries = 0;
	pages_forget();
	free(plan.entries);
	plan.entries = NULL;
	plan.nentries = plan.entries_cap = plan.next_entry = 0;
	plan.by_entries = 0;
	memset(plan.probes, 0, sizeof(plan.probes));
	plan.files = plan.candidates = plan.seen = plan.plain = Qnil;
	plan.next_candidate = 0;
}

static void
modules_add(VALUE mod)
{
	if (plan.nmodules == plan.modules_cap) {
		size_t cap = plan.modules_cap ? plan.modules_cap * 2 : 1024;
		VALUE *v = trc_realloc(plan.modules, cap * sizeof(*v));
		if (v == NULL)
			return;         /* a module left out: its methods are not traced */
		plan.modules = v;
		plan.modules_cap = cap;
	}
	plan.modules[plan.nmodules++] = mod;
}

#ifdef FIND_BY_ENTRIES
/*
 * Finding the app's methods by the heap's method entries. Ruby's reflection asks each method
 * for its file through an UnboundMethod and a location Array: for a Rails worker's 50,000
 * methods, 100,000 objects, a GC or two, and thousands of copy-on-write faults on the pages of
 * a heap shared with the preloader; its first session's find cost more than all the rest of
 * the install. The heap walk that lists the modules also sees every method entry (an imemo of
 * Ruby's), whose owner, name and code Ruby's own rb_resolve_me_location reads without making
 * anything. So only the methods in the app's files are candidates, and most of those are
 * checked here (checked_in_c); the rest go to wrap.rb, which checks each as it always has
 * (app_methods_among).
 *
 * An entry's head is the same from Ruby 2.3 to 3.4 (rb_method_entry_t in method.h), and so are
 * the imemo type and the first bits of its definition (the method's type) read here. Nothing
 * is read of any other entry before the walk has found wrap.rb's Probe's methods and Module's
 * own and read each as it must (entries_usable); when it has not, the find asks wrap.rb about
 * each module instead (find).
 */
struct entry_view {
	VALUE flags;
	VALUE defined_class;
	const void *def;        /* rb_method_definition_t: its first 4 bits, the method's type */
	ID called_id;
	VALUE owner;
};

enum {
	IMEMO_MENT = 6,
	TYPE_ISEQ = 0, TYPE_CFUNC = 1, TYPE_ATTRSET = 2, TYPE_IVAR = 3, TYPE_BMETHOD = 4,
	TYPE_ZSUPER = 5, TYPE_ALIAS = 6, TYPE_REFINED = 11,
};

/* Probe#probe_method, #probe_reader, #probe_writer= and Module#instance_method: their entries
 * must read as these types. */
static const int probe_types[4] = { TYPE_ISEQ, TYPE_IVAR, TYPE_ATTRSET, TYPE_CFUNC };
static VALUE probe_owner[4], probe_file, wrappers_class, refinement_class, holder;
static ID probe_id[4];

static const struct entry_view *
view(VALUE entry)
{
	return (const struct entry_view *)entry;
}

static int
def_type(const struct entry_view *e)
{
	return (int)(*(const unsigned int *)e->def & 0xf);
}

/* An attr_reader's or attr_writer's [path, line] (rb_method_attr_t), or a non-Array. */
static VALUE
attr_location(const struct entry_view *e)
{
	return ((const VALUE *)e->def)[2];
}

static void
entries_add(VALUE entry)
{
	const struct entry_view *e = view(entry);

	if (plan.nentries == plan.entries_cap) {
		size_t cap = plan.entries_cap ? plan.entries_cap * 2 : 16384;
		VALUE *v = trc_realloc(plan.entries, cap * sizeof(*v));

		if (v == NULL) {
			plan.by_entries = 0;   /* the modules, then, as before */
			return;
		}
		plan.entries = v;
		plan.entries_cap = cap;
	}
	plan.entries[plan.nentries++] = entry;
	for (int k = 0; k < 4; k++)
		if (e->owner == probe_owner[k] && e->called_id == probe_id[k])
			plan.probes[k] = plan.nentries;
}

static VALUE
probe(int k)
{
	return plan.entries[plan.probes[k] - 1];
}

/* Whether the probes were found, and read as they must. */
static int
entries_usable(void)
{
	VALUE loc[5];

	for (int k = 0; k < 4; k++) {
		const struct entry_view *e;

		if (plan.probes[k] == 0)
			return 0;
		e = view(probe(k));
		if (e->def == NULL || def_type(e) != probe_types[k])
			return 0;
	}
	for (int k = 1; k <= 2; k++) {
		VALUE at = attr_location(view(probe(k)));

		if (!RB_TYPE_P(at, T_ARRAY) || RARRAY_LEN(at) < 1 || rb_str_equal(RARRAY_AREF(at, 0), probe_file) != Qtrue)
			return 0;
	}
	return rb_resolve_me_location(view(probe(0)), loc) != NULL && RB_TYPE_P(loc[0], T_STRING) &&
	    rb_str_equal(loc[0], probe_file) == Qtrue;
}

/* Whether a method of owner may be the app's: not the agent's, nor a refinement's, nor of a
 * singleton class other than a module's (wrap.rb's modules and app_methods_of, likewise). */
static int
app_owner(VALUE owner)
{
	VALUE mod = owner, k;

	if (RB_SPECIAL_CONST_P(owner) || (BUILTIN_TYPE(owner) != T_CLASS && BUILTIN_TYPE(owner) != T_MODULE))
		return 0;
	if (FL_TEST_RAW(owner, FL_SINGLETON)) {
		mod = trc_attached_object(owner);
		if (RB_SPECIAL_CONST_P(mod) || (BUILTIN_TYPE(mod) != T_CLASS && BUILTIN_TYPE(mod) != T_MODULE) ||
		    FL_TEST_RAW(mod, FL_SINGLETON))
			return 0;
	}
	k = RBASIC_CLASS(mod);
	return k != 0 && k != wrappers_class && (refinement_class == Qnil || k != refinement_class) && mod != holder;
}

/* What wrap.rb makes of a file: its absolute path if the app's, else nil; Qundef if it raised. */
static VALUE
file_verdict(VALUE file)
{
	VALUE v = rb_hash_lookup2(plan.files, file, Qundef), argv[3];

	if (v != Qundef)
		return v;
	argv[0] = file;
	argv[1] = plan.scope->prefix_list;
	argv[2] = plan.cwd;
	return wrap_call(id_file_verdict, 3, argv);
}

static VALUE
arity_run(VALUE arg)
{
	const struct entry_view *e = (const struct entry_view *)arg;

	return INT2FIX(rb_mod_method_arity(e->owner, e->called_id));
}

/* Whether name was checked already for owner, as wrap.rb's app_methods_among keeps it in seen;
 * it is from now on. */
static int
seen_before(VALUE owner, VALUE name)
{
	VALUE names = rb_hash_lookup2(plan.seen, owner, Qnil);

	if (NIL_P(names)) {
		names = rb_hash_new();
		rb_hash_aset(plan.seen, owner, names);
	} else if (RTEST(rb_hash_lookup2(names, name, Qfalse))) {
		return 1;
	}
	rb_hash_aset(names, name, Qtrue);
	return 0;
}

/*
 * The check wrap.rb's app_methods_among makes of a candidate, made here for a method with
 * code (ISEQ, or a block's) at path and line, when no ignore applies and owner is plain? (no
 * module prepended to it but the agent's): its owner still defines it (it may have been
 * removed, or defined again, since this entry was made), with this visibility, and what
 * instance_method finds under its name is owner's own, of this arity. The same answers, from
 * wrap.rb's own_visibility and rb_mod_method_arity, with no object made: in Ruby, a fresh
 * Redmine worker's 5,000 candidates made 13,000 objects, and 1,500 copy-on-write faults
 * (docs/performance.md). Where owner defines the method again elsewhere in the app, the path
 * and line are this entry's. Returns 0 when wrap.rb must check it instead.
 */
static int
checked_in_c(const struct entry_view *e, VALUE path, VALUE line)
{
	VALUE owner = e->owner, name = ID2SYM(e->called_id), plain, argv[2], visibility, arity;
	int state = 0;

	if (!NIL_P(plan.ignore) || NIL_P(plan.plain))
		return 0;
	if ((plain = rb_hash_lookup2(plan.plain, owner, Qundef)) == Qundef) {
		if ((plain = wrap_call(id_plain, 1, &owner)) == Qundef)
			plain = Qfalse;
		rb_hash_aset(plan.plain, owner, RTEST(plain) ? Qtrue : Qfalse);
	}
	if (!RTEST(plain))
		return 0;
	if (seen_before(owner, name))
		return 1;
	argv[0] = owner;
	argv[1] = name;
	if (!FIXNUM_P(visibility = wrap_call(id_own_visibility, 2, argv)))
		return 1;       /* no longer owner's own, or it raised */
	arity = rb_protect(arity_run, (VALUE)e, &state);
	if (state) {
		rb_set_errinfo(Qnil);
		return 1;
	}
	rb_ary_push(plan.found, owner);
	rb_ary_push(plan.found, name);
	rb_ary_push(plan.found, visibility);
	rb_ary_push(plan.found, arity);
	rb_ary_push(plan.found, path);
	rb_ary_push(plan.found, line);
	return 1;
}

/* One method entry: a candidate if its code lies in one of the app's files. */
static void
consider(VALUE entry)
{
	const struct entry_view *e = view(entry);
	VALUE loc[5], file, verdict;
	int type;

	if (e->def == NULL || !app_owner(e->owner))
		return;
	/* A module's method, copied for a class that calls it: its module's own is there too. */
	if (BUILTIN_TYPE(e->owner) == T_MODULE && e->defined_class != 0)
		return;
	switch ((type = def_type(e))) {
	case TYPE_ISEQ:
	case TYPE_BMETHOD:
	case TYPE_ALIAS:
	case TYPE_REFINED:
		if (rb_resolve_me_location(e, loc) == NULL)
			return;
		file = loc[0];
		break;
	case TYPE_ATTRSET:
	case TYPE_IVAR:
		file = attr_location(e);
		if (!RB_TYPE_P(file, T_ARRAY) || RARRAY_LEN(file) < 1)
			return;
		file = RARRAY_AREF(file, 0);
		break;
	case TYPE_ZSUPER:
		/* An inherited method made public or private here: Ruby 3.2 and later take it for
		 * the class's own, with the superclass's file. wrap.rb decides. */
		goto candidate;
	default:
		return;         /* a C function's, or no code */
	}
	if (!RB_TYPE_P(file, T_STRING) || (verdict = file_verdict(file)) == Qundef || NIL_P(verdict))
		return;
	if ((type == TYPE_ISEQ || type == TYPE_BMETHOD) && checked_in_c(e, verdict, loc[1])) {
		RB_GC_GUARD(entry);     /* (no longer marked with the entries: see trc_plan_mark) */
		return;
	}
candidate:
	rb_ary_push(plan.candidates, e->owner);
	rb_ary_push(plan.candidates, ID2SYM(e->called_id));
	RB_GC_GUARD(entry);
}

/* Sets the walk up to collect the entries, if wrap.rb's Probe is there to check them by. */
static void
entries_begin(void)
{
	const char *how = getenv("TRACER_AGENT_FIND");
	VALUE probe;

	/* The modules' find on demand: for a Ruby whose entries read right and mean otherwise. */
	if (how != NULL && strcmp(how, "modules") == 0)
		return;
	probe = rb_const_get(wrap_module(), rb_intern("Probe"));
	probe_owner[0] = probe_owner[1] = probe_owner[2] = probe;
	probe_id[0] = rb_intern("probe_method");
	probe_id[1] = rb_intern("probe_reader");
	probe_id[2] = rb_intern("probe_writer=");
	probe_owner[3] = rb_cModule;
	probe_id[3] = rb_intern("instance_method");
	plan.by_entries = 1;
}

/* What app_owner and entries_usable compare with (registered with the GC: GC.compact moves
 * none of them while the find compares with them). */
static void
entries_constants(void)
{
	VALUE wrap = wrap_module(), agent = trc_wrap_agent();

	wrappers_class = rb_const_get(agent, rb_intern("Wrappers"));
	holder = rb_const_get(wrap, rb_intern("HOLDER"));
	probe_file = rb_const_get(wrap, rb_intern("PROBE_FILE"));
	refinement_class = rb_const_defined(rb_cObject, rb_intern("Refinement")) ?
	    rb_const_get(rb_cObject, rb_intern("Refinement")) : Qnil;
}

/* After the walk: the entries' find begins, or the modules' if the entries cannot be read. */
static void
entries_walked(void)
{
	if (plan.by_entries)
		entries_constants();
	if (plan.by_entries && entries_usable()) {
		plan.files = wrap_call(id_files, 0, NULL);
		plan.candidates = rb_ary_new();
		plan.seen = rb_funcall(rb_hash_new(), rb_intern("compare_by_identity"), 0);
		plan.plain = rb_funcall(rb_hash_new(), rb_intern("compare_by_identity"), 0);
		if (plan.files == Qundef || !RB_TYPE_P(plan.files, T_HASH))
			plan.by_entries = 0;
	} else {
		plan.by_entries = 0;
	}
	if (!plan.by_entries) {
		free(plan.entries);
		plan.entries = NULL;
		plan.nentries = plan.entries_cap = 0;
		plan.files = plan.candidates = plan.seen = plan.plain = Qnil;
	}
}
#else
static void
entries_begin(void)
{
}

static void
entries_walked(void)
{
}
#endif

#ifdef HAVE_RB_OBJSPACE_EACH_OBJECTS
struct walk {
	VALUE wrappers;         /* TracerAgent::Wrappers: the agent's own, left out */
	uint64_t deadline;
	int walked_one;         /* this slice walked a page: the next may stop it */
	int stopped;            /* the deadline came: the rest waits for the next slice */
	int no_room;            /* the set of pages could not grow: this slice walks to the end */
};

/*
 * A page of the heap: its classes and modules, singleton classes and the agent's own left out;
 * a page walked by an earlier slice is passed over. Called by the VM with the heap as it is:
 * nothing here may allocate on Ruby's heap or run Ruby, so the lists are malloc'd (the modules
 * marked by trc_plan_mark from then on). A non-zero return ends the walk of this page's heap
 * (on Rubies with several, the others are still offered: each is passed over).
 */
static int
collect_modules(void *start, void *end, size_t stride, void *data)
{
	struct walk *w = data;

	if (w->stopped)
		return 1;
	if (w->walked_one && !w->no_room && trc_plan_now() >= w->deadline) {
		w->stopped = 1;
		return 1;
	}
	switch (page_add((uintptr_t)start)) {
	case 0:
		return 0;
	case -1:
		w->no_room = 1;   /* a page left out of the set must not be walked again later */
		break;
	}
	w->walked_one = 1;
	for (char *p = start; p != (char *)end; p += stride) {
		VALUE v = (VALUE)p;
		int t = (int)(RBASIC(v)->flags & RUBY_T_MASK);

		if ((t == RUBY_T_CLASS || t == RUBY_T_MODULE) && RBASIC_CLASS(v) != 0 &&
		    !FL_TEST_RAW(v, FL_SINGLETON) && RBASIC_CLASS(v) != w->wrappers && !vm_internal(v))
			modules_add(v);
#ifdef FIND_BY_ENTRIES
		else if (t == RUBY_T_IMEMO && plan.by_entries &&
		    ((RBASIC(v)->flags >> RUBY_FL_USHIFT) & 0xf) == IMEMO_MENT)
			entries_add(v);
#endif
	}
	return 0;
}

/*
 * Every class and module in the heap, walked in C (ObjectSpace.each_object ran a Ruby block
 * for each, 30 ms on a heap of 200,000 objects) and in slices: the walk of Redmine's heap of
 * some 760,000 slots took 15-73 ms in one go, during which no request ran. A slice walks pages
 * until the deadline; the next asks the VM for the heap again and passes over the pages it
 * walked (their order is the VM's, not their addresses'). A page that was emptied and filled
 * again meanwhile holds only what was made after the plan began, which trc_wrap_watch sees.
 * Returns whether the walk is over.
 */
static int
walk_modules(uint64_t deadline)
{
	struct walk w = { .deadline = deadline };

	w.wrappers = rb_const_get(trc_wrap_agent(), rb_intern("Wrappers"));
	rb_objspace_each_objects(collect_modules, &w);
	if (w.stopped)
		return 0;
	pages_forget();
	return 1;
}
#else
static int
walk_modules(uint64_t deadline)
{
	VALUE list = wrap_call(id_modules, 0, NULL);

	(void)deadline;
	for (long i = 0; list != Qundef && i < RARRAY_LEN(list); i++)
		modules_add(RARRAY_AREF(list, i));
	RB_GC_GUARD(list);
	return 1;
}
#endif

void
trc_plan_begin(const struct trc_spec *specs, int nspecs, const struct trc_scope *scope, uint64_t gen,
    struct trc_spec_result *results)
{
	plan.gen = gen;
	plan.specs = specs;
	plan.nspecs = nspecs;
	plan.scope = scope;
	plan.wrapped = 0;
	plan.remove_total = 0;
	plan.longest_step = 0;
	plan.tracepoints = rb_ary_new();
	plan.pending = rb_ary_new();
	plan.found = rb_ary_new();
	plan.found_known = 0;
	plan.next_found = 0;
	modules_forget();
	plan.cwd = Qnil;
	plan.ignore = Qnil;
	plan.phase = PHASE_FIND;
	for (int i = 0; i < nspecs; i++) {
		struct trc_spec_result *r = &results[i];

		r->pending = 0;
		r->why = r->skipped = r->note = Qnil;
		r->matched = select_spec(i, r);
		if (!NIL_P(r->skipped))
			r->skipped = skipped_text(r->skipped);
	}
	if (scope != NULL) {
		VALUE ignore = wrap_call(id_ignore_regexp, 1, &scope->ignore_list);

		plan.cwd = scope->cwd ? rb_str_new_cstr(scope->cwd) : Qnil;
		plan.ignore = ignore == Qundef ? Qnil : ignore;
		if (!NIL_P(plan.known) && plan.known_at == trc_wrap_definitions() &&
		    rb_equal(plan.known_scope, scope_key()) == Qtrue) {
			plan.found = rb_ary_dup(plan.known);
			plan.found_known = 1;
			plan.phase = PHASE_WRAP;   /* found already: nothing defined since */
		}
	} else {
		plan.phase = PHASE_WRAP;   /* nothing to find */
	}
	/* A class defined or reloaded from now on is matched too, and a method defined later. */
	if (scope != NULL || nspecs > 0)
		trc_wrap_watch();
}

/* The find is over: what it found is wrapped next, and kept for the next session. */
static void
found_all(void)
{
	modules_forget();
	wrap_call(id_found_all, 0, NULL);
	plan.found_count = RARRAY_LEN(plan.found) / ENTRY;
	plan.phase = PHASE_WRAP;
	plan.known = rb_ary_dup(plan.found);
	plan.known_scope = scope_key();
	plan.known_at = plan.found_at;
}

#ifdef FIND_BY_ENTRIES
/* The next entries, then the candidates they gave, until the deadline. */
static void
find_by_entries(uint64_t deadline)
{
	enum { ENTRIES = 256 };
	const long chunk = 2 * 64L;     /* 64 candidates, each an owner and a name */
	VALUE argv[5];

	while (plan.next_entry < plan.nentries && trc_plan_now() < deadline) {
		size_t end = plan.nentries - plan.next_entry > ENTRIES ? plan.next_entry + ENTRIES : plan.nentries;

		while (plan.next_entry < end)
			consider(plan.entries[plan.next_entry++]);
	}
	if (plan.next_entry < plan.nentries)
		return;
	while (plan.next_candidate < RARRAY_LEN(plan.candidates) && trc_plan_now() < deadline) {
		VALUE list;

		argv[0] = rb_ary_subseq(plan.candidates, plan.next_candidate, chunk);
		argv[1] = plan.seen;
		argv[2] = plan.scope->prefix_list;
		argv[3] = plan.cwd;
		argv[4] = plan.ignore;
		plan.next_candidate += chunk;
		if ((list = wrap_call(id_app_methods_among, 5, argv)) != Qundef && RB_TYPE_P(list, T_ARRAY))
			rb_ary_concat(plan.found, list);
	}
	if (plan.next_candidate >= RARRAY_LEN(plan.candidates))
		found_all();
}
#endif

/* Finds the app's methods in the next modules, until the deadline. */
static void
find(uint64_t deadline)
{
	VALUE argv[4];

	if (!plan.walk_begun) {
		VALUE detached;

		plan.walk_begun = 1;
		plan.found_at = trc_wrap_definitions();
		argv[0] = plan.scope->prefix_list;
		argv[1] = plan.cwd;
		argv[2] = plan.ignore;
		if ((detached = wrap_call(id_detached_app, 3, argv)) != Qundef)
			rb_ary_concat(plan.found, detached);
	}
	if (!plan.walked) {
		if (!plan.walk_begun_entries) {
			plan.walk_begun_entries = 1;
			entries_begin();
		}
		plan.walked = walk_modules(deadline);
		if (plan.walked) {
			entries_walked();
			plan.found_by = plan.by_entries ? "entries" : "modules";
		}
		return;         /* the heap walk's slices are slices of their own */
	}
#ifdef FIND_BY_ENTRIES
	if (plan.by_entries) {
		find_by_entries(deadline);
		return;
	}
#endif
	while (plan.next < plan.nmodules && trc_plan_now() < deadline) {
		VALUE list;

		argv[0] = plan.modules[plan.next++];
		argv[1] = plan.scope->prefix_list;
		argv[2] = plan.cwd;
		argv[3] = plan.ignore;
		if ((list = wrap_call(id_app_methods_of, 4, argv)) != Qundef && RB_TYPE_P(list, T_ARRAY))
			rb_ary_concat(plan.found, list);
	}
	if (plan.next >= plan.nmodules)
		found_all();
}

static void
wrap_found(uint64_t deadline)
{
	while (plan.next_found + ENTRY <= RARRAY_LEN(plan.found) && trc_plan_now() < deadline) {
		const VALUE *e = RARRAY_CONST_PTR(plan.found) + plan.next_found;

		plan.next_found += ENTRY;
		plan.wrapped += wrap_entry(e);
	}
}

static void
take_pending(void)
{
	VALUE list = plan.pending;

	plan.pending = rb_ary_new();
	for (long i = 0; i + 1 < RARRAY_LEN(list); i += 2)
		defined_now(RARRAY_AREF(list, i), SYM2ID(RARRAY_AREF(list, i + 1)));
	RB_GC_GUARD(list);
}

static int
before(void *deadline)
{
	return trc_plan_now() < *(uint64_t *)deadline;
}

static void
remove_tracepoints(void)
{
	static ID id_disable;

	if (!id_disable)
		id_disable = rb_intern("disable");
	for (long i = 0; !NIL_P(plan.tracepoints) && i < RARRAY_LEN(plan.tracepoints); i++)
		call(RARRAY_AREF(plan.tracepoints, i), id_disable, 0, NULL);
	plan.tracepoints = Qnil;
}

static int
step(uint64_t deadline);

int
trc_plan_step(uint64_t deadline)
{
	uint64_t start = trc_plan_now(), took;
	int done = step(deadline);

	if ((took = trc_plan_now() - start) > plan.longest_step)
		plan.longest_step = took;
	return done;
}

uint64_t
trc_plan_longest_step(void)
{
	return plan.longest_step;
}

static int
step(uint64_t deadline)
{
	switch (plan.phase) {
	case PHASE_IDLE:
		return 1;
	case PHASE_FIND:
		find(deadline);
		return 0;
	case PHASE_WRAP:
		wrap_found(deadline);
		if (plan.next_found + ENTRY <= RARRAY_LEN(plan.found))
			return 0;
		plan.found = rb_ary_new();
		plan.next_found = 0;
		plan.phase = PHASE_DONE;
		take_pending();
		return 1;
	case PHASE_DONE:
		return 1;
	case PHASE_REMOVE:
		remove_tracepoints();
		if (trc_wrap_remove_some(before, &deadline) > 0)
			return 0;
		plan.phase = PHASE_IDLE;
		plan.specs = NULL;
		plan.nspecs = 0;
		plan.scope = NULL;
		plan.cwd = plan.ignore = plan.pending = Qnil;
		return 1;
	}
	return 1;
}

void
trc_plan_end(void)
{
	if (plan.phase == PHASE_IDLE)
		return;
	plan.phase = PHASE_REMOVE;
	modules_forget();
	plan.found = Qnil;
	/* The session releases them next; removing needs none of them. */
	plan.specs = NULL;
	plan.nspecs = 0;
	plan.scope = NULL;
	plan.remove_total = (uint64_t)trc_wrapped();
	trc_wrap_live(0, NULL);
}

void
trc_plan_progress(int *step, uint64_t *done, uint64_t *total)
{
	switch (plan.phase) {
	case PHASE_FIND:
		*step = TRC_STEP_FIND;
		*done = (uint64_t)(plan.by_entries ? plan.next_entry : plan.next);
		*total = (uint64_t)(plan.by_entries ? plan.nentries : plan.nmodules);
		break;
	case PHASE_REMOVE:
		*step = TRC_STEP_REMOVE;
		*total = plan.remove_total;
		*done = plan.remove_total - (uint64_t)trc_wrapped();
		break;
	default:
		*step = TRC_STEP_WRAP;
		*done = NIL_P(plan.found) ? 0 : (uint64_t)plan.next_found / ENTRY;
		*total = NIL_P(plan.found) ? 0 : (uint64_t)RARRAY_LEN(plan.found) / ENTRY;
		break;
	}
}

const char *
trc_plan_found_by(long *count)
{
	*count = plan.found_count;
	return plan.found_by;
}

uint32_t
trc_plan_wrapped(void)
{
	return plan.wrapped;
}

/* A plan is under way or in place: definitions matter. */
static int
watching(void)
{
	return plan.phase == PHASE_FIND || plan.phase == PHASE_WRAP || plan.phase == PHASE_DONE;
}

/* The app defined mod's method mid: wrapped if the plan wants it (now, or in a step). */
static void
app_defined(VALUE mod, ID mid)
{
	if (plan.phase == PHASE_DONE)
		defined_now(mod, mid);
	else if (plan.phase == PHASE_FIND || plan.phase == PHASE_WRAP)
		rb_ary_push(rb_ary_push(plan.pending, mod), ID2SYM(mid));
}

void
trc_plan_mark(void)
{
	rb_gc_mark(plan.cwd);
	rb_gc_mark(plan.ignore);
	for (size_t i = plan.next; i < plan.nmodules; i++)
		rb_gc_mark(plan.modules[i]);
	for (size_t i = plan.next_entry; i < plan.nentries; i++)
		rb_gc_mark(plan.entries[i]);
	rb_gc_mark(plan.files);
	rb_gc_mark(plan.candidates);
	rb_gc_mark(plan.seen);
	rb_gc_mark(plan.plain);
	rb_gc_mark(plan.found);
	rb_gc_mark(plan.known);
	rb_gc_mark(plan.known_scope);
	rb_gc_mark(plan.pending);
	rb_gc_mark(plan.tracepoints);
}

void
trc_plan_init(void)
{
	id_modules = rb_intern("modules");
	id_app_methods_of = rb_intern("app_methods_of");
	id_app_method = rb_intern("app_method");
	id_owners_of = rb_intern("owners_of");
	id_boxed = rb_intern("boxed");
	id_box_only = rb_intern("box_only");
	id_own_methods = rb_intern("own_methods");
	id_visibility_of = rb_intern("visibility_of");
	id_detached = rb_intern("detached");
	id_detached_app = rb_intern("detached_app");
	id_trace_detached = rb_intern("trace_detached");
	id_ignore_regexp = rb_intern("ignore_regexp");
	id_source_location = rb_intern("source_location");
	id_owner = rb_intern("owner");
	id_name = rb_intern("name");
	id_instance_method = rb_intern("instance_method");
	id_arity = rb_intern("arity");
	id_bind_call = rb_intern("bind_call");
	id_still_defined = rb_intern("still_defined?");
	id_found_all = rb_intern("found_all");
	id_files = rb_intern("files");
	id_file_verdict = rb_intern("file_verdict");
	id_app_methods_among = rb_intern("app_methods_among");
	id_plain = rb_intern("plain?");
	id_own_visibility = rb_intern("own_visibility");
	trc_wrap_definitions_to(app_defined, watching);
#ifdef FIND_BY_ENTRIES
	for (int k = 0; k < 4; k++)
		rb_gc_register_address(&probe_owner[k]);
	rb_gc_register_address(&probe_file);
	rb_gc_register_address(&wrappers_class);
	rb_gc_register_address(&refinement_class);
	rb_gc_register_address(&holder);
#endif
}
