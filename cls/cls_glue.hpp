// cls_glue.hpp — the one piece of C++ every rckpt plugin shares: it adapts
// C method bodies (cls_common.h) to the object-class SDK's bufferlist
// calling convention, and implements the C bodies' object interface
// (rckpt_cls_obj_ops_t) with the OSD's cls_cxx_* calls. Nothing else of the
// plugins is C++.
#ifndef RCKPT_CLS_GLUE_HPP
#define RCKPT_CLS_GLUE_HPP

#include <rados/objclass.h>

#include <cerrno>
#include <climits>
#include <map>
#include <string>

extern "C" {
#include "cls_common.h"
}

// The SDK header (rados-objclass-dev) declares only part of what ceph-osd
// exports to object classes; these are the declarations of Ceph's own
// src/objclass/objclass.h for the release we build against (checked
// against `nm -D ceph-osd` for Pacific).
extern int cls_cxx_truncate(cls_method_context_t hctx, int ofs);
extern int cls_cxx_map_remove_key(cls_method_context_t hctx, const std::string &key);
extern int cls_cxx_map_get_vals(cls_method_context_t hctx, const std::string &start_after,
				const std::string &filter_prefix, uint64_t max_to_get,
				std::map<std::string, ceph::bufferlist> *vals, bool *more);

namespace rckpt_cls {

inline cls_method_context_t hctx_of(rckpt_cls_obj_t *o)
{
	return static_cast<cls_method_context_t>(o->ctx);
}

inline int stat(rckpt_cls_obj_t *o, uint64_t *size)
{
	return cls_cxx_stat(hctx_of(o), size, nullptr);
}

// Reads a piece at a time into room made once: a record is never held
// twice (the OSD's buffer beside ours) nor copied as out grows.
inline int read(rckpt_cls_obj_t *o, uint64_t off, size_t len, rckpt_buf_t *out)
{
	const size_t piece = (size_t)4 << 20;
	size_t done = 0;
	int rc;
	if (off > INT_MAX || len > INT_MAX || off + len > (uint64_t)INT_MAX + 1)
		return -EFBIG;
	/* room for all of it at once where out allows (untouched past the
	 * object's end); else piece by piece, as far as the object goes */
	(void)rckpt_buf_reserve(out, len);
	while (done < len) {
		ceph::bufferlist bl;
		const size_t want = len - done < piece ? len - done : piece;
		rc = cls_cxx_read(hctx_of(o), static_cast<int>(off + done), static_cast<int>(want), &bl);
		if (rc < 0)
			return rc;
		if (bl.length() > want)
			return -EIO; /* more than asked: not the OSD we know */
		if ((rc = rckpt_buf_reserve(out, bl.length())))
			return rc;
		bl.begin().copy(bl.length(), reinterpret_cast<char *>(out->p + out->len));
		out->len += bl.length();
		done += bl.length();
		if (bl.length() < want)
			return 0; /* the object's end */
	}
	return 0;
}

inline int write(rckpt_cls_obj_t *o, uint64_t off, const uint8_t *p, size_t len)
{
	ceph::bufferlist bl;
	if (off > INT_MAX || len > INT_MAX)
		return -EFBIG;
	bl.append(reinterpret_cast<const char *>(p), static_cast<unsigned>(len));
	return cls_cxx_write(hctx_of(o), static_cast<int>(off), static_cast<int>(len), &bl);
}

inline int truncate(rckpt_cls_obj_t *o, uint64_t size)
{
	if (size > INT_MAX)
		return -EFBIG;
	return cls_cxx_truncate(hctx_of(o), static_cast<int>(size));
}

inline int omap_get(rckpt_cls_obj_t *o, const char *key, rckpt_buf_t *out)
{
	ceph::bufferlist bl;
	int rc = cls_cxx_map_get_val(hctx_of(o), std::string(key), &bl);
	if (rc < 0)
		return rc;
	return bl.length() ? rckpt_buf_append(out, bl.c_str(), bl.length()) : 0;
}

inline int omap_set(rckpt_cls_obj_t *o, const char *key, const uint8_t *p, size_t len)
{
	ceph::bufferlist bl;
	if (len > UINT_MAX)
		return -EFBIG;
	bl.append(reinterpret_cast<const char *>(p), static_cast<unsigned>(len));
	return cls_cxx_map_set_val(hctx_of(o), std::string(key), &bl);
}

inline int omap_remove(rckpt_cls_obj_t *o, const char *key)
{
	return cls_cxx_map_remove_key(hctx_of(o), std::string(key));
}

inline int omap_list(rckpt_cls_obj_t *o, const char *start_after, unsigned max,
		     int (*fn)(void *, const char *, const uint8_t *, size_t), void *arg, int *more)
{
	std::map<std::string, ceph::bufferlist> vals;
	bool m = false;
	int rc = cls_cxx_map_get_vals(hctx_of(o), std::string(start_after), std::string(), max, &vals, &m);
	*more = 0;
	if (rc < 0)
		return rc;
	for (auto &kv : vals) {
		ceph::bufferlist &bl = kv.second;
		const uint8_t *p = bl.length() ? reinterpret_cast<const uint8_t *>(bl.c_str()) : nullptr;
		rc = fn(arg, kv.first.c_str(), p, bl.length());
		if (rc)
			return rc;
	}
	*more = m ? 1 : 0;
	return 0;
}

inline int remove(rckpt_cls_obj_t *o)
{
	return cls_cxx_remove(hctx_of(o));
}

const rckpt_cls_obj_ops_t ops = { stat, read, write, truncate, omap_get, omap_set, omap_remove, omap_list, remove };

} // namespace rckpt_cls

// Hands the reply's bytes to the OSD's buffer (no copy: a reply can be a
// whole record).
static inline int reply_to(ceph::bufferlist *out, rckpt_cls_out_t *reply)
{
	if (reply->len == 0)
		return 0;
	if (reply->len > UINT_MAX)
		return -EFBIG; /* bodies keep replies within RCKPT_CLS_OUT_MAX */
	out->append(ceph::buffer::claim_malloc(static_cast<unsigned>(reply->len),
					       reinterpret_cast<char *>(reply->p)));
	reply->p = nullptr;
	reply->len = reply->cap = 0;
	return 0;
}

// Input: the request bytes, made contiguous. Output: the body's reply bytes.
// Returns: the body's return code (0 or a negative errno).
template <rckpt_cls_method_fn Body>
static int rckpt_cls_call(cls_method_context_t, ceph::bufferlist *in, ceph::bufferlist *out)
{
	rckpt_cls_out_t reply = RCKPT_CLS_OUT_INIT;
	const size_t in_len = in->length();
	const uint8_t *in_p = in_len ? reinterpret_cast<const uint8_t *>(in->c_str()) : nullptr;
	int rc = Body(in_p, in_len, &reply);
	if (rc == 0)
		rc = reply_to(out, &reply);
	rckpt_buf_free(&reply);
	return rc;
}

// The same for a body that works on the method's object.
template <rckpt_cls_obj_method_fn Body>
static int rckpt_cls_obj_call(cls_method_context_t hctx, ceph::bufferlist *in, ceph::bufferlist *out)
{
	rckpt_cls_out_t reply = RCKPT_CLS_OUT_INIT;
	rckpt_cls_obj_t obj = {};
	obj.ops = &rckpt_cls::ops;
	obj.ctx = hctx;
	const size_t in_len = in->length();
	const uint8_t *in_p = in_len ? reinterpret_cast<const uint8_t *>(in->c_str()) : nullptr;
	int rc = Body(&obj, in_p, in_len, &reply);
	// A trace of every failure: damage and a stale writer's request (-ESTALE)
	// at level 0, in the log as Ceph is set up by default; another refused
	// request at level 1 (debug objclass = 1 shows them); a failure the body
	// gave no reason for at level 10.
	if (rc < 0 && obj.damaged)
		CLS_ERR("rckpt: damaged data: %s (%d)", obj.why, rc);
	else if (rc == -ESTALE && obj.why[0])
		CLS_LOG(0, "rckpt: refused: %s (%d)", obj.why, rc);
	else if (rc < 0 && obj.why[0])
		CLS_LOG(1, "rckpt: refused: %s (%d)", obj.why, rc);
	else if (rc < 0)
		CLS_LOG(10, "rckpt: a method failed (%d)", rc);
	if (rc == 0)
		rc = reply_to(out, &reply);
	rckpt_buf_free(&reply);
	return rc;
}

// Registers one method, logging (not crashing) when the OSD refuses.
// cls_register and cls_register_cxx_method return 1 on success and 0 on
// failure in Pacific's objclass.cc; the SDK header does not say so.
template <rckpt_cls_method_fn Body>
static void rckpt_cls_register_rd(cls_handle_t cls, const char *name)
{
	cls_method_handle_t h;
	if (!cls_register_cxx_method(cls, name, CLS_METHOD_RD, rckpt_cls_call<Body>, &h))
		CLS_ERR("rckpt: could not register method %s", name);
}

template <rckpt_cls_obj_method_fn Body>
static void rckpt_cls_register_obj(cls_handle_t cls, const char *name, int flags)
{
	cls_method_handle_t h;
	if (!cls_register_cxx_method(cls, name, flags, rckpt_cls_obj_call<Body>, &h))
		CLS_ERR("rckpt: could not register method %s", name);
}

#endif // RCKPT_CLS_GLUE_HPP
