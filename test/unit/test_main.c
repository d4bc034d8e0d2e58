/* test_main.c: runs the unit-test suites (all, or those named on the command line). */
#include <stdlib.h>

#include "test.h"

int test_passed, test_failed;

static const struct suite {
	const char *name;
	void (*run)(void);
} suites[] = {
	{ "compress", test_compress },
	{ "conn", test_conn },
	{ "decode", test_decode },
	{ "encode", test_encode },
	{ "elfobj", test_elfobj },
	{ "export", test_export },
	{ "freeze", test_freeze },
	{ "replay", test_replay },
	{ "ring", test_ring },
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
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
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
		if (!known(argv[i])) {
			printf("no suite named '%s'\n", argv[i]);
			return EXIT_FAILURE;
		}
	}
	for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) {
		if (!wanted(suites[i].name, argc, argv))
			continue;
		printf("suite %s\n", suites[i].name);
		suites[i].run();
	}
	printf("%d passed, %d failed\n", test_passed, test_failed);
	return test_failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
