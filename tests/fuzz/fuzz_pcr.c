/*
 * fuzz_pcr.c — libFuzzer target: everything of PCR that reads untrusted
 * bytes, above all what runs in the OSDs. Each input is taken as a record
 * object (as it is, and with its head's CRC made right so that mutations
 * reach the checks behind it) and run through the head decoder, the group
 * checks, the assembler and the cls_pcr methods (read, images, stat) on an
 * in-memory object; as a dataset index (its trailing CRC made right); as a
 * JPEG for the scan splitter; and as each cls_pcr message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cls_pcr_methods.h"
#include "fuzz_crc_fixup.h"
#include "mem_obj.h"
#include "rckpt_pcr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void call(mem_obj_t *m, rckpt_cls_obj_method_fn fn, const rckpt_buf_t *in)
{
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	(void)mem_obj_call(m, fn, in ? in->p : NULL, in ? in->len : 0, &out);
	rckpt_buf_free(&out);
}

static void as_record(const uint8_t *data, size_t size)
{
	static const uint32_t idx[] = { 0, 1, 5, 0 };
	rckpt_buf_t in = RCKPT_BUF_INIT, j = RCKPT_BUF_INIT;
	rckpt_pcr_head_t h;
	mem_obj_t m;

	if (rckpt_pcr_head_decode(&h, data, size) == 0) {
		unsigned i;
		(void)rckpt_pcr_groups_check(&h, data, size, h.f.ngroups);
		for (i = 0; i < h.f.nimages && i < 64; i++) {
			j.len = 0;
			(void)rckpt_pcr_assemble(&j, &h, i, h.f.ngroups, data, size);
		}
		rckpt_pcr_head_free(&h);
	}
	memset(&m, 0, sizeof(m));
	m.exists = 1;
	m.data = malloc(size ? size : 1);
	if (m.data == NULL)
		return;
	if (size)
		memcpy(m.data, data, size);
	m.size = size;
	call(&m, cls_pcr_stat, NULL);
	if (rckpt_msg_pcr_read_encode(&in, RCKPT_PCR_GROUPS_ALL) == 0)
		call(&m, cls_pcr_read, &in);
	in.len = 0;
	if (rckpt_msg_pcr_read_encode(&in, 1) == 0)
		call(&m, cls_pcr_read, &in);
	in.len = 0;
	if (rckpt_msg_pcr_images_encode(&in, 2, idx, 4) == 0)
		call(&m, cls_pcr_images, &in);
	in.len = 0;
	if (rckpt_msg_pcr_images_encode(&in, RCKPT_PCR_GROUPS_ALL, idx, 1) == 0)
		call(&m, cls_pcr_images, &in);
	mem_obj_free(&m);
	rckpt_buf_free(&in);
	rckpt_buf_free(&j);
}

/* A copy whose head CRC (at head_len - 4) is right; NULL when there is none. */
static uint8_t *head_fixed(const uint8_t *data, size_t size)
{
	uint32_t head_len, crc;
	uint8_t *p;
	if (size < RCKPT_PCR_FIXED_BYTES)
		return NULL;
	head_len = rckpt_le32(data + 16);
	if (head_len < 8 || head_len > size || (p = malloc(size)) == NULL)
		return NULL;
	memcpy(p, data, size);
	crc = rckpt_crc32c(0, p, head_len - 4);
	p[head_len - 4] = (uint8_t)crc;
	p[head_len - 3] = (uint8_t)(crc >> 8);
	p[head_len - 2] = (uint8_t)(crc >> 16);
	p[head_len - 1] = (uint8_t)(crc >> 24);
	return p;
}

static void as_messages(const uint8_t *data, size_t size)
{
	rckpt_pcr_jpegs_reader_t jr;
	rckpt_pcr_jpeg_t e;
	rckpt_msg_pcr_stat_t st;
	rckpt_pcr_split_t sp;
	const uint8_t *p;
	size_t len;
	uint32_t n;
	uint16_t k;

	(void)rckpt_msg_pcr_read_decode(&k, data, size);
	(void)rckpt_msg_pcr_prefix_decode(&k, &p, &len, data, size);
	(void)rckpt_msg_pcr_images_decode(&k, &p, &n, data, size);
	(void)rckpt_msg_pcr_stat_decode(&st, data, size);
	if (rckpt_msg_pcr_jpegs_open(&jr, data, size) == 0)
		while (rckpt_msg_pcr_jpegs_next(&jr, &e) == 1)
			;
	(void)rckpt_pcr_jpeg_split(&sp, data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed = head_fixed(data, size), *ifixed = fuzz_crc_fixed_copy(data, size);
	rckpt_pcr_index_t x;

	as_record(data, size);
	if (fixed)
		as_record(fixed, size);
	if (rckpt_pcr_index_decode(&x, data, size) == 0)
		rckpt_pcr_index_free(&x);
	if (ifixed && rckpt_pcr_index_decode(&x, ifixed, size) == 0)
		rckpt_pcr_index_free(&x);
	as_messages(data, size);
	free(fixed);
	free(ifixed);
	return 0;
}
