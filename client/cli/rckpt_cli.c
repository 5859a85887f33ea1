/*
 * rckpt_cli.c — the `rckpt` command: a thin layer over librckpt for
 * operators. Exit status: 0 success, 1 the operation failed, 2 bad usage.
 */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static void usage_main(FILE *f)
{
	fprintf(f,
		"usage: rckpt [options] COMMAND [ARGS]\n"
		"\n"
		"Compressed deep-learning checkpoints and training data on Ceph.\n"
		"\n"
		"commands:\n"
		"  status    connect; print the cluster, the pool and each plugin's version\n"
		"            as answered by the OSD\n"
		"  call      call a method of an object class on an object (diagnostics)\n"
		"  version   print this client's version and build features\n"
		"  codec     compress checkpoints in local safetensors files, and back\n"
		"  ckpt      save, restore, list, compact, verify and delete a training job's\n"
		"            checkpoints in the pool; list the pool's jobs\n"
		"  compact   compact every job of the pool under its policy (cron-friendly)\n"
		"  pcr       build, read, list and delete JPEG datasets stored as Progressive\n"
		"            Compressed Records\n"
		"  bench     run the benchmark suites against the cluster; write a report\n"
		"            with tables and plots ('bench compare A B': two reports)\n"
		"\n"
		"options:\n"
		"  -c, --conf PATH    ceph.conf (default: $CEPH_CONF, then Ceph's search path)\n"
		"  -i, --id NAME      cephx user (default: admin); --user is the same\n"
		"  -p, --pool NAME    pool (default: rckpt)\n"
		"  -t, --timeout S    seconds to wait for the cluster (default: 30)\n"
		"  --read-from WHERE  which copy of a replicated pool serves reads: balance\n"
		"                     (any replica; the default), primary, or localize (the\n"
		"                     replica nearest this client's crush_location)\n"
		"  -f, --format F     plain (default), json or json-pretty: every command's\n"
		"                     output as one JSON document on stdout (README \"JSON\n"
		"                     output\"); a failure as {\"error\": MESSAGE, \"code\": NAME},\n"
		"                     one line, with the same exit status\n"
		"  --version          this client's version (as 'rckpt version')\n"
		"  -h, --help         this text; 'rckpt COMMAND --help' for a command's\n"
		"Global options may also follow the command, in their long forms (and -p).\n"
		"Exit status: 0 success, 1 failure, 2 bad usage, 130 and 143 stopped by SIGINT\n"
		"and SIGTERM. Every file named is checked before any work. On a terminal, long\n"
		"commands show a progress line on stderr.\n");
}

/* ---- rckpt version ---- */

int rckpt_cli_version(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	rckpt_gpu_info_t gi;

	(void)conn;
	if (cli_wants_help(argc, argv)) {
		printf("usage: rckpt version\n\nPrint the client library's version and build features.\n");
		return 0;
	}
	if (argc > 1)
		return cli_usage_errorf(NULL, "version: unexpected argument '%s'", argv[1]);
	rckpt_gpu_info(&gi);
	if (cli_json_mode())
		return cli_json_out(json_pack("{s:s, s:i, s:{s:b, s:i, s:i, s:i, s:s}}", "version", rckpt_version_string(),
					      "version_number", (int)rckpt_version_number(), "gpu", "built_with_cuda",
					      gi.built_with_cuda, "runtime_version", gi.runtime_version,
					      "driver_version", gi.driver_version, "devices", gi.device_count,
					      "device_name", gi.device_count ? gi.device_name : ""),
				    conn);
	printf("librckpt %s\n", rckpt_version_string());
	if (!gi.built_with_cuda)
		printf("gpu       not built (no CUDA toolkit at build time)\n");
	else if (gi.device_count == 0)
		printf("gpu       CUDA runtime %d.%d; %s\n", gi.runtime_version / 1000,
		       gi.runtime_version % 1000 / 10,
		       gi.driver_version ? "no device" : "no CUDA driver on this machine");
	else
		printf("gpu       CUDA runtime %d.%d, %d device(s): %s\n", gi.runtime_version / 1000,
		       gi.runtime_version % 1000 / 10, gi.device_count, gi.device_name);
	return 0;
}

/* ---- rckpt status ---- */

static const char *const plugins[] = { "rckpt", "pcr" };

#define STATUS_OSDS_MAX 4096

/* What every OSD that is up answered for each plugin. */
typedef struct survey {
	rckpt_osd_plugin_t *v[2];
	unsigned n;
} survey_t;

static const char *osd_state(const rckpt_osd_plugin_t *p)
{
	if (p->rc == -ENOENT)
		return "no pg";
	if (p->rc == -ENODATA)
		return "unknown";
	if (p->rc)
		return "missing";
	return p->info.major * 10000 + p->info.minor * 100 + p->info.patch != rckpt_version_number() ? "stale"
														 : "ok";
}

/* The answer that stands for plugin k in the pool: the first OSD's that
 * answered, else the first refusal, else the first OSD's (NULL: none up). */
static const rckpt_osd_plugin_t *pool_answer(const survey_t *s, unsigned k)
{
	unsigned i;
	for (i = 0; i < s->n; i++)
		if (s->v[k][i].rc == 0)
			return &s->v[k][i];
	for (i = 0; i < s->n; i++)
		if (s->v[k][i].rc != -ENOENT && s->v[k][i].rc != -ENODATA)
			return &s->v[k][i];
	return s->n ? &s->v[k][0] : NULL;
}

static void survey_free(survey_t *s)
{
	free(s->v[0]);
	free(s->v[1]);
}

/* Asks every OSD for both plugins, on the objects of namespace ns (NULL:
 * the pool's probe objects, or any of its objects for a reader). */
static int survey(rckpt_t *h, const char *ns, survey_t *s)
{
	unsigned n[2] = { 0, 0 }, k;
	int rc;
	memset(s, 0, sizeof(*s));
	s->v[0] = calloc(STATUS_OSDS_MAX, sizeof(*s->v[0]));
	s->v[1] = calloc(STATUS_OSDS_MAX, sizeof(*s->v[1]));
	if (!s->v[0] || !s->v[1]) {
		survey_free(s);
		cli_err("status", -ENOMEM, "out of memory");
		return -1;
	}
	for (k = 0; k < 2; k++)
		if ((rc = rckpt_plugin_versions_in(h, ns, plugins[k], s->v[k], STATUS_OSDS_MAX, &n[k])) != 0) {
			cli_err("status", rc, "%s", rckpt_errmsg(h));
			survey_free(s);
			return -1;
		}
	s->n = n[0] < n[1] ? n[0] : n[1];
	return 0;
}

/* How many OSDs answered, or refused, for the plugins. */
static unsigned survey_asked(const survey_t *s)
{
	unsigned i, asked = 0;
	for (i = 0; i < s->n; i++)
		asked += s->v[0][i].rc != -ENOENT && s->v[0][i].rc != -ENODATA;
	return asked;
}

/* 1 when a plugin is missing or stale on some OSD, or no OSD could be asked. */
static int survey_failed(const survey_t *s)
{
	unsigned i, k;
	int bad = 0;
	for (k = 0; k < 2; k++)
		for (i = 0; i < s->n; i++) {
			const char *st = osd_state(&s->v[k][i]);
			bad |= !strcmp(st, "stale") || !strcmp(st, "missing");
		}
	return bad || survey_asked(s) == 0;
}

static const char no_object_hint[] =
	"no object of the pool to call it on that this user may use: a user who may\n"
	"          write the pool makes the probe objects (`rckpt status` once, as client.admin),\n"
	"          or pass --job/--dataset to ask on the objects of one job or data set\n";

/* `status --format json`: the cluster, the pool, each plugin as the OSDs
 * answered (or why they did not), and each OSD. Destroys h. */
static int status_json(rckpt_t *h, const survey_t *s, const rckpt_connect_opts_t *conn)
{
	char fsid[37];
	json_t *o = json_object(), *ps = json_array(), *os = json_array();
	unsigned i, j, k;
	json_object_set_new(o, "cluster", rckpt_cluster_fsid(h, fsid, sizeof(fsid)) == 0 ? json_string(fsid)
										   : json_null());
	json_object_set_new(o, "pool", json_string(rckpt_pool_name(h)));
	json_object_set_new(o, "client", json_string(rckpt_version_string()));
	for (k = 0; k < 2; k++) {
		const rckpt_osd_plugin_t *a = pool_answer(s, k);
		const rckpt_plugin_info_t *pi = a ? &a->info : NULL;
		json_t *fm;
		char v[32];
		if (a == NULL || a->rc) {
			json_array_append_new(ps, json_pack("{s:s, s:s, s:s}", "name", plugins[k], "state",
							    a ? osd_state(a) : "unknown", "error",
							    a ? rckpt_plugin_strerror(a->rc) : "no OSD is up"));
			continue;
		}
		snprintf(v, sizeof(v), "%u.%u.%u", pi->major, pi->minor, pi->patch);
		fm = json_object();
		for (j = 0; j < pi->nformats; j++)
			json_object_set_new(fm, pi->formats[j].name,
					    json_pack("{s:i, s:i}", "min", (int)pi->formats[j].min_version, "max",
						      (int)pi->formats[j].max_version));
		json_array_append_new(ps, json_pack("{s:s, s:s, s:s, s:s, s:o}", "name", pi->name, "version", v,
						    "built_for", pi->built_for, "state", osd_state(a), "formats", fm));
	}
	json_object_set_new(o, "plugins", ps);
	for (i = 0; i < s->n; i++) {
		json_t *d = json_pack("{s:i}", "osd", s->v[0][i].osd);
		for (k = 0; k < 2; k++) {
			const rckpt_osd_plugin_t *p = &s->v[k][i];
			char ver[32];
			snprintf(ver, sizeof(ver), "%u.%u.%u", p->info.major, p->info.minor, p->info.patch);
			json_object_set_new(d, plugins[k],
					    p->rc ? json_pack("{s:s, s:s}", "state", osd_state(p), "error",
							      rckpt_plugin_strerror(p->rc))
						  : json_pack("{s:s, s:s, s:s}", "state", osd_state(p), "version", ver,
							      "built_for", p->info.built_for));
		}
		json_array_append_new(os, d);
	}
	json_object_set_new(o, "osds", os);
	rckpt_destroy(h);
	return cli_json_out(o, conn) || survey_failed(s);
}

/* The OSDs whose state for some plugin is one of the |-separated states:
 * " osd.N ..." after label, as a line; nothing when none. */
static void osds_in(const survey_t *s, const char *states, const char *label)
{
	unsigned i, k, said = 0;
	for (i = 0; i < s->n; i++)
		for (k = 0; k < 2; k++) {
			char st[16];
			snprintf(st, sizeof(st), "|%s|", osd_state(&s->v[k][i]));
			if (strstr(states, st)) {
				printf("%s osd.%d", said++ ? "" : label, s->v[k][i].osd);
				break;
			}
		}
	if (said)
		printf("\n");
}

int rckpt_cli_status(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	const char *job = NULL, *dataset = NULL;
	const cli_opt_t opts[] = { { "job", 0, &job, NULL }, { "dataset", 0, &dataset, NULL }, { NULL, 0, NULL, NULL } };
	char fsid[37], ns[256];
	survey_t s;
	rckpt_t *h;
	unsigned i, j, k;
	int first, failed;

	if (cli_wants_help(argc, argv)) {
		printf("usage: rckpt [options] status [--job JOB | --dataset NAME]\n\n"
		       "Connect to the cluster; ask every OSD that is up for the `version` of each\n"
		       "rckpt plugin (object class), on an object of the pool it serves; print the\n"
		       "cluster's fsid, the pool, each plugin's version and formats, a line per OSD,\n"
		       "and name the OSDs that lack a plugin or run another version.\n\n"
		       "The objects asked on are rckpt.probe.N, made empty once by a user who may\n"
		       "write the pool; a user who may only read uses them, or any other object of\n"
		       "the pool the OSD serves. No write right is needed.\n\n"
		       "  --job JOB       ask on the objects of job JOB only (a user whose caps are\n"
		       "                  limited to that job)\n"
		       "  --dataset NAME  ask on the objects of PCR data set NAME only\n\n"
		       "Exits 1 when a plugin is missing or another version on some OSD, or when no\n"
		       "OSD could be asked.\n");
		return 0;
	}
	if ((first = cli_parse_opts("status", opts, argc, argv)) < 0)
		return -first;
	if (first < argc)
		return cli_usage_errorf(NULL, "status: unexpected argument '%s'", argv[first]);
	if (job && dataset)
		return cli_usage_errorf(NULL, "status: %s", "--job and --dataset exclude each other");
	if ((job && cli_check_name("status", "--job", job)) || (dataset && cli_check_name("status", "--dataset", dataset)))
		return EXIT_USAGE;
	if (dataset)
		snprintf(ns, sizeof(ns), "pcr/%s", dataset);
	if ((h = cli_connect(conn, argv[0])) == NULL)
		return 1;
	if (survey(h, job ? job : dataset ? ns : NULL, &s)) {
		rckpt_destroy(h);
		return 1;
	}
	if ((job || dataset) && survey_asked(&s) == 0) {
		/* a namespace without objects: the name is wrong */
		cli_err("status", -ENOENT, "%s '%s' does not exist (no object of it in pool '%s')",
			job ? "job" : "data set", job ? job : dataset, rckpt_pool_name(h));
		survey_free(&s);
		rckpt_destroy(h);
		return 1;
	}
	if (cli_format(conn) != CLI_FORMAT_PLAIN) {
		failed = status_json(h, &s, conn);
		survey_free(&s);
		return failed;
	}
	if (rckpt_cluster_fsid(h, fsid, sizeof(fsid)) == 0)
		printf("cluster   %s\n", fsid);
	printf("pool      %s\n", rckpt_pool_name(h));
	for (k = 0; k < 2; k++) {
		const rckpt_osd_plugin_t *a = pool_answer(&s, k);
		const rckpt_plugin_info_t *pi = a ? &a->info : NULL;
		if (a == NULL) {
			printf("plugin    %-6s UNKNOWN: no OSD is up\n", plugins[k]);
			continue;
		}
		if (a->rc == -ENOENT || a->rc == -ENODATA) {
			printf("plugin    %-6s UNKNOWN: %s", plugins[k], no_object_hint);
			continue;
		}
		if (a->rc) {
			printf("plugin    %-6s MISSING: osd.%d: %s\n", plugins[k], a->osd, rckpt_plugin_strerror(a->rc));
			if (k == 0)
				printf("          (checkpoints still restore, folded in the client, slower; "
				       "saves, compaction and gc need the class)\n");
			continue;
		}
		printf("plugin    %-6s %u.%u.%u  built for Ceph %s  formats", pi->name, pi->major, pi->minor,
		       pi->patch, pi->built_for[0] ? pi->built_for : "(unknown)");
		for (j = 0; j < pi->nformats; j++)
			printf(" %s %u..%u", pi->formats[j].name, pi->formats[j].min_version,
			       pi->formats[j].max_version);
		if (!strcmp(osd_state(a), "stale"))
			printf("  (STALE: this client is %s)", rckpt_version_string());
		printf("\n");
	}
	for (i = 0; i < s.n; i++) {
		printf("osd.%-5d", s.v[0][i].osd);
		for (k = 0; k < 2; k++) {
			const rckpt_osd_plugin_t *p = &s.v[k][i];
			const char *st = osd_state(p);
			if (!strcmp(st, "ok"))
				printf("  %-6s %u.%u.%u", plugins[k], p->info.major, p->info.minor, p->info.patch);
			else if (!strcmp(st, "stale"))
				printf("  %-6s STALE", plugins[k]);
			else if (!strcmp(st, "no pg"))
				printf("  %-6s (serves no PG of the pool)", plugins[k]);
			else if (!strcmp(st, "unknown"))
				printf("  %-6s (no object to ask on)", plugins[k]);
			else
				printf("  %-6s %s", plugins[k], rckpt_strerror(p->rc));
		}
		printf("\n");
	}
	failed = survey_failed(&s);
	osds_in(&s, "|missing|stale|", "osds      lacking a plugin or running another version than the client's:");
	osds_in(&s, "|unknown|", "osds      not asked, no object this user may call on:");
	if (!failed && survey_asked(&s) == s.n)
		printf("osds      all %u up OSDs answer for both plugins at this version\n", s.n);
	else if (!failed)
		printf("osds      the %u OSDs asked answer for both plugins at this version\n", survey_asked(&s));
	survey_free(&s);
	rckpt_destroy(h);
	return failed;
}

/* ---- rckpt call ---- */

static void hexdump(const unsigned char *p, size_t n)
{
	size_t i, j;
	for (i = 0; i < n; i += 16) {
		printf("%08zx ", i);
		for (j = i; j < i + 16; j++)
			j < n ? printf(" %02x", p[j]) : printf("   ");
		printf("  |");
		for (j = i; j < i + 16 && j < n; j++)
			putchar(p[j] >= 0x20 && p[j] < 0x7f ? p[j] : '.');
		printf("|\n");
	}
}

int rckpt_cli_call(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	const char *oid = "rckpt.probe", *input = "";
	int raw = 0, first, n;
	const cli_opt_t opts[] = {
		{ "object", 'o', &oid, NULL },
		{ "input", 'i', &input, NULL },
		{ "raw", 'r', NULL, &raw },
		{ NULL, 0, NULL, NULL },
	};
	size_t cap = 1u << 20;
	unsigned char *out;
	rckpt_t *h;

	if (cli_wants_help(argc, argv)) {
		printf("usage: rckpt [options] call [--object OID] [--input TEXT] [--raw] CLASS METHOD\n\n"
		       "Call METHOD of object class CLASS on object OID (default rckpt.probe) of the\n"
		       "pool and print the reply as a hex dump (--raw: the bytes as they are).\n"
		       "A diagnostic: a missing class or method, or one the OSD may not load, is\n"
		       "reported as such.\n");
		return 0;
	}
	if ((first = cli_parse_opts("call", opts, argc, argv)) < 0)
		return -first;
	if (argc - first != 2)
		return cli_usage_errorf(NULL, "call: %s", argc - first < 2 ? "needs CLASS and METHOD"
								 : "too many arguments");
	if (*oid == '\0')
		return cli_usage_errorf(NULL, "call: %s", "--object must not be empty");
	if ((h = cli_connect(conn, argv[0])) == NULL)
		return 1;
	out = malloc(cap);
	if (out == NULL) {
		cli_err("call", -ENOMEM, "out of memory");
		rckpt_destroy(h);
		return 1;
	}
	n = rckpt_plugin_call(h, out, cap, oid, argv[first], argv[first + 1], input, strlen(input));
	if (n < 0)
		cli_err("call", n, "%s", rckpt_errmsg(h));
	else if (raw)
		fwrite(out, 1, (size_t)n, stdout);
	else if (cli_json_mode()) {
		static const char hx[] = "0123456789abcdef";
		char *hex = malloc(2 * (size_t)n + 1);
		int i;
		for (i = 0; hex && i < n; i++) {
			hex[2 * i] = hx[out[i] >> 4];
			hex[2 * i + 1] = hx[out[i] & 15];
		}
		if (hex)
			hex[2 * n] = '\0';
		n = hex ? 0 : -ENOMEM;
		if (hex && cli_json_out(json_pack("{s:s, s:s, s:s, s:i, s:s}", "object", oid, "class", argv[first],
						  "method", argv[first + 1], "bytes", (int)(strlen(hex) / 2), "hex", hex),
					conn))
			n = -EIO;
		free(hex);
	}
	else {
		printf("%d bytes\n", n);
		hexdump(out, (size_t)n);
	}
	free(out);
	rckpt_destroy(h);
	return n < 0 ? 1 : 0;
}

/* ---- main ---- */

static int parse_timeout(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v == 0 || v > 3600 || s[0] == '-')
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* The index of v in the NULL-ended names, or -1. */
static int choice(const char *v, const char *const *names)
{
	int k;
	for (k = 0; names[k]; k++)
		if (strcmp(v, names[k]) == 0)
			return k;
	return -1;
}

/* Applies global option `which` (its short letter) with value v: 0, or
 * the exit status of a usage error. */
static int set_global(cli_opts_t *opts, int which, const char *v)
{
	/* indexes are the CLI_FORMAT_* and RCKPT_READ_* values */
	static const char *const formats[] = { "plain", "json", "json-pretty", NULL },
				 *const reads[] = { "balance", "primary", "localize", NULL };
	rckpt_connect_opts_t *conn = &opts->conn;
	int k;
	switch (which) {
	case 'f':
		if ((k = choice(v, formats)) < 0)
			return cli_usage_errorf(NULL, "--format must be plain, json or json-pretty, not '%s'", v);
		opts->format = k;
		cli_set_format(k);
		break;
	case 'c': conn->conf_path = v; break;
	case 'u':
	case 'i': conn->user = v; break;
	case 'p': conn->pool = v; break;
	case 't':
		if (parse_timeout(v, &conn->timeout_s))
			return cli_usage_errorf(NULL, "--timeout must be 1..3600 seconds, not '%s'", v);
		break;
	case 'R':
		if ((k = choice(v, reads)) < 0)
			return cli_usage_errorf(NULL, "--read-from must be balance, primary or localize, not '%s'", v);
		conn->read_from = (unsigned)k;
		break;
	}
	return 0;
}

/* Whether arg is a global option that may follow the command: its letter
 * (and *v its value when given as --opt=value), or 0. */
static int global_after(const char *arg, const char **v)
{
	static const struct {
		const char *name;
		int which;
	} g[] = { { "--conf", 'c' }, { "--user", 'u' },	     { "--id", 'i' },	     { "--pool", 'p' },
		  { "-p", 'p' },     { "--timeout", 't' }, { "--read-from", 'R' }, { "--format", 'f' } };
	size_t k;
	*v = NULL;
	for (k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
		size_t n = strlen(g[k].name);
		if (strncmp(arg, g[k].name, n) == 0 && (arg[n] == '\0' || (arg[n] == '=' && arg[1] == '-'))) {
			if (arg[n] == '=')
				*v = arg + n + 1;
			return g[k].which;
		}
	}
	return 0;
}

/* The --format a run asks for, before the options are parsed, so that
 * an error among them is JSON too. */
static void prescan_format(int argc, char **argv)
{
	static const char *const formats[] = { "plain", "json", "json-pretty", NULL };
	int i, k;
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *v = NULL;
		if (strncmp(argv[i], "--format=", 9) == 0)
			v = argv[i] + 9;
		else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
			v = argv[i + 1];
		if (v && (k = choice(v, formats)) >= 0)
			cli_set_format(k);
	}
}

static int run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "conf", required_argument, NULL, 'c' },
		{ "user", required_argument, NULL, 'u' },
		{ "id", required_argument, NULL, 'i' },
		{ "pool", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "read-from", required_argument, NULL, 'R' },
		{ "version", no_argument, NULL, 'V' },
		{ "format", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct command {
		const char *name;
		rckpt_cli_fn fn;
	} commands[] = {
		{ "status", rckpt_cli_status }, { "call", rckpt_cli_call },
		{ "version", rckpt_cli_version }, { "codec", rckpt_cli_codec },
		{ "ckpt", rckpt_cli_ckpt },	{ "compact", rckpt_cli_compact },
		{ "pcr", rckpt_cli_pcr },	{ "bench", rckpt_cli_bench },
	};
	cli_opts_t opts = { RCKPT_CONNECT_OPTS_INIT, CLI_FORMAT_PLAIN };
	rckpt_connect_opts_t *const conn = &opts.conn;
	size_t k;
	const char *cmd;
	int c, rc;

	/* A process that resumes from a long pause (SIGSTOP, a frozen VM)
	 * finds connections its peers closed meanwhile; librados writing to
	 * one must get EPIPE and reconnect, not kill the tool. */
	signal(SIGPIPE, SIG_IGN);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:c:u:i:p:t:f:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
		case 'u':
		case 'i':
		case 'p':
		case 't':
		case 'R':
		case 'f':
			if ((rc = set_global(&opts, c, optarg)) != 0)
				return rc;
			break;
		case 'V':
			return rckpt_cli_version(1, argv, conn);
		case 'h':
			usage_main(stdout);
			return 0;
		case ':':
			return cli_usage_errorf(NULL, "option '%s' needs a value", argv[optind - 1]);
		default:
			return cli_usage_errorf(NULL, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_errorf(NULL, "%s", "missing command");
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	/* The global options after the command too (`rckpt ckpt ls --job J
	 * --pool P`), long forms and -p: the subcommands' own short options
	 * use -c, -i and -t. Taken out before the command parses the rest;
	 * "--" ends them. */
	{
		int i, k = 1;
		for (i = 1; i < argc; i++) {
			const char *a = argv[i], *v = NULL;
			int which;
			if (strcmp(a, "--") == 0) {
				while (i < argc)
					argv[k++] = argv[i++];
				break;
			}
			which = global_after(a, &v);
			if (which == 0) {
				argv[k++] = argv[i];
				continue;
			}
			if (v == NULL) {
				if (i + 1 >= argc)
					return cli_usage_errorf(NULL, "option '%s' needs a value", a);
				v = argv[++i];
			}
			if ((c = set_global(&opts, which, v)) != 0)
				return c;
		}
		argv[k] = NULL;
		argc = k;
	}
	for (k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
		if (strcmp(cmd, commands[k].name) == 0)
			return commands[k].fn(argc, argv, conn);
	if (strcmp(cmd, "help") == 0) {
		usage_main(stdout);
		return 0;
	}
	return cli_usage_errorf(NULL, "unknown command '%s'", cmd);
}

int main(int argc, char **argv)
{
	prescan_format(argc, argv);
	return cli_exit(run(argc, argv));
}
