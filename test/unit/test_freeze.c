/*
 * test_freeze.c: a child with two spinning threads held still and let go: none of them runs
 * while frozen, a signal sent meanwhile arrives after, and nothing is left traced.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "freeze.h"
#include "test.h"

struct shared {
	volatile unsigned long spins[2];
	volatile int got_usr1;
	volatile int ready;
};

static struct shared *sh;

static void
on_usr1(int sig)
{
	(void)sig;
	sh->got_usr1 = 1;
}

static void *
spin(void *arg)
{
	volatile unsigned long *n = arg;

	for (;;)
		(*n)++;
	return NULL;
}

static void
child(void)
{
	pthread_t t;

	signal(SIGUSR1, on_usr1);
	pthread_create(&t, NULL, spin, (void *)&sh->spins[1]);
	sh->ready = 1;
	spin((void *)&sh->spins[0]);
}

static void
pause_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Whether both threads move within a few seconds. */
static int
moving(void)
{
	unsigned long a = sh->spins[0], b = sh->spins[1];

	for (int i = 0; i < 500; i++) {
		pause_ms(10);
		if (sh->spins[0] != a && sh->spins[1] != b)
			return 1;
	}
	return 0;
}

static char
state(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (p == NULL)
		return '?';
	return p[2];
}

static int
traced(pid_t pid)
{
	char path[64], line[128];
	int tracer = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "TracerPid:", 10) == 0)
			tracer = (int)strtol(line + 10, NULL, 10);
	fclose(f);
	return tracer;
}

void
test_freeze(void)
{
	struct trc_freeze f;
	unsigned long a, b;
	uint64_t pc = 0;
	pid_t pid;
	int st;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	memset((void *)sh, 0, sizeof(*sh));
	if ((pid = fork()) == 0)
		child();
	while (!sh->ready)
		pause_ms(1);
	test_cond("the child's threads run", moving());
	test_cond("frozen", trc_freeze(&f, pid, 5000) == 0 && f.n == 2);
	test_cond("each thread has a pc", trc_freeze_pc(&f, 0, &pc) == 0 && pc != 0);
	a = sh->spins[0];
	b = sh->spins[1];
	kill(pid, SIGUSR1);
	pause_ms(50);
	test_cond("no thread ran while frozen", sh->spins[0] == a && sh->spins[1] == b && !sh->got_usr1);
	test_cond("the child is in a tracing stop", state(pid) == 't');
	trc_thaw(&f);
	test_cond("the time it was held is measured", f.frozen_ns >= 50000000u);
	test_cond("let go: both run again", moving());
	for (int i = 0; i < 500 && !sh->got_usr1; i++)
		pause_ms(10);
	test_cond("the signal sent meanwhile arrived", sh->got_usr1);
	test_cond("nothing traces it any more", traced(pid) == 0);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	test_cond("a process that is gone: ESRCH", trc_freeze(&f, pid, 100) < 0 && errno == ESRCH);
	munmap((void *)sh, sizeof(*sh));
}
