/*
 * test_cls_job.c — the checkpoint store's job-object methods
 * (cls/rckpt/cls_rckpt_job.c) on an in-memory object: the writer's claim
 * fencing commits, the compare-and-set commit, head and list, drop and
 * pin, attachments and retiring a step's objects.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cls_rckpt_impl.h"
#include "cls_rckpt_methods.h"
#include "mem_obj.h"
#include "rckpt_record.h"
#include "rckpt_manifest.h"
#include "rckpt_store_wire.h"

#include "cls_head.h"

static int commit_as(mem_obj_t *m, uint64_t expect, uint64_t step, uint64_t writer)
{
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	uint8_t sum[3] = { (uint8_t)step, 7, 9 };
	rckpt_msg_commit_t c = { expect, step, { sum, sizeof(sum) }, writer };
	int rc;
	assert_int_equal(rckpt_msg_commit_encode(&msg, &c), 0);
	rc = mem_obj_call(m, cls_rckpt_commit, msg.p, msg.len, &out);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	return rc;
}

static int commit(mem_obj_t *m, uint64_t expect, uint64_t step)
{
	return commit_as(m, expect, step, 1);
}

static int claim_flags(mem_obj_t *m, uint64_t prev, uint64_t token, unsigned flags)
{
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	int rc;
	assert_int_equal(rckpt_msg_claim_encode(&msg, prev, token, flags), 0);
	rc = mem_obj_call(m, cls_rckpt_claim, msg.p, msg.len, &out);
	assert_int_equal(out.len, 0);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	return rc;
}

static int claim(mem_obj_t *m, uint64_t prev, uint64_t token)
{
	return claim_flags(m, prev, token, 0);
}

/* Fencing: once a writer claims the job, only its token commits; a newer
 * claim shuts out the older writer, whatever head it expects. Claims only
 * move forward: one from a token other than the job's newest (a late
 * claim of a writer whose successor has claimed since) is refused and
 * changes nothing. */
static void test_claim_fences_commit(void **state)
{
	mem_obj_t m = { 0 };
	uint8_t bad[RCKPT_WIRE_HEADER_BYTES + 17];
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	(void)state;
	assert_int_equal(commit_as(&m, RCKPT_STORE_NONE, 1, 7), 0); /* never claimed: any token */
	assert_int_equal(claim(&m, 1, 5), -ESTALE); /* there was no token 1 */
	assert_int_equal(claim(&m, 0, 5), 0);
	assert_int_equal(commit_as(&m, 1, 2, 7), -ESTALE);
	assert_int_equal(commit_as(&m, 1, 2, 5), 0);
	assert_int_equal(claim(&m, 5, 6), 0); /* a new writer */
	assert_int_equal(commit_as(&m, 2, 3, 5), -ESTALE); /* the old one is fenced */
	assert_int_equal(claim(&m, 0, 5), -ESTALE); /* its claim, arriving late */
	assert_int_equal(claim(&m, 4, 5), -ESTALE);
	assert_int_equal(commit_as(&m, 2, 3, 6), 0); /* the new one goes on */
	/* two claimers that read the same token: the second is refused */
	assert_int_equal(claim(&m, 6, 7), 0);
	assert_int_equal(claim(&m, 6, 7), -ESTALE);
	assert_int_equal(commit_as(&m, 3, 4, 7), 0);
	assert_int_equal(rckpt_msg_claim_encode(&msg, 0, 0, 0), -EINVAL);
	assert_int_equal(rckpt_msg_claim_encode(&msg, 9, 8, 0), -EINVAL); /* backwards */
	assert_int_equal(rckpt_msg_claim_encode(&msg, 7, 8, 0), 0);
	assert_true(msg.len <= sizeof(bad));
	memcpy(bad, msg.p, msg.len);
	memset(bad + msg.len - 9, 0, 8); /* token 0, not after prev */
	assert_int_equal(mem_obj_call(&m, cls_rckpt_claim, bad, msg.len, &out), -EINVAL);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_claim, msg.p, msg.len - 1, &out), -EINVAL);
	assert_int_equal(commit_as(&m, 4, 5, 7), 0); /* the bad claims changed nothing */
	/* tokens cannot be used up: no claim to 2^64 - 1, or far past the
	 * wall-clock horizon (2^53 us); a wall-clock token, and one a jump
	 * past it, are taken */
	assert_int_equal(claim(&m, 7, UINT64_MAX), -EINVAL);
	assert_int_equal(claim(&m, 7, ((uint64_t)1 << 53) + ((uint64_t)1 << 33)), -EINVAL);
	assert_int_equal(claim(&m, 7, (uint64_t)1795716843670155), 0); /* 2026 in microseconds */
	assert_int_equal(claim(&m, 1795716843670155, ((uint64_t)1 << 53) + ((uint64_t)1 << 32)), 0);
	assert_int_equal(claim(&m, ((uint64_t)1 << 53) + ((uint64_t)1 << 32), UINT64_MAX), -EINVAL);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	mem_obj_free(&m);
}

/* head's reply (version 2) carries the head's summary, as committed; none
 * before the first commit, none when the summary is missing or over the
 * bound (planted: a trainer may write any key), the head and count as
 * before either way. */
static void head_summary(mem_obj_t *m, rckpt_msg_head_t *h, uint8_t *sum, size_t cap)
{
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	assert_int_equal(mem_obj_call(m, cls_rckpt_head, NULL, 0, &out), 0);
	assert_int_equal(rckpt_msg_head_decode(h, out.p, out.len), 0);
	assert_true(h->summary.len <= cap);
	memcpy(sum, h->summary.p ? h->summary.p : (const uint8_t *)"", h->summary.len);
	rckpt_buf_free(&out);
}

static void test_job_head_summary(void **state)
{
	static uint8_t big[RCKPT_STORE_SUMMARY_MAX + 1];
	mem_obj_t m = { 0 };
	rckpt_cls_obj_t o;
	rckpt_msg_head_t h;
	uint8_t sum[16];
	char key[32];

	(void)state;
	head_summary(&m, &h, sum, sizeof(sum));
	assert_true(h.head == RCKPT_STORE_NONE && h.summary.len == 0);
	assert_int_equal(commit(&m, RCKPT_STORE_NONE, 10), 0);
	assert_int_equal(commit(&m, 10, 20), 0);
	head_summary(&m, &h, sum, sizeof(sum));
	assert_true(h.head == 20 && h.count == 2 && h.summary.len == 3);
	assert_true(sum[0] == 20 && sum[1] == 7 && sum[2] == 9); /* step 20's, not 10's */
	memset(&o, 0, sizeof(o));
	o.ops = &mem_obj_ops;
	o.ctx = &m;
	assert_int_equal(rckpt_store_step_key(key, sizeof(key), 's', 20), 0);
	assert_int_equal(mem_omap_set(&o, key, big, sizeof(big)), 0);
	head_summary(&m, &h, sum, sizeof(sum));
	assert_true(h.head == 20 && h.count == 2 && h.summary.len == 0);
	assert_int_equal(mem_omap_remove(&o, key), 0);
	head_summary(&m, &h, sum, sizeof(sum));
	assert_true(h.head == 20 && h.count == 2 && h.summary.len == 0);
	mem_obj_free(&m);
}

static void test_job_commit_list(void **state)
{
	mem_obj_t m = { 0 };
	rckpt_msg_head_t h;
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_msg_list_t l = { RCKPT_STORE_NONE, 3 };
	rckpt_msg_stepsum_reader_t rd;
	rckpt_blob_t sum;
	uint64_t step, seen = 0, expect[] = { 10, 20, 30 };
	unsigned k = 0;

	(void)state;
	assert_int_equal(call_empty(&m, cls_rckpt_head, &h), 0);
	assert_true(h.head == RCKPT_STORE_NONE && h.count == 0);
	assert_int_equal(commit(&m, 5, 10), -ESTALE); /* the head is empty, not 5 */
	assert_int_equal(commit(&m, RCKPT_STORE_NONE, 10), 0);
	assert_int_equal(commit(&m, RCKPT_STORE_NONE, 20), -ESTALE); /* a second writer */
	assert_int_equal(commit(&m, 10, 10), -EINVAL);                 /* not after the head */
	assert_int_equal(commit(&m, 10, 20), 0);
	assert_int_equal(commit(&m, 20, 30), 0);
	assert_int_equal(commit(&m, 30, 40), 0);
	assert_int_equal(call_empty(&m, cls_rckpt_head, &h), 0);
	assert_true(h.head == 40 && h.count == 4);

	assert_int_equal(rckpt_msg_list_encode(&msg, &l), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_list, msg.p, msg.len, &out), 0);
	assert_int_equal(rckpt_msg_stepsum_open(&rd, out.p, out.len), 0);
	assert_int_equal(rd.more, 1);
	while (rckpt_msg_stepsum_next(&rd, &step, &sum) == 1) {
		assert_int_equal(step, expect[k++]);
		assert_int_equal(sum.len, 3);
		assert_int_equal(sum.p[0], (uint8_t)step);
		seen = step;
	}
	assert_int_equal(k, 3);
	rckpt_buf_free(&out);
	msg.len = 0;
	l.after = seen;
	assert_int_equal(rckpt_msg_list_encode(&msg, &l), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_list, msg.p, msg.len, &out), 0);
	assert_int_equal(rckpt_msg_stepsum_open(&rd, out.p, out.len), 0);
	assert_int_equal(rd.c.n, 1);
	assert_int_equal(rd.more, 0);
	assert_int_equal(rckpt_msg_stepsum_next(&rd, &step, &sum), 1);
	assert_int_equal(step, 40);
	rckpt_buf_free(&out);
	rckpt_buf_free(&msg);
	mem_obj_free(&m);
}

static int drop_or_pin_as(mem_obj_t *m, uint64_t token, const uint64_t *steps, uint32_t n, int pin)
{
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	int rc;
	if (pin)
		assert_int_equal(rckpt_msg_pin_encode(&msg, token, steps[0], pin > 0), 0);
	else
		assert_int_equal(rckpt_msg_drop_encode(&msg, token, steps, n), 0);
	rc = mem_obj_call(m, pin ? cls_rckpt_pin : cls_rckpt_drop, msg.p, msg.len, &out);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	return rc;
}

static int drop_or_pin(mem_obj_t *m, const uint64_t *steps, uint32_t n, int pin)
{
	return drop_or_pin_as(m, 0, steps, n, pin);
}

static void test_drop_and_pin(void **state)
{
	mem_obj_t m = { 0 };
	uint64_t all[] = { 10, 20, 30, 40 }, nope[] = { 25 };
	rckpt_msg_head_t h;

	(void)state;
	assert_int_equal(commit(&m, RCKPT_STORE_NONE, 10), 0);
	assert_int_equal(commit(&m, 10, 20), 0);
	assert_int_equal(commit(&m, 20, 30), 0);
	assert_int_equal(commit(&m, 30, 40), 0);
	assert_int_equal(drop_or_pin(&m, nope, 1, 1), -ENOENT); /* not a step */
	assert_int_equal(drop_or_pin(&m, &all[1], 1, 1), 0);
	assert_int_equal(drop_or_pin(&m, all, 4, 0), 0);
	/* the head (40) and the pinned step (20) stay */
	assert_int_equal(call_empty(&m, cls_rckpt_head, &h), 0);
	assert_true(h.head == 40 && h.count == 2);
	assert_int_equal(drop_or_pin(&m, all, 4, 0), 0); /* twice: the same */
	assert_int_equal(call_empty(&m, cls_rckpt_head, &h), 0);
	assert_int_equal(h.count, 2);
	assert_int_equal(drop_or_pin(&m, &all[1], 1, -1), 0); /* unpin */
	{ /* more steps than one call may forget: refused, nothing changed */
		uint64_t many[RCKPT_STORE_DROP_MAX + 1];
		unsigned i;
		for (i = 0; i <= RCKPT_STORE_DROP_MAX; i++)
			many[i] = i + 1;
		assert_int_equal(drop_or_pin(&m, many, RCKPT_STORE_DROP_MAX + 1, 0), -E2BIG);
		assert_non_null(strstr(m.why, "at most"));
		assert_int_equal(call_empty(&m, cls_rckpt_head, &h), 0);
		assert_int_equal(h.count, 2);
		assert_int_equal(drop_or_pin(&m, many, RCKPT_STORE_DROP_MAX, 0), 0);
	}
	assert_int_equal(drop_or_pin(&m, all, 4, 0), 0);
	assert_int_equal(call_empty(&m, cls_rckpt_head, &h), 0);
	assert_true(h.head == 40 && h.count == 1);
	mem_obj_free(&m);
}

/* A compactor's drop and an operator's pin carry the job's writer token as
 * they read it: once a newer writer has claimed the job, a late one is
 * refused and changes nothing; one of the current token goes on. */
static void test_drop_and_pin_fenced(void **state)
{
	mem_obj_t m = { 0 };
	uint64_t all[] = { 10, 20, 30 };
	rckpt_msg_head_t h;

	(void)state;
	assert_int_equal(claim(&m, 0, 5), 0);
	assert_int_equal(commit_as(&m, RCKPT_STORE_NONE, 10, 5), 0);
	assert_int_equal(commit_as(&m, 10, 20, 5), 0);
	assert_int_equal(commit_as(&m, 20, 30, 5), 0);
	assert_int_equal(claim(&m, 5, 6), 0); /* a new writer */
	assert_int_equal(drop_or_pin_as(&m, 5, all, 3, 0), -ESTALE);
	assert_non_null(strstr(m.why, "older than the job's"));
	assert_int_equal(drop_or_pin_as(&m, 5, &all[1], 1, -1), -ESTALE);
	assert_int_equal(drop_or_pin_as(&m, 0, &all[1], 1, 1), -ESTALE);
	assert_int_equal(call_empty(&m, cls_rckpt_head, &h), 0);
	assert_true(h.head == 30 && h.count == 3);
	assert_int_equal(drop_or_pin_as(&m, 6, &all[1], 1, 1), 0);
	assert_int_equal(drop_or_pin_as(&m, 6, all, 3, 0), 0);
	assert_int_equal(call_empty(&m, cls_rckpt_head, &h), 0);
	assert_true(h.head == 30 && h.count == 2); /* 10 went; 20 (pinned) and 30 (head) stay */
	mem_obj_free(&m);
}

/* rm's claim marks the job deleting: no writer may claim it or commit
 * from then on (-EIDRM), only another deleter (an rm run again); the job
 * object goes only by retire from the deleter that holds the token. */
static void test_delete_claim(void **state)
{
	mem_obj_t m = { 0 };
	rckpt_buf_t req = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_msg_retire_t r = { 8, RCKPT_STORE_NONE, RCKPT_RETIRE_JOB };

	(void)state;
	assert_int_equal(claim(&m, 0, 5), 0);
	assert_int_equal(commit_as(&m, RCKPT_STORE_NONE, 10, 5), 0);
	/* the job object is retired only by its deleter */
	assert_int_equal(rckpt_msg_retire_encode(&req, &r), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len, &out), -ESTALE);
	r.kind = RCKPT_RETIRE_CHUNK; /* nor as a chunk */
	req.len = 0;
	assert_int_equal(rckpt_msg_retire_encode(&req, &r), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len, &out), -EACCES);
	assert_true(m.exists);
	assert_int_equal(claim_flags(&m, 5, 7, RCKPT_CLAIM_DELETE), 0);
	assert_int_equal(claim(&m, 7, 8), -EIDRM); /* a writer */
	assert_non_null(strstr(m.why, "being deleted"));
	assert_int_equal(commit_as(&m, 10, 11, 7), -EIDRM);
	assert_int_equal(claim_flags(&m, 7, 8, RCKPT_CLAIM_DELETE), 0); /* rm run again */
	r.kind = RCKPT_RETIRE_JOB;
	r.token = 7; /* the first deleter's, late */
	req.len = 0;
	assert_int_equal(rckpt_msg_retire_encode(&req, &r), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len, &out), -ESTALE);
	assert_true(m.exists);
	r.token = 8;
	req.len = 0;
	assert_int_equal(rckpt_msg_retire_encode(&req, &r), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len, &out), 0);
	assert_false(m.exists);
	rckpt_buf_free(&req);
	rckpt_buf_free(&out);
	mem_obj_free(&m);
}

/* The attachment (store.md): round trips at sizes 0, 1 and odd; every
 * header field checked; any truncation refused; a flipped byte refused or
 * (a padding bit) harmless, never wrong bytes; never a read past the input
 * (ASan). */
static void test_attachment(void **state)
{
	static const size_t sizes[] = { 0, 1, 3, 4097, 100003 };
	unsigned k;
	(void)state;
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		const size_t n = sizes[k];
		uint8_t *raw = malloc(n ? n : 1), *got;
		rckpt_buf_t b = RCKPT_BUF_INIT;
		size_t i, len;
		uint32_t x = 12345;
		for (i = 0; i < n; i++) {
			x = x * 1664525u + 1013904223u;
			raw[i] = (uint8_t)(i % 7 == 0 ? x >> 24 : i / 64); /* compressible, not trivially */
		}
		assert_int_equal(rckpt_attach_encode(&b, 42, raw, n), 0);
		assert_true(b.len >= RCKPT_ATTACH_HEADER);
		assert_int_equal(rckpt_attach_decode(&got, &len, 42, b.p, b.len), 0);
		assert_int_equal(len, n);
		assert_memory_equal(got, raw, n ? n : 0);
		free(got);
		/* another step's attachment */
		assert_int_equal(rckpt_attach_decode(&got, &len, 43, b.p, b.len), -EBADMSG);
		assert_null(got);
		/* every truncation */
		for (i = 0; i < b.len; i += 1 + b.len / 97)
			assert_true(rckpt_attach_decode(&got, &len, 42, b.p, i) < 0);
		/* flipped bytes: the header's fields, the frame, the CRC (not the
		 * version: a later version that keeps compat 1 reads) */
		for (i = 0; i < b.len; i += 1 + b.len / 61) {
			int rc;
			if (i == 4)
				continue;
			b.p[i] ^= 0x20;
			rc = rckpt_attach_decode(&got, &len, 42, b.p, b.len);
			if (rc == 0) { /* only a bit zstd never reads (padding) may pass:
					  the bytes must then be the right ones */
				assert_int_equal(len, n);
				assert_memory_equal(got, raw, n);
				free(got);
			}
			b.p[i] ^= 0x20;
		}
		b.p[5] = 2; /* compat above the version: malformed */
		assert_int_equal(rckpt_attach_decode(&got, &len, 42, b.p, b.len), -EBADMSG);
		b.p[4] = 2; /* a newer version: too new */
		assert_int_equal(rckpt_attach_decode(&got, &len, 42, b.p, b.len), RCKPT_FMT_EVERSION);
		rckpt_buf_free(&b);
		free(raw);
	}
	{
		char oid[64];
		assert_int_equal(rckpt_store_attach_oid(oid, sizeof(oid), 7), 0);
		assert_string_equal(oid, "rckpt.attach.00000000000000000007");
		assert_int_equal(rckpt_store_attach_oid(oid, 10, 7), -ERANGE);
	}
}

/* retire removes a step's manifest or attachment, and nothing else. */
static void test_retire(void **state)
{
	rckpt_manifest_t mf;
	rckpt_buf_t man = RCKPT_BUF_INIT, att = RCKPT_BUF_INIT, req = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	mem_obj_t m;
	static const uint8_t junk[32] = "not a manifest, not anything...";
	(void)state;
	memset(&mf, 0, sizeof(mf));
	mf.step = 7;
	mf.parent = RCKPT_STORE_NONE;
	mf.chunk_params = 1;
	assert_int_equal(rckpt_manifest_encode(&man, &mf), 0);
	assert_int_equal(rckpt_attach_encode(&att, 7, "abc", 3), 0);
	assert_int_equal(rckpt_msg_retire_encode(&req, &(rckpt_msg_retire_t){ 1, 7, RCKPT_RETIRE_STEP }), 0);
	/* a manifest of step 7 and an attachment of step 7 go */
	memset(&m, 0, sizeof(m));
	assert_int_equal(mem_write(&(rckpt_cls_obj_t){ .ops = &mem_obj_ops, .ctx = &m }, 0, man.p, man.len), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len, &out), 0);
	assert_false(m.exists);
	memset(&m, 0, sizeof(m));
	assert_int_equal(mem_write(&(rckpt_cls_obj_t){ .ops = &mem_obj_ops, .ctx = &m }, 0, att.p, att.len), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len, &out), 0);
	assert_false(m.exists);
	/* another step's, another object, a short one, none: refused, kept */
	req.len = 0;
	assert_int_equal(rckpt_msg_retire_encode(&req, &(rckpt_msg_retire_t){ 1, 8, RCKPT_RETIRE_STEP }), 0);
	memset(&m, 0, sizeof(m));
	assert_int_equal(mem_write(&(rckpt_cls_obj_t){ .ops = &mem_obj_ops, .ctx = &m }, 0, man.p, man.len), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len, &out), -EINVAL);
	assert_true(m.exists && m.size == man.len);
	mem_obj_free(&m);
	memset(&m, 0, sizeof(m));
	assert_int_equal(mem_write(&(rckpt_cls_obj_t){ .ops = &mem_obj_ops, .ctx = &m }, 0, junk, sizeof(junk)), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len, &out), -EINVAL);
	assert_true(m.exists && m.size == sizeof(junk));
	mem_obj_free(&m);
	memset(&m, 0, sizeof(m));
	assert_int_equal(mem_write(&(rckpt_cls_obj_t){ .ops = &mem_obj_ops, .ctx = &m }, 0, man.p, 15), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len, &out), -EINVAL);
	mem_obj_free(&m);
	memset(&m, 0, sizeof(m));
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len, &out), -ENOENT);
	/* a malformed request */
	memset(&m, 0, sizeof(m));
	assert_int_equal(mem_write(&(rckpt_cls_obj_t){ .ops = &mem_obj_ops, .ctx = &m }, 0, man.p, man.len), 0);
	assert_int_equal(mem_obj_call(&m, cls_rckpt_retire, req.p, req.len - 1, &out), -EINVAL);
	assert_true(m.exists);
	mem_obj_free(&m);
	rckpt_buf_free(&out);
	rckpt_buf_free(&req);
	rckpt_buf_free(&man);
	rckpt_buf_free(&att);
}

static int put_as(mem_obj_t *m, uint64_t token, uint64_t step, const rckpt_buf_t *b)
{
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	int rc;
	assert_int_equal(rckpt_msg_put_encode(&msg, token, step, b->p, b->len), 0);
	rc = mem_obj_call(m, cls_rckpt_put, msg.p, msg.len, &out);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	return rc;
}

static int retire_as(mem_obj_t *m, uint64_t token, uint64_t step, unsigned kind)
{
	rckpt_buf_t msg = RCKPT_BUF_INIT;
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	rckpt_msg_retire_t r = { token, step, (uint8_t)kind };
	int rc;
	assert_int_equal(rckpt_msg_retire_encode(&msg, &r), 0);
	rc = mem_obj_call(m, cls_rckpt_retire, msg.p, msg.len, &out);
	rckpt_buf_free(&msg);
	rckpt_buf_free(&out);
	return rc;
}

/* A manifest goes in by put, which records the writer's token: a late put
 * of an older writer cannot replace it, nor a late retire of an actor
 * that read an older token remove it (store.md "Fencing"). Put takes only
 * a manifest or an attachment of its step; a shorter one replaces a longer
 * one whole. A chunk retires only for a token as new as its own. */
static void test_put_and_retire_fenced(void **state)
{
	rckpt_manifest_t mf;
	rckpt_buf_t man = RCKPT_BUF_INIT, big = RCKPT_BUF_INIT, att = RCKPT_BUF_INIT;
	rckpt_buf_t junk = RCKPT_BUF_INIT;
	mem_obj_t m = { 0 }, c = { 0 };
	uint64_t w = 0;

	(void)state;
	memset(&mf, 0, sizeof(mf));
	mf.step = 7;
	mf.parent = RCKPT_STORE_NONE;
	mf.chunk_params = 1;
	assert_int_equal(rckpt_manifest_encode(&man, &mf), 0);
	assert_int_equal(rckpt_attach_encode(&att, 7, "abc", 3), 0);
	assert_int_equal(rckpt_attach_encode(&big, 7, "a longer attachment than that", 30), 0);
	assert_int_equal(rckpt_buf_append(&junk, "not a manifest, not anything...", 32), 0);

	assert_int_equal(put_as(&m, 5, 7, &big), 0);
	assert_int_equal(put_as(&m, 5, 7, &att), 0); /* the same writer again: replaced whole */
	assert_true(m.exists && m.size == att.len);
	assert_memory_equal(m.data, att.p, att.len);
	assert_int_equal(put_as(&m, 6, 7, &man), 0); /* a newer writer */
	assert_int_equal(put_as(&m, 5, 7, &att), -ESTALE); /* the older one's, late */
	assert_int_equal(put_as(&m, 6, 8, &man), -EINVAL); /* not of step 8 */
	assert_int_equal(put_as(&m, 6, 7, &junk), -EINVAL);
	assert_true(m.size == man.len && memcmp(m.data, man.p, man.len) == 0);
	assert_int_equal(retire_as(&m, 5, 7, RCKPT_RETIRE_STEP), -ESTALE);
	assert_true(m.exists);
	assert_int_equal(retire_as(&m, 6, 7, RCKPT_RETIRE_STEP), 0);
	assert_false(m.exists);
	mem_obj_free(&m);

	/* a chunk: its token is the newest writer's that touched it */
	assert_int_equal(crk_set_u64(&(rckpt_cls_obj_t){ .ops = &mem_obj_ops, .ctx = &c }, "writer", 9), 0);
	assert_int_equal(retire_as(&c, 8, RCKPT_STORE_NONE, RCKPT_RETIRE_CHUNK), -ESTALE);
	assert_true(c.exists);
	assert_int_equal(crk_get_u64(&(rckpt_cls_obj_t){ .ops = &mem_obj_ops, .ctx = &c }, "writer", &w), 0);
	assert_int_equal(w, 9);
	assert_int_equal(retire_as(&c, 9, RCKPT_STORE_NONE, RCKPT_RETIRE_CHUNK), 0);
	assert_false(c.exists);
	mem_obj_free(&c);
	rckpt_buf_free(&man);
	rckpt_buf_free(&big);
	rckpt_buf_free(&att);
	rckpt_buf_free(&junk);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claim_fences_commit),
		cmocka_unit_test(test_job_commit_list),
		cmocka_unit_test(test_job_head_summary),
		cmocka_unit_test(test_drop_and_pin),
		cmocka_unit_test(test_drop_and_pin_fenced),
		cmocka_unit_test(test_delete_claim),
		cmocka_unit_test(test_put_and_retire_fenced),
		cmocka_unit_test(test_attachment),
		cmocka_unit_test(test_retire),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
