/*
 * cls_rckpt_methods.c — C bodies of the `rckpt` object class (formats/store.md):
 * what its chunk methods (cls_rckpt_chunk.c) and job methods
 * (cls_rckpt_job.c) share, and the version and ping methods.
 *
 * Chunk object: its data is an append-only log of chunk records; its omap
 * holds "r.<step>" -> index entry and "tip" -> the newest step appended.
 * Job object: omap "head" -> the committed head, "count" -> steps
 * committed, "s.<step>" -> the step's summary.
 *
 * Everything read from the object or the request is checked before use;
 * a method fails (and the OSD drops its changes) rather than trusting it.
 */
#include "cls_rckpt_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"
#include "rckpt_manifest.h"
#include "rckpt_record.h"
#include "rckpt_store_wire.h"

/* The formats this plugin reads and writes, with the versions it handles. */
static const rckpt_wire_format_range_t cls_rckpt_formats[] = {
	{ "cls-wire", 1, RCKPT_WIRE_VERSION },
	{ "store", 1, RCKPT_STORE_WIRE_VERSION },
	{ "ckpt-record", 1, RCKPT_RECORD_VERSION },
};

int cls_rckpt_version(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	return rckpt_cls_version_reply(out, "rckpt", cls_rckpt_formats,
				       sizeof(cls_rckpt_formats) / sizeof(cls_rckpt_formats[0]), in,
				       in_len);
}

int cls_rckpt_ping(rckpt_cls_obj_t *o, const uint8_t *in, size_t in_len, rckpt_cls_out_t *out)
{
	(void)o;
	(void)in;
	(void)out;
	return in_len == 0 ? 0 : -EINVAL;
}

/* ---- small helpers over the object ---- */

int crk_get_u64(rckpt_cls_obj_t *o, const char *key, uint64_t *v)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	int rc = o->ops->omap_get(o, key, &b);
	if (rc == 0) {
		if (b.len == 8)
			*v = (uint64_t)rckpt_le32(b.p) | (uint64_t)rckpt_le32(b.p + 4) << 32;
		else
			rc = -EBADMSG;
	}
	rckpt_buf_free(&b);
	return rc;
}

int crk_set_u64(rckpt_cls_obj_t *o, const char *key, uint64_t v)
{
	uint8_t t[8];
	rckpt_writer_t w = rckpt_writer(t, sizeof(t));
	rckpt_wr_u64(&w, v);
	return o->ops->omap_set(o, key, t, sizeof(t));
}

int crk_fence(rckpt_cls_obj_t *o, uint64_t writer, int *record)
{
	uint64_t newest = 0;
	int rc = crk_get_u64(o, "writer", &newest);
	*record = 0;
	if (rc && rc != -ENOENT)
		return rc;
	if (writer < newest)
		return rckpt_cls_fail(o, -ESTALE,
				      "writer token %llu is older than the chunk's %llu: a writer whose "
				      "successor has claimed the job",
				      (unsigned long long)writer, (unsigned long long)newest);
	*record = writer > newest;
	return 0;
}

int crk_is_chunk(rckpt_cls_obj_t *o, const char *method)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	uint64_t size = 0;
	int rc = o->ops->stat(o, &size), job, keyed;
	if (rc == -ENOENT)
		return 0; /* a new chunk */
	if (rc)
		return rc;
	job = o->ops->omap_get(o, "job", &b);
	keyed = o->ops->omap_get(o, "writer", &b) == 0 || o->ops->omap_get(o, "tip", &b) == 0;
	rckpt_buf_free(&b);
	if (job == 0 || (size > 0 && !keyed))
		return rckpt_cls_fail(o, -EINVAL, "%s: the object is not a chunk", method);
	return 0;
}

int crk_fence_record(rckpt_cls_obj_t *o, uint64_t writer, int record)
{
	return record ? crk_set_u64(o, "writer", writer) : 0;
}

int crk_get_entry(rckpt_cls_obj_t *o, uint64_t step, rckpt_store_entry_t *e)
{
	char key[KEY_MAX];
	rckpt_buf_t b = RCKPT_BUF_INIT;
	int rc = rckpt_store_step_key(key, sizeof(key), 'r', step);
	if (rc == 0)
		rc = o->ops->omap_get(o, key, &b);
	if (rc == 0)
		rc = rckpt_store_entry_get(e, b.p, b.len);
	if (rc == 0 && e->step != step)
		rc = -EBADMSG;
	rckpt_buf_free(&b);
	return rc;
}

int crk_get_head(rckpt_cls_obj_t *o, uint64_t size, rckpt_store_entry_t *e)
{
	rckpt_buf_t b = RCKPT_BUF_INIT;
	int rc = o->ops->omap_get(o, CRK_HEAD_KEY, &b);
	if (rc == 0)
		rc = rckpt_store_entry_get(e, b.p, b.len);
	if (rc == 0 && (e->kind != RCKPT_REC_BASE || e->offset > size || e->length > size - e->offset))
		rc = -EBADMSG;
	rckpt_buf_free(&b);
	return rc;
}

/* Reads a record's bytes into b (emptied first) and checks its header and
 * CRC against the index entry. */
int crk_read_record(rckpt_cls_obj_t *o, const rckpt_store_entry_t *e, rckpt_buf_t *b)
{
	unsigned kind;
	uint64_t step, parent;
	int rc;

	b->len = 0;
	/* what a record of at most crk_elements_max can take (4 bytes an
	 * element kept whole, and headers), checked before it is read */
	if (e->length > 4 * crk_elements_max(o) + ((uint64_t)4 << 20))
		return rckpt_cls_damaged(o, -E2BIG, "the record of step %llu is %llu bytes: more than a chunk's",
					 (unsigned long long)e->step, (unsigned long long)e->length);
	rc = o->ops->read(o, e->offset, e->length, b);
	if (rc)
		return rc;
	if (b->len != e->length)
		return rckpt_cls_damaged(o, -EBADMSG, "the record of step %llu runs past the log's end",
					 (unsigned long long)e->step);
	rc = rckpt_record_check(&kind, &step, &parent, b->p, b->len);
	if (rc)
		return rckpt_cls_damaged(o, rc, "the record of step %llu fails its checks%s",
					 (unsigned long long)e->step,
					 rc == RCKPT_FMT_ECHECKSUM ? " (CRC-32C)" : "");
	if (kind != e->kind || step != e->step || parent != e->parent)
		return rckpt_cls_damaged(o, -EBADMSG, "the record of step %llu disagrees with its index entry",
					 (unsigned long long)e->step);
	return 0;
}

/* ---- index walks ---- */

static int collect_entry(void *arg, const char *key, const uint8_t *val, size_t len)
{
	walk_t *w = arg;
	uint64_t step;
	rckpt_store_entry_t *e;
	if (key[0] != 'r')
		return 1; /* past the "r." keys */
	if (rckpt_store_parse_step_key(&step, key, 'r'))
		return -EBADMSG;
	if (w->n >= w->max)
		return -E2BIG;
	if ((e = rckpt_grow(w->e, &w->cap, (size_t)w->n + 1, sizeof(*e))) == NULL)
		return -ENOMEM;
	w->e = e;
	if (rckpt_store_entry_get(&w->e[w->n], val, len) || w->e[w->n].step != step)
		return -EBADMSG;
	w->n++;
	return 0;
}

/* Every "r." entry of the chunk, in step order. On failure w holds
 * nothing (freed). */
uint64_t crk_elements_max(const rckpt_cls_obj_t *o)
{
	return o->client ? RCKPT_STORE_RECORD_ELEMENTS_MAX : RCKPT_STORE_CHUNK_ELEMENTS_MAX;
}

uint32_t crk_entries_max(const rckpt_cls_obj_t *o)
{
	return o->client ? (uint32_t)1 << 20 : RCKPT_STORE_OBJECT_RECORDS_MAX;
}

int crk_all_entries(rckpt_cls_obj_t *o, walk_t *w)
{
	char after[KEY_MAX] = "r.";
	int more = 1, rc = 0;
	memset(w, 0, sizeof(*w));
	w->max = crk_entries_max(o);
	while (more) {
		uint32_t before = w->n;
		rc = o->ops->omap_list(o, after, 256, collect_entry, w, &more);
		if (rc == 1) {
			rc = 0;
			break;
		}
		if (rc || w->n == before)
			break;
		if ((rc = rckpt_store_step_key(after, sizeof(after), 'r', w->e[w->n - 1].step)))
			break;
	}
	if (rc) {
		free(w->e);
		memset(w, 0, sizeof(*w));
	}
	if (rc == -E2BIG)
		return rckpt_cls_damaged(o, rc, "the object has more than %u index entries: not one this "
					 "plugin writes (planted, or an older plugin's); refused unread. Restore "
					 "its job with RCKPT_FOLD=client, or remove it",
					 crk_entries_max(o));
	return rc;
}

int crk_count(rckpt_cls_obj_t *o, uint64_t *n)
{
	walk_t w;
	int rc = crk_get_u64(o, "count", n);
	if (rc != -ENOENT)
		return rc;
	rc = crk_all_entries(o, &w);
	*n = w.n;
	free(w.e);
	return rc == -ENOENT ? 0 : rc; /* no object yet: no records */
}

/* ---- tip (chunk, read), head (job, read) ---- */

int crk_head_reply(rckpt_cls_obj_t *o, const char *key, int count_entries, const uint8_t *in,
		      size_t in_len, rckpt_cls_out_t *out)
{
	rckpt_msg_head_t h = { RCKPT_STORE_NONE, 0, { NULL, 0 } };
	rckpt_buf_t sum = RCKPT_BUF_INIT;
	char skey[KEY_MAX];
	int rc;
	(void)in;
	if (in_len != 0)
		return -EINVAL;
	rc = crk_get_u64(o, key, &h.head);
	if (rc && rc != -ENOENT)
		return rc;
	if (count_entries) {
		if ((rc = crk_count(o, &h.count)))
			return rc;
	} else {
		rc = crk_get_u64(o, "count", &h.count);
		if (rc && rc != -ENOENT)
			return rc;
		/* the head's summary, which a restore of the head reads next:
		 * left out when it cannot be read whole within the bound
		 * (missing, oversized, an error: the reader then asks for it
		 * and is told) */
		sum.max = RCKPT_STORE_SUMMARY_MAX;
		if (h.head != RCKPT_STORE_NONE && rckpt_store_step_key(skey, sizeof(skey), 's', h.head) == 0 &&
		    o->ops->omap_get(o, skey, &sum) == 0)
			h.summary = (rckpt_blob_t){ sum.p, sum.len };
	}
	rc = rckpt_msg_head_encode(out, &h);
	rckpt_buf_free(&sum);
	return rc;
}

uint64_t crk_record_elements(const rckpt_record_t *r)
{
	uint64_t n = 0;
	uint32_t i;
	for (i = 0; i < r->nseg; i++)
		n += r->seg[i].n;
	return n;
}

long crk_find_entry(const walk_t *w, uint64_t step)
{
	uint32_t a = 0, b = w->n;
	while (a < b) {
		uint32_t c = a + (b - a) / 2;
		if (w->e[c].step == step)
			return (long)c;
		if (w->e[c].step < step)
			a = c + 1;
		else
			b = c;
	}
	return -1;
}
