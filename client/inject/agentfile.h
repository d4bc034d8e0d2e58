/* agentfile.h: the agent a process is to load: safe to load, the same file there, built for its Ruby. */
#ifndef TRC_AGENTFILE_H
#define TRC_AGENTFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "rubyproc.h"

/* Beside the agent's library, written when it is built: the Ruby it was built by ("3.1.2"). */
#define TRC_AGENTFILE_BUILT_FOR "tracer_agent/built_for"

struct trc_agentfile {
	char rb[PATH_MAX + 32];         /* lib/tracer_agent.rb, canonical: what the process requires */
	char loader[PATH_MAX + 32];     /* lib/tracer_agent/tracer_inject.so: what the job loads */
	char so[PATH_MAX + 32];         /* lib/tracer_agent/tracer_agent.so */
};

/*
 * Whether lib (a directory given as the agent's) holds a built agent: tracer_agent.rb, the
 * library and, when loader, tracer_inject.so. Returns 0, or -1 with why set to one line that
 * names the missing file and how to get it.
 */
int trc_agentfile_missing(const char *lib, bool loader, char *why, size_t whylen);

/*
 * Checks the agent in lib (a directory holding tracer_agent.rb; NULL: none found) for the Ruby
 * r found in a process whose user is owner: every file the process would load, and every
 * directory above them, can be changed only by root or owner; the process sees the same files
 * at the same paths (a container's file system may not); and the library was built for that
 * Ruby (it needs the libruby the process has, or, for a static Ruby, was built by the same
 * series). Returns 0 with a filled, or -1 with why set to one line.
 */
int trc_agentfile_check(struct trc_agentfile *a, const char *lib, const struct trc_rubyproc *r,
			uid_t owner, char *why, size_t whylen);

#endif
