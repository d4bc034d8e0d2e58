/* test_main.c: runs the unit-test suites (all, or those named on the command line; -v shows
 * each suite and note as it runs, not only those of a failure). */
#include <stdarg.h>
#include <stdlib.h>

#include "test.h"

int test_passed, test_failed;

static int verbose;
static const char *suite_name;
static int suite_shown, note_shown = 1;
static char note[512];

void
test_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(note, sizeof(note), fmt, ap);
	va_end(ap);
	note_shown = 0;
	if (verbose)
		test_context();
}

void
test_context(void)
{
	if (!suite_shown) {
		printf("suite %s\n", suite_name);
		suite_shown = 1;
	}
	if (!note_shown) {
		printf("  %s\n", note);
		note_shown = 1;
	}
}

static const struct suite {
	const char *name;
	void (*run)(void);
} suites[] = {
	{ "bpf", test_bpf },
	{ "compress", test_compress },
	{ "conn", test_conn },
	{ "decode", test_decode },
	{ "encode", test_encode },
	{ "elfobj", test_elfobj },
	{ "escape", test_escape },
	{ "export", test_export },
	{ "flame", test_flame },
	{ "freeze", test_freeze },
	{ "hostile", test_hostile_outputs },
	{ "http", test_http },
	{ "metrics", test_metrics },
	{ "opt", test_opt },
	{ "output", test_output },
	{ "pace", test_pace },
	{ "stable", test_stable },
	{ "pprof", test_pprof },
	{ "profile", test_profile },
	{ "progress", test_progress },
	{ "replay", test_replay },
	{ "ring", test_ring },
	{ "seccomp", test_seccomp },
	{ "spec", test_spec },
	{ "spool", test_spool },
	{ "top", test_top },
	{ "trace", test_trace },
	{ "vmcode", test_vmcode },
	{ "x86", test_x86 },
};

static int
wanted(const char *name, int argc, char **argv)
{
	int named = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-v") == 0)
			continue;
		named = 1;
		if (strcmp(argv[i], name) == 0)
			return 1;
	}
	return !named;
}

static int
known(const char *name)
{
	for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++)
		if (strcmp(suites[i].name, name) == 0)
			return 1;
	return 0;
}

int
main(int argc, char **argv)
{
	/* A misspelt suite would otherwise run nothing and pass. */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-v") == 0) {
			verbose = 1;
			continue;
		}
		if (!known(argv[i])) {
			printf("no suite named '%s'\n", argv[i]);
			return EXIT_FAILURE;
		}
	}
	for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) {
		if (!wanted(suites[i].name, argc, argv))
			continue;
		suite_name = suites[i].name;
		suite_shown = 0;
		note_shown = 1;
		if (verbose)
			test_context();
		suites[i].run();
	}
	printf("%d passed, %d failed\n", test_passed, test_failed);
	return test_failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
