/*
 * rckpt_pcr_script.c — the lossless transcode of a JPEG to a progressive
 * one whose scans use spectral selection alone (no successive
 * approximation): each scan sends some coefficients of a component whole.
 * libjpeg-turbo decodes refinement scans slowest; a prefix of these scans
 * decodes faster, where the default script (libjpeg's, what TurboJPEG's
 * transform writes) gives more fidelity per byte at low groups. The
 * builder's `scan_script` picks one (rckpt.h); docs/datasets.md, "The scan
 * script", has the trade-off. TurboJPEG cannot set a script: this
 * uses libjpeg's API of the same library (libjpeg-turbo).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "rckpt_pcr_internal.h"

/* What a hostile progressive input may make the reader do: TurboJPEG's
 * TJFLAG_LIMITSCANS allows 500 scans. */
#define MAX_INPUT_SCANS 500

typedef struct err {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	char *msg;
	size_t cap;
	unsigned char *buf; /* jpeg_mem_dest's, here so that a longjmp keeps it */
	unsigned long blen;
} err_t;

static void on_error(j_common_ptr c)
{
	err_t *e = (err_t *)c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jb, 1);
}

/* A warning (a damaged or truncated file) is an error, as the default
 * path's TJFLAG_STOPONWARNING makes it. */
static void on_message(j_common_ptr c, int level)
{
	if (level < 0)
		on_error(c);
}

static void on_progress(j_common_ptr c)
{
	if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > MAX_INPUT_SCANS) {
		err_t *e = (err_t *)c->err;
		snprintf(e->msg, e->cap, "more than %d scans", MAX_INPUT_SCANS);
		longjmp(e->jb, 1);
	}
}

/* Ten scans, as the default script has for colour: the DC of every
 * component, then the luma's coefficients in bands, the chroma's whole
 * after the first band. */
static const jpeg_scan_info colour[] = {
	{ 3, { 0, 1, 2 }, 0, 0, 0, 0 }, { 1, { 0 }, 1, 2, 0, 0 },   { 1, { 1 }, 1, 63, 0, 0 },
	{ 1, { 2 }, 1, 63, 0, 0 },	{ 1, { 0 }, 3, 5, 0, 0 },   { 1, { 0 }, 6, 9, 0, 0 },
	{ 1, { 0 }, 10, 14, 0, 0 },	{ 1, { 0 }, 15, 20, 0, 0 }, { 1, { 0 }, 21, 35, 0, 0 },
	{ 1, { 0 }, 36, 63, 0, 0 },
};
static const jpeg_scan_info grey[] = {
	{ 1, { 0 }, 0, 0, 0, 0 },   { 1, { 0 }, 1, 2, 0, 0 },	{ 1, { 0 }, 3, 5, 0, 0 },
	{ 1, { 0 }, 6, 9, 0, 0 },   { 1, { 0 }, 10, 14, 0, 0 }, { 1, { 0 }, 15, 20, 0, 0 },
	{ 1, { 0 }, 21, 27, 0, 0 }, { 1, { 0 }, 28, 35, 0, 0 }, { 1, { 0 }, 36, 48, 0, 0 },
	{ 1, { 0 }, 49, 63, 0, 0 },
};

int rckpt_pcr_transcode_spectral(const uint8_t *src, size_t len, uint8_t **out, size_t *out_len, char *why,
				 size_t why_cap)
{
	struct jpeg_decompress_struct din;
	struct jpeg_compress_struct cout;
	struct jpeg_progress_mgr prog;
	err_t e;
	char msg[JMSG_LENGTH_MAX] = "";
	volatile int started = 0;

	*out = NULL;
	*out_len = 0;
	if (len == 0 || len > ULONG_MAX) {
		snprintf(why, why_cap, "%s", "empty or too large");
		return -EBADMSG;
	}
	memset(&din, 0, sizeof(din));
	memset(&cout, 0, sizeof(cout));
	din.err = jpeg_std_error(&e.pub);
	cout.err = &e.pub;
	e.pub.error_exit = on_error;
	e.pub.emit_message = on_message;
	e.msg = msg;
	e.cap = sizeof(msg);
	e.buf = NULL;
	e.blen = 0;
	if (setjmp(e.jb)) {
		if (started & 2)
			jpeg_destroy_compress(&cout);
		if (started & 1)
			jpeg_destroy_decompress(&din);
		free(e.buf);
		snprintf(why, why_cap, "%s", msg);
		return -EBADMSG;
	}
	jpeg_create_decompress(&din);
	started |= 1;
	prog.progress_monitor = on_progress;
	din.progress = &prog;
	jpeg_mem_src(&din, src, (unsigned long)len);
	jpeg_read_header(&din, TRUE);
	{
		jvirt_barray_ptr *coef = jpeg_read_coefficients(&din);
		jpeg_create_compress(&cout);
		started |= 2;
		jpeg_copy_critical_parameters(&din, &cout);
		if (cout.num_components == 3) {
			cout.scan_info = colour;
			cout.num_scans = (int)(sizeof(colour) / sizeof(colour[0]));
		} else if (cout.num_components == 1) {
			cout.scan_info = grey;
			cout.num_scans = (int)(sizeof(grey) / sizeof(grey[0]));
		} else {
			jpeg_simple_progression(&cout); /* CMYK and others: the default */
		}
		cout.optimize_coding = TRUE;
		jpeg_mem_dest(&cout, &e.buf, &e.blen);
		jpeg_write_coefficients(&cout, coef);
		jpeg_finish_compress(&cout);
	}
	jpeg_finish_decompress(&din);
	jpeg_destroy_compress(&cout);
	jpeg_destroy_decompress(&din);
	*out = e.buf;
	*out_len = e.blen;
	return 0;
}
