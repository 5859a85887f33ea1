/*
 * test_cluster_plugins.c — the plugins as loaded by a real OSD, called
 * through librados. Needs a cluster: CEPH_CONF names its config (./dev.sh
 * test starts one). Without one each test skips, saying so, unless
 * RCKPT_REQUIRE_CLUSTER=1, when the missing cluster is a failure.
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
#include <time.h>

#include <cmocka.h>

#include "test_skip.h"
#include <rados/librados.h>

#include "rckpt.h"
#include "rckpt_clock.h" /* rckpt_now_s */

static int group_setup(void **state)
{
	rckpt_connect_opts_t o = RCKPT_CONNECT_OPTS_INIT;
	const char *conf = getenv("CEPH_CONF");
	rckpt_t *h;

	*state = NULL;
	if (conf == NULL || *conf == '\0') { /* each test skips, or fails where required */
		print_message("no cluster: CEPH_CONF is not set (./dev.sh test starts one)\n");
		return 0;
	}
	o.timeout_s = 20;
	if (rckpt_create(&h))
		return -1;
	if (rckpt_connect(h, &o)) {
		print_message("cannot connect: %s\n", rckpt_errmsg(h));
		rckpt_destroy(h);
		return -1;
	}
	*state = h;
	return 0;
}

static int group_teardown(void **state)
{
	rckpt_destroy(*state);
	return 0;
}

#define NEED_CLUSTER(h)                                                 \
	do {                                                            \
		if ((h) == NULL) {                                      \
			TEST_SKIP(TEST_NEED_CLUSTER, "no cluster (CEPH_CONF is not set)"); \
		}                                                       \
	} while (0)

static void check_plugin(rckpt_t *h, const char *name)
{
	rckpt_plugin_info_t pi;

	assert_int_equal(rckpt_plugin_version(h, &pi, name), 0);
	assert_string_equal(pi.name, name);
	assert_int_equal(pi.major * 10000 + pi.minor * 100 + pi.patch, rckpt_version_number());
	assert_true(strlen(pi.built_for) > 0);
	assert_true(pi.nformats >= 1);
	assert_string_equal(pi.formats[0].name, "cls-wire");
	assert_int_equal(pi.formats[0].min_version, 1);
}

static void test_rckpt_plugin_answers(void **state)
{
	NEED_CLUSTER(*state);
	check_plugin(*state, "rckpt");
}

static void test_pcr_plugin_answers(void **state)
{
	NEED_CLUSTER(*state);
	check_plugin(*state, "pcr");
}

/* The probe object the version query runs on is created when missing. */
static void test_probe_object_recreated(void **state)
{
	rckpt_plugin_info_t pi;
	rados_t c;
	rados_ioctx_t io;
	uint64_t size = 99;

	NEED_CLUSTER(*state);
	assert_int_equal(rados_create(&c, NULL), 0);
	assert_int_equal(rados_conf_read_file(c, getenv("CEPH_CONF")), 0);
	assert_int_equal(rados_connect(c), 0);
	assert_int_equal(rados_ioctx_create(c, rckpt_pool_name(*state), &io), 0);
	rados_remove(io, "rckpt.probe");
	assert_int_equal(rados_stat(io, "rckpt.probe", &size, NULL), -ENOENT);
	assert_int_equal(rckpt_plugin_version(*state, &pi, "rckpt"), 0);
	assert_string_equal(pi.name, "rckpt");
	assert_int_equal(rados_stat(io, "rckpt.probe", &size, NULL), 0);
	assert_int_equal(size, 0);
	rados_ioctx_destroy(io);
	rados_shutdown(c);
}

static void test_fsid(void **state)
{
	char fsid[37];
	NEED_CLUSTER(*state);
	assert_int_equal(rckpt_cluster_fsid(*state, fsid, sizeof(fsid)), 0);
	assert_int_equal(strlen(fsid), 36);
	assert_int_equal(fsid[8], '-');
	assert_int_equal(rckpt_cluster_fsid(*state, fsid, 36), -ERANGE);
}

/* A method the class does not have: -EOPNOTSUPP (a refusal, not a hang
 * into the client's timeout, which would be -ETIMEDOUT), explained. How
 * fast is not a test's to judge on shared cores. */
static void test_missing_method(void **state)
{
	rckpt_t *h = *state;
	char out[64];

	NEED_CLUSTER(h);
	assert_int_equal(rckpt_plugin_call(h, out, sizeof(out), "rckpt.probe", "rckpt", "no_such_method",
					   NULL, 0),
			 -EOPNOTSUPP);
	assert_non_null(strstr(rckpt_errmsg(h), "rckpt.no_such_method"));
	assert_non_null(strstr(rckpt_errmsg(h), "no such class or method"));
}

/* A class the OSD has not loaded: refused (-EPERM), not a hang into the
 * client's timeout (-ETIMEDOUT). */
static void test_missing_class(void **state)
{
	rckpt_t *h = *state;
	rckpt_plugin_info_t pi;

	NEED_CLUSTER(h);
	assert_int_equal(rckpt_plugin_version(h, &pi, "no_such_class"), -EPERM);
	assert_non_null(strstr(rckpt_errmsg(h), "osd class load list"));
	assert_string_equal(pi.name, "");
}

/* The OSD passes the plugin's own error code through. */
static void test_version_with_input_is_einval(void **state)
{
	rckpt_t *h = *state;
	char out[64];

	NEED_CLUSTER(h);
	assert_int_equal(rckpt_plugin_call(h, out, sizeof(out), "rckpt.probe", "pcr", "version", "x", 1),
			 -EINVAL);
}

static void test_reply_too_big_for_buffer(void **state)
{
	rckpt_t *h = *state;
	char out[8];

	NEED_CLUSTER(h);
	assert_int_equal(rckpt_plugin_call(h, out, sizeof(out), "rckpt.probe", "rckpt", "version",
					   NULL, 0),
			 -ERANGE);
}

static void test_missing_pool(void **state)
{
	rckpt_connect_opts_t o = RCKPT_CONNECT_OPTS_INIT;
	rckpt_t *h;

	NEED_CLUSTER(*state);
	o.pool = "rckpt-no-such-pool";
	assert_int_equal(rckpt_create(&h), 0);
	assert_int_equal(rckpt_connect(h, &o), -ENOENT);
	assert_non_null(strstr(rckpt_errmsg(h), "pool 'rckpt-no-such-pool' does not exist"));
	rckpt_destroy(h);
}

/* A user the cluster does not know is refused: an error that names the
 * user, within the connect timeout (the liveness bound: 60 s, generous for
 * 2 shared cores under sanitizers). */
static void test_unknown_user(void **state)
{
	rckpt_connect_opts_t o = RCKPT_CONNECT_OPTS_INIT;
	rckpt_t *h;
	double t0;

	NEED_CLUSTER(*state);
	o.user = "client.rckpt-nobody";
	o.timeout_s = 60;
	assert_int_equal(rckpt_create(&h), 0);
	t0 = rckpt_now_s();
	assert_true(rckpt_connect(h, &o) < 0);
	assert_true(rckpt_now_s() - t0 < 61.0);
	assert_non_null(strstr(rckpt_errmsg(h), "client.rckpt-nobody"));
	rckpt_destroy(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rckpt_plugin_answers),
		cmocka_unit_test(test_pcr_plugin_answers),
		cmocka_unit_test(test_probe_object_recreated),
		cmocka_unit_test(test_fsid),
		cmocka_unit_test(test_missing_method),
		cmocka_unit_test(test_missing_class),
		cmocka_unit_test(test_version_with_input_is_einval),
		cmocka_unit_test(test_reply_too_big_for_buffer),
		cmocka_unit_test(test_missing_pool),
		cmocka_unit_test(test_unknown_user),
	};
	return test_exit(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
