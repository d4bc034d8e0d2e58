/*
 * tracer_inject.c: what `tracer -p` has a Ruby process that never loaded the agent load first.
 *
 * tracer writes a postponed job into the process (client/inject/inject.c) whose function is libruby's
 * own dln_load and whose argument is this file's path: Ruby dlopens it and calls
 * Init_tracer_inject, at whatever safe point the thread that runs the job reached. Nothing here
 * may depend on that point. rb_eval_string, the job before this one, did: it compiles in the
 * scope of the interrupted frame, and Ruby 3.3 and later, inside `load` while the file is read,
 * have a frame there with no instruction sequence (SIGSEGV, 8 times in 1,000 loads in the
 * inject soak on 3.3). A job also runs with trap interrupts masked, where Mutex#lock, which
 * require takes, raises. So this only starts a Ruby thread of its own, which requires the
 * agent, lib/tracer_agent.rb beside this file's directory, and swallows whatever that raises.
 *
 * Built without Ruby's headers, for every Ruby: the four functions below have had these
 * signatures since Ruby 1.9, and the link is made at load (-z now), so that a Ruby without
 * one of them refuses the file (Ruby raises LoadError, which the job swallows) instead of
 * failing at the call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef uintptr_t VALUE;

VALUE rb_thread_create(VALUE (*fn)(void *), void *arg);
VALUE rb_require(const char *feature);
VALUE rb_protect(VALUE (*fn)(VALUE), VALUE arg, int *state);

/* Its name is how tracer tells that a load is under way (client/inject/inject.c). */
#define LOADER_THREAD "tracer-inject"

static char agent[PATH_MAX];

static VALUE
require_agent(VALUE unused)
{
	(void)unused;
	return rb_require(agent);
}

static VALUE
loader(void *unused)
{
	int state = 0;

	(void)unused;
	pthread_setname_np(pthread_self(), LOADER_THREAD);
	rb_protect(require_agent, 0, &state);
	return 0;
}

/* The agent's path from this file's own: DIR/tracer_agent/tracer_inject.so -> DIR/tracer_agent.rb. */
static int
agent_path(void)
{
	Dl_info info;
	char *slash;
	size_t len;

	if (dladdr((void *)agent_path, &info) == 0 || info.dli_fname == NULL)
		return -1;
	len = strlen(info.dli_fname);
	if (len >= sizeof(agent))
		return -1;
	memcpy(agent, info.dli_fname, len + 1);
	if ((slash = strrchr(agent, '/')) == NULL)
		return -1;
	*slash = '\0';
	if ((slash = strrchr(agent, '/')) == NULL)
		return -1;
	len = (size_t)(slash - agent);
	if (len + sizeof("/tracer_agent.rb") > sizeof(agent))
		return -1;
	memcpy(slash, "/tracer_agent.rb", sizeof("/tracer_agent.rb"));
	return 0;
}

void Init_tracer_inject(void);

void
Init_tracer_inject(void)
{
	if (agent_path() == 0)
		rb_thread_create(loader, NULL);
}
