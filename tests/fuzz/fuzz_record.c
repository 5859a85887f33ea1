/*
 * fuzz_record.c — libFuzzer target: the chunk-record decoder, which runs in
 * the OSDs when they materialize. Each input is decoded as a base and as a
 * delta against a small fixed parent (step 42, one quantized segment of 8
 * values in 2 bins, as in tests/golden/ckpt-record-v1.hex) — once as it is,
 * and once with its trailing CRC-32C recomputed, so that mutations reach the
 * segment decoder behind the checksum.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_crc_fixup.h"
#include "rckpt_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode_both(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed = fuzz_crc_fixed_copy(data, size);

	decode_both(data, size);
	if (fixed)
		decode_both(fixed, size);
	free(fixed);
	return 0;
}

static void decode_both(const uint8_t *data, size_t size)
{
	static const uint8_t levels[8] = { 0, 1, 2, 2, 2, 2, 3, 0 };
	rckpt_record_limits_t lim = { 64, 1u << 20 };
	rckpt_record_t parent, out;
	rckpt_seg_t seg;
	uint8_t idx[8];
	uint16_t prot[1] = { 0x4120 };

	memset(&seg, 0, sizeof(seg));
	seg.n = 8;
	seg.encoding = RCKPT_SEG_QUANTIZED;
	seg.dtype = RCKPT_DT_F32;
	seg.nbins = 2;
	seg.centroids[0] = -0.5f;
	seg.centroids[1] = 0.25f;
	memcpy(idx, levels, 8);
	seg.idx = idx;
	seg.nprot = 1;
	seg.prot = prot;
	parent.kind = RCKPT_REC_BASE;
	parent.step = 42;
	parent.parent = RCKPT_NO_PARENT;
	parent.nseg = 1;
	parent.seg = &seg;

	if (rckpt_record_decode(&out, data, size, NULL, &lim) == 0) {
		/* what decodes has the shape the geometry walk says (the OSD
		 * bounds a resume record's decode by it) */
		uint32_t nseg, i;
		uint64_t elements, sum = 0;
		if (rckpt_record_geometry(&nseg, &elements, data, size) != 0 || nseg != out.nseg)
			abort();
		for (i = 0; i < out.nseg; i++)
			sum += out.seg[i].n;
		if (sum != elements)
			abort();
		rckpt_record_free(&out);
	} else {
		uint32_t nseg;
		uint64_t elements;
		(void)rckpt_record_geometry(&nseg, &elements, data, size); /* never crashes */
	}
	if (rckpt_record_decode(&out, data, size, &parent, &lim) == 0) {
		uint32_t i;
		uint64_t k;
		for (i = 0; i < out.nseg; i++)
			for (k = 0; out.seg[i].idx && k < out.seg[i].n; k++)
				if (out.seg[i].idx[k] > out.seg[i].nbins + 1)
					abort();
		rckpt_record_free(&out);
	}
}
