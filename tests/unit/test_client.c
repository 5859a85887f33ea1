/*
 * test_client.c — librckpt without a cluster: errors, handles, options.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_strerror),
		cmocka_unit_test(test_null_and_unconnected),
		cmocka_unit_test(test_connect_bad_options),
		cmocka_unit_test(test_connect_missing_conf),
		cmocka_unit_test(test_gpu_info),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
