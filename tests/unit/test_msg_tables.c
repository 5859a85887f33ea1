/*
 * test_msg_tables.c — the table of every cls-wire message (the version
 * reply, formats/cls-wire.md; the store's, formats/store.md; the PCR
 * class's, formats/pcr.md), checked field by field: every type has one; a valid example of each
 * round-trips every field, and each field carries a second value too;
 * every value a table or a message's rule reserves is refused by the
 * encoder (-EINVAL) and, written into a frame by this file's own writer,
 * by the decoder (-EBADMSG, the struct left zeroed); a frame of a layout
 * older than the message's token is refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_hex.h"
#include "rckpt_bytes.h"
#include "rckpt_pcr.h"
#include "rckpt_store_wire.h"
#include "rckpt_wire.h"

/* Room for any message's struct. */
#define ELEM_ROOM 64 /* bytes of a list's or array's element struct */
typedef union {
	uint64_t w[128];
	rckpt_wire_version_t version;
	rckpt_msg_pcr_read_t pcr_read;
	rckpt_msg_pcr_prefix_t pcr_prefix;
	rckpt_msg_pcr_images_t pcr_images;
	rckpt_msg_pcr_jpegs_t pcr_jpegs;
	rckpt_msg_pcr_stat_t pcr_stat;
	rckpt_msg_append_t append;
	rckpt_msg_materialize_t materialize;
	rckpt_msg_materialized_t materialized;
	rckpt_msg_trim_t trim;
	rckpt_msg_commit_t commit;
	rckpt_msg_head_t head;
	rckpt_msg_list_t list;
	rckpt_msg_steps_t steps;
	rckpt_msg_index_t index;
	rckpt_msg_compact_t compact;
	rckpt_msg_drop_t drop;
	rckpt_msg_pin_t pin;
	rckpt_msg_verified_t verified;
	rckpt_msg_claim_t claim;
	rckpt_msg_retire_t retire;
	rckpt_msg_put_t put;
	rckpt_msg_verify_t verify;
	rckpt_msg_rewind_t rewind;
} msg_t;

static const uint8_t SUM_A[] = "a", SUM_B[] = "bb", REC[] = "record";
static const rckpt_msg_stepsum_t STEPSUMS[] = { { 10, { SUM_A, 1 } }, { 20, { SUM_B, 2 } } };
static const rckpt_store_entry_t ENTRIES[] = { { 2, 0, 10, 1, RCKPT_STORE_NONE }, { 3, 10, 5, 2, 2 } };
static const uint64_t KEEP[] = { 10, 20 }, DROP[] = { 1, 2, 3 };
static const uint32_t IDX[] = { 4, 2, 9 };
static const uint8_t JPEG[] = { 0xFF, 0xD8, 0xFF, 0xD9, 0 }, LABEL[] = "cat";
static const rckpt_msg_pcr_entry_t PCR_ENTRIES[] = {
	{ 7, { (const uint8_t *)"a.jpg", 5 }, { LABEL, 3 }, { JPEG, 4 } },
	{ 8, { (const uint8_t *)"b.jpg", 5 }, { NULL, 0 }, { JPEG, 5 } },
};

/* Every table: the version reply, the store's, the PCR class's. */
static const rckpt_wire_msg_t *all_msgs(unsigned i)
{
	if (i == 0)
		return &rckpt_wire_version_desc;
	if (i - 1 < rckpt_store_nmsgs)
		return rckpt_store_msgs[i - 1];
	if (i - 1 - rckpt_store_nmsgs < rckpt_pcr_nmsgs)
		return rckpt_pcr_msgs[i - 1 - rckpt_store_nmsgs];
	return NULL;
}

static rckpt_wire_list_t host(const void *v, uint32_t n)
{
	rckpt_wire_list_t l = { NULL, 0, v, n };
	return l;
}

/* A valid example of each message. */
static void example(uint16_t type, msg_t *out)
{
	const rckpt_blob_t rec = { REC, 6 };
	memset(out, 0, sizeof(*out));
	switch (type) {
	case RCKPT_MSG_APPEND: out->append = (rckpt_msg_append_t){ 7, rec, rec }; break;
	case RCKPT_MSG_MATERIALIZE: out->materialize = (rckpt_msg_materialize_t){ 5, 100, rec }; break;
	case RCKPT_MSG_MATERIALIZED: out->materialized = (rckpt_msg_materialized_t){ 5, 1, rec }; break;
	case RCKPT_MSG_TRIM: out->trim = (rckpt_msg_trim_t){ 7, 3 }; break;
	case RCKPT_MSG_COMMIT: out->commit = (rckpt_msg_commit_t){ 4, 5, rec, 7 }; break;
	case RCKPT_MSG_HEAD: out->head = (rckpt_msg_head_t){ 5, 6, rec }; break;
	case RCKPT_MSG_LIST: out->list = (rckpt_msg_list_t){ 3, 10 }; break;
	case RCKPT_MSG_STEPS: out->steps = (rckpt_msg_steps_t){ host(STEPSUMS, 2), 1 }; break;
	case RCKPT_MSG_INDEX: out->index = (rckpt_msg_index_t){ host(ENTRIES, 2) }; break;
	case RCKPT_MSG_COMPACT: out->compact = (rckpt_msg_compact_t){ 7, 30, host(KEEP, 2) }; break;
	case RCKPT_MSG_DROP: out->drop = (rckpt_msg_drop_t){ 7, host(DROP, 3) }; break;
	case RCKPT_MSG_PIN: out->pin = (rckpt_msg_pin_t){ 7, 5, 1 }; break;
	case RCKPT_MSG_VERIFIED: out->verified = (rckpt_msg_verified_t){ 4, 1000, 1, 3, -5, 9 }; break;
	case RCKPT_MSG_CLAIM: out->claim = (rckpt_msg_claim_t){ 3, 9, 1 }; break;
	case RCKPT_MSG_RETIRE: out->retire = (rckpt_msg_retire_t){ 7, 5, RCKPT_RETIRE_STEP }; break;
	case RCKPT_MSG_PUT: out->put = (rckpt_msg_put_t){ 7, 5, rec }; break;
	case RCKPT_MSG_VERIFY: out->verify = (rckpt_msg_verify_t){ 5 }; break;
	case RCKPT_MSG_REWIND: out->rewind = (rckpt_msg_rewind_t){ 7, 9, 5 }; break;
	case RCKPT_MSG_VERSION_REPLY:
		strcpy(out->version.plugin, "rckpt");
		out->version.major = 1;
		out->version.minor = 2;
		out->version.patch = 3;
		strcpy(out->version.built_for, "Ceph 18.2 reef");
		out->version.nformats = 2;
		strcpy(out->version.formats[0].name, "cls-wire");
		out->version.formats[0].min_version = 1;
		out->version.formats[0].max_version = 1;
		strcpy(out->version.formats[1].name, "store");
		out->version.formats[1].min_version = 1;
		out->version.formats[1].max_version = 3;
		break;
	case RCKPT_MSG_PCR_READ: out->pcr_read.k = 3; break;
	case RCKPT_MSG_PCR_PREFIX: out->pcr_prefix = (rckpt_msg_pcr_prefix_t){ 3, rec }; break;
	case RCKPT_MSG_PCR_IMAGES: out->pcr_images = (rckpt_msg_pcr_images_t){ 3, host(IDX, 3) }; break;
	case RCKPT_MSG_PCR_JPEGS: out->pcr_jpegs.jpegs = host(PCR_ENTRIES, 2); break;
	case RCKPT_MSG_PCR_STAT:
		out->pcr_stat = (rckpt_msg_pcr_stat_t){ 5, 512, 900, 3, 1 << 20, { 1000, 5000, 1 << 20 } };
		break;
	default: fail_msg("no example of type 0x%04x", type);
	}
}

/* A second valid example where one field has no other value the first
 * allows (a retire's kind); 0 when there is none. */
static int other_example(uint16_t type, msg_t *out)
{
	memset(out, 0, sizeof(*out));
	if (type != RCKPT_MSG_RETIRE)
		return 0;
	out->retire = (rckpt_msg_retire_t){ 7, RCKPT_STORE_NONE, RCKPT_RETIRE_CHUNK };
	return 1;
}

/* ---- this file's own writer: the table's layout, no checks ---- */

static void *fat(void *m, const rckpt_wire_field_t *f)
{
	return (uint8_t *)m + f->offset;
}

static uint64_t iget(const void *m, const rckpt_wire_field_t *f)
{
	const void *p = (const uint8_t *)m + f->offset;
	switch (f->kind) {
	case RCKPT_WF_U8: return *(const uint8_t *)p;
	case RCKPT_WF_U16: return *(const uint16_t *)p;
	case RCKPT_WF_U32: return *(const uint32_t *)p;
	case RCKPT_WF_I32: return (uint32_t) * (const int32_t *)p;
	default: return *(const uint64_t *)p;
	}
}

static void iset(void *m, const rckpt_wire_field_t *f, uint64_t v)
{
	switch (f->kind) {
	case RCKPT_WF_U8: *(uint8_t *)fat(m, f) = (uint8_t)v; break;
	case RCKPT_WF_U16: *(uint16_t *)fat(m, f) = (uint16_t)v; break;
	case RCKPT_WF_U32: *(uint32_t *)fat(m, f) = (uint32_t)v; break;
	case RCKPT_WF_I32: *(int32_t *)fat(m, f) = (int32_t)(uint32_t)v; break;
	default: *(uint64_t *)fat(m, f) = v;
	}
}

static void le(rckpt_buf_t *b, uint64_t v, unsigned n)
{
	while (n--) {
		assert_int_equal(rckpt_buf_put_u8(b, (uint8_t)v), 0);
		v >>= 8;
	}
}

static unsigned wid(const rckpt_wire_field_t *f)
{
	return f->width ? f->width : 4;
}

/* A string's bytes: up to its NUL, never past its capacity. */
static size_t str_len(const rckpt_wire_field_t *f, const void *m)
{
	const char *p = (const char *)m + f->offset;
	size_t n = 0;
	while (n <= f->max && p[n] != '\0')
		n++;
	return n;
}

static void tw_fields(rckpt_buf_t *b, const rckpt_wire_msg_t *d, const void *m, unsigned version)
{
	unsigned i, k;
	for (i = 0; i < d->nfields; i++) {
		const rckpt_wire_field_t *f = &d->fields[i];
		const void *p = (const uint8_t *)m + f->offset;
		if (f->since > version)
			continue;
		if (f->kind == RCKPT_WF_U8)
			le(b, iget(m, f), 1);
		else if (f->kind == RCKPT_WF_U16)
			le(b, iget(m, f), 2);
		else if (f->kind == RCKPT_WF_U32 || f->kind == RCKPT_WF_I32)
			le(b, iget(m, f), wid(f));
		else if (f->kind == RCKPT_WF_U64)
			le(b, iget(m, f), 8);
		else if (f->kind == RCKPT_WF_STR) {
			le(b, str_len(f, m), wid(f));
			assert_int_equal(rckpt_buf_append(b, p, str_len(f, m)), 0);
		} else if (f->kind == RCKPT_WF_BLOB) {
			const rckpt_blob_t *x = p;
			le(b, x->len, wid(f));
			assert_int_equal(rckpt_buf_append(b, x->p, x->len), 0);
		} else if (f->kind == RCKPT_WF_ARRAY) { /* one more than it holds, at most */
			uint64_t n = iget(m, &d->fields[f->count]);
			for (k = 0; k < n && k <= f->max; k++)
				tw_fields(b, f->elem,
					  (const uint8_t *)p + (size_t)(k < f->max ? k : k - 1) * f->elem->size, 1);
		} else {
			const rckpt_wire_list_t *l = p;
			le(b, l->n, wid(f));
			for (k = 0; k < l->n; k++)
				tw_fields(b, f->elem, (const uint8_t *)l->v + (size_t)k * f->elem->size, 1);
		}
	}
}

static void tw_frame(rckpt_buf_t *b, const rckpt_wire_msg_t *d, const void *m, unsigned version,
		     unsigned compat)
{
	size_t at;
	b->len = 0;
	le(b, RCKPT_WIRE_MAGIC, 2);
	le(b, version, 1);
	le(b, compat, 1);
	le(b, d->type, 2);
	le(b, 0, 2);
	at = b->len;
	le(b, 0, 4);
	tw_fields(b, d, m, version);
	rckpt_buf_set_u32(b, at, (uint32_t)(b->len - at - 4));
}

/* ---- comparing a host struct with a decoded one ---- */

static void same(const rckpt_wire_msg_t *d, const void *want, const void *got)
{
	unsigned i;
	for (i = 0; i < d->nfields; i++) {
		const rckpt_wire_field_t *f = &d->fields[i];
		const void *a = (const uint8_t *)want + f->offset, *g = (const uint8_t *)got + f->offset;
		if (f->kind == RCKPT_WF_STR) {
			assert_string_equal((const char *)a, (const char *)g);
		} else if (f->kind == RCKPT_WF_ARRAY) {
			uint64_t k, n = iget(want, &d->fields[f->count]);
			for (k = 0; k < n; k++)
				same(f->elem, (const uint8_t *)a + k * f->elem->size,
				     (const uint8_t *)g + k * f->elem->size);
		} else if (f->kind == RCKPT_WF_BLOB) {
			const rckpt_blob_t *x = a, *y = g;
			assert_int_equal(x->len, y->len);
			assert_true(x->len == 0 || memcmp(x->p, y->p, x->len) == 0);
		} else if (f->kind == RCKPT_WF_LIST) {
			const rckpt_wire_list_t *x = a, *y = g;
			rckpt_wire_cursor_t c;
			msg_t e;
			uint32_t k = 0;
			assert_int_equal(x->n, y->n);
			rckpt_wire_cursor_init(&c, f, y);
			while (rckpt_wire_cursor_next(&c, &e) == 1) {
				same(f->elem, (const uint8_t *)x->v + (size_t)k * f->elem->size, &e);
				k++;
			}
			assert_int_equal(k, x->n);
		} else if (iget(want, f) != iget(got, f)) {
			fail_msg("%s.%s: sent %llu, got %llu", d->name, f->name,
				 (unsigned long long)iget(want, f), (unsigned long long)iget(got, f));
		}
	}
}

/* The canary past a decoded struct. */
static int untouched(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++ != 0xa5)
			return 0;
	return 1;
}

static int zeroed(const void *m, size_t n)
{
	const uint8_t *p = m;
	while (n--)
		if (*p++)
			return 0;
	return 1;
}

/* m encodes to what this file writes, and decodes back field by field. */
static void round_trip(const rckpt_wire_msg_t *d, const void *m)
{
	rckpt_buf_t a = RCKPT_BUF_INIT, b = RCKPT_BUF_INIT;
	msg_t got;
	assert_int_equal(rckpt_wire_encode(&a, d, m), 0);
	tw_frame(&b, d, m, d->version, d->compat);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.p, b.p, a.len);
	memset(&got, 0xa5, sizeof(got));
	assert_int_equal(rckpt_wire_decode(d, &got, a.p, a.len), 0);
	assert_true(untouched((const uint8_t *)&got + d->size, sizeof(got) - d->size));
	same(d, m, &got);
	rckpt_buf_free(&a);
	rckpt_buf_free(&b);
}

/* m is refused on both sides: the encoder, and the decoder of the frame
 * this file writes (which leaves the struct zeroed). */
static void refused(const rckpt_wire_msg_t *d, const void *m, const char *what)
{
	rckpt_buf_t a = RCKPT_BUF_INIT;
	msg_t got;
	if (rckpt_wire_encode(&a, d, m) != -EINVAL)
		fail_msg("%s: the encoder took %s", d->name, what);
	tw_frame(&a, d, m, d->version, d->compat);
	memset(&got, 0xa5, sizeof(got));
	if (rckpt_wire_decode(d, &got, a.p, a.len) != -EBADMSG)
		fail_msg("%s: the decoder took %s", d->name, what);
	assert_true(zeroed(&got, d->size));
	if (!untouched((const uint8_t *)&got + d->size, sizeof(got) - d->size))
		fail_msg("%s: the decoder of %s wrote past its struct", d->name, what);
	rckpt_buf_free(&a);
}

/* What the kind and width can hold. */
static uint64_t kfull(const rckpt_wire_field_t *f)
{
	switch (f->kind) {
	case RCKPT_WF_U8: return UINT8_MAX;
	case RCKPT_WF_U16: return UINT16_MAX;
	case RCKPT_WF_U64: return UINT64_MAX;
	default: return wid(f) == 1 ? UINT8_MAX : wid(f) == 2 ? UINT16_MAX : UINT32_MAX;
	}
}

static uint64_t kmax(const rckpt_wire_field_t *f)
{
	return f->max ? f->max : kfull(f);
}

static size_t ksize(const rckpt_wire_field_t *f)
{
	switch (f->kind) {
	case RCKPT_WF_U8: return 1;
	case RCKPT_WF_U16: return 2;
	case RCKPT_WF_STR: return f->max + 1;
	case RCKPT_WF_ARRAY: return f->max * f->elem->size;
	case RCKPT_WF_U32:
	case RCKPT_WF_I32: return 4;
	case RCKPT_WF_U64: return 8;
	case RCKPT_WF_BLOB: return sizeof(rckpt_blob_t);
	default: return sizeof(rckpt_wire_list_t);
	}
}

/* Every message type has a table; its fields lie in its struct in order,
 * none overlapping, and no gap wider than alignment could hold a member
 * the table left out. */
static void check_table(const rckpt_wire_msg_t *d)
{
	size_t end = 0;
	unsigned i;
	assert_non_null(d->name);
	assert_true(d->nfields > 0 && d->size <= sizeof(msg_t));
	for (i = 0; i < d->nfields; i++) {
		const rckpt_wire_field_t *f = &d->fields[i];
		size_t n = ksize(f), align = f->kind == RCKPT_WF_STR ? 1 : f->kind == RCKPT_WF_ARRAY ? 8 : n;
		assert_true(f->offset >= end && f->offset - end < (align < 8 ? align : 8));
		end = f->offset + n;
		assert_true(f->min <= kmax(f));
		assert_true(f->width == 0 || f->width == 1 || f->width == 2 || f->width == 4);
		if (f->kind >= RCKPT_WF_U32 && f->kind != RCKPT_WF_U64 && f->kind != RCKPT_WF_ARRAY)
			assert_true(f->max <= kfull(f)); /* what its width carries */
		if (f->kind == RCKPT_WF_LIST)
			assert_true(f->elem->size <= ELEM_ROOM);
		/* a field of a later layout: an integer (its `absent` value) or a
		 * blob (empty) when a frame lacks it */
		assert_true(f->since <= 1 || f->kind == RCKPT_WF_U64 || (f->kind == RCKPT_WF_BLOB && !f->absent));
		assert_true(f->kind != RCKPT_WF_STR || f->max); /* a string has its capacity */
		if (f->kind == RCKPT_WF_ARRAY) /* counted by an integer before it */
			assert_true(f->count < i && d->fields[f->count].kind <= RCKPT_WF_U64);
		if (f->kind == RCKPT_WF_LIST || f->kind == RCKPT_WF_ARRAY)
			check_table(f->elem);
	}
	assert_true(d->size >= end && d->size - end < 8);
}

static void check_types(const rckpt_wire_msg_t *(*get)(uint16_t), uint16_t first, unsigned n,
			unsigned newest)
{
	uint16_t t;
	for (t = first; t < first + n; t++) {
		const rckpt_wire_msg_t *d = get(t);
		assert_non_null(d);
		assert_int_equal(d->type, t);
		assert_true(d->compat >= 1 && d->compat <= d->version && d->oldest <= d->version);
		assert_int_equal(d->newest, newest);
		check_table(d);
	}
	assert_null(get((uint16_t)(first - 1)));
	assert_null(get((uint16_t)(first + n)));
}

static void test_every_type_has_a_table(void **state)
{
	unsigned i, j;
	(void)state;
	assert_int_equal(rckpt_store_nmsgs, RCKPT_MSG_REWIND - RCKPT_MSG_APPEND + 1);
	check_types(rckpt_store_msg, RCKPT_MSG_APPEND, rckpt_store_nmsgs, RCKPT_STORE_WIRE_VERSION);
	assert_int_equal(rckpt_pcr_nmsgs, RCKPT_MSG_PCR_STAT - RCKPT_MSG_PCR_READ + 1);
	check_types(rckpt_pcr_msg, RCKPT_MSG_PCR_READ, rckpt_pcr_nmsgs, RCKPT_PCR_VERSION);
	assert_int_equal(rckpt_wire_version_desc.type, RCKPT_MSG_VERSION_REPLY);
	check_table(&rckpt_wire_version_desc);
	check_table(&rckpt_store_entry_desc);
	for (i = 0; all_msgs(i); i++)
		for (j = 0; j < i; j++)
			assert_string_not_equal(all_msgs(i)->name, all_msgs(j)->name);
}

/* Each field round-trips, with the example's value and with another the
 * table and the rule allow (its least, its most, one more). */
static void test_every_field_round_trips(void **state)
{
	unsigned i, k, c;
	(void)state;
	for (i = 0; all_msgs(i); i++) {
		const rckpt_wire_msg_t *d = all_msgs(i);
		msg_t m;
		example(d->type, &m);
		round_trip(d, &m);
		for (k = 0; k < d->nfields; k++) {
			const rckpt_wire_field_t *f = &d->fields[k];
			unsigned moved = 0;
			msg_t v = m;
			if (f->kind == RCKPT_WF_BLOB) {
				((rckpt_blob_t *)fat(&v, f))->len = 2; /* "re" */
				round_trip(d, &v);
				continue;
			}
			if (f->kind == RCKPT_WF_LIST) {
				((rckpt_wire_list_t *)fat(&v, f))->n -= 1;
				round_trip(d, &v);
				continue;
			}
			if (f->kind == RCKPT_WF_STR) {
				strcpy(fat(&v, f), "x-1");
				round_trip(d, &v);
				continue;
			}
			if (f->kind == RCKPT_WF_ARRAY) /* its count is a field of its own */
				continue;
			for (c = 0; c < 6; c++) {
				msg_t base = m;
				uint64_t x;
				if (c >= 3 && !other_example(d->type, &base))
					break;
				x = c % 3 == 0 ? f->min : c % 3 == 1 ? kmax(f) : iget(&base, f) + 1;
				v = base;
				iset(&v, f, x);
				if (x == iget(&base, f) || rckpt_wire_valid(d, &v))
					continue;
				round_trip(d, &v);
				moved++;
			}
			if (!moved)
				fail_msg("%s.%s: no second value to carry", d->name, f->name);
		}
	}
}

/* Each reserved value of element x's fields (x inside v), one at a
 * time: in a list's last element, where a step too large keeps the
 * order. */
static void refuse_elem(const rckpt_wire_msg_t *d, msg_t *v, const rckpt_wire_msg_t *e, uint8_t *x)
{
	unsigned k;
	for (k = 0; k < e->nfields; k++) {
		const rckpt_wire_field_t *g = &e->fields[k];
		uint8_t one[ELEM_ROOM];
		memcpy(one, x, e->size);
		if (g->kind == RCKPT_WF_STR) {
			((char *)fat(x, g))[0] = '\0';
			if (g->min)
				refused(d, v, g->name);
			strcpy(fat(x, g), "aR");
			refused(d, v, g->name);
		} else if (g->kind == RCKPT_WF_BLOB) {
			rckpt_blob_t *b = fat(x, g);
			if (g->min) {
				b->len = g->min - 1;
				refused(d, v, g->name);
			}
			if (g->max) {
				uint8_t *big = calloc(g->max + 1, 1);
				assert_non_null(big);
				b->p = big;
				b->len = g->max + 1;
				refused(d, v, g->name);
				free(big);
			}
		} else {
			if (g->min > 0) {
				iset(x, g, g->min - 1);
				refused(d, v, g->name);
			}
			memcpy(x, one, e->size);
			if (g->max && g->max < kfull(g)) {
				iset(x, g, g->max + 1);
				refused(d, v, g->name);
			}
		}
		memcpy(x, one, e->size);
	}
}

/* The values outside each field's range. */
static void refuse_range(const rckpt_wire_msg_t *d, const msg_t *m, const rckpt_wire_field_t *f)
{
	msg_t v = *m;
	char what[96];
	if (f->kind == RCKPT_WF_STR) {
		char *str = fat(&v, f);
		if (f->min > 0) {
			str[0] = '\0';
			refused(d, &v, "an empty string");
		}
		memset(str, 'a', f->max + 1); /* one past its most, no NUL in its room */
		refused(d, &v, "a string past its most");
		strcpy(str, (f->flags & RCKPT_WF_PRINTABLE) ? "a\x7f" : "aR");
		refused(d, &v, "a byte outside the alphabet");
		return;
	}
	if (f->kind == RCKPT_WF_ARRAY) { /* its count's range is its count field's */
		uint64_t n = iget(m, &d->fields[f->count]);
		assert_true(n > 0 && kmax(&d->fields[f->count]) <= f->max);
		refuse_elem(d, &v, f->elem, (uint8_t *)fat(&v, f) + (n - 1) * f->elem->size);
		return;
	}
	if (f->kind == RCKPT_WF_BLOB) {
		rckpt_blob_t *b = fat(&v, f);
		uint8_t *big;
		if (f->min > 0) {
			b->len = f->min - 1;
			refused(d, &v, "a blob under its least");
		}
		if (!f->max)
			return;
		big = calloc(f->max + 1, 1);
		assert_non_null(big);
		b->p = big;
		b->len = f->max + 1;
		snprintf(what, sizeof(what), "%s of %llu bytes", f->name, (unsigned long long)b->len);
		refused(d, &v, what);
		free(big);
		return;
	}
	if (f->min > 0) {
		iset(&v, f, f->min - 1);
		snprintf(what, sizeof(what), "%s = %llu", f->name, (unsigned long long)(f->min - 1));
		refused(d, &v, what);
	}
	if (kmax(f) < kfull(f)) {
		v = *m;
		iset(&v, f, kmax(f) + 1);
		snprintf(what, sizeof(what), "%s = %llu", f->name, (unsigned long long)(kmax(f) + 1));
		refused(d, &v, what);
	}
}

/* A list: too many elements, out of order, and each element field's
 * reserved values in its first element. */
static void refuse_list(const rckpt_wire_msg_t *d, const msg_t *m, const rckpt_wire_field_t *f)
{
	const rckpt_wire_msg_t *e = f->elem;
	rckpt_wire_list_t *l;
	msg_t v = *m;
	uint8_t *els;
	uint32_t n = ((const rckpt_wire_list_t *)fat((void *)m, f))->n, i;
	size_t cnt = f->max ? (size_t)f->max + 1 : n;

	els = calloc(cnt, e->size);
	assert_non_null(els);
	l = fat(&v, f);
	memcpy(els, l->v, (size_t)n * e->size);
	l->v = els;
	if (d->type == RCKPT_MSG_COMPACT) /* every step may be kept */
		v.compact.upto = RCKPT_STORE_NONE - 1;
	if (f->max) { /* max elements pass, max + 1 do not */
		for (i = 0; i < cnt; i++) {
			memcpy(els + (size_t)i * e->size, (const uint8_t *)((const rckpt_wire_list_t *)fat((void *)m, f))->v, e->size);
			iset(els + (size_t)i * e->size, &e->fields[0], i);
			assert_int_equal(rckpt_wire_valid(e, els + (size_t)i * e->size), 0);
		}
		l->n = (uint32_t)cnt - 1;
		round_trip(d, &v);
		l->n = (uint32_t)cnt;
		refused(d, &v, "a list past its most");
		memcpy(els, ((const rckpt_wire_list_t *)fat((void *)m, f))->v, (size_t)n * e->size);
		l->n = n;
	}
	if (f->flags & RCKPT_WF_SORTED) {
		memcpy(els, els + e->size, e->size); /* the first twice */
		refused(d, &v, "a list out of order");
		memcpy(els, ((const rckpt_wire_list_t *)fat((void *)m, f))->v, (size_t)n * e->size);
	}
	refuse_elem(d, &v, e, els + (size_t)(n - 1) * e->size);
	free(els);
}

static void test_reserved_values_refused(void **state)
{
	unsigned i, k;
	(void)state;
	for (i = 0; all_msgs(i); i++) {
		const rckpt_wire_msg_t *d = all_msgs(i);
		msg_t m;
		example(d->type, &m);
		for (k = 0; k < d->nfields; k++) {
			if (d->fields[k].kind == RCKPT_WF_LIST)
				refuse_list(d, &m, &d->fields[k]);
			else
				refuse_range(d, &m, &d->fields[k]);
		}
	}
}

/* What a message's rule refuses across its fields. */
static void test_rules_refuse(void **state)
{
	msg_t m;
	rckpt_msg_retire_t *r = &m.retire;
	rckpt_msg_claim_t *c = &m.claim;
	rckpt_msg_compact_t *k = &m.compact;
	rckpt_msg_verified_t *v = &m.verified;
	const uint64_t late[] = { 10, 31 };
	(void)state;

	example(RCKPT_MSG_RETIRE, &m);
	r->step = RCKPT_STORE_NONE;
	refused(rckpt_store_msg(RCKPT_MSG_RETIRE), &m, "a step's object with no step");
	r->kind = RCKPT_RETIRE_CHUNK;
	r->step = 5;
	refused(rckpt_store_msg(RCKPT_MSG_RETIRE), &m, "a chunk with a step");
	r->kind = RCKPT_RETIRE_JOB;
	r->step = RCKPT_STORE_NONE;
	r->token = 0;
	refused(rckpt_store_msg(RCKPT_MSG_RETIRE), &m, "the job with no token");

	example(RCKPT_MSG_CLAIM, &m);
	c->token = c->prev;
	refused(rckpt_store_msg(RCKPT_MSG_CLAIM), &m, "a token not past the one read");

	example(RCKPT_MSG_COMPACT, &m);
	k->keep = host(late, 2);
	refused(rckpt_store_msg(RCKPT_MSG_COMPACT), &m, "a kept step past upto");

	example(RCKPT_MSG_VERIFIED, &m);
	v->bad = v->records + 1;
	refused(rckpt_store_msg(RCKPT_MSG_VERIFIED), &m, "more bad records than checked");
	example(RCKPT_MSG_VERIFIED, &m);
	v->first_bad = RCKPT_STORE_NONE;
	refused(rckpt_store_msg(RCKPT_MSG_VERIFIED), &m, "a bad record with no step");
	v->bad = 0;
	v->first_bad = 3;
	refused(rckpt_store_msg(RCKPT_MSG_VERIFIED), &m, "a first bad step with none bad");
	example(RCKPT_MSG_VERIFIED, &m);
	v->error = 1;
	refused(rckpt_store_msg(RCKPT_MSG_VERIFIED), &m, "a positive error");

	/* k groups: 1..64 or all (0xFFFF) */
	example(RCKPT_MSG_PCR_READ, &m);
	m.pcr_read.k = 0;
	refused(rckpt_pcr_msg(RCKPT_MSG_PCR_READ), &m, "no group");
	m.pcr_read.k = RCKPT_PCR_MAX_GROUPS + 1;
	refused(rckpt_pcr_msg(RCKPT_MSG_PCR_READ), &m, "a group past the most");
	example(RCKPT_MSG_PCR_IMAGES, &m);
	m.pcr_images.k = RCKPT_PCR_GROUPS_ALL - 1;
	refused(rckpt_pcr_msg(RCKPT_MSG_PCR_IMAGES), &m, "a group past the most");

	/* an image's name is a file name of its own */
	{
		static const char *const bad[] = { ".", "..", "a/b", "a\nb" };
		rckpt_msg_pcr_entry_t e[2];
		unsigned i;
		for (i = 0; i < 4; i++) {
			memcpy(e, PCR_ENTRIES, sizeof(e));
			e[1].name = (rckpt_blob_t){ (const uint8_t *)bad[i], strlen(bad[i]) };
			example(RCKPT_MSG_PCR_JPEGS, &m);
			m.pcr_jpegs.jpegs = host(e, 2);
			refused(rckpt_pcr_msg(RCKPT_MSG_PCR_JPEGS), &m, bad[i]);
		}
	}

	example(RCKPT_MSG_VERSION_REPLY, &m);
	m.version.formats[1].min_version = 4;
	refused(&rckpt_wire_version_desc, &m, "a format's range backwards");
}

/* The reserved values store.md names, listed here apart from the tables
 * (a table that lost a limit fails here, not only in the spec). */
static const struct {
	uint16_t type;
	const char *field;
	uint64_t value; /* a blob's length */
} SPEC[] = {
	{ RCKPT_MSG_APPEND, "writer", 0 },
	{ RCKPT_MSG_MATERIALIZE, "step", RCKPT_STORE_NONE },
	{ RCKPT_MSG_MATERIALIZED, "done", 2 },
	{ RCKPT_MSG_TRIM, "writer", 0 },
	{ RCKPT_MSG_COMMIT, "step", RCKPT_STORE_NONE },
	{ RCKPT_MSG_COMMIT, "writer", 0 },
	{ RCKPT_MSG_COMMIT, "summary", RCKPT_STORE_SUMMARY_MAX + 1 },
	{ RCKPT_MSG_LIST, "max", 0 },
	{ RCKPT_MSG_LIST, "max", RCKPT_STORE_LIST_MAX + 1 },
	{ RCKPT_MSG_STEPS, "more", 2 },
	{ RCKPT_MSG_COMPACT, "upto", RCKPT_STORE_NONE },
	{ RCKPT_MSG_PIN, "step", RCKPT_STORE_NONE },
	{ RCKPT_MSG_PIN, "on", 2 },
	{ RCKPT_MSG_CLAIM, "token", 0 },
	{ RCKPT_MSG_CLAIM, "flags", 2 },
	{ RCKPT_MSG_RETIRE, "kind", 3 },
	{ RCKPT_MSG_PUT, "token", 0 },
	{ RCKPT_MSG_PUT, "step", RCKPT_STORE_NONE },
	{ RCKPT_MSG_PUT, "bytes", RCKPT_STORE_PUT_MAX + 1 },
	{ RCKPT_MSG_REWIND, "token", 0 },
	{ RCKPT_MSG_REWIND, "expect", RCKPT_STORE_NONE },
	{ RCKPT_MSG_REWIND, "step", RCKPT_STORE_NONE },
};

static void test_spec_reserved(void **state)
{
	unsigned i, k;
	(void)state;
	for (i = 0; i < sizeof(SPEC) / sizeof(SPEC[0]); i++) {
		const rckpt_wire_msg_t *d = rckpt_store_msg(SPEC[i].type);
		const rckpt_wire_field_t *f = NULL;
		uint8_t *big = NULL;
		char what[64];
		msg_t m;
		for (k = 0; k < d->nfields; k++)
			if (strcmp(d->fields[k].name, SPEC[i].field) == 0)
				f = &d->fields[k];
		if (f == NULL)
			fail_msg("%s has no field %s", d->name, SPEC[i].field);
		example(d->type, &m);
		if (f->kind == RCKPT_WF_BLOB) {
			big = calloc(SPEC[i].value, 1);
			assert_non_null(big);
			*(rckpt_blob_t *)fat(&m, f) = (rckpt_blob_t){ big, SPEC[i].value };
		} else {
			iset(&m, f, SPEC[i].value);
		}
		snprintf(what, sizeof(what), "%s = %llu", f->name, (unsigned long long)SPEC[i].value);
		refused(d, &m, what);
		free(big);
	}
}

/* The index entry: an omap value of exactly its bytes, and its rule. */
static void test_entry(void **state)
{
	uint8_t b[RCKPT_STORE_ENTRY_BYTES + 1];
	rckpt_store_entry_t e = ENTRIES[1], got;
	(void)state;
	assert_int_equal(rckpt_store_entry_put(b, &e), 0);
	assert_int_equal(rckpt_store_entry_get(&got, b, RCKPT_STORE_ENTRY_BYTES), 0);
	same(&rckpt_store_entry_desc, &e, &got);
	assert_int_equal(rckpt_store_entry_get(&got, b, RCKPT_STORE_ENTRY_BYTES - 1), -EBADMSG);
	assert_int_equal(rckpt_store_entry_get(&got, b, RCKPT_STORE_ENTRY_BYTES + 1), -EBADMSG);
	e.parent = RCKPT_STORE_NONE; /* a delta with no parent */
	assert_int_equal(rckpt_store_entry_put(b, &e), -EINVAL);
	e = ENTRIES[0];
	e.parent = 1; /* a base with one */
	assert_int_equal(rckpt_store_entry_put(b, &e), -EINVAL);
	e = ENTRIES[0];
	e.offset = RCKPT_STORE_OBJECT_MAX - 4; /* ends past the object's most */
	assert_int_equal(rckpt_store_entry_put(b, &e), -EINVAL);
	e = ENTRIES[0];
	e.kind = 0; /* kinds are 1 (base), 2, 3 */
	assert_int_equal(rckpt_store_entry_put(b, &e), -EINVAL);
	e.kind = 4;
	assert_int_equal(rckpt_store_entry_put(b, &e), -EINVAL);
	e = ENTRIES[0];
	e.step = RCKPT_STORE_NONE;
	assert_int_equal(rckpt_store_entry_put(b, &e), -EINVAL);
}

/* A frame of a layout older than the message's token is refused; a
 * frame no decoder of this version can read says so; a field a layout
 * added reads as its absent value from an older frame. */
static void test_layouts(void **state)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	unsigned i;
	msg_t m, got;
	(void)state;
	for (i = 0; all_msgs(i); i++) {
		const rckpt_wire_msg_t *d = all_msgs(i);
		example(d->type, &m);
		if (d->oldest > 1) {
			tw_frame(&b, d, &m, d->oldest - 1, d->oldest - 1);
			assert_int_equal(rckpt_wire_decode(d, &got, b.p, b.len), -EBADMSG);
		}
		tw_frame(&b, d, &m, d->newest + 1, d->newest + 1);
		assert_int_equal(rckpt_wire_decode(d, &got, b.p, b.len), RCKPT_FMT_EVERSION);
		tw_frame(&b, d, &m, d->newest + 1, d->compat); /* newer, readable: its tail skipped */
		assert_int_equal(rckpt_buf_put_u32(&b, 0xdeadbeef), 0);
		rckpt_buf_set_u32(&b, 8, (uint32_t)(b.len - RCKPT_WIRE_HEADER_BYTES));
		assert_int_equal(rckpt_wire_decode(d, &got, b.p, b.len), 0);
	}
	example(RCKPT_MSG_VERIFIED, &m);
	tw_frame(&b, rckpt_store_msg(RCKPT_MSG_VERIFIED), &m, 1, 1);
	assert_int_equal(rckpt_msg_verified_decode(&got.verified, b.p, b.len), 0);
	assert_true(got.verified.next == RCKPT_STORE_NONE);
	rckpt_buf_free(&b);
}

/* Every frame cut short (its length saying so) is refused; a frame with
 * a byte of its payload changed either is refused or decodes to what
 * encodes to the bytes it read (a count made smaller leaves a tail,
 * which a newer layout's fields may fill: skipped). */
static void test_cut_and_flipped(void **state)
{
	unsigned i, tried = 0, took = 0;
	(void)state;
	for (i = 0; all_msgs(i); i++) {
		const rckpt_wire_msg_t *d = all_msgs(i);
		rckpt_buf_t a = RCKPT_BUF_INIT, b = RCKPT_BUF_INIT;
		size_t k, n;
		msg_t m, got;
		unsigned bit;
		example(d->type, &m);
		assert_int_equal(rckpt_wire_encode(&a, d, &m), 0);
		n = a.len - RCKPT_WIRE_HEADER_BYTES;
		for (k = 0; k < n; k++) {
			rckpt_buf_set_u32(&a, 8, (uint32_t)k);
			if (rckpt_wire_decode(d, &got, a.p, RCKPT_WIRE_HEADER_BYTES + k) != -EBADMSG)
				fail_msg("%s: a payload cut to %zu of %zu bytes was taken", d->name, k, n);
		}
		rckpt_buf_set_u32(&a, 8, (uint32_t)n);
		for (k = RCKPT_WIRE_HEADER_BYTES; k < a.len; k++)
			for (bit = 0; bit < 8; bit += 3) {
				a.p[k] ^= (uint8_t)(1u << bit);
				tried++;
				if (rckpt_wire_decode(d, &got, a.p, a.len) == 0) {
					took++;
					b.len = 0;
					assert_int_equal(rckpt_wire_encode(&b, d, &got), 0);
					assert_true(b.len <= a.len);
					assert_memory_equal(b.p + RCKPT_WIRE_HEADER_BYTES, a.p + RCKPT_WIRE_HEADER_BYTES,
							    b.len - RCKPT_WIRE_HEADER_BYTES);
				}
				a.p[k] ^= (uint8_t)(1u << bit);
			}
		rckpt_buf_free(&a);
		rckpt_buf_free(&b);
	}
	assert_true(took > 0 && took < tried); /* both kinds were seen */
}

/* Every message has a golden vector, derived by hand from its spec
 * (tests/golden/: cls-wire-version-v1, store-NAME-vN, pcr-NAME-v1 for
 * its newest layout): it decodes, and its fields encode back to exactly
 * its bytes. (test_wire and the reference decoder check their fields.) */
static void test_golden_vectors(void **state)
{
	unsigned i;
	(void)state;
	for (i = 0; all_msgs(i); i++) {
		const rckpt_wire_msg_t *d = all_msgs(i);
		uint8_t want[1024];
		char file[64];
		rckpt_buf_t b = RCKPT_BUF_INIT;
		msg_t got;
		size_t n;
		if (d->type == RCKPT_MSG_VERSION_REPLY)
			snprintf(file, sizeof(file), "cls-wire-version-v1.hex");
		else if (strncmp(d->name, "pcr-", 4) == 0)
			snprintf(file, sizeof(file), "%s-v%u.hex", d->name, d->version);
		else
			snprintf(file, sizeof(file), "store-%s-v%u.hex", d->name, d->version);
		n = golden_hex(file, want, sizeof(want));
		if (n == 0)
			fail_msg("%s: no golden vector %s", d->name, file);
		if (rckpt_wire_decode(d, &got, want, n) != 0)
			fail_msg("%s: its golden vector does not decode", d->name);
		assert_int_equal(rckpt_wire_encode(&b, d, &got), 0);
		assert_int_equal(b.len, n);
		assert_memory_equal(b.p, want, n);
		rckpt_buf_free(&b);
	}
}

/* The one growable array under the codecs' buffers and lists. */
static void test_grow(void **state)
{
	uint64_t *a = NULL, *b;
	size_t cap = 0;
	(void)state;
	a = rckpt_grow(a, &cap, 1, sizeof(*a));
	assert_non_null(a);
	assert_int_equal(cap, 16);
	a[15] = 7;
	assert_ptr_equal(rckpt_grow(a, &cap, 16, sizeof(*a)), a); /* room enough: itself */
	b = rckpt_grow(a, &cap, 17, sizeof(*a));
	assert_non_null(b);
	assert_int_equal(cap, 32);
	assert_int_equal(b[15], 7); /* kept */
	a = b;
	assert_null(rckpt_grow(a, &cap, SIZE_MAX / 4, sizeof(*a))); /* past size_t: refused... */
	assert_int_equal(cap, 32);                                    /* ...and a still ours */
	a[31] = 1;
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_type_has_a_table),
		cmocka_unit_test(test_every_field_round_trips),
		cmocka_unit_test(test_reserved_values_refused),
		cmocka_unit_test(test_rules_refuse),
		cmocka_unit_test(test_spec_reserved),
		cmocka_unit_test(test_entry),
		cmocka_unit_test(test_layouts),
		cmocka_unit_test(test_cut_and_flipped),
		cmocka_unit_test(test_golden_vectors),
		cmocka_unit_test(test_grow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
