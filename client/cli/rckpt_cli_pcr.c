/*
 * rckpt_cli_pcr.c — `rckpt pcr build | get | ls | stat | rm`: JPEG datasets
 * as Progressive Compressed Records in the cluster (librckpt's PCR API).
 */
#define _GNU_SOURCE /* getopt_long */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <jansson.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "rckpt_cli.h"
#include "rckpt_clock.h" /* rckpt_now_s */

static int usage_error(const char *what)
{
	return cli_usage_error("pcr", what);
}

static const char help_text[] =
	"usage: rckpt [options] pcr build --dataset D [--labels LABELS.csv] [--images-per-record N]\n"
	"                                [--threads N] [--fidelity-sample N] [--skip-bad]\n"
	"                                [--scan-script default|spectral] DIR|FILE...\n"
	"       rckpt [options] pcr get --dataset D [--group K|all] [--ids I,J,...] --out DIR\n"
	"       rckpt [options] pcr verify --dataset D [--threads N] DIR\n"
	"       rckpt [options] pcr ls\n"
	"       rckpt [options] pcr stat --dataset D\n"
	"       rckpt [options] pcr rm --dataset D\n"
	"\n"
	"build  rewrite JPEG files losslessly as progressive JPEGs and store them as\n"
	"       dataset D: records of --images-per-record images (default 512), scans\n"
	"       regrouped so that reading a record through group K gives each image at\n"
	"       fidelity K. A DIR adds its regular files (not hidden ones, not the labels\n"
	"       file), in name order. LABELS.csv has lines FILE,LABEL (a first line\n"
	"       'file,label' is skipped); a label is kept as bytes with its image. A file\n"
	"       that is not a usable JPEG stops the build, naming it, unless --skip-bad\n"
	"       (then it is reported and left out). SSIM per group is measured on\n"
	"       --fidelity-sample images (default 64). --scan-script spectral writes\n"
	"       scans of spectral selection alone: prefixes decode faster, fidelity\n"
	"       grows more slowly at the low groups (default: libjpeg's script).\n"
	"       Refused if D exists.\n"
	"get    read D through K groups (default all) and write each image, as a\n"
	"       JPEG under its original file name, into DIR; --ids fetches only those\n"
	"       images (numbered from 0 in build order), gathered in the OSDs.\n"
	"verify read D at every group, decode each image (on --threads threads, default\n"
	"       1) and compare its pixels with those of the file of the same name in DIR\n"
	"       (the build's sources); exit 1 on any difference or missing file.\n"
	"ls     list the datasets of the pool.\n"
	"stat   bytes, images and mean SSIM per group of D.\n"
	"rm     delete D and all its objects.\n"
	"\n"
	"Global options (--conf, --id/--user, --pool, --timeout, --read-from, --format)\n"
	"go before 'pcr' or after the subcommand.\n"
	"On a terminal, build shows a progress line on stderr.\n";

static void usage(void)
{
	fputs(help_text, stdout);
}

static int parse_uint(const char *s, unsigned max, unsigned *v)
{
	char *end;
	unsigned long x;
	errno = 0;
	if (!isdigit((unsigned char)s[0]))
		return -1;
	x = strtoul(s, &end, 10);
	if (errno || *end || x > max)
		return -1;
	*v = (unsigned)x;
	return 0;
}

static rckpt_t *connect_or_report(const rckpt_connect_opts_t *conn)
{
	return cli_connect(conn, "pcr");
}

/* ---- build ---- */

typedef struct inputs {
	rckpt_pcr_input_t *v;
	char **paths;
	unsigned n, cap;
} inputs_t;

static int add_input(inputs_t *in, const char *path)
{
	if (in->n == in->cap) {
		unsigned cap = in->cap ? 2 * in->cap : 256;
		char **p = realloc(in->paths, cap * sizeof(*p));
		if (p == NULL)
			return -ENOMEM;
		in->paths = p;
		in->cap = cap;
	}
	if ((in->paths[in->n] = strdup(path)) == NULL)
		return -ENOMEM;
	in->n++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's regular files, not hidden, not `skip` (the labels file). */
static int add_dir(inputs_t *in, const char *dir, const struct stat *skip)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned from = in->n;
	int rc = 0;

	if (d == NULL)
		return -errno;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		char path[4096];
		struct stat sb;
		if (e->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		if (stat(path, &sb) || !S_ISREG(sb.st_mode))
			continue;
		if (skip && sb.st_dev == skip->st_dev && sb.st_ino == skip->st_ino)
			continue;
		rc = add_input(in, path);
	}
	closedir(d);
	qsort(in->paths + from, in->n - from, sizeof(*in->paths), cmp_str);
	return rc;
}

typedef struct labels {
	char **name, **label;
	unsigned n;
} labels_t;

static int cmp_label(const void *a, const void *b, void *arg)
{
	const labels_t *l = arg;
	return strcmp(l->name[*(const unsigned *)a], l->name[*(const unsigned *)b]);
}

/* FILE,LABEL lines. Returns 0 or an errno; *bad_line gets a malformed line. */
static int read_labels(const char *path, labels_t *l, unsigned *bad_line)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0, lcap = 0;
	int rc = 0;

	memset(l, 0, sizeof(*l));
	*bad_line = 0;
	if (f == NULL)
		return -errno;
	while ((len = getline(&line, &cap, f)) >= 0) {
		char *comma;
		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0 || (lineno == 1 && strcmp(line, "file,label") == 0))
			continue;
		comma = strchr(line, ',');
		if (comma == NULL || comma == line || strlen(comma + 1) > 1024) {
			*bad_line = lineno;
			rc = -EINVAL;
			break;
		}
		*comma = '\0';
		if (l->n == lcap) {
			char **a, **b;
			lcap = lcap ? 2 * lcap : 256;
			a = realloc(l->name, lcap * sizeof(*a));
			if (a)
				l->name = a;
			b = realloc(l->label, lcap * sizeof(*b));
			if (b)
				l->label = b;
			if (!a || !b) {
				rc = -ENOMEM;
				break;
			}
		}
		l->name[l->n] = strdup(line);
		l->label[l->n] = strdup(comma + 1);
		if (!l->name[l->n] || !l->label[l->n]) {
			free(l->name[l->n]);
			free(l->label[l->n]);
			rc = -ENOMEM;
			break;
		}
		l->n++;
	}
	free(line);
	fclose(f);
	return rc;
}

static void labels_free(labels_t *l)
{
	unsigned i;
	for (i = 0; i < l->n; i++) {
		free(l->name[i]);
		free(l->label[i]);
	}
	free(l->name);
	free(l->label);
}

/* The label of file `name` (its basename), or NULL. sorted: label order. */
static const char *label_of(const labels_t *l, const unsigned *sorted, const char *name)
{
	unsigned lo = 0, hi = l->n;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		int c = strcmp(l->name[sorted[mid]], name);
		if (c == 0)
			return l->label[sorted[mid]];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

typedef struct build_ui {
	int skip_bad;
	unsigned refused; /* files refused and reported */
} build_ui_t;

/* The library's progress, after each record: files done of all, and the
 * bytes stored so far (the progress line, on a terminal). */
static void on_progress(void *arg, const rckpt_pcr_progress_t *p)
{
	(void)arg;
	cli_progress_item("(%u records, %u skipped)", p->records_written, p->skipped);
	cli_progress_set(p->done, p->bytes_written);
}

static void on_refused(void *arg, const char *path, int err, const char *why)
{
	build_ui_t *ui = arg;
	ui->refused++;
	if (ui->skip_bad)
		cli_note("pcr", "%s: %s [%s] (left out)", path, why, rckpt_strerror(err));
	else
		cli_err("pcr", err, "%s: %s [%s]", path, why, rckpt_strerror(err));
}

static int cmd_build(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = {
		{ "dataset", 1, 0, 'd' }, { "labels", 1, 0, 'l' }, { "images-per-record", 1, 0, 'n' },
		{ "threads", 1, 0, 't' }, { "fidelity-sample", 1, 0, 'f' }, { "skip-bad", 0, 0, 's' },
		{ "scan-script", 1, 0, 'S' }, { 0, 0, 0, 0 }
	};
	rckpt_pcr_build_opts_t o = RCKPT_PCR_BUILD_OPTS_INIT;
	rckpt_pcr_build_stats_t st;
	const char *dataset = NULL, *labels_path = NULL;
	struct stat lsb;
	inputs_t in = { 0 };
	labels_t lab = { 0 };
	unsigned *sorted = NULL, i, unlabelled = 0;
	build_ui_t ui = { 0 };
	rckpt_t *h = NULL;
	int c, rc = 0, ret = 1;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:l:n:t:f:sS:", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			dataset = optarg;
			break;
		case 'l':
			labels_path = optarg;
			break;
		case 'n':
			if (parse_uint(optarg, 16384, &o.images_per_record) || o.images_per_record == 0)
				return usage_error("--images-per-record must be 1..16384");
			break;
		case 't':
			if (parse_uint(optarg, 64, &o.threads) || o.threads == 0)
				return usage_error("--threads must be 1..64");
			break;
		case 'f':
			if (parse_uint(optarg, 1u << 26, &o.fidelity_sample) || o.fidelity_sample == 0)
				return usage_error("--fidelity-sample must be a positive count");
			break;
		case 's':
			o.skip_bad = 1;
			break;
		case 'S':
			if (strcmp(optarg, "default") == 0)
				o.scan_script = RCKPT_PCR_SCRIPT_DEFAULT;
			else if (strcmp(optarg, "spectral") == 0)
				o.scan_script = RCKPT_PCR_SCRIPT_SPECTRAL;
			else
				return usage_error("--scan-script must be default or spectral");
			break;
		default:
			return cli_option_error("pcr", "build", c, argv, optind);
		}
	}
	if (dataset == NULL || optind == argc)
		return usage_error("build needs --dataset D and at least one DIR or FILE");
	if (cli_check_name("pcr", "--dataset", dataset))
		return EXIT_USAGE;
	if (labels_path) {
		unsigned bad;
		if (cli_check_file("pcr", labels_path))
			goto out;
		rc = read_labels(labels_path, &lab, &bad);
		if (rc == 0 && stat(labels_path, &lsb))
			rc = -errno;
		if (rc) {
			if (bad)
				cli_err("pcr", rc, "%s:%u: expected FILE,LABEL (a label of at most 1024 bytes)",
					labels_path, bad);
			else
				cli_err("pcr", rc, "%s: %s", labels_path, rckpt_strerror(rc));
			goto out;
		}
		sorted = malloc((lab.n ? lab.n : 1) * sizeof(*sorted));
		if (sorted == NULL)
			goto nomem;
		for (i = 0; i < lab.n; i++)
			sorted[i] = i;
		qsort_r(sorted, lab.n, sizeof(*sorted), cmp_label, &lab);
	}
	/* every input checked before anything is built: a directory adds its
	 * regular files, anything else must be a readable regular file */
	for (i = (unsigned)optind; i < (unsigned)argc && rc == 0; i++) {
		struct stat sb;
		if (stat(argv[i], &sb)) {
			cli_err("pcr", -errno, "%s: %s", argv[i], strerror(errno));
			goto out;
		}
		if (S_ISDIR(sb.st_mode)) {
			if (cli_check_dir("pcr", argv[i]))
				goto out;
			rc = add_dir(&in, argv[i], labels_path ? &lsb : NULL);
		} else {
			if (cli_check_file("pcr", argv[i]))
				goto out;
			rc = add_input(&in, argv[i]);
		}
		if (rc) {
			cli_err("pcr", rc, "%s: %s", argv[i], rckpt_strerror(rc));
			goto out;
		}
	}
	if (in.n == 0) {
		cli_err("pcr", -ENOENT, "no files to build from (a directory adds its regular files, not hidden ones)");
		goto out;
	}
	in.v = calloc(in.n, sizeof(*in.v));
	if (in.v == NULL)
		goto nomem;
	for (i = 0; i < in.n; i++) {
		const char *base = strrchr(in.paths[i], '/');
		const char *l;
		base = base ? base + 1 : in.paths[i];
		in.v[i].path = in.paths[i];
		l = labels_path ? label_of(&lab, sorted, base) : NULL;
		if (labels_path && l == NULL)
			unlabelled++;
		in.v[i].label = l;
		in.v[i].label_len = l ? strlen(l) : 0;
	}
	if (unlabelled)
		cli_note("pcr", "%u of %u files have no line in %s: their label is empty", unlabelled, in.n,
			 labels_path);
	if ((h = connect_or_report(conn)) == NULL)
		goto out;
	ui.skip_bad = o.skip_bad;
	o.progress = on_progress;
	o.refused = on_refused;
	o.arg = &ui;
	if (!cli_json_mode())
		fprintf(stderr, "building dataset %s from %u files\n", dataset, in.n);
	cli_progress_begin("building", in.n, "files", 0);
	rc = rckpt_pcr_build(h, dataset, in.v, in.n, &o, &st);
	cli_progress_end();
	if (rc) {
		if (ui.refused && !o.skip_bad) /* the file and why are above */
			cli_err("pcr", rc, "dataset %s not built (--skip-bad leaves such files out)", dataset);
		else
			cli_err("pcr", rc, "%s", rckpt_errmsg(h));
		goto out;
	}
	if (cli_json_mode()) {
		ret = cli_json_out(json_pack("{s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:f}", "dataset", dataset, "images",
					     (int)st.images, "skipped", (int)st.skipped, "records", (int)st.records,
					     "groups", (int)st.groups, "stored_bytes", (json_int_t)st.stored_bytes,
					     "source_bytes", (json_int_t)st.source_bytes, "seconds", st.seconds),
				   conn);
		goto out;
	}
	printf("dataset %s: %u images (%u skipped) in %u records, %u groups; %.1f MB stored for "
	       "%.1f MB of JPEG (%.3fx), %.1f s, %.0f images/s\n",
	       dataset, st.images, st.skipped, st.records, st.groups, st.stored_bytes / 1e6,
	       st.source_bytes / 1e6, st.source_bytes ? (double)st.stored_bytes / st.source_bytes : 0,
	       st.seconds, st.seconds > 0 ? st.images / st.seconds : 0);
	ret = 0;
	goto out;
nomem:
	cli_err("pcr", -ENOMEM, "out of memory");
out:
	for (i = 0; i < in.n; i++)
		free(in.paths[i]);
	free(in.paths);
	free(in.v);
	free(sorted);
	labels_free(&lab);
	rckpt_destroy(h);
	return ret;
}

/* ---- get ---- */

static int parse_ids(const char *s, uint32_t **ids, unsigned *n)
{
	unsigned cap = 0;
	*ids = NULL;
	*n = 0;
	while (*s) {
		char *end;
		unsigned long v;
		errno = 0;
		if (!isdigit((unsigned char)*s))
			return -1;
		v = strtoul(s, &end, 10);
		if (errno || v > UINT32_MAX || (*end && *end != ','))
			return -1;
		if (*n == cap) {
			uint32_t *p = realloc(*ids, (cap = cap ? 2 * cap : 64) * sizeof(*p));
			if (p == NULL)
				return -1;
			*ids = p;
		}
		(*ids)[(*n)++] = (uint32_t)v;
		s = *end ? end + 1 : end;
	}
	return *n ? 0 : -1;
}

/* Writes the images of b into dir, each whole (a temporary renamed into
 * place) or not at all. */
static int write_batch(const rckpt_pcr_batch_t *b, const char *dir, uint64_t *bytes)
{
	unsigned i, n = rckpt_pcr_batch_count(b);
	for (i = 0; i < n; i++) {
		rckpt_pcr_image_t im;
		cli_stage_t sg = { 0 };
		const char *tmp;
		char path[4096];
		FILE *f = NULL;
		int rc = 0;
		rckpt_pcr_batch_image(b, i, &im);
		snprintf(path, sizeof(path), "%s/%s", dir, im.name);
		if ((tmp = cli_stage_add(&sg, path)) == NULL)
			rc = -ENOMEM;
		else if ((f = fopen(tmp, "wb")) == NULL)
			rc = -errno;
		else {
			if (fwrite(im.jpeg, 1, im.jpeg_len, f) != im.jpeg_len)
				rc = -errno ? -errno : -EIO;
			if (fclose(f) != 0 && rc == 0)
				rc = -errno;
		}
		if (rc) {
			cli_err("pcr", rc, "%s: cannot write it: %s", path, strerror(-rc));
			cli_stage_abort(&sg);
			return -1;
		}
		if (cli_stage_commit(&sg, "pcr"))
			return -1;
		*bytes += im.jpeg_len;
	}
	return 0;
}

static int cmd_get(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "dataset", 1, 0, 'd' }, { "group", 1, 0, 'g' },
					    { "ids", 1, 0, 'i' },     { "out", 1, 0, 'o' },
					    { 0, 0, 0, 0 } };
	rckpt_pcr_opts_t o = RCKPT_PCR_OPTS_INIT;
	rckpt_pcr_read_stats_t rs;
	const char *dataset = NULL, *outdir = NULL;
	uint32_t *ids = NULL;
	unsigned nids = 0, images = 0;
	uint64_t written = 0;
	rckpt_pcr_t *d = NULL;
	rckpt_t *h = NULL;
	double t0;
	int c, rc = 0, ret = 1, made = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:g:i:o:", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			dataset = optarg;
			break;
		case 'g':
			if (strcmp(optarg, "all") == 0)
				o.groups = RCKPT_PCR_ALL;
			else if (parse_uint(optarg, RCKPT_PCR_GROUPS_MAX, &o.groups) || o.groups == 0)
				return usage_error("--group must be 1..64 or 'all'");
			break;
		case 'i':
			free(ids);
			if (parse_ids(optarg, &ids, &nids)) {
				free(ids);
				return usage_error("--ids must be a comma-separated list of image numbers");
			}
			break;
		case 'o':
			outdir = optarg;
			break;
		default:
			free(ids);
			return cli_option_error("pcr", "get", c, argv, optind);
		}
	}
	if (dataset == NULL || outdir == NULL || optind != argc) {
		free(ids);
		return usage_error("get needs --dataset D and --out DIR, nothing else");
	}
	if (cli_check_name("pcr", "--dataset", dataset)) {
		free(ids);
		return EXIT_USAGE;
	}
	if (cli_check_out_dir("pcr", outdir)) {
		free(ids);
		return 1;
	}
	cli_signals_guard(); /* a signal removes the image being written, then ends it */
	if (mkdir(outdir, 0777) == 0)
		made = 1; /* removed again if nothing lands in it */
	else if (errno != EEXIST) {
		cli_err("pcr", -errno, "%s: %s", outdir, strerror(errno));
		free(ids);
		return 1;
	}
	if ((h = connect_or_report(conn)) == NULL)
		goto out;
	if ((rc = rckpt_pcr_open(h, &d, dataset, &o)))
		goto fail;
	t0 = rckpt_now_s();
	if (ids) {
		rckpt_pcr_batch_t *b;
		if ((rc = rckpt_pcr_fetch(d, ids, nids, &b)))
			goto fail;
		images = rckpt_pcr_batch_count(b);
		rc = write_batch(b, outdir, &written);
		rckpt_pcr_batch_free(b);
		if (rc)
			goto out;
	} else {
		for (;;) {
			rckpt_pcr_batch_t *b;
			if ((rc = rckpt_pcr_next(d, &b)))
				goto fail;
			if (b == NULL)
				break;
			images += rckpt_pcr_batch_count(b);
			rc = write_batch(b, outdir, &written);
			rckpt_pcr_batch_free(b);
			if (rc)
				goto out;
		}
	}
	rckpt_pcr_read_stats(d, &rs);
	{
		double dt = rckpt_now_s() - t0;
		char g[16];
		snprintf(g, sizeof(g), o.groups == RCKPT_PCR_ALL ? "all" : "%u", o.groups);
		if (cli_json_mode()) {
			ret = cli_json_out(json_pack("{s:s, s:s, s:i, s:s, s:I, s:I, s:I, s:f}", "dataset", dataset,
						     "group", g, "images", (int)images, "dir", outdir, "wire_bytes",
						     (json_int_t)rs.wire_bytes, "reads", (json_int_t)rs.reads,
						     "written_bytes", (json_int_t)written, "seconds", dt),
					   conn);
			goto out;
		}
		printf("%u images at group %s into %s: %.2f MB read in %" PRIu64 " reads, %.2f MB of JPEG "
		       "written, %.2f s, %.0f images/s\n",
		       images, g, outdir, rs.wire_bytes / 1e6, rs.reads, written / 1e6, dt,
		       dt > 0 ? images / dt : 0);
	}
	ret = 0;
	goto out;
fail:
	cli_err("pcr", rc, "%s", rckpt_errmsg(h));
out:
	if (ret && made)
		rmdir(outdir); /* only if empty */
	free(ids);
	rckpt_pcr_close(d);
	rckpt_destroy(h);
	return ret;
}

/* ---- verify ---- */

static int cmd_verify(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	static const struct option lo[] = { { "dataset", 1, 0, 'd' }, { "threads", 1, 0, 't' },
					    { 0, 0, 0, 0 } };
	rckpt_pcr_opts_t o = RCKPT_PCR_OPTS_INIT;
	const char *dataset = NULL, *dir;
	unsigned images = 0, bad = 0;
	rckpt_pcr_t *d = NULL;
	rckpt_t *h = NULL;
	tjhandle th = NULL;
	int c, rc = 0, ret = 1;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:t:", lo, NULL)) != -1) {
		if (c == 'd')
			dataset = optarg;
		else if (c == 't') {
			if (parse_uint(optarg, 64, &o.threads) || o.threads == 0)
				return usage_error("--threads must be a whole number 1..64");
		} else
			return cli_option_error("pcr", "verify", c, argv, optind);
	}
	if (dataset == NULL || optind + 1 != argc)
		return usage_error("verify needs --dataset D and one DIR");
	dir = argv[optind];
	if (cli_check_name("pcr", "--dataset", dataset))
		return EXIT_USAGE;
	if (cli_check_dir("pcr", dir))
		return 1;
	o.output = RCKPT_PCR_RGB;
	if ((th = tjInitDecompress()) == NULL || (h = connect_or_report(conn)) == NULL)
		goto out;
	if ((rc = rckpt_pcr_open(h, &d, dataset, &o))) {
		cli_err("pcr", rc, "%s", rckpt_errmsg(h));
		goto out;
	}
	for (;;) {
		rckpt_pcr_batch_t *b;
		unsigned i, n;
		if ((rc = rckpt_pcr_next(d, &b))) {
			cli_err("pcr", rc, "%s", rckpt_errmsg(h));
			goto out;
		}
		if (b == NULL)
			break;
		n = rckpt_pcr_batch_count(b);
		for (i = 0; i < n; i++) {
			rckpt_pcr_image_t im;
			char path[4096];
			unsigned char *src = NULL, *px = NULL;
			long len;
			int w, hh, sub, cs, same = 0;
			FILE *f;
			rckpt_pcr_batch_image(b, i, &im);
			snprintf(path, sizeof(path), "%s/%s", dir, im.name);
			images++;
			if ((f = fopen(path, "rb")) != NULL && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 &&
			    fseek(f, 0, SEEK_SET) == 0 && (src = malloc((size_t)len)) != NULL &&
			    fread(src, 1, (size_t)len, f) == (size_t)len &&
			    tjDecompressHeader3(th, src, (unsigned long)len, &w, &hh, &sub, &cs) == 0 &&
			    (unsigned)w == im.width && (unsigned)hh == im.height &&
			    (px = malloc((size_t)w * hh * 3)) != NULL &&
			    tjDecompress2(th, src, (unsigned long)len, px, w, 0, hh, TJPF_RGB, 0) == 0)
				same = memcmp(px, im.rgb, (size_t)w * hh * 3) == 0;
			if (f)
				fclose(f);
			free(src);
			free(px);
			if (!same) {
				cli_err("pcr", -EBADMSG, "image %u (%s) differs from %s", im.id, im.name, path);
				bad++;
			}
		}
		rckpt_pcr_batch_free(b);
	}
	if (cli_json_mode()) {
		if (cli_json_out(json_pack("{s:s, s:s, s:i, s:i, s:i, s:b}", "dataset", dataset, "dir", dir, "images",
					   (int)images, "identical", (int)(images - bad), "different", (int)bad, "ok",
					   bad == 0),
				 conn) == 0)
			ret = bad ? 1 : 0;
		goto out;
	}
	printf("verified %u images of %s against %s: %u identical, %u different\n", images, dataset, dir,
	       images - bad, bad);
	ret = bad ? 1 : 0;
out:
	if (th)
		tjDestroy(th);
	rckpt_pcr_close(d);
	rckpt_destroy(h);
	return ret;
}

/* ---- ls, stat, rm ---- */

static int dataset_only(int argc, char **argv, const char *sub, const char *what, const char **dataset)
{
	static const struct option lo[] = { { "dataset", 1, 0, 'd' }, { 0, 0, 0, 0 } };
	int c;
	optind = 1;
	opterr = 0;
	*dataset = NULL;
	while ((c = getopt_long(argc, argv, ":d:", lo, NULL)) != -1) {
		if (c != 'd')
			return cli_option_error("pcr", sub, c, argv, optind);
		*dataset = optarg;
	}
	if (*dataset == NULL || optind != argc)
		return usage_error(what);
	if (cli_check_name("pcr", "--dataset", *dataset))
		return EXIT_USAGE;
	return 0;
}

static int cmd_stat(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	rckpt_pcr_info_t in;
	const char *dataset;
	rckpt_pcr_t *d = NULL;
	rckpt_t *h;
	uint64_t total = 0, cum;
	unsigned g;
	int rc;

	if ((rc = dataset_only(argc, argv, "stat", "stat needs --dataset D, nothing else", &dataset)))
		return rc;
	if ((h = connect_or_report(conn)) == NULL)
		return 1;
	if ((rc = rckpt_pcr_open(h, &d, dataset, NULL))) {
		cli_err("pcr", rc, "%s", rckpt_errmsg(h));
		rckpt_destroy(h);
		return 1;
	}
	rckpt_pcr_info(d, &in);
	total = in.head_bytes;
	for (g = 0; g < in.groups; g++)
		total += in.group_bytes[g];
	if (cli_format(conn) != CLI_FORMAT_PLAIN) {
		json_t *o = json_object(), *gs = json_array();
		cum = in.head_bytes;
		for (g = 0; g < in.groups; g++) {
			cum += in.group_bytes[g];
			json_array_append_new(
				gs, json_pack("{s:i, s:I, s:I, s:I, s:o}", "group", (int)g + 1, "images",
					      (json_int_t)in.group_images[g], "bytes", (json_int_t)in.group_bytes[g],
					      "read_through_bytes", (json_int_t)cum, "mssim",
					      in.mssim[g] < -0.5 ? json_null() : json_real(in.mssim[g])));
		}
		json_object_set_new(o, "dataset", json_string(dataset));
		json_object_set_new(o, "images", json_integer(in.images));
		json_object_set_new(o, "records", json_integer(in.records));
		json_object_set_new(o, "created", json_integer((json_int_t)in.created));
		json_object_set_new(o, "stored_bytes", json_integer((json_int_t)total));
		json_object_set_new(o, "head_bytes", json_integer((json_int_t)in.head_bytes));
		json_object_set_new(o, "source_bytes", json_integer((json_int_t)in.source_bytes));
		json_object_set_new(o, "fidelity_sample", json_integer(in.fidelity_sample));
		json_object_set_new(o, "groups", gs);
		rckpt_pcr_close(d);
		rckpt_destroy(h);
		return cli_json_out(o, conn);
	}
	printf("dataset %s: %" PRIu32 " images in %" PRIu32 " records, %u groups\n", dataset, in.images,
	       in.records, in.groups);
	printf("stored %" PRIu64 " bytes (heads %" PRIu64 ") for %" PRIu64 " bytes of source JPEG (%.3fx)\n",
	       total, in.head_bytes, in.source_bytes, in.source_bytes ? (double)total / in.source_bytes : 0);
	printf("fidelity: mean SSIM (per channel) against all groups, on %" PRIu32 " sampled images\n",
	       in.fidelity_sample);
	printf("%5s %8s %14s %14s %8s %8s\n", "group", "images", "group bytes", "read through", "of all",
	       "MSSIM");
	cum = in.head_bytes;
	for (g = 0; g < in.groups; g++) {
		cum += in.group_bytes[g];
		printf("%5u %8" PRIu32 " %14" PRIu64 " %14" PRIu64 " %7.1f%% ", g + 1, in.group_images[g],
		       in.group_bytes[g], cum, total ? 100.0 * cum / total : 0);
		if (in.mssim[g] < -0.5 && in.fidelity_sample == 0)
			printf("%8s\n", "-");
		else
			printf("%8.4f\n", in.mssim[g]);
	}
	rckpt_pcr_close(d);
	rckpt_destroy(h);
	return 0;
}

static int cmd_ls(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	char **names = NULL, pool[256];
	unsigned n = 0, i;
	rckpt_t *h;
	const int json = cli_format(conn) != CLI_FORMAT_PLAIN;
	json_t *all = NULL;
	int rc;

	(void)argv;
	if (argc != 1)
		return usage_error("ls takes no arguments");
	if ((h = connect_or_report(conn)) == NULL)
		return 1;
	if ((rc = rckpt_pcr_datasets(h, &names, &n))) {
		cli_err("pcr", rc, "%s", rckpt_errmsg(h));
		rckpt_destroy(h);
		return 1;
	}
	snprintf(pool, sizeof(pool), "%s", rckpt_pool_name(h));
	if (json && (all = json_array()) == NULL)
		return 1;
	if (!json)
		printf("%-24s %10s %8s %7s %14s\n", "dataset", "images", "records", "groups", "bytes");
	for (i = 0; i < n; i++) {
		rckpt_pcr_t *d;
		rckpt_pcr_info_t in;
		uint64_t total;
		unsigned g;
		if (rckpt_pcr_open(h, &d, names[i], NULL)) {
			if (json)
				json_array_append_new(all, json_pack("{s:s, s:s}", "dataset", names[i], "error",
								     rckpt_errmsg(h)));
			else
				printf("%-24s (index unreadable: %s)\n", names[i], rckpt_errmsg(h));
			continue;
		}
		rckpt_pcr_info(d, &in);
		total = in.head_bytes;
		for (g = 0; g < in.groups; g++)
			total += in.group_bytes[g];
		if (json)
			json_array_append_new(all, json_pack("{s:s, s:I, s:I, s:i, s:I}", "dataset", names[i], "images",
							     (json_int_t)in.images, "records", (json_int_t)in.records,
							     "groups", (int)in.groups, "stored_bytes", (json_int_t)total));
		else
			printf("%-24s %10" PRIu32 " %8" PRIu32 " %7u %14" PRIu64 "\n", names[i], in.images,
			       in.records, in.groups, total);
		rckpt_pcr_close(d);
	}
	rckpt_jobs_free(names, n);
	rckpt_destroy(h);
	if (json)
		return cli_json_out(json_pack("{s:s, s:o}", "pool", pool, "datasets", all), conn);
	printf("%u dataset(s)\n", n);
	return 0;
}

static int cmd_rm(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	const char *dataset;
	rckpt_t *h;
	int rc;

	if ((rc = dataset_only(argc, argv, "rm", "rm needs --dataset D, nothing else", &dataset)))
		return rc;
	if ((h = connect_or_report(conn)) == NULL)
		return 1;
	rc = rckpt_pcr_delete(h, dataset);
	if (rc)
		cli_err("pcr", rc, "%s", rckpt_errmsg(h));
	else if (cli_json_mode())
		rc = cli_json_out(json_pack("{s:s, s:b}", "dataset", dataset, "deleted", 1), conn) ? -EIO : 0;
	else
		printf("deleted dataset %s\n", dataset);
	rckpt_destroy(h);
	return rc ? 1 : 0;
}

int rckpt_cli_pcr(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	int i;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			if (i < 2 || argv[1][0] == '-' || cli_sub_help(help_text, "pcr", argv[1]))
				usage();
			return 0;
		}
	if (argc < 2)
		return usage_error("missing subcommand (build, get, verify, ls, stat, rm)");
	if (strcmp(argv[1], "build") == 0)
		return cmd_build(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "get") == 0)
		return cmd_get(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "verify") == 0)
		return cmd_verify(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "ls") == 0)
		return cmd_ls(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "stat") == 0)
		return cmd_stat(argc - 1, argv + 1, conn);
	if (strcmp(argv[1], "rm") == 0)
		return cmd_rm(argc - 1, argv + 1, conn);
	return cli_usage_errorf("pcr", "unknown subcommand '%s'", argv[1]);
}
