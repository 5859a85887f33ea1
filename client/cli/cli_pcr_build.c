/*
 * cli_pcr_build.c — `rckpt pcr build`: a dataset from JPEG files and
 * directories, with labels from a CSV file (cli_pcr.h).
 */
#define _GNU_SOURCE /* getopt_long, qsort_r */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>

#include "cli_pcr.h"
#include "rckpt_buf.h"

typedef struct inputs {
	rckpt_pcr_input_t *v;
	char **paths;
	unsigned n;
	size_t cap;
} inputs_t;

static int add_input(inputs_t *in, const char *path)
{
	char **p = rckpt_grow(in->paths, &in->cap, (size_t)in->n + 1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	in->paths = p;
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
	unsigned lineno = 0;
	size_t lcap = 0, bcap = 0;
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
		{
			char **a = rckpt_grow(l->name, &lcap, (size_t)l->n + 1, sizeof(*a)), **b;
			if (a)
				l->name = a;
			b = rckpt_grow(l->label, &bcap, (size_t)l->n + 1, sizeof(*b));
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

int pcr_cmd_build(int argc, char **argv, const rckpt_connect_opts_t *conn)
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
			if (pcr_parse_uint(optarg, 16384, &o.images_per_record) || o.images_per_record == 0)
				return pcr_usage_error("--images-per-record must be 1..16384");
			break;
		case 't':
			if (pcr_parse_uint(optarg, 64, &o.threads) || o.threads == 0)
				return pcr_usage_error("--threads must be 1..64");
			break;
		case 'f':
			if (pcr_parse_uint(optarg, 1u << 26, &o.fidelity_sample) || o.fidelity_sample == 0)
				return pcr_usage_error("--fidelity-sample must be a positive count");
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
				return pcr_usage_error("--scan-script must be default or spectral");
			break;
		default:
			return cli_option_error("pcr", "build", c, argv, optind);
		}
	}
	if (dataset == NULL || optind == argc)
		return pcr_usage_error("build needs --dataset D and at least one DIR or FILE");
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
	if ((h = pcr_connect(conn)) == NULL)
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
