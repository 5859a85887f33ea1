/*
 * rckpt_files.c — rckpt_files.h: the codec on local files, over the
 * safetensors reader, the encoder, step files and the decoder.
 */
#define _POSIX_C_SOURCE 200809L
#define RCKPT_FILES_UNSTABLE
#include "rckpt_files.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rckpt_ckenc.h"
#include "rckpt_safetensors.h"
#include "rckpt_stepfile.h"

_Static_assert((int)RCKPT_F32 == (int)RCKPT_DT_F32 && (int)RCKPT_F16 == (int)RCKPT_DT_F16 &&
		       (int)RCKPT_BF16 == (int)RCKPT_DT_BF16,
	       "the public dtypes are the codec's");
_Static_assert((int)RCKPT_F64 == (int)RCKPT_ST_F64 && (int)RCKPT_I64 == (int)RCKPT_ST_I64 &&
		       (int)RCKPT_I32 == (int)RCKPT_ST_I32 && (int)RCKPT_I16 == (int)RCKPT_ST_I16 &&
		       (int)RCKPT_I8 == (int)RCKPT_ST_I8 && (int)RCKPT_U8 == (int)RCKPT_ST_U8 &&
		       (int)RCKPT_BOOL == (int)RCKPT_ST_BOOL,
	       "the files' other dtypes are the reader's");

struct rckpt_file {
	rckpt_st_t st;
	rckpt_tensor_t *t;
};

size_t rckpt_file_dtype_size(unsigned dtype)
{
	return rckpt_st_dtype_size(dtype);
}

int rckpt_file_read(rckpt_file_t **out, const char *path, char *err, size_t errlen)
{
	return rckpt_file_read_flags(out, path, 0, err, errlen);
}

int rckpt_file_read_flags(rckpt_file_t **out, const char *path, unsigned flags, char *err, size_t errlen)
{
	rckpt_file_t *f = calloc(1, sizeof(*f));
	unsigned i;
	int rc;

	*out = NULL;
	if (f == NULL)
		return -ENOMEM;
	if (flags & ~RCKPT_FILE_ANY_DTYPE) {
		free(f);
		return -EINVAL;
	}
	if ((rc = rckpt_st_read_flags(&f->st, path, flags & RCKPT_FILE_ANY_DTYPE ? RCKPT_ST_ANY : 0, err, errlen))) {
		free(f);
		return rc;
	}
	if ((f->t = calloc(f->st.set.ntensors ? f->st.set.ntensors : 1, sizeof(*f->t))) == NULL) {
		rckpt_file_free(f);
		return -ENOMEM;
	}
	for (i = 0; i < f->st.set.ntensors; i++) {
		const rckpt_ctensor_t *s = &f->st.set.t[i];
		f->t[i].name = s->name;
		f->t[i].dtype = s->dtype;
		f->t[i].ndim = s->ndim;
		memcpy(f->t[i].shape, s->shape, sizeof(f->t[i].shape));
		f->t[i].data = s->data;
	}
	*out = f;
	return 0;
}

int rckpt_file_check(const char *path, char *err, size_t errlen)
{
	return rckpt_st_check(path, err, errlen);
}

int rckpt_file_check_flags(const char *path, unsigned flags, char *err, size_t errlen)
{
	if (flags & ~RCKPT_FILE_ANY_DTYPE)
		return -EINVAL;
	return rckpt_st_check_flags(path, flags & RCKPT_FILE_ANY_DTYPE ? RCKPT_ST_ANY : 0, err, errlen);
}

unsigned rckpt_file_count(const rckpt_file_t *f)
{
	return f->st.set.ntensors;
}

const rckpt_tensor_t *rckpt_file_tensors(const rckpt_file_t *f)
{
	return f->t;
}

void rckpt_file_free(rckpt_file_t *f)
{
	if (f == NULL)
		return;
	rckpt_st_free(&f->st);
	free(f->t);
	free(f);
}

int rckpt_file_write(const char *path, const rckpt_tensor_t *t, unsigned n)
{
	rckpt_tset_t s;
	unsigned i, d;
	int rc = 0;
	memset(&s, 0, sizeof(s));
	if (n && t == NULL)
		return -EINVAL;
	if ((s.t = calloc(n ? n : 1, sizeof(*s.t))) == NULL)
		return -ENOMEM;
	s.ntensors = n;
	for (i = 0; i < n && rc == 0; i++) { /* as rckpt_tset_view, any dtype of a file's */
		rckpt_ctensor_t *o = &s.t[i];
		if (t[i].name == NULL || rckpt_st_dtype_size(t[i].dtype) == 0 || t[i].ndim > RCKPT_MAX_DIMS ||
		    (t[i].data == NULL && t[i].ndim)) {
			rc = -EINVAL;
			break;
		}
		o->name = t[i].name;
		o->dtype = t[i].dtype;
		o->ndim = t[i].ndim;
		o->n = 1;
		for (d = 0; d < t[i].ndim && rc == 0; d++) {
			o->shape[d] = t[i].shape[d];
			if (o->shape[d] && o->n > UINT64_MAX / o->shape[d] / rckpt_st_dtype_size(o->dtype))
				rc = -EINVAL;
			o->n *= o->shape[d];
		}
		o->data = t[i].data;
	}
	if (rc == 0)
		rc = rckpt_tset_sort(&s);
	if (rc == 0)
		rc = rckpt_st_write(path, s.t, s.ntensors);
	rckpt_tset_free(&s);
	return rc;
}

/* ---- step files ---- */

struct rckpt_stepenc {
	rckpt_ckenc_t *e;
	int exact;           /* opts.exact */
	unsigned base_every; /* opts.base_every, for exact steps */
	uint64_t steps;      /* encoded */
};

void rckpt_file_optim_role(const char *name, rckpt_tensor_role_t *r)
{
	static const struct {
		const char *prefix;
		unsigned role;
	} conv[] = { { "exp_avg_sq.", RCKPT_ROLE_MOMENT2 },
		     { "exp_avg.", RCKPT_ROLE_MOMENT1 },
		     { "momentum_buffer.", RCKPT_ROLE_MOMENT1 } };
	unsigned i;

	r->name = name;
	r->role = RCKPT_ROLE_OPTIM;
	r->param = NULL;
	r->eps = 0;
	for (i = 0; i < sizeof(conv) / sizeof(conv[0]); i++) {
		const size_t n = strlen(conv[i].prefix);
		if (strncmp(name, conv[i].prefix, n) == 0 && name[n] != '\0') {
			r->role = conv[i].role;
			r->param = name + n;
			return;
		}
	}
}

int rckpt_stepenc_create(rckpt_stepenc_t **out, const rckpt_stepenc_opts_t *o)
{
	rckpt_ckenc_opts_t eo;
	rckpt_stepenc_t *s;
	int rc;

	*out = NULL;
	if (o == NULL || o->version != RCKPT_STEPENC_OPTS_VERSION || o->eps < 0 || o->bins > 64 ||
	    o->chunk_params > ((uint64_t)1 << 31))
		return -EINVAL;
	rckpt_ckenc_opts_default(&eo);
	if (o->eps > 0)
		eo.eps = o->eps;
	if (o->bins) {
		eo.mode = RCKPT_CKENC_FIXED;
		eo.fixed.bins = o->bins;
	}
	if (o->chunk_params)
		eo.chunk_params = o->chunk_params;
	eo.base_every = o->base_every;
	eo.threads = rckpt_cpus(8); /* chunks on every core it may use (the same bytes as one at a time) */
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->exact = o->exact != 0;
	s->base_every = o->base_every;
	if ((rc = rckpt_ckenc_create(&s->e, &eo))) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int rckpt_stepenc_file(rckpt_stepenc_t *e, const rckpt_file_t *params, const rckpt_file_t *grads,
		       uint64_t step, const char *path, rckpt_step_report_t *rep, char *msg,
		       size_t msglen)
{
	rckpt_ckenc_out_t out;
	rckpt_ckenc_stats_t st;
	int rc;

	memset(&out, 0, sizeof(out));
	memset(rep, 0, sizeof(*rep));
	if (msglen)
		msg[0] = '\0';
	if (e->exact) {
		if (e->base_every && e->steps % e->base_every == 0)
			rckpt_ckenc_restart(e->e);
		rc = rckpt_ckenc_step_whole(e->e, &out, &st, &params->st.set, step);
	} else {
		rc = rckpt_ckenc_step(e->e, &out, &st, &params->st.set, grads ? &grads->st.set : NULL, step,
				      msg, msglen);
	}
	e->steps += rc == 0;
	if (rc == 0 && (rc = rckpt_stepfile_write(path, &out)) != 0 && msglen)
		snprintf(msg, msglen, "cannot write %s", path);
	if (rc == 0) {
		rep->raw_bytes = st.raw_bytes;
		rep->enc_bytes = st.enc_bytes;
		rep->quality = st.quality;
		rep->accepted = st.accepted;
		rep->is_base = st.is_base;
		if (e->exact)
			snprintf(rep->config, sizeof(rep->config), "exact");
		else
			rckpt_qconfig_format(rep->config, sizeof(rep->config), &st.config);
	}
	rckpt_ckenc_out_free(&out);
	return rc;
}

void rckpt_stepenc_destroy(rckpt_stepenc_t *e)
{
	if (e == NULL)
		return;
	rckpt_ckenc_destroy(e->e);
	free(e);
}

struct rckpt_stepdec {
	rckpt_ckdec_t d;
};

int rckpt_stepdec_create(rckpt_stepdec_t **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

int rckpt_stepdec_file(rckpt_stepdec_t *d, const char *path)
{
	rckpt_stepfile_t f;
	int rc = rckpt_st_regular(path, NULL, 0); /* not a directory, never a FIFO */
	if (rc == 0)
		rc = rckpt_stepfile_read(&f, path);
	if (rc)
		return rc;
	rc = rckpt_ckdec_step(&d->d, f.manifest, f.mlen, f.records, f.lens);
	rckpt_stepfile_free(&f);
	return rc;
}

int rckpt_stepdec_write(const rckpt_stepdec_t *d, const char *path, uint64_t *step,
			unsigned *ntensors)
{
	const rckpt_manifest_t *mf = &d->d.mf;
	rckpt_ctensor_t *t;
	uint8_t **vals;
	uint32_t k;
	int rc = d->d.chunk ? 0 : -EINVAL;

	if (rc)
		return rc; /* nothing decoded */
	t = calloc(mf->ntensors ? mf->ntensors : 1, sizeof(*t));
	vals = calloc(mf->ntensors ? mf->ntensors : 1, sizeof(*vals));
	if (t == NULL || vals == NULL) {
		free(t);
		free(vals);
		return -ENOMEM;
	}
	for (k = 0; rc == 0 && k < mf->ntensors; k++) {
		const rckpt_mf_tensor_t *m = &mf->t[k];
		uint64_t n = 1;
		unsigned dd;
		float *f32;
		uint8_t *data;
		for (dd = 0; dd < m->ndim; dd++)
			n *= m->shape[dd];
		f32 = malloc(4 * (size_t)(n ? n : 1));
		t[k].data = vals[k] = data = malloc(rckpt_dtype_size(m->dtype) * (size_t)(n ? n : 1));
		if (!f32 || !data)
			rc = -ENOMEM;
		if (rc == 0 && (rc = rckpt_ckdec_tensor_f32(&d->d, k, f32)) == 0)
			rckpt_narrow_from_f32(data, f32, m->dtype, n);
		free(f32);
		t[k].name = m->name;
		t[k].dtype = m->dtype;
		t[k].ndim = m->ndim;
		memcpy(t[k].shape, m->shape, sizeof(t[k].shape));
		t[k].n = n;
	}
	if (rc == 0)
		rc = rckpt_st_write(path, t, mf->ntensors);
	if (rc == 0 && step)
		*step = mf->step;
	if (rc == 0 && ntensors)
		*ntensors = mf->ntensors;
	for (k = 0; k < mf->ntensors; k++)
		free(vals[k]);
	free(vals);
	free(t);
	return rc;
}

void rckpt_stepdec_destroy(rckpt_stepdec_t *d)
{
	if (d == NULL)
		return;
	rckpt_ckdec_free(&d->d);
	free(d);
}

int rckpt_stepfile_describe(const char *path, FILE *out)
{
	static const char *const kinds[] = { "other", "embedding", "conv", "linear", "norm/bias" };
	static const char *const dtypes[] = { "?", "F32", "F16", "BF16" };
	rckpt_stepfile_t f;
	rckpt_manifest_t m;
	uint32_t i, k;
	int rc;

	if ((rc = rckpt_st_regular(path, NULL, 0)) || (rc = rckpt_stepfile_read(&f, path)))
		return rc;
	if ((rc = rckpt_manifest_decode(&m, f.manifest, f.mlen))) {
		rckpt_stepfile_free(&f);
		return rc;
	}
	fprintf(out, "step        %llu (%s%llu)\n", (unsigned long long)m.step,
		m.parent == RCKPT_NO_PARENT ? "base" : "delta of step ",
		m.parent == RCKPT_NO_PARENT ? 0ull : (unsigned long long)m.parent);
	fprintf(out, "size        %.2f MB of fp32 -> %.1f kB (%.1fx), loss %.3e\n", m.raw_bytes / 1e6,
		(m.enc_bytes + f.mlen) / 1e3, (double)m.raw_bytes / (double)(m.enc_bytes + f.mlen),
		m.quality);
	fprintf(out, "config      bins=%u emb=%u prune=%g metric=%s protect=%g lambda=%g\n", m.cfg.bins,
		m.cfg.emb_bins, (double)m.cfg.prune[3], m.cfg.metric ? "sens" : "mag",
		(double)m.cfg.protect, (double)m.cfg.lambda);
	fprintf(out, "chunks      %u of up to %llu elements\n", m.nchunks,
		(unsigned long long)m.chunk_params);
	for (i = 0; i < m.nchunks; i++) {
		fprintf(out, "  chunk %-4u %10u elements %4u segments %10llu bytes  sha256 ", i,
			m.chunk[i].elements, m.chunk[i].nseg, (unsigned long long)m.chunk[i].record_bytes);
		for (k = 0; k < 8; k++)
			fprintf(out, "%02x", m.chunk[i].sha256[k]);
		fprintf(out, "...\n");
	}
	fprintf(out, "tensors     %u\n", m.ntensors);
	for (i = 0; i < m.ntensors; i++) {
		const rckpt_mf_tensor_t *t = &m.t[i];
		fprintf(out, "  %-32s %-4s %-9s %-9s [", t->name, dtypes[t->dtype < 4 ? t->dtype : 0],
			kinds[t->kind < 5 ? t->kind : 0],
			t->encoding == RCKPT_SEG_LOSSLESS ? "lossless" : "quantized");
		for (k = 0; k < t->ndim; k++)
			fprintf(out, "%s%llu", k ? "," : "", (unsigned long long)t->shape[k]);
		fprintf(out, "] in chunk%s", t->nseg > 1 ? "s" : "");
		for (k = 0; k < t->nseg; k++)
			fprintf(out, " %u", t->seg[k].chunk);
		fprintf(out, "\n");
	}
	rckpt_manifest_free(&m);
	rckpt_stepfile_free(&f);
	return 0;
}
