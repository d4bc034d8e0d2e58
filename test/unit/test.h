/* test.h: a tiny unit-test harness in the spirit of redis testhelp.h. */
#ifndef TRC_TEST_H
#define TRC_TEST_H

#include <stdio.h>
#include <string.h>

extern int test_passed, test_failed;

/* Counts one check; prints the failing ones with where they are. */
#define test_cond(descr, cond) test_check((cond) != 0, (descr), __FILE__, __LINE__)

static inline void
test_check(int ok, const char *descr, const char *file, int line)
{
	if (ok) {
		test_passed++;
	} else {
		test_failed++;
		printf("FAILED: %s (%s:%d)\n", descr, file, line);
	}
}

/* Compares strings, printing both when they differ. */
static inline void
test_str_check(const char *descr, const char *got, const char *want, const char *file, int line)
{
	int ok = got != NULL && strcmp(got, want) == 0;

	test_check(ok, descr, file, line);
	if (!ok)
		printf("--- want:\n%s\n--- got:\n%s\n---\n", want, got ? got : "(null)");
}
#define test_str(descr, got, want) test_str_check((descr), (got), (want), __FILE__, __LINE__)

/* The suites, one per test_*.c file. */
void test_compress(void);
void test_conn(void);
void test_decode(void);
void test_encode(void);
void test_elfobj(void);
void test_export(void);
void test_freeze(void);
void test_replay(void);
void test_ring(void);
void test_spec(void);
void test_spool(void);
void test_top(void);
void test_trace(void);
void test_vmcode(void);
void test_x86(void);

#endif
