/*
 * test_skip.h — one rule for a cmocka test that cannot run.
 *
 * TEST_SKIP(need, ...) prints "skipped: <why>" and then:
 *  - fails the test when the need is required here: RCKPT_REQUIRE_ALL=1
 *    (CI: ./dev.sh test with CI=true) requires every need but a GPU;
 *    RCKPT_REQUIRE_CLUSTER=1 (./dev.sh test) the cluster;
 *    RCKPT_REQUIRE_GPU=1 a CUDA device;
 *  - else skips it, and test_exit() then makes the program exit 77, which
 *    ctest shows as "Skipped" (SKIP_RETURN_CODE), not as passed. A failure
 *    still wins: its count is the exit status.
 * need is one of TEST_NEED_CLUSTER, TEST_NEED_DATA (a fixture: real
 * checkpoints, photos), TEST_NEED_GPU, TEST_NEED_NONE (a skip that is
 * right wherever it happens, as a CPU-only check on a machine with a
 * device, which test_gpu_parity covers there: never required).
 * Include after <cmocka.h>.
 */
#ifndef RCKPT_TEST_SKIP_H
#define RCKPT_TEST_SKIP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TEST_NEED_CLUSTER, TEST_NEED_DATA, TEST_NEED_GPU, TEST_NEED_NONE };

/* Tests of this program skipped so far: one counter for all its files (a
 * weak definition in each, merged into one by the linker). */
__attribute__((weak)) unsigned test_skipped;

static inline int test_env_is(const char *name, const char *value)
{
	const char *v = getenv(name);
	return v != NULL && strcmp(v, value) == 0;
}

/* The variable that requires need here, or NULL when it may be skipped. */
static inline const char *test_required_by(int need)
{
	switch (need) {
	case TEST_NEED_GPU:
		return test_env_is("RCKPT_REQUIRE_GPU", "1") ? "RCKPT_REQUIRE_GPU=1" : NULL;
	case TEST_NEED_NONE:
		return NULL;
	case TEST_NEED_CLUSTER:
		if (test_env_is("RCKPT_REQUIRE_CLUSTER", "1"))
			return "RCKPT_REQUIRE_CLUSTER=1";
		/* fall through */
	default:
		return test_env_is("RCKPT_REQUIRE_ALL", "1") ? "RCKPT_REQUIRE_ALL=1" : NULL;
	}
}

#define TEST_SKIP(need, ...)                                                                \
	do {                                                                                 \
		const char *req_ = test_required_by(need);                                   \
		print_message("skipped: " __VA_ARGS__);                                      \
		print_message("\n");                                                         \
		if (req_ != NULL)                                                            \
			fail_msg("cannot run, and %s requires it to", req_);                 \
		test_skipped++;                                                              \
		skip();                                                                      \
	} while (0)

/* main's exit status from cmocka_run_group_tests' result. */
static inline int test_exit(int failed)
{
	if (failed)
		return failed;
	if (test_skipped) {
		printf("%u test(s) skipped: the program reports itself skipped (77)\n", test_skipped);
		fflush(stdout);
		return 77;
	}
	return 0;
}

#endif
