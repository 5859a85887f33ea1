/*
 * fuzz_dump.c — libFuzzer target: restores from a `rados export` dump
 * (client/lib/rckpt_io_dump.c, `rckpt ckpt export --from-dump`): the dump's
 * index, then every job in it listed, opened and its steps restored, which
 * runs the rckpt class's read methods in the client on whatever the dump's
 * objects hold. Whatever the bytes, nothing may crash, leak or read out of
 * bounds; a step that restores has tensors of the sizes its manifest says.
 * Built with a sanitizer (libFuzzer, or CI's ASan replay), it also holds
 * the memory to its ceiling: indexing the dump and listing its jobs at
 * most 4 bytes per byte of it (plus 1 MiB), the whole input at most twice what
 * the decoders' ratio bound allows (RCKPT_DECODE_RATIO_MAX) plus 16 MiB.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rckpt.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WITH_HOOKS 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define WITH_HOOKS 1
#endif

#ifdef WITH_HOOKS
/* the sanitizer runtime's (gcc's libasan and clang's export them; only
 * clang ships their header) */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
					      void (*free_hook)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);

/* live and peak bytes of the heap, as the sanitizer's allocator sees them */
static size_t live, peak;

static void on_malloc(const volatile void *p, size_t n)
{
	(void)p;
	live += n;
	if (live > peak)
		peak = live;
}

static void on_free(const volatile void *p)
{
	live -= __sanitizer_get_allocated_size(p);
}

static void hooks(void)
{
	static int done;
	if (!done && __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free))
		done = 1;
	peak = live;
}

static void ceiling(size_t base, size_t max, const char *what)
{
	if (peak - base > max) {
		fprintf(stderr, "fuzz_dump: %s took %zu bytes, over its ceiling of %zu\n", what, peak - base, max);
		abort();
	}
}
#else
static void hooks(void)
{
}
#define ceiling(base, max, what) ((void)(base), (void)(max))
static size_t live;
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void restore_some(rckpt_t *h, const char *name)
{
	rckpt_job_opts_t o = RCKPT_JOB_OPTS_INIT;
	rckpt_step_info_t si[4];
	rckpt_job_t *j = NULL;
	unsigned n = 0, k, i;
	int more = 0;

	if (rckpt_job_open(h, &j, name, &o))
		return;
	if (rckpt_job_steps(j, RCKPT_LATEST, si, 4, &n, &more) == 0)
		for (k = 0; k < n; k++) {
			rckpt_restored_t *r = NULL;
			if (rckpt_job_restore(j, si[k].step, &r, NULL))
				continue;
			for (i = 0; i < rckpt_restored_count(r); i++) {
				rckpt_tensor_t t;
				uint64_t e = 1;
				unsigned d;
				float *buf;
				if (rckpt_restored_tensor(r, i, &t))
					abort();
				for (d = 0; d < t.ndim; d++)
					e *= t.shape[d];
				if (e > ((uint64_t)1 << 24))
					continue;
				if ((buf = malloc(e ? (size_t)e * 4 : 4)) == NULL)
					continue;
				if (rckpt_restored_read(r, i, buf, (size_t)e * 4) == -ERANGE)
					abort(); /* the room its shape says is enough */
				free(buf);
			}
			rckpt_restored_free(r);
		}
	rckpt_job_close(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], **names = NULL;
	unsigned n = 0, i;
	rckpt_t *h = NULL;
	int fd = memfd_create("dump", 0);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	hooks();
	{
		const size_t base = live;
		if (rckpt_create(&h) == 0 && rckpt_open_dump(h, path) == 0 && rckpt_jobs(h, &names, &n) == 0) {
			ceiling(base, 4 * size + ((size_t)1 << 20), "indexing the dump");
			for (i = 0; i < n && i < 4; i++)
				restore_some(h, names[i]);
			rckpt_jobs_free(names, n);
			ceiling(base, 8192 * size + ((size_t)16 << 20), "restoring from the dump");
		}
	}
	rckpt_destroy(h);
	close(fd);
	return 0;
}
