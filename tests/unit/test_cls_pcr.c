/*
 * test_cls_pcr.c — the `pcr` object class's methods on in-memory record
 * objects: read through k groups, images gathered in the OSD (repeats,
 * runs far apart, out-of-range indices), stat, and damaged or missing
 * records.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cls_pcr_methods.h"
#include "mem_obj.h"
#include "rckpt_pcr.h"

#define NIMG 50

typedef struct fixture {
	uint8_t *jpeg[NIMG];
	char name[NIMG][16];
	rckpt_pcr_src_t src[NIMG];
	rckpt_buf_t rec;
	mem_obj_t obj;
} fixture_t;

static uint32_t rnd(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

/* NIMG stand-in images of 1..10 scans of 1..3000 bytes each: the record
 * format does not look inside the JPEG bytes, and the methods do not either. */
static int setup(void **state)
{
	fixture_t *f = calloc(1, sizeof(*f));
	uint32_t seed = 7;
	unsigned i, g;

	for (i = 0; i < NIMG; i++) {
		rckpt_pcr_src_t *s = &f->src[i];
		unsigned ns = 1 + rnd(&seed) % 10, pos = 20;
		uint32_t len[RCKPT_PCR_MAX_GROUPS];
		for (g = 0; g < ns; g++)
			pos += len[g] = 1 + rnd(&seed) % 3000;
		f->jpeg[i] = malloc(pos + 2);
		for (unsigned b = 0; b < pos + 2; b++)
			f->jpeg[i][b] = (uint8_t)rnd(&seed);
		snprintf(f->name[i], sizeof(f->name[i]), "im%02u.jpg", i);
		s->id = i;
		s->name = f->name[i];
		s->label = (const uint8_t *)"lbl";
		s->label_len = i % 4;
		s->jpeg = f->jpeg[i];
		s->split.header_len = 20;
		s->split.nscans = ns;
		for (g = 0, pos = 20; g < ns; g++) {
			s->split.start[g] = pos;
			s->split.len[g] = len[g];
			pos += len[g];
		}
	}
	assert_int_equal(rckpt_pcr_record_encode(&f->rec, 3, f->src, NIMG), 0);
	f->obj.exists = 1;
	f->obj.data = malloc(f->rec.len);
	memcpy(f->obj.data, f->rec.p, f->rec.len);
	f->obj.size = f->rec.len;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture_t *f = *state;
	for (unsigned i = 0; i < NIMG; i++)
		free(f->jpeg[i]);
	rckpt_buf_free(&f->rec);
	mem_obj_free(&f->obj);
	free(f);
	return 0;
}

static void test_read(void **state)
{
	fixture_t *f = *state;
	rckpt_pcr_head_t h;
	rckpt_buf_t in = RCKPT_BUF_INIT;
	unsigned k;

	assert_int_equal(rckpt_pcr_head_decode(&h, f->rec.p, f->rec.len), 0);
	for (k = 1; k <= h.f.ngroups + 1u; k++) {
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		const uint8_t *p;
		size_t len;
		uint16_t got;
		unsigned want = k > h.f.ngroups ? h.f.ngroups : k;
		in.len = 0;
		assert_int_equal(rckpt_msg_pcr_read_encode(&in, (uint16_t)k), 0);
		assert_int_equal(mem_obj_call(&f->obj, cls_pcr_read, in.p, in.len, &out), 0);
		assert_int_equal(rckpt_msg_pcr_prefix_decode(&got, &p, &len, out.p, out.len), 0);
		assert_int_equal(got, want);
		assert_int_equal(len, h.end[want - 1]);
		assert_memory_equal(p, f->rec.p, len);
		rckpt_buf_free(&out);
	}
	/* a malformed request changes nothing and says -EINVAL */
	{
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		assert_int_equal(mem_obj_call(&f->obj, cls_pcr_read, in.p, in.len - 1, &out), -EINVAL);
		assert_int_equal(mem_obj_call(&f->obj, cls_pcr_read, NULL, 0, &out), -EINVAL);
		rckpt_buf_free(&out);
	}
	rckpt_pcr_head_free(&h);
	rckpt_buf_free(&in);
}

static void check_images(fixture_t *f, const uint32_t *idx, uint32_t n, uint16_t k)
{
	rckpt_buf_t in = RCKPT_BUF_INIT, want = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_pcr_jpegs_reader_t jr;
	rckpt_pcr_jpeg_t e;
	rckpt_pcr_head_t h;
	unsigned kk, i;

	assert_int_equal(rckpt_pcr_head_decode(&h, f->rec.p, f->rec.len), 0);
	kk = k == RCKPT_PCR_GROUPS_ALL || k > h.f.ngroups ? h.f.ngroups : k;
	assert_int_equal(rckpt_msg_pcr_images_encode(&in, k, idx, n), 0);
	assert_int_equal(mem_obj_call(&f->obj, cls_pcr_images, in.p, in.len, &out), 0);
	assert_int_equal(rckpt_msg_pcr_jpegs_open(&jr, out.p, out.len), 0);
	assert_int_equal(jr.c.n, n);
	for (i = 0; i < n; i++) {
		assert_int_equal(rckpt_msg_pcr_jpegs_next(&jr, &e), 1);
		assert_int_equal(e.id, idx[i]);
		assert_int_equal(e.name_len, strlen(f->name[idx[i]]));
		assert_memory_equal(e.name, f->name[idx[i]], e.name_len);
		assert_int_equal(e.label_len, idx[i] % 4);
		want.len = 0;
		assert_int_equal(rckpt_pcr_assemble(&want, &h, idx[i], kk, f->rec.p, f->rec.len), 0);
		assert_int_equal(e.jpeg_len, want.len);
		assert_memory_equal(e.jpeg, want.p, want.len);
	}
	assert_int_equal(rckpt_msg_pcr_jpegs_next(&jr, &e), 0);
	/* a subset moves fewer bytes than the prefix it comes from */
	if (n < 5)
		assert_true(out.len < h.end[kk - 1] / 4);
	rckpt_pcr_head_free(&h);
	rckpt_buf_free(&in);
	rckpt_buf_free(&want);
	rckpt_buf_free(&out);
}

static void test_images(void **state)
{
	fixture_t *f = *state;
	const uint32_t one[] = { 17 }, repeats[] = { 3, 0, 3, 49 }, far[] = { 0, 49 };
	uint32_t all[NIMG];
	unsigned i;

	for (i = 0; i < NIMG; i++)
		all[i] = NIMG - 1 - i;
	check_images(f, one, 1, 1);
	check_images(f, one, 1, RCKPT_PCR_GROUPS_ALL);
	check_images(f, repeats, 4, 2);
	check_images(f, far, 2, 3); /* runs far apart: separate reads */
	check_images(f, all, NIMG, 5);
	check_images(f, all, NIMG, RCKPT_PCR_GROUPS_ALL);
}

static void test_images_bad(void **state)
{
	fixture_t *f = *state;
	const uint32_t past[] = { 2, NIMG };
	rckpt_buf_t in = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;

	assert_int_equal(rckpt_msg_pcr_images_encode(&in, 2, past, 2), 0);
	assert_int_equal(mem_obj_call(&f->obj, cls_pcr_images, in.p, in.len, &out), -ERANGE);
	assert_int_equal(mem_obj_call(&f->obj, cls_pcr_images, in.p, in.len - 2, &out), -EINVAL);
	assert_int_equal(mem_obj_call(&f->obj, cls_pcr_images, NULL, 0, &out), -EINVAL);
	rckpt_buf_free(&in);
	rckpt_buf_free(&out);
}

static void test_stat(void **state)
{
	fixture_t *f = *state;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_msg_pcr_stat_t s;
	rckpt_pcr_head_t h;

	assert_int_equal(rckpt_pcr_head_decode(&h, f->rec.p, f->rec.len), 0);
	assert_int_equal(mem_obj_call(&f->obj, cls_pcr_stat, NULL, 0, &out), 0);
	assert_int_equal(rckpt_msg_pcr_stat_decode(&s, out.p, out.len), 0);
	assert_int_equal(s.record_no, 3);
	assert_int_equal(s.nimages, NIMG);
	assert_int_equal(s.ngroups, h.f.ngroups);
	assert_int_equal(s.head_len, h.f.head_len);
	assert_int_equal(s.size, f->rec.len);
	assert_memory_equal(s.end, h.end, sizeof(s.end));
	assert_int_equal(mem_obj_call(&f->obj, cls_pcr_stat, (const uint8_t *)"x", 1, &out), -EINVAL);
	rckpt_pcr_head_free(&h);
	rckpt_buf_free(&out);
}

/* Damaged, truncated, extended or missing records: an error, never a crash. */
static void test_damaged(void **state)
{
	fixture_t *f = *state;
	rckpt_buf_t in = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	mem_obj_t m;
	uint32_t head_len = rckpt_le32(f->rec.p + 16);

	assert_int_equal(rckpt_msg_pcr_read_encode(&in, 2), 0);
	memset(&m, 0, sizeof(m));
	assert_int_equal(mem_obj_call(&m, cls_pcr_read, in.p, in.len, &out), -ENOENT);
	assert_int_equal(mem_obj_copy(&m, &f->obj), 0);
	m.data[head_len / 2] ^= 1;
	assert_int_equal(mem_obj_call(&m, cls_pcr_read, in.p, in.len, &out), RCKPT_FMT_ECHECKSUM);
	mem_obj_free(&m);
	assert_int_equal(mem_obj_copy(&m, &f->obj), 0);
	m.size = head_len + 10; /* the groups are gone */
	assert_int_equal(mem_obj_call(&m, cls_pcr_read, in.p, in.len, &out), -EBADMSG);
	assert_int_equal(mem_obj_call(&m, cls_pcr_stat, NULL, 0, &out), -EBADMSG);
	m.size = 10;
	assert_int_equal(mem_obj_call(&m, cls_pcr_stat, NULL, 0, &out), -EBADMSG);
	mem_obj_free(&m);
	assert_int_equal(mem_obj_copy(&m, &f->obj), 0);
	m.data = realloc(m.data, m.size + 1); /* bytes past the last group */
	m.data[m.size++] = 0;
	assert_int_equal(mem_obj_call(&m, cls_pcr_stat, NULL, 0, &out), -EBADMSG);
	mem_obj_free(&m);
	assert_int_equal(mem_obj_copy(&m, &f->obj), 0);
	m.data[0] = 'X'; /* not a record */
	assert_int_equal(mem_obj_call(&m, cls_pcr_read, in.p, in.len, &out), -EBADMSG);
	mem_obj_free(&m);
	rckpt_buf_free(&in);
	rckpt_buf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read),   cmocka_unit_test(test_images), cmocka_unit_test(test_images_bad),
		cmocka_unit_test(test_stat),   cmocka_unit_test(test_damaged),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
