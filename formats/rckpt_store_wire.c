/*
 * rckpt_store_wire.c — store messages and omap values (formats/store.md);
 * object names in rckpt_store_names.c, a step's summary in
 * rckpt_store_summary.c, its attachment in rckpt_store_attach.c.
 */
#include "rckpt_store_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_wire.h"

/* ---- framing into a growable buffer ---- */

static int put(rckpt_buf_t *b, const void *p, size_t n)
{
	return n ? rckpt_buf_append(b, p, n) : 0;
}

static int put_u8(rckpt_buf_t *b, uint8_t v)
{
	return rckpt_buf_put_u8(b, v);
}

static int put_u32(rckpt_buf_t *b, uint32_t v)
{
	return rckpt_buf_put_u32(b, v);
}

static int put_u64(rckpt_buf_t *b, uint64_t v)
{
	return rckpt_buf_put_u64(b, v);
}

/* A frame header with a zero length; returns 0 and its offset in *at.
 * Version 1 (compat 1), or the fenced layout (version and compat 2: an
 * older plugin refuses it rather than run it unfenced). */
static int begin(rckpt_buf_t *b, uint16_t type, size_t *at)
{
	return rckpt_frame_buf_begin(b, type, 1, 1, at);
}

static int begin_fenced(rckpt_buf_t *b, uint16_t type, size_t *at)
{
	return rckpt_frame_buf_begin(b, type, RCKPT_STORE_FENCED_VERSION, RCKPT_STORE_FENCED_VERSION,
				     at);
}

static int begin_fenced3(rckpt_buf_t *b, uint16_t type, size_t *at)
{
	return rckpt_frame_buf_begin(b, type, RCKPT_STORE_FENCED3_VERSION, RCKPT_STORE_FENCED3_VERSION,
				     at);
}

static int end(rckpt_buf_t *b, size_t at, int rc)
{
	return rckpt_frame_buf_end(b, at, rc);
}

static int open_frame(rckpt_reader_t *r, const uint8_t *src, size_t len, uint16_t type)
{
	rckpt_frame_t f;
	int rc = rckpt_frame_open(&f, src, len, type, RCKPT_STORE_WIRE_VERSION);
	if (rc)
		return rc;
	*r = rckpt_reader(f.payload, f.len);
	return 0;
}

/* A message that must carry a token: a frame of a layout older than
 * `oldest` (an unfenced actor's) is refused. */
static int open_since(rckpt_reader_t *r, const uint8_t *src, size_t len, uint16_t type,
		      unsigned oldest)
{
	rckpt_frame_t f;
	int rc = rckpt_frame_open(&f, src, len, type, RCKPT_STORE_WIRE_VERSION);
	if (rc)
		return rc;
	if (f.version < oldest)
		return -EBADMSG;
	*r = rckpt_reader(f.payload, f.len);
	return 0;
}

static int open_fenced(rckpt_reader_t *r, const uint8_t *src, size_t len, uint16_t type)
{
	return open_since(r, src, len, type, RCKPT_STORE_FENCED_VERSION);
}

static int open_fenced3(rckpt_reader_t *r, const uint8_t *src, size_t len, uint16_t type)
{
	return open_since(r, src, len, type, RCKPT_STORE_FENCED3_VERSION);
}

/* A u32-length-prefixed blob. */
static void rd_blob(rckpt_reader_t *r, rckpt_blob_t *b)
{
	uint32_t n = rckpt_rd_u32(r);
	b->p = rckpt_rd_bytes(r, n);
	b->len = b->p ? n : 0;
}

static int put_blob(rckpt_buf_t *b, const rckpt_blob_t *x)
{
	int rc;
	if (x->len > UINT32_MAX)
		return -EINVAL;
	rc = put_u32(b, (uint32_t)x->len);
	return rc ? rc : put(b, x->p, x->len);
}

/* ---- append ---- */

int rckpt_msg_append_encode(rckpt_buf_t *out, uint64_t writer, const uint8_t *record, size_t len)
{
	rckpt_blob_t x = { record, len };
	size_t at;
	int rc;
	if (writer == 0)
		return -EINVAL;
	rc = begin_fenced(out, RCKPT_MSG_APPEND, &at);
	if (!rc)
		rc = put_u64(out, writer);
	return end(out, at, rc ? rc : put_blob(out, &x));
}

int rckpt_msg_append_decode(uint64_t *writer, rckpt_blob_t *record, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_fenced(&r, src, len, RCKPT_MSG_APPEND);
	memset(record, 0, sizeof(*record));
	*writer = 0;
	if (rc)
		return rc;
	*writer = rckpt_rd_u64(&r);
	rd_blob(&r, record);
	if (r.err || *writer == 0) {
		memset(record, 0, sizeof(*record));
		*writer = 0;
		return -EBADMSG;
	}
	return 0;
}

/* Two u64 fields of a fenced message, the first a nonzero token. */
static int fenced2_encode(rckpt_buf_t *out, uint16_t type, uint64_t a, uint64_t b)
{
	size_t at;
	int rc = begin_fenced(out, type, &at);
	if (!rc)
		rc = put_u64(out, a);
	if (!rc)
		rc = put_u64(out, b);
	return end(out, at, rc);
}

static int fenced2_decode(uint64_t *a, uint64_t *b, const uint8_t *src, size_t len, uint16_t type)
{
	rckpt_reader_t r;
	int rc = open_fenced(&r, src, len, type);
	*a = *b = 0;
	if (rc)
		return rc;
	*a = rckpt_rd_u64(&r);
	*b = rckpt_rd_u64(&r);
	if (r.err) {
		*a = *b = 0;
		return -EBADMSG;
	}
	return 0;
}

/* ---- materialize ---- */

int rckpt_msg_materialize_encode(rckpt_buf_t *out, const rckpt_msg_materialize_t *m)
{
	size_t at;
	int rc = begin(out, RCKPT_MSG_MATERIALIZE, &at);
	if (!rc)
		rc = put_u64(out, m->step);
	if (!rc)
		rc = put_u64(out, m->budget);
	if (!rc)
		rc = put_blob(out, &m->start);
	return end(out, at, rc);
}

int rckpt_msg_materialize_decode(rckpt_msg_materialize_t *m, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_frame(&r, src, len, RCKPT_MSG_MATERIALIZE);
	memset(m, 0, sizeof(*m));
	if (rc)
		return rc;
	m->step = rckpt_rd_u64(&r);
	m->budget = rckpt_rd_u64(&r);
	rd_blob(&r, &m->start);
	if (r.err || m->step == RCKPT_STORE_NONE) {
		memset(m, 0, sizeof(*m));
		return -EBADMSG;
	}
	return 0;
}

int rckpt_msg_materialized_encode(rckpt_buf_t *out, const rckpt_msg_materialized_t *m)
{
	size_t at;
	int rc = begin(out, RCKPT_MSG_MATERIALIZED, &at);
	if (!rc)
		rc = put_u64(out, m->reached);
	if (!rc)
		rc = put_u8(out, m->done ? 1 : 0);
	if (!rc)
		rc = put_blob(out, &m->record);
	return end(out, at, rc);
}

int rckpt_msg_materialized_decode(rckpt_msg_materialized_t *m, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_frame(&r, src, len, RCKPT_MSG_MATERIALIZED);
	memset(m, 0, sizeof(*m));
	if (rc)
		return rc;
	m->reached = rckpt_rd_u64(&r);
	m->done = rckpt_rd_u8(&r);
	rd_blob(&r, &m->record);
	if (r.err || m->done > 1) {
		memset(m, 0, sizeof(*m));
		return -EBADMSG;
	}
	return 0;
}

/* ---- trim ---- */

int rckpt_msg_trim_encode(rckpt_buf_t *out, uint64_t writer, uint64_t after)
{
	return writer ? fenced2_encode(out, RCKPT_MSG_TRIM, writer, after) : -EINVAL;
}

int rckpt_msg_trim_decode(uint64_t *writer, uint64_t *after, const uint8_t *src, size_t len)
{
	int rc = fenced2_decode(writer, after, src, len, RCKPT_MSG_TRIM);
	if (rc == 0 && *writer == 0) {
		*after = 0;
		return -EBADMSG;
	}
	return rc;
}

/* ---- retire, put ---- */

int rckpt_msg_retire_encode(rckpt_buf_t *out, const rckpt_msg_retire_t *m)
{
	size_t at;
	int rc;
	if (m->kind > RCKPT_RETIRE_JOB || (m->kind == RCKPT_RETIRE_STEP) == (m->step == RCKPT_STORE_NONE) ||
	    (m->kind == RCKPT_RETIRE_JOB && m->token == 0))
		return -EINVAL;
	rc = begin_fenced3(out, RCKPT_MSG_RETIRE, &at);
	if (!rc)
		rc = put_u64(out, m->token);
	if (!rc)
		rc = put_u64(out, m->step);
	if (!rc)
		rc = put_u8(out, m->kind);
	return end(out, at, rc);
}

int rckpt_msg_retire_decode(rckpt_msg_retire_t *m, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_fenced3(&r, src, len, RCKPT_MSG_RETIRE);
	memset(m, 0, sizeof(*m));
	if (rc)
		return rc;
	m->token = rckpt_rd_u64(&r);
	m->step = rckpt_rd_u64(&r);
	m->kind = rckpt_rd_u8(&r);
	if (r.err || m->kind > RCKPT_RETIRE_JOB ||
	    (m->kind == RCKPT_RETIRE_STEP) == (m->step == RCKPT_STORE_NONE) ||
	    (m->kind == RCKPT_RETIRE_JOB && m->token == 0)) {
		memset(m, 0, sizeof(*m));
		return -EBADMSG;
	}
	return 0;
}

int rckpt_msg_put_encode(rckpt_buf_t *out, uint64_t token, uint64_t step, const uint8_t *bytes,
			 size_t len)
{
	rckpt_blob_t x = { bytes, len };
	size_t at;
	int rc;
	if (token == 0 || step == RCKPT_STORE_NONE || len > RCKPT_STORE_PUT_MAX)
		return -EINVAL;
	rc = begin_fenced3(out, RCKPT_MSG_PUT, &at);
	if (!rc)
		rc = put_u64(out, token);
	if (!rc)
		rc = put_u64(out, step);
	return end(out, at, rc ? rc : put_blob(out, &x));
}

int rckpt_msg_put_decode(uint64_t *token, uint64_t *step, rckpt_blob_t *bytes, const uint8_t *src,
			 size_t len)
{
	rckpt_reader_t r;
	int rc = open_fenced3(&r, src, len, RCKPT_MSG_PUT);
	*token = *step = 0;
	memset(bytes, 0, sizeof(*bytes));
	if (rc)
		return rc;
	*token = rckpt_rd_u64(&r);
	*step = rckpt_rd_u64(&r);
	rd_blob(&r, bytes);
	if (r.err || *token == 0 || *step == RCKPT_STORE_NONE || bytes->len > RCKPT_STORE_PUT_MAX) {
		*token = *step = 0;
		memset(bytes, 0, sizeof(*bytes));
		return -EBADMSG;
	}
	return 0;
}

/* ---- commit, head, list ---- */

int rckpt_msg_commit_encode(rckpt_buf_t *out, const rckpt_msg_commit_t *m)
{
	size_t at;
	int rc;
	if (m->step == RCKPT_STORE_NONE || m->summary.len > RCKPT_STORE_SUMMARY_MAX || m->writer == 0)
		return -EINVAL;
	rc = begin(out, RCKPT_MSG_COMMIT, &at);
	if (!rc)
		rc = put_u64(out, m->expect);
	if (!rc)
		rc = put_u64(out, m->step);
	if (!rc)
		rc = put_blob(out, &m->summary);
	if (!rc)
		rc = put_u64(out, m->writer);
	return end(out, at, rc);
}

int rckpt_msg_commit_decode(rckpt_msg_commit_t *m, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_frame(&r, src, len, RCKPT_MSG_COMMIT);
	memset(m, 0, sizeof(*m));
	if (rc)
		return rc;
	m->expect = rckpt_rd_u64(&r);
	m->step = rckpt_rd_u64(&r);
	rd_blob(&r, &m->summary);
	m->writer = rckpt_rd_u64(&r);
	if (r.err || m->step == RCKPT_STORE_NONE || m->summary.len > RCKPT_STORE_SUMMARY_MAX ||
	    m->writer == 0) {
		memset(m, 0, sizeof(*m));
		return -EBADMSG;
	}
	return 0;
}

int rckpt_msg_head_encode(rckpt_buf_t *out, const rckpt_msg_head_t *m)
{
	size_t at;
	int rc = begin(out, RCKPT_MSG_HEAD, &at);
	if (!rc)
		rc = put_u64(out, m->head);
	if (!rc)
		rc = put_u64(out, m->count);
	return end(out, at, rc);
}

int rckpt_msg_head_decode(rckpt_msg_head_t *m, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_frame(&r, src, len, RCKPT_MSG_HEAD);
	memset(m, 0, sizeof(*m));
	if (rc)
		return rc;
	m->head = rckpt_rd_u64(&r);
	m->count = rckpt_rd_u64(&r);
	if (r.err) {
		memset(m, 0, sizeof(*m));
		return -EBADMSG;
	}
	return 0;
}

int rckpt_msg_list_encode(rckpt_buf_t *out, const rckpt_msg_list_t *m)
{
	size_t at;
	int rc;
	if (m->max == 0 || m->max > RCKPT_STORE_LIST_MAX)
		return -EINVAL;
	rc = begin(out, RCKPT_MSG_LIST, &at);
	if (!rc)
		rc = put_u64(out, m->after);
	if (!rc)
		rc = put_u32(out, m->max);
	return end(out, at, rc);
}

int rckpt_msg_list_decode(rckpt_msg_list_t *m, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_frame(&r, src, len, RCKPT_MSG_LIST);
	memset(m, 0, sizeof(*m));
	if (rc)
		return rc;
	m->after = rckpt_rd_u64(&r);
	m->max = rckpt_rd_u32(&r);
	if (r.err || m->max == 0 || m->max > RCKPT_STORE_LIST_MAX) {
		memset(m, 0, sizeof(*m));
		return -EBADMSG;
	}
	return 0;
}

void rckpt_msg_stepsum_begin(rckpt_msg_steps_writer_t *w, rckpt_buf_t *out)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->err = begin(out, RCKPT_MSG_STEPS, &w->header_at);
	w->count_at = out->len;
	if (!w->err)
		w->err = put_u32(out, 0);
}

void rckpt_msg_stepsum_add(rckpt_msg_steps_writer_t *w, uint64_t step, const uint8_t *summary,
			   size_t len)
{
	rckpt_blob_t x = { summary, len };
	if (w->err)
		return;
	if (len > RCKPT_STORE_SUMMARY_MAX || w->n >= RCKPT_STORE_LIST_MAX) {
		w->err = -EINVAL;
		return;
	}
	w->err = put_u64(w->out, step);
	if (!w->err)
		w->err = put_blob(w->out, &x);
	w->n++;
}

int rckpt_msg_stepsum_end(rckpt_msg_steps_writer_t *w, int more)
{
	if (!w->err)
		w->err = put_u8(w->out, more ? 1 : 0);
	if (!w->err) {
		rckpt_writer_t c = rckpt_writer(w->out->p + w->count_at, 4);
		rckpt_wr_u32(&c, w->n);
	}
	return end(w->out, w->header_at, w->err);
}

int rckpt_msg_stepsum_open(rckpt_msg_stepsum_reader_t *r, const uint8_t *src, size_t len)
{
	rckpt_reader_t rd;
	uint32_t i;
	int rc = open_frame(&rd, src, len, RCKPT_MSG_STEPS);
	memset(r, 0, sizeof(*r));
	if (rc)
		return rc;
	r->n = rckpt_rd_u32(&rd);
	if (rd.err || r->n > RCKPT_STORE_LIST_MAX)
		return -EBADMSG;
	/* walk once now, so that next() cannot fail half way */
	for (i = 0; i < r->n; i++) {
		rckpt_blob_t b;
		(void)rckpt_rd_u64(&rd);
		rd_blob(&rd, &b);
		if (rd.err || b.len > RCKPT_STORE_SUMMARY_MAX)
			return -EBADMSG;
	}
	r->more = rckpt_rd_u8(&rd);
	if (rd.err || r->more > 1)
		return -EBADMSG;
	r->p = rd.p;
	r->len = rd.len;
	r->pos = 4;
	return 0;
}

int rckpt_msg_stepsum_next(rckpt_msg_stepsum_reader_t *r, uint64_t *step, rckpt_blob_t *summary)
{
	rckpt_reader_t rd;
	if (r->i >= r->n)
		return 0;
	rd = rckpt_reader(r->p, r->len);
	rd.pos = r->pos;
	*step = rckpt_rd_u64(&rd);
	rd_blob(&rd, summary);
	if (rd.err)
		return -EBADMSG;
	r->pos = rd.pos;
	r->i++;
	return 1;
}

/* ---- chunk index ---- */

void rckpt_store_entry_put(uint8_t out[RCKPT_STORE_ENTRY_BYTES], const rckpt_store_entry_t *e)
{
	rckpt_writer_t w = rckpt_writer(out, RCKPT_STORE_ENTRY_BYTES);
	rckpt_wr_u64(&w, e->step);
	rckpt_wr_u64(&w, e->offset);
	rckpt_wr_u32(&w, e->length);
	rckpt_wr_u8(&w, e->kind);
	rckpt_wr_u64(&w, e->parent);
}

int rckpt_store_entry_get(rckpt_store_entry_t *e, const uint8_t *src, size_t len)
{
	rckpt_reader_t r = rckpt_reader(src, len);
	memset(e, 0, sizeof(*e));
	if (len != RCKPT_STORE_ENTRY_BYTES)
		return -EBADMSG;
	e->step = rckpt_rd_u64(&r);
	e->offset = rckpt_rd_u64(&r);
	e->length = rckpt_rd_u32(&r);
	e->kind = rckpt_rd_u8(&r);
	e->parent = rckpt_rd_u64(&r);
	if (r.err || e->step == RCKPT_STORE_NONE || e->kind < 1 || e->kind > 3 ||
	    e->offset > RCKPT_STORE_OBJECT_MAX || e->length > RCKPT_STORE_OBJECT_MAX - e->offset ||
	    (e->kind == 1) != (e->parent == RCKPT_STORE_NONE)) {
		memset(e, 0, sizeof(*e));
		return -EBADMSG;
	}
	return 0;
}

int rckpt_msg_index_encode(rckpt_buf_t *out, const rckpt_store_entry_t *e, uint32_t n)
{
	size_t at;
	uint32_t i;
	int rc = begin(out, RCKPT_MSG_INDEX, &at);
	if (!rc)
		rc = put_u32(out, n);
	for (i = 0; i < n && rc == 0; i++) {
		uint8_t b[RCKPT_STORE_ENTRY_BYTES];
		rckpt_store_entry_put(b, &e[i]);
		rc = put(out, b, sizeof(b));
	}
	return end(out, at, rc);
}

int rckpt_msg_index_decode(rckpt_store_entry_t **e, uint32_t *n, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	uint32_t i, cnt;
	int rc = open_frame(&r, src, len, RCKPT_MSG_INDEX);
	*e = NULL;
	*n = 0;
	if (rc)
		return rc;
	cnt = rckpt_rd_u32(&r);
	if (r.err || (uint64_t)cnt * RCKPT_STORE_ENTRY_BYTES > rckpt_rd_left(&r))
		return -EBADMSG;
	*e = calloc(cnt ? cnt : 1, sizeof(**e));
	if (*e == NULL)
		return -ENOMEM;
	for (i = 0; i < cnt; i++) {
		const uint8_t *b = rckpt_rd_bytes(&r, RCKPT_STORE_ENTRY_BYTES);
		if (b == NULL || rckpt_store_entry_get(&(*e)[i], b, RCKPT_STORE_ENTRY_BYTES) ||
		    (i && (*e)[i].step <= (*e)[i - 1].step)) {
			free(*e);
			*e = NULL;
			return -EBADMSG;
		}
	}
	*n = cnt;
	return 0;
}

/* ---- step sets: compact, drop ---- */

uint64_t rckpt_stepset_at(const rckpt_stepset_t *s, uint32_t i)
{
	return (uint64_t)rckpt_le32(s->p + 8 * (size_t)i) |
	       (uint64_t)rckpt_le32(s->p + 8 * (size_t)i + 4) << 32;
}

static int put_steps(rckpt_buf_t *out, const uint64_t *v, uint32_t n, uint64_t max)
{
	uint32_t i;
	int rc;
	if (n > RCKPT_STORE_STEPSET_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (v[i] > max || (i && v[i] <= v[i - 1]))
			return -EINVAL;
	rc = put_u32(out, n);
	for (i = 0; i < n && rc == 0; i++)
		rc = put_u64(out, v[i]);
	return rc;
}

static int rd_steps(rckpt_reader_t *r, rckpt_stepset_t *s, uint64_t max)
{
	uint32_t i, n = rckpt_rd_u32(r);
	if (r->err || n > RCKPT_STORE_STEPSET_MAX || (uint64_t)n * 8 > rckpt_rd_left(r))
		return -EBADMSG;
	s->p = rckpt_rd_bytes(r, (size_t)n * 8);
	s->n = n;
	if (n && s->p == NULL)
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		uint64_t v = rckpt_stepset_at(s, i);
		if (v > max || (i && v <= rckpt_stepset_at(s, i - 1)))
			return -EBADMSG;
	}
	return 0;
}

int rckpt_msg_compact_encode(rckpt_buf_t *out, uint64_t token, uint64_t upto, const uint64_t *keep,
			     uint32_t n)
{
	size_t at;
	int rc;
	if (upto == RCKPT_STORE_NONE)
		return -EINVAL;
	rc = begin_fenced3(out, RCKPT_MSG_COMPACT, &at);
	if (!rc)
		rc = put_u64(out, token);
	if (!rc)
		rc = put_u64(out, upto);
	if (!rc)
		rc = put_steps(out, keep, n, upto);
	return end(out, at, rc);
}

int rckpt_msg_compact_decode(rckpt_msg_compact_t *m, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_fenced3(&r, src, len, RCKPT_MSG_COMPACT);
	memset(m, 0, sizeof(*m));
	if (rc)
		return rc;
	m->token = rckpt_rd_u64(&r);
	m->upto = rckpt_rd_u64(&r);
	if (r.err || m->upto == RCKPT_STORE_NONE || rd_steps(&r, &m->keep, m->upto)) {
		memset(m, 0, sizeof(*m));
		return -EBADMSG;
	}
	return 0;
}

int rckpt_msg_drop_encode(rckpt_buf_t *out, uint64_t token, const uint64_t *steps, uint32_t n)
{
	size_t at;
	int rc = begin_fenced3(out, RCKPT_MSG_DROP, &at);
	if (!rc)
		rc = put_u64(out, token);
	return end(out, at, rc ? rc : put_steps(out, steps, n, RCKPT_STORE_NONE - 1));
}

int rckpt_msg_drop_decode(uint64_t *token, rckpt_stepset_t *s, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_fenced3(&r, src, len, RCKPT_MSG_DROP);
	memset(s, 0, sizeof(*s));
	*token = 0;
	if (rc)
		return rc;
	*token = rckpt_rd_u64(&r);
	if (r.err || rd_steps(&r, s, RCKPT_STORE_NONE - 1)) {
		memset(s, 0, sizeof(*s));
		*token = 0;
		return -EBADMSG;
	}
	return 0;
}

/* ---- pin ---- */

int rckpt_msg_pin_encode(rckpt_buf_t *out, uint64_t token, uint64_t step, int on)
{
	size_t at;
	int rc;
	if (step == RCKPT_STORE_NONE || (on != 0 && on != 1))
		return -EINVAL;
	rc = begin_fenced3(out, RCKPT_MSG_PIN, &at);
	if (!rc)
		rc = put_u64(out, token);
	if (!rc)
		rc = put_u64(out, step);
	if (!rc)
		rc = put_u8(out, (uint8_t)on);
	return end(out, at, rc);
}

int rckpt_msg_pin_decode(uint64_t *token, uint64_t *step, int *on, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_fenced3(&r, src, len, RCKPT_MSG_PIN);
	unsigned v;
	*token = *step = 0;
	*on = 0;
	if (rc)
		return rc;
	*token = rckpt_rd_u64(&r);
	*step = rckpt_rd_u64(&r);
	v = rckpt_rd_u8(&r);
	if (r.err || *step == RCKPT_STORE_NONE || v > 1) {
		*token = *step = 0;
		return -EBADMSG;
	}
	*on = (int)v;
	return 0;
}

/* ---- rewind ---- */

int rckpt_msg_rewind_encode(rckpt_buf_t *out, const rckpt_msg_rewind_t *m)
{
	size_t at;
	int rc;
	if (m->token == 0 || m->step == RCKPT_STORE_NONE || m->expect == RCKPT_STORE_NONE)
		return -EINVAL;
	rc = begin_fenced3(out, RCKPT_MSG_REWIND, &at);
	if (!rc)
		rc = put_u64(out, m->token);
	if (!rc)
		rc = put_u64(out, m->expect);
	if (!rc)
		rc = put_u64(out, m->step);
	return end(out, at, rc);
}

int rckpt_msg_rewind_decode(rckpt_msg_rewind_t *m, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc = open_fenced3(&r, src, len, RCKPT_MSG_REWIND);
	memset(m, 0, sizeof(*m));
	if (rc)
		return rc;
	m->token = rckpt_rd_u64(&r);
	m->expect = rckpt_rd_u64(&r);
	m->step = rckpt_rd_u64(&r);
	if (r.err || m->token == 0 || m->step == RCKPT_STORE_NONE || m->expect == RCKPT_STORE_NONE) {
		memset(m, 0, sizeof(*m));
		return -EBADMSG;
	}
	return 0;
}

/* ---- claim ---- */

int rckpt_msg_claim_encode(rckpt_buf_t *out, uint64_t prev, uint64_t token, unsigned flags)
{
	size_t at;
	int rc;
	if (token <= prev || (flags & ~RCKPT_CLAIM_DELETE))
		return -EINVAL;
	rc = begin_fenced3(out, RCKPT_MSG_CLAIM, &at);
	if (!rc)
		rc = put_u64(out, prev);
	if (!rc)
		rc = put_u64(out, token);
	if (!rc)
		rc = put_u8(out, (uint8_t)flags);
	return end(out, at, rc);
}

int rckpt_msg_claim_decode(uint64_t *prev, uint64_t *token, unsigned *flags, const uint8_t *src,
			   size_t len)
{
	rckpt_reader_t r;
	int rc = open_fenced3(&r, src, len, RCKPT_MSG_CLAIM);
	*prev = *token = 0;
	*flags = 0;
	if (rc)
		return rc;
	*prev = rckpt_rd_u64(&r);
	*token = rckpt_rd_u64(&r);
	*flags = rckpt_rd_u8(&r);
	if (r.err || *token <= *prev || (*flags & ~RCKPT_CLAIM_DELETE)) {
		*prev = *token = 0;
		*flags = 0;
		return -EBADMSG;
	}
	return 0;
}

/* ---- verified ---- */

int rckpt_msg_verify_encode(rckpt_buf_t *out, uint64_t after)
{
	size_t at;
	int rc = begin(out, RCKPT_MSG_VERIFY, &at);
	return end(out, at, rc ? rc : put_u64(out, after));
}

int rckpt_msg_verify_decode(uint64_t *after, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	int rc;
	*after = RCKPT_STORE_NONE;
	if (len == 0)
		return 0; /* from the first */
	if ((rc = open_frame(&r, src, len, RCKPT_MSG_VERIFY)))
		return rc;
	*after = rckpt_rd_u64(&r);
	if (r.err) {
		*after = RCKPT_STORE_NONE;
		return -EBADMSG;
	}
	return 0;
}

/* Version 2 (compat 1): `next` after the version-1 fields, which a
 * version-1 decoder reads and skips past. */
int rckpt_msg_verified_encode(rckpt_buf_t *out, const rckpt_msg_verified_t *m)
{
	size_t at;
	int rc = rckpt_frame_buf_begin(out, RCKPT_MSG_VERIFIED, 2, 1, &at);
	if (!rc)
		rc = put_u32(out, m->records);
	if (!rc)
		rc = put_u64(out, m->bytes);
	if (!rc)
		rc = put_u32(out, m->bad);
	if (!rc)
		rc = put_u64(out, m->first_bad);
	if (!rc)
		rc = put_u32(out, (uint32_t)m->error);
	if (!rc)
		rc = put_u64(out, m->next);
	return end(out, at, rc);
}

int rckpt_msg_verified_decode(rckpt_msg_verified_t *m, const uint8_t *src, size_t len)
{
	rckpt_reader_t r;
	rckpt_frame_t f;
	int rc = rckpt_frame_open(&f, src, len, RCKPT_MSG_VERIFIED, RCKPT_STORE_WIRE_VERSION);
	memset(m, 0, sizeof(*m));
	if (rc)
		return rc;
	r = rckpt_reader(f.payload, f.len);
	m->records = rckpt_rd_u32(&r);
	m->bytes = rckpt_rd_u64(&r);
	m->bad = rckpt_rd_u32(&r);
	m->first_bad = rckpt_rd_u64(&r);
	m->error = (int32_t)rckpt_rd_u32(&r);
	m->next = f.version >= 2 ? rckpt_rd_u64(&r) : RCKPT_STORE_NONE;
	if (r.err || m->bad > m->records || (m->bad == 0) != (m->first_bad == RCKPT_STORE_NONE) ||
	    m->error > 0) {
		memset(m, 0, sizeof(*m));
		return -EBADMSG;
	}
	return 0;
}
