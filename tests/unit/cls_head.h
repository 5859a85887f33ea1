/*
 * cls_head.h — for the unit tests of the store's class methods
 * (test_cls_store.c, test_cls_job.c): a method called with no input whose
 * reply is the job's head message. Include after cmocka.h.
 */
#ifndef RCKPT_CLS_HEAD_H
#define RCKPT_CLS_HEAD_H

#include "cls_rckpt_methods.h"
#include "mem_obj.h"
#include "rckpt_store_wire.h"

/* Calls fn on m without input; on success its reply decoded into *h. */
static inline int call_empty(mem_obj_t *m, rckpt_cls_obj_method_fn fn, rckpt_msg_head_t *h)
{
	rckpt_cls_out_t out = RCKPT_CLS_OUT_INIT;
	int rc = mem_obj_call(m, fn, NULL, 0, &out);
	if (rc == 0)
		assert_int_equal(rckpt_msg_head_decode(h, out.p, out.len), 0);
	rckpt_buf_free(&out);
	return rc;
}

#endif /* RCKPT_CLS_HEAD_H */
