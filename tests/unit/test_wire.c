/*
 * test_wire.c — the cls wire framing and the version reply (formats/cls-wire.md).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "golden_hex.h"

#include "rckpt_buf.h"
#include "rckpt_store_wire.h"
#include "rckpt_wire.h"

static rckpt_wire_version_t sample(void)
{
	rckpt_wire_version_t v;
	memset(&v, 0, sizeof(v));
	strcpy(v.plugin, "rckpt");
	v.major = 1;
	v.minor = 2;
	v.patch = 3;
	strcpy(v.built_for, "16.2.15+ds-0+deb12u2");
	v.nformats = 2;
	strcpy(v.formats[0].name, "cls-wire");
	v.formats[0].min_version = 1;
	v.formats[0].max_version = 1;
	strcpy(v.formats[1].name, "ckpt-record");
	v.formats[1].min_version = 1;
	v.formats[1].max_version = 3;
	return v;
}

static void test_round_trip(void **state)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND];
	rckpt_wire_version_t v = sample(), d;
	size_t n;

	(void)state;
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), 0);
	assert_int_equal(rckpt_wire_version_decode(&d, buf, n), 0);
	assert_string_equal(d.plugin, "rckpt");
	assert_int_equal(d.major, 1);
	assert_int_equal(d.minor, 2);
	assert_int_equal(d.patch, 3);
	assert_string_equal(d.built_for, v.built_for);
	assert_int_equal(d.nformats, 2);
	assert_string_equal(d.formats[1].name, "ckpt-record");
	assert_int_equal(d.formats[1].min_version, 1);
	assert_int_equal(d.formats[1].max_version, 3);
}

/* The bytes of version 1 never change: old clients must read new plugins. */
static void test_golden_vector(void **state)
{
	uint8_t want[1024], got[RCKPT_WIRE_VERSION_BOUND];
	rckpt_wire_version_t v = sample(), d;
	size_t n, wn;

	(void)state;
	wn = golden_hex("cls-wire-version-v1.hex", want, sizeof(want));
	assert_int_equal(rckpt_wire_version_encode(got, sizeof(got), &n, &v), 0);
	assert_int_equal(n, wn);
	assert_memory_equal(got, want, n);
	assert_int_equal(rckpt_wire_version_decode(&d, want, wn), 0);
	assert_memory_equal(&d, &v, sizeof(d));
}

/* The store's messages and an attachment, derived by hand from store.md
 * (tests/golden/store-*-v1.hex): each decodes to the fields the file's
 * comment names, and the encoder writes the same bytes (the attachment's
 * zstd frame is the encoder's choice: decoded only). */
static void same_bytes(const rckpt_buf_t *b, const uint8_t *want, size_t n)
{
	assert_int_equal(b->len, n);
	assert_memory_equal(b->p, want, n);
}

static void test_golden_store_messages(void **state)
{
	uint8_t want[1024];
	size_t n;
	rckpt_buf_t b = RCKPT_BUF_INIT;
	rckpt_msg_commit_t c;
	rckpt_msg_materialize_t m;
	rckpt_msg_compact_t k;
	rckpt_msg_stepsum_reader_t r;
	rckpt_msg_steps_writer_t w;
	uint64_t step;
	rckpt_blob_t sum;
	static const uint64_t kept[3] = { 10, 20, 50 };

	(void)state;
	n = golden_hex("store-commit-v1.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_commit_decode(&c, want, n), 0);
	assert_int_equal(c.expect, 42);
	assert_int_equal(c.step, 43);
	assert_int_equal(c.summary.len, 3);
	assert_memory_equal(c.summary.p, "abc", 3);
	assert_int_equal(c.writer, 7);
	assert_int_equal(rckpt_msg_commit_encode(&b, &c), 0);
	same_bytes(&b, want, n);

	n = golden_hex("store-materialize-v1.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_materialize_decode(&m, want, n), 0);
	assert_int_equal(m.step, 43);
	assert_int_equal(m.budget, 0);
	assert_int_equal(m.start.len, 0);
	b.len = 0;
	assert_int_equal(rckpt_msg_materialize_encode(&b, &m), 0);
	same_bytes(&b, want, n);

	n = golden_hex("store-compact-v3.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_compact_decode(&k, want, n), 0);
	assert_int_equal(k.token, 7);
	assert_int_equal(k.upto, 50);
	assert_int_equal(k.keep.n, 3);
	assert_int_equal(rckpt_stepset_at(&k.keep, 1), 20);
	b.len = 0;
	assert_int_equal(rckpt_msg_compact_encode(&b, 7, 50, kept, 3), 0);
	same_bytes(&b, want, n);
	/* the version-1 layout (no token: an unfenced compactor's) is refused */
	n = golden_hex("store-compact-v1.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_compact_decode(&k, want, n), -EBADMSG);

	n = golden_hex("store-steps-v1.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_stepsum_open(&r, want, n), 0);
	assert_int_equal(rckpt_msg_stepsum_next(&r, &step, &sum), 1);
	assert_int_equal(step, 42);
	assert_int_equal(sum.len, 3);
	assert_memory_equal(sum.p, "s42", 3);
	assert_int_equal(rckpt_msg_stepsum_next(&r, &step, &sum), 1);
	assert_int_equal(step, 43);
	assert_int_equal(sum.len, 0);
	assert_int_equal(rckpt_msg_stepsum_next(&r, &step, &sum), 0);
	assert_int_equal(r.more, 1);
	b.len = 0;
	rckpt_msg_stepsum_begin(&w, &b);
	rckpt_msg_stepsum_add(&w, 42, (const uint8_t *)"s42", 3);
	rckpt_msg_stepsum_add(&w, 43, NULL, 0);
	assert_int_equal(rckpt_msg_stepsum_end(&w, 1), 0);
	same_bytes(&b, want, n);
	rckpt_buf_free(&b);
}

/* HEAD: version 2 carries the head's summary; a version-1 reply (an
 * older plugin's) decodes with none; a summary over the bound is refused
 * both ways. */
static void test_golden_head(void **state)
{
	static uint8_t big[RCKPT_STORE_SUMMARY_MAX + 1];
	uint8_t want[256];
	size_t n;
	rckpt_buf_t b = RCKPT_BUF_INIT;
	rckpt_msg_head_t h;

	(void)state;
	n = golden_hex("store-head-v2.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_head_decode(&h, want, n), 0);
	assert_true(h.head == 100 && h.count == 7);
	assert_int_equal(h.summary.len, 3);
	assert_memory_equal(h.summary.p, "abc", 3);
	assert_int_equal(rckpt_msg_head_encode(&b, &h), 0);
	same_bytes(&b, want, n);
	assert_int_equal(rckpt_msg_head_decode(&h, want, n - 1), -EBADMSG);
	n = golden_hex("store-head-v1.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_head_decode(&h, want, n), 0);
	assert_true(h.head == 100 && h.count == 7 && h.summary.len == 0);
	h.summary = (rckpt_blob_t){ big, sizeof(big) };
	b.len = 0;
	assert_true(rckpt_msg_head_encode(&b, &h) < 0);
	/* the same by hand: a version-2 frame whose summary is one byte over */
	{
		static uint8_t f[12 + 20 + sizeof(big)];
		const size_t pay = 20 + sizeof(big);
		memcpy(f, "RK\x02\x01\x06\x01\x00\x00", 8);
		f[8] = (uint8_t)pay;
		f[9] = (uint8_t)(pay >> 8);
		f[12] = 100; /* head 100, count 0 */
		f[28] = (uint8_t)sizeof(big);
		f[29] = (uint8_t)(sizeof(big) >> 8);
		assert_int_equal(rckpt_msg_head_decode(&h, f, sizeof(f)), -EBADMSG);
		f[28] = (uint8_t)(sizeof(big) - 1); /* at the bound it reads */
		assert_int_equal(rckpt_msg_head_decode(&h, f, sizeof(f) - 1), -EBADMSG); /* (the frame's length) */
		f[8] = (uint8_t)(pay - 1);
		assert_int_equal(rckpt_msg_head_decode(&h, f, sizeof(f) - 1), 0);
		assert_int_equal(h.summary.len, RCKPT_STORE_SUMMARY_MAX);
	}
	rckpt_buf_free(&b);
}

/* A fenced message of two u64 fields: its golden vector decodes to (a, b)
 * and encodes back to itself; the same bytes as a version-1 frame are
 * refused. */
static void golden_fenced2(const char *name, int (*dec)(uint64_t *, uint64_t *, const uint8_t *, size_t),
			   int (*enc)(rckpt_buf_t *, uint64_t, uint64_t), uint64_t a, uint64_t b)
{
	uint8_t want[256];
	rckpt_buf_t out = RCKPT_BUF_INIT;
	uint64_t x, y;
	size_t n = golden_hex(name, want, sizeof(want));
	assert_int_equal(dec(&x, &y, want, n), 0);
	assert_int_equal(x, a);
	assert_int_equal(y, b);
	assert_int_equal(enc(&out, a, b), 0);
	same_bytes(&out, want, n);
	want[2] = want[3] = 1;
	assert_int_equal(dec(&x, &y, want, n), -EBADMSG);
	rckpt_buf_free(&out);
}

/* The fenced messages (version 2): each golden vector decodes to its
 * fields and encodes back to itself; the same bytes as a version-1 frame
 * (an unfenced writer's) are refused. */
static void test_golden_fenced(void **state)
{
	uint8_t want[256];
	rckpt_buf_t b = RCKPT_BUF_INIT;
	rckpt_msg_append_t a;
	size_t n;

	(void)state;
	n = golden_hex("store-append-v2.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_append_decode(&a, want, n), 0);
	assert_int_equal(a.writer, 7);
	assert_int_equal(a.record.len, 3);
	assert_memory_equal(a.record.p, "abc", 3);
	assert_int_equal(a.head.len, 0); /* layout 2 has none */
	assert_int_equal(rckpt_msg_append_encode(&b, 7, (const uint8_t *)"abc", 3), 0);
	same_bytes(&b, want, n);
	b.len = 0; /* without a head, the head encoder writes layout 2 too */
	assert_int_equal(rckpt_msg_append_head_encode(&b, &a), 0);
	same_bytes(&b, want, n);
	assert_int_equal(rckpt_msg_append_encode(&b, 0, (const uint8_t *)"abc", 3), -EINVAL);
	want[2] = want[3] = 1;
	assert_int_equal(rckpt_msg_append_decode(&a, want, n), -EBADMSG);

	/* layout 4: the head record after the record */
	n = golden_hex("store-append-v4.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_append_decode(&a, want, n), 0);
	assert_int_equal(a.writer, 7);
	assert_int_equal(a.record.len, 3);
	assert_memory_equal(a.record.p, "abc", 3);
	assert_int_equal(a.head.len, 4);
	assert_memory_equal(a.head.p, "defg", 4);
	b.len = 0;
	assert_int_equal(rckpt_msg_append_head_encode(&b, &a), 0);
	same_bytes(&b, want, n);

	golden_fenced2("store-trim-v2.hex", rckpt_msg_trim_decode, rckpt_msg_trim_encode, 7, 42);
	rckpt_buf_free(&b);
}

/* Version 3: CLAIM, DROP, PIN, RETIRE and PUT carry a token (and CLAIM a
 * deleter's flag). Each golden vector decodes to its fields and encodes
 * back to itself; its fields' limits are refused both ways; the same
 * bytes as a version-2 frame are refused, as is the version-2 CLAIM. */
static void older_refused(uint8_t *want, size_t n, int (*check)(const uint8_t *, size_t))
{
	want[2] = want[3] = 2;
	assert_int_equal(check(want, n), -EBADMSG);
	want[2] = want[3] = 3;
	assert_int_equal(check(want, n), 0);
}

static int claim_ok(const uint8_t *p, size_t n)
{
	uint64_t a, b;
	unsigned f;
	return rckpt_msg_claim_decode(&a, &b, &f, p, n);
}

static int drop_ok(const uint8_t *p, size_t n)
{
	uint64_t t;
	rckpt_stepset_t s;
	return rckpt_msg_drop_decode(&t, &s, p, n);
}

static int pin_ok(const uint8_t *p, size_t n)
{
	uint64_t t, s;
	int on;
	return rckpt_msg_pin_decode(&t, &s, &on, p, n);
}

static int rewind_ok(const uint8_t *p, size_t n)
{
	rckpt_msg_rewind_t m;
	return rckpt_msg_rewind_decode(&m, p, n);
}

static int retire_ok(const uint8_t *p, size_t n)
{
	rckpt_msg_retire_t m;
	return rckpt_msg_retire_decode(&m, p, n);
}

static int put_ok(const uint8_t *p, size_t n)
{
	uint64_t t, s;
	rckpt_blob_t x;
	return rckpt_msg_put_decode(&t, &s, &x, p, n);
}

static void test_golden_fenced3(void **state)
{
	uint8_t want[256];
	rckpt_buf_t b = RCKPT_BUF_INIT;
	rckpt_stepset_t set;
	rckpt_msg_retire_t rm;
	rckpt_blob_t x;
	uint64_t t, s;
	unsigned flags;
	int on;
	size_t n;
	static const uint64_t steps[2] = { 3, 5 };

	(void)state;
	n = golden_hex("store-claim-v3.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_claim_decode(&t, &s, &flags, want, n), 0);
	assert_true(t == 6 && s == 7 && flags == RCKPT_CLAIM_DELETE);
	assert_int_equal(rckpt_msg_claim_encode(&b, 6, 7, RCKPT_CLAIM_DELETE), 0);
	same_bytes(&b, want, n);
	assert_int_equal(rckpt_msg_claim_encode(&b, 7, 7, 0), -EINVAL); /* a token not after prev */
	assert_int_equal(rckpt_msg_claim_encode(&b, 6, 7, 2), -EINVAL); /* an unknown flag */
	older_refused(want, n, claim_ok);
	want[n - 1] = 2;
	assert_int_equal(claim_ok(want, n), -EBADMSG);
	want[n - 1] = 1;
	want[RCKPT_WIRE_HEADER_BYTES + 8] = 5; /* token 5, before prev 6 */
	assert_int_equal(claim_ok(want, n), -EBADMSG);
	n = golden_hex("store-claim-v2.hex", want, sizeof(want)); /* the old layout */
	assert_int_equal(claim_ok(want, n), -EBADMSG);

	b.len = 0;
	n = golden_hex("store-drop-v3.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_drop_decode(&t, &set, want, n), 0);
	assert_true(t == 7 && set.n == 2 && rckpt_stepset_at(&set, 1) == 5);
	assert_int_equal(rckpt_msg_drop_encode(&b, 7, steps, 2), 0);
	same_bytes(&b, want, n);
	older_refused(want, n, drop_ok);

	b.len = 0;
	n = golden_hex("store-pin-v3.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_pin_decode(&t, &s, &on, want, n), 0);
	assert_true(t == 7 && s == 43 && on == 1);
	assert_int_equal(rckpt_msg_pin_encode(&b, 7, 43, 1), 0);
	same_bytes(&b, want, n);
	older_refused(want, n, pin_ok);

	b.len = 0;
	n = golden_hex("store-rewind-v3.hex", want, sizeof(want));
	{
		rckpt_msg_rewind_t rw, bad;
		assert_int_equal(rckpt_msg_rewind_decode(&rw, want, n), 0);
		assert_true(rw.token == 7 && rw.expect == 100 && rw.step == 60);
		assert_int_equal(rckpt_msg_rewind_encode(&b, &rw), 0);
		same_bytes(&b, want, n);
		older_refused(want, n, rewind_ok);
		bad = rw;
		bad.token = 0; /* a writer's token */
		assert_int_equal(rckpt_msg_rewind_encode(&b, &bad), -EINVAL);
		bad = rw;
		bad.step = RCKPT_STORE_NONE;
		assert_int_equal(rckpt_msg_rewind_encode(&b, &bad), -EINVAL);
	}

	b.len = 0;
	n = golden_hex("store-retire-v3.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_retire_decode(&rm, want, n), 0);
	assert_true(rm.token == 7 && rm.step == 43 && rm.kind == RCKPT_RETIRE_STEP);
	assert_int_equal(rckpt_msg_retire_encode(&b, &rm), 0);
	same_bytes(&b, want, n);
	older_refused(want, n, retire_ok);
	want[n - 1] = RCKPT_RETIRE_CHUNK; /* a chunk names no step */
	assert_int_equal(retire_ok(want, n), -EBADMSG);
	want[n - 1] = 3;
	assert_int_equal(retire_ok(want, n), -EBADMSG);
	rm.kind = RCKPT_RETIRE_CHUNK;
	assert_int_equal(rckpt_msg_retire_encode(&b, &rm), -EINVAL);
	rm.step = RCKPT_STORE_NONE;
	rm.kind = RCKPT_RETIRE_JOB;
	rm.token = 0; /* the job only for its deleter, who has a token */
	assert_int_equal(rckpt_msg_retire_encode(&b, &rm), -EINVAL);

	b.len = 0;
	n = golden_hex("store-put-v3.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_put_decode(&t, &s, &x, want, n), 0);
	assert_true(t == 7 && s == 43 && x.len == 3 && memcmp(x.p, "abc", 3) == 0);
	assert_int_equal(rckpt_msg_put_encode(&b, 7, 43, (const uint8_t *)"abc", 3), 0);
	same_bytes(&b, want, n);
	assert_int_equal(rckpt_msg_put_encode(&b, 0, 43, (const uint8_t *)"abc", 3), -EINVAL);
	older_refused(want, n, put_ok);
	memset(want + RCKPT_WIRE_HEADER_BYTES, 0, 8); /* token 0 */
	assert_int_equal(put_ok(want, n), -EBADMSG);
	rckpt_buf_free(&b);
}

/* VERIFY (a cursor) and VERIFIED version 2 (where to go on): each golden
 * vector decodes and encodes back; an empty VERIFY is from the first; a
 * version-1 VERIFIED (its first 12 + 28 bytes) decodes as done. */
static void test_golden_verify(void **state)
{
	uint8_t want[256];
	rckpt_buf_t b = RCKPT_BUF_INIT;
	rckpt_msg_verified_t v;
	uint64_t after = 0;
	size_t n;

	(void)state;
	n = golden_hex("store-verify-v1.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_verify_decode(&after, want, n), 0);
	assert_int_equal(after, 42);
	assert_int_equal(rckpt_msg_verify_encode(&b, 42), 0);
	same_bytes(&b, want, n);
	assert_int_equal(rckpt_msg_verify_decode(&after, NULL, 0), 0);
	assert_true(after == RCKPT_STORE_NONE);
	assert_int_equal(rckpt_msg_verify_decode(&after, want, n - 1), -EBADMSG);

	b.len = 0;
	n = golden_hex("store-verified-v2.hex", want, sizeof(want));
	assert_int_equal(rckpt_msg_verified_decode(&v, want, n), 0);
	assert_true(v.records == 3 && v.bytes == 1000 && v.bad == 1 && v.first_bad == 7);
	assert_true(v.error == -EBADMSG && v.next == 9);
	assert_int_equal(rckpt_msg_verified_encode(&b, &v), 0);
	same_bytes(&b, want, n);
	/* the version-1 layout: no `next` */
	want[2] = 1;
	want[8] = 28;
	assert_int_equal(rckpt_msg_verified_decode(&v, want, RCKPT_WIRE_HEADER_BYTES + 28), 0);
	assert_true(v.records == 3 && v.next == RCKPT_STORE_NONE);
	rckpt_buf_free(&b);
}

static void test_golden_attachment(void **state)
{
	uint8_t want[1024], *out = NULL;
	size_t n, len = 0;

	(void)state;
	n = golden_hex("store-attach-v1.hex", want, sizeof(want));
	assert_int_equal(rckpt_attach_decode(&out, &len, 43, want, n), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(out, "hello", 5);
	free(out);
	out = NULL;
	/* of another step: refused */
	assert_int_equal(rckpt_attach_decode(&out, &len, 44, want, n), -EBADMSG);
	/* compat 0, or above the version: malformed; a newer compat: too new */
	want[5] = 0;
	assert_int_equal(rckpt_attach_decode(&out, &len, 43, want, n), -EBADMSG);
	want[5] = 2;
	assert_int_equal(rckpt_attach_decode(&out, &len, 43, want, n), -EBADMSG);
	want[4] = 2;
	assert_int_equal(rckpt_attach_decode(&out, &len, 43, want, n), RCKPT_FMT_EVERSION);
	want[4] = want[5] = 1;
	/* a raw byte changed: the CRC of the raw bytes refuses it */
	want[n - 1] ^= 0x01;
	assert_int_equal(rckpt_attach_decode(&out, &len, 43, want, n), RCKPT_FMT_ECHECKSUM);
}

static void test_deterministic(void **state)
{
	uint8_t a[RCKPT_WIRE_VERSION_BOUND], b[RCKPT_WIRE_VERSION_BOUND];
	rckpt_wire_version_t v = sample();
	size_t na, nb;

	(void)state;
	memset(a, 0xaa, sizeof(a));
	memset(b, 0x55, sizeof(b));
	assert_int_equal(rckpt_wire_version_encode(a, sizeof(a), &na, &v), 0);
	assert_int_equal(rckpt_wire_version_encode(b, sizeof(b), &nb, &v), 0);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na);
}

/* Every strict prefix of a valid reply is rejected, and so is any extension
 * past the frame (the frame must fill its input exactly). */
static void test_truncation_and_trailing(void **state)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND + 1];
	rckpt_wire_version_t v = sample(), d;
	size_t n, k;

	(void)state;
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), 0);
	for (k = 0; k < n; k++) {
		uint8_t *copy = malloc(k ? k : 1); /* exact size: ASan catches overreads */
		memcpy(copy, buf, k);
		assert_int_equal(rckpt_wire_version_decode(&d, copy, k), -EBADMSG);
		assert_int_equal(d.nformats, 0);
		free(copy);
	}
	buf[n] = 0;
	assert_int_equal(rckpt_wire_version_decode(&d, buf, n + 1), -EBADMSG);
	assert_int_equal(rckpt_wire_version_decode(&d, NULL, 0), -EBADMSG);
}

/* Fields appended inside the payload by a newer encoder are skipped. */
static void test_unknown_trailing_fields_skipped(void **state)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND + 8];
	rckpt_wire_version_t v = sample(), d;
	size_t n;

	(void)state;
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), 0);
	memcpy(buf + n, "\x07\x00\x00\x00", 4);
	buf[2] = 2; /* version 2, still compat 1 */
	buf[8] = (uint8_t)(buf[8] + 4);
	assert_int_equal(rckpt_wire_version_decode(&d, buf, n + 4), 0);
	assert_string_equal(d.plugin, "rckpt");
}

static void test_header_checks(void **state)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND], bad[RCKPT_WIRE_VERSION_BOUND];
	rckpt_wire_version_t v = sample(), d;
	size_t n;

	(void)state;
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), 0);

	memcpy(bad, buf, n);
	bad[0] ^= 1; /* magic */
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), -EBADMSG);

	memcpy(bad, buf, n);
	bad[3] = 2; /* compat 2 > version 1: not from a sane encoder */
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), -EBADMSG);

	memcpy(bad, buf, n);
	bad[2] = 3;
	bad[3] = 2; /* needs a version-2 decoder */
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), RCKPT_FMT_EVERSION);

	memcpy(bad, buf, n);
	bad[3] = 0; /* compat 0 */
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), -EBADMSG);

	memcpy(bad, buf, n);
	bad[4] = 2; /* another message type */
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), -EBADMSG);

	memcpy(bad, buf, n);
	bad[6] = 1; /* reserved flags */
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), -EBADMSG);

	memcpy(bad, buf, n);
	bad[11] = 0x80; /* length far past the end */
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), -EBADMSG);
}

static void test_field_checks(void **state)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND], bad[RCKPT_WIRE_VERSION_BOUND];
	rckpt_wire_version_t v = sample(), d;
	size_t n, name_at = RCKPT_WIRE_HEADER_BYTES + 1;

	(void)state;
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), 0);

	memcpy(bad, buf, n);
	bad[name_at] = 'R'; /* upper case is outside the name alphabet */
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), -EBADMSG);

	memcpy(bad, buf, n);
	bad[name_at + 1] = '\0'; /* NUL inside a string */
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), -EBADMSG);

	memcpy(bad, buf, n);
	bad[name_at - 1] = 0; /* empty plugin name */
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), -EBADMSG);

	/* min > max in the last format range */
	memcpy(bad, buf, n);
	bad[n - 4] = 9;
	assert_int_equal(rckpt_wire_version_decode(&d, bad, n), -EBADMSG);
}

static void test_encoder_rejects(void **state)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND];
	rckpt_wire_version_t v;
	size_t n = 99;

	(void)state;
	v = sample();
	v.nformats = RCKPT_WIRE_FORMATS_MAX + 1;
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), -EINVAL);
	assert_int_equal(n, 0);

	v = sample();
	strcpy(v.plugin, "Bad Name");
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), -EINVAL);

	v = sample();
	memset(v.plugin, 'a', sizeof(v.plugin)); /* no NUL at all: bounded scan */
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), -EINVAL);

	v = sample();
	v.built_for[3] = '\n';
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), -EINVAL);

	v = sample();
	v.formats[0].min_version = 2;
	v.formats[0].max_version = 1;
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), -EINVAL);

	v = sample();
	assert_int_equal(rckpt_wire_version_encode(buf, 20, &n, &v), -ERANGE);
}

/* The bound holds for the largest reply the format allows. */
static void test_bound_is_enough(void **state)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND];
	rckpt_wire_version_t v, d;
	size_t n;
	unsigned i;

	(void)state;
	memset(&v, 0, sizeof(v));
	memset(v.plugin, 'p', RCKPT_WIRE_NAME_MAX);
	memset(v.built_for, '~', RCKPT_WIRE_RELEASE_MAX);
	v.nformats = RCKPT_WIRE_FORMATS_MAX;
	for (i = 0; i < v.nformats; i++) {
		memset(v.formats[i].name, 'f', RCKPT_WIRE_NAME_MAX);
		v.formats[i].max_version = 0xffff;
	}
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), 0);
	assert_int_equal(n, RCKPT_WIRE_VERSION_BOUND);
	assert_int_equal(rckpt_wire_version_decode(&d, buf, n), 0);
	assert_memory_equal(&d, &v, sizeof(v));
}

/* Random single-bit mutations never crash the decoder, and whatever it
 * accepts re-encodes to the same fields. */
static void test_random_inputs(void **state)
{
	uint8_t buf[RCKPT_WIRE_VERSION_BOUND], out[RCKPT_WIRE_VERSION_BOUND];
	rckpt_wire_version_t v = sample(), d;
	uint32_t seed = 12345;
	size_t n, m;
	int i, accepted = 0;

	(void)state;
	assert_int_equal(rckpt_wire_version_encode(buf, sizeof(buf), &n, &v), 0);
	for (i = 0; i < 20000; i++) {
		uint8_t *copy = malloc(n);
		seed = seed * 1103515245u + 12345u;
		memcpy(copy, buf, n);
		copy[(seed >> 8) % n] ^= (uint8_t)(1u << ((seed >> 4) & 7));
		if (rckpt_wire_version_decode(&d, copy, n) == 0) {
			accepted++;
			/* The re-encoding matches the input field for field; only the
			 * version byte, the length and any skipped trailing bytes
			 * (a flipped count leaves some) may differ. */
			assert_int_equal(rckpt_wire_version_encode(out, sizeof(out), &m, &d), 0);
			assert_true(m <= n);
			assert_memory_equal(out, copy, 2);
			assert_memory_equal(out + 3, copy + 3, 5);
			assert_memory_equal(out + RCKPT_WIRE_HEADER_BYTES, copy + RCKPT_WIRE_HEADER_BYTES,
					    m - RCKPT_WIRE_HEADER_BYTES);
		}
		free(copy);
	}
	/* Flips in version numbers and release text decode fine: the check
	 * above really ran. */
	assert_true(accepted > 0);
}

/* A step's summary and the names of segment objects (store.md "Objects",
 * "Segments"), against vectors derived by hand. */
static void test_summary_and_segments(void **state)
{
	uint8_t want[256], got[RCKPT_STORE_SUMMARY_BYTES];
	rckpt_store_summary_t s;
	size_t n;
	char oid[64];
	uint32_t chunk;
	uint64_t seg;
	static const char *const bad[] = {
		"rckpt.chunk.0001", "rckpt.chunk.00001.", "rckpt.chunk.00001.1",
		"rckpt.chunk.00001.000000000000000000131", "rckpt.chunk.00001.18446744073709551615",
		"rckpt.chunk.x0001", "rckpt.chunk.012345", "rckpt.chunk.00001.0000000000000000013a",
		"rckpt.chunk.4294967296", "rckpt.chunks.00001", "rckpt.manifest.00000000000000000001",
	};
	unsigned i;

	(void)state;
	n = golden_hex("store-summary-v4.hex", want, sizeof(want));
	assert_int_equal(n, RCKPT_STORE_SUMMARY_BYTES);
	assert_int_equal(rckpt_store_summary_get(&s, want, n), 0);
	assert_true(s.raw_bytes == 16777216 && s.enc_bytes == 1048576 && s.parent == 129);
	assert_true(s.nchunks == 1 && s.quality == 0.5 && s.segment == 131 && s.flags == 2 && s.ranks == 4);
	assert_true(s.opt_raw_bytes == 8388608 && s.opt_enc_bytes == 262144);
	rckpt_store_summary_put(got, &s);
	assert_memory_equal(got, want, n);
	/* a step of other tensors than the step before it: a new layout */
	n = golden_hex("store-summary-layout-v4.hex", want, sizeof(want));
	assert_int_equal(n, RCKPT_STORE_SUMMARY_BYTES);
	assert_int_equal(rckpt_store_summary_get(&s, want, n), 0);
	assert_true(s.parent == RCKPT_STORE_NONE && s.segment == 131 &&
		    s.flags == (RCKPT_SUMMARY_ATTACH | RCKPT_SUMMARY_LAYOUT));
	rckpt_store_summary_put(got, &s);
	assert_memory_equal(got, want, n);
	/* without the optimizer's share */
	n = golden_hex("store-summary-v3.hex", want, sizeof(want));
	assert_int_equal(n, RCKPT_STORE_SUMMARY_V3_BYTES);
	assert_int_equal(rckpt_store_summary_get(&s, want, n), 0);
	assert_true(s.nchunks == 1 && s.quality == 0.5 && s.segment == 131 && s.flags == 2 && s.ranks == 4);
	assert_true(s.opt_raw_bytes == 0 && s.opt_enc_bytes == 0);
	rckpt_store_summary_put(got, &s);
	assert_memory_equal(got, want, n);
	/* one writer's layout: no ranks */
	n = golden_hex("store-summary-v2.hex", want, sizeof(want));
	assert_int_equal(n, RCKPT_STORE_SUMMARY_V2_BYTES);
	assert_int_equal(rckpt_store_summary_get(&s, want, n), 0);
	assert_true(s.raw_bytes == 16777216 && s.enc_bytes == 1048576 && s.parent == 129);
	assert_true(s.nchunks == 1 && s.quality == 0.5 && s.segment == 131 && s.flags == 0 && s.ranks == 0);
	rckpt_store_summary_put(got, &s);
	assert_memory_equal(got, want, n);
	/* the first layout: the first segment, lossy; fields past what a
	 * reader knows are ignored; shorter than the first layout is refused */
	n = golden_hex("store-summary-v1.hex", want, sizeof(want));
	assert_int_equal(n, RCKPT_STORE_SUMMARY_V1_BYTES);
	assert_int_equal(rckpt_store_summary_get(&s, want, n), 0);
	assert_true(s.parent == 129 && s.segment == RCKPT_STORE_NONE && s.flags == RCKPT_SUMMARY_ATTACH);
	memset(want, 0xab, 64);
	rckpt_store_summary_put(want, &s);
	assert_int_equal(rckpt_store_summary_get(&s, want, 64), 0);
	assert_true(s.segment == RCKPT_STORE_NONE && s.parent == 129);
	assert_int_equal(rckpt_store_summary_get(&s, want, RCKPT_STORE_SUMMARY_V1_BYTES - 1), -EBADMSG);

	assert_int_equal(rckpt_store_segment_oid(oid, sizeof(oid), 1, RCKPT_STORE_NONE), 0);
	assert_string_equal(oid, "rckpt.chunk.00001");
	assert_int_equal(rckpt_store_segment_oid(oid, sizeof(oid), 1, 131), 0);
	assert_string_equal(oid, "rckpt.chunk.00001.00000000000000000131");
	assert_int_equal(rckpt_store_parse_chunk_oid(oid, &chunk, &seg), 0);
	assert_true(chunk == 1 && seg == 131);
	assert_int_equal(rckpt_store_parse_chunk_oid("rckpt.chunk.123456", &chunk, &seg), 0);
	assert_true(chunk == 123456 && seg == RCKPT_STORE_NONE);
	assert_int_equal(rckpt_store_segment_oid(oid, 38, 1, 131), -ERANGE);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (rckpt_store_parse_chunk_oid(bad[i], &chunk, &seg) != -EINVAL)
			fail_msg("%s parses as a chunk object", bad[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_golden_vector),
		cmocka_unit_test(test_golden_store_messages),
		cmocka_unit_test(test_golden_head),
		cmocka_unit_test(test_golden_fenced),
		cmocka_unit_test(test_golden_fenced3),
		cmocka_unit_test(test_golden_verify),
		cmocka_unit_test(test_golden_attachment),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_truncation_and_trailing),
		cmocka_unit_test(test_unknown_trailing_fields_skipped),
		cmocka_unit_test(test_header_checks),
		cmocka_unit_test(test_field_checks),
		cmocka_unit_test(test_encoder_rejects),
		cmocka_unit_test(test_bound_is_enough),
		cmocka_unit_test(test_random_inputs),
		cmocka_unit_test(test_summary_and_segments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
