/*
 * rckpt_safetensors.c — safetensors over jansson.
 */
#define _POSIX_C_SOURCE 200809L
#include "rckpt_safetensors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rckpt_record.h"

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static int dtype_of(const char *s)
{
	if (strcmp(s, "F32") == 0)
		return RCKPT_DT_F32;
	if (strcmp(s, "F16") == 0)
		return RCKPT_DT_F16;
	if (strcmp(s, "BF16") == 0)
		return RCKPT_DT_BF16;
	return 0;
}

static const char *dtype_name(unsigned d)
{
	return d == RCKPT_DT_F32 ? "F32" : d == RCKPT_DT_F16 ? "F16" : d == RCKPT_DT_BF16 ? "BF16" : NULL;
}

void rckpt_st_free(rckpt_st_t *st)
{
	free(st->set.t);
	free(st->names);
	free(st->buf);
	memset(st, 0, sizeof(*st));
}

int rckpt_st_parse(rckpt_st_t *out, uint8_t *buf, size_t size, char *err, size_t errlen)
{
	json_t *root = NULL, *v;
	json_error_t je;
	const char *key;
	uint64_t hlen = 0;
	size_t data_at, data_len, i, count, nbytes = 0;
	char *names;
	int rc;

	memset(out, 0, sizeof(*out));
	out->buf = buf;
	out->size = size;
	if (size < 8) {
		rc = fail(err, errlen, -EBADMSG, "file of %zu bytes has no header", size);
		goto out;
	}
	for (i = 0; i < 8; i++)
		hlen |= (uint64_t)buf[i] << (8 * i);
	if (hlen > RCKPT_ST_MAX_HEADER) {
		rc = fail(err, errlen, -EFBIG, "header of %llu bytes (limit %u)", (unsigned long long)hlen,
			  RCKPT_ST_MAX_HEADER);
		goto out;
	}
	if (hlen > size - 8) {
		rc = fail(err, errlen, -EBADMSG, "header of %llu bytes runs past the end",
			  (unsigned long long)hlen);
		goto out;
	}
	data_at = 8 + (size_t)hlen;
	data_len = size - data_at;
	root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL || !json_is_object(root)) {
		rc = fail(err, errlen, -EBADMSG, "header is not a JSON object: %s",
			  root ? "other JSON" : je.text);
		goto out;
	}
	count = json_object_size(root) - (json_object_get(root, "__metadata__") != NULL);
	json_object_foreach(root, key, v)
	{
		nbytes += strlen(key) + 1;
	}
	out->set.t = calloc(count ? count : 1, sizeof(*out->set.t));
	out->names = names = malloc(nbytes ? nbytes : 1);
	if (out->set.t == NULL || names == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	json_object_foreach(root, key, v)
	{
		rckpt_ctensor_t *t = &out->set.t[out->set.ntensors];
		size_t klen = strlen(key) + 1;
		json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
		       *offs = json_object_get(v, "data_offsets"), *d;
		json_int_t b, e;
		size_t k;
		uint64_t n = 1;

		if (strcmp(key, "__metadata__") == 0)
			continue;
		if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(shape) ||
		    !json_is_array(offs) || json_array_size(offs) != 2 ||
		    json_array_size(shape) > RCKPT_ST_MAX_DIMS) {
			rc = fail(err, errlen, -EBADMSG, "tensor '%s': malformed entry", key);
			goto out;
		}
		t->dtype = (unsigned)dtype_of(json_string_value(dt));
		if (t->dtype == 0) {
			rc = fail(err, errlen, -ENOTSUP, "tensor '%s': dtype %s not supported (F32, F16, BF16)",
				  key, json_string_value(dt));
			goto out;
		}
		t->ndim = (unsigned)json_array_size(shape);
		json_array_foreach(shape, k, d)
		{
			json_int_t x = json_is_integer(d) ? json_integer_value(d) : -1;
			if (x < 0 || (x > 0 && n > UINT64_MAX / (uint64_t)x)) {
				rc = fail(err, errlen, -EBADMSG, "tensor '%s': bad shape", key);
				goto out;
			}
			t->shape[k] = (uint64_t)x;
			n *= (uint64_t)x;
		}
		b = json_is_integer(json_array_get(offs, 0)) ? json_integer_value(json_array_get(offs, 0)) : -1;
		e = json_is_integer(json_array_get(offs, 1)) ? json_integer_value(json_array_get(offs, 1)) : -1;
		if (b < 0 || e < b || (uint64_t)e > data_len ||
		    n > (uint64_t)(e - b) / rckpt_dtype_size(t->dtype) ||
		    (uint64_t)(e - b) != n * rckpt_dtype_size(t->dtype)) {
			rc = fail(err, errlen, -EBADMSG,
				  "tensor '%s': data_offsets [%lld, %lld] do not hold its %llu elements "
				  "within %zu data bytes",
				  key, (long long)b, (long long)e, (unsigned long long)n, data_len);
			goto out;
		}
		t->n = n;
		t->data = buf + data_at + b;
		memcpy(names, key, klen);
		t->name = names;
		names += klen;
		out->set.ntensors++;
	}
	rc = rckpt_tset_sort(&out->set); /* names are distinct: JSON_REJECT_DUPLICATES */
out:
	json_decref(root);
	if (rc)
		rckpt_st_free(out);
	return rc;
}

int rckpt_st_read(rckpt_st_t *out, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long size;

	memset(out, 0, sizeof(*out));
	if (f == NULL)
		return fail(err, errlen, -errno, "%s", strerror(errno));
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		int e = -errno;
		fclose(f);
		return fail(err, errlen, e ? e : -EIO, "%s", "cannot tell its size");
	}
	buf = malloc(size ? (size_t)size : 1);
	if (buf == NULL) {
		fclose(f);
		return -ENOMEM;
	}
	if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
		fclose(f);
		free(buf);
		return fail(err, errlen, -EIO, "%s", "short read");
	}
	fclose(f);
	return rckpt_st_parse(out, buf, (size_t)size, err, errlen);
}

int rckpt_st_write(const char *path, const rckpt_ctensor_t *t, unsigned n)
{
	json_t *root = json_object();
	char *head = NULL, *tmp = NULL;
	uint64_t off = 0;
	size_t hl, pad;
	unsigned i, k;
	FILE *f = NULL;
	int rc = -ENOMEM;
	uint8_t len8[8];

	if (root == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		json_t *e = json_object(), *shape = json_array();
		uint64_t bytes = t[i].n * rckpt_dtype_size(t[i].dtype);
		if (!dtype_name(t[i].dtype) || t[i].ndim > RCKPT_ST_MAX_DIMS) {
			json_decref(e);
			json_decref(shape);
			rc = -EINVAL;
			goto out;
		}
		for (k = 0; k < t[i].ndim; k++)
			json_array_append_new(shape, json_integer((json_int_t)t[i].shape[k]));
		json_object_set_new(e, "dtype", json_string(dtype_name(t[i].dtype)));
		json_object_set_new(e, "shape", shape);
		json_object_set_new(e, "data_offsets",
				    json_pack("[II]", (json_int_t)off, (json_int_t)(off + bytes)));
		if (json_object_set_new(root, t[i].name, e)) {
			rc = -EINVAL;
			goto out;
		}
		off += bytes;
	}
	head = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	tmp = malloc(strlen(path) + 5);
	if (head == NULL || tmp == NULL)
		goto out;
	sprintf(tmp, "%s.tmp", path);
	hl = strlen(head);
	pad = (8 - hl % 8) % 8; /* data aligned to 8 bytes, as other writers do */
	for (k = 0; k < 8; k++)
		len8[k] = (uint8_t)((uint64_t)(hl + pad) >> (8 * k));
	f = fopen(tmp, "wb");
	if (f == NULL) {
		rc = -errno;
		goto out;
	}
	rc = fwrite(len8, 1, 8, f) == 8 && fwrite(head, 1, hl, f) == hl ? 0 : -EIO;
	for (k = 0; rc == 0 && k < pad; k++)
		rc = fputc(' ', f) == ' ' ? 0 : -EIO;
	for (i = 0; rc == 0 && i < n; i++) {
		size_t bytes = (size_t)t[i].n * rckpt_dtype_size(t[i].dtype);
		rc = fwrite(t[i].data, 1, bytes, f) == bytes ? 0 : -EIO;
	}
	if (fclose(f) != 0 && rc == 0)
		rc = -EIO;
	f = NULL;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc)
		remove(tmp);
out:
	json_decref(root);
	free(head);
	free(tmp);
	return rc;
}
