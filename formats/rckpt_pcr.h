/*
 * rckpt_pcr.h — Progressive Compressed Records (formats/pcr.md): record
 * objects, the dataset index, the cls_pcr messages, and the JPEG scan
 * splitter the builder uses.
 *
 * Decoders take untrusted bytes (the record decoder runs in the OSDs), are
 * bounded by the limits below before they allocate, point into the caller's
 * bytes instead of copying, and return 0, -EBADMSG (malformed),
 * RCKPT_FMT_EVERSION (a newer version), RCKPT_FMT_ECHECKSUM (a CRC that does
 * not match), -ENOMEM. Encoders append to an rckpt_buf_t and return 0,
 * -EINVAL (a field the format cannot hold), -ENOMEM or -EFBIG.
 */
#ifndef RCKPT_PCR_H
#define RCKPT_PCR_H

#include <stddef.h>
#include <stdint.h>

#include "rckpt_buf.h"
#include "rckpt_wire_fields.h"

#define RCKPT_PCR_VERSION 1u
#define RCKPT_PCR_REC_MAGIC 0x52435072u /* "rPCR" as little-endian bytes */
#define RCKPT_PCR_IDX_MAGIC 0x58435072u /* "rPCX" */
#define RCKPT_PCR_FIXED_BYTES 24u       /* a record's fixed head */

/* Limits: a decoder rejects anything past them before allocating. */
#define RCKPT_PCR_MAX_IMAGES 16384u           /* images in one record */
#define RCKPT_PCR_MAX_GROUPS 64u              /* scans of one image, groups of a record */
#define RCKPT_PCR_MAX_HEADER 65536u           /* JPEG header bytes of one image */
#define RCKPT_PCR_MAX_NAME 255u               /* file name bytes */
#define RCKPT_PCR_MAX_LABEL 1024u             /* label bytes */
#define RCKPT_PCR_MAX_HEAD ((uint32_t)64 << 20) /* a record's head */
#define RCKPT_PCR_MAX_RECORD ((uint64_t)1 << 30) /* a record object */
#define RCKPT_PCR_MAX_RECORDS (1u << 20)      /* records of a dataset */
#define RCKPT_PCR_MAX_DATASET_IMAGES (1u << 26)
#define RCKPT_PCR_MAX_PIXELS ((uint64_t)64 << 20) /* width x height of one image */

/* ---- JPEG scans ---- */

/* A JPEG cut at its scans: header = bytes [0, header_len), through the
 * frame header (SOFn); scan s = [start[s], start[s] + len[s]): any table
 * segments before its SOS, the SOS, its entropy-coded data; then EOI.
 * header + scans + EOI is the input, byte for byte. */
typedef struct rckpt_pcr_split {
	uint32_t header_len;
	unsigned nscans;
	uint32_t start[RCKPT_PCR_MAX_GROUPS];
	uint32_t len[RCKPT_PCR_MAX_GROUPS];
	uint16_t width, height;
	uint8_t ncomp;       /* components in the frame */
	uint8_t progressive; /* SOF2 */
	uint8_t luma_se;     /* the highest spectral index (Se, zig-zag 0..63) of
				the scans holding the frame's first component:
				what a decoder at 1/8, 1/4, 1/2 scale keeps is
				index 0, 0..2, 0..9 (RCKPT_PCR_SCALE_AUTO) */
} rckpt_pcr_split_t;

/* Splits jpg[0..len). -EBADMSG when it is not a well-formed JPEG that ends
 * with EOI right after its last scan, -E2BIG past RCKPT_PCR_MAX_GROUPS
 * scans or RCKPT_PCR_MAX_HEADER header bytes. */
int rckpt_pcr_jpeg_split(rckpt_pcr_split_t *out, const uint8_t *jpg, size_t len);

/* The scale divisor RCKPT_PCR_SCALE_AUTO decodes a JPEG at: 8, 4, 2 or 1
 * for a split's luma_se of 0, 1..2, 3..9, more. */
unsigned rckpt_pcr_auto_scale(unsigned luma_se);

/* ---- record objects ---- */

/* One image as the builder hands it to the record encoder. */
typedef struct rckpt_pcr_src {
	uint32_t id; /* dataset-wide index */
	const char *name;
	const uint8_t *label;
	size_t label_len;
	const uint8_t *jpeg; /* the progressive JPEG */
	rckpt_pcr_split_t split;
} rckpt_pcr_src_t;

/* Encodes a whole record object: the head, then group 1, 2, ... Image ids
 * must be consecutive from src[0].id. */
int rckpt_pcr_record_encode(rckpt_buf_t *out, uint32_t record_no, const rckpt_pcr_src_t *src,
			    unsigned n);

/* The fixed head of a record: enough to know how much head to read. */
typedef struct rckpt_pcr_fixed {
	uint32_t nimages;
	uint16_t ngroups;
	uint32_t head_len;
	uint32_t record_no;
} rckpt_pcr_fixed_t;

/* Reads the 24-byte fixed head (src holds at least that). */
int rckpt_pcr_fixed_decode(rckpt_pcr_fixed_t *out, const uint8_t *src, size_t len);

typedef struct rckpt_pcr_img {
	uint32_t id;
	const char *name; /* not NUL-terminated */
	uint8_t name_len;
	const uint8_t *label;
	uint16_t label_len;
	const uint8_t *hdr;
	uint32_t hdr_len;
	uint8_t nscans;
	const uint8_t *scan_lens; /* nscans little-endian u32 */
} rckpt_pcr_img_t;

/* A decoded head. img and pos are allocated; pos[i * ngroups + g] is the
 * offset of image i's scan g+1 from the start of group g+1 (images without
 * that scan hold the offset where it would be). */
typedef struct rckpt_pcr_head {
	rckpt_pcr_fixed_t f;
	uint64_t end[RCKPT_PCR_MAX_GROUPS]; /* absolute end of group g+1 */
	uint32_t crc[RCKPT_PCR_MAX_GROUPS]; /* CRC-32C of group g+1 */
	rckpt_pcr_img_t *img;
	uint32_t *pos;
} rckpt_pcr_head_t;

/* Decodes head bytes src[0..len) (at least f.head_len of them), checks the
 * head's CRC and that group sizes agree with the scan lengths. */
int rckpt_pcr_head_decode(rckpt_pcr_head_t *out, const uint8_t *src, size_t len);
void rckpt_pcr_head_free(rckpt_pcr_head_t *h);

/* Where group g (1..ngroups) starts; group 0 "ends" at head_len. */
static inline uint64_t rckpt_pcr_group_start(const rckpt_pcr_head_t *h, unsigned g)
{
	return g <= 1 ? h->f.head_len : h->end[g - 2];
}

/* The bytes of image i's scan g (1-based), 0 when it has fewer scans. */
uint32_t rckpt_pcr_scan_len(const rckpt_pcr_img_t *im, unsigned g);

/* Checks the CRCs of groups 1..k of a record prefix src[0..len) (len at
 * least end[k-1]). RCKPT_FMT_ECHECKSUM names no group: the caller does. */
int rckpt_pcr_groups_check(const rckpt_pcr_head_t *h, const uint8_t *src, size_t len, unsigned k);

/* The ready-to-decode JPEG of image i at k groups: header + scans 1..k +
 * EOI, appended to out. prefix holds the record through group k. */
int rckpt_pcr_assemble(rckpt_buf_t *out, const rckpt_pcr_head_t *h, unsigned i, unsigned k,
		       const uint8_t *prefix, size_t len);

/* ---- the dataset index ---- */

typedef struct rckpt_pcr_index_rec {
	uint32_t first_id, nimages, head_len;
	uint16_t ngroups;
	uint64_t end[RCKPT_PCR_MAX_GROUPS];
} rckpt_pcr_index_rec_t;

typedef struct rckpt_pcr_index {
	uint32_t nrecords, nimages;
	uint16_t ngroups;       /* the most of any record */
	uint32_t fidelity_sample; /* images fidelity was measured on; 0: none */
	uint64_t created;       /* Unix seconds */
	uint64_t source_bytes;  /* the original JPEGs */
	uint64_t head_bytes;    /* heads of all records */
	uint64_t group_bytes[RCKPT_PCR_MAX_GROUPS];
	double mssim[RCKPT_PCR_MAX_GROUPS]; /* mean SSIM of k groups vs all; -1 unmeasured */
	uint32_t group_images[RCKPT_PCR_MAX_GROUPS]; /* images with a scan g */
	rckpt_pcr_index_rec_t *rec; /* nrecords; allocated by decode */
	/* labels: nimages, each label_off[i]..label_off[i+1] in labels */
	uint32_t *label_off;        /* nimages + 1; allocated by decode */
	const uint8_t *labels;      /* points into the decoded bytes */
} rckpt_pcr_index_t;

int rckpt_pcr_index_encode(rckpt_buf_t *out, const rckpt_pcr_index_t *x);
int rckpt_pcr_index_decode(rckpt_pcr_index_t *out, const uint8_t *src, size_t len);
void rckpt_pcr_index_free(rckpt_pcr_index_t *x);

/* ---- cls_pcr messages (cls-wire frames; types pinned) ---- */

enum rckpt_pcr_msg {
	RCKPT_MSG_PCR_READ = 0x0201,
	RCKPT_MSG_PCR_PREFIX = 0x0202,
	RCKPT_MSG_PCR_IMAGES = 0x0203,
	RCKPT_MSG_PCR_JPEGS = 0x0204,
	RCKPT_MSG_PCR_STAT = 0x0205,
};

#define RCKPT_PCR_GROUPS_ALL 0xFFFFu /* k meaning every group */

/* Each message is described once, by a field table (rckpt_wire_fields.h,
 * formats/rckpt_pcr_msgs.c): */
extern const rckpt_wire_msg_t *const rckpt_pcr_msgs[];
extern const unsigned rckpt_pcr_nmsgs;
const rckpt_wire_msg_t *rckpt_pcr_msg(uint16_t type);
typedef struct rckpt_msg_pcr_read {
	uint16_t k;
} rckpt_msg_pcr_read_t;
typedef struct rckpt_msg_pcr_prefix {
	uint16_t k;
	rckpt_blob_t bytes;
} rckpt_msg_pcr_prefix_t;
typedef struct rckpt_msg_pcr_images {
	uint16_t k;
	rckpt_wire_list_t idx; /* of uint32_t */
} rckpt_msg_pcr_images_t;
typedef struct rckpt_msg_pcr_entry { /* an image of a JPEGS reply */
	uint32_t id;
	rckpt_blob_t name, label, jpeg;
} rckpt_msg_pcr_entry_t;
typedef struct rckpt_msg_pcr_jpegs {
	rckpt_wire_list_t jpegs; /* of rckpt_msg_pcr_entry_t */
} rckpt_msg_pcr_jpegs_t;
/* An image's file name: 1..RCKPT_PCR_MAX_NAME bytes, no '/', no control
 * byte, not "." or "..". */
int rckpt_pcr_name_ok(const char *s, size_t n);

/* read: groups 1..k (RCKPT_PCR_GROUPS_ALL: all). */
int rckpt_msg_pcr_read_encode(rckpt_buf_t *out, uint16_t k);
int rckpt_msg_pcr_read_decode(uint16_t *k, const uint8_t *src, size_t len);
/* its reply: the groups returned and the record's bytes through them. */
int rckpt_msg_pcr_prefix_encode(rckpt_buf_t *out, uint16_t k, const uint8_t *p, size_t len);
int rckpt_msg_pcr_prefix_decode(uint16_t *k, const uint8_t **p, size_t *len, const uint8_t *src,
				size_t srclen);

/* images: k groups of images idx[0..n) (indices in the record, n ≤
 * RCKPT_PCR_MAX_IMAGES). decode points *idx at n little-endian u32. */
int rckpt_msg_pcr_images_encode(rckpt_buf_t *out, uint16_t k, const uint32_t *idx, uint32_t n);
int rckpt_msg_pcr_images_decode(uint16_t *k, const uint8_t **idx, uint32_t *n, const uint8_t *src,
				size_t len);

/* its reply: n JPEGs, each with its image's id, name and label. Built with
 * begin / add / end; read with open / next. */
typedef struct rckpt_pcr_jpeg { /* one image with its name and label, in place */
	uint32_t id;
	const char *name;
	size_t name_len;
	const uint8_t *label;
	size_t label_len;
	const uint8_t *jpeg;
	size_t jpeg_len;
} rckpt_pcr_jpeg_t;

int rckpt_msg_pcr_jpegs_begin(rckpt_buf_t *out, size_t *at, uint32_t n);
/* Appends an image's entry; the JPEG itself is assembled by the caller
 * right after (rckpt_msg_pcr_jpegs_add_done fixes its length). */
int rckpt_msg_pcr_jpegs_add(rckpt_buf_t *out, const rckpt_pcr_img_t *im, size_t *len_at);
int rckpt_msg_pcr_jpegs_add_done(rckpt_buf_t *out, size_t len_at);
/* 0, or -EINVAL when the reply is not what a decoder takes (fewer or
 * more entries than begin's n). */
int rckpt_msg_pcr_jpegs_end(rckpt_buf_t *out, size_t at);

typedef struct rckpt_pcr_jpegs_reader {
	rckpt_wire_cursor_t c;
} rckpt_pcr_jpegs_reader_t;

int rckpt_msg_pcr_jpegs_open(rckpt_pcr_jpegs_reader_t *r, const uint8_t *src, size_t len);
/* 1 and the next entry, 0 at the end, or -EBADMSG. */
int rckpt_msg_pcr_jpegs_next(rckpt_pcr_jpegs_reader_t *r, rckpt_pcr_jpeg_t *out);

/* stat: empty request; the reply: */
typedef struct rckpt_msg_pcr_stat {
	uint32_t record_no, nimages, head_len;
	uint16_t ngroups;
	uint64_t size;
	uint64_t end[RCKPT_PCR_MAX_GROUPS];
} rckpt_msg_pcr_stat_t;

int rckpt_msg_pcr_stat_encode(rckpt_buf_t *out, const rckpt_msg_pcr_stat_t *m);
int rckpt_msg_pcr_stat_decode(rckpt_msg_pcr_stat_t *m, const uint8_t *src, size_t len);

#endif /* RCKPT_PCR_H */
