/*
 * cow_fault.c: what one copy-on-write fault costs on this machine, the fault a forked worker
 * takes the first time it writes to a page it still shares with the process it was forked
 * from. A first install in a Passenger or Puma worker takes thousands of them (docs/
 * performance.md, "Where the time goes"), so their price sets much of its CPU.
 *
 *   cc -O2 -Wall -Wextra -pthread -o /tmp/cow_fault test/bench/cow_fault.c && /tmp/cow_fault
 *
 * A child writes one byte to each of 20,000 pages its parent filled before the fork: alone,
 * then with a second thread of its own spinning on another CPU, as a worker's other threads
 * may be (the kernel then has that CPU's TLB flushed at each fault). Prints the median of five
 * children of each kind, in microseconds per fault.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { PAGES = 20000, RUNS = 5 };

static volatile int stop;

static void *
spin(void *unused)
{
	(void)unused;
	while (!stop)
		;
	return NULL;
}

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One child's microseconds per fault, through a pipe; -1 on failure. */
static double
child(char *mem, size_t page, int threads)
{
	int fd[2];
	double us = -1;
	pid_t pid;

	if (pipe(fd) < 0)
		return -1;
	if ((pid = fork()) == 0) {
		pthread_t t;
		double t0;

		close(fd[0]);
		if (threads > 1) {
			if (pthread_create(&t, NULL, spin, NULL) != 0)
				_exit(1);
			usleep(20000);
		}
		t0 = now();
		for (size_t i = 0; i < PAGES; i++)
			mem[i * page] = 2;
		us = (now() - t0) / PAGES * 1e6;
		stop = 1;
		if (write(fd[1], &us, sizeof(us)) != (ssize_t)sizeof(us))
			_exit(1);
		_exit(0);
	}
	close(fd[1]);
	if (pid < 0 || read(fd[0], &us, sizeof(us)) != (ssize_t)sizeof(us))
		us = -1;
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return us;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int
main(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (mem == MAP_FAILED) {
		perror("cow_fault: mmap");
		return 1;
	}
	memset(mem, 1, PAGES * page);
	for (int threads = 1; threads <= 2; threads++) {
		double us[RUNS];

		for (int r = 0; r < RUNS; r++)
			if ((us[r] = child(mem, page, threads)) < 0) {
				fprintf(stderr, "cow_fault: a child failed\n");
				return 1;
			}
		qsort(us, RUNS, sizeof(us[0]), cmp);
		printf("cow_fault: %d thread%s: %.1f us per copy-on-write fault (median of %d; %.1f-%.1f)\n",
		    threads, threads > 1 ? "s, one spinning" : "", us[RUNS / 2], RUNS, us[0], us[RUNS - 1]);
	}
	return 0;
}
