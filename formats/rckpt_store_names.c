/*
 * rckpt_store_names.c — the store's object names and omap keys, written and
 * parsed (formats/store.md): a parse accepts exactly what the writer
 * writes, nothing else.
 */
#include "rckpt_store_wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int fmt(size_t cap, int n)
{
	return n < 0 || (size_t)n >= cap ? -ERANGE : 0;
}

int rckpt_store_chunk_oid(char *out, size_t cap, uint32_t chunk)
{
	return fmt(cap, snprintf(out, cap, "rckpt.chunk.%05" PRIu32, chunk));
}

int rckpt_store_segment_oid(char *out, size_t cap, uint32_t chunk, uint64_t seg)
{
	if (seg == RCKPT_STORE_NONE)
		return rckpt_store_chunk_oid(out, cap, chunk);
	return fmt(cap, snprintf(out, cap, "rckpt.chunk.%05" PRIu32 ".%020" PRIu64, chunk, seg));
}

/* digits [p, p + n) as a number; -EINVAL if any is not one or it overflows */
static int digits(const char *p, size_t n, uint64_t *v)
{
	size_t i;
	*v = 0;
	for (i = 0; i < n; i++) {
		unsigned d = (unsigned char)p[i] - '0';
		if (d > 9 || *v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		*v = *v * 10 + d;
	}
	return 0;
}

int rckpt_store_parse_chunk_oid(const char *oid, uint32_t *chunk, uint64_t *seg)
{
	const char *p = oid + 12, *dot;
	uint64_t c;
	size_t n;
	if (strncmp(oid, "rckpt.chunk.", 12) != 0)
		return -EINVAL;
	dot = strchr(p, '.');
	n = dot ? (size_t)(dot - p) : strlen(p);
	/* what rckpt_store_segment_oid writes, and nothing else: at least 5
	 * digits, no leading zero past them */
	if (n < 5 || n > 10 || (n > 5 && p[0] == '0') || digits(p, n, &c) || c > UINT32_MAX)
		return -EINVAL;
	*seg = RCKPT_STORE_NONE;
	if (dot && (strlen(dot + 1) != 20 || digits(dot + 1, 20, seg) || *seg == RCKPT_STORE_NONE))
		return -EINVAL;
	*chunk = (uint32_t)c;
	return 0;
}

int rckpt_store_manifest_oid(char *out, size_t cap, uint64_t step)
{
	return fmt(cap, snprintf(out, cap, "rckpt.manifest.%020" PRIu64, step));
}

int rckpt_store_attach_oid(char *out, size_t cap, uint64_t step)
{
	return fmt(cap, snprintf(out, cap, "rckpt.attach.%020" PRIu64, step));
}

int rckpt_store_step_key(char *out, size_t cap, char prefix, uint64_t step)
{
	return fmt(cap, snprintf(out, cap, "%c.%020" PRIu64, prefix, step));
}

int rckpt_store_parse_step_key(uint64_t *step, const char *key, char prefix)
{
	uint64_t v = 0;
	unsigned i;
	if (key[0] != prefix || key[1] != '.')
		return -EBADMSG;
	for (i = 0; i < 20; i++) {
		unsigned d = (unsigned char)key[2 + i] - '0';
		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return -EBADMSG;
		v = v * 10 + d;
	}
	if (key[22] != '\0')
		return -EBADMSG;
	*step = v;
	return 0;
}

int rckpt_store_exact_oid(char *out, size_t cap, uint64_t step, uint32_t chunk)
{
	return fmt(cap, snprintf(out, cap, "rckpt.exact.%020" PRIu64 ".%05" PRIu32, step, chunk));
}

int rckpt_store_parse_exact_oid(const char *oid, uint64_t *step, uint32_t *chunk)
{
	const char *p = oid + 12;
	uint64_t c = 0;
	size_t i;
	*step = 0;
	*chunk = 0;
	if (strncmp(oid, "rckpt.exact.", 12) != 0 || strlen(p) < 26 || p[20] != '.')
		return -EINVAL;
	for (i = 0; i < 20; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -EINVAL;
		*step = *step * 10 + (uint64_t)(p[i] - '0');
	}
	for (i = 21; p[i]; i++) {
		if (p[i] < '0' || p[i] > '9' || i > 30)
			return -EINVAL;
		c = c * 10 + (uint64_t)(p[i] - '0');
	}
	if (c > UINT32_MAX)
		return -EINVAL;
	*chunk = (uint32_t)c;
	return 0;
}
