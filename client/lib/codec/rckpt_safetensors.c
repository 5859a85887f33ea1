/*
 * rckpt_safetensors.c — safetensors over jansson.
 */
#define _POSIX_C_SOURCE 200809L
#include "rckpt_safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The dtypes of a file: the codec's, then those kept as they are. */
static const struct {
	const char *name;
	unsigned dtype, size;
} st_dtypes[] = {
	{ "F32", RCKPT_DT_F32, 4 },  { "F16", RCKPT_DT_F16, 2 }, { "BF16", RCKPT_DT_BF16, 2 },
	{ "F64", RCKPT_ST_F64, 8 },  { "I64", RCKPT_ST_I64, 8 }, { "I32", RCKPT_ST_I32, 4 },
	{ "I16", RCKPT_ST_I16, 2 },  { "I8", RCKPT_ST_I8, 1 },   { "U8", RCKPT_ST_U8, 1 },
	{ "BOOL", RCKPT_ST_BOOL, 1 },
};
#define NDT (sizeof(st_dtypes) / sizeof(st_dtypes[0]))

/* The dtype called s, or 0 (one of the others only with RCKPT_ST_ANY). */
static int dtype_of(const char *s, unsigned flags)
{
	unsigned i;
	for (i = 0; i < NDT; i++)
		if (strcmp(s, st_dtypes[i].name) == 0)
			return i < 3 || (flags & RCKPT_ST_ANY) ? (int)st_dtypes[i].dtype : 0;
	return 0;
}

static const char *dtype_name(unsigned d)
{
	unsigned i;
	for (i = 0; i < NDT; i++)
		if (st_dtypes[i].dtype == d)
			return st_dtypes[i].name;
	return NULL;
}

size_t rckpt_st_dtype_size(unsigned d)
{
	unsigned i;
	for (i = 0; i < NDT; i++)
		if (st_dtypes[i].dtype == d)
			return st_dtypes[i].size;
	return 0;
}

void rckpt_st_free(rckpt_st_t *st)
{
	free(st->set.t);
	free(st->names);
	free(st->buf);
	memset(st, 0, sizeof(*st));
}

/* Indexes the header head[0..hlen) of a file whose data section,
 * data_len bytes, starts at data (NULL: only checked, the tensors' data
 * pointers are then NULL). out->buf and out->size are the caller's. */
static int st_index(rckpt_st_t *out, const uint8_t *head, size_t hlen, uint8_t *data, size_t data_len,
		    unsigned flags, char *err, size_t errlen)
{
	json_t *root = NULL, *v;
	json_error_t je;
	const char *key;
	size_t count, nbytes = 0;
	char *names;
	int rc;

	root = json_loadb((const char *)head, hlen, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL || !json_is_object(root)) {
		rc = fail(err, errlen, -EBADMSG, "not a safetensors file: its header is not a JSON object (%s)",
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
		rc = fail(err, errlen, -ENOMEM, "out of memory for the index of %zu tensors", count);
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
		t->dtype = (unsigned)dtype_of(json_string_value(dt), flags);
		if (t->dtype == 0) {
			rc = fail(err, errlen, -ENOTSUP, "tensor '%s': dtype %s not supported (F32, F16, BF16%s)",
				  key, json_string_value(dt),
				  flags & RCKPT_ST_ANY ? ", F64, I64, I32, I16, I8, U8, BOOL" : "");
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
		if (b >= 0 && e >= b && (uint64_t)e > data_len &&
		    n <= (uint64_t)(e - b) / rckpt_st_dtype_size(t->dtype) &&
		    (uint64_t)(e - b) == n * rckpt_st_dtype_size(t->dtype)) {
			rc = fail(err, errlen, -EBADMSG,
				  "truncated: tensor '%s' ends at byte %lld of the data, and the file holds "
				  "%zu data bytes",
				  key, (long long)e, data_len);
			goto out;
		}
		if (b < 0 || e < b || (uint64_t)e > data_len ||
		    n > (uint64_t)(e - b) / rckpt_st_dtype_size(t->dtype) ||
		    (uint64_t)(e - b) != n * rckpt_st_dtype_size(t->dtype)) {
			rc = fail(err, errlen, -EBADMSG,
				  "tensor '%s': data_offsets [%lld, %lld] do not hold its %llu elements "
				  "within %zu data bytes",
				  key, (long long)b, (long long)e, (unsigned long long)n, data_len);
			goto out;
		}
		t->n = n;
		t->data = data ? data + b : NULL;
		memcpy(names, key, klen);
		t->name = names;
		names += klen;
		out->set.ntensors++;
	}
	rc = rckpt_tset_sort(&out->set); /* names are distinct: JSON_REJECT_DUPLICATES */
	if (rc)
		fail(err, errlen, rc, "cannot sort its tensors");
out:
	json_decref(root);
	return rc;
}

/* The header's length from the file's first 8 bytes, checked against the
 * file's size. */
static int st_header_len(const uint8_t len8[8], uint64_t size, uint64_t *hlen, char *err, size_t errlen)
{
	unsigned i;
	*hlen = 0;
	if (size < 8)
		return fail(err, errlen, -EBADMSG,
			    "not a safetensors file: %llu bytes, less than its 8-byte header length",
			    (unsigned long long)size);
	for (i = 0; i < 8; i++)
		*hlen |= (uint64_t)len8[i] << (8 * i);
	if (*hlen > RCKPT_ST_MAX_HEADER)
		return fail(err, errlen, -EFBIG,
			    "not a safetensors file: its first 8 bytes give a header of %llu bytes (limit %u)",
			    (unsigned long long)*hlen, RCKPT_ST_MAX_HEADER);
	if (*hlen > size - 8)
		return fail(err, errlen, -EBADMSG,
			    "truncated or not a safetensors file: a header of %llu bytes, and %llu bytes "
			    "follow",
			    (unsigned long long)*hlen, (unsigned long long)(size - 8));
	return 0;
}

int rckpt_st_parse(rckpt_st_t *out, uint8_t *buf, size_t size, char *err, size_t errlen)
{
	return rckpt_st_parse_flags(out, buf, size, 0, err, errlen);
}

int rckpt_st_parse_flags(rckpt_st_t *out, uint8_t *buf, size_t size, unsigned flags, char *err, size_t errlen)
{
	uint64_t hlen = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	out->buf = buf;
	out->size = size;
	if ((rc = st_header_len(buf, size, &hlen, err, errlen)) == 0)
		rc = st_index(out, buf + 8, (size_t)hlen, buf + 8 + hlen, size - 8 - (size_t)hlen, flags,
			      err, errlen);
	if (rc)
		rckpt_st_free(out);
	return rc;
}

/* A path that is not a regular file: -EISDIR or -EINVAL, saying what it is. */
static int not_regular(mode_t m, char *err, size_t errlen)
{
	if (S_ISDIR(m))
		return fail(err, errlen, -EISDIR, "%s", "is a directory");
	return fail(err, errlen, -EINVAL, "is %s, not a regular file",
		    S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) ? "a character device"
		    : S_ISBLK(m) ? "a block device" : "a special file");
}

/* Opens path for reading if it is a regular file: *fd and *size, or
 * -EISDIR (a directory), -EINVAL (a FIFO, a socket, a device) or the
 * errno of the open, with the reason in err. A FIFO is never opened (that
 * would wait for a writer); the file is checked again once open. */
static int open_regular(const char *path, int *fd, uint64_t *size, char *err, size_t errlen)
{
	struct stat sb;
	int e;

	*fd = -1;
	if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
		return not_regular(sb.st_mode, err, errlen);
	if ((*fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
		e = errno;
		return fail(err, errlen, -e, "%s", strerror(e));
	}
	if (fstat(*fd, &sb) != 0 || fcntl(*fd, F_SETFL, 0) != 0) {
		e = errno;
		close(*fd);
		*fd = -1;
		return fail(err, errlen, -e, "%s", strerror(e));
	}
	if (!S_ISREG(sb.st_mode)) {
		close(*fd);
		*fd = -1;
		return not_regular(sb.st_mode, err, errlen);
	}
	*size = (uint64_t)sb.st_size;
	return 0;
}

/* Reads len bytes at off: 0, or -EIO (the file is shorter than it said)
 * or the errno. */
static int read_at(int fd, uint8_t *p, size_t len, uint64_t off, char *err, size_t errlen)
{
	while (len) {
		ssize_t n = pread(fd, p, len > ((size_t)1 << 30) ? (size_t)1 << 30 : len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			return fail(err, errlen, -e, "read failed: %s", strerror(e));
		}
		if (n == 0)
			return fail(err, errlen, -EIO, "%s", "short read (did the file shrink while read?)");
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int rckpt_st_read(rckpt_st_t *out, const char *path, char *err, size_t errlen)
{
	return rckpt_st_read_flags(out, path, 0, err, errlen);
}

int rckpt_st_read_flags(rckpt_st_t *out, const char *path, unsigned flags, char *err, size_t errlen)
{
	uint8_t *buf;
	uint64_t size = 0;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	if ((rc = open_regular(path, &fd, &size, err, errlen)))
		return rc;
	buf = size <= SIZE_MAX - 1 ? malloc(size ? (size_t)size : 1) : NULL;
	if (buf == NULL) {
		close(fd);
		return fail(err, errlen, -ENOMEM, "cannot allocate %llu bytes to read it",
			    (unsigned long long)size);
	}
	rc = read_at(fd, buf, (size_t)size, 0, err, errlen);
	close(fd);
	if (rc) {
		free(buf);
		return rc;
	}
	return rckpt_st_parse_flags(out, buf, (size_t)size, flags, err, errlen);
}

int rckpt_st_regular(const char *path, char *err, size_t errlen)
{
	uint64_t size;
	int fd, rc = open_regular(path, &fd, &size, err, errlen);
	if (rc == 0)
		close(fd);
	return rc;
}

int rckpt_st_check(const char *path, char *err, size_t errlen)
{
	return rckpt_st_check_flags(path, 0, err, errlen);
}

int rckpt_st_check_flags(const char *path, unsigned flags, char *err, size_t errlen)
{
	rckpt_st_t st;
	uint8_t len8[8] = { 0 };
	uint8_t *head = NULL;
	uint64_t size = 0, hlen = 0;
	int fd, rc;

	memset(&st, 0, sizeof(st));
	if ((rc = open_regular(path, &fd, &size, err, errlen)))
		return rc;
	if (size >= 8)
		rc = read_at(fd, len8, 8, 0, err, errlen);
	if (rc == 0 && (rc = st_header_len(len8, size, &hlen, err, errlen)) == 0) {
		if ((head = malloc(hlen ? (size_t)hlen : 1)) == NULL)
			rc = fail(err, errlen, -ENOMEM, "cannot allocate its header of %llu bytes",
				  (unsigned long long)hlen);
		else if ((rc = read_at(fd, head, (size_t)hlen, 8, err, errlen)) == 0)
			rc = st_index(&st, head, (size_t)hlen, NULL, (size_t)(size - 8 - hlen), flags, err, errlen);
	}
	close(fd);
	free(head);
	rckpt_st_free(&st);
	return rc;
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
		uint64_t bytes = t[i].n * rckpt_st_dtype_size(t[i].dtype);
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
		size_t bytes = (size_t)t[i].n * rckpt_st_dtype_size(t[i].dtype);
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
