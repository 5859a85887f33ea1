/*
 * fuzz_safetensors.c — libFuzzer target: the client's safetensors reader
 * (rckpt_st_parse), which reads files users hand to `rckpt codec` and
 * `rckpt ckpt save`. Whatever the bytes, it must not crash, leak or read
 * out of bounds; a file it accepts must describe tensors that lie inside
 * the file, with the element counts their shapes say, findable by name.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_record.h"
#include "rckpt_safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1);
	char err[256];
	rckpt_st_t st;
	unsigned i, k;

	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	if (rckpt_st_parse(&st, buf, size, err, sizeof(err)) != 0) {
		if (memchr(err, '\0', sizeof(err)) == NULL)
			abort(); /* the reason is a string */
		return 0;
	}
	for (i = 0; i < st.set.ntensors; i++) {
		const rckpt_ctensor_t *t = &st.set.t[i];
		uint64_t n = 1, bytes;
		if (t->ndim > RCKPT_ST_MAX_DIMS)
			abort();
		for (k = 0; k < t->ndim; k++)
			n *= t->shape[k];
		bytes = n * rckpt_dtype_size(t->dtype);
		if (n != t->n || (t->n && (t->data < st.buf || t->data > st.buf + st.size ||
					   bytes > (uint64_t)(st.buf + st.size - t->data))))
			abort();
		if (rckpt_tset_find(&st.set, t->name) != t)
			abort();
		if (bytes) /* touch the first and last byte: ASan checks they are ours */
			(void)(*(volatile const uint8_t *)t->data + *(volatile const uint8_t *)(t->data + bytes - 1));
	}
	rckpt_st_free(&st);
	return 0;
}
