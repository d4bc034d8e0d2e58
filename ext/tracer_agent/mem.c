/* mem.c: the agent's memory: allocations whose failure is counted, and room under RLIMIT_AS. */
#include "mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static uint64_t failures;

static void *
counted(void *p)
{
	if (p == NULL)
		__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
	return p;
}

void *
trc_malloc(size_t n)
{
	return counted(malloc(n));
}

void *
trc_calloc(size_t count, size_t size)
{
	return counted(calloc(count, size));
}

void *
trc_realloc(void *p, size_t n)
{
	return counted(realloc(p, n));
}

char *
trc_strdup(const char *s)
{
	return counted(strdup(s));
}

char *
trc_strndup(const char *s, size_t n)
{
	return counted(strndup(s, n));
}

char *
trc_memdup(const char *s, size_t n)
{
	char *p = trc_malloc(n + 1);    /* n: a Ruby string's length, far below SIZE_MAX */

	if (p != NULL) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

void
trc_mem_failed(void)
{
	__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
}

uint64_t
trc_mem_failures(void)
{
	return __atomic_load_n(&failures, __ATOMIC_RELAXED);
}

/* The process's mapped address space, in bytes: /proc/self/statm's first field (pages). */
static size_t
mapped(void)
{
	char text[64];
	unsigned long pages;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f == NULL)
		return 0;
	pages = fgets(text, sizeof(text), f) != NULL ? strtoul(text, NULL, 10) : 0;
	fclose(f);
	return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

size_t
trc_mem_room(void)
{
	struct rlimit rl;
	size_t used;

	if (getrlimit(RLIMIT_AS, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return SIZE_MAX;
	used = mapped() + TRC_MEM_RESERVE;
	return rl.rlim_cur > used ? (size_t)(rl.rlim_cur - used) : 0;
}
