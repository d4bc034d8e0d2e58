/* test.h: a tiny unit-test harness in the spirit of redis testhelp.h. Quiet while checks pass:
 * a failure prints its suite and note first; run_tests -v prints every suite and note. */
#ifndef TRC_TEST_H
#define TRC_TEST_H

#include <stdio.h>
#include <string.h>

extern int test_passed, test_failed;

/* What the checks that follow are about ("accepts Foo#bar"): shown with a failure among them,
 * or always with -v. */
void test_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints, once each, the suite and the note a failure is in (test_check calls it). */
void test_context(void);

/* Counts one check; prints the failing ones with where they are. */
#define test_cond(descr, cond) test_check((cond) != 0, (descr), __FILE__, __LINE__)

static inline void
test_check(int ok, const char *descr, const char *file, int line)
{
	if (ok) {
		test_passed++;
	} else {
		test_failed++;
		test_context();
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
void test_bpf(void);
void test_compress(void);
void test_conn(void);
void test_decode(void);
void test_encode(void);
void test_elfobj(void);
void test_escape(void);
void test_export(void);
void test_flame(void);
void test_freeze(void);
void test_hostile_outputs(void);
void test_http(void);
void test_replay(void);
void test_opt(void);
void test_metrics(void);
void test_output(void);
void test_pace(void);
void test_stable(void);
void test_pprof(void);
void test_profile(void);
void test_progress(void);
void test_ring(void);
void test_seccomp(void);
void test_spec(void);
void test_spool(void);
void test_top(void);
void test_trace(void);
void test_vmcode(void);
void test_x86(void);

#endif
