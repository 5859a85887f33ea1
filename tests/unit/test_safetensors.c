/*
 * test_safetensors.c — the safetensors reader and writer.
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
#include <unistd.h>

#include <cmocka.h>

#include "test_skip.h"

#include "rckpt_record.h"
#include "rckpt_safetensors.h"

static char dir[] = "/tmp/rckpt-st-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[64];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Parses a header given as text, with data bytes after it. */
static int parse_text(rckpt_st_t *st, const char *json, size_t data_bytes, char *err)
{
	size_t hl = strlen(json), i;
	uint8_t *buf = calloc(1, 8 + hl + data_bytes);
	for (i = 0; i < 8; i++)
		buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
	memcpy(buf + 8, json, hl);
	return rckpt_st_parse(st, buf, 8 + hl + data_bytes, err, 256);
}

static void test_round_trip(void **state)
{
	float a[6] = { 1, -2, 3.5f, 0, 1e-30f, 7 };
	uint16_t b[3] = { 0x3f80, 0xc000, 0x0001 };
	rckpt_ctensor_t t[3] = {
		{ "layer.weight", RCKPT_DT_F32, 2, { 2, 3 }, 6, (const uint8_t *)a, 0, NULL, 0 },
		{ "emb", RCKPT_DT_BF16, 1, { 3 }, 3, (const uint8_t *)b, 0, NULL, 0 },
		{ "empty", RCKPT_DT_F16, 2, { 0, 4 }, 0, (const uint8_t *)b, 0, NULL, 0 },
	};
	char path[128], err[256];
	rckpt_st_t st;
	const rckpt_ctensor_t *x;

	(void)state;
	snprintf(path, sizeof(path), "%s/a.safetensors", dir);
	assert_int_equal(rckpt_st_write(path, t, 3), 0);
	assert_int_equal(rckpt_st_read(&st, path, err, sizeof(err)), 0);
	assert_int_equal(st.set.ntensors, 3);
	assert_string_equal(st.set.t[0].name, "emb"); /* sorted by name */
	x = rckpt_tset_find(&st.set, "layer.weight");
	assert_non_null(x);
	assert_int_equal(x->dtype, RCKPT_DT_F32);
	assert_int_equal(x->ndim, 2);
	assert_int_equal(x->shape[1], 3);
	assert_memory_equal(x->data, a, sizeof(a));
	x = rckpt_tset_find(&st.set, "empty");
	assert_int_equal(x->n, 0);
	assert_null(rckpt_tset_find(&st.set, "nope"));
	assert_int_equal((8 + (size_t)st.buf[0]) % 8, 0); /* data aligned */
	rckpt_st_free(&st);
}

static void test_rejects(void **state)
{
	rckpt_st_t st;
	char err[256];

	(void)state;
	assert_int_equal(parse_text(&st, "[1,2]", 0, err), -EBADMSG);
	assert_int_equal(parse_text(&st, "{\"a\":", 0, err), -EBADMSG);
	assert_int_equal(parse_text(&st, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
					 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
				 8, err),
			 -EBADMSG); /* duplicate key */
	assert_int_equal(parse_text(&st, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, err),
			 -EBADMSG); /* shape and size disagree */
	assert_non_null(strstr(err, "'a'"));
	assert_int_equal(parse_text(&st, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, err),
			 -EBADMSG); /* past the end */
	assert_int_equal(parse_text(&st, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, err),
			 -EBADMSG);
	assert_int_equal(parse_text(&st, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
					 "\"data_offsets\":[0,0]}}", 8, err),
			 -EBADMSG); /* element count overflows */
	assert_int_equal(parse_text(&st, "{\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}}", 8, err),
			 -ENOTSUP);
	assert_non_null(strstr(err, "'step'"));
	assert_non_null(strstr(err, "I64"));
	assert_int_equal(parse_text(&st, "{\"__metadata__\":{\"format\":\"pt\"},"
					 "\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, err),
			 0); /* metadata is skipped */
	assert_int_equal(st.set.ntensors, 1);
	rckpt_st_free(&st);
	{
		uint8_t *buf = calloc(1, 16);
		buf[7] = 0x7f; /* a header longer than any limit */
		assert_int_equal(rckpt_st_parse(&st, buf, 16, err, sizeof(err)), -EFBIG);
	}
	assert_int_equal(rckpt_st_read(&st, "/nonexistent/x.safetensors", err, sizeof(err)), -ENOENT);
	/* the reason alone: its caller names the file (once) */
	assert_non_null(strstr(err, "No such file"));
	assert_null(strstr(err, "/nonexistent"));
}

/* A checkpoint written by PyTorch (bench/data/make_checkpoints.py), when the
 * test is given one: RCKPT_TEST_CKPT_DIR. */
static void test_reads_pytorch_checkpoint(void **state)
{
	const char *d = getenv("RCKPT_TEST_CKPT_DIR");
	char path[512], err[256];
	rckpt_st_t st;
	const rckpt_ctensor_t *t;

	(void)state;
	snprintf(path, sizeof(path), "%s/step-000025.safetensors", d ? d : "");
	if (d == NULL || *d == '\0' || access(path, R_OK) != 0) {
		TEST_SKIP(TEST_NEED_DATA, "no real checkpoints (RCKPT_TEST_CKPT_DIR; ctest makes them "
					  "with python3-torch)");
	}
	assert_int_equal(rckpt_st_read(&st, path, err, sizeof(err)), 0);
	t = rckpt_tset_find(&st.set, "conv1.weight");
	assert_non_null(t);
	assert_int_equal(t->ndim, 4);
	assert_int_equal(t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3], t->n);
	assert_non_null(rckpt_tset_find(&st.set, "embed.weight"));
	assert_non_null(rckpt_tset_find(&st.set, "norm.weight"));
	rckpt_st_free(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_rejects),
		cmocka_unit_test(test_reads_pytorch_checkpoint),
	};
	return test_exit(cmocka_run_group_tests(tests, setup, teardown));
}
