/*
 * test_client.c — librckpt without a cluster: errors, handles, options.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rckpt.h"

/* The two version calls come from different places (the number from the
 * header's macros, the string from the build's project version and its
 * features): they must tell the same version, and the string the build's
 * CUDA. */
static void test_version(void **state)
{
	const unsigned v = rckpt_version_number();
	const char *s = rckpt_version_string();
	unsigned a, b, c;
	int n = 0;

	(void)state;
	assert_int_equal(sscanf(s, "%u.%u.%u%n", &a, &b, &c, &n), 3);
	assert_int_equal(a * 10000 + b * 100 + c, v);
	assert_true(b < 100 && c < 100);
	assert_int_equal(strstr(s + n, "cuda") != NULL, RCKPT_TEST_HAVE_CUDA);
}

static void test_strerror(void **state)
{
	(void)state;
	assert_string_equal(rckpt_strerror(0), "success");
	assert_string_equal(rckpt_strerror(-ENOENT), "No such file or directory");
	assert_string_equal(rckpt_strerror(-EOPNOTSUPP), "Operation not supported");
	assert_non_null(strstr(rckpt_strerror(RCKPT_EVERSION), "version"));
	assert_non_null(strstr(rckpt_strerror(RCKPT_ECHECKSUM), "checksum"));
	assert_string_equal(rckpt_strerror(-99999), "unknown error");
	assert_string_equal(rckpt_strerror(12345), "unknown error");
}

static void test_null_and_unconnected(void **state)
{
	rckpt_t *h;
	char fsid[64];
	rckpt_plugin_info_t pi;
	char buf[8];

	(void)state;
	rckpt_destroy(NULL);
	assert_string_equal(rckpt_errmsg(NULL), "");
	assert_int_equal(rckpt_create(&h), 0);
	assert_string_equal(rckpt_errmsg(h), "");
	assert_null(rckpt_pool_name(h));
	assert_int_equal(rckpt_cluster_fsid(h, fsid, sizeof(fsid)), -ENOTCONN);
	assert_non_null(strstr(rckpt_errmsg(h), "rckpt_cluster_fsid"));
	assert_int_equal(rckpt_plugin_version(h, &pi, "rckpt"), -ENOTCONN);
	assert_non_null(strstr(rckpt_errmsg(h), "not connected"));
	assert_int_equal(rckpt_plugin_call(h, buf, sizeof(buf), "o", "rckpt", "version", NULL, 0),
			 -ENOTCONN);
	rckpt_destroy(h);
}

static void test_connect_bad_options(void **state)
{
	rckpt_connect_opts_t o = RCKPT_CONNECT_OPTS_INIT;
	char longname[300];
	rckpt_t *h;

	(void)state;
	assert_int_equal(rckpt_create(&h), 0);
	assert_int_equal(rckpt_connect(h, NULL), -EINVAL);
	assert_non_null(strstr(rckpt_errmsg(h), "RCKPT_CONNECT_OPTS_INIT"));
	o.version = 999;
	assert_int_equal(rckpt_connect(h, &o), -EINVAL);
	o = (rckpt_connect_opts_t)RCKPT_CONNECT_OPTS_INIT;
	o.read_from = RCKPT_READ_LOCALIZE + 1;
	assert_int_equal(rckpt_connect(h, &o), -EINVAL);
	assert_non_null(strstr(rckpt_errmsg(h), "RCKPT_READ_"));
	o = (rckpt_connect_opts_t)RCKPT_CONNECT_OPTS_INIT;
	memset(longname, 'u', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	o.user = longname;
	assert_int_equal(rckpt_connect(h, &o), -EINVAL);
	assert_non_null(strstr(rckpt_errmsg(h), "too long"));
	rckpt_destroy(h);
}

/* A config file that does not exist fails at once, naming the file. */
static void test_connect_missing_conf(void **state)
{
	rckpt_connect_opts_t o = RCKPT_CONNECT_OPTS_INIT;
	rckpt_t *h;
	int rc;

	(void)state;
	o.conf_path = "/nonexistent/rckpt-test/ceph.conf";
	assert_int_equal(rckpt_create(&h), 0);
	rc = rckpt_connect(h, &o);
	assert_true(rc < 0);
	assert_non_null(strstr(rckpt_errmsg(h), "/nonexistent/rckpt-test/ceph.conf"));
	assert_null(rckpt_pool_name(h));
	rckpt_destroy(h);
}

static void test_gpu_info(void **state)
{
	rckpt_gpu_info_t g;

	(void)state;
	memset(&g, 0x5a, sizeof(g));
	assert_int_equal(rckpt_gpu_info(&g), 0);
	assert_int_equal(g.built_with_cuda, RCKPT_TEST_HAVE_CUDA);
	{ /* an independent count: the driver's device nodes */
		char path[32];
		int nodes = 0;
		for (int i = 0; i < 64; i++) {
			snprintf(path, sizeof(path), "/dev/nvidia%d", i);
			nodes += access(path, F_OK) == 0;
		}
		if (nodes == 0)
			assert_int_equal(g.device_count, 0);
		else
			assert_true(g.device_count <= nodes);
	}
	if (!g.built_with_cuda) {
		assert_int_equal(g.runtime_version, 0);
		assert_int_equal(g.device_count, 0);
	} else {
		assert_true(g.runtime_version >= 11000);
	}
	if (g.device_count == 0)
		assert_string_equal(g.device_name, "");
	assert_non_null(memchr(g.device_name, '\0', sizeof(g.device_name)));
}

/* Expected wall time per unit of work with checkpoints every t seconds of
 * work, each costing delta, and exponential failures of mean M with the
 * restart folded in (Daly 2006, eq. 7 without its constant factor): the
 * oracle rckpt_policy_interval's closed form approximates. */
static double daly_cost(double t, double delta, double m)
{
	return m * expm1((t + delta) / m) / t;
}

/* Its minimizer by golden-section search, independent of the closed form. */
static double daly_argmin(double delta, double m)
{
	const double g = (sqrt(5.0) - 1) / 2;
	double lo = 1e-3, hi = 50 * m;
	int i;
	for (i = 0; i < 200; i++) {
		double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
		if (daly_cost(a, delta, m) < daly_cost(b, delta, m))
			hi = b;
		else
			lo = a;
	}
	return (lo + hi) / 2;
}

static void test_policy_interval(void **state)
{
	static const double cases[][3] = { /* delta, mttp, restart */
		{ 1, 1e6, 0 }, { 10, 3000, 600 }, { 60, 3600, 0 }, { 300, 3000, 600 }, { 30, 600, 0 },
	};
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const double d = cases[i][0], m = cases[i][1] + cases[i][2];
		const double t = rckpt_policy_interval(d, cases[i][1], cases[i][2]);
		const double best = daly_argmin(d, m);
		/* within 1% of the true optimum, and as good as it to 1e-4 */
		assert_true(fabs(t / best - 1) < 0.01);
		assert_true(daly_cost(t, d, m) / daly_cost(best, d, m) - 1 < 1e-4);
	}
	/* Young's first-order form is the leading term: close for small delta */
	assert_true(fabs(rckpt_policy_interval(1, 1e6, 0) / sqrt(2e6) - 1) < 1e-3);
	/* a save as long as two lifetimes: checkpoint once per lifetime */
	assert_true(rckpt_policy_interval(5000, 2000, 500) == 2500);
	/* nothing to plan without a save time or a lifetime */
	assert_true(rckpt_policy_interval(0, 3600, 0) == 0);
	assert_true(rckpt_policy_interval(-1, 3600, 0) == 0);
	assert_true(rckpt_policy_interval(NAN, 3600, 0) == 0);
	assert_true(rckpt_policy_interval(10, 0, 0) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_policy_interval),
		cmocka_unit_test(test_strerror),
		cmocka_unit_test(test_null_and_unconnected),
		cmocka_unit_test(test_connect_bad_options),
		cmocka_unit_test(test_connect_missing_conf),
		cmocka_unit_test(test_gpu_info),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
