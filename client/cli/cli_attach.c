/*
 * cli_attach.c — the tensors a step's attachment keeps exact, as files
 * hold them (cli_attach.h). An attachment written by the Python binding
 * (client/python/rckpt/_plain.py) is
 *
 *     "RCKP" | u32 JSON length | JSON | the bytes of its tensors and arrays
 *
 * where every JSON object is one of the encoder's forms: {"__dict__":
 * [[key, value], ...]}, {"__tuple__": [...]}, {"__ref__": NAME} (a tensor
 * of the step), {"__tensor__": [dtype, shape, offset, length]},
 * {"__ndarray__" | "__npscalar__": [...]}. Read as untrusted input: every
 * offset, length and shape is checked against the bytes before use.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli_attach.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define MAGIC "RCKP"
#define FMT_FLAT "rckpt-python/1" /* a flat state_dict: its keys name the tensors */
#define FMT_TREE "rckpt-python/2" /* a nested one: its tensors named by path */
#define OPT_PREFIX "@optimizer"   /* the optimizer's tensors' names begin so */

static const struct {
	const char *py; /* the binding's name of the dtype */
	unsigned dtype;
} dtypes[] = { { "float32", RCKPT_F32 }, { "float16", RCKPT_F16 }, { "bfloat16", RCKPT_BF16 },
	       { "float64", RCKPT_F64 }, { "int64", RCKPT_I64 },    { "int32", RCKPT_I32 },
	       { "int16", RCKPT_I16 },   { "int8", RCKPT_I8 },      { "uint8", RCKPT_U8 },
	       { "bool", RCKPT_BOOL } };
#define NDT (sizeof(dtypes) / sizeof(dtypes[0]))

static const char *py_dtype(unsigned d)
{
	unsigned i;
	for (i = 0; i < NDT; i++)
		if (dtypes[i].dtype == d)
			return dtypes[i].py;
	return NULL;
}

/* Python's json writes NaN, Infinity and -Infinity as bare words, which
 * JSON (and jansson) has not: outside strings they are read as these
 * strings, which no JSON the binding writes holds (a NUL, then a marker),
 * and written back as the words. */
static const char *const nonfinite[3][2] = { { "-Infinity", "\\u0000rckpt:-Infinity" },
					     { "Infinity", "\\u0000rckpt:Infinity" },
					     { "NaN", "\\u0000rckpt:NaN" } };

/* text[0..n) with the bare words quoted as their markers: malloc'd, *m
 * its length; NULL for -ENOMEM. */
static char *quote_nonfinite(const char *text, size_t n, size_t *m)
{
	char *o = malloc(6 * n + 1); /* a word grows at most 17/3 times */
	size_t i = 0, k = 0;
	int in = 0;
	unsigned q;
	if (o == NULL)
		return NULL;
	while (i < n) {
		if (in) {
			if (text[i] == '\\' && i + 1 < n) {
				o[k++] = text[i++];
			} else if (text[i] == '"') {
				in = 0;
			}
			o[k++] = text[i++];
			continue;
		}
		for (q = 0; q < 3; q++) {
			size_t w = strlen(nonfinite[q][0]);
			if (i + w <= n && memcmp(text + i, nonfinite[q][0], w) == 0)
				break;
		}
		if (q < 3) {
			k += (size_t)sprintf(o + k, "\"%s\"", nonfinite[q][1]);
			i += strlen(nonfinite[q][0]);
			continue;
		}
		in = text[i] == '"';
		o[k++] = text[i++];
	}
	o[k] = '\0';
	*m = k;
	return o;
}

/* The attachment's document and where its bytes begin; NULL when att is
 * not one the binding wrote, or its JSON cannot be read here (*bad then
 * says it has the binding's magic). */
static json_t *parse(const uint8_t *att, size_t len, size_t *base, int *bad)
{
	uint32_t n;
	size_t m = 0;
	char *text;
	json_t *doc;
	*bad = 0;
	if (len < 8 || memcmp(att, MAGIC, 4) != 0)
		return NULL;
	*bad = 1;
	n = (uint32_t)att[4] | (uint32_t)att[5] << 8 | (uint32_t)att[6] << 16 | (uint32_t)att[7] << 24;
	if (n > len - 8 || (text = quote_nonfinite((const char *)att + 8, n, &m)) == NULL)
		return NULL;
	*base = 8 + (size_t)n;
	doc = json_loadb(text, m, JSON_ALLOW_NUL, NULL);
	free(text);
	*bad = doc == NULL;
	return doc;
}

/* The value of key in a {"__dict__": [[key, value], ...]} object, or NULL. */
static json_t *dict_get(json_t *d, const char *key)
{
	json_t *items = json_object_get(d, "__dict__"), *kv;
	size_t i;
	json_array_foreach(items, i, kv)
	{
		json_t *k = json_array_get(kv, 0);
		if (json_is_string(k) && strcmp(json_string_value(k), key) == 0)
			return json_array_get(kv, 1);
	}
	return NULL;
}

/* The blob [dtype, shape, offset, length] of a __tensor__, __ndarray__ or
 * __npscalar__ object: 0 when in bounds of the bytes (blen from base). */
static int blob_of(json_t *spec, uint64_t blen, uint64_t *off, uint64_t *len)
{
	json_t *o = json_array_get(spec, 2), *l = json_array_get(spec, 3);
	if (!json_is_array(spec) || json_array_size(spec) != 4 || !json_is_integer(o) || !json_is_integer(l) ||
	    json_integer_value(o) < 0 || json_integer_value(l) < 0)
		return -EBADMSG;
	*off = (uint64_t)json_integer_value(o);
	*len = (uint64_t)json_integer_value(l);
	return *off <= blen && *len <= blen - *off ? 0 : -EBADMSG;
}

static json_t *blob_spec(json_t *v)
{
	json_t *s = json_object_get(v, "__tensor__");
	if (s == NULL)
		s = json_object_get(v, "__ndarray__");
	if (s == NULL)
		s = json_object_get(v, "__npscalar__");
	return s;
}

/* A walk of the document: the tensors taken out (split) or put back
 * (join), and the bytes of the result's blobs. */
typedef struct walk {
	const uint8_t *bytes; /* the attachment's blobs */
	uint64_t blen;
	uint8_t *out;         /* the result's blobs */
	size_t olen, ocap;
	cli_exact_t *x;       /* split: the tensors taken */
	unsigned nx, xcap;
	cli_find_fn find;     /* join */
	void *arg;
	cli_want_fn want;     /* split: the tensors to take (NULL: every one) */
	void *warg;
	char **names;         /* join: the tensors put back */
	unsigned nnames;
	char *msg;
	size_t msglen;
} walk_t;

static int out_put(walk_t *w, const void *p, size_t n, uint64_t *at)
{
	if (w->olen + n > w->ocap) {
		size_t cap = w->ocap ? w->ocap : 4096;
		uint8_t *o;
		while (cap < w->olen + n)
			cap *= 2;
		if ((o = realloc(w->out, cap)) == NULL)
			return -ENOMEM;
		w->out = o;
		w->ocap = cap;
	}
	if (n)
		memcpy(w->out + w->olen, p, n);
	*at = w->olen;
	w->olen += n;
	return 0;
}

/* A blob kept: its bytes into the result, its offset rewritten. */
static int keep_blob(walk_t *w, json_t *spec)
{
	uint64_t off, len, at;
	int rc = blob_of(spec, w->blen, &off, &len);
	if (rc == 0)
		rc = out_put(w, w->bytes + off, (size_t)len, &at);
	if (rc == 0)
		rc = json_array_set_new(spec, 2, json_integer((json_int_t)at)) ? -ENOMEM : 0;
	return rc;
}

/* Path component of a dict key, as the binding's _segment: NULL (malloc'd
 * otherwise) for a key that names no path. */
static char *segment(json_t *k)
{
	char *s;
	if (json_is_integer(k)) {
		if ((s = malloc(24)) != NULL)
			snprintf(s, 24, "#%lld", (long long)json_integer_value(k));
		return s;
	}
	if (!json_is_string(k))
		return NULL;
	{
		const char *v = json_string_value(k);
		size_t n = strlen(v), i, o = 0;
		if ((s = malloc(3 * n + 4)) == NULL)
			return NULL;
		if (n == 0) {
			strcpy(s, "%E");
			return s;
		}
		for (i = 0; i < n; i++) {
			if (v[i] == '%' || v[i] == '/' || (i == 0 && v[i] == '#')) {
				o += (size_t)sprintf(s + o, "%%%02X", (unsigned char)v[i]);
			} else {
				s[o++] = v[i];
			}
		}
		s[o] = '\0';
		return s;
	}
}

static char *join_path(const char *path, const char *seg)
{
	char *p = malloc(strlen(path) + strlen(seg) + 2);
	if (p)
		sprintf(p, "%s%s%s", path, *path ? "/" : "", seg);
	return p;
}

/* Split: tensor v (a __tensor__ object) named name, taken out when a file
 * can hold it; *ref then the reference that replaces it. */
static int take(walk_t *w, json_t *v, const char *name, int optim, json_t **ref)
{
	json_t *spec = json_object_get(v, "__tensor__"), *shape = json_array_get(spec, 1), *d;
	const char *dt = json_string_value(json_array_get(spec, 0));
	uint64_t off, len, n = 1;
	cli_exact_t *e;
	unsigned i, dtype = 0;
	size_t k, es;

	*ref = NULL;
	if (blob_of(spec, w->blen, &off, &len) || dt == NULL || !json_is_array(shape) ||
	    json_array_size(shape) > RCKPT_MAX_DIMS || (w->want && !w->want(w->warg, name)))
		return 0;
	for (i = 0; i < NDT && dtype == 0; i++)
		if (strcmp(dt, dtypes[i].py) == 0)
			dtype = dtypes[i].dtype;
	if (dtype == 0) /* complex: no file dtype for it, it stays */
		return 0;
	es = rckpt_file_dtype_size(dtype);
	json_array_foreach(shape, k, d)
	{
		if (!json_is_integer(d) || json_integer_value(d) < 0 ||
		    (json_integer_value(d) && n > UINT64_MAX / (uint64_t)json_integer_value(d)))
			return 0;
		n *= (uint64_t)json_integer_value(d);
	}
	if (n > len / es || n * es != len)
		return 0;
	if (w->nx == w->xcap) {
		unsigned cap = w->xcap ? 2 * w->xcap : 16;
		cli_exact_t *x = realloc(w->x, cap * sizeof(*x));
		if (x == NULL)
			return -ENOMEM;
		w->x = x;
		w->xcap = cap;
	}
	e = &w->x[w->nx];
	memset(e, 0, sizeof(*e));
	if ((e->name = strdup(name)) == NULL)
		return -ENOMEM;
	w->nx++;
	e->t.name = e->name;
	e->t.dtype = dtype;
	e->t.ndim = (unsigned)json_array_size(shape);
	json_array_foreach(shape, k, d) e->t.shape[k] = (uint64_t)json_integer_value(d);
	e->t.data = w->bytes + off;
	e->optim = optim;
	*ref = json_pack("{s:s, s:b}", "__ref__", name, "__exact__", 1);
	return *ref ? 0 : -ENOMEM;
}

/* Join: reference v to an exact tensor, put back from the files. */
static int put_back(walk_t *w, json_t *v, json_t **out)
{
	const char *name = json_string_value(json_object_get(v, "__ref__"));
	const rckpt_tensor_t *t = name ? w->find(w->arg, name) : NULL;
	json_t *shape;
	uint64_t n = 1, at;
	char **nn;
	unsigned k;
	int rc;

	*out = NULL;
	if (t == NULL || py_dtype(t->dtype) == NULL) {
		snprintf(w->msg, w->msglen, "the state keeps tensor '%s' exact, and no file beside it holds it%s",
			 name ? name : "?", t ? " in a dtype it can keep" : "");
		return -ENOENT;
	}
	for (k = 0; k < t->ndim; k++)
		n *= t->shape[k];
	if ((rc = out_put(w, t->data, (size_t)(n * rckpt_file_dtype_size(t->dtype)), &at)))
		return rc;
	shape = json_array();
	for (k = 0; shape && k < t->ndim; k++)
		json_array_append_new(shape, json_integer((json_int_t)t->shape[k]));
	*out = shape ? json_pack("{s:[s, o, I, I]}", "__tensor__", py_dtype(t->dtype), shape, (json_int_t)at,
				 (json_int_t)(n * rckpt_file_dtype_size(t->dtype)))
		     : NULL;
	if (*out == NULL || (nn = realloc(w->names, (w->nnames + 1) * sizeof(*nn))) == NULL)
		return -ENOMEM;
	w->names = nn;
	return (w->names[w->nnames++] = strdup(name)) ? 0 : -ENOMEM;
}

/* Walks value *vp at path (NULL: no path names what is below: nothing is
 * taken there). Split takes __tensor__ leaves; join puts exact references
 * back; both carry every other blob into the result. */
static int walk(walk_t *w, json_t **vp, const char *path, int optim)
{
	json_t *v = *vp, *items, *kv, *rep = NULL;
	size_t i;
	int rc = 0;

	if (json_is_array(v)) {
		json_array_foreach(v, i, kv)
		{
			char seg[24], *p = NULL;
			json_t *x = kv;
			snprintf(seg, sizeof(seg), "#%zu", i);
			if (path && (p = join_path(path, seg)) == NULL)
				return -ENOMEM;
			rc = walk(w, &x, p, optim);
			free(p);
			if (rc == 0 && x != kv)
				rc = json_array_set_new(v, i, x) ? -ENOMEM : 0;
			if (rc)
				return rc;
		}
		return 0;
	}
	if (!json_is_object(v))
		return 0;
	if (blob_spec(v)) {
		if (!w->find && path && json_object_get(v, "__tensor__")) {
			if ((rc = take(w, v, path, optim, &rep)))
				return rc;
			if (rep) {
				*vp = rep;
				return 0;
			}
		}
		return keep_blob(w, blob_spec(v));
	}
	if (w->find && json_is_true(json_object_get(v, "__exact__")) && json_object_get(v, "__ref__")) {
		if ((rc = put_back(w, v, &rep)) == 0)
			*vp = rep;
		else
			json_decref(rep);
		return rc;
	}
	if ((items = json_object_get(v, "__tuple__")) != NULL) /* an array, indexed as a list's */
		return json_is_array(items) ? walk(w, &items, path, optim) : -EBADMSG;
	if ((items = json_object_get(v, "__dict__")) == NULL)
		return 0;
	{
		int named = path != NULL; /* a key that names no path: nothing below is taken */
		json_array_foreach(items, i, kv)
		{
			char *s = segment(json_array_get(kv, 0));
			named &= s != NULL;
			free(s);
		}
		json_array_foreach(items, i, kv)
		{
			json_t *x = json_array_get(kv, 1), *x0 = x, *key = json_array_get(kv, 0), *k0 = key;
			char *s = named ? segment(json_array_get(kv, 0)) : NULL, *p = NULL;
			if (!json_is_array(kv) || json_array_size(kv) != 2)
				return -EBADMSG;
			if (named && (s == NULL || (p = join_path(path, s)) == NULL))
				rc = -ENOMEM;
			if (rc == 0) /* a key's blobs (a NumPy scalar as a key) are carried too */
				rc = walk(w, &key, NULL, optim);
			if (rc == 0 && key != k0)
				rc = json_array_set_new(kv, 0, key) ? -ENOMEM : 0;
			if (rc == 0)
				rc = walk(w, &x, p, optim);
			if (rc == 0 && x != x0)
				rc = json_array_set_new(kv, 1, x) ? -ENOMEM : 0;
			free(s);
			free(p);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Split's walk of a flat state: "other" by its keys (the state_dict's),
 * the optimizer's state as @optimizer/PID/KEY; nothing else. */
static int walk_flat(walk_t *w, json_t *doc)
{
	json_t *other = dict_get(doc, "other"), *opt = dict_get(doc, "optimizer");
	json_t *st = opt ? dict_get(opt, "state") : NULL, *items, *kv;
	size_t i, k;
	int rc = 0;

	items = json_object_get(other, "__dict__");
	json_array_foreach(items, i, kv)
	{
		json_t *key = json_array_get(kv, 0), *x = json_array_get(kv, 1), *rep = NULL;
		if (!json_is_string(key) || !json_is_object(x) || !json_object_get(x, "__tensor__"))
			continue;
		if ((rc = take(w, x, json_string_value(key), 0, &rep)))
			return rc;
		if (rep && json_array_set_new(kv, 1, rep))
			return -ENOMEM;
	}
	items = json_object_get(st, "__dict__");
	json_array_foreach(items, i, kv)
	{
		json_t *pid = json_array_get(kv, 0), *sub = json_object_get(json_array_get(kv, 1), "__dict__"), *kv2;
		char head[64];
		if (json_is_integer(pid))
			snprintf(head, sizeof(head), OPT_PREFIX "/%lld/", (long long)json_integer_value(pid));
		else if (json_is_string(pid) && strlen(json_string_value(pid)) < 40)
			snprintf(head, sizeof(head), OPT_PREFIX "/%s/", json_string_value(pid));
		else
			continue;
		json_array_foreach(sub, k, kv2)
		{
			json_t *key = json_array_get(kv2, 0), *x = json_array_get(kv2, 1), *rep = NULL;
			char *name;
			if (!json_is_string(key) || !json_is_object(x) || !json_object_get(x, "__tensor__"))
				continue;
			if ((name = malloc(strlen(head) + strlen(json_string_value(key)) + 1)) == NULL)
				return -ENOMEM;
			sprintf(name, "%s%s", head, json_string_value(key));
			rc = take(w, x, name, 1, &rep);
			free(name);
			if (rc)
				return rc;
			if (rep && json_array_set_new(kv2, 1, rep))
				return -ENOMEM;
		}
	}
	return 0;
}

/* The markers of js put back as the bare words, in place. */
static void unquote_nonfinite(char *js)
{
	unsigned q;
	for (q = 0; q < 3; q++) {
		char pat[40], *at;
		const size_t w = strlen(nonfinite[q][0]);
		snprintf(pat, sizeof(pat), "\"%s\"", nonfinite[q][1]);
		while ((at = strstr(js, pat)) != NULL) {
			memcpy(at, nonfinite[q][0], w);
			memmove(at + w, at + strlen(pat), strlen(at + strlen(pat)) + 1);
		}
	}
}

/* The attachment of doc and w's blobs. */
static int serialize(walk_t *w, json_t *doc, uint8_t **out, size_t *outlen)
{
	char *js = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
	size_t n;
	uint8_t *o;
	if (js)
		unquote_nonfinite(js);
	n = js ? strlen(js) : 0;
	if (js == NULL || n > UINT32_MAX || (o = malloc(8 + n + w->olen)) == NULL) {
		free(js);
		return -ENOMEM;
	}
	memcpy(o, MAGIC, 4);
	o[4] = (uint8_t)n;
	o[5] = (uint8_t)(n >> 8);
	o[6] = (uint8_t)(n >> 16);
	o[7] = (uint8_t)(n >> 24);
	memcpy(o + 8, js, n);
	if (w->olen)
		memcpy(o + 8 + n, w->out, w->olen);
	free(js);
	*out = o;
	*outlen = 8 + n + w->olen;
	return 0;
}

int cli_attach_split(const uint8_t *att, size_t len, cli_want_fn want, void *warg, cli_exact_t **x, unsigned *nx,
		     uint8_t **out, size_t *outlen, int *unread)
{
	size_t base = 0;
	json_t *doc = parse(att, len, &base, unread), *fmt, *all = NULL;
	walk_t w;
	int rc = 0;

	*x = NULL;
	*nx = 0;
	*out = NULL;
	*outlen = 0;
	if (doc == NULL)
		return 0;
	memset(&w, 0, sizeof(w));
	w.want = want;
	w.warg = warg;
	w.bytes = att + base;
	w.blen = len - base;
	fmt = dict_get(doc, "format");
	if (json_is_string(fmt) && strcmp(json_string_value(fmt), FMT_FLAT) == 0) {
		rc = walk_flat(&w, doc);
		if (rc == 0 && w.nx) { /* then every blob left, in order, into the result */
			all = doc;
			w.find = NULL;
			rc = walk(&w, &all, NULL, 0);
		}
	} else if (json_is_string(fmt) && strcmp(json_string_value(fmt), FMT_TREE) == 0) {
		json_t *items = json_object_get(doc, "__dict__"), *kv;
		size_t i;
		json_array_foreach(items, i, kv)
		{
			json_t *key = json_array_get(kv, 0), *v = json_array_get(kv, 1), *v0 = v;
			const char *k = json_string_value(key);
			const char *root = k && strcmp(k, "tree") == 0 ? "" : k && strcmp(k, "optimizer") == 0 ? OPT_PREFIX : NULL;
			rc = walk(&w, &v, root, root && *root);
			if (rc == 0 && v != v0)
				rc = json_array_set_new(kv, 1, v) ? -ENOMEM : 0;
			if (rc)
				break;
		}
	}
	if (rc == 0 && w.nx)
		rc = serialize(&w, doc, out, outlen);
	json_decref(doc);
	free(w.out);
	if (rc || w.nx == 0) {
		cli_exact_free(w.x, w.nx);
		return rc;
	}
	*x = w.x;
	*nx = w.nx;
	return 0;
}

void cli_exact_free(cli_exact_t *x, unsigned n)
{
	unsigned i;
	for (i = 0; x && i < n; i++)
		free(x[i].name);
	free(x);
}

int cli_attach_join(const uint8_t *state, size_t len, cli_find_fn find, void *arg, uint8_t **out,
		    size_t *outlen, char ***names, unsigned *n, char *msg, size_t msglen)
{
	size_t base = 0;
	int unread = 0;
	json_t *doc = parse(state, len, &base, &unread);
	walk_t w;
	int rc;

	*out = NULL;
	*outlen = 0;
	*names = NULL;
	*n = 0;
	if (doc == NULL) {
		if (unread)
			snprintf(msg, msglen, "its JSON cannot be read: attached as it is");
		return 0;
	}
	memset(&w, 0, sizeof(w));
	w.bytes = state + base;
	w.blen = len - base;
	w.find = find;
	w.arg = arg;
	w.msg = msg;
	w.msglen = msglen;
	rc = walk(&w, &doc, NULL, 0);
	if (rc == -EBADMSG)
		snprintf(msg, msglen, "malformed: a blob out of its bounds, or an object of no known form");
	if (rc == 0 && w.nnames)
		rc = serialize(&w, doc, out, outlen);
	json_decref(doc);
	free(w.out);
	if (rc || w.nnames == 0) {
		cli_names_free(w.names, w.nnames);
		return rc;
	}
	*names = w.names;
	*n = w.nnames;
	return 0;
}

void cli_names_free(char **names, unsigned n)
{
	unsigned i;
	for (i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}
