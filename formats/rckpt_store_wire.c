/*
 * rckpt_store_wire.c — store messages and omap values (formats/store.md),
 * each described once by a field table (rckpt_wire_fields.h); object names
 * in rckpt_store_names.c, a step's summary in rckpt_store_summary.c, its
 * attachment in rckpt_store_attach.c.
 */
#include "rckpt_store_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_wire.h"

#define STEP (RCKPT_STORE_NONE - 1) /* the most a step may be */
#define FLD(T, f, k) .name = #f, .offset = offsetof(T, f), .kind = RCKPT_WF_##k
#define COUNT(a) (uint8_t)(sizeof(a) / sizeof((a)[0]))
/* A message of layout `ver` written with compat `cmp`, refused below `old`. */
#define MSG(nm, T, ty, ver, cmp, old, fl, rl)                                             \
	{                                                                                 \
		.name = nm, .type = ty, .version = ver, .compat = cmp, .oldest = old,     \
		.newest = RCKPT_STORE_WIRE_VERSION, .size = sizeof(T), .nfields = COUNT(fl), \
		.fields = fl, .rule = rl                                                  \
	}
#define ELEM(nm, T, fl, rl) MSG(nm, T, 0, 0, 0, 0, fl, rl)

/* ---- list elements ---- */

static const rckpt_wire_field_t step_f[] = { { .name = "step", .kind = RCKPT_WF_U64, .max = STEP } };
static const rckpt_wire_msg_t step_desc = ELEM("step", uint64_t, step_f, NULL);

static int entry_rule(const void *m)
{
	const rckpt_store_entry_t *e = m;
	return e->length > RCKPT_STORE_OBJECT_MAX - e->offset ||
		       (e->kind == 1) != (e->parent == RCKPT_STORE_NONE) ? -EINVAL : 0;
}

static const rckpt_wire_field_t entry_f[] = {
	{ FLD(rckpt_store_entry_t, step, U64), .max = STEP },
	{ FLD(rckpt_store_entry_t, offset, U64), .max = RCKPT_STORE_OBJECT_MAX },
	{ FLD(rckpt_store_entry_t, length, U32) },
	{ FLD(rckpt_store_entry_t, kind, U8), .min = 1, .max = 3 },
	{ FLD(rckpt_store_entry_t, parent, U64) },
};
const rckpt_wire_msg_t rckpt_store_entry_desc = ELEM("entry", rckpt_store_entry_t, entry_f, entry_rule);

static const rckpt_wire_field_t stepsum_f[] = {
	{ FLD(rckpt_msg_stepsum_t, step, U64) },
	{ FLD(rckpt_msg_stepsum_t, summary, BLOB), .max = RCKPT_STORE_SUMMARY_MAX },
};
static const rckpt_wire_msg_t stepsum_desc = ELEM("stepsum", rckpt_msg_stepsum_t, stepsum_f, NULL);

/* ---- the messages ---- */

static const rckpt_wire_field_t append_f[] = {
	{ FLD(rckpt_msg_append_t, writer, U64), .min = 1 },
	{ FLD(rckpt_msg_append_t, record, BLOB) },
	{ FLD(rckpt_msg_append_t, head, BLOB), .since = RCKPT_STORE_HEAD_VERSION },
};
#define APPEND_V2_FIELDS 2 /* the first two: a frame without a head */

static const rckpt_wire_field_t materialize_f[] = {
	{ FLD(rckpt_msg_materialize_t, step, U64), .max = STEP },
	{ FLD(rckpt_msg_materialize_t, budget, U64) },
	{ FLD(rckpt_msg_materialize_t, start, BLOB) },
};

static const rckpt_wire_field_t materialized_f[] = {
	{ FLD(rckpt_msg_materialized_t, reached, U64) },
	{ FLD(rckpt_msg_materialized_t, done, U8), .max = 1 },
	{ FLD(rckpt_msg_materialized_t, record, BLOB) },
};

static const rckpt_wire_field_t trim_f[] = {
	{ FLD(rckpt_msg_trim_t, writer, U64), .min = 1 },
	{ FLD(rckpt_msg_trim_t, after, U64) },
};

static const rckpt_wire_field_t commit_f[] = {
	{ FLD(rckpt_msg_commit_t, expect, U64) },
	{ FLD(rckpt_msg_commit_t, step, U64), .max = STEP },
	{ FLD(rckpt_msg_commit_t, summary, BLOB), .max = RCKPT_STORE_SUMMARY_MAX },
	{ FLD(rckpt_msg_commit_t, writer, U64), .min = 1 },
};

static const rckpt_wire_field_t head_f[] = {
	{ FLD(rckpt_msg_head_t, head, U64) },
	{ FLD(rckpt_msg_head_t, count, U64) },
	{ FLD(rckpt_msg_head_t, summary, BLOB), .since = 2, .max = RCKPT_STORE_SUMMARY_MAX },
};

static const rckpt_wire_field_t list_f[] = {
	{ FLD(rckpt_msg_list_t, after, U64) },
	{ FLD(rckpt_msg_list_t, max, U32), .min = 1, .max = RCKPT_STORE_LIST_MAX },
};

static const rckpt_wire_field_t steps_f[] = {
	{ FLD(rckpt_msg_steps_t, steps, LIST), .max = RCKPT_STORE_LIST_MAX, .elem = &stepsum_desc },
	{ FLD(rckpt_msg_steps_t, more, U8), .max = 1 },
};

static const rckpt_wire_field_t index_f[] = {
	{ FLD(rckpt_msg_index_t, entries, LIST), .flags = RCKPT_WF_SORTED,
	  .elem = &rckpt_store_entry_desc },
};

/* compact: every kept step <= upto (the set is increasing: its last). */
static int compact_rule(const void *m)
{
	const rckpt_msg_compact_t *c = m;
	return c->keep.n && rckpt_stepset_at(&c->keep, c->keep.n - 1) > c->upto ? -EINVAL : 0;
}

static const rckpt_wire_field_t compact_f[] = {
	{ FLD(rckpt_msg_compact_t, token, U64) },
	{ FLD(rckpt_msg_compact_t, upto, U64), .max = STEP },
	{ FLD(rckpt_msg_compact_t, keep, LIST), .flags = RCKPT_WF_SORTED,
	  .max = RCKPT_STORE_STEPSET_MAX, .elem = &step_desc },
};

static const rckpt_wire_field_t drop_f[] = {
	{ FLD(rckpt_msg_drop_t, token, U64) },
	{ FLD(rckpt_msg_drop_t, steps, LIST), .flags = RCKPT_WF_SORTED,
	  .max = RCKPT_STORE_STEPSET_MAX, .elem = &step_desc },
};

static const rckpt_wire_field_t pin_f[] = {
	{ FLD(rckpt_msg_pin_t, token, U64) },
	{ FLD(rckpt_msg_pin_t, step, U64), .max = STEP },
	{ FLD(rckpt_msg_pin_t, on, U8), .max = 1 },
};

static int claim_rule(const void *m)
{
	const rckpt_msg_claim_t *c = m;
	return c->token <= c->prev ? -EINVAL : 0;
}

static const rckpt_wire_field_t claim_f[] = {
	{ FLD(rckpt_msg_claim_t, prev, U64) },
	{ FLD(rckpt_msg_claim_t, token, U64), .min = 1 },
	{ FLD(rckpt_msg_claim_t, flags, U8), .max = RCKPT_CLAIM_DELETE },
};

/* retire: a step's object names its step, a chunk or the job none; the
 * job only for the token that claimed it for deletion. */
static int retire_rule(const void *m)
{
	const rckpt_msg_retire_t *r = m;
	return (r->kind == RCKPT_RETIRE_STEP) == (r->step == RCKPT_STORE_NONE) ||
		       (r->kind == RCKPT_RETIRE_JOB && r->token == 0) ? -EINVAL : 0;
}

static const rckpt_wire_field_t retire_f[] = {
	{ FLD(rckpt_msg_retire_t, token, U64) },
	{ FLD(rckpt_msg_retire_t, step, U64) },
	{ FLD(rckpt_msg_retire_t, kind, U8), .max = RCKPT_RETIRE_JOB },
};

static const rckpt_wire_field_t put_f[] = {
	{ FLD(rckpt_msg_put_t, token, U64), .min = 1 },
	{ FLD(rckpt_msg_put_t, step, U64), .max = STEP },
	{ FLD(rckpt_msg_put_t, bytes, BLOB), .max = RCKPT_STORE_PUT_MAX },
};

static const rckpt_wire_field_t verify_f[] = {
	{ FLD(rckpt_msg_verify_t, after, U64) },
};

/* verified: a bad count within the records, a first bad step exactly
 * when there is one, an error that is an error. */
static int verified_rule(const void *m)
{
	const rckpt_msg_verified_t *v = m;
	return v->bad > v->records || (v->bad == 0) != (v->first_bad == RCKPT_STORE_NONE) ||
		       v->error > 0 ? -EINVAL : 0;
}

/* Version 2 (compat 1) added `next` after the version-1 fields, which a
 * version-1 decoder reads and skips past; a version-1 reply (a plugin
 * that checks a chunk whole) decodes with next = RCKPT_STORE_NONE. */
static const rckpt_wire_field_t verified_f[] = {
	{ FLD(rckpt_msg_verified_t, records, U32) },
	{ FLD(rckpt_msg_verified_t, bytes, U64) },
	{ FLD(rckpt_msg_verified_t, bad, U32) },
	{ FLD(rckpt_msg_verified_t, first_bad, U64) },
	{ FLD(rckpt_msg_verified_t, error, I32) },
	{ FLD(rckpt_msg_verified_t, next, U64), .since = 2, .absent = RCKPT_STORE_NONE },
};

static const rckpt_wire_field_t rewind_f[] = {
	{ FLD(rckpt_msg_rewind_t, token, U64), .min = 1 },
	{ FLD(rckpt_msg_rewind_t, expect, U64), .max = STEP },
	{ FLD(rckpt_msg_rewind_t, step, U64), .max = STEP },
};

/* Layouts: 1 unless the message carries a token (store.md "Fencing"):
 * APPEND and TRIM since 2, CLAIM, COMPACT, DROP, PIN, RETIRE, PUT and
 * REWIND since 3, each refusing an older frame. */
#define F2 RCKPT_STORE_FENCED_VERSION
#define F3 RCKPT_STORE_FENCED3_VERSION
static const rckpt_wire_msg_t append_d =
	MSG("append", rckpt_msg_append_t, RCKPT_MSG_APPEND, RCKPT_STORE_HEAD_VERSION, F2, F2, append_f, NULL);
/* An append without a head is written as layout 2, as before. */
static const rckpt_wire_msg_t append_v2_d = {
	.name = "append", .type = RCKPT_MSG_APPEND, .version = F2, .compat = F2, .oldest = F2,
	.newest = RCKPT_STORE_WIRE_VERSION, .size = sizeof(rckpt_msg_append_t), .nfields = APPEND_V2_FIELDS,
	.fields = append_f, .rule = NULL
};
static const rckpt_wire_msg_t materialize_d = MSG("materialize", rckpt_msg_materialize_t,
						  RCKPT_MSG_MATERIALIZE, 1, 1, 1, materialize_f, NULL);
static const rckpt_wire_msg_t materialized_d = MSG("materialized", rckpt_msg_materialized_t,
						   RCKPT_MSG_MATERIALIZED, 1, 1, 1, materialized_f, NULL);
static const rckpt_wire_msg_t trim_d = MSG("trim", rckpt_msg_trim_t, RCKPT_MSG_TRIM, F2, F2, F2, trim_f, NULL);
static const rckpt_wire_msg_t commit_d =
	MSG("commit", rckpt_msg_commit_t, RCKPT_MSG_COMMIT, 1, 1, 1, commit_f, NULL);
static const rckpt_wire_msg_t head_d = MSG("head", rckpt_msg_head_t, RCKPT_MSG_HEAD, 2, 1, 1, head_f, NULL);
static const rckpt_wire_msg_t list_d = MSG("list", rckpt_msg_list_t, RCKPT_MSG_LIST, 1, 1, 1, list_f, NULL);
static const rckpt_wire_msg_t steps_d = MSG("steps", rckpt_msg_steps_t, RCKPT_MSG_STEPS, 1, 1, 1, steps_f, NULL);
static const rckpt_wire_msg_t index_d = MSG("index", rckpt_msg_index_t, RCKPT_MSG_INDEX, 1, 1, 1, index_f, NULL);
static const rckpt_wire_msg_t compact_d =
	MSG("compact", rckpt_msg_compact_t, RCKPT_MSG_COMPACT, F3, F3, F3, compact_f, compact_rule);
static const rckpt_wire_msg_t drop_d = MSG("drop", rckpt_msg_drop_t, RCKPT_MSG_DROP, F3, F3, F3, drop_f, NULL);
static const rckpt_wire_msg_t pin_d = MSG("pin", rckpt_msg_pin_t, RCKPT_MSG_PIN, F3, F3, F3, pin_f, NULL);
static const rckpt_wire_msg_t verified_d = MSG("verified", rckpt_msg_verified_t, RCKPT_MSG_VERIFIED, 2,
					       1, 1, verified_f, verified_rule);
static const rckpt_wire_msg_t claim_d =
	MSG("claim", rckpt_msg_claim_t, RCKPT_MSG_CLAIM, F3, F3, F3, claim_f, claim_rule);
static const rckpt_wire_msg_t retire_d =
	MSG("retire", rckpt_msg_retire_t, RCKPT_MSG_RETIRE, F3, F3, F3, retire_f, retire_rule);
static const rckpt_wire_msg_t put_d = MSG("put", rckpt_msg_put_t, RCKPT_MSG_PUT, F3, F3, F3, put_f, NULL);
static const rckpt_wire_msg_t verify_d = MSG("verify", rckpt_msg_verify_t, RCKPT_MSG_VERIFY, 1, 1, 1, verify_f, NULL);
static const rckpt_wire_msg_t rewind_d =
	MSG("rewind", rckpt_msg_rewind_t, RCKPT_MSG_REWIND, F3, F3, F3, rewind_f, NULL);

/* In type order (0x0101 up). */
const rckpt_wire_msg_t *const rckpt_store_msgs[] = {
	&append_d, &materialize_d, &materialized_d, &trim_d,  &commit_d,  &head_d,
	&list_d,   &steps_d,       &index_d,        &compact_d, &drop_d,  &pin_d,
	&verified_d, &claim_d,     &retire_d,       &put_d,   &verify_d,  &rewind_d,
};
const unsigned rckpt_store_nmsgs = COUNT(rckpt_store_msgs);

const rckpt_wire_msg_t *rckpt_store_msg(uint16_t type)
{
	unsigned i = (unsigned)type - RCKPT_MSG_APPEND;
	return type >= RCKPT_MSG_APPEND && i < rckpt_store_nmsgs ? rckpt_store_msgs[i] : NULL;
}

/* ---- each message with its own arguments ---- */

#define STRUCT_CODEC(nm)                                                                           \
	int rckpt_msg_##nm##_encode(rckpt_buf_t *out, const rckpt_msg_##nm##_t *m)                \
	{                                                                                          \
		return rckpt_wire_encode(out, &nm##_d, m);                                         \
	}                                                                                          \
	int rckpt_msg_##nm##_decode(rckpt_msg_##nm##_t *m, const uint8_t *src, size_t len)        \
	{                                                                                          \
		return rckpt_wire_decode(&nm##_d, m, src, len);                                    \
	}

STRUCT_CODEC(materialize)
STRUCT_CODEC(materialized)
STRUCT_CODEC(commit)
STRUCT_CODEC(head)
STRUCT_CODEC(list)
STRUCT_CODEC(retire)
STRUCT_CODEC(rewind)
STRUCT_CODEC(verified)

int rckpt_msg_append_encode(rckpt_buf_t *out, uint64_t writer, const uint8_t *record, size_t len)
{
	rckpt_msg_append_t m = { writer, { record, len }, { NULL, 0 } };
	return rckpt_wire_encode(out, &append_v2_d, &m);
}

int rckpt_msg_append_head_encode(rckpt_buf_t *out, const rckpt_msg_append_t *m)
{
	if (m->head.len == 0)
		return rckpt_msg_append_encode(out, m->writer, m->record.p, m->record.len);
	return rckpt_wire_encode(out, &append_d, m);
}

int rckpt_msg_append_decode(rckpt_msg_append_t *m, const uint8_t *src, size_t len)
{
	return rckpt_wire_decode(&append_d, m, src, len);
}

int rckpt_msg_trim_encode(rckpt_buf_t *out, uint64_t writer, uint64_t after)
{
	rckpt_msg_trim_t m = { writer, after };
	return rckpt_wire_encode(out, &trim_d, &m);
}

int rckpt_msg_trim_decode(uint64_t *writer, uint64_t *after, const uint8_t *src, size_t len)
{
	rckpt_msg_trim_t m;
	int rc = rckpt_wire_decode(&trim_d, &m, src, len);
	*writer = m.writer;
	*after = m.after;
	return rc;
}

int rckpt_msg_put_encode(rckpt_buf_t *out, uint64_t token, uint64_t step, const uint8_t *bytes,
			 size_t len)
{
	rckpt_msg_put_t m = { token, step, { bytes, len } };
	return rckpt_wire_encode(out, &put_d, &m);
}

int rckpt_msg_put_decode(uint64_t *token, uint64_t *step, rckpt_blob_t *bytes, const uint8_t *src,
			 size_t len)
{
	rckpt_msg_put_t m;
	int rc = rckpt_wire_decode(&put_d, &m, src, len);
	*token = m.token;
	*step = m.step;
	*bytes = m.bytes;
	return rc;
}

static rckpt_stepset_t host_steps(const uint64_t *v, uint32_t n)
{
	rckpt_stepset_t s = { NULL, 0, v, n };
	return s;
}

uint64_t rckpt_stepset_at(const rckpt_stepset_t *s, uint32_t i)
{
	if (s->v)
		return ((const uint64_t *)s->v)[i];
	return (uint64_t)rckpt_le32(s->p + 8 * (size_t)i) |
	       (uint64_t)rckpt_le32(s->p + 8 * (size_t)i + 4) << 32;
}

int rckpt_msg_compact_encode(rckpt_buf_t *out, uint64_t token, uint64_t upto, const uint64_t *keep,
			     uint32_t n)
{
	rckpt_msg_compact_t m = { token, upto, host_steps(keep, n) };
	return rckpt_wire_encode(out, &compact_d, &m);
}

int rckpt_msg_compact_decode(rckpt_msg_compact_t *m, const uint8_t *src, size_t len)
{
	return rckpt_wire_decode(&compact_d, m, src, len);
}

int rckpt_msg_drop_encode(rckpt_buf_t *out, uint64_t token, const uint64_t *steps, uint32_t n)
{
	rckpt_msg_drop_t m = { token, host_steps(steps, n) };
	return rckpt_wire_encode(out, &drop_d, &m);
}

int rckpt_msg_drop_decode(uint64_t *token, rckpt_stepset_t *s, const uint8_t *src, size_t len)
{
	rckpt_msg_drop_t m;
	int rc = rckpt_wire_decode(&drop_d, &m, src, len);
	*token = m.token;
	*s = m.steps;
	return rc;
}

int rckpt_msg_pin_encode(rckpt_buf_t *out, uint64_t token, uint64_t step, int on)
{
	rckpt_msg_pin_t m = { token, step, (uint8_t)on };
	if (on != 0 && on != 1)
		return -EINVAL;
	return rckpt_wire_encode(out, &pin_d, &m);
}

int rckpt_msg_pin_decode(uint64_t *token, uint64_t *step, int *on, const uint8_t *src, size_t len)
{
	rckpt_msg_pin_t m;
	int rc = rckpt_wire_decode(&pin_d, &m, src, len);
	*token = m.token;
	*step = m.step;
	*on = m.on;
	return rc;
}

int rckpt_msg_claim_encode(rckpt_buf_t *out, uint64_t prev, uint64_t token, unsigned flags)
{
	rckpt_msg_claim_t m = { prev, token, (uint8_t)flags };
	if (flags > UINT8_MAX)
		return -EINVAL;
	return rckpt_wire_encode(out, &claim_d, &m);
}

int rckpt_msg_claim_decode(uint64_t *prev, uint64_t *token, unsigned *flags, const uint8_t *src,
			   size_t len)
{
	rckpt_msg_claim_t m;
	int rc = rckpt_wire_decode(&claim_d, &m, src, len);
	*prev = m.prev;
	*token = m.token;
	*flags = m.flags;
	return rc;
}

int rckpt_msg_verify_encode(rckpt_buf_t *out, uint64_t after)
{
	rckpt_msg_verify_t m = { after };
	return rckpt_wire_encode(out, &verify_d, &m);
}

/* An empty input is "from the first" too. */
int rckpt_msg_verify_decode(uint64_t *after, const uint8_t *src, size_t len)
{
	rckpt_msg_verify_t m;
	int rc;
	*after = RCKPT_STORE_NONE;
	if (len == 0)
		return 0;
	rc = rckpt_wire_decode(&verify_d, &m, src, len);
	if (rc == 0)
		*after = m.after;
	return rc;
}

/* ---- the steps reply, written a step at a time ---- */

void rckpt_msg_stepsum_begin(rckpt_msg_steps_writer_t *w, rckpt_buf_t *out)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->err = rckpt_wire_begin(out, &steps_d, &w->header_at);
	w->count_at = out->len;
	if (!w->err)
		w->err = rckpt_buf_put_u32(out, 0);
}

void rckpt_msg_stepsum_add(rckpt_msg_steps_writer_t *w, uint64_t step, const uint8_t *summary,
			   size_t len)
{
	rckpt_msg_stepsum_t x = { step, { summary, len } };
	if (w->err)
		return;
	if (w->n >= steps_f[0].max) {
		w->err = -EINVAL;
		return;
	}
	w->err = rckpt_wire_encode(w->out, &stepsum_desc, &x);
	w->n++;
}

int rckpt_msg_stepsum_end(rckpt_msg_steps_writer_t *w, int more)
{
	rckpt_msg_steps_t m = { { NULL, 0, NULL, 0 }, more ? 1 : 0 };
	if (!w->err)
		w->err = rckpt_wire_put_field(w->out, &steps_f[1], &m);
	if (!w->err)
		rckpt_buf_set_u32(w->out, w->count_at, w->n);
	return rckpt_frame_buf_end(w->out, w->header_at, w->err);
}

int rckpt_msg_stepsum_open(rckpt_msg_stepsum_reader_t *r, const uint8_t *src, size_t len)
{
	rckpt_msg_steps_t m;
	int rc = rckpt_wire_decode(&steps_d, &m, src, len);
	memset(r, 0, sizeof(*r));
	if (rc)
		return rc;
	rckpt_wire_cursor_init(&r->c, &steps_f[0], &m.steps);
	r->more = m.more;
	return 0;
}

int rckpt_msg_stepsum_next(rckpt_msg_stepsum_reader_t *r, uint64_t *step, rckpt_blob_t *summary)
{
	rckpt_msg_stepsum_t x;
	int rc = rckpt_wire_cursor_next(&r->c, &x);
	if (rc == 1) {
		*step = x.step;
		*summary = x.summary;
	}
	return rc;
}

/* ---- the chunk index ---- */

int rckpt_store_entry_put(uint8_t out[RCKPT_STORE_ENTRY_BYTES], const rckpt_store_entry_t *e)
{
	rckpt_buf_t b = { out, 0, RCKPT_STORE_ENTRY_BYTES, RCKPT_STORE_ENTRY_BYTES };
	return rckpt_wire_encode(&b, &rckpt_store_entry_desc, e);
}

int rckpt_store_entry_get(rckpt_store_entry_t *e, const uint8_t *src, size_t len)
{
	return rckpt_wire_decode(&rckpt_store_entry_desc, e, src, len);
}

int rckpt_msg_index_encode(rckpt_buf_t *out, const rckpt_store_entry_t *e, uint32_t n)
{
	rckpt_msg_index_t m = { { NULL, 0, e, n } };
	return rckpt_wire_encode(out, &index_d, &m);
}

int rckpt_msg_index_decode(rckpt_store_entry_t **e, uint32_t *n, const uint8_t *src, size_t len)
{
	rckpt_msg_index_t m;
	rckpt_wire_cursor_t c;
	uint32_t i = 0;
	int rc = rckpt_wire_decode(&index_d, &m, src, len);
	*e = NULL;
	*n = 0;
	if (rc)
		return rc;
	*e = calloc(m.entries.n ? m.entries.n : 1, sizeof(**e));
	if (*e == NULL)
		return -ENOMEM;
	rckpt_wire_cursor_init(&c, &index_f[0], &m.entries);
	while (rckpt_wire_cursor_next(&c, &(*e)[i]) == 1)
		i++;
	*n = i;
	return 0;
}
