/*
 * cli_status.c — `rckpt status`: which rckpt plugins (object classes) each
 * OSD that is up runs, in which version, asked on an object it serves.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"


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
