/*
 * cmocka_skip_probe.c — a cmocka program that skips its one case with
 * cmocka's own skip() and exits 0, as a program that bypasses
 * tests/common/test_skip.h would; with --exit77 it exits 77 as
 * test_exit does. test_cmocka_run checks that tests/cmocka_run.sh fails
 * the first and passes the second through as skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void test_cannot_run(void **state)
{
	(void)state;
	skip();
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_cannot_run) };
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	return failed ? failed : argc > 1 && strcmp(argv[1], "--exit77") == 0 ? 77 : 0;
}
