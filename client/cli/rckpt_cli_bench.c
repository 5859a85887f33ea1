/*
 * rckpt_cli_bench.c — `rckpt bench`: check that the cluster runs this
 * client's plugins, then hand over to the benchmark driver
 * (bench/report/rckpt_bench.py, which runs the suites and writes the report) with
 * the paths of this build's tools.
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef RCKPT_SOURCE_DIR
#define RCKPT_SOURCE_DIR "."
#endif
#ifndef RCKPT_BINARY_DIR
#define RCKPT_BINARY_DIR "build"
#endif

#define PYTHON "/usr/bin/python3"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rckpt [options] bench --quick|--full --out DIR [--conf PATH] [--pool NAME]\n"
		"                              [--seed N] [--suites a,b,...] [--data DIR]\n"
		"                              [--checkpoints DIR] [--images DIR] [--link RATES]\n"
		"       rckpt bench compare A B\n"
		"\n"
		"Run rckpt's benchmark suites against a cluster and write a report to DIR:\n"
		"report.md (tables, the machine and the cluster, the command line), PNG plots,\n"
		"results.json and results.csv (machine-readable, for 'compare') and raw/ (each\n"
		"tool's own output). First checks that the cluster's OSDs run this client's\n"
		"plugins (rckpt and pcr) and refuses when one is missing or another version.\n"
		"\n"
		"  --quick        every suite, small (under 10 minutes on a one-node cluster)\n"
		"  --full         every suite, larger data, more repetitions\n"
		"  --out DIR      where the report goes (created; files in it are replaced)\n"
		"  --conf PATH    ceph.conf (default: the global -c, then $CEPH_CONF)\n"
		"  --pool NAME    pool to use (default: the global -p, then rckpt); the\n"
		"                 suites create and delete their own jobs and datasets there\n"
		"  --seed N       seed of the generated data and of every random choice (1)\n"
		"  --suites LIST  some of: baseline,save,compression,frontier,restore,resume,\n"
		"                 pcr,loader,group,gpu (the default: all of them), link\n"
		"  --data DIR     where generated data (a trained model's checkpoints, JPEGs)\n"
		"                 is kept between runs (default: DIR/../rckpt-bench-data)\n"
		"  --checkpoints DIR  your own model's checkpoints (step-N.safetensors, at\n"
		"                 least 17; a sibling step-N.grads.safetensors is used)\n"
		"                 instead of a small model trained here\n"
		"  --images DIR   your own JPEGs (at least 128) instead of Debian's photos\n"
		"  --link RATES   also the link suite: saves and restores against raw writes\n"
		"                 and reads behind a link shaped to each rate (as 1g,10g): a\n"
		"                 cluster of its own in a network namespace, a veth pair with\n"
		"                 link-local addresses, tc; all removed at the end. Needs root\n"
		"\n"
		"Timed figures are medians of repeated runs (3 quick, 5 full) with their\n"
		"min and max. 'compare A B' prints every figure of two reports (A and B:\n"
		"their DIRs) and the ratio B/A, marking changes beyond both runs' spread.\n"
		"Needs python3 with python3-torch, python3-sklearn, python3-pil and\n"
		"python3-matplotlib (./dev.sh deps installs them), and the `rados` tool\n"
		"for the baseline.\n");
}

/* The driver script and the folder of bench tools: $RCKPT_BENCH_SCRIPT and
 * $RCKPT_BENCH_BIN, else the source and build trees this binary came from. */
static int find_tools(char *script, size_t ns, char *bin, size_t nb)
{
	const char *s = getenv("RCKPT_BENCH_SCRIPT"), *b = getenv("RCKPT_BENCH_BIN");
	snprintf(script, ns, "%s", s && *s ? s : RCKPT_SOURCE_DIR "/bench/report/rckpt_bench.py");
	snprintf(bin, nb, "%s", b && *b ? b : RCKPT_BINARY_DIR "/bench");
	if (access(script, R_OK) != 0) {
		cli_err("bench", -errno,
			"the benchmark driver %s is not there (%s); set RCKPT_BENCH_SCRIPT to "
			"bench/report/rckpt_bench.py of rckpt's source tree",
			script, strerror(errno));
		return -1;
	}
	if (access(PYTHON, X_OK) != 0) {
		cli_err("bench", -errno, "needs %s (apt-get install python3)", PYTHON);
		return -1;
	}
	return 0;
}

/* Every plugin answers, at this client's version. */
static int check_plugins(const rckpt_connect_opts_t *conn)
{
	static const char *const names[] = { "rckpt", "pcr" };
	rckpt_t *h;
	unsigned i;
	int rc = rckpt_create(&h), failed = 0;

	if (rc) {
		cli_err("bench", rc, "%s", rckpt_strerror(rc));
		return -1;
	}
	if ((rc = rckpt_connect(h, conn)) != 0) {
		cli_err("bench", rc, "%s", rckpt_errmsg(h));
		rckpt_destroy(h);
		return -1;
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		rckpt_plugin_info_t pi;
		if ((rc = rckpt_plugin_version(h, &pi, names[i])) != 0) {
			cli_err("bench", rc,
				"the cluster's OSDs do not run the %s plugin (%s); load "
				"libcls_%s.so into every OSD (ceph-conf/README.md) and try again",
				names[i], rckpt_errmsg(h), names[i]);
			failed = 1;
		} else if (pi.major * 10000 + pi.minor * 100 + pi.patch != rckpt_version_number()) {
			cli_err("bench", RCKPT_EVERSION,
				"the cluster's %s plugin is version %u.%u.%u, this client "
				"%s: deploy the plugins of this build (or run this version's client)",
				names[i], pi.major, pi.minor, pi.patch, rckpt_version_string());
			failed = 1;
		}
	}
	rckpt_destroy(h);
	return failed ? -1 : 0;
}

int rckpt_cli_bench(int argc, char **argv, const rckpt_connect_opts_t *gconn)
{
	static const struct option lo[] = {
		{ "quick", no_argument, NULL, 'q' },	    { "full", no_argument, NULL, 'f' },
		{ "out", required_argument, NULL, 'o' },    { "conf", required_argument, NULL, 'c' },
		{ "pool", required_argument, NULL, 'p' },   { "seed", required_argument, NULL, 's' },
		{ "suites", required_argument, NULL, 'S' }, { "data", required_argument, NULL, 'd' },
		{ "checkpoints", required_argument, NULL, 'C' },
		{ "images", required_argument, NULL, 'I' }, { "help", no_argument, NULL, 'h' },
		{ "link", required_argument, NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	rckpt_connect_opts_t conn = *gconn;
	const char *profile = NULL, *out = NULL, *seed = "1", *suites = NULL, *data = NULL;
	const char *ckpts = NULL, *images = NULL, *link = NULL;
	char script[PATH_MAX], bin[PATH_MAX], self[PATH_MAX], lib[PATH_MAX + 16], cmdline[4096];
	char *args[32];
	size_t used;
	ssize_t n;
	int c, k = 0, i;

	if (argc >= 2 && strcmp(argv[1], "compare") == 0) {
		if (argc == 3 && (strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "--help") == 0)) {
			usage(stdout);
			return 0;
		}
		if (argc != 4)
			return cli_usage_errorf("bench", "%s", "compare takes two report folders, A and B");
		if (find_tools(script, sizeof(script), bin, sizeof(bin)))
			return 1;
		args[k++] = (char *)PYTHON;
		args[k++] = script;
		args[k++] = (char *)"compare";
		args[k++] = argv[2];
		args[k++] = argv[3];
		args[k] = NULL;
		fflush(stdout);
		if (cli_check_dir("bench", argv[2]) || cli_check_dir("bench", argv[3]))
			return 1;
		execv(PYTHON, args);
		cli_err("bench", -errno, "cannot run %s: %s", PYTHON, strerror(errno));
		return 1;
	}
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (c) {
		case 'q':
		case 'f':
			if (profile)
				return cli_usage_errorf("bench", "%s", "give one of --quick and --full");
			profile = c == 'q' ? "--quick" : "--full";
			break;
		case 'o': out = optarg; break;
		case 'c': conn.conf_path = optarg; break;
		case 'p': conn.pool = optarg; break;
		case 's':
			if (!*optarg || strspn(optarg, "0123456789") != strlen(optarg) || strlen(optarg) > 9)
				return cli_usage_errorf("bench", "--seed takes a number, not '%s'", optarg);
			seed = optarg;
			break;
		case 'S': suites = optarg; break;
		case 'd': data = optarg; break;
		case 'C': ckpts = optarg; break;
		case 'I': images = optarg; break;
		case 'L': link = optarg; break;
		case 'h': usage(stdout); return 0;
		case ':': return cli_usage_errorf("bench", "option '%s' needs a value", argv[optind - 1]);
		default: return cli_usage_errorf("bench", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage_errorf("bench", "unexpected argument '%s'", argv[optind]);
	if (!profile)
		return cli_usage_errorf("bench", "%s", "give --quick or --full");
	if (!out || !*out)
		return cli_usage_errorf("bench", "%s", "needs --out DIR");
	if (conn.user && strcmp(conn.user, "admin") != 0 && strcmp(conn.user, "client.admin") != 0) {
		return cli_usage_errorf("bench",
					"the suites run as client.admin (they create and delete pools' objects of "
					"every kind); drop --id %s",
					conn.user);
	}
	if (cli_check_out_dir("bench", out) || (ckpts && cli_check_dir("bench", ckpts)) ||
	    (images && cli_check_dir("bench", images)) || (data && cli_check_out_dir("bench", data)))
		return 1;
	if (find_tools(script, sizeof(script), bin, sizeof(bin)))
		return 1;
	if (check_plugins(&conn))
		return 1;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		cli_err("bench", -errno, "cannot find this program's path: %s", strerror(errno));
		return 1;
	}
	self[n] = '\0';
	/* the suites load the library this program was built with */
	snprintf(lib, sizeof(lib), "%.*s/librckpt.so", (int)(strrchr(self, '/') - self), self);
	if (!getenv("RCKPT_LIBRARY") && access(lib, R_OK) == 0)
		setenv("RCKPT_LIBRARY", lib, 1);
	if (conn.conf_path)
		setenv("CEPH_CONF", conn.conf_path, 1);

	/* the command line as given, for the report */
	used = (size_t)snprintf(cmdline, sizeof(cmdline), "rckpt");
	for (i = 0; i < argc && used < sizeof(cmdline); i++)
		used += (size_t)snprintf(cmdline + used, sizeof(cmdline) - used, " %s", argv[i]);

	args[k++] = (char *)PYTHON;
	args[k++] = script;
	args[k++] = (char *)"run";
	args[k++] = (char *)profile;
	args[k++] = (char *)"--out";
	args[k++] = (char *)out;
	args[k++] = (char *)"--pool";
	args[k++] = (char *)(conn.pool ? conn.pool : "rckpt");
	args[k++] = (char *)"--seed";
	args[k++] = (char *)seed;
	args[k++] = (char *)"--bin";
	args[k++] = bin;
	args[k++] = (char *)"--rckpt";
	args[k++] = self;
	args[k++] = (char *)"--cmdline";
	args[k++] = cmdline;
	if (conn.conf_path) {
		args[k++] = (char *)"--conf";
		args[k++] = (char *)conn.conf_path;
	}
	if (suites) {
		args[k++] = (char *)"--suites";
		args[k++] = (char *)suites;
	}
	if (data) {
		args[k++] = (char *)"--data";
		args[k++] = (char *)data;
	}
	if (ckpts) {
		args[k++] = (char *)"--checkpoints";
		args[k++] = (char *)ckpts;
	}
	if (images) {
		args[k++] = (char *)"--images";
		args[k++] = (char *)images;
	}
	if (link) {
		args[k++] = (char *)"--link";
		args[k++] = (char *)link;
	}
	if (cli_format(gconn) != CLI_FORMAT_PLAIN) {
		args[k++] = (char *)"--json";
		args[k++] = (char *)(cli_format(gconn) == CLI_FORMAT_JSON_PRETTY ? "pretty" : "compact");
	}
	args[k] = NULL;
	fflush(stdout);
	execv(PYTHON, args);
	cli_err("bench", -errno, "cannot run %s: %s", PYTHON, strerror(errno));
	return 1;
}
