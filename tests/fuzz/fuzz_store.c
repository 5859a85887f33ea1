/*
 * fuzz_store.c — libFuzzer target: the checkpoint store's object-class
 * methods (cls/rckpt/cls_rckpt_*.c) as the OSD runs them, on in-memory objects.
 * The first byte picks what to do:
 *   0..15  call a method with the rest as its input, on a chunk object
 *          holding a real log (base, deltas, a compacted part) or on a job
 *          object with committed steps and a pin (put and retire, on odd
 *          lengths, on a manifest object its writer put);
 *   16..   damage the chunk object (the rest: offset, then bytes written
 *          over its data or over one omap value; bit 0 of the first byte
 *          picks which), then materialize one step (bits 2..7 pick it,
 *          bit 1 whole or a range), verify, index, compact and trim it
 *          with well-formed requests.
 * Whatever happens, no method may crash, leak or read out of bounds; a
 * failed call must leave the object as it was (mem_obj_call checks it by
 * construction); and every successful reply must decode.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cls_rckpt_methods.h"
#include "mem_obj.h"
#include "rckpt_manifest.h"
#include "rckpt_record.h"
#include "rckpt_store_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N 97
#define STEPS 8
#define WRITER 9 /* the claim token of the seed's writer */

static void levels(uint8_t *lv, unsigned s)
{
	uint32_t x = 7;
	unsigned i, k;
	for (i = 0; i < N; i++) {
		x = x * 1664525u + 1013904223u;
		lv[i] = (uint8_t)((x >> 24) % 6);
	}
	for (k = 1; k <= s; k++)
		for (i = 0; i < 9; i++) {
			x = x * 1664525u + 1013904223u;
			lv[(x >> 8) % N] = (uint8_t)((x >> 4) % 6);
		}
}

static int encode(rckpt_buf_t *out, unsigned s, int base)
{
	static uint8_t lv[N], plv[N];
	rckpt_seg_t seg, pseg;
	rckpt_record_t r, p;
	rckpt_istream_opts_t is = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_HUFF, 1, NULL, 0, 0 };
	unsigned j;
	memset(&seg, 0, sizeof(seg));
	seg.n = N;
	seg.encoding = RCKPT_SEG_QUANTIZED;
	seg.dtype = RCKPT_DT_F32;
	seg.nbins = 6;
	for (j = 0; j < 6; j++)
		seg.centroids[j] = -1.0f + 0.4f * (float)j;
	pseg = seg;
	levels(lv, s);
	seg.idx = lv;
	memset(&r, 0, sizeof(r));
	r.kind = base ? RCKPT_REC_BASE : RCKPT_REC_DELTA;
	r.step = s;
	r.parent = base ? RCKPT_NO_PARENT : s - 1;
	r.nseg = 1;
	r.seg = &seg;
	if (!base) {
		levels(plv, s - 1);
		pseg.idx = plv;
		p = r;
		p.kind = RCKPT_REC_BASE;
		p.step = s - 1;
		p.parent = RCKPT_NO_PARENT;
		p.seg = &pseg;
	}
	return rckpt_record_encode(out, &r, base ? NULL : &p, &is);
}

static int call(mem_obj_t *m, rckpt_cls_obj_method_fn fn, const uint8_t *in, size_t len)
{
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	int rc = mem_obj_call(m, fn, in, len, &out);
	rckpt_buf_free(&out);
	return rc;
}

static int call_msg(mem_obj_t *m, rckpt_cls_obj_method_fn fn, rckpt_buf_t *msg)
{
	int rc = call(m, fn, msg->p, msg->len);
	msg->len = 0;
	return rc;
}

/* The seeded objects, built once. */
static mem_obj_t chunk0, job0, man0;

static void seed(void)
{
	rckpt_buf_t rec = RCKPT_BUF_INIT, msg = RCKPT_BUF_INIT;
	uint64_t keep[] = { 2 };
	uint8_t sum[4] = { 1, 2, 3, 4 };
	unsigned s;
	for (s = 1; s <= STEPS; s++) {
		/* the last step with its head record (store.md "Head records") */
		rckpt_buf_t head = RCKPT_BUF_INIT;
		rckpt_msg_append_t a;
		rec.len = 0;
		if (encode(&rec, s, s == 1 || s == 5) || (s == STEPS && encode(&head, s, 1)))
			abort();
		a = (rckpt_msg_append_t){ WRITER, { rec.p, rec.len }, { head.p, head.len } };
		if (rckpt_msg_append_head_encode(&msg, &a) || call_msg(&chunk0, cls_rckpt_append, &msg))
			abort();
		rckpt_buf_free(&head);
	}
	if (rckpt_msg_compact_encode(&msg, WRITER, 4, keep, 1) || call_msg(&chunk0, cls_rckpt_compact, &msg))
		abort(); /* 2 (a delta on 4), 4 (a base), 5.. as written, the head record moved */
	if (rckpt_msg_claim_encode(&msg, 0, WRITER, 0) || call_msg(&job0, cls_rckpt_claim, &msg))
		abort();
	for (s = 1; s <= 3; s++) {
		rckpt_msg_commit_t c = { s == 1 ? RCKPT_STORE_NONE : s - 1, s, { sum, sizeof(sum) }, WRITER };
		if (rckpt_msg_commit_encode(&msg, &c) || call_msg(&job0, cls_rckpt_commit, &msg))
			abort();
	}
	if (rckpt_msg_pin_encode(&msg, WRITER, 2, 1) || call_msg(&job0, cls_rckpt_pin, &msg))
		abort();
	{
		rckpt_manifest_t mf;
		memset(&mf, 0, sizeof(mf));
		mf.step = 3;
		mf.parent = 2;
		mf.chunk_params = N;
		rec.len = 0;
		if (rckpt_manifest_encode(&rec, &mf) || rckpt_msg_put_encode(&msg, WRITER, 3, rec.p, rec.len) ||
		    call_msg(&man0, cls_rckpt_put, &msg))
			abort();
	}
	rckpt_buf_free(&rec);
	rckpt_buf_free(&msg);
}

static const rckpt_cls_obj_method_fn chunk_fns[] = {
	cls_rckpt_append, cls_rckpt_materialize, cls_rckpt_index, cls_rckpt_trim,
	cls_rckpt_tip,    cls_rckpt_compact,     cls_rckpt_verify, cls_rckpt_ping,
};
static const rckpt_cls_obj_method_fn job_fns[] = {
	cls_rckpt_head, cls_rckpt_commit, cls_rckpt_list, cls_rckpt_drop, cls_rckpt_pin,
	cls_rckpt_rewind,
	cls_rckpt_claim, cls_rckpt_retire, cls_rckpt_put,
};

/* Replies of read methods must decode. */
static void check_reply(rckpt_cls_obj_method_fn fn, const rckpt_cls_out_t *out)
{
	if (fn == cls_rckpt_materialize) {
		rckpt_msg_materialized_t a;
		rckpt_record_t r;
		if (rckpt_msg_materialized_decode(&a, out->p, out->len) ||
		    rckpt_record_decode(&r, a.record.p, a.record.len, NULL, NULL))
			abort();
		rckpt_record_free(&r);
	} else if (fn == cls_rckpt_index) {
		rckpt_store_entry_t *e;
		uint32_t n;
		if (rckpt_msg_index_decode(&e, &n, out->p, out->len))
			abort();
		free(e);
	} else if (fn == cls_rckpt_verify) {
		rckpt_msg_verified_t v;
		if (rckpt_msg_verified_decode(&v, out->p, out->len))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int seeded;
	mem_obj_t m;
	unsigned op;

	if (!seeded) {
		seed();
		seeded = 1;
	}
	if (size < 1)
		return 0;
	op = data[0];
	data++;
	size--;
	if (op < 16) {
		int is_job = op >= 8;
		rckpt_cls_obj_method_fn fn = is_job ? job_fns[(op - 8) % 8] : chunk_fns[op % 8];
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		const mem_obj_t *on = is_job ? &job0 : &chunk0;
		if ((fn == cls_rckpt_put || fn == cls_rckpt_retire) && (size & 1))
			on = &man0; /* a step's manifest, put by the seed's writer */
		if (mem_obj_copy(&m, on))
			abort();
		if (mem_obj_call(&m, fn, data, size, &out) == 0)
			check_reply(fn, &out);
		rckpt_buf_free(&out);
		mem_obj_free(&m);
		return 0;
	}
	/* Damage the stored chunk, then run well-formed requests on it. */
	if (mem_obj_copy(&m, &chunk0))
		abort();
	if (size >= 2) {
		size_t off = ((size_t)data[0] << 8 | data[1]);
		data += 2;
		size -= 2;
		if (op & 1) { /* over the data */
			size_t i;
			for (i = 0; i < size && m.size; i++)
				m.data[(off + i) % m.size] ^= data[i];
		} else if (m.nkv) { /* over one omap value */
			mem_kv_t *kv = &m.kv[off % m.nkv];
			uint8_t *v = malloc(size ? size : 1);
			if (v == NULL)
				abort();
			if (size)
				memcpy(v, data, size);
			free(kv->val);
			kv->val = v;
			kv->len = size;
		}
	}
	{
		rckpt_buf_t msg = RCKPT_BUF_INIT;
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		uint64_t keep[] = { 2, 6 };
		unsigned s;
		/* one step (1..STEPS, or one past the tip), whole or a range */
		s = 1 + (op >> 2) % (STEPS + 1);
		{
			rckpt_msg_materialize_t q = { s, (op & 2) ? N : 0, { NULL, 0 } };
			if (rckpt_msg_materialize_encode(&msg, &q))
				abort();
			if (mem_obj_call(&m, cls_rckpt_materialize, msg.p, msg.len, &out) == 0)
				check_reply(cls_rckpt_materialize, &out);
			out.len = 0;
			msg.len = 0;
		}
		if (mem_obj_call(&m, cls_rckpt_verify, NULL, 0, &out) == 0)
			check_reply(cls_rckpt_verify, &out);
		out.len = 0;
		if (mem_obj_call(&m, cls_rckpt_index, NULL, 0, &out) == 0)
			check_reply(cls_rckpt_index, &out);
		if (rckpt_msg_compact_encode(&msg, WRITER, 7, keep, 2))
			abort();
		(void)call_msg(&m, cls_rckpt_compact, &msg);
		if (rckpt_msg_trim_encode(&msg, WRITER, 3))
			abort();
		(void)call_msg(&m, cls_rckpt_trim, &msg);
		rckpt_buf_free(&msg);
		rckpt_buf_free(&out);
	}
	mem_obj_free(&m);
	return 0;
}
