/*
 * test_pcr_io.c — PCR datasets over the in-memory pool (common/mem_io.c)
 * behind librckpt's rckpt_io seam, without a cluster: a dataset built from
 * JPEGs made here reads back, as JPEG and as pixels; and a record whose
 * JPEG header claims more pixels than any image may have (issue 25: up to
 * ~12.9 GB allocated from a record's header) is refused before the reader
 * allocates. Decoding at a reduced scale (rckpt_pcr_opts_t.scale, issue 29):
 * the sizes and pixels of TurboJPEG's scaled decode of the same prefix, the
 * automatic scale per group, options of another version, bad scales. An
 * image's record and label from the index alone (rckpt_pcr_lookup).
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
#include <turbojpeg.h>

#include "mem_io.h"
#include "rckpt.h"
#include "rckpt_crc32c.h"
#include "rckpt_internal.h" /* rckpt_set_io */

#define W 96
#define H 64
#define NIMG 3

typedef struct fx {
	mem_pool_t *pool;
	rckpt_t *h;
	char dir[64];
	char path[NIMG][128];
} fx_t;

/* A baseline JPEG of a smooth gradient, written to path. */
static void make_jpeg(const char *path, unsigned seed)
{
	uint8_t *rgb = malloc(W * H * 3), *jpg = NULL;
	unsigned long len = 0;
	tjhandle t = tjInitCompress();
	FILE *f;
	unsigned x, y;
	assert_non_null(rgb);
	assert_non_null(t);
	for (y = 0; y < H; y++)
		for (x = 0; x < W; x++) {
			uint8_t *p = &rgb[(y * W + x) * 3];
			p[0] = (uint8_t)(x * 2 + seed * 40);
			p[1] = (uint8_t)(y * 3);
			p[2] = (uint8_t)((x + y) ^ seed);
		}
	assert_int_equal(tjCompress2(t, rgb, W, 0, H, TJPF_RGB, &jpg, &len, TJSAMP_420, 90, 0), 0);
	assert_non_null(f = fopen(path, "wb"));
	assert_int_equal(fwrite(jpg, 1, len, f), len);
	fclose(f);
	tjFree(jpg);
	tjDestroy(t);
	free(rgb);
}

static int setup(void **state)
{
	fx_t *f = calloc(1, sizeof(*f));
	rckpt_pcr_input_t in[NIMG];
	rckpt_pcr_build_opts_t bo = RCKPT_PCR_BUILD_OPTS_INIT;
	unsigned i;
	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/rckpt-pcr-io.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	memset(in, 0, sizeof(in));
	for (i = 0; i < NIMG; i++) {
		snprintf(f->path[i], sizeof(f->path[i]), "%s/img%u.jpg", f->dir, i);
		make_jpeg(f->path[i], i);
		in[i].path = f->path[i];
		in[i].label = "L";
		in[i].label_len = 1;
	}
	assert_int_equal(mem_pool_create(&f->pool), 0);
	assert_int_equal(rckpt_create(&f->h), 0);
	assert_int_equal(rckpt_set_io(f->h, mem_pool_open, f->pool, "mem"), 0);
	bo.threads = 1;
	if (rckpt_pcr_build(f->h, "d", in, NIMG, &bo, NULL))
		fail_msg("build: %s", rckpt_errmsg(f->h));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx_t *f = *state;
	unsigned i;
	rckpt_destroy(f->h);
	mem_pool_destroy(f->pool);
	for (i = 0; i < NIMG; i++)
		unlink(f->path[i]);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Reads the one record of dataset d as `output`: 0 and its images'
 * count, or the error. */
static int read_record(fx_t *f, unsigned output, unsigned *count, int check_pixels)
{
	rckpt_pcr_opts_t o = RCKPT_PCR_OPTS_INIT;
	rckpt_pcr_t *d = NULL;
	rckpt_pcr_batch_t *b = NULL;
	unsigned i;
	int rc;
	o.output = output;
	assert_int_equal(rckpt_pcr_open(f->h, &d, "d", &o), 0);
	rc = rckpt_pcr_next(d, &b);
	if (rc == 0) {
		assert_non_null(b);
		*count = rckpt_pcr_batch_count(b);
		for (i = 0; check_pixels && i < *count; i++) {
			rckpt_pcr_image_t im;
			assert_int_equal(rckpt_pcr_batch_image(b, i, &im), 0);
			assert_int_equal(im.width, W);
			assert_int_equal(im.height, H);
			assert_non_null(im.rgb);
			/* the gradient survives JPEG: red grows along a row */
			assert_true(im.rgb[(10 * W + 80) * 3] > im.rgb[(10 * W + 5) * 3]);
		}
		rckpt_pcr_batch_free(b);
	}
	rckpt_pcr_close(d);
	return rc;
}

static void test_build_and_read(void **state)
{
	fx_t *f = *state;
	unsigned n = 0;
	assert_int_equal(read_record(f, RCKPT_PCR_JPEG, &n, 0), 0);
	assert_int_equal(n, NIMG);
	assert_int_equal(read_record(f, RCKPT_PCR_RGB, &n, 1), 0);
	assert_int_equal(n, NIMG);
}

/* The ids of the images the pass from here gives, in order, into ids
 * (room for cap); their count. */
static unsigned pass_ids(rckpt_pcr_t *d, uint32_t *ids, unsigned cap)
{
	rckpt_pcr_batch_t *b = NULL;
	unsigned n = 0, i;
	for (;;) {
		assert_int_equal(rckpt_pcr_next(d, &b), 0);
		if (b == NULL)
			return n;
		for (i = 0; i < rckpt_pcr_batch_count(b); i++) {
			rckpt_pcr_image_t im;
			assert_int_equal(rckpt_pcr_batch_image(b, i, &im), 0);
			assert_true(n < cap);
			ids[n++] = im.id;
		}
		rckpt_pcr_batch_free(b);
	}
}

/* A pass over chosen records, in a chosen order (a DataLoader worker's
 * share, a shuffled epoch): only those are read; bad lists are refused
 * and leave the pass as it was. */
static void test_rewind_records(void **state)
{
	fx_t *f = *state;
	rckpt_pcr_input_t in[NIMG];
	rckpt_pcr_build_opts_t bo = RCKPT_PCR_BUILD_OPTS_INIT;
	rckpt_pcr_opts_t o = RCKPT_PCR_OPTS_INIT;
	rckpt_pcr_read_stats_t s0, s1;
	rckpt_pcr_t *d = NULL;
	const uint32_t two[] = { 2, 0 }, bad[] = { 1, NIMG }, many[NIMG + 1] = { 0 };
	uint32_t ids[16];
	unsigned i;

	memset(in, 0, sizeof(in));
	for (i = 0; i < NIMG; i++)
		in[i].path = f->path[i];
	bo.threads = 1;
	bo.images_per_record = 1; /* record r holds image r */
	if (rckpt_pcr_build(f->h, "r", in, NIMG, &bo, NULL))
		fail_msg("build: %s", rckpt_errmsg(f->h));
	assert_int_equal(rckpt_pcr_open(f->h, &d, "r", &o), 0);
	/* the default pass: every record, in order */
	assert_int_equal(pass_ids(d, ids, 16), NIMG);
	for (i = 0; i < NIMG; i++)
		assert_int_equal(ids[i], i);
	/* records 2 then 0, and only they are read */
	assert_int_equal(rckpt_pcr_read_stats(d, &s0), 0);
	assert_int_equal(rckpt_pcr_rewind_records(d, 1, two, 2), 0);
	assert_int_equal(pass_ids(d, ids, 16), 2);
	assert_int_equal(ids[0], 2);
	assert_int_equal(ids[1], 0);
	assert_int_equal(rckpt_pcr_read_stats(d, &s1), 0);
	assert_int_equal(s1.reads - s0.reads, 2);
	/* refused: a record past the dataset, more records than it has */
	assert_int_equal(rckpt_pcr_rewind_records(d, RCKPT_PCR_ALL, two, 2), 0);
	assert_int_equal(rckpt_pcr_rewind_records(d, RCKPT_PCR_ALL, bad, 2), -ERANGE);
	assert_non_null(strstr(rckpt_errmsg(f->h), "record 3"));
	assert_int_equal(rckpt_pcr_rewind_records(d, RCKPT_PCR_ALL, many, NIMG + 1), -EINVAL);
	assert_int_equal(pass_ids(d, ids, 16), 2); /* the pass set before stands */
	assert_int_equal(ids[0], 2);
	/* an empty list: a pass with nothing; NULL: all again */
	assert_int_equal(rckpt_pcr_rewind_records(d, RCKPT_PCR_ALL, two, 0), 0);
	assert_int_equal(pass_ids(d, ids, 16), 0);
	assert_int_equal(rckpt_pcr_rewind_records(d, RCKPT_PCR_ALL, NULL, 0), 0);
	assert_int_equal(pass_ids(d, ids, 16), NIMG);
	rckpt_pcr_close(d);
	assert_int_equal(rckpt_pcr_delete(f->h, "r"), 0);
}

/* rckpt_pcr_lookup: each image's record and label from the index alone
 * (no read), an image without a label, an id past the dataset. */
static void test_lookup(void **state)
{
	fx_t *f = *state;
	rckpt_pcr_input_t in[NIMG];
	rckpt_pcr_build_opts_t bo = RCKPT_PCR_BUILD_OPTS_INIT;
	rckpt_pcr_opts_t o = RCKPT_PCR_OPTS_INIT;
	rckpt_pcr_read_stats_t s0, s1;
	static const char *labels[NIMG] = { "7", "", "-12" };
	rckpt_pcr_t *d = NULL;
	const void *label;
	size_t len;
	uint32_t rec;
	unsigned i;

	memset(in, 0, sizeof(in));
	for (i = 0; i < NIMG; i++) {
		in[i].path = f->path[i];
		in[i].label = labels[i];
		in[i].label_len = strlen(labels[i]);
	}
	bo.threads = 1;
	bo.images_per_record = 2; /* records {0, 1} and {2} */
	if (rckpt_pcr_build(f->h, "l", in, NIMG, &bo, NULL))
		fail_msg("build: %s", rckpt_errmsg(f->h));
	assert_int_equal(rckpt_pcr_open(f->h, &d, "l", &o), 0);
	assert_int_equal(rckpt_pcr_read_stats(d, &s0), 0);
	for (i = 0; i < NIMG; i++) {
		rec = UINT32_MAX;
		label = NULL;
		len = 99;
		assert_int_equal(rckpt_pcr_lookup(d, i, &rec, &label, &len), 0);
		assert_int_equal(rec, i / 2);
		assert_int_equal(len, strlen(labels[i]));
		if (len)
			assert_memory_equal(label, labels[i], len);
		else
			assert_null(label);
	}
	assert_int_equal(rckpt_pcr_lookup(d, 2, NULL, NULL, NULL), 0);
	assert_int_equal(rckpt_pcr_lookup(d, 2, &rec, NULL, NULL), 0);
	assert_int_equal(rec, 1);
	assert_int_equal(rckpt_pcr_lookup(d, NIMG, &rec, &label, &len), -ERANGE);
	assert_non_null(strstr(rckpt_errmsg(f->h), "image 3"));
	assert_int_equal(rckpt_pcr_read_stats(d, &s1), 0);
	assert_int_equal(s1.reads, s0.reads); /* the index alone */
	rckpt_pcr_close(d);
	assert_int_equal(rckpt_pcr_delete(f->h, "l"), 0);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The record's first image's frame header says 60000 x 60000 pixels (the
 * head's CRC made right again, so only the pixel count is at fault): as
 * pixels it is refused (-E2BIG) before anything is allocated for them; as
 * JPEG bytes it still reads. */
static void test_pixels_bounded(void **state)
{
	fx_t *f = *state;
	rckpt_io_t *io = NULL;
	uint8_t *rec;
	uint32_t head_len, crc;
	size_t i;
	int n, patched = 0;
	unsigned count = 0;

	assert_int_equal(mem_pool_open(f->pool, "pcr/d", &io), 0);
	assert_non_null(rec = malloc(1 << 20));
	n = io->ops->read(io, "rec.00000000", rec, 1 << 20, 0);
	assert_true(n > 24);
	head_len = le32(rec + 16);
	assert_true(head_len <= (uint32_t)n && head_len > 8);
	for (i = 24; i + 9 < head_len - 4 && !patched; i++)
		if (rec[i] == 0xFF && rec[i + 1] == 0xC2) { /* SOF2: length, precision, height, width */
			rec[i + 5] = rec[i + 7] = 0xEA; /* 60000: JPEG's own limit is 65500 */
			rec[i + 6] = rec[i + 8] = 0x60;
			patched = 1;
		}
	assert_true(patched);
	crc = rckpt_crc32c(0, rec, head_len - 4);
	for (i = 0; i < 4; i++)
		rec[head_len - 4 + i] = (uint8_t)(crc >> (8 * i));
	assert_int_equal(io->ops->write_full(io, "rec.00000000", rec, (size_t)n), 0);
	io->ops->close(io);
	free(rec);

	assert_int_equal(read_record(f, RCKPT_PCR_RGB, &count, 0), -E2BIG);
	assert_int_equal(read_record(f, RCKPT_PCR_JPEG, &count, 0), 0);
	assert_int_equal(count, NIMG);
}

/* Opens d at k groups and `scale`, reads its
 * record, and checks each image's size and its pixels against TurboJPEG's
 * decode of the same prefix at 1/want. */
static void read_scaled(fx_t *f, unsigned k, unsigned scale, unsigned want)
{
	rckpt_pcr_opts_t o = RCKPT_PCR_OPTS_INIT;
	rckpt_pcr_t *d = NULL;
	rckpt_pcr_batch_t *b = NULL;
	tjhandle th = tjInitDecompress();
	const tjscalingfactor sf = { 1, (int)want };
	const unsigned w = TJSCALED(W, sf), h = TJSCALED(H, sf);
	uint8_t *px = malloc((size_t)w * h * 3);
	unsigned i;

	assert_non_null(th);
	assert_non_null(px);
	o.groups = k;
	o.output = RCKPT_PCR_RGB;
	o.scale = scale;
	assert_int_equal(rckpt_pcr_open(f->h, &d, "d", &o), 0);
	assert_int_equal(rckpt_pcr_next(d, &b), 0);
	assert_non_null(b);
	assert_int_equal(rckpt_pcr_batch_count(b), NIMG);
	for (i = 0; i < NIMG; i++) {
		rckpt_pcr_image_t im;
		assert_int_equal(rckpt_pcr_batch_image(b, i, &im), 0);
		assert_int_equal(im.width, w);
		assert_int_equal(im.height, h);
		assert_non_null(im.rgb);
		assert_int_equal(tjDecompress2(th, im.jpeg, im.jpeg_len, px, (int)w, 0, (int)h, TJPF_RGB, 0), 0);
		assert_memory_equal(im.rgb, px, (size_t)w * h * 3);
	}
	rckpt_pcr_batch_free(b);
	rckpt_pcr_close(d);
	tjDestroy(th);
	free(px);
}

static void test_scaled_read(void **state)
{
	fx_t *f = *state;
	rckpt_pcr_opts_t o = RCKPT_PCR_OPTS_INIT;
	rckpt_pcr_t *d = NULL;
	const unsigned bad[] = { 3, 16, RCKPT_PCR_SCALE_AUTO + 1 };
	unsigned i;

	read_scaled(f, RCKPT_PCR_ALL, 0, 1);
	read_scaled(f, RCKPT_PCR_ALL, 1, 1);
	read_scaled(f, 3, 2, 2);
	read_scaled(f, RCKPT_PCR_ALL, 4, 4);
	read_scaled(f, 1, 8, 8);
	/* auto: group 1 holds the DC alone; 2..4 luma through zig-zag 5; 5
	 * on the rest of the luma (libjpeg's progression of colour images) */
	read_scaled(f, 1, RCKPT_PCR_SCALE_AUTO, 8);
	read_scaled(f, 2, RCKPT_PCR_SCALE_AUTO, 2);
	read_scaled(f, 4, RCKPT_PCR_SCALE_AUTO, 2);
	read_scaled(f, 5, RCKPT_PCR_SCALE_AUTO, 1);
	read_scaled(f, RCKPT_PCR_ALL, RCKPT_PCR_SCALE_AUTO, 1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.scale = bad[i];
		assert_int_equal(rckpt_pcr_open(f->h, &d, "d", &o), -EINVAL);
		assert_null(d);
	}
	o.scale = 0;
	o.version = RCKPT_PCR_OPTS_VERSION + 1; /* one version until the first release */
	assert_int_equal(rckpt_pcr_open(f->h, &d, "d", &o), -EINVAL);
	assert_non_null(strstr(rckpt_errmsg(f->h), "where this library takes"));
	o.version = 0;
	assert_int_equal(rckpt_pcr_open(f->h, &d, "d", &o), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_build_and_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pixels_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rewind_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lookup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scaled_read, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
