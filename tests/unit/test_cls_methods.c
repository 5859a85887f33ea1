/*
 * test_cls_methods.c — the C bodies of the object classes, called directly
 * (no OSD), compiled from the same sources as the plugins.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cls_pcr_methods.h"
#include "cls_rckpt_methods.h"
#include "rckpt_build_info.h"

static void check_version(rckpt_cls_method_fn fn, const char *name)
{
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_wire_version_t v;

	assert_int_equal(fn(NULL, 0, &out), 0);
	assert_int_equal(rckpt_wire_version_decode(&v, out.p, out.len), 0);
	assert_string_equal(v.plugin, name);
	assert_int_equal(v.major, RCKPT_BUILD_VERSION_MAJOR);
	assert_int_equal(v.minor, RCKPT_BUILD_VERSION_MINOR);
	assert_int_equal(v.patch, RCKPT_BUILD_VERSION_PATCH);
	assert_string_equal(v.built_for, RCKPT_CEPH_RELEASE);
	assert_true(v.nformats >= 1);
	assert_string_equal(v.formats[0].name, "cls-wire");
	assert_int_equal(v.formats[0].max_version, RCKPT_WIRE_VERSION);
	rckpt_buf_free(&out);
	assert_null(out.p);
}

static void test_rckpt_version(void **state)
{
	(void)state;
	check_version(cls_rckpt_version, "rckpt");
}

static void test_pcr_version(void **state)
{
	(void)state;
	check_version(cls_pcr_version, "pcr");
}

/* `version` takes no input: anything else is a malformed request. */
static void test_version_rejects_input(void **state)
{
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	const uint8_t junk[3] = { 1, 2, 3 };

	(void)state;
	assert_int_equal(cls_rckpt_version(junk, sizeof(junk), &out), -EINVAL);
	assert_int_equal(cls_pcr_version(junk, 1, &out), -EINVAL);
	assert_int_equal(out.len, 0);
	rckpt_buf_free(&out);
}

static void test_out_bounds(void **state)
{
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;

	(void)state;
	assert_int_equal(rckpt_buf_reserve(&out, RCKPT_CLS_OUT_MAX + 1), -EFBIG);
	assert_int_equal(rckpt_buf_reserve(&out, SIZE_MAX), -EFBIG);
	assert_int_equal(rckpt_buf_reserve(&out, 1000), 0);
	assert_true(out.cap >= 1000);
	out.len = 1000;
	assert_int_equal(rckpt_buf_reserve(&out, RCKPT_CLS_OUT_MAX - 999), -EFBIG);
	assert_int_equal(rckpt_buf_reserve(&out, 5000), 0);
	assert_true(out.cap >= 6000);
	rckpt_buf_free(&out);
	assert_int_equal(out.cap, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rckpt_version),
		cmocka_unit_test(test_pcr_version),
		cmocka_unit_test(test_version_rejects_input),
		cmocka_unit_test(test_out_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
