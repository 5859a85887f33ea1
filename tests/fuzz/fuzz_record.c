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
	static const uint8_t raw[8] = { 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0 };
	rckpt_record_t parent, out;
	rckpt_seg_t seg[2];
	uint8_t idx[8], rawc[8];
	uint16_t prot[1] = { 0x4120 };
	unsigned p;

	memset(seg, 0, sizeof(seg));
	seg[0].n = 8;
	seg[0].encoding = RCKPT_SEG_QUANTIZED;
	seg[0].dtype = RCKPT_DT_F32;
	seg[0].nbins = 2;
	seg[0].centroids[0] = -0.5f;
	seg[0].centroids[1] = 0.25f;
	memcpy(idx, levels, 8);
	seg[0].idx = idx;
	seg[0].nprot = 1;
	seg[0].prot = prot;
	seg[1].tensor = 1;
	seg[1].n = 2;
	seg[1].encoding = RCKPT_SEG_LOSSLESS;
	seg[1].dtype = RCKPT_DT_F32;
	memcpy(rawc, raw, 8);
	seg[1].raw = rawc;
	parent.kind = RCKPT_REC_BASE;
	parent.step = 42;
	parent.parent = RCKPT_NO_PARENT;
	parent.seg = seg;

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
	for (p = 1; p <= 2; p++) {
		rckpt_record_t onto, took;
		int rc;
		parent.nseg = p;
		rc = rckpt_record_decode(&out, data, size, &parent, &lim);
		/* decoded over a copy of the parent's memory: the same answer */
		took = parent;
		took.seg = calloc(2, sizeof(rckpt_seg_t));
		if (took.seg == NULL)
			abort();
		took.seg[0] = seg[0];
		took.seg[1] = seg[1];
		took.seg[0].idx = malloc(8);
		took.seg[0].prot = malloc(2);
		took.seg[1].raw = malloc(8);
		if (!took.seg[0].idx || !took.seg[0].prot || !took.seg[1].raw)
			abort();
		memcpy(took.seg[0].idx, levels, 8);
		memcpy(took.seg[0].prot, prot, 2);
		memcpy(took.seg[1].raw, raw, 8);
		if (rckpt_record_decode_onto(&onto, data, size, &took, &lim) != rc)
			abort();
		took.nseg = 2; /* both segments freed, whatever parent.nseg */
		rckpt_record_free(&took);
		if (rc == 0) {
			uint32_t i;
			uint64_t k;
			for (i = 0; i < out.nseg; i++) {
				for (k = 0; out.seg[i].idx && k < out.seg[i].n; k++)
					if (out.seg[i].idx[k] > out.seg[i].nbins + 1)
						abort();
				if (out.seg[i].raw && memcmp(out.seg[i].raw, onto.seg[i].raw,
							     out.seg[i].n * rckpt_dtype_size(out.seg[i].dtype)))
					abort();
			}
			rckpt_record_free(&onto);
			rckpt_record_free(&out);
		}
	}
}
