// cls_glue.hpp — the one piece of C++ every rckpt plugin shares: it adapts a
// C method body (cls_common.h) to the object-class SDK's bufferlist calling
// convention. Nothing else of the plugins is C++.
#ifndef RCKPT_CLS_GLUE_HPP
#define RCKPT_CLS_GLUE_HPP

#include <rados/objclass.h>

extern "C" {
#include "cls_common.h"
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
	if (rc == 0 && reply.len)
		out->append(reinterpret_cast<const char *>(reply.p), reply.len);
	rckpt_buf_free(&reply);
	return rc;
}

// Registers one read method, logging (not crashing) when the OSD refuses.
// cls_register and cls_register_cxx_method return 1 on success and 0 on
// failure in Pacific's objclass.cc; the SDK header does not say so.
template <rckpt_cls_method_fn Body>
static void rckpt_cls_register_rd(cls_handle_t cls, const char *name)
{
	cls_method_handle_t h;
	if (!cls_register_cxx_method(cls, name, CLS_METHOD_RD, rckpt_cls_call<Body>, &h))
		CLS_ERR("rckpt: could not register method %s", name);
}

#endif // RCKPT_CLS_GLUE_HPP
