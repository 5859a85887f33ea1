/*
 * test_file_inputs.c — the readers of files users name (issue 47 item 6):
 * rckpt_st_read, rckpt_st_check and the step-file readers refuse a
 * directory (-EISDIR) and a FIFO (-EINVAL, without opening it, so without
 * waiting for a writer) with a message, and say "truncated" or "not a
 * safetensors file" of such files; before, a directory was -ENOMEM (from
 * malloc(ftell(dir))) with the message left unset.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "rckpt_record.h"
#include "rckpt_safetensors.h"
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"

static char dir[] = "/tmp/rckpt-inputs-XXXXXX";
static char good[128], adir[128], fifo[128], trunc_[128], text[128];

static int setup(void **state)
{
	float a[6] = { 1, -2, 3.5f, 0, 1e-30f, 7 };
	rckpt_ctensor_t t = { "w", RCKPT_DT_F32, 2, { 2, 3 }, 6, (const uint8_t *)a, 0, NULL, 0 };
	FILE *f;
	uint8_t buf[256];
	size_t n;

	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(good, sizeof(good), "%s/good.safetensors", dir);
	snprintf(adir, sizeof(adir), "%s/adir", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(trunc_, sizeof(trunc_), "%s/trunc.safetensors", dir);
	snprintf(text, sizeof(text), "%s/text.safetensors", dir);
	if (rckpt_st_write(good, &t, 1) || mkdir(adir, 0777) || mkfifo(fifo, 0666))
		return -1;
	/* the good file less its last 8 bytes */
	if ((f = fopen(good, "rb")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if ((f = fopen(trunc_, "wb")) == NULL || fwrite(buf, 1, n - 8, f) != n - 8 || fclose(f))
		return -1;
	if ((f = fopen(text, "wb")) == NULL || fputs("hello, not tensors\n", f) < 0 || fclose(f))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	char cmd[96];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Reads path with rckpt_st_read and rckpt_st_check: both return want and
 * say `says` in err. */
static void expect(const char *path, int want, const char *says)
{
	rckpt_st_t st;
	char err[256];

	memset(err, 'X', sizeof(err)); /* an unset message would show */
	assert_int_equal(rckpt_st_read(&st, path, err, sizeof(err)), want);
	assert_non_null(memchr(err, '\0', sizeof(err)));
	assert_non_null(strstr(err, says));
	memset(err, 'X', sizeof(err));
	assert_int_equal(rckpt_st_check(path, err, sizeof(err)), want);
	assert_non_null(strstr(err, says));
}

static void test_directory(void **state)
{
	(void)state;
	expect(adir, -EISDIR, "is a directory");
}

static void test_fifo(void **state)
{
	(void)state;
	/* no writer ever opens it: a reader that opened it would wait here */
	expect(fifo, -EINVAL, "is a FIFO, not a regular file");
}

static void test_truncated_and_foreign(void **state)
{
	(void)state;
	expect(trunc_, -EBADMSG, "truncated");
	expect(text, -EFBIG, "not a safetensors file");
}

static void test_good(void **state)
{
	rckpt_st_t st;
	rckpt_file_t *f;
	char err[256];

	(void)state;
	assert_int_equal(rckpt_st_check(good, err, sizeof(err)), 0);
	assert_int_equal(rckpt_file_check(good, err, sizeof(err)), 0);
	assert_int_equal(rckpt_st_read(&st, good, err, sizeof(err)), 0);
	assert_int_equal(st.set.ntensors, 1);
	rckpt_st_free(&st);
	assert_int_equal(rckpt_file_read(&f, adir, err, sizeof(err)), -EISDIR);
	assert_int_equal(rckpt_file_read(&f, good, err, sizeof(err)), 0);
	assert_int_equal(rckpt_file_count(f), 1);
	rckpt_file_free(f);
}

static void test_step_files(void **state)
{
	rckpt_stepdec_t *d;
	FILE *out = tmpfile();

	(void)state;
	assert_non_null(out);
	assert_int_equal(rckpt_stepdec_create(&d), 0);
	assert_int_equal(rckpt_stepdec_file(d, adir), -EISDIR);
	assert_int_equal(rckpt_stepdec_file(d, fifo), -EINVAL);
	rckpt_stepdec_destroy(d);
	assert_int_equal(rckpt_stepfile_describe(adir, out), -EISDIR);
	assert_int_equal(rckpt_stepfile_describe(fifo, out), -EINVAL);
	fclose(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_directory),	    cmocka_unit_test(test_fifo),
		cmocka_unit_test(test_truncated_and_foreign), cmocka_unit_test(test_good),
		cmocka_unit_test(test_step_files),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
