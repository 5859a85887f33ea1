/*
 * rckpt_stepfile.c — step files.
 */
#define _POSIX_C_SOURCE 200809L
#include "rckpt_stepfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rckpt_bytes.h"

#define STEPFILE_MAGIC 0x464b4352u /* "RCKF" */

int rckpt_stepfile_write(const char *path, const rckpt_ckenc_out_t *out)
{
	uint8_t hdr[20], len8[8];
	rckpt_writer_t w = rckpt_writer(hdr, sizeof(hdr));
	char *tmp = malloc(strlen(path) + 5);
	FILE *f;
	uint32_t c;
	int rc = 0;

	if (tmp == NULL)
		return -ENOMEM;
	sprintf(tmp, "%s.tmp", path);
	rckpt_wr_u32(&w, STEPFILE_MAGIC);
	rckpt_wr_u8(&w, 1);
	rckpt_wr_u8(&w, 1);
	rckpt_wr_u16(&w, 0);
	rckpt_wr_u32(&w, out->nchunks);
	rckpt_wr_u64(&w, out->manifest.len);
	f = fopen(tmp, "wb");
	if (f == NULL) {
		rc = -errno;
		free(tmp);
		return rc;
	}
	if (fwrite(hdr, 1, w.pos, f) != w.pos ||
	    fwrite(out->manifest.p, 1, out->manifest.len, f) != out->manifest.len)
		rc = -EIO;
	for (c = 0; rc == 0 && c < out->nchunks; c++) {
		rckpt_writer_t lw = rckpt_writer(len8, 8);
		rckpt_wr_u64(&lw, out->records[c].len);
		if (fwrite(len8, 1, 8, f) != 8 ||
		    fwrite(out->records[c].p, 1, out->records[c].len, f) != out->records[c].len)
			rc = -EIO;
	}
	if (fclose(f) != 0 && rc == 0)
		rc = -EIO;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc)
		remove(tmp);
	free(tmp);
	return rc;
}

void rckpt_stepfile_free(rckpt_stepfile_t *f)
{
	free(f->buf);
	free(f->records);
	free(f->lens);
	memset(f, 0, sizeof(*f));
}

int rckpt_stepfile_read(rckpt_stepfile_t *out, const char *path)
{
	FILE *f = fopen(path, "rb");
	rckpt_reader_t r;
	long size;
	uint32_t c;

	memset(out, 0, sizeof(*out));
	if (f == NULL)
		return -errno;
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return -EIO;
	}
	out->buf = malloc(size ? (size_t)size : 1);
	if (out->buf == NULL || fread(out->buf, 1, (size_t)size, f) != (size_t)size) {
		fclose(f);
		rckpt_stepfile_free(out);
		return out->buf ? -EIO : -ENOMEM;
	}
	fclose(f);
	out->size = (size_t)size;
	r = rckpt_reader(out->buf, out->size);
	if (rckpt_rd_u32(&r) != STEPFILE_MAGIC || rckpt_rd_u8(&r) < 1 || rckpt_rd_u8(&r) != 1 ||
	    rckpt_rd_u16(&r) != 0)
		goto bad;
	out->nchunks = rckpt_rd_u32(&r);
	out->mlen = rckpt_rd_u64(&r);
	out->manifest = rckpt_rd_bytes(&r, out->mlen);
	if (out->manifest == NULL || out->nchunks > rckpt_rd_left(&r) / 8)
		goto bad;
	out->records = calloc(out->nchunks ? out->nchunks : 1, sizeof(*out->records));
	out->lens = calloc(out->nchunks ? out->nchunks : 1, sizeof(*out->lens));
	if (!out->records || !out->lens) {
		rckpt_stepfile_free(out);
		return -ENOMEM;
	}
	for (c = 0; c < out->nchunks; c++) {
		out->lens[c] = rckpt_rd_u64(&r);
		out->records[c] = rckpt_rd_bytes(&r, out->lens[c]);
		if (out->records[c] == NULL)
			goto bad;
	}
	if (rckpt_rd_left(&r) != 0)
		goto bad;
	return 0;
bad:
	rckpt_stepfile_free(out);
	return -EBADMSG;
}
