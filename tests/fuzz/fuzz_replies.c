/*
 * fuzz_replies.c — libFuzzer target: what a client decodes from the
 * cluster — every reply of the `rckpt` class (materialized, index, steps,
 * head, verified) and a step's attachment — as if a broken or hostile OSD
 * sent it. The first byte picks the decoder. Whatever the bytes: no crash,
 * no leak, no read out of bounds, and what decodes points inside the
 * reply.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_store_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned op;
	if (size < 1)
		return 0;
	op = data[0] % 6;
	data++;
	size--;
	switch (op) {
	case 0: {
		rckpt_msg_materialized_t m;
		if (rckpt_msg_materialized_decode(&m, data, size) == 0 &&
		    (m.record.len > size || (m.record.len && (m.record.p < data || m.record.p + m.record.len > data + size))))
			abort();
		break;
	}
	case 1: {
		rckpt_store_entry_t *e = NULL;
		uint32_t n = 0, i;
		if (rckpt_msg_index_decode(&e, &n, data, size) == 0) {
			for (i = 1; i < n; i++)
				if (e[i].step <= e[i - 1].step)
					abort(); /* the reply promises increasing steps */
			free(e);
		}
		break;
	}
	case 2: {
		rckpt_msg_stepsum_reader_t r;
		uint64_t step;
		rckpt_blob_t sum;
		unsigned k = 0;
		if (rckpt_msg_stepsum_open(&r, data, size) != 0)
			break;
		while (rckpt_msg_stepsum_next(&r, &step, &sum) == 1 && k++ < 100000)
			if (sum.len && (sum.p < data || sum.p + sum.len > data + size))
				abort();
		break;
	}
	case 3: {
		rckpt_msg_head_t h;
		rckpt_store_summary_t s;
		if (rckpt_msg_head_decode(&h, data, size) != 0)
			break;
		if (h.summary.len && (h.summary.p < data || h.summary.p + h.summary.len > data + size ||
				      h.summary.len > RCKPT_STORE_SUMMARY_MAX))
			abort(); /* the head's summary lies in the reply, within the bound */
		(void)rckpt_store_summary_get(&s, h.summary.p, h.summary.len);
		break;
	}
	case 4: {
		rckpt_msg_verified_t v;
		(void)rckpt_msg_verified_decode(&v, data, size);
		break;
	}
	default: {
		uint8_t *out = NULL;
		size_t len = 0;
		if (rckpt_attach_decode(&out, &len, 42, data, size) == 0) {
			if (out == NULL)
				abort();
			if (len) /* ASan checks the bytes are ours */
				(void)(*(volatile uint8_t *)out + *(volatile uint8_t *)(out + len - 1));
			free(out);
		}
		break;
	}
	}
	return 0;
}
