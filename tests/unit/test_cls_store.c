/*
 * test_cls_store.c — the checkpoint store's object-class bodies
 * (cls/rckpt/cls_rckpt_*.c) on in-memory objects, the chunk methods:
 * append and its checks, materialize (whole chains, a budget and
 * resuming), index, trim, compaction, verify, sparse records, and
 * malformed requests to every method. The job object's methods:
 * test_cls_job.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cls_rckpt_methods.h"
#include "mem_obj.h"
#include "rckpt_record.h"
#include "rckpt_manifest.h"
#include "rckpt_store_wire.h"

#include "cls_head.h"

#define N 20011 /* elements of the test chunk: a prime, divisible by nothing */
#define STEPS 12
#define WRITER 1 /* the claim token of the writer these tests are */

/* Levels of step s: a fixed start, then ~5% of positions change per step. */
static void levels_at(uint8_t *lv, unsigned s)
{
	uint32_t x = 12345;
	unsigned k, i;
	for (i = 0; i < N; i++) {
		x = x * 1664525u + 1013904223u;
		lv[i] = (uint8_t)((x >> 24) % 8);
	}
	for (k = 1; k <= s; k++)
		for (i = 0; i < N / 20; i++) {
			x = x * 1664525u + 1013904223u;
			lv[(x >> 8) % N] = (uint8_t)((x >> 4) % 8);
		}
}

static void make_record(rckpt_record_t *r, rckpt_seg_t *seg, uint8_t *lv, uint64_t step, uint64_t parent)
{
	unsigned j;
	memset(seg, 0, sizeof(*seg));
	seg->n = N;
	seg->encoding = RCKPT_SEG_QUANTIZED;
	seg->dtype = RCKPT_DT_F32;
	seg->nbins = 8;
	for (j = 0; j < 8; j++)
		seg->centroids[j] = -1.0f + 0.25f * (float)j;
	seg->idx = lv;
	memset(r, 0, sizeof(*r));
	r->kind = parent == RCKPT_NO_PARENT ? RCKPT_REC_BASE : RCKPT_REC_DELTA;
	r->step = step;
	r->parent = parent;
	r->nseg = 1;
	r->seg = seg;
}

/* The record of step s: a base, or a delta on step s - 1. */
static void encode_step(rckpt_buf_t *out, unsigned s, int base)
{
	static uint8_t lv[N], plv[N];
	rckpt_record_t r, p;
	rckpt_seg_t seg, pseg;
	rckpt_istream_opts_t is = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };

	levels_at(lv, s);
	make_record(&r, &seg, lv, s, base ? RCKPT_NO_PARENT : s - 1);
	if (!base) {
		levels_at(plv, s - 1);
		make_record(&p, &pseg, plv, s - 1, RCKPT_NO_PARENT);
	}
	assert_int_equal(rckpt_record_encode(out, &r, base ? NULL : &p, &is), 0);
}

/* Appends the record rec (then freed) as the writer holding claim token
 * `writer`: append's return. */
static int append_bytes(mem_obj_t *m, uint64_t writer, rckpt_buf_t *rec)
{
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	int rc;
	assert_int_equal(rckpt_msg_append_encode(&msg, writer, rec->p, rec->len), 0);
	rc = mem_obj_call(m, cls_rckpt_append, msg.p, msg.len, &out);
	assert_int_equal(out.len, 0); /* write methods reply with nothing */
	rckpt_buf_free(rec);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	return rc;
}

/* Appends step s (a base, or a delta on s - 1) as the writer holding
 * claim token `writer`. */
static int append_as(mem_obj_t *m, uint64_t writer, unsigned s, int base)
{
	rckpt_buf_t rec = RCKPT_BUF_INIT;
	encode_step(&rec, s, base);
	return append_bytes(m, writer, &rec);
}

static int append(mem_obj_t *m, unsigned s, int base)
{
	return append_as(m, WRITER, s, base);
}

static int trim_as(mem_obj_t *m, uint64_t writer, uint64_t after)
{
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	int rc;
	assert_int_equal(rckpt_msg_trim_encode(&msg, writer, after), 0);
	rc = mem_obj_call(m, cls_rckpt_trim, msg.p, msg.len, &out);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	return rc;
}

/* The same object: data and every omap entry. */
static void same_obj(const mem_obj_t *a, const mem_obj_t *b)
{
	size_t i;
	assert_int_equal(a->exists, b->exists);
	assert_int_equal(a->size, b->size);
	if (a->size)
		assert_memory_equal(a->data, b->data, a->size);
	assert_int_equal(a->nkv, b->nkv);
	for (i = 0; i < a->nkv; i++) {
		assert_string_equal(a->kv[i].key, b->kv[i].key);
		assert_int_equal(a->kv[i].len, b->kv[i].len);
		if (a->kv[i].len)
			assert_memory_equal(a->kv[i].val, b->kv[i].val, a->kv[i].len);
	}
}

/* Materializes step s (resuming as long as the plugin asks), checks the
 * levels against want, and returns the calls it took. */
static unsigned materialize_want(mem_obj_t *m, unsigned s, uint64_t budget, const uint8_t *want)
{
	rckpt_buf_t start = RCKPT_BUF_INIT;
	unsigned calls = 0;

	for (;;) {
		rckpt_msg_materialize_t q = { s, budget, { start.p, start.len } };
		rckpt_msg_materialized_t a;
		rckpt_buf_t msg = RCKPT_BUF_INIT;
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		rckpt_record_t r;

		assert_int_equal(rckpt_msg_materialize_encode(&msg, &q), 0);
		assert_int_equal(mem_obj_call(m, cls_rckpt_materialize, msg.p, msg.len, &out), 0);
		calls++;
		assert_int_equal(rckpt_msg_materialized_decode(&a, out.p, out.len), 0);
		assert_int_equal(rckpt_record_decode(&r, a.record.p, a.record.len, NULL, NULL), 0);
		assert_int_equal(r.step, a.reached);
		assert_int_equal(r.kind, RCKPT_REC_BASE);
		if (a.done) {
			assert_int_equal(a.reached, s);
			assert_memory_equal(r.seg[0].idx, want, N);
			rckpt_record_free(&r);
			rckpt_buf_free(&msg);
			rckpt_buf_free(&out);
			break;
		}
		assert_true(a.reached != s);
		start.len = 0;
		assert_int_equal(rckpt_buf_append(&start, a.record.p, a.record.len), 0);
		rckpt_record_free(&r);
		rckpt_buf_free(&msg);
		rckpt_buf_free(&out);
		assert_true(calls < 100);
	}
	rckpt_buf_free(&start);
	return calls;
}

/* materialize_want with the levels of levels_at(s). */
static unsigned materialize(mem_obj_t *m, unsigned s, uint64_t budget)
{
	static uint8_t want[N];
	levels_at(want, s);
	return materialize_want(m, s, budget, want);
}

static void test_append_and_materialize(void **state)
{
	mem_obj_t m = { 0 };
	rckpt_msg_head_t h;
	unsigned s;

	(void)state;
	assert_int_equal(append(&m, 2, 0), -ESTALE); /* a delta needs its parent as tip */
	assert_false(m.exists);                         /* and changed nothing */
	assert_int_equal(append(&m, 1, 1), 0);
	for (s = 2; s <= STEPS; s++)
		assert_int_equal(append(&m, s, s == 7), 0); /* step 7: a new base */
	assert_int_equal(append(&m, STEPS, 0), -EEXIST);
	assert_int_equal(append(&m, 5, 1), -EEXIST); /* steps only grow */
	assert_int_equal(append(&m, STEPS + 2, 0), -ESTALE);
	assert_int_equal(call_empty(&m, cls_rckpt_tip, &h), 0);
	assert_int_equal(h.head, STEPS);
	assert_int_equal(h.count, STEPS);
	for (s = 1; s <= STEPS; s++)
		assert_int_equal(materialize(&m, s, 0), 1);
	/* A budget of one record: each call folds one delta past its start. */
	assert_int_equal(materialize(&m, 6, N), 5);
	assert_int_equal(materialize(&m, STEPS, 1), STEPS - 7);
	mem_obj_free(&m);
}

static void test_materialize_errors(void **state)
{
	mem_obj_t m = { 0 };
	rckpt_buf_t msg = RCKPT_BUF_INIT, rec = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_msg_materialize_t q = { 3, 0, { NULL, 0 } };

	(void)state;
	assert_int_equal(append(&m, 1, 1), 0);
	assert_int_equal(append(&m, 2, 0), 0);
	assert_int_equal(rckpt_msg_materialize_encode(&msg, &q), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_materialize, msg.p, msg.len, &out), -ENOENT);
	/* resuming from a base that is not on the chain */
	msg.len = 0;
	encode_step(&rec, 5, 1);
	q.step = 2;
	q.start.p = rec.p;
	q.start.len = rec.len;
	assert_int_equal(rckpt_msg_materialize_encode(&msg, &q), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_materialize, msg.p, msg.len, &out), -ESTALE);
	assert_non_null(strstr(m.why, "not on step")); /* the OSD log says why */
	assert_false(m.damaged);
	/* a damaged record in the log fails closed, and is logged as damage */
	m.data[m.size - 9] ^= 0x40;
	msg.len = 0;
	q.start.len = 0;
	assert_int_equal(rckpt_msg_materialize_encode(&msg, &q), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_materialize, msg.p, msg.len, &out),
			 RCKPT_FMT_ECHECKSUM);
	assert_int_equal(out.len, 0);
	assert_true(m.damaged);
	assert_non_null(strstr(m.why, "CRC-32C"));
	rckpt_buf_free(&msg);
	rckpt_buf_free(&rec);
	mem_obj_free(&m);
}

static void test_trim_and_index(void **state)
{
	mem_obj_t m = { 0 };
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_store_entry_t *e;
	rckpt_msg_head_t h;
	uint32_t n;
	size_t size3;
	unsigned s;

	(void)state;
	for (s = 1; s <= 6; s++) {
		assert_int_equal(append(&m, s, s == 1), 0);
		if (s == 3)
			size3 = m.size;
	}
	assert_int_equal(mem_obj_call(&m, cls_rckpt_index, NULL, 0, &out), 0);
	assert_int_equal(rckpt_msg_index_decode(&e, &n, out.p, out.len), 0);
	assert_int_equal(n, 6);
	assert_int_equal(e[0].kind, RCKPT_REC_BASE);
	assert_int_equal(e[5].parent, 5);
	assert_int_equal(e[5].offset + e[5].length, m.size);
	free(e);
	rckpt_buf_free(&out);

	assert_int_equal(rckpt_msg_trim_encode(&msg, WRITER, 3), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_trim, msg.p, msg.len, &out), 0);
	assert_int_equal(m.size, size3);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_trim, msg.p, msg.len, &out), 0); /* twice: same */
	assert_int_equal(m.size, size3);
	assert_int_equal(call_empty(&m, cls_rckpt_tip, &h), 0);
	assert_int_equal(h.head, 3);
	assert_int_equal(h.count, 3);
	assert_int_equal(append(&m, 4, 0), 0); /* the chain goes on from the tip */
	assert_int_equal(materialize(&m, 4, 0), 1);
	msg.len = 0;
	assert_int_equal(rckpt_msg_trim_encode(&msg, WRITER, RCKPT_STORE_NONE), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_trim, msg.p, msg.len, &out), 0);
	assert_int_equal(m.size, 0);
	assert_int_equal(call_empty(&m, cls_rckpt_tip, &h), 0);
	assert_true(h.head == RCKPT_STORE_NONE && h.count == 0);
	rckpt_buf_free(&msg);
	mem_obj_free(&m);
}

static int compact_as(mem_obj_t *m, uint64_t token, uint64_t upto, const uint64_t *keep, uint32_t n)
{
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	int rc;
	assert_int_equal(rckpt_msg_compact_encode(&msg, token, upto, keep, n), 0);
	rc = mem_obj_call(m, cls_rckpt_compact, msg.p, msg.len, &out);
	assert_int_equal(out.len, 0);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	return rc;
}

static int compact(mem_obj_t *m, uint64_t upto, const uint64_t *keep, uint32_t n)
{
	return compact_as(m, WRITER, upto, keep, n);
}

static int materialize_rc(mem_obj_t *m, uint64_t s)
{
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_msg_materialize_t q = { s, 0, { NULL, 0 } };
	int rc;
	assert_int_equal(rckpt_msg_materialize_encode(&msg, &q), 0);
	rc = mem_obj_call(m, cls_rckpt_materialize, msg.p, msg.len, &out);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	return rc;
}

static void index_of(mem_obj_t *m, rckpt_store_entry_t **e, uint32_t *n)
{
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	assert_int_equal(mem_obj_call(m, cls_rckpt_index, NULL, 0, &out), 0);
	assert_int_equal(rckpt_msg_index_decode(e, n, out.p, out.len), 0);
	rckpt_buf_free(&out);
}

/* Verifies the whole chunk as a client does: the first call with an empty
 * input, then from where each reply says to go on (this program's plugin
 * reads 64 KiB per call, so a chunk takes a few). Returns the calls. */
static unsigned verify(mem_obj_t *m, rckpt_msg_verified_t *v)
{
	rckpt_msg_verified_t one;
	unsigned calls = 0;
	memset(v, 0, sizeof(*v));
	v->first_bad = RCKPT_STORE_NONE;
	do {
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		rckpt_buf_t in = RCKPT_BUF_INIT;
		if (calls)
			assert_int_equal(rckpt_msg_verify_encode(&in, one.next), 0);
		assert_int_equal(mem_obj_call(m, cls_rckpt_verify, in.p, in.len, &out), 0);
		assert_int_equal(rckpt_msg_verified_decode(&one, out.p, out.len), 0);
		assert_true(one.records > 0 || calls == 0); /* every call moves on */
		v->records += one.records;
		v->bytes += one.bytes;
		if (one.bad && v->bad == 0) {
			v->first_bad = one.first_bad;
			v->error = one.error;
		}
		v->bad += one.bad;
		calls++;
		rckpt_buf_free(&out);
		rckpt_buf_free(&in);
	} while (one.next != RCKPT_STORE_NONE);
	return calls;
}

/* Compaction keeps exactly the steps asked for (and the newest <= upto)
 * restorable, makes that newest one a base, leaves later records alone,
 * and changes nothing when repeated. */
static void test_compact(void **state)
{
	mem_obj_t m = { 0 }, before = { 0 };
	uint64_t keep1[] = { 2, 5 }, keep2[] = { 2, 9 };
	rckpt_store_entry_t *e;
	rckpt_msg_verified_t v;
	rckpt_msg_head_t h;
	uint32_t n, i;
	unsigned s;

	(void)state;
	for (s = 1; s <= STEPS; s++)
		assert_int_equal(append(&m, s, s == 1 || s == 7), 0);
	assert_int_equal(compact(&m, 9, keep1, 2), 0);
	index_of(&m, &e, &n);
	/* 2, 5, 9 and the later 10..12 */
	assert_int_equal(n, 6);
	assert_true(e[0].step == 2 && e[0].kind == RCKPT_REC_DELTA && e[0].parent == 5);
	assert_true(e[1].step == 5 && e[1].kind == RCKPT_REC_DELTA && e[1].parent == 9);
	assert_true(e[2].step == 9 && e[2].kind == RCKPT_REC_BASE);
	assert_true(e[3].step == 10 && e[3].kind == RCKPT_REC_DELTA && e[3].parent == 9);
	assert_int_equal(e[n - 1].offset + e[n - 1].length, m.size);
	free(e);
	for (s = 1; s <= STEPS; s++) {
		if (s == 2 || s == 5 || s >= 9)
			assert_int_equal(materialize(&m, s, 0), 1);
		else
			assert_int_equal(materialize_rc(&m, s), -ENOENT);
	}
	/* step 2 folds 9 -> 5 -> 2; one record per call resumes down the chain */
	assert_int_equal(materialize(&m, 2, N), 2);
	verify(&m, &v);
	assert_true(v.records == 6 && v.bad == 0 && v.bytes == m.size);
	/* again: the same bytes */
	assert_int_equal(mem_obj_copy(&before, &m), 0);
	assert_int_equal(compact(&m, 9, keep1, 2), 0);
	assert_int_equal(m.size, before.size);
	assert_memory_equal(m.data, before.data, m.size);
	mem_obj_free(&before);
	/* the writer goes on from the tip */
	assert_int_equal(append(&m, STEPS + 1, 0), 0);
	assert_int_equal(call_empty(&m, cls_rckpt_tip, &h), 0);
	assert_int_equal(h.head, STEPS + 1);
	/* A later compaction drops 5: 2 becomes a delta on 9, and 9, the old
	 * base, a delta on the new base 13. */
	assert_int_equal(compact(&m, STEPS + 1, keep2, 2), 0);
	index_of(&m, &e, &n);
	assert_int_equal(n, 3);
	assert_true(e[0].step == 2 && e[0].parent == 9);
	assert_true(e[1].step == 9 && e[1].kind == RCKPT_REC_DELTA && e[1].parent == STEPS + 1);
	assert_true(e[2].step == STEPS + 1 && e[2].kind == RCKPT_REC_BASE);
	for (i = 0; i < n; i++)
		assert_int_equal(materialize(&m, e[i].step, 0), 1);
	free(e);
	mem_obj_free(&m);
}

/* Step s is stored as a delta on parent whose bytes are want's: their
 * offset in the object. */
static uint64_t stored_as(mem_obj_t *m, uint64_t s, uint64_t parent, const rckpt_buf_t *want)
{
	rckpt_store_entry_t *e;
	uint64_t at;
	uint32_t n, i;
	index_of(m, &e, &n);
	for (i = 0; i < n && e[i].step != s; i++)
		;
	assert_true(i < n && e[i].kind == RCKPT_REC_DELTA && e[i].parent == parent);
	assert_int_equal(e[i].length, want->len);
	assert_memory_equal(m->data + e[i].offset, want->p, want->len);
	at = e[i].offset;
	free(e);
	return at;
}

/* A delta compaction writes is what the writer's encoder writes, context
 * coding (CTX, record version 3) included: the record of step 5 on the new
 * base 9 is the client's encoding of the same levels, byte for byte, and
 * smaller than the run-length form of it. */
static void test_compact_writes_ctx(void **state)
{
	static uint8_t lv5[N], lv9[N];
	const rckpt_istream_opts_t ctx = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX,
					   RCKPT_EST_TRY_ALL, 1, NULL, 1, 0 };
	const rckpt_istream_opts_t rle = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };
	mem_obj_t m = { 0 };
	uint64_t keep[] = { 5 };
	rckpt_buf_t want = RCKPT_BUF_INIT, old = RCKPT_BUF_INIT;
	rckpt_record_t r, p;
	rckpt_seg_t seg, pseg;
	unsigned s;

	(void)state;
	for (s = 1; s <= STEPS; s++)
		assert_int_equal(append(&m, s, s == 1), 0);
	assert_int_equal(compact(&m, 9, keep, 1), 0);
	levels_at(lv5, 5);
	levels_at(lv9, 9);
	make_record(&r, &seg, lv5, 5, 9);
	make_record(&p, &pseg, lv9, 9, RCKPT_NO_PARENT);
	assert_int_equal(rckpt_record_encode(&want, &r, &p, &ctx), 0);
	assert_int_equal(rckpt_record_encode(&old, &r, &p, &rle), 0);
	assert_int_equal(want.p[4], 3);
	assert_true(want.len < old.len);
	stored_as(&m, 5, 9, &want);
	assert_int_equal(materialize(&m, 5, 0), 1);
	rckpt_buf_free(&want);
	rckpt_buf_free(&old);
	mem_obj_free(&m);
}

/* Step s with a second, lossless segment of NL fp32 values that drift a
 * millionth a step (a late step's norm weights). */
#define NL 2048u
static void pred_record(rckpt_record_t *r, rckpt_seg_t seg[2], uint8_t *lv, float *raw, unsigned s,
			uint64_t parent)
{
	unsigned i;
	levels_at(lv, s);
	make_record(r, &seg[0], lv, s, parent);
	for (i = 0; i < NL; i++)
		raw[i] = 1.0f + 0.001f * (float)i + 1e-6f * (float)s;
	memset(&seg[1], 0, sizeof(seg[1]));
	seg[1].tensor = 1;
	seg[1].n = NL;
	seg[1].encoding = RCKPT_SEG_LOSSLESS;
	seg[1].dtype = RCKPT_DT_F32;
	seg[1].raw = (uint8_t *)raw;
	r->nseg = 2;
	r->seg = seg;
}

/* Compaction writes predicted blobs (record version 4) as the writer's
 * encoder does: a chain written without them (an older client), compacted
 * onto base 9, holds step 5 as the client's predicted encoding of it,
 * byte for byte, smaller than the plain one, and restores its values. */
static void test_compact_writes_pred(void **state)
{
	static uint8_t lv[N], plv[N];
	static float raw[NL], praw[NL];
	const rckpt_istream_opts_t plain = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX,
					     RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };
	rckpt_istream_opts_t pred = plain;
	mem_obj_t m = { 0 };
	uint64_t keep[] = { 5 };
	rckpt_buf_t want = RCKPT_BUF_INIT, old = RCKPT_BUF_INIT;
	rckpt_record_t r, p, dp, dr;
	rckpt_seg_t seg[2], pseg[2];
	uint64_t at;
	unsigned s;

	(void)state;
	pred.predict = 1;
	for (s = 1; s <= STEPS; s++) {
		rckpt_buf_t rec = RCKPT_BUF_INIT;
		pred_record(&r, seg, lv, raw, s, s == 1 ? RCKPT_NO_PARENT : s - 1);
		if (s > 1)
			pred_record(&p, pseg, plv, praw, s - 1, RCKPT_NO_PARENT);
		assert_int_equal(rckpt_record_encode(&rec, &r, s == 1 ? NULL : &p, &plain), 0);
		assert_true(rec.p[4] < 4);
		assert_int_equal(append_bytes(&m, WRITER, &rec), 0);
	}
	assert_int_equal(compact(&m, 9, keep, 1), 0);
	pred_record(&r, seg, lv, raw, 5, 9);
	pred_record(&p, pseg, plv, praw, 9, RCKPT_NO_PARENT);
	assert_int_equal(rckpt_record_encode(&want, &r, &p, &pred), 0);
	assert_int_equal(rckpt_record_encode(&old, &r, &p, &plain), 0);
	assert_int_equal(want.p[4], 4);
	assert_true(want.len < old.len);
	at = stored_as(&m, 5, 9, &want);
	{ /* the stored bytes restore step 5's values on the decoded base */
		rckpt_buf_t b = RCKPT_BUF_INIT;
		assert_int_equal(rckpt_record_encode(&b, &p, NULL, &plain), 0);
		assert_int_equal(rckpt_record_decode(&dp, b.p, b.len, NULL, NULL), 0);
		assert_int_equal(rckpt_record_decode(&dr, m.data + at, want.len, &dp, NULL), 0);
		assert_memory_equal(dr.seg[0].idx, lv, N);
		assert_memory_equal(dr.seg[1].raw, raw, 4 * NL);
		rckpt_record_free(&dr);
		rckpt_record_free(&dp);
		rckpt_buf_free(&b);
	}
	rckpt_buf_free(&want);
	rckpt_buf_free(&old);
	mem_obj_free(&m);
}

/* Sparse partial records: step s > 1 changes the 64-element blocks b with
 * b % 8 == s % 8 (an eighth). Appended after a base, folded by
 * materialize, refused when their parent is not the tip, re-encoded by
 * compaction, counted by verify. */
#define SPB 64u
static void sparse_levels(uint8_t (*lv)[N], unsigned last)
{
	uint32_t x = 777;
	unsigned s, i;
	levels_at(lv[1], 0);
	for (s = 2; s <= last; s++) {
		memcpy(lv[s], lv[s - 1], N);
		for (i = 0; i < N; i++) {
			x = x * 1664525u + 1013904223u;
			if ((i / SPB) % 8 == s % 8 && (x >> 28) == 0)
				lv[s][i] = (uint8_t)((x >> 8) % 8);
		}
	}
}

static int append_sparse(mem_obj_t *m, uint8_t (*lv)[N], unsigned s, uint64_t parent)
{
	rckpt_istream_opts_t is = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };
	rckpt_buf_t rec = RCKPT_BUF_INIT;
	rckpt_record_t r, p;
	rckpt_seg_t seg, pseg;
	uint32_t blocks[(N + SPB - 1) / SPB], nb = 0, b;
	rckpt_sparse_sel_t sel;

	for (b = 0; b < (N + SPB - 1) / SPB; b++)
		if (b % 8 == s % 8)
			blocks[nb++] = b;
	sel.nblocks = nb;
	sel.blocks = blocks;
	make_record(&r, &seg, lv[s], s, parent);
	r.kind = RCKPT_REC_SPARSE;
	make_record(&p, &pseg, lv[s - 1], parent, RCKPT_NO_PARENT);
	assert_int_equal(rckpt_record_encode_sparse(&rec, &r, &p, SPB, &sel, &is), 0);
	return append_bytes(m, WRITER, &rec);
}

static void test_sparse(void **state)
{
	static uint8_t lv[11][N];
	mem_obj_t m = { 0 };
	uint64_t keep[] = { 3, 6 };
	rckpt_store_entry_t *e;
	rckpt_msg_verified_t v;
	uint32_t n, i;
	unsigned s;

	(void)state;
	sparse_levels(lv, 10);
	assert_int_equal(append(&m, 0, 1), 0); /* levels_at(0) == lv[1], as step 0 */
	memcpy(lv[0], lv[1], N);
	/* step 1 = step 0's levels; a sparse record that is not on the tip */
	assert_int_equal(append_sparse(&m, lv, 2, 1), -ESTALE);
	for (s = 1; s <= 10; s++)
		assert_int_equal(append_sparse(&m, lv, s, s - 1), 0);
	index_of(&m, &e, &n);
	assert_int_equal(n, 11);
	assert_true(e[5].kind == RCKPT_REC_SPARSE && e[5].parent == 4);
	free(e);
	for (s = 1; s <= 10; s++)
		assert_int_equal(materialize_want(&m, s, 0, lv[s]), 1);
	/* a budget: one record per call, resumed down the chain */
	assert_true(materialize_want(&m, 10, N, lv[10]) > 5);
	verify(&m, &v);
	assert_true(v.records == 11 && v.bad == 0 && v.bytes == m.size);
	/* compaction keeps 3, 6 and the newest <= 8 as delta, delta, base;
	 * 9 and 10 stay sparse records on 8 and 9 */
	assert_int_equal(compact(&m, 8, keep, 2), 0);
	index_of(&m, &e, &n);
	assert_int_equal(n, 5);
	assert_true(e[0].step == 3 && e[0].kind == RCKPT_REC_DELTA && e[0].parent == 6);
	assert_true(e[1].step == 6 && e[1].kind == RCKPT_REC_DELTA && e[1].parent == 8);
	assert_true(e[2].step == 8 && e[2].kind == RCKPT_REC_BASE);
	assert_true(e[3].step == 9 && e[3].kind == RCKPT_REC_SPARSE && e[3].parent == 8);
	for (i = 0; i < n; i++)
		assert_int_equal(materialize_want(&m, (unsigned)e[i].step, 0, lv[e[i].step]), 1);
	free(e);
	assert_int_equal(materialize_rc(&m, 5), -ENOENT);
	mem_obj_free(&m);
}

/* A record that a later, uncompacted record applies to stays, and damage
 * fails the whole compaction closed. */
static void test_compact_keeps_parents_and_fails_closed(void **state)
{
	mem_obj_t m = { 0 };
	uint64_t none[1] = { 0 };
	rckpt_store_entry_t *e;
	rckpt_msg_verified_t v;
	uint32_t n;
	size_t size;
	unsigned s;

	(void)state;
	for (s = 1; s <= 8; s++)
		assert_int_equal(append(&m, s, s == 1), 0);
	assert_int_equal(compact(&m, 4, none, 0), 0);
	index_of(&m, &e, &n);
	assert_int_equal(n, 5); /* 4 (base), 5..8 */
	assert_true(e[0].step == 4 && e[0].kind == RCKPT_REC_BASE);
	free(e);
	for (s = 4; s <= 8; s++)
		assert_int_equal(materialize(&m, s, 0), 1);
	/* damage step 8's record: compaction and verify see it, nothing changes */
	index_of(&m, &e, &n);
	m.data[e[n - 1].offset + e[n - 1].length / 2] ^= 0x10;
	free(e);
	size = m.size;
	assert_int_equal(compact(&m, 8, none, 0), RCKPT_FMT_ECHECKSUM);
	assert_int_equal(m.size, size);
	verify(&m, &v);
	assert_true(v.records == 5 && v.bad == 1 && v.first_bad == 8);
	assert_int_equal(v.error, RCKPT_FMT_ECHECKSUM);
	/* records are copied only after their checks pass */
	assert_int_equal(compact(&m, 7, none, 0), RCKPT_FMT_ECHECKSUM);
	assert_int_equal(m.size, size);
	assert_int_equal(materialize(&m, 7, 0), 1);
	mem_obj_free(&m);
}

/* Every method turns garbage and truncations into -EINVAL, changing
 * nothing; the fuzz target goes further. */
/* Step s's head record as these tests write it: a base whose levels are
 * coded raw (run lengths, no entropy coder), so that it differs from the
 * base a fold answers with. */
static void encode_head(rckpt_buf_t *out, unsigned s)
{
	static uint8_t lv[N];
	rckpt_record_t r;
	rckpt_seg_t seg;
	rckpt_istream_opts_t is = { RCKPT_IS_RLE, 0, 1, NULL, 0, 0 };
	levels_at(lv, s);
	make_record(&r, &seg, lv, s, RCKPT_NO_PARENT);
	assert_int_equal(rckpt_record_encode(out, &r, NULL, &is), 0);
}

/* Appends step s as a delta with its head record (a base of step s; or
 * the record `head` when given): append's return. */
static int append_head(mem_obj_t *m, unsigned s, rckpt_buf_t *head)
{
	rckpt_buf_t rec = RCKPT_BUF_INIT, h = RCKPT_BUF_INIT, msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_msg_append_t a;
	int rc;
	encode_step(&rec, s, 0);
	if (head == NULL)
		encode_head(&h, s);
	a = (rckpt_msg_append_t){ WRITER, { rec.p, rec.len }, { head ? head->p : h.p, head ? head->len : h.len } };
	assert_int_equal(rckpt_msg_append_head_encode(&msg, &a), 0);
	rc = mem_obj_call(m, cls_rckpt_append, msg.p, msg.len, &out);
	rckpt_buf_free(&rec);
	rckpt_buf_free(&h);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	return rc;
}

/* The record materialize(s) replies with, whole. */
static void materialized_record(mem_obj_t *m, unsigned s, rckpt_buf_t *rec)
{
	rckpt_msg_materialize_t q = { s, 0, { NULL, 0 } };
	rckpt_msg_materialized_t a;
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	assert_int_equal(rckpt_msg_materialize_encode(&msg, &q), 0);
	assert_int_equal(mem_obj_call(m, cls_rckpt_materialize, msg.p, msg.len, &out), 0);
	assert_int_equal(rckpt_msg_materialized_decode(&a, out.p, out.len), 0);
	assert_true(a.done);
	rec->len = 0;
	assert_int_equal(rckpt_buf_append(rec, a.record.p, a.record.len), 0);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
}

/* Whether materialize(s) answers with step s's head record, as written. */
static int answers_head(mem_obj_t *m, unsigned s)
{
	rckpt_buf_t got = RCKPT_BUF_INIT, h = RCKPT_BUF_INIT;
	int same;
	materialized_record(m, s, &got);
	encode_head(&h, s);
	same = got.len == h.len && memcmp(got.p, h.p, h.len) == 0;
	rckpt_buf_free(&got);
	rckpt_buf_free(&h);
	return same;
}

/* The bytes of the records of steps [1, s] (as append_head writes them) */
static uint64_t records_bytes(unsigned s)
{
	uint64_t n = 0;
	unsigned k;
	for (k = 1; k <= s; k++) {
		rckpt_buf_t r = RCKPT_BUF_INIT;
		encode_step(&r, k, k == 1);
		n += r.len;
		rckpt_buf_free(&r);
	}
	return n;
}

static uint64_t head_bytes(unsigned s)
{
	rckpt_buf_t r = RCKPT_BUF_INIT;
	uint64_t n;
	encode_head(&r, s);
	n = r.len;
	rckpt_buf_free(&r);
	return n;
}

/* Sets an omap pair of m as a trainer's plain write may. */
static void mem_kv_set(mem_obj_t *m, const char *key, const uint8_t *v, size_t n)
{
	rckpt_cls_obj_t o;
	memset(&o, 0, sizeof(o));
	o.ops = &mem_obj_ops;
	o.ctx = m;
	assert_int_equal(mem_omap_set(&o, key, v, n), 0);
}

/* Head records (store.md "Head records"): the newest delta's head record
 * answers materialize of its step as stored, whatever the chain, and is
 * the log's last bytes, replaced by the next append (so the object holds
 * one); an append without one, a trim past it and a compaction that drops
 * its step take it away, one that keeps its step moves it; a head record
 * of another step or shape is refused, and a planted head entry is only
 * a hint: a fold answers when it does not check out. */
static void test_head_records(void **state)
{
	mem_obj_t m = { 0 }, before = { 0 };
	rckpt_buf_t bad = RCKPT_BUF_INIT;
	uint8_t val[RCKPT_STORE_ENTRY_BYTES];
	unsigned s;
	uint64_t keep[] = { 9 };

	(void)state;
	assert_int_equal(append(&m, 1, 1), 0);
	for (s = 2; s <= 6; s++) {
		assert_int_equal(append_head(&m, s, NULL), 0);
		assert_true(answers_head(&m, s));
		assert_int_equal(materialize(&m, s, 1), 1); /* no fold, whatever the budget */
		assert_int_equal(m.size, records_bytes(s) + head_bytes(s));
	}
	for (s = 1; s < 6; s++) /* the older steps fold as before */
		assert_int_equal(materialize(&m, s, 0), 1);
	assert_int_equal(materialize(&m, 5, 1), 4); /* a budget of a record a call: a fold */

	/* an append without one takes it away */
	assert_int_equal(append(&m, 7, 0), 0);
	assert_int_equal(m.size, records_bytes(7));
	assert_false(answers_head(&m, 7));
	assert_int_equal(materialize(&m, 7, 0), 1);

	/* refused, nothing changed: a head of another step, a delta, another shape */
	assert_int_equal(mem_obj_copy(&before, &m), 0);
	encode_step(&bad, 9, 1);
	assert_int_equal(append_head(&m, 8, &bad), -EINVAL);
	bad.len = 0;
	encode_step(&bad, 8, 0);
	assert_int_equal(append_head(&m, 8, &bad), -EINVAL);
	bad.len = 0;
	assert_int_equal(rckpt_buf_append(&bad, "RCKR", 4), 0);
	assert_int_equal(append_head(&m, 8, &bad), -EINVAL);
	same_obj(&m, &before);
	mem_obj_free(&before);

	/* a trim that keeps its step keeps it; one past it takes it away */
	assert_int_equal(append_head(&m, 8, NULL), 0);
	assert_int_equal(trim_as(&m, WRITER, 8), 0);
	assert_true(answers_head(&m, 8));
	assert_int_equal(m.size, records_bytes(8) + head_bytes(8));
	assert_int_equal(trim_as(&m, WRITER, 7), 0);
	assert_int_equal(m.size, records_bytes(7));
	assert_int_equal(materialize(&m, 7, 0), 1);

	/* a compaction that keeps its step moves it to the log's new end */
	assert_int_equal(append_head(&m, 8, NULL), 0);
	assert_int_equal(append_head(&m, 9, NULL), 0);
	assert_int_equal(compact(&m, 9, keep, 1), 0);
	assert_true(answers_head(&m, 9));
	assert_int_equal(materialize(&m, 9, 0), 1);
	assert_int_equal(materialize_rc(&m, 8), -ENOENT);
	{ /* a damaged head record fails closed: materialize, verify, compact */
		mem_obj_t d = { 0 };
		rckpt_msg_verified_t v;
		assert_int_equal(mem_obj_copy(&d, &m), 0);
		d.data[d.size - 10] ^= 0x40;
		assert_true(materialize_rc(&d, 9) < 0);
		verify(&d, &v);
		assert_int_equal(v.bad, 1);
		assert_true(compact(&d, 9, keep, 1) < 0);
		mem_obj_free(&d);
	}

	/* a planted entry (or one an older plugin's trim left, whose place
	 * later records took): before the tip's record's end, past the data,
	 * or not an entry, it is none: a fold answers, right, and verify finds
	 * nothing wrong */
	{
		rckpt_store_entry_t e = { 9, 0, 100, RCKPT_REC_BASE, RCKPT_STORE_NONE };
		rckpt_msg_verified_t v;
		verify(&m, &v);
		assert_int_equal(v.bad, 0); /* the head record is checked too, whole */
		assert_int_equal(rckpt_store_entry_put(val, &e), 0);
		mem_kv_set(&m, "headrec", val, sizeof(val));
		assert_false(answers_head(&m, 9));
		assert_int_equal(materialize(&m, 9, 0), 1);
		verify(&m, &v);
		assert_int_equal(v.bad, 0);
		e.offset = m.size; /* past the data */
		assert_int_equal(rckpt_store_entry_put(val, &e), 0);
		mem_kv_set(&m, "headrec", val, sizeof(val));
		assert_int_equal(materialize(&m, 9, 0), 1);
		mem_kv_set(&m, "headrec", val, 5); /* not an entry */
		assert_int_equal(materialize(&m, 9, 0), 1);
		assert_int_equal(append_head(&m, 10, NULL), 0); /* and an append goes on */
		assert_true(answers_head(&m, 10));
	}
	rckpt_buf_free(&bad);
	mem_obj_free(&m);
}

static void test_malformed(void **state)
{
	static const rckpt_cls_obj_method_fn fns[] = { cls_rckpt_append, cls_rckpt_materialize,
						       cls_rckpt_trim,   cls_rckpt_commit,
						       cls_rckpt_list,   cls_rckpt_index,
						       cls_rckpt_tip,    cls_rckpt_head,
						       cls_rckpt_compact, cls_rckpt_verify,
						       cls_rckpt_drop,   cls_rckpt_pin };
	mem_obj_t m = { 0 };
	rckpt_buf_t rec = RCKPT_BUF_INIT, msg = RCKPT_BUF_INIT;
	uint8_t junk[64];
	unsigned f, cut, i;

	(void)state;
	for (i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 1);
	assert_int_equal(append(&m, 1, 1), 0);
	for (f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		size_t before = m.size, nkv = m.nkv;
		assert_int_equal(mem_obj_call(&m, fns[f], junk, sizeof(junk), &out), -EINVAL);
		assert_int_equal(m.size, before);
		assert_int_equal(m.nkv, nkv);
		rckpt_buf_free(&out);
	}
	/* an append frame cut anywhere, and a record with a bad CRC */
	encode_step(&rec, 2, 0);
	assert_int_equal(rckpt_msg_append_encode(&msg, WRITER, rec.p, rec.len), 0);
	for (cut = 0; cut < msg.len; cut += 97) {
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		assert_int_equal(mem_obj_call(&m, cls_rckpt_append, msg.p, cut, &out), -EINVAL);
	}
	msg.p[msg.len / 2] ^= 1;
	{
		rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
		assert_int_equal(mem_obj_call(&m, cls_rckpt_append, msg.p, msg.len, &out), -EINVAL);
	}
	rckpt_buf_free(&rec);
	rckpt_buf_free(&msg);
	mem_obj_free(&m);
}

/* A resume record is decoded only within the shape of the chunk's own
 * record of its step (issue 25 item 3): a reader's crafted one, a base of
 * 4 Mi elements for a chunk of N, would otherwise be decoded, folded and
 * sent back re-encoded; now it is refused before the decoder allocates
 * for it. A resume record of the right shape still resumes. */
static void test_resume_bounded_by_the_chunk(void **state)
{
	mem_obj_t m = { 0 };
	static uint8_t lv[1u << 22];
	rckpt_record_t r;
	rckpt_seg_t seg;
	rckpt_buf_t crafted = RCKPT_BUF_INIT, msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_istream_opts_t is = { RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };
	unsigned s;

	(void)state;
	for (s = 1; s <= 3; s++)
		assert_int_equal(append(&m, s, s == 1), 0);
	make_record(&r, &seg, lv, 3, RCKPT_NO_PARENT);
	seg.n = sizeof(lv); /* all level 0: a few bytes once run-length coded */
	assert_int_equal(rckpt_record_encode(&crafted, &r, NULL, &is), 0);
	assert_true(crafted.len < 4096);
	{
		rckpt_msg_materialize_t q = { 3, 0, { crafted.p, crafted.len } };
		assert_int_equal(rckpt_msg_materialize_encode(&msg, &q), 0);
	}
	assert_int_equal(mem_obj_call(&m, cls_rckpt_materialize, msg.p, msg.len, &out), -EINVAL);
	assert_int_equal(out.len, 0);
	assert_non_null(strstr(m.why, "shape"));
	/* a step the chunk does not hold cannot be resumed from */
	crafted.len = 0;
	msg.len = 0;
	r.step = 9;
	assert_int_equal(rckpt_record_encode(&crafted, &r, NULL, &is), 0);
	{
		rckpt_msg_materialize_t q = { 9, 0, { crafted.p, crafted.len } };
		assert_int_equal(rckpt_msg_materialize_encode(&msg, &q), 0);
	}
	assert_int_not_equal(mem_obj_call(&m, cls_rckpt_materialize, msg.p, msg.len, &out), 0);
	/* resuming with what the plugin itself sent back still works */
	assert_true(materialize(&m, 3, 1) > 1);
	rckpt_buf_free(&crafted);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	mem_obj_free(&m);
}

/* One compact call does a bounded amount of work, whatever it is asked
 * (cls-wire.md): a stage over a chain of 150 records, all kept, is
 * refused (-E2BIG) and changes nothing; the same compaction in stages of
 * 10 (what the client does when told so) goes through, and every step
 * restores as before. (This program builds the plugin's code with a cap
 * scaled to its small chunks.) */
static void test_compact_bounded(void **state)
{
	mem_obj_t m = { 0 }, before = { 0 };
	uint64_t keep[150];
	unsigned s, n = 0;

	(void)state;
	for (s = 1; s <= 150; s++) {
		assert_int_equal(append(&m, s, s == 1), 0);
		keep[n++] = s;
	}
	assert_int_equal(mem_obj_copy(&before, &m), 0);
	assert_int_equal(compact(&m, 150, keep, 150), -E2BIG);
	assert_non_null(strstr(m.why, "more than one call may do"));
	same_obj(&m, &before);
	for (s = 10; s <= 150; s += 10)
		assert_int_equal(compact(&m, s, keep, s), 0);
	for (s = 1; s <= 150; s += 9)
		materialize(&m, s, 0);
	materialize(&m, 150, 0);
	{ /* verify too reads a share per call: the chunk (> 64 KiB) takes
	   * several, and they count every record once */
		rckpt_msg_verified_t v;
		assert_true(verify(&m, &v) > 1);
		assert_true(v.records == 150 && v.bad == 0 && v.bytes == m.size);
	}
	mem_obj_free(&m);
	mem_obj_free(&before);
}

/* Exact steps: one lossless segment of NX fp32 values, a weight-like
 * spread that moves in its low bits from step to step, in planes (what
 * the writer's exact tier stores: about 13 MiB a record). */
#define NX ((uint32_t)1 << 22)
static int exact_compressible; /* values of five levels: records of about 1.5 MiB */
static void exact_values(float *v, unsigned s)
{
	uint32_t x = 777, y = 1234567u * s, i;
	for (i = 0; i < NX; i++) {
		x = x * 1664525u + 1013904223u;
		y = y * 22695477u + 1u;
		v[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * 0.05f *
		       (1.0f + 1e-3f * (float)s * ((float)(y >> 8) / 16777216.0f));
		if (exact_compressible)
			v[i] = (float)((i * 7 + s) % 5) * 0.25f;
	}
}

static int append_exact(mem_obj_t *m, float *v, float *pv, unsigned s, int base)
{
	rckpt_istream_opts_t is = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE | RCKPT_IS_CTX, RCKPT_EST_TRY_ALL, 1,
				    NULL, 1, 1 };
	rckpt_buf_t rec = RCKPT_BUF_INIT;
	rckpt_record_t r, p;
	rckpt_seg_t seg, pseg;

	/* the test's record, its one segment NX values kept whole */
	make_record(&r, &seg, NULL, s, base ? RCKPT_NO_PARENT : s - 1);
	make_record(&p, &pseg, NULL, s - 1, RCKPT_NO_PARENT);
	seg.n = pseg.n = NX;
	seg.encoding = pseg.encoding = RCKPT_SEG_LOSSLESS;
	seg.nbins = pseg.nbins = 0;
	seg.raw = (uint8_t *)v;
	pseg.raw = (uint8_t *)pv;
	exact_values(v, s);
	if (!base)
		exact_values(pv, s - 1);
	assert_int_equal(rckpt_record_encode(&rec, &r, base ? NULL : &p, &is), 0);
	assert_true(!base || exact_compressible || rec.len > (size_t)8 << 20); /* an exact base's size */
	return append_bytes(m, WRITER, &rec);
}

/* The kind of step s in the index, and its parent. */
static unsigned kind_of(mem_obj_t *m, uint64_t s, uint64_t *parent)
{
	rckpt_store_entry_t *e;
	uint32_t n, i;
	unsigned k = 0;
	index_of(m, &e, &n);
	for (i = 0; i < n; i++)
		if (e[i].step == s) {
			k = e[i].kind;
			*parent = e[i].parent;
		}
	free(e);
	return k;
}

/* Step s materializes (one call) to its values, bit for bit. */
static void exact_restores(mem_obj_t *m, float *v, uint64_t s)
{
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_msg_materialize_t q = { s, 0, { NULL, 0 } };
	rckpt_msg_materialized_t rep;
	rckpt_record_t r;
	assert_int_equal(rckpt_msg_materialize_encode(&msg, &q), 0);
	assert_int_equal(mem_obj_call(m, cls_rckpt_materialize, msg.p, msg.len, &out), 0);
	assert_int_equal(rckpt_msg_materialized_decode(&rep, out.p, out.len), 0);
	assert_true(rep.done && rep.reached == s);
	assert_int_equal(rckpt_record_decode(&r, rep.record.p, rep.record.len, NULL, NULL), 0);
	exact_values(v, (unsigned)s);
	assert_int_equal(r.nseg, 1);
	assert_memory_equal(r.seg[0].raw, v, 4 * (size_t)NX);
	rckpt_record_free(&r);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
}

/* Exact steps' records are the largest a compaction meets, and what one
 * call holds is bounded (COMPACT_HELD_MAX): a base of an exact step stays
 * a base (a delta on the next kept step would take both steps' values and
 * a record in one call), whether its record is over 8 MiB or small (values
 * that compress well), and a delta whose parent goes becomes a base, so
 * the writer's segment of two exact steps compacts in one call that
 * re-encodes one record. A chain of three exact records in one object
 * (appended by hand: the writer rolls at two) cannot be reshaped whole in
 * one call: refused (-E2BIG, "may hold"), nothing changed; in the stages
 * the client falls back to (rckpt_segment.c: up to the first record to
 * reshape, then the next) it goes through. Every step restores its values
 * bit for bit. */
static void test_compact_exact_held(void **state)
{
	float *v = malloc(4 * (size_t)NX), *pv = malloc(4 * (size_t)NX);
	mem_obj_t m = { 0 }, before = { 0 };
	uint64_t keep[] = { 1, 2, 3 }, parent = 0;
	unsigned s;

	(void)state;
	assert_non_null(v);
	assert_non_null(pv);
	assert_int_equal(append_exact(&m, v, pv, 1, 1), 0);
	assert_int_equal(append_exact(&m, v, pv, 2, 0), 0);
	assert_int_equal(compact(&m, 2, keep, 2), 0);
	assert_int_equal(kind_of(&m, 2, &parent), RCKPT_REC_BASE);
	assert_int_equal(kind_of(&m, 1, &parent), RCKPT_REC_BASE); /* stays one */
	for (s = 1; s <= 2; s++)
		exact_restores(&m, v, s);
	mem_obj_free(&m);

	/* base, delta, base; step 1 goes: step 2 becomes a base */
	assert_int_equal(append_exact(&m, v, pv, 1, 1), 0);
	assert_int_equal(append_exact(&m, v, pv, 2, 0), 0);
	assert_int_equal(append_exact(&m, v, pv, 3, 1), 0);
	assert_int_equal(compact(&m, 3, keep + 1, 2), 0);
	assert_int_equal(kind_of(&m, 2, &parent), RCKPT_REC_BASE);
	for (s = 2; s <= 3; s++)
		exact_restores(&m, v, s);
	mem_obj_free(&m);

	/* records of 1.5 MiB: the base stays one all the same */
	exact_compressible = 1;
	assert_int_equal(append_exact(&m, v, pv, 1, 1), 0);
	assert_int_equal(append_exact(&m, v, pv, 2, 0), 0);
	assert_true(m.size < (size_t)8 << 20);
	assert_int_equal(compact(&m, 2, keep, 2), 0);
	assert_int_equal(kind_of(&m, 2, &parent), RCKPT_REC_BASE);
	assert_int_equal(kind_of(&m, 1, &parent), RCKPT_REC_BASE);
	for (s = 1; s <= 2; s++)
		exact_restores(&m, v, s);
	exact_compressible = 0;
	mem_obj_free(&m);

	for (s = 1; s <= 3; s++)
		assert_int_equal(append_exact(&m, v, pv, s, s == 1), 0);
	assert_int_equal(mem_obj_copy(&before, &m), 0);
	assert_int_equal(compact(&m, 3, keep, 3), -E2BIG);
	assert_non_null(strstr(m.why, "more than one call may hold"));
	same_obj(&m, &before);
	assert_int_equal(compact(&m, 2, keep, 2), 0);
	assert_int_equal(compact(&m, 3, keep, 3), 0);
	for (s = 1; s <= 3; s++)
		assert_int_equal(kind_of(&m, s, &parent), RCKPT_REC_BASE);
	for (s = 1; s <= 3; s++)
		exact_restores(&m, v, s);
	mem_obj_free(&m);
	mem_obj_free(&before);
	free(v);
	free(pv);
}

/* A writer paused past its lease (issue 25): W1 (token 1) saved steps 1
 * and 2; W2 claimed the job (token 2), trimmed past the head, saved 3 and
 * 4. Then W1's queued requests land: a trim that would cut the chunk back
 * to nothing, an append. Each is refused (-ESTALE) and changes nothing;
 * every step still materializes to what was saved, and W2 saves on. On a
 * chunk W2 has not touched yet W1's late append lands (as if it had come
 * before W2's claim), and W2's trim removes it before W2 appends. */
static void test_stale_writer_fenced(void **state)
{
	mem_obj_t c = { 0 }, before = { 0 }, d = { 0 };
	unsigned s;

	(void)state;
	assert_int_equal(append_as(&c, 1, 1, 1), 0);
	assert_int_equal(append_as(&c, 1, 2, 0), 0);
	assert_int_equal(trim_as(&c, 2, 2), 0); /* W2's first save: trim, then a base */
	assert_int_equal(append_as(&c, 2, 3, 1), 0);
	assert_int_equal(append_as(&c, 2, 4, 0), 0);
	assert_int_equal(mem_obj_copy(&before, &c), 0);
	assert_int_equal(trim_as(&c, 1, 0), -ESTALE);
	assert_non_null(strstr(c.why, "older than the chunk's")); /* the OSD log says why */
	same_obj(&c, &before);
	assert_int_equal(trim_as(&c, 1, RCKPT_STORE_NONE), -ESTALE);
	assert_int_equal(append_as(&c, 1, 5, 1), -ESTALE);
	assert_int_equal(append_as(&c, 1, 5, 0), -ESTALE);
	same_obj(&c, &before);
	for (s = 1; s <= 4; s++)
		materialize(&c, s, 0);
	{ /* a compactor that read W1's token, paused: its late stage is
	   * refused too, whatever it keeps */
		const uint64_t keep[] = { 3 };
		assert_int_equal(compact_as(&c, 1, 4, keep, 1), -ESTALE);
		same_obj(&c, &before);
		assert_int_equal(compact_as(&c, 0, 4, NULL, 0), -ESTALE);
		same_obj(&c, &before);
	}
	assert_int_equal(append_as(&c, 2, 5, 0), 0); /* W2 goes on */
	materialize(&c, 5, 0);
	assert_int_equal(append_as(&c, 3, 6, 0), 0); /* a newer writer is taken */
	assert_int_equal(append_as(&c, 2, 7, 0), -ESTALE); /* and fences W2 */
	{ /* a compaction by a newer writer (one rewound, before its trim)
	   * records its token: a compactor that read W3's is fenced */
		const uint64_t keep[] = { 4 };
		assert_int_equal(compact_as(&c, 4, 4, keep, 1), 0);
		assert_int_equal(compact_as(&c, 3, 6, keep, 1), -ESTALE);
		assert_int_equal(trim_as(&c, 3, 4), -ESTALE);
		assert_int_equal(trim_as(&c, 4, 4), 0);
		materialize(&c, 4, 0);
	}

	assert_int_equal(append_as(&d, 1, 1, 1), 0);
	assert_int_equal(append_as(&d, 1, 2, 0), 0);
	assert_int_equal(append_as(&d, 1, 3, 0), 0); /* W1's, never committed */
	assert_int_equal(trim_as(&d, 2, 2), 0);
	assert_int_equal(append_as(&d, 1, 3, 0), -ESTALE);
	assert_int_equal(append_as(&d, 2, 3, 1), 0);
	materialize(&d, 3, 0);
	materialize(&d, 2, 0);
	mem_obj_free(&c);
	mem_obj_free(&before);
	mem_obj_free(&d);
}

/* A record that declares more than a chunk holds is refused at append
 * (-E2BIG), however small: a zero tensor of 2^22 + 1 levels run-length
 * codes to a few bytes and would cost every later materialize and compact
 * of it 16 MB and more. One of exactly 2^22 is taken. */
static void test_append_geometry(void **state)
{
	static uint8_t lv[((size_t)1 << 22) + 1];
	const uint64_t sizes[2] = { ((uint64_t)1 << 22) + 1, (uint64_t)1 << 22 };
	unsigned i;
	(void)state;
	for (i = 0; i < 2; i++) {
		mem_obj_t m = { 0 };
		rckpt_record_t r;
		rckpt_seg_t seg;
		rckpt_buf_t rec = RCKPT_BUF_INIT, msg = RCKPT_BUF_INIT, out = RCKPT_BUF_INIT;
		rckpt_istream_opts_t is = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_ALL, 1, NULL, 0, 0 };
		make_record(&r, &seg, lv, 1, RCKPT_NO_PARENT);
		seg.n = sizes[i];
		assert_int_equal(rckpt_record_encode(&rec, &r, NULL, &is), 0);
		assert_true(rec.len < 4096);
		assert_int_equal(rckpt_msg_append_encode(&msg, WRITER, rec.p, rec.len), 0);
		assert_int_equal(mem_obj_call(&m, cls_rckpt_append, msg.p, msg.len, &out), i == 0 ? -E2BIG : 0);
		if (i == 0)
			assert_int_equal(m.size, 0); /* nothing stored */
		rckpt_buf_free(&rec);
		rckpt_buf_free(&msg);
		rckpt_buf_free(&out);
		mem_obj_free(&m);
	}
}

/* A chunk object holds at most RCKPT_STORE_OBJECT_RECORDS_MAX records:
 * append refuses the next (-EFBIG, nothing stored), so what a method reads
 * of an object's index stays bounded. The count ("count") follows trim. */
static void test_append_count(void **state)
{
	static uint8_t lv[16];
	mem_obj_t m = { 0 };
	rckpt_msg_head_t h;
	uint64_t s;
	(void)state;
	for (s = 1; s <= RCKPT_STORE_OBJECT_RECORDS_MAX + 1; s++) {
		rckpt_record_t r;
		rckpt_seg_t seg;
		rckpt_buf_t rec = RCKPT_BUF_INIT, msg = RCKPT_BUF_INIT, out = RCKPT_BUF_INIT;
		rckpt_istream_opts_t is = { RCKPT_IS_REARRANGED | RCKPT_IS_RLE, RCKPT_EST_TRY_HUFF, 1, NULL, 0, 0 };
		size_t before = m.size;
		make_record(&r, &seg, lv, s, RCKPT_NO_PARENT);
		seg.n = 16;
		assert_int_equal(rckpt_record_encode(&rec, &r, NULL, &is), 0);
		assert_int_equal(rckpt_msg_append_encode(&msg, WRITER, rec.p, rec.len), 0);
		assert_int_equal(mem_obj_call(&m, cls_rckpt_append, msg.p, msg.len, &out),
				 s <= RCKPT_STORE_OBJECT_RECORDS_MAX ? 0 : -EFBIG);
		if (s > RCKPT_STORE_OBJECT_RECORDS_MAX)
			assert_int_equal(m.size, before);
		rckpt_buf_free(&rec);
		rckpt_buf_free(&msg);
		rckpt_buf_free(&out);
	}
	assert_int_equal(call_empty(&m, cls_rckpt_tip, &h), 0);
	assert_int_equal(h.count, RCKPT_STORE_OBJECT_RECORDS_MAX);
	assert_int_equal(trim_as(&m, WRITER, 100), 0);
	assert_int_equal(call_empty(&m, cls_rckpt_tip, &h), 0);
	assert_int_equal(h.count, 100);
	assert_int_equal(h.head, 100);
	mem_obj_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_and_materialize),
		cmocka_unit_test(test_append_geometry),
		cmocka_unit_test(test_append_count),
		cmocka_unit_test(test_materialize_errors),
		cmocka_unit_test(test_trim_and_index),
		cmocka_unit_test(test_compact),
		cmocka_unit_test(test_compact_writes_ctx),
		cmocka_unit_test(test_compact_writes_pred),
		cmocka_unit_test(test_compact_keeps_parents_and_fails_closed),
		cmocka_unit_test(test_sparse),
		cmocka_unit_test(test_resume_bounded_by_the_chunk),
		cmocka_unit_test(test_compact_bounded),
		cmocka_unit_test(test_compact_exact_held),
		cmocka_unit_test(test_stale_writer_fenced),
		cmocka_unit_test(test_head_records),
		cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
