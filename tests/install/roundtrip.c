/*
 * roundtrip.c — a program built against an installed librckpt, as a
 * trainer author builds one: `pkg-config --cflags --libs rckpt` or CMake's
 * find_package(rckpt) (tests/install/test_installed.sh). Saves two steps
 * of a small model into a new job of the cluster named by $CEPH_CONF,
 * restores the latest, checks it within the codec's error, deletes the
 * job. Exit 0 when all holds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rckpt.h>

#define N 4096

static int fail(rckpt_t *h, const char *what)
{
	fprintf(stderr, "roundtrip: %s: %s\n", what, rckpt_errmsg(h));
	return 1;
}

int main(void)
{
	rckpt_connect_opts_t co = RCKPT_CONNECT_OPTS_INIT;
	rckpt_job_opts_t jo = RCKPT_JOB_OPTS_INIT;
	static float w[N], back[N];
	rckpt_tensor_t t = { "w", RCKPT_F32, 1, { N }, w };
	rckpt_restored_t *r = NULL;
	rckpt_job_t *j = NULL;
	rckpt_t *h = NULL;
	char job[64];
	double num = 0, den = 0;
	unsigned i, s;

	snprintf(job, sizeof(job), "installed-%ld", (long)getpid());
	if (rckpt_create(&h) || rckpt_connect(h, &co))
		return fail(h, "connect");
	jo.writer = 1;
	if (rckpt_job_open(h, &j, job, &jo))
		return fail(h, "open");
	for (s = 1; s <= 2; s++) {
		for (i = 0; i < N; i++)
			w[i] = (float)(0.05 * sin(0.01 * i + 0.1 * s));
		if (rckpt_job_save(j, s, &t, 1, NULL, 0, NULL))
			return fail(h, "save");
	}
	if (rckpt_job_restore(j, RCKPT_LATEST, &r, NULL) || rckpt_restored_read(r, 0, back, sizeof(back)))
		return fail(h, "restore");
	for (i = 0; i < N; i++) {
		num += (back[i] - w[i]) * (double)(back[i] - w[i]);
		den += w[i] * (double)w[i];
	}
	rckpt_restored_free(r);
	rckpt_job_close(j);
	if (rckpt_job_delete(h, job))
		return fail(h, "delete");
	printf("roundtrip: librckpt %s, job %s: 2 steps saved, the latest restored, relative error %.2e\n",
	       rckpt_version_string(), job, sqrt(num / den));
	rckpt_destroy(h);
	return sqrt(num / den) < 0.05 ? 0 : 1;
}
