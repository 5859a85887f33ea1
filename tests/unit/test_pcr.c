/*
 * test_pcr.c — Progressive Compressed Records (formats/pcr.md): the golden
 * vectors of version 1, damage and limits, the cls messages, the JPEG scan
 * splitter on hand-made streams, and on the whole real data set (when
 * RCKPT_TEST_PCR_DIR names one): lossless at the last group, every prefix
 * decodable. Prefixes of JPEGs made here: the luma spectral range the
 * splitter reports (RCKPT_PCR_SCALE_AUTO), and each prefix transcoded to a
 * baseline JPEG keeps its DCT coefficients exactly (issue 29).
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
#include "rckpt_pcr_internal.h"
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
	b.len = 0; /* a reply with fewer entries than it said is not sent */
	assert_int_equal(rckpt_msg_pcr_jpegs_begin(&b, &at, 2), 0);
	assert_int_equal(rckpt_msg_pcr_jpegs_add(&b, &im, &len_at), 0);
	assert_int_equal(rckpt_buf_append(&b, jpeg_b, sizeof(jpeg_b)), 0);
	assert_int_equal(rckpt_msg_pcr_jpegs_add_done(&b, len_at), 0);
	assert_int_equal(rckpt_msg_pcr_jpegs_end(&b, at), -EINVAL);
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
		TEST_SKIP(TEST_NEED_DATA, "RCKPT_TEST_PCR_DIR names no data set (bench/data/make_pcr_images.py)");
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

/* ---- prefixes of a real progressive JPEG ---- */

#define TW 100 /* not a multiple of 16: partial MCUs */
#define TH 72

/* A baseline JPEG of a textured test card (gray: one component). */
static void make_card(int gray, unsigned char **jpg, unsigned long *len)
{
	uint8_t *px = malloc(TW * TH * 3);
	tjhandle t = tjInitCompress();
	unsigned x, y, seed = 12345;
	assert_non_null(px);
	assert_non_null(t);
	for (y = 0; y < TH; y++)
		for (x = 0; x < TW; x++) {
			uint8_t *p = &px[(y * TW + x) * 3];
			seed = seed * 1664525u + 1013904223u;
			p[0] = (uint8_t)(x * 2 + ((x / 5 + y / 7) & 1) * 60 + (seed >> 28));
			p[1] = (uint8_t)(y * 3 + (seed >> 27));
			p[2] = (uint8_t)((x * y) >> 4);
		}
	*jpg = NULL;
	*len = 0;
	assert_int_equal(tjCompress2(t, px, TW, 0, TH, TJPF_RGB, jpg, len, gray ? TJSAMP_GRAY : TJSAMP_420, 92,
				     0),
			 0);
	tjDestroy(t);
	free(px);
}

typedef struct coefs {
	short *v;
	size_t n, cap;
} coefs_t;

/* tjtransform.customFilter: appends every coefficient handed over. */
static int keep_coefs(short *c, tjregion array, tjregion plane, int comp, int xi, tjtransform *t)
{
	coefs_t *k = t->data;
	size_t n = (size_t)array.w * array.h;
	(void)plane;
	(void)comp;
	(void)xi;
	if (k->n + n > k->cap) {
		short *p = realloc(k->v, (k->cap = 2 * (k->n + n)) * sizeof(*p));
		if (p == NULL)
			return -1;
		k->v = p;
	}
	memcpy(k->v + k->n, c, n * sizeof(*c));
	k->n += n;
	return 0;
}

/* The DCT coefficients of a JPEG, as the transformer reads them. */
static void coefs_of(tjhandle xh, const uint8_t *jpg, size_t len, coefs_t *out)
{
	tjtransform xf;
	unsigned char *o = NULL;
	unsigned long ol = 0;
	memset(out, 0, sizeof(*out));
	memset(&xf, 0, sizeof(xf));
	xf.options = TJXOPT_NOOUTPUT;
	xf.customFilter = keep_coefs;
	xf.data = out;
	assert_int_equal(tjTransform(xh, jpg, (unsigned long)len, 1, &o, &ol, &xf, 0), 0);
	if (o)
		tjFree(o);
	assert_true(out->n > 0);
}

/* For a colour and a gray image: each prefix's luma spectral range and
 * the scale RCKPT_PCR_SCALE_AUTO takes from it; each prefix transcoded
 * to a baseline JPEG (what issue 29 measured as a reader path, and left
 * out: it does not pay) has the prefix's coefficients exactly, and at the
 * last group its pixels too. Below the last group the pixels differ: the
 * progressive decoder smooths the blocks whose coefficients are still
 * missing (libjpeg's block smoothing) and the baseline decoder cannot. */
static void test_prefix_scale_and_transcode(void **state)
{
	/* libjpeg's default progression: colour: DC; Y 1-5; Cr; Cb; Y 6-63;
	 * Y refine; DC refine; Cr, Cb, Y refine. Gray: DC; 1-5; 6-63; refines. */
	static const unsigned se_color[10] = { 0, 5, 5, 5, 63, 63, 63, 63, 63, 63 };
	static const unsigned se_gray[6] = { 0, 5, 63, 63, 63, 63 };
	int gray;

	(void)state;
	for (gray = 0; gray <= 1; gray++) {
		unsigned char *src, *prog = NULL;
		unsigned long srclen, proglen = 0;
		tjhandle ph = tjInitTransform(), xh = tjInitTransform(), dh = tjInitDecompress();
		uint8_t *a = malloc(TW * TH * 3), *b = malloc(TW * TH * 3), *pre = NULL;
		rckpt_pcr_split_t sp, sq;
		tjtransform xf;
		unsigned k;

		assert_non_null(ph);
		assert_non_null(xh);
		assert_non_null(dh);
		make_card(gray, &src, &srclen);
		memset(&xf, 0, sizeof(xf));
		xf.options = TJXOPT_PROGRESSIVE | TJXOPT_COPYNONE;
		assert_int_equal(tjTransform(ph, src, srclen, 1, &prog, &proglen, &xf, 0), 0);
		assert_int_equal(rckpt_pcr_jpeg_split(&sp, prog, proglen), 0);
		assert_int_equal(sp.nscans, gray ? 6 : 10);
		assert_int_equal(sp.luma_se, 63);
		assert_non_null(pre = malloc(proglen + 2));
		for (k = 1; k <= sp.nscans; k++) {
			size_t plen = sp.start[k - 1] + sp.len[k - 1] + 2;
			unsigned char *base = NULL;
			unsigned long blen = 0;
			coefs_t cp, cb;
			unsigned se = gray ? se_gray[k - 1] : se_color[k - 1];
			int same;

			memcpy(pre, prog, plen - 2);
			pre[plen - 2] = 0xFF;
			pre[plen - 1] = 0xD9;
			assert_int_equal(rckpt_pcr_jpeg_split(&sq, pre, plen), 0);
			assert_int_equal(sq.luma_se, se);
			assert_int_equal(rckpt_pcr_auto_scale(sq.luma_se), se == 0 ? 8 : se <= 9 ? 2 : 1);
			/* xh never makes a progressive JPEG: in libjpeg-turbo 2.1.5
			 * a handle that made one makes corrupt baseline ones */
			memset(&xf, 0, sizeof(xf));
			xf.options = TJXOPT_COPYNONE;
			assert_int_equal(tjTransform(xh, pre, plen, 1, &base, &blen, &xf, 0), 0);
			assert_int_equal(rckpt_pcr_jpeg_split(&sq, base, blen), 0);
			assert_false(sq.progressive);
			assert_int_equal(sq.nscans, 1);
			coefs_of(xh, pre, plen, &cp);
			coefs_of(xh, base, blen, &cb);
			assert_int_equal(cp.n, cb.n);
			assert_memory_equal(cp.v, cb.v, cp.n * sizeof(short));
			assert_int_equal(tjDecompress2(dh, pre, plen, a, TW, 0, TH, TJPF_RGB, 0), 0);
			assert_int_equal(tjDecompress2(dh, base, blen, b, TW, 0, TH, TJPF_RGB, 0), 0);
			same = memcmp(a, b, TW * TH * 3) == 0;
			if (k == sp.nscans)
				assert_true(same); /* every coefficient known: no smoothing */
			free(cp.v);
			free(cb.v);
			tjFree(base);
		}
		/* the whole progressive JPEG: the source's pixels */
		assert_int_equal(tjDecompress2(dh, src, srclen, b, TW, 0, TH, TJPF_RGB, 0), 0);
		assert_memory_equal(a, b, TW * TH * 3);
		free(pre);
		free(a);
		free(b);
		tjFree(prog);
		tjFree(src);
		tjDestroy(ph);
		tjDestroy(xh);
		tjDestroy(dh);
	}
}

/* The spectral-selection script (build option scan_script): for a colour
 * and a gray card, ten scans, each of one spectral band with no successive
 * approximation (SOS: Ah = Al = 0), covering every coefficient of every
 * component once; the same DCT coefficients as the source, so the same
 * pixels at the last group; every prefix decodes. A truncated or
 * non-JPEG input is refused with libjpeg's reason, and nothing leaks. */
static void test_spectral_script(void **state)
{
	tjhandle xh = tjInitTransform(), dh = tjInitDecompress();
	int gray;
	(void)state;
	assert_non_null(xh);
	assert_non_null(dh);
	for (gray = 0; gray <= 1; gray++) {
		unsigned char *card = NULL;
		unsigned long clen = 0;
		uint8_t *prog = NULL, *a, *b;
		size_t plen = 0;
		char why[200];
		rckpt_pcr_split_t sp;
		unsigned g, k, seen[3][64];
		coefs_t c0, c1;
		int w0, h0, w1, h1;

		make_card(gray, &card, &clen);
		assert_int_equal(rckpt_pcr_transcode_spectral(card, clen, &prog, &plen, why, sizeof(why)), 0);
		assert_int_equal(rckpt_pcr_jpeg_split(&sp, prog, plen), 0);
		assert_true(sp.progressive);
		assert_int_equal(sp.nscans, 10);
		assert_int_equal(sp.ncomp, gray ? 1 : 3);
		memset(seen, 0, sizeof(seen));
		for (g = 0; g < sp.nscans; g++) {
			const uint8_t *q = prog + sp.start[g], *end = q + sp.len[g];
			unsigned ns, ss, se, ahal, c;
			while (q + 4 <= end && q[0] == 0xFF && q[1] != 0xDA) /* its tables (DHT) first */
				q += 2 + ((unsigned)q[2] << 8 | q[3]);
			assert_true(q + 10 <= end);
			assert_int_equal(q[0], 0xFF);
			assert_int_equal(q[1], 0xDA); /* SOS */
			ns = q[4];
			assert_true(ns >= 1 && ns <= 3);
			ss = q[5 + 2 * ns];
			se = q[6 + 2 * ns];
			ahal = q[7 + 2 * ns];
			assert_int_equal(ahal, 0);
			assert_true(ss <= se && se <= 63);
			for (c = 0; c < ns; c++) {
				unsigned id = q[5 + 2 * c], ci = gray ? 0 : id - 1; /* component ids 1, 2, 3 */
				assert_true(ci < sp.ncomp);
				for (k = ss; k <= se; k++)
					seen[ci][k]++;
			}
		}
		for (g = 0; g < sp.ncomp; g++)
			for (k = 0; k < 64; k++)
				assert_int_equal(seen[g][k], 1);
		coefs_of(xh, card, clen, &c0);
		coefs_of(xh, prog, plen, &c1);
		assert_int_equal(c0.n, c1.n);
		assert_memory_equal(c0.v, c1.v, c0.n * sizeof(short));
		free(c0.v);
		free(c1.v);
		a = decode_rgb(dh, card, clen, &w0, &h0);
		b = decode_rgb(dh, prog, plen, &w1, &h1);
		assert_int_equal(w0, w1);
		assert_int_equal(h0, h1);
		assert_memory_equal(a, b, (size_t)w0 * h0 * 3);
		free(a);
		free(b);
		for (g = 1; g < sp.nscans; g++) { /* a prefix: header, g scans, EOI */
			size_t n = sp.start[g];
			uint8_t *pre = malloc(n + 2);
			assert_non_null(pre);
			memcpy(pre, prog, n);
			pre[n] = 0xFF;
			pre[n + 1] = 0xD9;
			b = decode_rgb(dh, pre, n + 2, &w1, &h1);
			assert_int_equal(w1, w0);
			free(b);
			free(pre);
		}
		free(prog);
		/* refused: cut short, and not a JPEG */
		prog = (uint8_t *)1;
		assert_int_equal(rckpt_pcr_transcode_spectral(card, clen / 2, &prog, &plen, why, sizeof(why)),
				 -EBADMSG);
		assert_null(prog);
		assert_true(strlen(why) > 0);
		assert_int_equal(rckpt_pcr_transcode_spectral((const uint8_t *)"not a jpeg", 10, &prog, &plen, why,
							      sizeof(why)),
				 -EBADMSG);
		assert_non_null(strstr(why, "JPEG"));
		tjFree(card);
	}
	tjDestroy(xh);
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
		cmocka_unit_test(test_prefix_scale_and_transcode),
		cmocka_unit_test(test_spectral_script),
	};
	return test_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
