/*
 * cls_common.h — what the C method bodies of every rckpt object class share.
 *
 * A method body is plain C: it gets the request bytes and fills an output
 * buffer; the C++ glue of each plugin (cls/cls_glue.hpp) moves bytes between
 * Ceph bufferlists and these spans. Bodies return 0 or a negative errno that
 * the OSD passes to the client unchanged. They never trust their input.
 */
#ifndef RCKPT_CLS_COMMON_H
#define RCKPT_CLS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_wire.h"

/* The most a method may return in one call; larger results use a cursor. */
#define RCKPT_CLS_OUT_MAX ((size_t)64 << 20)

/* A method's reply: the glue hands each body an empty buffer whose max is
 * RCKPT_CLS_OUT_MAX, and hands its bytes (malloc'd, as rckpt_buf_t's are)
 * to the OSD's reply without a copy. */
typedef rckpt_buf_t rckpt_cls_out_t;
#define RCKPT_CLS_OUT_INIT { NULL, 0, 0, RCKPT_CLS_OUT_MAX }

typedef int (*rckpt_cls_method_fn)(const uint8_t *in, size_t in_len, rckpt_cls_out_t *out);

/*
 * The object a method runs on. The glue implements these with the OSD's
 * cls_cxx_* calls (changes are applied atomically when the method returns
 * 0, and dropped when it fails); unit tests and fuzzers implement them
 * over memory. Every function returns 0 or a negative errno; -ENOENT when
 * the object or key does not exist.
 */
typedef struct rckpt_cls_obj rckpt_cls_obj_t;
typedef struct rckpt_cls_obj_ops {
	int (*stat)(rckpt_cls_obj_t *o, uint64_t *size);
	/* appends len bytes at off (fewer at the end of the object) to out */
	int (*read)(rckpt_cls_obj_t *o, uint64_t off, size_t len, rckpt_buf_t *out);
	int (*write)(rckpt_cls_obj_t *o, uint64_t off, const uint8_t *p, size_t len);
	int (*truncate)(rckpt_cls_obj_t *o, uint64_t size);
	int (*omap_get)(rckpt_cls_obj_t *o, const char *key, rckpt_buf_t *out);
	int (*omap_set)(rckpt_cls_obj_t *o, const char *key, const uint8_t *p, size_t len);
	int (*omap_remove)(rckpt_cls_obj_t *o, const char *key);
	/* calls fn on up to max keys after start_after ("" from the first),
	 * in key order; *more says whether any are left. fn returning nonzero
	 * stops the walk and is returned. */
	int (*omap_list)(rckpt_cls_obj_t *o, const char *start_after, unsigned max,
			 int (*fn)(void *arg, const char *key, const uint8_t *val, size_t len),
			 void *arg, int *more);
	/* removes the object: its data, omap and xattrs */
	int (*remove)(rckpt_cls_obj_t *o);
} rckpt_cls_obj_ops_t;

#define RCKPT_CLS_WHY_MAX 160

struct rckpt_cls_obj {
	const rckpt_cls_obj_ops_t *ops;
	void *ctx; /* the implementation's */
	/* Why the method failed, for the OSD's log: set by rckpt_cls_fail or
	 * rckpt_cls_damaged ("" when the body gave no reason). */
	char why[RCKPT_CLS_WHY_MAX];
	int damaged; /* the stored data is at fault, not the request */
	int client;  /* the method runs in a client on its own memory
			(rckpt_fold.c), not in an OSD: objects and records of
			older writers, past the OSD's bounds, are read there */
};

/* Says why the method fails ("method: reason", printf-style) and returns
 * rc: a refused request. rckpt_cls_damaged: stored data that fails its
 * checks. The glue logs the first at level 1, the second as an error. */
int rckpt_cls_fail(rckpt_cls_obj_t *o, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int rckpt_cls_damaged(rckpt_cls_obj_t *o, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A method that works on its object. */
typedef int (*rckpt_cls_obj_method_fn)(rckpt_cls_obj_t *obj, const uint8_t *in, size_t in_len,
				       rckpt_cls_out_t *out);

/* The body of every plugin's `version` method: the input must be empty
 * (-EINVAL otherwise); the reply is a version frame (formats/cls-wire.md)
 * naming `plugin`, the project version, the Ceph release the plugin was
 * built against, and the format ranges it understands. */
int rckpt_cls_version_reply(rckpt_cls_out_t *out, const char *plugin,
			    const rckpt_wire_format_range_t *formats, unsigned nformats,
			    const uint8_t *in, size_t in_len);

#endif /* RCKPT_CLS_COMMON_H */
