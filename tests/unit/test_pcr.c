/*
 * test_pcr.c — Progressive Compressed Records (formats/pcr.md): the golden
 * vectors of version 1, damage and limits, the cls messages, the JPEG scan
 * splitter on hand-made streams, and on the whole real data set (when
 * RCKPT_TEST_PCR_DIR names one): lossless at the last group, every prefix
 * decodable.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <turbojpeg.h>

#include "golden_hex.h"
#include "test_skip.h"

#include "rckpt_bytes.h"
#include "rckpt_crc32c.h"
#include "rckpt_pcr.h"
#include "rckpt_wire.h"

/* The golden record's two images, as the builder would hand them over. */
static const uint8_t jpeg_a[] = { 0xff, 0xd8, 0xff, 0xc2, 0x11, 0x12, 0x13, 0x21, 0x22, 0xff, 0xd9 };
static const uint8_t jpeg_b[] = { 0xff, 0xd8, 0xff, 0xc0, 0x31, 0xff, 0xd9 };

static void golden_sources(rckpt_pcr_src_t src[2])
{
	memset(src, 0, 2 * sizeof(*src));
	src[0].id = 0;
	src[0].name = "a.jpg";
	src[0].label = (const uint8_t *)"cat";
	src[0].label_len = 3;
	src[0].jpeg = jpeg_a;
	src[0].split.header_len = 4;
	src[0].split.nscans = 2;
	src[0].split.start[0] = 4;
	src[0].split.len[0] = 3;
	src[0].split.start[1] = 7;
	src[0].split.len[1] = 2;
	src[1].id = 1;
	src[1].name = "b.jpg";
	src[1].jpeg = jpeg_b;
	src[1].split.header_len = 4;
	src[1].split.nscans = 1;
	src[1].split.start[0] = 4;
	src[1].split.len[0] = 1;
}

static void test_golden_record(void **state)
{
	uint8_t want[512];
	size_t n = golden_hex("pcr-record-v1.hex", want, sizeof(want));
	rckpt_pcr_src_t src[2];
	rckpt_buf_t b = RCKPT_BUF_INIT, j = RCKPT_BUF_INIT;
	rckpt_pcr_head_t h;

	(void)state;
	golden_sources(src);
	assert_int_equal(rckpt_pcr_record_encode(&b, 0, src, 2), 0);
	assert_int_equal(b.len, n);
	assert_memory_equal(b.p, want, n);

	assert_int_equal(rckpt_pcr_head_decode(&h, want, n), 0);
	assert_int_equal(h.f.nimages, 2);
	assert_int_equal(h.f.ngroups, 2);
	assert_int_equal(h.f.head_len, 109);
	assert_int_equal(h.end[0], 113);
	assert_int_equal(h.end[1], 115);
	assert_int_equal(h.img[0].name_len, 5);
	assert_memory_equal(h.img[0].name, "a.jpg", 5);
	assert_int_equal(h.img[0].label_len, 3);
	assert_int_equal(h.img[1].label_len, 0);
	assert_int_equal(rckpt_pcr_scan_len(&h.img[0], 2), 2);
	assert_int_equal(rckpt_pcr_scan_len(&h.img[1], 2), 0);
	assert_int_equal(rckpt_pcr_groups_check(&h, want, n, 2), 0);
	/* an image at k groups: its header, scans 1..k, EOI */
	assert_int_equal(rckpt_pcr_assemble(&j, &h, 0, 2, want, n), 0);
	assert_int_equal(j.len, sizeof(jpeg_a));
	assert_memory_equal(j.p, jpeg_a, sizeof(jpeg_a));
	j.len = 0;
	assert_int_equal(rckpt_pcr_assemble(&j, &h, 0, 1, want, 113), 0);
	assert_memory_equal(j.p, ((uint8_t[]){ 0xff, 0xd8, 0xff, 0xc2, 0x11, 0x12, 0x13, 0xff, 0xd9 }), 9);
	j.len = 0;
	assert_int_equal(rckpt_pcr_assemble(&j, &h, 1, 2, want, n), 0);
	assert_int_equal(j.len, sizeof(jpeg_b));
	assert_memory_equal(j.p, jpeg_b, sizeof(jpeg_b));
	/* a prefix too short for the groups asked */
	assert_int_equal(rckpt_pcr_assemble(&j, &h, 0, 2, want, 113), -EBADMSG);
	assert_int_equal(rckpt_pcr_groups_check(&h, want, 113, 2), -EBADMSG);
	rckpt_pcr_head_free(&h);
	rckpt_buf_free(&j);
	rckpt_buf_free(&b);
}

static void test_golden_index(void **state)
{
	uint8_t want[512];
	size_t n = golden_hex("pcr-index-v1.hex", want, sizeof(want));
	uint32_t off[3] = { 0, 3, 3 };
	rckpt_pcr_index_rec_t rec;
	rckpt_pcr_index_t x, d;
	rckpt_buf_t b = RCKPT_BUF_INIT;

	(void)state;
	memset(&x, 0, sizeof(x));
	memset(&rec, 0, sizeof(rec));
	rec.first_id = 0;
	rec.nimages = 2;
	rec.head_len = 109;
	rec.ngroups = 2;
	rec.end[0] = 113;
	rec.end[1] = 115;
	x.nrecords = 1;
	x.nimages = 2;
	x.ngroups = 2;
	x.fidelity_sample = 2;
	x.created = 1700000000;
	x.source_bytes = 20;
	x.head_bytes = 109;
	x.group_bytes[0] = 4;
	x.group_bytes[1] = 2;
	x.mssim[0] = 0.5;
	x.mssim[1] = 1.0;
	x.group_images[0] = 2;
	x.group_images[1] = 1;
	x.rec = &rec;
	x.label_off = off;
	x.labels = (const uint8_t *)"cat";
	assert_int_equal(rckpt_pcr_index_encode(&b, &x), 0);
	assert_int_equal(b.len, n);
	assert_memory_equal(b.p, want, n);
	assert_int_equal(rckpt_pcr_index_decode(&d, want, n), 0);
	assert_int_equal(d.nrecords, 1);
	assert_int_equal(d.nimages, 2);
	assert_int_equal(d.rec[0].end[1], 115);
	assert_true(d.mssim[0] == 0.5);
	assert_int_equal(d.label_off[1], 3);
	assert_int_equal(d.label_off[2], 3);
	assert_memory_equal(d.labels, "cat", 3);
	rckpt_pcr_index_free(&d);
	/* every byte matters: a flip fails the CRC or a check */
	for (size_t i = 0; i < n; i++) {
		want[i] ^= 0x40;
		assert_int_not_equal(rckpt_pcr_index_decode(&d, want, n), 0);
		want[i] ^= 0x40;
	}
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(rckpt_pcr_index_decode(&d, want, i), 0);
	rckpt_buf_free(&b);
}

/* Re-seals the head's CRC after an edit, so that checks behind it run. */
static void reseal(uint8_t *p)
{
	uint32_t head_len = rckpt_le32(p + 16), crc;
	if (head_len < 4 || head_len > 115)
		return;
	crc = rckpt_crc32c(0, p, head_len - 4);
	memcpy(p + head_len - 4, (uint8_t[]){ (uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16),
					       (uint8_t)(crc >> 24) },
	       4);
}

static void test_record_damage(void **state)
{
	uint8_t want[512], p[512];
	size_t n = golden_hex("pcr-record-v1.hex", want, sizeof(want));
	rckpt_pcr_head_t h;
	size_t i;
	unsigned bit;

	(void)state;
	/* any flip in the head fails its CRC; in the groups, their CRC */
	for (i = 0; i < n; i++) {
		memcpy(p, want, n);
		p[i] ^= 0x01;
		if (i < 109) {
			assert_int_not_equal(rckpt_pcr_head_decode(&h, p, n), 0);
		} else {
			assert_int_equal(rckpt_pcr_head_decode(&h, p, n), 0);
			assert_int_equal(rckpt_pcr_groups_check(&h, p, n, 2), RCKPT_FMT_ECHECKSUM);
			rckpt_pcr_head_free(&h);
		}
	}
	/* truncated heads */
	for (i = 0; i < 109; i++)
		assert_int_not_equal(rckpt_pcr_head_decode(&h, want, i), 0);
	/* flips behind a resealed CRC: rejected or still consistent, never a crash
	 * (the fuzzer goes further) */
	for (i = 0; i < 105; i++)
		for (bit = 0; bit < 8; bit++) {
			memcpy(p, want, n);
			p[i] ^= (uint8_t)(1u << bit);
			reseal(p);
			if (rckpt_pcr_head_decode(&h, p, n) == 0) {
				rckpt_buf_t j = RCKPT_BUF_INIT;
				unsigned k;
				for (k = 0; k < h.f.nimages; k++) {
					j.len = 0;
					(void)rckpt_pcr_assemble(&j, &h, k, h.f.ngroups, p, n);
				}
				rckpt_buf_free(&j);
				rckpt_pcr_head_free(&h);
			}
		}
	/* a newer version is named as such */
	memcpy(p, want, n);
	p[4] = 2;
	reseal(p);
	assert_int_equal(rckpt_pcr_head_decode(&h, p, n), RCKPT_FMT_EVERSION);
	/* reserved flags must be zero */
	memcpy(p, want, n);
	p[6] = 1;
	reseal(p);
	assert_int_equal(rckpt_pcr_head_decode(&h, p, n), -EBADMSG);
	/* a group size that disagrees with the scan lengths */
	memcpy(p, want, n);
	p[24] = 114;
	reseal(p);
	assert_int_equal(rckpt_pcr_head_decode(&h, p, n), -EBADMSG);
}

static void test_encode_limits(void **state)
{
	rckpt_pcr_src_t src[2];
	rckpt_buf_t b = RCKPT_BUF_INIT;

	(void)state;
	golden_sources(src);
	src[1].id = 5; /* ids must follow each other */
	assert_int_equal(rckpt_pcr_record_encode(&b, 0, src, 2), -EINVAL);
	golden_sources(src);
	src[0].name = "a/b.jpg";
	assert_int_equal(rckpt_pcr_record_encode(&b, 0, src, 2), -EINVAL);
	golden_sources(src);
	src[0].name = "..";
	assert_int_equal(rckpt_pcr_record_encode(&b, 0, src, 2), -EINVAL);
	golden_sources(src);
	src[0].label_len = RCKPT_PCR_MAX_LABEL + 1;
	assert_int_equal(rckpt_pcr_record_encode(&b, 0, src, 2), -EINVAL);
	assert_int_equal(rckpt_pcr_record_encode(&b, 0, src, 0), -EINVAL);
	assert_int_equal(b.len, 0);
}

static void test_messages(void **state)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	uint32_t idx[3] = { 7, 0, 7 };
	const uint8_t *ip, *pp;
	uint32_t n;
	uint16_t k;
	size_t len, at, len_at;
	rckpt_msg_pcr_stat_t s, t;
	rckpt_pcr_img_t im;
	rckpt_pcr_jpegs_reader_t jr;
	rckpt_pcr_jpeg_t e;

	(void)state;
	assert_int_equal(rckpt_msg_pcr_read_encode(&b, 3), 0);
	assert_int_equal(rckpt_msg_pcr_read_decode(&k, b.p, b.len), 0);
	assert_int_equal(k, 3);
	assert_int_not_equal(rckpt_msg_pcr_read_decode(&k, b.p, b.len - 1), 0);
	b.len = 0;
	assert_int_equal(rckpt_msg_pcr_read_encode(&b, 0), -EINVAL);
	assert_int_equal(rckpt_msg_pcr_read_encode(&b, 65), -EINVAL);
	assert_int_equal(rckpt_msg_pcr_read_encode(&b, RCKPT_PCR_GROUPS_ALL), 0);
	b.len = 0;
	assert_int_equal(rckpt_msg_pcr_prefix_encode(&b, 2, (const uint8_t *)"abc", 3), 0);
	assert_int_equal(rckpt_msg_pcr_prefix_decode(&k, &pp, &len, b.p, b.len), 0);
	assert_int_equal(k, 2);
	assert_int_equal(len, 3);
	assert_memory_equal(pp, "abc", 3);
	b.len = 0;
	assert_int_equal(rckpt_msg_pcr_images_encode(&b, 2, idx, 3), 0);
	assert_int_equal(rckpt_msg_pcr_images_decode(&k, &ip, &n, b.p, b.len), 0);
	assert_int_equal(n, 3);
	assert_int_equal(rckpt_le32(ip + 8), 7);
	b.p[RCKPT_WIRE_HEADER_BYTES + 2] = 0xff; /* a count past the bytes */
	assert_int_equal(rckpt_msg_pcr_images_decode(&k, &ip, &n, b.p, b.len), -EBADMSG);
	assert_int_equal(rckpt_msg_pcr_images_encode(&b, 2, idx, 0), -EINVAL);
	b.len = 0;
	memset(&im, 0, sizeof(im));
	im.id = 9;
	im.name = "x.jpg";
	im.name_len = 5;
	assert_int_equal(rckpt_msg_pcr_jpegs_begin(&b, &at, 1), 0);
	assert_int_equal(rckpt_msg_pcr_jpegs_add(&b, &im, &len_at), 0);
	assert_int_equal(rckpt_buf_append(&b, jpeg_b, sizeof(jpeg_b)), 0);
	assert_int_equal(rckpt_msg_pcr_jpegs_add_done(&b, len_at), 0);
	assert_int_equal(rckpt_msg_pcr_jpegs_end(&b, at), 0);
	assert_int_equal(rckpt_msg_pcr_jpegs_open(&jr, b.p, b.len), 0);
	assert_int_equal(rckpt_msg_pcr_jpegs_next(&jr, &e), 1);
	assert_int_equal(e.id, 9);
	assert_int_equal(e.jpeg_len, sizeof(jpeg_b));
	assert_int_equal(rckpt_msg_pcr_jpegs_next(&jr, &e), 0);
	b.len = 0;
	memset(&s, 0, sizeof(s));
	s.record_no = 4;
	s.nimages = 2;
	s.head_len = 109;
	s.ngroups = 2;
	s.size = 115;
	s.end[0] = 113;
	s.end[1] = 115;
	assert_int_equal(rckpt_msg_pcr_stat_encode(&b, &s), 0);
	assert_int_equal(rckpt_msg_pcr_stat_decode(&t, b.p, b.len), 0);
	assert_memory_equal(&s, &t, sizeof(s));
	rckpt_buf_free(&b);
}

/* ---- the splitter ---- */

/* SOI, a 2-component-less SOF2, tables, two scans, EOI: hand-made. */
static const uint8_t tiny[] = {
	0xff, 0xd8,                                           /* SOI */
	0xff, 0xc2, 0x00, 0x0b, 0x08, 0x00, 0x10, 0x00, 0x20, 0x01, 0x01, 0x11, 0x00, /* SOF2 16x32, 1 comp */
	0xff, 0xc4, 0x00, 0x03, 0x00,                         /* DHT (stand-in) */
	0xff, 0xda, 0x00, 0x03, 0x01,                         /* SOS */
	0x12, 0xff, 0x00, 0x34, 0xff, 0xd0, 0x56,             /* entropy data: a stuffed FF, RST0 */
	0xff, 0xda, 0x00, 0x03, 0x01,                         /* SOS */
	0x78, 0xff, 0xff, 0x00,                               /* a fill byte, then a stuffed FF */
	0xff, 0xd9,                                           /* EOI */
};

static void test_split(void **state)
{
	rckpt_pcr_split_t s;
	uint8_t p[sizeof(tiny) + 8];

	(void)state;
	assert_int_equal(rckpt_pcr_jpeg_split(&s, tiny, sizeof(tiny)), 0);
	assert_int_equal(s.header_len, 15);
	assert_int_equal(s.nscans, 2);
	assert_int_equal(s.start[0], 15);
	assert_int_equal(s.len[0], 32 - 15);
	assert_int_equal(s.start[1], 32);
	assert_int_equal(s.len[1], sizeof(tiny) - 2 - 32);
	assert_int_equal(s.width, 32);
	assert_int_equal(s.height, 16);
	assert_int_equal(s.ncomp, 1);
	assert_true(s.progressive);
	/* every truncation fails (no EOI) */
	for (size_t i = 0; i < sizeof(tiny); i++)
		assert_int_not_equal(rckpt_pcr_jpeg_split(&s, tiny, i), 0);
	/* bytes after EOI */
	memcpy(p, tiny, sizeof(tiny));
	p[sizeof(tiny)] = 0;
	assert_int_equal(rckpt_pcr_jpeg_split(&s, p, sizeof(tiny) + 1), -EBADMSG);
	/* not a JPEG */
	assert_int_equal(rckpt_pcr_jpeg_split(&s, (const uint8_t *)"GIF89a......", 12), -EBADMSG);
	/* SOS before SOF */
	memcpy(p, tiny, sizeof(tiny));
	p[3] = 0xc4;
	assert_int_equal(rckpt_pcr_jpeg_split(&s, p, sizeof(tiny)), -EBADMSG);
	/* a segment length past the end */
	memcpy(p, tiny, sizeof(tiny));
	p[17] = 0x40;
	assert_int_equal(rckpt_pcr_jpeg_split(&s, p, sizeof(tiny)), -EBADMSG);
	/* a table segment between the last scan and EOI */
	{
		uint8_t q[sizeof(tiny) + 5];
		memcpy(q, tiny, sizeof(tiny) - 2);
		memcpy(q + sizeof(tiny) - 2, (uint8_t[]){ 0xff, 0xfe, 0x00, 0x03, 0x41, 0xff, 0xd9 }, 7);
		assert_int_equal(rckpt_pcr_jpeg_split(&s, q, sizeof(q)), -EBADMSG);
	}
}

static void test_split_too_many_scans(void **state)
{
	uint8_t p[15 + 6 * (RCKPT_PCR_MAX_GROUPS + 1) + 2];
	rckpt_pcr_split_t s;
	size_t n = 15, i;

	(void)state;
	memcpy(p, tiny, 15);
	for (i = 0; i <= RCKPT_PCR_MAX_GROUPS; i++) {
		memcpy(p + n, (uint8_t[]){ 0xff, 0xda, 0x00, 0x03, 0x01, 0x42 }, 6);
		n += 6;
	}
	p[n++] = 0xff;
	p[n++] = 0xd9;
	assert_int_equal(rckpt_pcr_jpeg_split(&s, p, n), -E2BIG);
	assert_int_equal(rckpt_pcr_jpeg_split(&s, p, n - 8), -EBADMSG);
	memcpy(p + n - 8, (uint8_t[]){ 0xff, 0xd9 }, 2);
	assert_int_equal(rckpt_pcr_jpeg_split(&s, p, n - 6), 0);
	assert_int_equal(s.nscans, RCKPT_PCR_MAX_GROUPS);
}

/* ---- the whole real data set ---- */

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long n;
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = malloc((size_t)n);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

static uint8_t *decode_rgb(tjhandle d, const uint8_t *jpg, size_t len, int *w, int *h)
{
	int sub, cs;
	uint8_t *px;
	assert_int_equal(tjDecompressHeader3(d, jpg, (unsigned long)len, w, h, &sub, &cs), 0);
	px = malloc((size_t)*w * *h * 3);
	assert_non_null(px);
	if (tjDecompress2(d, jpg, (unsigned long)len, px, *w, 0, *h, TJPF_RGB, 0)) {
		print_error("decode: %s\n", tjGetErrorStr2(d));
		fail();
	}
	return px;
}

#define PER_RECORD 256

static void test_dataset_lossless(void **state)
{
	const char *dir = getenv("RCKPT_TEST_PCR_DIR");
	char **names = NULL, path[4096];
	unsigned n = 0, cap = 0, i, first, gray = 0, color = 0, prefixes = 0;
	tjhandle th = tjInitTransform(), dh = tjInitDecompress();
	DIR *dd;
	struct dirent *e;

	(void)state;
	if (dir == NULL || (dd = opendir(dir)) == NULL) {
		TEST_SKIP(TEST_NEED_DATA, "RCKPT_TEST_PCR_DIR names no data set (bench/make_pcr_images.py)");
	}
	while ((e = readdir(dd)) != NULL) {
		size_t l = strlen(e->d_name);
		if (l < 5 || strcmp(e->d_name + l - 4, ".jpg") != 0)
			continue;
		if (n == cap)
			names = realloc(names, (cap = cap ? 2 * cap : 1024) * sizeof(*names));
		names[n++] = strdup(e->d_name);
	}
	closedir(dd);
	assert_true(n > 0);
	qsort(names, n, sizeof(*names), cmp_name);
	for (first = 0; first < n; first += PER_RECORD) {
		unsigned cnt = n - first < PER_RECORD ? n - first : PER_RECORD;
		rckpt_pcr_src_t src[PER_RECORD];
		uint8_t *orig[PER_RECORD];
		size_t olen[PER_RECORD];
		unsigned char *prog[PER_RECORD];
		unsigned long plen[PER_RECORD];
		rckpt_buf_t rec = RCKPT_BUF_INIT, j = RCKPT_BUF_INIT;
		rckpt_pcr_head_t h;

		for (i = 0; i < cnt; i++) {
			tjtransform xf;
			memset(&xf, 0, sizeof(xf));
			xf.options = TJXOPT_PROGRESSIVE | TJXOPT_COPYNONE;
			snprintf(path, sizeof(path), "%s/%s", dir, names[first + i]);
			orig[i] = read_all(path, &olen[i]);
			prog[i] = NULL;
			assert_int_equal(tjTransform(th, orig[i], olen[i], 1, &prog[i], &plen[i], &xf, 0), 0);
			memset(&src[i], 0, sizeof(src[i]));
			src[i].id = first + i;
			src[i].name = names[first + i];
			src[i].jpeg = prog[i];
			assert_int_equal(rckpt_pcr_jpeg_split(&src[i].split, prog[i], plen[i]), 0);
			assert_true(src[i].split.progressive);
			/* header + scans + EOI is the transformed file */
			{
				const rckpt_pcr_split_t *s = &src[i].split;
				assert_int_equal(s->start[0], s->header_len);
				for (unsigned g = 1; g < s->nscans; g++)
					assert_int_equal(s->start[g], s->start[g - 1] + s->len[g - 1]);
				assert_int_equal(s->start[s->nscans - 1] + s->len[s->nscans - 1] + 2, plen[i]);
			}
			if (src[i].split.ncomp == 1)
				gray++;
			else
				color++;
		}
		assert_int_equal(rckpt_pcr_record_encode(&rec, first / PER_RECORD, src, cnt), 0);
		assert_int_equal(rckpt_pcr_head_decode(&h, rec.p, rec.len), 0);
		assert_int_equal(rckpt_pcr_groups_check(&h, rec.p, rec.len, h.f.ngroups), 0);
		for (i = 0; i < cnt; i++) {
			int w0, h0, w1, h1;
			uint8_t *a, *b;
			j.len = 0;
			assert_int_equal(rckpt_pcr_assemble(&j, &h, i, h.f.ngroups, rec.p, rec.len), 0);
			assert_int_equal(j.len, plen[i]);
			assert_memory_equal(j.p, prog[i], plen[i]);
			/* lossless: the same pixels as the original file */
			a = decode_rgb(dh, orig[i], olen[i], &w0, &h0);
			b = decode_rgb(dh, j.p, j.len, &w1, &h1);
			assert_int_equal(w0, w1);
			assert_int_equal(h0, h1);
			if (memcmp(a, b, (size_t)w0 * h0 * 3) != 0) {
				print_error("%s: pixels differ at the last group\n", names[first + i]);
				fail();
			}
			free(b);
			/* every prefix of every 16th image decodes to the full size */
			if (i % 16 == 0)
				for (unsigned k = 1; k < src[i].split.nscans; k++) {
					size_t end = h.end[k - 1];
					j.len = 0;
					assert_int_equal(rckpt_pcr_assemble(&j, &h, i, k, rec.p, end), 0);
					b = decode_rgb(dh, j.p, j.len, &w1, &h1);
					assert_int_equal(w0, w1);
					assert_int_equal(h0, h1);
					free(b);
					prefixes++;
				}
			free(a);
			free(orig[i]);
			tjFree(prog[i]);
		}
		rckpt_pcr_head_free(&h);
		rckpt_buf_free(&rec);
		rckpt_buf_free(&j);
	}
	print_message("%u images (%u grayscale, %u colour) identical at the last group; %u prefixes "
		      "decoded\n",
		      n, gray, color, prefixes);
	assert_true(gray > 0 && color > 0);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	tjDestroy(th);
	tjDestroy(dh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_record),
		cmocka_unit_test(test_golden_index),
		cmocka_unit_test(test_record_damage),
		cmocka_unit_test(test_encode_limits),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_split_too_many_scans),
		cmocka_unit_test(test_dataset_lossless),
	};
	return test_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
