/*
 * cls_rckpt_impl.h — what the `rckpt` class's method files share: bounds,
 * omap helpers and the walk over a chunk's index (cls_rckpt_methods.c).
 * Every helper checks what it reads before use, as the methods do.
 */
#ifndef RCKPT_CLS_RCKPT_IMPL_H
#define RCKPT_CLS_RCKPT_IMPL_H

#include "cls_rckpt_methods.h"

#include "rckpt_buf.h"
#include "rckpt_record.h"
#include "rckpt_store_wire.h"

#define KEY_MAX 32
#define CHAIN_MAX RCKPT_STORE_CHAIN_MAX /* records one materialize folds */

/* What one call reads of an object, whoever wrote it (cls-wire.md "What
 * one call may cost"): in an OSD, records of at most 2^22 elements (what
 * append takes) and objects of at most 1024 index entries (what append
 * writes); anything past them is refused (-E2BIG), never walked. A client
 * folding for itself (o->client) reads what older writers wrote: records
 * of 2^26 elements, objects of 2^20 entries. */
uint64_t crk_elements_max(const rckpt_cls_obj_t *o);
uint32_t crk_entries_max(const rckpt_cls_obj_t *o);

/* A record's elements: its segments' sum. */
uint64_t crk_record_elements(const rckpt_record_t *r);

/* A u64 omap value of the object; -ENOENT when the key is absent. */
int crk_get_u64(rckpt_cls_obj_t *o, const char *key, uint64_t *v);
int crk_set_u64(rckpt_cls_obj_t *o, const char *key, uint64_t v);
/* Fencing (store.md): a chunk remembers the newest writer token that
 * changed it ("writer"). crk_fence refuses an older token (-ESTALE) and
 * says whether this one is newer (*record); crk_fence_record remembers it,
 * as the method's last write. (In the OSD a method's reads do not see its
 * own earlier writes, and an object that one of them creates has no omap
 * to read yet: every read comes first.) */
int crk_fence(rckpt_cls_obj_t *o, uint64_t writer, int *record);
int crk_fence_record(rckpt_cls_obj_t *o, uint64_t writer, int record);
/* 0 when the object is a chunk, or does not exist yet; -EINVAL (logged)
 * when it is another object of the pool (the job object, or one with data
 * and neither a writer token nor a tip: a manifest, a PCR record), which
 * append, trim and compact must never touch. */
int crk_is_chunk(rckpt_cls_obj_t *o, const char *method);
/* The index entry "r.<step>" of a chunk object. */
int crk_get_entry(rckpt_cls_obj_t *o, uint64_t step, rckpt_store_entry_t *e);
/* The chunk's head record (store.md "Head records"): a base record of
 * one step, kept after the log's last record, its entry (an index entry's
 * layout) under CRK_HEAD_KEY. crk_get_head: 0 and the entry when there is
 * one within the object's `size` bytes; -ENOENT when there is none;
 * -EBADMSG when its entry fails its checks (callers take it as none). */
#define CRK_HEAD_KEY "headrec"
int crk_get_head(rckpt_cls_obj_t *o, uint64_t size, rckpt_store_entry_t *e);
/* The record an index entry points at, bounds checked, into b. */
int crk_read_record(rckpt_cls_obj_t *o, const rckpt_store_entry_t *e, rckpt_buf_t *b);

/* A chunk's index entries, in step order. */
typedef struct walk {
	rckpt_store_entry_t *e;
	uint32_t n;
	size_t cap;
	int err;
	uint32_t max; /* crk_entries_max: past it, -E2BIG */
} walk_t;

/* Every "r." entry of the chunk, at most crk_entries_max of them (-E2BIG
 * past it, said in the OSD's log). On failure w holds nothing (freed). */
int crk_all_entries(rckpt_cls_obj_t *o, walk_t *w);
/* Position of step among w's entries (sorted), or -1. */
long crk_find_entry(const walk_t *w, uint64_t step);
/* The chunk's record count: its "count" key (append, trim and compact
 * keep it), or, in a chunk written before there was one, its entries
 * counted (bounded by what that older plugin took). */
int crk_count(rckpt_cls_obj_t *o, uint64_t *n);

/* The reply of tip (key "tip", counting index entries) and head (key
 * "head", the "count" value). */
int crk_head_reply(rckpt_cls_obj_t *o, const char *key, int count_entries, const uint8_t *in,
		   size_t in_len, rckpt_cls_out_t *out);

#endif
